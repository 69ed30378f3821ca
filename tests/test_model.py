"""The session model: turns, model calls, usage, tools, control round trips, status."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from claudetrace.cassette import read_cassette
from claudetrace.indexer import open_settled_store
from claudetrace.model import Session, Usage, fold
from claudetrace.model.events import Event
from claudetrace.model.summary import summary_columns
from claudetrace.model.usage import apportion
from claudetrace.store import Store

FIXTURES = Path(__file__).parent / "fixtures" / "cassettes"
CASSETTES = sorted(FIXTURES.glob("*.ndjson"))


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    opened = open_settled_store(str(db_path))
    yield opened
    opened.close()


def results(path: Path) -> list[dict[str, Any]]:
    """The CLI's own result lines of a cassette."""
    out = []
    for event in read_cassette(path).events:
        if event.direction == "out" and event.fields.type == "result":
            out.append(event.message or {})
    return out


def session_of(path: Path) -> Session:
    cassette = read_cassette(path)
    return fold(cassette.events, model=cassette.header.get("model"))


@pytest.mark.parametrize("path", CASSETTES, ids=lambda p: p.stem)
def test_usage_and_cost_per_model_equal_what_the_cli_printed(path: Path) -> None:
    session = session_of(path)
    lines = results(path)
    last = lines[-1] if lines else {}
    printed = {
        model: Usage.from_model_usage(entry) for model, entry in last.get("modelUsage", {}).items()
    }
    if printed:
        assert session.usage_by_model == printed
        assert session.cost_by_model == pytest.approx(
            {m: e["costUSD"] for m, e in last["modelUsage"].items()}
        )
        assert session.cost_usd == pytest.approx(last["total_cost_usd"])
    # The CLI's num_turns is kept apart from turns (user message → result).
    assert session.cli_num_turns == sum(r["num_turns"] for r in lines)
    assert session.results == len(lines)
    # Every model call's usage adds up to the total.
    total = Usage()
    for call in session.calls.values():
        total.add(call.usage)
    assert total == session.usage


@pytest.mark.parametrize("path", CASSETTES, ids=lambda p: p.stem)
def test_results_counts_the_turns_that_ended_as_they_end(path: Path) -> None:
    """``results`` (what the live indexer asks after every batch) is the number of
    turns done at every point of a fold, a line at a time, queued user
    messages (a ``proxy -- cat`` echo opens one a line) included."""
    session = Session()
    events = read_cassette(path).events
    echoed = [Event(e.seq, "in", e.t_ns, e.data) for e in events if e.direction == "out"]
    for event in [*events, *echoed]:
        session.add(event)
        assert session.results == sum(1 for turn in session.turns if turn.done)
    assert session.results >= 1 or path.stem == "cli_dies"


def test_turns_and_num_turns_are_different_things() -> None:
    session = session_of(FIXTURES / "permission_allow.ndjson")
    assert len(session.turns) == 1 and session.cli_num_turns == 2
    turn = session.turns[0]
    assert [c.id for c in turn.calls] == ["msg_fake_00000", "msg_fake_00001"]


def test_partial_messages_off_takes_output_tokens_from_the_result() -> None:
    """Assistant lines carry message_start's usage (1 output token): the result's
    usage is apportioned over the turn's calls instead."""
    session = session_of(FIXTURES / "permission_allow.ndjson")
    calls = list(session.calls.values())
    assert [c.usage.output for c in calls] == [25, 26]
    assert [c.usage.input for c in calls] == [100, 101]
    assert all(c.usage_source == "result" for c in calls)


def test_streamed_usage_comes_from_message_delta() -> None:
    session = session_of(FIXTURES / "interrupt.ndjson")
    second = session.calls["msg_fake_00001"]
    assert second.usage_source == "stream" and second.usage.output == 26


