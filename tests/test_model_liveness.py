"""Liveness: what a session is doing now, from the session model alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from claudetrace.cassette import read_cassette
from claudetrace.model import Session
from claudetrace.model.events import Event
from claudetrace.model.liveness import liveness

FIXTURES = Path(__file__).parent / "fixtures" / "cassettes"


def states(name: str) -> list[str]:
    """The liveness states a real recording goes through, line by line (repeats folded)."""
    session = Session()
    seen: list[str] = []
    for event in read_cassette(FIXTURES / f"{name}.ndjson").events:
        session.add(event)
        state = liveness(session, ended=False).state
        if not seen or seen[-1] != state:
            seen.append(state)
    return seen


def test_a_permission_prompt_is_awaiting_approval_until_the_host_answers() -> None:
    assert states("permission_allow") == [
        "starting", "thinking", "awaiting approval", "thinking", "idle",
    ]


def test_stream_events_are_streaming_between_message_start_and_stop() -> None:
    seen = states("streamed_tools")
    assert seen[:4] == ["starting", "thinking", "streaming", "awaiting approval"]
    assert seen[-1] == "idle"


def line(seq: int, direction: str, obj: dict[str, Any], t_ms: int = 0) -> Event:
    return Event(seq, direction, t_ms * 1_000_000, json.dumps(obj).encode())


def test_ready_after_init_error_after_an_is_error_result_and_the_last_event_time() -> None:
    session = Session()
    assert liveness(session, ended=False).state == "starting"
    assert liveness(session, ended=False).last_event_ns is None
    session.add(line(0, "out", {"type": "system", "subtype": "init", "model": "m",
                                "claude_code_version": "2.1"}, 5))
    assert liveness(session, ended=False).state == "ready"
    session.add(line(1, "in", {"type": "user", "message": {"role": "user", "content": "hi"}}, 7))
    assert liveness(session, ended=False).label == "thinking · turn 1"
    # subtype success with is_error true: the CLI's is_error decides.
    session.add(line(2, "out", {"type": "result", "subtype": "success", "is_error": True}, 9))
    now = liveness(session, ended=False)
    assert (now.state, now.last_event_ns) == ("error", 9_000_000)
    assert now.detail == "turn 1: success"


@pytest.mark.parametrize(
    ("kw", "detail"),
    [
        ({"exit_code": 0}, "exit code 0"),
        ({"signal": 9, "exit_code": None}, "signal 9"),
        ({}, "the recording stopped"),
    ],
)
def test_an_ended_process_is_disconnected(kw: dict[str, Any], detail: str) -> None:
    session = Session()
    session.add(line(0, "in", {"type": "user", "message": {"role": "user", "content": "hi"}}))
    now = liveness(session, ended=True, **kw)
    assert now.label == f"disconnected · {detail}"


def test_a_cli_that_could_not_start_is_disconnected_even_before_its_end() -> None:
    now = liveness(Session(), ended=False, error="No such file: claude")
    assert now.label == "disconnected · No such file: claude"
