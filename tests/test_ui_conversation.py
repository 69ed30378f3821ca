"""Conversation shaping on recordings of the real CLI (tests/fixtures/cassettes)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

import claudetrace
from claudetrace.cassette import read_cassette
from claudetrace.model import fold
from claudetrace.model.events import Event
from claudetrace.ui.conversation import Item, LazyConversation, build_conversation, walk

CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"


def conversation(name: str) -> list:
    return build_conversation(read_cassette(CASSETTES / f"{name}.ndjson").events)


def kinds(items: list) -> list[tuple[str, str]]:
    return [(i.kind, i.text) for _, i in walk(items) if i.kind != "system"]


def test_plain_turn_reads_as_a_chat() -> None:
    assert kinds(conversation("plain")) == [
        ("user", "Say hello."),
        ("assistant", "Hello from the fake model."),
        ("result", ""),  # it repeats the answer: held once
    ]
    (result,) = [i for i in conversation("plain") if i.kind == "result"]
    assert [a.text for a in result.answers] == ["Hello from the fake model."]


def test_thinking_is_its_own_item() -> None:
    items = [i for _, i in walk(conversation("multi_turn"))]
    thinking = [i for i in items if i.kind == "thinking"]
    assert [t.text for t in thinking] == ["The user wants a second answer."]
    assert [i.text for i in items if i.kind == "user"] == [
        "First question.",
        "Second question.",
        "Third question.",
    ]


def test_permission_allow_and_deny_attach_to_the_tool_call() -> None:
    (allowed,) = [i.tool for i in conversation("permission_allow") if i.tool]
    assert allowed.name == "Bash"
    assert allowed.input["command"].startswith("touch")
    assert [(d.kind, d.outcome) for d in allowed.decisions] == [("permission", "allow")]
    assert not allowed.is_error
    (denied,) = [i.tool for i in conversation("permission_deny") if i.tool]
    assert [(d.kind, d.outcome) for d in denied.decisions] == [("permission", "deny")]
    assert denied.is_error and denied.result == "Not in this test."


def test_hook_outcomes_attach_to_the_tool_call() -> None:
    (call,) = [i.tool for i in conversation("hooks") if i.tool]
    assert [(d.name, d.outcome) for d in call.decisions] == [
        ("PreToolUse", "continue"),
        ("PostToolUse", "continue"),
    ]
    assert call.result == "hooked"


def test_answer_recorded_before_its_request_is_still_paired() -> None:
    # In this recording the host's allow is read before the CLI's request line.
    (call,) = [i.tool for i in conversation("cli_dies") if i.tool]
    assert [d.outcome for d in call.decisions] == ["allow"]
    assert not call.answered  # the CLI died before the tool produced a result


def test_host_control_requests_show_inline() -> None:
    texts = [i.text for i in conversation("set_model_and_mode") if i.kind == "system"]
    assert any("set_model" in t and "claude-sonnet-5" in t for t in texts)
    assert any(t.startswith("<local-command-stdout>") for t in texts)


def test_interrupted_turn_result_is_an_error() -> None:
    results = [i for i in conversation("interrupt") if i.kind == "result"]
    assert [r.is_error for r in results] == [True, False]


def _ev(seq: int, direction: str, obj: object) -> Event:
    return Event(seq, direction, seq * 1000, json.dumps(obj).encode())  # type: ignore[arg-type]


def test_subagent_lines_nest_under_their_task_call() -> None:
    events = [
        _ev(0, "in", {"type": "user", "message": {"role": "user", "content": "go"}}),
        _ev(
            1,
            "out",
            {
                "type": "assistant",
                "message": {
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "task1",
                            "name": "Task",
                            "input": {"subagent_type": "x"},
                        }
                    ]
                },
            },
        ),
        _ev(
            2,
            "out",
            {
                "type": "assistant",
                "parent_tool_use_id": "task1",
                "message": {
                    "content": [
                        {"type": "text", "text": "sub work"},
                        {"type": "tool_use", "id": "inner", "name": "Bash", "input": {}},
                    ]
                },
            },
        ),
        _ev(
            3,
            "out",
            {
                "type": "user",
                "parent_tool_use_id": "task1",
                "message": {
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "inner",
                            "content": "boom",
                            "is_error": True,
                        }
                    ]
                },
            },
        ),
        _ev(
            4,
            "out",
            {
                "type": "user",
                "message": {
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "task1",
                            "content": [{"type": "text", "text": "done"}],
                        }
                    ]
                },
            },
        ),
    ]
    items = build_conversation(events)
    assert [i.kind for i in items] == ["user", "tool"]
    task = items[1].tool
    assert task is not None and task.result == "done"
    assert [(c.kind, c.text) for c in task.children] == [
        ("assistant", "sub work"),
        ("tool", "Bash"),
    ]
    inner = task.children[1].tool
    assert inner is not None and inner.is_error and inner.result == "boom"
    assert [(d, i.kind) for d, i in walk(items)][2:] == [(1, "assistant"), (1, "tool")]


def test_malformed_stderr_and_unknown_lines_are_kept() -> None:
    events = [
        Event(0, "out", 0, b"{broken"),
        Event(1, "err", 1, b"warning: something"),
        _ev(2, "out", {"type": "brand_new_type", "x": 1}),
        Event(3, "out", 3, b""),
    ]
    items = build_conversation(events)
    assert [(i.kind, i.is_error) for i in items] == [
        ("error", True),
        ("stderr", True),
        ("system", False),
        ("error", True),
    ]
    assert "{broken" in items[0].text and "brand_new_type" in items[2].text


def _shown(items: list[Item]) -> list[tuple[object, ...]]:
    """Everything an item shows (a turn by what its result line says: its model
    calls compare by identity)."""
    out: list[tuple[object, ...]] = []
    for depth, i in walk(items):
        tool = i.tool and (i.tool.tool_use_id, i.tool.name, i.tool.input, i.tool.result,
                           i.tool.result_seq, i.tool.is_error, i.tool.decisions)
        turn = i.turn and (i.turn.number, i.turn.end_seq, i.turn.result_subtype,
                           i.turn.is_error, i.turn.cost_usd, i.turn.total_cost_usd)
        out.append((depth, i.kind, i.seq, i.t, i.text, i.is_error, tool, i.decision, i.data,
                    turn))
    return out


def _paged(events: Sequence[Event], cut: int, *, step: int) -> list[Item]:
    """The conversation as the session page shows it: a part of ``cut`` lines, then
    the rest, read ``step`` lines at a time."""
    conversation = LazyConversation(lambda start, limit: [
        e for e in events if e.seq >= start][:limit], step=step)
    first, following = conversation.part(0, cut)
    if following is None:
        return first
    rest, after = conversation.part(following, len(events))
    assert after is None
    return first + rest


SUBAGENT_BEFORE_ITS_RESULT = [
    _ev(0, "in", {"type": "user", "message": {"role": "user", "content": "go"}}),
    _ev(1, "out", {"type": "assistant", "message": {"content": [
        {"type": "tool_use", "id": "task1", "name": "Task", "input": {"subagent_type": "x"}}]}}),
    _ev(2, "out", {"type": "assistant", "parent_tool_use_id": "task1", "message": {"content": [
        {"type": "tool_use", "id": "inner", "name": "Bash", "input": {}}]}}),
    _ev(3, "out", {"type": "user", "parent_tool_use_id": "task1", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "inner", "content": "boom", "is_error": True}]}}),
    _ev(4, "out", {"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "task1", "content": "done"}]}}),
]


@pytest.mark.parametrize("path", [
    *(CASSETTES / f"{name}.ndjson" for name in (
        "subagent", "hooks", "permission_allow", "permission_deny", "streamed_tools", "mcp_tool")),
    Path(claudetrace.__file__).parent / "demo_data" / "session.cassette.ndjson",
], ids=lambda path: path.name.split(".")[0])
def test_every_part_boundary_shows_the_unpaged_conversation(path: Path) -> None:
    events = read_cassette(path).events
    # Each line shown against the whole fold, as the conversation was before parts.
    whole = _shown(build_conversation(events, fold(events)))
    assert _shown(build_conversation(events)) == whole
    assert any(row[6] is not None for row in whole)
    shown = sum(1 for e in events if e.type not in ("stream_event", "keep_alive"))
    for cut in range(1, shown + 1):
        for step in (1, 7, len(events)):
            assert _shown(_paged(events, cut, step=step)) == whole, (cut, step)


def test_a_part_takes_its_tool_results_and_subagent_lines_from_later_lines() -> None:
    whole = _shown(build_conversation(SUBAGENT_BEFORE_ITS_RESULT))
    assert [(depth, kind) for depth, kind, *_ in whole] == [(0, "user"), (0, "tool"), (1, "tool")]
    for cut in range(1, 6):
        assert _shown(_paged(SUBAGENT_BEFORE_ITS_RESULT, cut, step=1)) == whole, cut
    conversation = LazyConversation(lambda start, limit: [
        e for e in SUBAGENT_BEFORE_ITS_RESULT if e.seq >= start][:limit], step=1)
    first, following = conversation.part(0, 2)
    assert following == 2 and [i.kind for i in first] == ["user", "tool"]
    task = first[1].tool
    assert task is not None and task.name == "Task" and task.result == "done"
    assert [c.text for c in task.children] == ["Bash"]
    assert conversation.part(following, 300) == ([], None)  # shown in the first part


def _lines(*objs: dict) -> list[Event]:
    return [Event(i, d, i * 1_000_000, json.dumps(o).encode()) for i, (d, o) in enumerate(objs)]


def _prompt(text: str, uuid: str) -> tuple[str, dict]:
    return "in", {"type": "user", "uuid": uuid, "message": {"role": "user", "content": text}}


def _answer(text: str) -> tuple[str, dict]:
    return "out", {"type": "assistant", "message": {"id": f"m-{text}", "role": "assistant",
                                                    "content": [{"type": "text", "text": text}]}}


def _result() -> tuple[str, dict]:
    return "out", {"type": "result", "subtype": "success", "is_error": False}


def test_a_rewind_marks_the_abandoned_branch_and_compaction_is_a_marker() -> None:
    items = build_conversation(_lines(
        _prompt("first", "u1"), _answer("one"), _result(),
        _prompt("abandoned idea", "u2"), _answer("two"), _result(),
        ("out", {"type": "system", "subtype": "rewind", "branch_from": "u1",
                 "abandoned_prompts": ["u2"]}),
        _prompt("better idea", "u3"), _answer("three"), _result(),
        ("out", {"type": "system", "subtype": "compact_boundary",
                 "compactMetadata": {"trigger": "auto", "preTokens": 150000}}),
        ("out", {"type": "user", "claudetrace_kind": "compact_summary",
                 "message": {"role": "user", "content": "Summary of what came before."}}),
    ))
    shown = [(i.kind, i.text, i.abandoned) for i in items if i.kind != "result"]
    assert shown[:2] == [("user", "first", False), ("assistant", "one", False)]
    assert shown[2:4] == [("user", "abandoned idea", True), ("assistant", "two", True)]
    assert shown[4][0] == "rewind" and "the last prompt" in shown[4][1] and not shown[4][2]
    assert shown[5] == ("user", "better idea", False)
    assert shown[7] == ("compaction", "conversation compacted (auto, 150,000 tokens before)",
                        False)
    assert (items[-1].kind, items[-1].label) == ("compaction", "compaction summary")


def test_steering_and_teammate_messages_are_labelled() -> None:
    items = build_conversation(_lines(
        _prompt("start", "u1"),
        _prompt("also do this", "u2"),  # sent while turn 1 runs: steering
        _answer("ok"), _result(), _result(),
        ("out", {"type": "user", "claudetrace_kind": "teammate",
                 "message": {"role": "user", "content": "from alice: ship it"}}),
        ("out", {"type": "user", "claudetrace_kind": "steering",
                 "message": {"role": "user", "content": "typed while it ran"}}),
    ))
    users = [(i.text, i.label) for i in items if i.kind == "user"]
    assert users == [
        ("start", None),
        ("also do this", "steering (sent while turn 1 ran)"),
        ("from alice: ship it", "teammate message"),
        ("typed while it ran", "steering"),
    ]


def test_a_transcript_s_commands_and_teammate_messages_read_without_their_markup() -> None:
    # The page and the report showed "<command-name>/compact</command-name>
    # <command-message>compact</command-message> <command-args></command-args>" and
    # '<teammate-message teammate_id="reviewer">…' where claude-code-log shows
    # "/compact" and the reviewer's words.
    from claudetrace.ui.conversation import user_line

    def line(kind: str, text: str) -> tuple[str, str | None]:
        (item,) = build_conversation(_lines(("out", {
            "type": "user", "claudetrace_kind": kind,
            "message": {"role": "user", "content": text}})))
        return item.text, item.label

    assert line("command", "<command-name>/compact</command-name>\n<command-message>compact"
                "</command-message>\n<command-args></command-args>") == ("/compact", "command")
    assert line("command", "<command-name>/model</command-name> <command-args>opus"
                "</command-args>") == ("/model opus", "command")
    assert line("command", "<local-command-stdout>Compacted</local-command-stdout>") == (
        "Compacted", "command output")
    assert line("command", "<local-command-stdout></local-command-stdout>") == (
        "(no output)", "command output")
    assert line("teammate", '<teammate-message teammate_id="reviewer">Please also check the '
                "refund rounding.</teammate-message>") == (
        "Please also check the refund rounding.", "teammate message from reviewer")
    # Another shape is shown as it is, never lost.
    assert user_line("command", "/compact by hand") == ("/compact by hand", "command")
    assert user_line("teammate", "from alice: ship it") == (
        "from alice: ship it", "teammate message")


def test_the_session_starts_once_though_each_turn_says_init() -> None:
    # The CLI writes system/init at each turn's start, and an imported transcript's
    # converter does too: the conversation said "session started" before each.
    from claudetrace.formats.claude_code import read_transcript

    transcript = (Path(__file__).parent / "fixtures" / "transcripts" / "projects"
                  / "-home-dev-dmg" / "deadbeef-4444-4555-8666-777788889999.jsonl")
    events = read_transcript(transcript).events
    items = build_conversation(events, fold(events))
    assert [i.kind for i in items].count("user") == 2
    assert [i.text for i in items if " · CLI " in i.text] == [
        "session started · model claude-opus-4-5-20251101 · CLI 2.1.12"]
    assert [i.text for i in conversation("multi_turn") if " · CLI " in i.text] == [
        "session started · model claude-opus-5-5 · CLI 2.1.330"]
    # Another model after set_model is said, once.
    said = [i.text for i in conversation("set_model_and_mode") if " · CLI " in i.text]
    assert said == ["session started · model claude-opus-5-5 · CLI 2.1.330",
                    "now · model claude-sonnet-5 · CLI 2.1.330"]
