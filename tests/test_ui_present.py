"""The presentation model (span tree, call figures, header) and safe Markdown, without a browser."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from claudetrace.cassette import read_cassette
from claudetrace.model import Session, fold
from claudetrace.model.events import Event
from claudetrace.pricing import dollars
from claudetrace.ui.markdown import markdown_tree, tree_html, tree_text
from claudetrace.ui.present import (
    call_figures,
    clock,
    header,
    offset,
    session_liveness,
    trace_rows,
    trace_tree,
    walk,
)

FIXTURES = Path(__file__).parent / "fixtures" / "cassettes"


def session_of(name: str) -> Session:
    return fold(read_cassette(FIXTURES / f"{name}.ndjson").events)


def shape(name: str) -> list[tuple[int, str, str, str]]:
    tree = trace_tree(session_of(name), end_ns=10**9)
    return [(depth, node.kind, node.label, node.status) for depth, node in walk(tree)]


def test_the_tree_nests_a_subagent_under_the_tool_call_that_ran_it() -> None:
    assert shape("subagent") == [
        (0, "agent", "claude-code", "ok"),
        (1, "turn", "turn 1", "ok"),
        (2, "model", "claude-opus-5-5", "ok"),
        (2, "tool", "Agent", "ok"),
        (3, "subagent", "counter", "ok"),
        (4, "model", "claude-opus-5-5", "ok"),
        (2, "model", "claude-opus-5-5", "ok"),
    ]


def test_a_denied_tool_is_an_error_node_and_the_figures_add_up_to_the_clis() -> None:
    session = session_of("permission_deny")
    tree = trace_tree(session, end_ns=10**9)
    nodes = [node for _, node in walk(tree)]
    tool = next(n for n in nodes if n.kind == "tool")
    assert (tool.status, tool.detail) == ("error", "error · permission deny")
    turn = tree.children[0]
    assert turn.usage == session.usage
    calls = [n for n in nodes if n.kind == "model"]
    assert sum(n.cost_usd or 0 for n in calls) == pytest.approx(session.cost_usd)
    assert tree.cost_usd == pytest.approx(session.cost_usd)


def test_streamed_calls_have_a_time_to_first_token_and_a_stop_reason() -> None:
    session = session_of("streamed_tools")
    figures = list(call_figures(session).values())
    assert [f.call.stop_reason for f in figures] == ["tool_use", "end_turn"]
    for fig in figures:
        assert fig.ttft_ns is not None and 0 < fig.ttft_ns <= fig.latency_ns
        assert fig.request_ns <= fig.call.start_ns
    # The second call was asked when the tool's result went back.
    tool = next(iter(session.tools.values()))
    assert figures[1].request_ns == tool.end_ns
    assert "first token" in figures[0].summary() and "tool_use" in figures[0].summary()


def without_cli_cost(name: str) -> Session:
    """A recording whose results say nothing of cost (as a transcript's may not)."""
    events = []
    for event in read_cassette(FIXTURES / f"{name}.ndjson").events:
        if event.direction == "out" and event.fields.type == "result":
            obj = json.loads(event.data)
            obj.pop("total_cost_usd", None)
            for entry in (obj.get("modelUsage") or {}).values():
                entry.pop("costUSD", None)
            event = Event(event.seq, event.direction, event.t_ns, json.dumps(obj).encode())
        events.append(event)
    return fold(events)


@pytest.mark.parametrize("name", ["plain", "subagent", "permission_deny"])
def test_cost_not_reported_is_estimated_or_unknown_never_zero(name: str) -> None:
    session = without_cli_cost(name)
    assert not session.cli_cost_reported
    unknown = trace_tree(session, end_ns=10**9, estimate=False)
    assert [node.cost_usd for _, node in walk(unknown) if node.cost_usd is not None] == []
    assert "$0.0000" not in {row.cost for row in trace_rows(unknown, 0)}
    priced = trace_tree(session, end_ns=10**9)
    assert priced.cost_usd == pytest.approx(session.cost().usd)
    assert "cost estimated" in priced.detail
    figures = call_figures(session)
    assert {f.cost_source for f in figures.values()} == {"estimate"}
    assert all("(estimate)" in f.summary() for f in figures.values() if f.call.observed)


def test_a_failed_result_turn_is_red_even_when_its_subtype_says_success() -> None:
    session = session_of("plain")
    session.turns[-1].is_error = True  # what a result with is_error: true makes
    tree = trace_tree(session, end_ns=10**9, status="error")
    assert tree.status == "error" and tree.children[-1].status == "error"


def rec(**kw: Any) -> Any:
    base: dict[str, Any] = dict(
        status="running", started_ns=1_764_300_000_000_000_000, ended_ns=None, exit_code=None,
        signal=None, error=None, claude_code_version=None, cost_usd=0.0, duration_ns=None,
        source="proxy", model=None, result_subtype=None, cost=None, cost_origin="unknown",
        model_calls=1, turns=1, models={}, argv=["claude"], tool_calls=0, tool_errors=0,
        input_tokens=0, output_tokens=0, cache_read_tokens=0, cache_creation_tokens=0, byte_count=0,
        event_count=0,
    )
    base.update(kw)
    return SimpleNamespace(**base)


def test_a_running_session_says_not_yet_instead_of_none_or_zero() -> None:
    events = read_cassette(FIXTURES / "permission_allow.ndjson").events
    session = Session()
    for event in events:
        session.add(event)
        if event.fields.type == "control_request" and event.fields.subtype == "can_use_tool":
            break
    head = header(rec(), session)
    assert (head.cli, head.exit) == ("not yet", "not yet")
    # Its call so far, priced by the table as its prompt's line says it (never $0).
    assert head.cost == f"{dollars(session.cost().usd)} (estimate)"
    assert head.liveness is not None
    assert head.liveness.label == "awaiting approval · can_use_tool Bash"
    assert head.last_event.endswith(f"UTC ({offset(session.last_ns)})")
    done = header(rec(status="ok", ended_ns=1, exit_code=0, claude_code_version="2.1",
                      cost_usd=0.5, cost=0.5, cost_origin="cli"), fold(events))
    assert (done.cli, done.exit, done.cost) == ("2.1", "0", "$0.5000")
    assert done.liveness is not None and done.liveness.state == "disconnected"
    imported = header(rec(status="ok", ended_ns=1, source="transcript", cost=None,
                          cost_origin="unknown"), None)
    assert (imported.exit, imported.cost) == ("unknown", "unknown (not in this file)")
    # A transcript saw no process: what its lines say (it may grow again), not disconnected.
    transcript = rec(status="ok", ended_ns=1, source="transcript")
    assert session_liveness(transcript, fold(events)).state == "idle"
    assert session_liveness(rec(status="ok", ended_ns=1), fold(events)).state == "disconnected"


def test_wall_clock_and_relative_times() -> None:
    assert clock(1_764_300_000_000_000_000, 1_500_000_000) == "03:20:01.500"
    assert offset(532_000_000) == "+0.532s"
    assert offset(725 * 10**9) == "+12m05s"
    assert offset(1_756_860_751_217 * 10**6).startswith("+") and len(offset(10**18)) <= 8


def test_markdown_is_drawn_from_a_tree_of_texts_and_raw_html_stays_text() -> None:
    text = (
        "**Done**: see the table.\n\n| file | lines |\n|---|---|\n| a.py | 3 |\n\n"
        "- <script>alert(1)</script>\n- [x](javascript:alert(1)) [docs](https://e.org)\n\n"
        "```\n<img src=x onerror=alert(1)>\n```\n![p](https://tracker.example/p.png)"
    )
    tree = markdown_tree(text)
    assert tree is not None
    assert tree[0] == ["p", ["strong", "Done"], ": see the table."]
    assert tree[1][0] == "table"
    html = tree_html(tree)
    assert "<script" not in html and "<img" not in html and "javascript:" not in html.split(
        "href")[-1]
    assert "&lt;script&gt;" in html and "&lt;img src=x" in html
    assert '<a href="https://e.org"' in html and "tracker.example" not in html
    assert "[image: p]" in tree_text(tree)
    assert markdown_tree("A plain answer.") is None


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.ndjson")), ids=lambda p: p.stem)
def test_every_recording_makes_a_tree_whose_calls_add_up(path: Path) -> None:
    session = fold(read_cassette(path).events)
    tree = trace_tree(session, end_ns=session.last_ns)
    nodes = [node for _, node in walk(tree)]
    calls = [n for n in nodes if n.kind == "model"]
    assert len(calls) == len(session.calls)
    total = tree.usage
    assert total is not None and total == session.usage
    for node in nodes:
        assert node.duration_ns is None or node.duration_ns >= 0
    for fig in call_figures(session).values():
        assert fig.latency_ns >= 0 and (fig.ttft_ns is None or fig.ttft_ns >= 0)


def test_cost_text_says_its_source_and_never_zero_for_unknown() -> None:
    from claudetrace.ui.present import cost_text

    assert cost_text(rec()) == "not yet reported"
    # Stopped before its first result (its proxy killed): nothing will report it now.
    assert cost_text(rec(status="incomplete", model_calls=0)) == "— (no model calls)"
    assert cost_text(rec(status="incomplete")) == "unknown"
    assert cost_text(rec(status="ok", ended_ns=1, cost_usd=0.5, cost=0.5, cost_origin="cli")
                     ) == "$0.5000"
    assert cost_text(rec(status="ok", ended_ns=1, cost_usd=0.5, cost=0.5,
                         cost_origin="estimate")) == "$0.5000 (estimate)"
    assert cost_text(rec(status="ok", ended_ns=1, cost=None, cost_origin="unknown")) == "unknown"
    # One wording per meaning, as show and the HTML report say it (facts.cost_text):
    # a model without a price, no model call at all, a cost of zero.
    assert cost_text(rec(status="ok", ended_ns=1, models={"m-9": {"cost_usd": None}})
                     ) == "unknown (no price for m-9)"
    assert cost_text(rec(status="ok", ended_ns=1, model_calls=0)) == "— (no model calls)"
    assert cost_text(rec(status="ok", ended_ns=1, cost=0.0, cost_origin="cli")) == "$0.0000"


def test_the_pages_trace_table_escapes_recorded_names() -> None:
    from claudetrace.ui.present import TraceRow
    from claudetrace.ui.views.trace import _trace_html

    hostile = '<img src=x onerror=alert(1)>"'
    row = TraceRow(2, "tool", hostile, "error", 0, 10, "00:00:00.000", "+0.000s", "10 ms",
                   "", "", f"error · {hostile}")
    html = _trace_html([row])
    assert "<img" not in html and html.count("&lt;img src=x onerror=alert(1)&gt;&quot;") == 2
    assert 'data-status="error"' in html


def test_a_turns_last_call_takes_its_results_stop_reason_when_it_said_none() -> None:
    session = session_of("plain")  # partial messages off: the assistant line says null
    (fig,) = call_figures(session).values()
    assert fig.call.stop_reason is None and fig.stop_reason == "end_turn"
    assert session.turns[0].stop_reason == "end_turn"
    assert fig.summary().endswith("end_turn")


def test_a_lane_no_tool_call_names_is_a_subagent_node_and_counts_in_its_turn() -> None:
    """The shop transcript's workflow agent (lane ``agent-wf01``, no Task or Agent call
    names it) made one Haiku call: it has a node, and its turn's and the session's
    tokens add up to what the CLI counted (it was in no node, its tokens nowhere)."""
    from claudetrace.formats.claude_code import read_transcript

    shop = Path(__file__).parent / "fixtures" / "transcripts" / "projects" / "-home-dev-shop"
    session = fold(read_transcript(shop / "7c1e2a90-3b4d-4e5f-8a6b-1c2d3e4f5a60.jsonl").events)
    tree = trace_tree(session, end_ns=10**12)
    turn = tree.children[0]
    lane = next(n for n in turn.children if n.label == "agent-wf01")
    assert (lane.kind, lane.detail) == ("subagent", "no tool call names it")
    assert [(n.kind, n.label) for n in lane.children] == [
        ("model", "claude-haiku-4-5-20251001")]
    assert [n.start_ns for n in turn.children] == sorted(n.start_ns for n in turn.children)
    assert tree.usage is not None and turn.usage is not None
    assert tree.usage.input == session.usage.input
    assert turn.usage.input == sum(c.usage.input for c in session.turns[0].calls)


def test_one_wording_for_a_time_a_start_and_a_difference() -> None:
    # The pages said 0.53 s and 66.20 s where tail and the report's facts said
    # 532 ms and 66.2 s; the Diff page wrote "+0.0012 $".
    from claudetrace.formats.facts import latency
    from claudetrace.ui.present import duration, duration_s, moment, money, signed

    for seconds, said in ((0.532, "532 ms"), (3.25, "3.25 s"), (66.2, "66.2 s"),
                          (726, "12.1 min")):
        assert duration(round(seconds * 1e9)) == duration_s(seconds) == latency(seconds) == said
    assert duration(None) == duration_s(None) == moment(None) == "—"
    assert moment(1_764_308_412_000_000_000) == "2025-11-28 05:40:12 UTC"
    assert signed(0.0012, money) == "+$0.0012" and signed(-2.41, duration_s) == "-2.41 s"
    assert signed(None, money) == "unknown"


def test_the_ui_and_the_report_format_no_cost_or_time_of_their_own() -> None:
    # Every cost, duration and start goes through claudetrace.ui.present (or
    # claudetrace.pricing): a format written in place drifts from the others.
    import re

    import claudetrace

    root = Path(claudetrace.__file__).parent
    own = re.compile(r'f"\$\{|\} \$"|:\.\d+f\} s"|:\.\d+f\} ms"|strftime\("%Y-%m-%d %H:%M:%S')
    files = [*sorted((root / "ui").rglob("*.py")), root / "formats" / "html.py"]
    found = [f"{path.relative_to(root)}: {line.strip()}" for path in files
             if path.name not in ("present.py", "bench.py")
             for line in path.read_text().splitlines() if own.search(line)]
    assert found == []


def test_a_days_cost_in_the_stats_tables_is_words_where_it_is_no_amount() -> None:
    from claudetrace.store.usage import Figures
    from claudetrace.ui.stats import usage_rows
    from claudetrace.usage import Totals

    priced, unpriced = Totals(), Totals()
    priced.add("claude-opus-5-5", "cli", Figures(10, 5, 0, 0, 0.0012, 1))
    unpriced.add("claude-new", "unknown", Figures(10, 5, 0, 0, 0.0, 2))
    rows = usage_rows({"2026-11-01": priced, "2026-11-02": unpriced, "2026-11-03": Totals()})
    assert [r["cost"] for r in rows] == ["$0.0012", "unknown", "—"]
    assert rows[1]["cost ($)"] is None  # the chart's figure: no bar, never $0


def test_a_running_session_s_header_counts_what_its_fold_holds() -> None:
    # Its summary columns are written at its end: the header said 0 turns while the
    # conversation under it showed the turn.
    import os

    from claudetrace.cassette import read_cassette
    from claudetrace.model import fold
    from claudetrace.store.models import Recording
    from claudetrace.ui.present import header

    events = read_cassette(FIXTURES / "plain.ndjson").events[:6]  # no result
    session = fold(events)
    running = Recording(id="01RUN", started_ns=1_700_000_000_000_000_000, ended_ns=None,
                        event_count=6, turns=0, tool_calls=0, tool_errors=0, input_tokens=0,
                        output_tokens=0, cache_read_tokens=0, cache_creation_tokens=0,
                        host=os.uname().nodename, pid=os.getpid(), source="proxy",
                        last_seen_ns=4_000_000_000_000_000_000)
    head = header(running, session)
    assert head.status == "running"
    assert (head.turns, head.usage.total) == (1, session.usage.total) and head.usage.total > 0
    assert head.lines == 6  # the facts line said "0 lines" above them
    ended = Recording(id="01END", started_ns=1, ended_ns=2, exit_code=0, event_count=6,
                      turns=3, tool_calls=2, tool_errors=1, input_tokens=5, output_tokens=6,
                      cache_read_tokens=0, cache_creation_tokens=0, source="proxy")
    head = header(ended, session)  # an ended session's are its summary columns
    assert (head.turns, head.tool_calls, head.tool_errors, head.usage.total) == (3, 2, 1, 11)
    assert head.lines == 6


def test_an_api_error_the_cli_gave_up_on_is_an_error_not_a_model_call() -> None:
    # The real CLI against an API answering 529 (no retries): it writes the error
    # as an assistant message of its own, model "<synthetic>", zero usage.
    from claudetrace.model.summary import model_figures, summary_columns, usage_rows
    from claudetrace.ui.conversation import build_conversation

    events = read_cassette(FIXTURES.parent / "api_error" / "overloaded.ndjson").events
    session = fold(events)
    assert session.calls == {} and summary_columns(session)["model_calls"] == 0
    # Nor a call of a model "<synthetic>" in the figures /metrics and usage read.
    assert model_figures(session)["claude-opus-5-5"]["calls"] == 0
    assert list(model_figures(session)) == ["claude-opus-5-5"] and usage_rows(session, 0) == []
    (error,) = session.api_errors
    assert error.label == "API error 529 overloaded_error"
    assert error.text.startswith("API Error: 529 Overloaded.")
    assert session.turns[0].failed and session.is_error
    tree = trace_tree(session, end_ns=10**10, status="error")
    assert [(d, n.kind, n.label, n.status) for d, n in walk(tree)] == [
        (0, "agent", "claude-code", "error"), (1, "turn", "turn 1", "error"),
        (2, "error", "API error 529 overloaded_error", "error")]
    node = tree.children[0].children[0]
    assert node.detail.startswith("API Error: 529 Overloaded.") and node.cost_usd is None
    assert call_figures(session) == {}
    said = [(i.kind, i.is_error, i.text[:40]) for i in build_conversation(events, session)
            if i.kind in ("assistant", "error")]
    assert said == [("error", True, "API error 529 overloaded_error: API Erro")]