def test_a_subagents_unseen_calls_become_an_unobserved_call() -> None:
    session = session_of(FIXTURES / "subagent.ndjson")
    unseen = [c for c in session.calls.values() if not c.observed]
    assert len(unseen) == 1
    assert unseen[0].lane == "toolu_msg_fake_00000_0"
    assert unseen[0].usage == Usage(101, 26, 50, 10)
    main = [c for c in session.calls.values() if c.observed]
    assert sum(c.usage.input for c in main) == 202  # the result's usage: the main agent's
    agent = session.subagents["toolu_msg_fake_00000_0"]
    assert (agent.subagent_type, agent.status) == ("counter", "completed")


def test_set_model_splits_cost_per_model() -> None:
    session = session_of(FIXTURES / "set_model_and_mode.ndjson")
    assert session.cost_by_model == {"claude-opus-5-5": 0.00096, "claude-sonnet-5": 0.000509}
    assert session.model == "claude-sonnet-5"
    assert session.permission_mode == "acceptEdits"
    set_model = next(c for c in session.controls if c.subtype == "set_model")
    assert (set_model.initiator, set_model.outcome, set_model.model) == (
        "host", "success", "claude-sonnet-5")


def test_tools_with_permission_round_trips() -> None:
    allow = session_of(FIXTURES / "permission_allow.ndjson")
    (tool,) = allow.tools.values()
    assert tool.name == "Bash" and tool.outcome == "ok"
    assert tool.permission is not None and tool.permission.decision == "allow"
    deny = session_of(FIXTURES / "permission_deny.ndjson")
    (tool,) = deny.tools.values()
    assert tool.outcome == "error" and tool.permission is not None
    assert tool.permission.decision == "deny"


def test_hooks_and_mcp_round_trips() -> None:
    hooks = session_of(FIXTURES / "hooks.ndjson")
    (tool,) = hooks.tools.values()
    assert [h.hook_event for h in tool.hooks] == ["PreToolUse", "PostToolUse"]
    mcp = session_of(FIXTURES / "mcp_tool.ndjson")
    methods = [c.mcp_method for c in mcp.controls if c.kind == "mcp"]
    assert "tools/call" in methods and "initialize" in methods
    assert all(c.answered for c in mcp.controls)


def test_an_answer_recorded_before_its_request_still_pairs() -> None:
    session = session_of(FIXTURES / "cli_dies.ndjson")
    permission = next(c for c in session.controls if c.subtype == "can_use_tool")
    assert permission.reordered and permission.duration_ns == 0
    assert permission.decision == "allow"


@pytest.mark.parametrize(
    ("name", "end", "status", "reason"),
    [
        ("plain", {"exit_code": 0}, "ok", ""),
        ("cli_dies", {"exit_code": 137, "signal": 9}, "killed",
         "killed by SIGKILL during turn 1"),
        ("interrupt", {"exit_code": 0}, "interrupted",
         "turn 1 interrupted; the session went on"),
        ("plain", {"exit_code": 2}, "error", "exit code 2"),
        ("plain", {"exit_code": 0, "lost_bytes": 10}, "incomplete",
         "10 bytes of the capture were lost"),
        ("plain", {"ended": False}, "incomplete", "the recording stopped before the CLI exited"),
        ("plain", {"ended": False, "live": True}, "running", ""),
    ],
)
def test_one_status_definition(
    name: str, end: dict[str, Any], status: str, reason: str
) -> None:
    session = session_of(FIXTURES / f"{name}.ndjson")
    outcome = session.outcome(**{"ended": True, **end})
    assert (outcome.status, outcome.reason) == (status, reason)


def test_a_cli_that_never_started_is_an_error() -> None:
    outcome = Session().outcome(ended=True, exit_code=127, error="no such file")
    assert (outcome.status, outcome.reason) == ("error", "the CLI did not start: no such file")


