"""The shared protocol accessors: what a line says, read the same way by every consumer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from claudetrace.model.content import message_content
from claudetrace.model.events import Direction, Event
from claudetrace.model.protocol import (
    answer_verdict,
    control_request,
    control_response,
    failed_tool_ids,
    hook_event_name,
    hook_permission_decision,
    json_number,
    opt_str,
    permission_behavior,
    permission_decision,
    request_tool_name,
    tool_result_failed,
    total_cost_usd,
)


def line(obj: Any, direction: Direction = "out") -> Event:
    return Event(0, direction, 0, json.dumps(obj).encode())


def answer(body: Any, subtype: str = "success") -> Event:
    return line(
        {
            "type": "control_response",
            "response": {"subtype": subtype, "request_id": "r1", "response": body},
        },
        "in",
    )


def test_opt_str_keeps_only_strings() -> None:
    assert opt_str("x") == "x"
    assert opt_str("") == ""
    assert opt_str(3) is None and opt_str(None) is None


def test_control_request_and_response_objects() -> None:
    req = line({"type": "control_request", "request_id": "r1", "request": {"subtype": "x"}})
    assert control_request(req) == {"subtype": "x"}
    assert control_request(line({"type": "control_request", "request": "nope"})) == {}
    assert control_response(answer({"behavior": "allow"}))["response"] == {"behavior": "allow"}
    assert control_response(Event(0, "in", 0, b"not json")) == {}


def test_permission_decision_is_allow_or_deny_only() -> None:
    assert permission_decision(answer({"behavior": "allow", "updatedInput": {}})) == "allow"
    assert permission_decision(answer({"behavior": "deny", "message": "no"})) == "deny"
    # A behaviour the SDKs do not define is still read, but is not a decision.
    assert permission_behavior({"behavior": "ask"}) == "ask"
    assert permission_decision(answer({"behavior": "ask"})) is None
    assert permission_decision(answer(None, "error")) is None
    assert permission_decision(Event(0, "in", 0, b"not json")) is None
    assert permission_behavior("allow") is None
    assert permission_behavior({"behavior": 1}) is None


def test_hook_answers_and_requests() -> None:
    answer_body = {
        "hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny"}
    }
    assert hook_permission_decision(answer_body) == "deny"
    assert hook_permission_decision({"continue": True}) is None
    assert hook_permission_decision({"hookSpecificOutput": "deny"}) is None
    assert hook_permission_decision(None) is None
    request = {
        "subtype": "hook_callback",
        "callback_id": "hook_0",
        "input": {"hook_event_name": "PreToolUse", "tool_name": "Bash"},
    }
    assert hook_event_name(request) == "PreToolUse"
    assert hook_event_name({"input": []}) is None


@pytest.mark.parametrize(
    ("request_obj", "expected"),
    [
        ({"tool_name": "Write", "input": {"tool_name": "Bash"}}, "Write"),  # can_use_tool
        ({"input": {"tool_name": "Bash"}}, "Bash"),  # hook_callback
        ({"tool_name": 7, "input": {"tool_name": "Bash"}}, "Bash"),
        ({"input": "Bash"}, None),
        ({}, None),
    ],
)
def test_request_tool_name(request_obj: dict[str, Any], expected: str | None) -> None:
    assert request_tool_name(request_obj) == expected


def test_failed_tool_results() -> None:
    user = line(
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "a", "is_error": True, "content": "x"},
                    {"type": "tool_result", "tool_use_id": "b", "content": "y"},
                    {"type": "tool_result", "tool_use_id": "c", "is_error": False},
                    {"type": "tool_result", "tool_use_id": 5, "is_error": True},
                    {"type": "text", "text": "is_error", "is_error": True},
                ],
            },
        }
    )
    assert failed_tool_ids(user) == {"a"}
    assert tool_result_failed({"is_error": True}) and not tool_result_failed({})
    prompt = line({"type": "user", "message": {"role": "user", "content": "hi"}}, "in")
    assert message_content(prompt) == "hi"
    assert failed_tool_ids(prompt) == set()
    assert message_content(line({"type": "user"})) is None


def test_json_numbers_and_the_running_total_cost() -> None:
    assert json_number(2) == 2.0 and isinstance(json_number(2), float)
    assert json_number(0.5) == 0.5
    assert json_number(True) is None and json_number("1") is None and json_number(None) is None
    result = line({"type": "result", "subtype": "success", "total_cost_usd": 0.0123})
    assert total_cost_usd(result) == 0.0123
    assert total_cost_usd(line({"type": "result", "total_cost_usd": False})) is None
    assert total_cost_usd(Event(0, "out", 0, b"[]")) is None


def test_what_a_permission_or_hook_answer_decided() -> None:
    assert answer_verdict("can_use_tool", {"behavior": "deny", "message": "no"}) == "deny"
    assert answer_verdict("can_use_tool", {}) == "answered"
    assert answer_verdict("hook_callback",
                          {"hookSpecificOutput": {"permissionDecision": "ask"}}) == "ask"
    assert answer_verdict("hook_callback", {"decision": "block"}) == "block"
    assert answer_verdict("hook_callback", {"continue": False}) == "stop"
    assert answer_verdict("hook_callback", {}) == "continue"
    assert answer_verdict("can_use_tool", None) == "error"


def _text_of_blocks(event: Event) -> str:
    """searchable_text as it read the blocks of a line (before it walked the JSON)."""
    from claudetrace.model.content import blocks, message_blocks
    from claudetrace.model.protocol import _values

    def block_text(block: Any, out: list[str]) -> None:
        if block.kind == "tool_use":
            if block.name:
                out.append(block.name)
            _values(block.input, out)
        elif block.kind == "tool_result":
            for part in blocks(block.raw.get("content") if isinstance(block.raw, dict) else None):
                block_text(part, out)
        elif block.text:
            out.append(block.text)

    out: list[str] = []
    if event.fields.type in ("user", "assistant"):
        for block in message_blocks(event):
            block_text(block, out)
    elif event.fields.type == "result":
        result = (event.message or {}).get("result")
        if isinstance(result, str):
            out.append(result)
    return "\n".join(out)


def test_the_searchable_text_is_what_the_blocks_say() -> None:
    from claudetrace.model.protocol import searchable_text
    from tests.test_content import SHAPES

    lines: list[Any] = [{"type": "result", "result": "done"}, {"type": "result", "result": 1},
                        {"type": "user", "message": "not an object"}, {"type": "system"}]
    for content in SHAPES:
        for kind in ("user", "assistant"):
            lines.append({"type": kind, "message": {"role": kind, "content": content}})
    for obj in lines:
        event = Event(0, "out", 0, json.dumps(obj).encode())
        assert searchable_text(event) == _text_of_blocks(event), obj
    assert "Bash\nls\n1\n2.5\nAgain" in searchable_text(Event(0, "out", 0, json.dumps(
        lines[-1]).encode()))
