"""The span builder on event streams recorded from the real CLI (2.1.330).

``tests/fixtures/telemetry/*.cassette.ndjson`` were recorded through the proxy
from the scenarios in ``tests/scenarios.py`` (real SDK, real CLI, fake API);
``tests/fixtures/samples`` are the two reference recordings (partial messages on).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import claudetrace
from claudetrace.cassette import read_cassette
from claudetrace.model.events import Event
from claudetrace.recording import RecordingInfo
from claudetrace.telemetry import ContentPolicy, SpanBuilder, SpanRecord, build_spans, traceparent
from claudetrace.telemetry import conventions as c

FIXTURES = Path(__file__).parent / "fixtures"
START = 1_700_000_000_000_000_000


def load(name: str) -> tuple[RecordingInfo, list[Event]]:
    """A fixture cassette as (RecordingInfo, events)."""
    folder = "samples" if name in ("basic", "mcp_hooks") else "telemetry"
    cassette = read_cassette(FIXTURES / folder / f"{name}.cassette.ndjson")
    h = cassette.header
    started = h.get("started_ns", START)
    info = RecordingInfo(
        id=h.get("recording_id", f"01SAMPLE{name.upper()}"),
        argv=cassette.argv,
        started_ns=started,
        ended_ns=h.get("ended_ns", started + 2_000_000_000),
        exit_code=h.get("exit_code"),
        signal=h.get("signal"),
        model=h.get("model"),
    )
    return info, cassette.events


def shape(spans: list[SpanRecord]) -> list[str]:
    """The tree as indented ``name [status]`` lines, children in start order."""
    by_parent: dict[int | None, list[SpanRecord]] = {}
    for span in spans:
        by_parent.setdefault(span.parent_id, []).append(span)
    out: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(by_parent.get(parent, []), key=lambda s: (s.start_ns, s.key)):
            mark = " [error]" if span.status == "error" else ""
            out.append("  " * depth + span.name + mark)
            walk(span.span_id, depth + 1)

    walk(None, 0)
    return out


def named(spans: list[SpanRecord], name: str) -> list[SpanRecord]:
    return [s for s in spans if s.name == name]


EXPECTED = {
    "plain": [
        "invoke_agent claude-code",
        "  control initialize",
        "  turn 1",
        "    chat claude-opus-5-5",
    ],
    "permission_allow": [
        "invoke_agent claude-code",
        "  control initialize",
        "  turn 1",
        "    chat claude-opus-5-5",
        "    execute_tool Bash",
        "      can_use_tool",
        "    chat claude-opus-5-5",
    ],
    "permission_deny": [
        "invoke_agent claude-code",
        "  control initialize",
        "  turn 1",
        "    chat claude-opus-5-5",
        "    execute_tool Bash [error]",
        "      can_use_tool",
        "    chat claude-opus-5-5",
    ],
    "hooks": [
        "invoke_agent claude-code",
        "  control initialize",
        "  turn 1",
        "    chat claude-opus-5-5",
        "    execute_tool Bash",
        "      hook_callback PreToolUse",
        "      hook_callback PostToolUse",
        "    chat claude-opus-5-5",
    ],
    "mcp_tool": [
        "invoke_agent claude-code",
        "  control initialize",
        "  initialize calc",
        "  turn 1",
        "    chat claude-opus-5-5",
        "    notifications/initialized calc",
        "    tools/list calc",
        "    execute_tool mcp__calc__add",
        "    tools/call calc",
        "    chat claude-opus-5-5",
    ],
    "subagent": [
        "invoke_agent claude-code",
        "  control initialize",
        "  turn 1",
        "    chat claude-opus-5-5",
        "    execute_tool Agent",
        "      invoke_agent counter",
        "        chat claude-opus-5-5",
        "    chat claude-opus-5-5",
    ],
    "interrupt": [
        "invoke_agent claude-code",
        "  control initialize",
        "  turn 1",
        "    chat claude-opus-5-5 [error]",
        "  control interrupt",
        "  turn 2",
        "    chat claude-opus-5-5",
    ],
    "set_model_and_mode": [
        "invoke_agent claude-code",
        "  control initialize",
        "  turn 1",
        "    chat claude-opus-5-5",
        "  control set_model",
        "  control set_permission_mode",
        "  turn 2",
        "    chat claude-sonnet-5",
    ],
    "cli_dies": [
        "invoke_agent claude-code [error]",
        "  control initialize",
        "  turn 1 [error]",
        "    chat claude-opus-5-5 [error]",
        "    execute_tool Bash [error]",
        "      can_use_tool",
    ],
    "multi_turn": [
        "invoke_agent claude-code",
        "  control initialize",
        "  turn 1",
        "    chat claude-opus-5-5",
        "  turn 2",
        "    chat claude-opus-5-5",
        "  turn 3",
        "    chat claude-opus-5-5",
    ],
    "mcp_hooks": [
        "invoke_agent claude-code",
        "  control initialize",
        "  initialize calc",
        "  turn 1",
        "    notifications/initialized calc",
        "    tools/list calc",
        "    chat claude-opus-5-5",
        "    execute_tool mcp__calc__add",
        "      hook_callback PreToolUse",
        "    tools/call calc",
        "    chat claude-opus-5-5",
    ],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_tree(name: str) -> None:
    info, events = load(name)
    spans = build_spans(info, events)
    assert shape(spans) == EXPECTED[name]
    # Every span ended inside its parent's trace, children no earlier than the root.
    root = spans[-1]
    assert root.key == "root" and root.parent_id is None
    assert {s.trace_id for s in spans} == {root.trace_id}
    assert all(s.end_ns is not None and s.start_ns <= s.end_ns for s in spans)
    assert all(s.start_ns >= info.started_ns for s in spans)
    assert len({s.span_id for s in spans}) == len(spans)


def test_chat_attributes_follow_genai_conventions() -> None:
    info, events = load("basic")
    chat = named(build_spans(info, events), "chat claude-opus-5-5")[0]
    a = chat.attributes
    assert a[c.GEN_AI_OPERATION_NAME] == "chat"
    assert a[c.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert a[c.GEN_AI_REQUEST_MODEL] == a[c.GEN_AI_RESPONSE_MODEL] == "claude-opus-5-5"
    assert a[c.GEN_AI_RESPONSE_ID] == "msg_fake_00000"
    assert a[c.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    # Anthropic rule: input = uncached 100 + cache read 50 + cache creation 10.
    assert a[c.GEN_AI_USAGE_INPUT_TOKENS] == 160
    assert a[c.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 50
    assert a[c.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] == 10
    assert a[c.GEN_AI_USAGE_OUTPUT_TOKENS] == 25  # from message_delta, not message_start
    assert a[c.GEN_AI_CONVERSATION_ID] == "bb6c146e-c826-4786-a4f7-9974668e9132"
    # The call starts at system/status "requesting" (seq 11), first chunk at seq 12.
    assert chat.kind == "client"
    assert chat.start_ns == info.started_ns + 1_380_847_000
    assert a[c.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] == pytest.approx(1.477442 - 1.380847)
    assert c.GEN_AI_OUTPUT_MESSAGES not in a  # content is opt-in


def test_turn_and_root_carry_usage_cost_and_outcome() -> None:
    info, events = load("mcp_hooks")
    spans = build_spans(info, events)
    turn = named(spans, "turn 1")[0]
    assert turn.attributes[c.RESULT_SUBTYPE] == "success"
    assert turn.attributes[c.IS_ERROR] is False
    assert turn.attributes[c.GEN_AI_USAGE_INPUT_TOKENS] == 201 + 100 + 20
    assert turn.attributes[c.GEN_AI_USAGE_OUTPUT_TOKENS] == 51
    assert turn.attributes[c.COST_USD] == pytest.approx(0.001944)
    root = spans[-1]
    assert root.attributes[c.SESSION_OUTCOME] == "ok"
    assert root.attributes[c.RECORDING_ID] == info.id
    assert root.attributes[c.GEN_AI_AGENT_NAME] == "claude-code"
    assert root.costs == {"claude-opus-5-5": pytest.approx(0.001944)}
    assert root.end_ns == info.ended_ns
    # System messages and the like are span events, nothing dropped.
    event_names = [e.name for s in spans for e in s.events]
    assert event_names.count("system/session_state_changed") == 2
    assert "system/init" in event_names


def test_cost_is_the_per_turn_delta_of_a_cumulative_total() -> None:
    info, events = load("interrupt")
    spans = build_spans(info, events)
    turn1, turn2 = named(spans, "turn 1")[0], named(spans, "turn 2")[0]
    assert turn1.attributes[c.COST_USD] == pytest.approx(0.00048)
    assert turn2.attributes[c.COST_USD] == pytest.approx(0.000984)
    assert spans[-1].attributes[c.COST_USD] == pytest.approx(0.001464)


def test_tool_permission_and_hook_spans() -> None:
    info, events = load("permission_deny")
    spans = build_spans(info, events)
    tool = named(spans, "execute_tool Bash")[0]
    perm = named(spans, "can_use_tool")[0]
    assert perm.parent_id == tool.span_id
    assert tool.attributes[c.GEN_AI_TOOL_CALL_ID] == perm.attributes[c.GEN_AI_TOOL_CALL_ID]
    assert tool.attributes[c.TOOL_OUTCOME] == "error"
    assert perm.attributes[c.PERMISSION_DECISION] == "deny"
    assert perm.attributes[c.CONTROL_OUTCOME] == "success"
    assert perm.attributes[c.CONTROL_INITIATOR] == "cli"
    info, events = load("permission_allow")
    perm = named(build_spans(info, events), "can_use_tool")[0]
    assert perm.attributes[c.PERMISSION_DECISION] == "allow"
    info, events = load("hooks")
    hooks = [s for s in build_spans(info, events) if s.name.startswith("hook_callback")]
    assert [h.attributes[c.HOOK_EVENT] for h in hooks] == ["PreToolUse", "PostToolUse"]


def test_mcp_spans_follow_mcp_conventions() -> None:
    info, events = load("mcp_tool")
    spans = build_spans(info, events)
    call = named(spans, "tools/call calc")[0]
    assert call.kind == "client"
    assert call.attributes[c.MCP_METHOD_NAME] == "tools/call"
    assert call.attributes[c.GEN_AI_TOOL_NAME] == "add"
    assert call.attributes[c.JSONRPC_REQUEST_ID] == "2"
    tool = named(spans, "execute_tool mcp__calc__add")[0]
    assert call.attributes[c.GEN_AI_TOOL_CALL_ID] == tool.attributes[c.GEN_AI_TOOL_CALL_ID]
    init = named(spans, "initialize calc")[0]
    assert init.attributes[c.MCP_PROTOCOL_VERSION] == "2025-11-25"


def test_reordered_answer_still_closes_its_request() -> None:
    # In the basic sample the host's answer to tools/list is recorded before the request.
    info, events = load("basic")
    spans = build_spans(info, events)
    listing = named(spans, "tools/list calc")[0]
    assert listing.status != "error"
    assert listing.attributes["claudetrace.control.reordered"] is True
    assert listing.start_ns == listing.end_ns


def test_set_model_changes_the_request_model() -> None:
    info, events = load("set_model_and_mode")
    spans = build_spans(info, events)
    set_model = named(spans, "control set_model")[0]
    assert set_model.attributes[c.CONTROL_INITIATOR] == "host"
    assert set_model.attributes[c.CONTROL_OUTCOME] == "success"
    chat2 = named(spans, "chat claude-sonnet-5")[0]
    assert chat2.attributes[c.GEN_AI_REQUEST_MODEL] == "claude-sonnet-5"


def test_interrupt_and_death_say_why() -> None:
    info, events = load("interrupt")
    spans = build_spans(info, events)
    assert named(spans, "chat claude-opus-5-5")[0].status_message == "interrupted"
    # Interrupted, then recovered and exited 0: not an error (no red root span).
    assert spans[-1].attributes[c.SESSION_OUTCOME] == "interrupted"
    assert spans[-1].status != "error"
    info, events = load("cli_dies")
    spans = build_spans(info, events)
    tool = named(spans, "execute_tool Bash")[0]
    assert tool.status_message == "killed by SIGKILL during turn 1"
    assert tool.attributes[c.TOOL_OUTCOME] == "unfinished"
    # A killed CLI is "killed" here as in the store (it was "incomplete" on spans).
    assert spans[-1].attributes[c.SESSION_OUTCOME] == "killed"
    assert spans[-1].status == "error"


def test_proxy_death_without_exit_is_incomplete() -> None:
    info, events = load("plain")
    info.ended_ns = None
    info.exit_code = None
    spans = build_spans(info, events[:5])  # cut before the result
    root = spans[-1]
    assert root.attributes[c.SESSION_OUTCOME] == "incomplete"
    assert named(spans, "turn 1")[0].status_message == (
        "the recording stopped before the CLI exited")


def test_subagent_nests_under_its_tool() -> None:
    info, events = load("subagent")
    spans = build_spans(info, events)
    tool = named(spans, "execute_tool Agent")[0]
    agent = named(spans, "invoke_agent counter")[0]
    assert agent.parent_id == tool.span_id
    assert agent.attributes[c.GEN_AI_AGENT_NAME] == "counter"
    assert {e.name for e in agent.events} >= {"system/task_started", "user"}


def test_a_subagent_s_calls_are_named_after_its_own_model() -> None:
    """The shop transcript's main agent runs Opus, its Explore subagent Haiku (each
    assistant line says its model): each chat span names the model that answered."""
    from claudetrace.formats.claude_code import read_transcript

    shop = Path(__file__).parent / "fixtures" / "transcripts" / "projects" / "-home-dev-shop"
    got = read_transcript(shop / "7c1e2a90-3b4d-4e5f-8a6b-1c2d3e4f5a60.jsonl")
    spans = build_spans(got.info, got.events)
    agent = named(spans, "invoke_agent Explore")[0]
    chats = [s for s in spans if s.attributes.get(c.GEN_AI_OPERATION_NAME) == c.OP_CHAT]
    under = [s.name for s in chats if s.parent_id == agent.span_id]
    assert under == ["chat claude-haiku-4-5-20251001"] * 2
    for span in chats:
        assert span.name == f"chat {span.attributes[c.GEN_AI_REQUEST_MODEL]}"


def test_same_events_same_spans_and_ids() -> None:
    info, events = load("mcp_hooks")
    first = build_spans(info, events)
    again = build_spans(info, load("mcp_hooks")[1])
    assert [(s.key, s.span_id, s.parent_id, s.start_ns, s.end_ns, s.attributes) for s in first] == [
        (s.key, s.span_id, s.parent_id, s.start_ns, s.end_ns, s.attributes) for s in again
    ]
    trace_hex, root_hex = traceparent(info.id).split("-")[1:3]
    assert int(trace_hex, 16) == first[-1].trace_id
    assert int(root_hex, 16) == first[-1].span_id


def test_spans_end_as_events_arrive() -> None:
    info, events = load("plain")
    ended: list[str] = []
    builder = SpanBuilder(info, on_end=lambda s: ended.append(s.name))
    for event in events:
        builder.feed(event)
    assert "turn 1" in ended and "invoke_agent claude-code" not in ended
    builder.close(info)
    assert ended[-1] == "invoke_agent claude-code"


def test_content_only_when_opted_in_and_clipped() -> None:
    info, events = load("permission_allow")
    spans = build_spans(info, events, content=ContentPolicy(enabled=True, limit=40))
    tool = named(spans, "execute_tool Bash")[0]
    assert len(tool.attributes[c.GEN_AI_TOOL_CALL_ARGUMENTS]) == 40
    assert str(tool.attributes[c.GEN_AI_TOOL_CALL_ARGUMENTS]).endswith("…")
    turn = named(spans, "turn 1")[0]
    assert str(turn.attributes[c.GEN_AI_INPUT_MESSAGES]).startswith('[{"role":"user"')
    plain = build_spans(info, events)
    assert not any(
        key in s.attributes
        for s in plain
        for key in (c.GEN_AI_TOOL_CALL_ARGUMENTS, c.GEN_AI_INPUT_MESSAGES, c.GEN_AI_OUTPUT_MESSAGES)
    )


def test_stray_lines_become_events() -> None:
    info = RecordingInfo(id="01STRAY", argv=[], started_ns=START, ended_ns=START + 10, exit_code=0)
    events = [
        Event(0, "out", 1, b"not json"),
        Event(1, "err", 2, b"warning: something"),
        Event(2, "out", 3, b'{"type":"keep_alive"}'),
        Event(3, "out", 4, b'{"type":"brand_new","x":1}'),
    ]
    root = build_spans(info, events)[-1]
    assert [e.name for e in root.events] == ["unparsed line", "stderr", "keep_alive", "brand_new"]
    assert root.events[3].attributes["claudetrace.line.x"] == 1


HARNESS = sorted((FIXTURES / "cassettes").glob("*.ndjson"))


@pytest.mark.parametrize("path", HARNESS, ids=[p.stem for p in HARNESS])
def test_tree_on_the_harness_recordings(path: Path) -> None:
    # Independent recordings of the same scenarios give the same trees.
    cassette = read_cassette(path)
    h = cassette.header
    info = RecordingInfo(id=h["recording_id"], argv=[], started_ns=h["started_ns"],
                         ended_ns=h.get("ended_ns"), exit_code=h.get("exit_code"),
                         signal=h.get("signal"), model=h.get("model"))
    # streamed_tools is permission_allow with partial messages on: the same tree.
    name = "permission_allow" if path.stem == "streamed_tools" else path.stem
    assert shape(build_spans(info, cassette.events)) == EXPECTED[name]


def test_thinking_progress_lines_are_counted_on_the_model_call_not_one_event_each() -> None:
    from claudetrace.bench.proxy import STREAMING_CASSETTE
    from claudetrace.store import info_from_header

    cassette = read_cassette(STREAMING_CASSETTE)
    progress = [
        e for e in cassette.events
        if e.direction == "out" and e.fields.type == "system"
        and e.fields.subtype == "thinking_tokens"
    ]
    assert len(progress) > 100  # a real CLI streaming extended thinking
    spans = build_spans(info_from_header(cassette.header), cassette.events)
    assert not any(ev.name == "system/thinking_tokens" for s in spans for ev in s.events)
    counted = [s for s in spans if c.THINKING_UPDATES in s.attributes]
    assert counted and all(s.name.startswith("chat") for s in counted)
    assert sum(s.attributes[c.THINKING_UPDATES] for s in counted) == len(progress)
    last = progress[-1].message or {}
    assert any(
        s.attributes.get(c.THINKING_ESTIMATED_TOKENS) == last["estimated_tokens"] for s in counted
    )


def test_thinking_counts_reach_a_model_call_however_it_ends_in_first_seen_order() -> None:
    # Counted in ints while the call streams, written when it ends: here by close()
    # (the CLI died mid-thinking), with an estimate first seen on the second line.
    lines = [
        ("in", {"type": "user", "message": {"role": "user", "content": "hi"}}),
        ("out", {"type": "stream_event", "event": {"type": "message_start", "message": {
            "id": "msg_1", "model": "m", "usage": {"input_tokens": 3}}}}),
        ("out", {"type": "system", "subtype": "thinking_tokens"}),
        ("out", {"type": "system", "subtype": "thinking_tokens", "estimated_tokens": 5}),
        ("out", {"type": "stream_event", "event": {"type": "message_delta",
                                                  "delta": {"stop_reason": "end_turn"}}}),
        ("out", {"type": "system", "subtype": "thinking_tokens", "estimated_tokens": 9}),
        ("out", {"type": "system", "subtype": "thinking_tokens", "estimated_tokens": "?"}),
    ]
    events = [
        Event(n, d, (n + 1) * 1000, json.dumps(obj).encode())  # type: ignore[arg-type]
        for n, (d, obj) in enumerate(lines)
    ]
    info = RecordingInfo(id="01THINK", argv=[], started_ns=START)
    chat = named(build_spans(info, events), "chat m")[0]
    attrs = chat.attributes
    assert (attrs[c.THINKING_UPDATES], attrs[c.THINKING_ESTIMATED_TOKENS]) == (4, 9)
    keys = list(attrs)
    assert (
        keys.index(c.GEN_AI_USAGE_INPUT_TOKENS)
        < keys.index(c.THINKING_UPDATES)
        < keys.index(c.THINKING_ESTIMATED_TOKENS)
        < keys.index(c.GEN_AI_RESPONSE_FINISH_REASONS)
    )


TELEMETRY_FIXTURES = (FIXTURES / "telemetry").glob("*.cassette.ndjson")
ALL_FIXTURES = ["basic", "mcp_hooks", "streaming",
                *sorted(p.name.split(".")[0] for p in TELEMETRY_FIXTURES)]
STREAMING = Path(claudetrace.__file__).parent / "bench" / "data" / "streaming.cassette.ndjson"


def _as_data(spans: list[SpanRecord]) -> list[tuple[object, ...]]:
    return [(s.key, s.name, s.span_id, s.parent_id, s.start_ns, s.end_ns, s.kind, s.attributes,
             [(e.name, e.time_ns, e.attributes) for e in s.events], s.status, s.status_message,
             s.costs) for s in spans]


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_feeding_in_chunks_gives_the_same_spans(name: str) -> None:
    """``feed_many`` (the indexer's and the backfill's path) decides the commonest lines
    inline: whatever the chunking, the spans are exactly those of ``feed``."""
    if name == "streaming":  # thinking, text deltas: the lines decided inline
        cassette = read_cassette(STREAMING)
        info = RecordingInfo(id="01STREAMING", argv=cassette.argv, started_ns=START,
                             ended_ns=START + 10**10, exit_code=0)
        # Killed mid-answer: the last lines are deltas, and open spans end at the last one.
        deltas = [i for i, e in enumerate(cassette.events) if b"content_block_delta" in e.data]
        events = cassette.events[:deltas[len(deltas) // 2] + 1]
    else:
        info, events = load(name)
    if name in ("streaming", "interrupt"):  # as if killed: open spans end at the last line
        info.ended_ns = None
    expected = _as_data(build_spans(info, events))
    rng = random.Random(name)
    for _ in range(5):
        builder = SpanBuilder(info)
        builder.feed_many([])  # an empty chunk changes nothing
        at = 0
        while at < len(events):
            size = rng.choice([1, 2, 7, 50, 2000, len(events)])
            chunk = events[at:at + size]
            # The indexer passes lists; a backfill, the store's iterator (taken in slices).
            builder.feed_many(chunk if rng.random() < 0.5 else iter(chunk))
            builder.feed_many([])
            at += size
        builder.close(info)
        assert _as_data(builder.finished) == expected


# -- content per the GenAI schema, tokens per call, OpenInference kinds -----------------------

ALL = ["basic", "mcp_hooks", "cli_dies", "hooks", "interrupt", "mcp_tool", "multi_turn",
       "permission_allow", "permission_deny", "plain", "set_model_and_mode", "subagent"]
ROLES = {"system", "user", "assistant", "tool"}


def _check_messages(value: object, *, output: bool) -> None:
    """What the GenAI input/output messages JSON schemas require: one array of messages,
    each with a role and a list of typed parts; an output message its finish_reason."""
    assert isinstance(value, str)
    messages = json.loads(value)  # one JSON document: not arrays joined by newlines
    assert isinstance(messages, list) and messages
    for message in messages:
        assert message["role"] in ROLES
        assert isinstance(message["parts"], list)
        for part in message["parts"]:
            assert isinstance(part["type"], str)
            if part["type"] in ("text", "reasoning"):
                assert isinstance(part["content"], str)
            if part["type"] == "tool_call":
                assert isinstance(part["name"], str)
        if output:
            assert isinstance(message["finish_reason"], str) and message["finish_reason"]


@pytest.mark.parametrize("name", ALL)
def test_messages_follow_the_genai_schema(name: str) -> None:
    info, events = load(name)
    spans = build_spans(info, events, content=ContentPolicy(enabled=True, limit=40))
    checked = 0
    for span in spans:
        for key, output in ((c.GEN_AI_INPUT_MESSAGES, False), (c.GEN_AI_OUTPUT_MESSAGES, True)):
            if key in span.attributes:
                _check_messages(span.attributes[key], output=output)  # even when clipped
                checked += 1
    # Every call the host saw an answer of (not a subagent's, counted by the CLI only).
    seen = [s for s in spans if s.name.startswith("chat ") and s.status != "error"
            and c.GEN_AI_CONVERSATION_ID in s.attributes]
    assert all(c.GEN_AI_OUTPUT_MESSAGES in s.attributes for s in seen)
    assert checked >= len(seen)


def test_a_call_spread_over_several_assistant_lines_is_one_message() -> None:
    info, events = load("multi_turn")  # thinking and text of one call on two lines
    spans = build_spans(info, events, content=ContentPolicy(enabled=True))
    second = [s for s in spans if s.attributes.get(c.GEN_AI_RESPONSE_ID) == "msg_fake_00001"]
    (message,) = json.loads(str(second[0].attributes[c.GEN_AI_OUTPUT_MESSAGES]))
    assert [p["type"] for p in message["parts"]] == ["reasoning", "text"]
    assert message["finish_reason"] == "stop"


def test_openinference_kinds() -> None:
    from claudetrace.telemetry.openinference import attributes

    kinds: dict[str, set[str]] = {}
    texts = 0
    for name in ("subagent", "mcp_tool", "hooks", "permission_deny", "set_model_and_mode"):
        info, events = load(name)
        for span in build_spans(info, events, content=ContentPolicy(enabled=True)):
            oi = attributes(span)
            kinds.setdefault(span.name.split(" ")[0], set()).add(str(oi["openinference.span.kind"]))
            if oi["openinference.span.kind"] == "LLM":
                assert oi["llm.token_count.total"] == (
                    oi["llm.token_count.prompt"] + oi["llm.token_count.completion"])
                texts += "llm.output_messages.0.message.content" in oi
                assert oi.get("session.id") == span.attributes.get(c.GEN_AI_CONVERSATION_ID)
            if span.name.startswith("tools/call"):
                assert c.GEN_AI_OPERATION_NAME not in span.attributes
            if span.parent_id is None:  # the root: the first prompt, the last answer
                assert json.loads(str(oi["input.value"]))[0]["role"] == "user"
                assert json.loads(str(oi["output.value"]))[0]["role"] == "assistant"
    assert texts >= 5
    assert kinds == {
        "invoke_agent": {"AGENT"}, "turn": {"CHAIN"}, "chat": {"LLM"},
        "execute_tool": {"TOOL"}, "can_use_tool": {"CHAIN"}, "hook_callback": {"CHAIN"},
        "tools/call": {"CHAIN"}, "tools/list": {"CHAIN"}, "initialize": {"CHAIN"},
        "notifications/initialized": {"CHAIN"}, "control": {"CHAIN"},
    }


def test_a_long_bash_command_s_task_is_no_subagent() -> None:
    # CLI 2.1.330 reports a Bash command that runs a while as a local_bash task
    # (task_started, then task_notification): its tool call, not a subagent.
    def task(subtype: str, **extra: object) -> dict[str, object]:
        return {"type": "system", "subtype": subtype, "task_id": "b1", "tool_use_id": "toolu_1",
                "task_type": "local_bash", "description": "sleep 5", **extra}

    use = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "sleep 5"}}
    lines = [
        ("in", {"type": "user", "message": {"role": "user", "content": "wait"}}),
        ("out", {"type": "assistant", "message": {"id": "msg_1", "model": "m", "content": [use],
                                                  "usage": {"input_tokens": 3}}}),
        ("out", task("task_started")),
        ("out", task("task_notification", status="completed")),
        ("out", {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": ""}]}}),
        ("out", {"type": "result", "subtype": "success", "is_error": False}),
    ]
    events = [
        Event(n, d, (n + 1) * 1000, json.dumps(obj).encode())  # type: ignore[arg-type]
        for n, (d, obj) in enumerate(lines)
    ]
    info = RecordingInfo(id="01BASH", argv=[], started_ns=START, ended_ns=START + 10**9,
                         exit_code=0)
    spans = build_spans(info, events)
    assert not [s.name for s in spans if s.name.startswith("invoke_agent subagent")]
    assert shape(spans)[1:4] == ["  turn 1", "    chat m", "    execute_tool Bash"]
    from claudetrace.model import fold
    assert fold(events).subagents == {}


def test_a_call_the_cli_counted_but_never_showed_nests_under_its_own_turn() -> None:
    """A result that reports more tokens than the calls seen (a title request, a
    call through a fake API that streams no usage) adds an unobserved call: its
    chat span is its turn's, like every chat, not the root's."""
    info, events = load("plain")
    first = next(e for e in events if e.fields.type == "result")
    result = json.loads(first.data)
    result["modelUsage"]["claude-opus-5-5"]["inputTokens"] += 1000
    more = Event(first.seq, first.direction, first.t_ns, json.dumps(result).encode())
    spans = build_spans(info, [more if e is first else e for e in events])
    assert shape(spans) == [
        "invoke_agent claude-code",
        "  control initialize",
        "  turn 1",
        "    chat claude-opus-5-5",
        "    chat claude-opus-5-5",
    ]
    [unseen] = [s for s in spans if s.attributes.get(c.USAGE_SOURCE) == "unobserved"]
    [turn] = named(spans, "turn 1")
    assert unseen.parent_id == turn.span_id


def test_an_api_error_the_cli_wrote_as_its_own_message_is_no_chat_span() -> None:
    # Model "<synthetic>", zero usage: no API message, so no `chat` span; the turn
    # fails with the error, and the line is a span event (of the root here: with
    # no prompt line on stdin, `claude -p`, the turn's span begins at its result).
    cassette = read_cassette(FIXTURES / "api_error" / "overloaded.ndjson")
    info = RecordingInfo(id="01OVERLOADED", argv=cassette.argv, started_ns=START,
                         ended_ns=START + 7_000_000_000, exit_code=1)
    spans = build_spans(info, cassette.events)
    assert not [s for s in spans if s.name.startswith("chat")]
    (turn,) = named(spans, "turn 1")
    assert turn.status == "error"
    assert "assistant" in [e.name for span in spans for e in span.events]
