"""Control-plane pairing on real-CLI recordings and edge cases."""

from __future__ import annotations

import json
from pathlib import Path

from claudetrace.cassette import read_cassette
from claudetrace.model.events import Event
from claudetrace.ui.controlplane import control_rows

CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"


def rows(name: str) -> list:
    return control_rows(read_cassette(CASSETTES / f"{name}.ndjson").events)


def test_every_request_is_paired_with_latency_and_outcome() -> None:
    table = rows("mcp_tool")
    assert [(r.initiator, r.subtype, r.outcome) for r in table] == [
        ("host", "initialize", "success"),
        ("cli", "mcp_message", "success"),
        ("cli", "mcp_message", "success"),
        ("cli", "mcp_message", "success"),
        ("cli", "mcp_message", "success"),
    ]
    assert [r.detail for r in table[1:]] == [
        "calc initialize",
        "calc notifications/initialized",
        "calc tools/list",
        "calc tools/call",
    ]
    assert all(r.latency_ms is not None and r.latency_ms >= 0 for r in table)
    assert not any(r.unanswered for r in table)


def test_permission_outcome_is_reported() -> None:
    assert [r.detail for r in rows("permission_deny") if r.subtype == "can_use_tool"] == [
        "Bash → deny"
    ]
    assert [r.detail for r in rows("set_model_and_mode")][1:] == ["claude-sonnet-5", "acceptEdits"]


def _ev(seq: int, direction: str, obj: object) -> Event:
    return Event(seq, direction, seq * 1_000_000, json.dumps(obj).encode())  # type: ignore[arg-type]


def test_unanswered_cancelled_error_and_orphan() -> None:
    events = [
        _ev(
            0,
            "in",
            {"type": "control_request", "request_id": "a", "request": {"subtype": "interrupt"}},
        ),
        _ev(
            1,
            "out",
            {
                "type": "control_request",
                "request_id": "b",
                "request": {"subtype": "can_use_tool", "tool_name": "Bash"},
            },
        ),
        _ev(2, "out", {"type": "control_cancel_request", "request_id": "b"}),
        _ev(
            3,
            "in",
            {"type": "control_request", "request_id": "c", "request": {"subtype": "set_model"}},
        ),
        _ev(
            4,
            "out",
            {
                "type": "control_response",
                "response": {"subtype": "error", "request_id": "c", "error": "bad model"},
            },
        ),
        _ev(
            5,
            "out",
            {"type": "control_response", "response": {"subtype": "success", "request_id": "zzz"}},
        ),
    ]
    table = control_rows(events)
    assert [(r.request_id, r.outcome) for r in table] == [
        ("a", "unanswered"),
        ("b", "cancelled"),
        ("c", "error"),
        ("zzz", "orphan response"),
    ]
    assert table[0].unanswered and table[0].as_dict()["unanswered"] is True
    assert table[1].latency_ms == 1.0
    assert table[2].detail == "bad model"
