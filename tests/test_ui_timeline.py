"""Timeline rows come from the telemetry span builder, in tree order."""

from __future__ import annotations

from pathlib import Path

from claudetrace.cassette import read_cassette
from claudetrace.store import info_from_header
from claudetrace.telemetry import build_spans
from claudetrace.ui.timeline import LazyTimeline, latencies, timeline_rows, waterfall_figure

CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"


def spans_of(name: str) -> tuple[list, int]:
    cassette = read_cassette(CASSETTES / f"{name}.ndjson")
    info = info_from_header(cassette.header)
    return build_spans(info, cassette.events), info.started_ns


def test_rows_follow_the_span_tree() -> None:
    spans, started = spans_of("permission_allow")
    rows = timeline_rows(spans, started)
    assert len(rows) == len(spans)
    assert (rows[0].category, rows[0].depth) == ("session", 0)
    cats = [(r.depth, r.category) for r in rows]
    assert (1, "turn") in cats and (2, "model") in cats and (2, "tool") in cats
    tool_at = next(i for i, r in enumerate(rows) if r.category == "tool")
    assert rows[tool_at + 1].category == "permission" and rows[tool_at + 1].depth == 3
    assert all(r.end_s >= r.start_s >= 0 for r in rows)
    assert rows[tool_at].details["gen_ai.tool.name"] == "Bash"


def test_categories_for_hooks_mcp_and_control() -> None:
    cats = {r.category for r in timeline_rows(*spans_of("hooks"))}
    assert {"hook", "tool", "model", "turn", "control"} <= cats
    assert "mcp" in {r.category for r in timeline_rows(*spans_of("mcp_tool"))}


def test_figure_has_one_bar_per_row_and_escapes_hover_text() -> None:
    spans, started = spans_of("hooks")
    rows = timeline_rows(spans, started)
    rows[1].details["evil"] = "<script>alert(1)</script>"
    fig = waterfall_figure(rows)
    assert sum(len(trace.y) for trace in fig.data) == len(rows)
    hover = " ".join(h for trace in fig.data for h in trace.hovertext)
    assert "<script>" not in hover and "&lt;script&gt;" in hover


def test_latencies_by_category() -> None:
    samples = latencies(spans_of("permission_allow")[0])
    assert len(samples["tool"]) == 1 and len(samples["permission"]) == 1
    assert all(v >= 0 for values in samples.values() for v in values)


def test_a_lazy_timeline_reads_only_as_far_as_the_rows_asked_for() -> None:
    cassette = read_cassette(CASSETTES / "multi_turn.ndjson")
    info = info_from_header(cassette.header)
    reads: list[tuple[int, int]] = []

    def read(start_seq: int, limit: int) -> list:
        reads.append((start_seq, limit))
        return [e for e in cassette.events if e.seq >= start_seq][:limit]

    timeline = LazyTimeline(info, read, step=10)
    first = timeline.rows(1)
    assert first and not timeline.complete
    assert timeline.lines_read < len(cassette.events) and reads[0] == (0, 10)
    assert all(r.category != "session" for r in first)  # the session's bar ends last
    every = timeline.rows(10_000)
    assert timeline.complete and timeline.lines_read == len(cassette.events)
    assert [(r.label, r.depth, r.start_s, r.end_s) for r in every] == [
        (r.label, r.depth, r.start_s, r.end_s)
        for r in timeline_rows(build_spans(info, cassette.events), info.started_ns)]
    assert timeline.rows(10_000) is every  # nothing read again
    assert len(reads) == -(-len(cassette.events) // 10) + (len(cassette.events) % 10 == 0)


def test_a_failed_tool_is_a_red_bar_not_a_green_one() -> None:
    rows = timeline_rows(*spans_of("permission_deny"))
    fig = waterfall_figure(rows)
    tools = next(trace for trace in fig.data if trace.name == "tool")
    failed = [r.status == "error" for r in rows if r.category == "tool"]
    assert any(failed)
    assert [c == "#d62728" for c in tools.marker.color] == failed