def test_a_failed_turn_is_an_error_and_a_turn_without_result_incomplete() -> None:
    def line(seq: int, direction: str, obj: dict[str, Any]) -> Event:
        return Event(seq, direction, seq, json.dumps(obj).encode())  # type: ignore[arg-type]

    session = fold([
        line(0, "in", {"type": "user", "message": {"role": "user", "content": "hi"}}),
        line(1, "out", {"type": "result", "subtype": "error_max_turns", "is_error": True}),
    ])
    assert session.outcome(ended=True, exit_code=0).reason == "turn 1 ended with error_max_turns"
    session.add(line(2, "in", {"type": "user", "message": {"role": "user", "content": "again"}}))
    waiting = Session()
    waiting.add(line(0, "in", {"type": "user", "message": {"role": "user", "content": "hi"}}))
    assert waiting.outcome(ended=True, exit_code=0).reason == "turn 1 got no result"


def _line(seq: int, direction: str, obj: dict[str, Any]) -> Event:
    return Event(seq, direction, seq, json.dumps(obj).encode())  # type: ignore[arg-type]


PROMPT = {"type": "user", "message": {"role": "user", "content": "hi"}}


def _answer(msg_id: str, **extra: Any) -> dict[str, Any]:
    message = {"id": msg_id, "role": "assistant", "model": "m",
               "content": [{"type": "text", "text": "API Error: 529 overloaded"}]}
    return {"type": "assistant", "message": message, **extra}


def test_is_error_is_authoritative_whatever_the_subtype() -> None:
    session = fold([_line(0, "in", PROMPT), _line(1, "out", {
        "type": "result", "subtype": "success", "is_error": True, "result": "API Error"})])
    turn = session.turns[0]
    assert turn.failed and turn.errored and session.is_error
    assert turn.ended_with == "an error (is_error with subtype success)"
    outcome = session.outcome(ended=True, exit_code=0)
    assert outcome.status == "error"
    assert "success" not in outcome.reason.replace("subtype success", "")
    assert summary_columns(session)["is_error"] is True
    assert "ended with success" not in session.outcome(ended=True, exit_code=1).reason
    # and when it says false, an error-looking subtype does not overrule it.
    quiet = fold([_line(0, "in", PROMPT), _line(1, "out", {
        "type": "result", "subtype": "error_max_turns", "is_error": False})])
    assert not quiet.is_error and quiet.turns[0].ended_with == "error_max_turns"
    bare = fold([_line(0, "in", PROMPT), _line(1, "out", {
        "type": "result", "subtype": "error_during_execution"})])
    assert bare.is_error  # no is_error: the subtype says


@pytest.mark.parametrize("marker", [
    {"isApiErrorMessage": True},  # a Claude Code transcript's line
    {"error": "rate_limit"},  # the CLI's stream-json assistant line
])
def test_an_answer_that_is_an_api_error_makes_the_session_an_error(
    marker: dict[str, Any],
) -> None:
    session = fold([
        _line(0, "in", PROMPT),
        _line(1, "out", _answer("msg_1", **marker)),
        _line(2, "out", {"type": "result", "subtype": "success", "is_error": False}),
    ])
    turn = session.turns[0]
    assert turn.failed and turn.api_error == marker.get("error", "api_error")
    outcome = session.outcome(ended=True, exit_code=0)
    assert (outcome.status, outcome.reason) == (
        "error", f"turn 1 ended with an API error ({turn.api_error})")
    assert summary_columns(session)["is_error"] is True


def test_an_api_error_retried_with_success_is_not_an_error() -> None:
    api_error = {"type": "system", "subtype": "api_error",
                 "error": {"type": "overloaded_error"}, "retryAttempt": 1}
    events = [_line(0, "in", PROMPT), _line(1, "out", api_error)]
    failing = fold(events)
    assert failing.turns[0].api_error == "overloaded_error" and failing.is_error
    assert failing.outcome(ended=True, exit_code=0).status == "error"
    ok = fold([*events, _line(2, "out", _answer("msg_2")),
               _line(3, "out", {"type": "result", "subtype": "success", "is_error": False})])
    assert not ok.turns[0].failed and ok.turns[0].ended_with == "success"
    assert ok.outcome(ended=True, exit_code=0).status == "ok"
    # A subagent's API error is its own: the main agent's turn is not failed by it.
    sub = fold([_line(0, "in", PROMPT),
                _line(1, "out", {**_answer("msg_3", error="server_error"),
                                 "parent_tool_use_id": "toolu_1"})])
    assert sub.turns[0].api_error is None


