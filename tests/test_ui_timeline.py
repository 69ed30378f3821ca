"""Timeline rows (the HTML report's waterfall) come from the telemetry span builder,
in tree order."""

from __future__ import annotations

from pathlib import Path

from claudetrace.cassette import read_cassette
from claudetrace.store import info_from_header
from claudetrace.telemetry import build_spans
from claudetrace.telemetry.latency import latencies
from claudetrace.ui.timeline import timeline_rows

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


def test_latencies_by_category() -> None:
    samples = latencies(spans_of("permission_allow")[0])
    assert len(samples["tool"]) == 1 and len(samples["permission"]) == 1
    assert all(v >= 0 for values in samples.values() for v in values)
