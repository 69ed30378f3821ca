"""Conversation shaping on recordings of the real CLI (tests/fixtures/cassettes)."""

from __future__ import annotations

import json
from pathlib import Path

from claudetrace.cassette import read_cassette
from claudetrace.model.events import Event
from claudetrace.ui.conversation import build_conversation, walk

CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"


def conversation(name: str) -> list:
    return build_conversation(read_cassette(CASSETTES / f"{name}.ndjson").events)


def kinds(items: list) -> list[tuple[str, str]]:
    return [(i.kind, i.text) for _, i in walk(items) if i.kind != "system"]


def test_plain_turn_reads_as_a_chat() -> None:
    assert kinds(conversation("plain")) == [
        ("user", "Say hello."),
        ("assistant", "Hello from the fake model."),
        ("result", "Hello from the fake model."),
    ]


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