def test_apportion() -> None:
    assert apportion(51, [1, 1]) == [25, 26]
    assert apportion(201, [100, 101]) == [100, 101]
    assert apportion(10, [0, 0, 0]) == [3, 3, 4]
    assert sum(apportion(1000, [3, 7, 11])) == 1000
    assert apportion(0, [5, 5]) == [0, 0]


@pytest.mark.parametrize("path", CASSETTES, ids=lambda p: p.stem)
def test_the_same_session_chunk_by_chunk_and_from_the_store(store: Store, path: Path) -> None:
    cassette = read_cassette(path)
    whole = summary_columns(fold(cassette.events, model=cassette.header.get("model")))
    live = Session(model=cassette.header.get("model"))
    for event in cassette.events:  # as the indexer sees them: parsed, then forgotten
        fresh = Event(event.seq, event.direction, event.t_ns, event.data, event.eol)
        fresh.fields  # noqa: B018
        live.add(fresh)
        fresh.forget_parsed()
    assert summary_columns(live) == whole
    rid = store.import_cassette(cassette)
    rec = store.get(rid)
    stored = summary_columns(fold(store.iter_events(rid), model=rec.model))
    assert stored == whole
    assert {k: getattr(rec, k) for k in whole} == whole


def _compact(seq: int, direction: str, obj: dict[str, Any]) -> Event:
    """A line as the CLI writes it: compact JSON, ``type`` first."""
    return Event(seq, direction, seq, json.dumps(obj, separators=(",", ":")).encode())  # type: ignore[arg-type]


def test_the_fold_parses_each_line_it_reads_once_and_a_tool_result_not_at_all(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool's end (and its error) comes from the result line's fields: the line,
    its output echoed twice, is never parsed whole; an assistant line, read whole,
    is parsed once, its fields taken from that."""
    from claudetrace.model import events as events_module

    output = "x" * 5000
    assistant = _compact(1, "out", {"type": "assistant", "message": {
        "id": "m1", "model": "claude-x", "content": [
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
            {"type": "tool_use", "id": "t2", "name": "Read", "input": {}}],
        "usage": {"input_tokens": 3, "output_tokens": 4}}})
    result = _compact(2, "out", {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": output, "is_error": True},
        {"type": "tool_result", "tool_use_id": "t2", "content": output}]},
        "tool_use_result": {"stdout": output}})
    parsed: list[bytes] = []
    decoded: list[bytes] = []
    parse, decode = events_module._parse, events_module._decode_line
    monkeypatch.setattr(events_module, "_parse", lambda data: parsed.append(data) or parse(data))
    monkeypatch.setattr(events_module, "_decode_line",
                        lambda data: decoded.append(data) or decode(data))
    session = Session()
    session.add_many([_compact(0, "in", PROMPT), assistant, result])
    assert session.tools["t1"].is_error is True and session.tools["t2"].is_error is False
    assert session.tools["t1"].end_seq == session.tools["t2"].end_seq == 2
    assert session.tools["t1"].input == {"command": "ls"}
    assert parsed == [assistant.data]
    assert assistant.data not in decoded and result.data in decoded
    # The same figures as a fold that parsed every line first.
    again = Session()
    lines = [_compact(0, "in", PROMPT), _compact(1, "out", json.loads(assistant.data)),
             _compact(2, "out", json.loads(result.data))]
    for event in lines:
        event.obj  # noqa: B018
    again.add_many(lines)
    assert summary_columns(again) == summary_columns(session)
    assert {k: (t.is_error, t.end_seq) for k, t in again.tools.items()} == {
        k: (t.is_error, t.end_seq) for k, t in session.tools.items()}
