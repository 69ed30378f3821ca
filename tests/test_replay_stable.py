"""Stable re-recording: what did not change keeps its old spelling (pure)."""

from __future__ import annotations

import json
from typing import Any

from claudetrace.cassette import Cassette, new_header
from claudetrace.model.events import Event
from claudetrace.replay.stable import line_key, stabilize


def ev(i: int, direction: str, obj: Any, t: float) -> Event:
    return Event(i, direction, int(t * 1e9), json.dumps(obj, separators=(",", ":")).encode())


def recording(
    session: str, uuids: list[str], req: str, answer: str, t0: float, ms: int
) -> Cassette:
    events = [
        ev(
            0,
            "in",
            {"type": "control_request", "request_id": req, "request": {"subtype": "initialize"}},
            t0,
        ),
        ev(
            1,
            "out",
            {
                "type": "control_response",
                "response": {"request_id": req, "subtype": "success"},
                "pid": 4242 + ms,
            },
            t0 + 0.1,
        ),
        ev(
            2,
            "out",
            {"type": "system", "subtype": "init", "session_id": session, "uuid": uuids[0]},
            t0 + 0.2,
        ),
        ev(
            3,
            "out",
            {
                "type": "assistant",
                "text": answer,
                "session_id": session,
                "uuid": uuids[1],
                "timestamp": f"2026-11-24T18:0{ms % 10}:00.000Z",
            },
            t0 + 0.3,
        ),
        ev(
            4,
            "out",
            {"type": "result", "session_id": session, "uuid": uuids[2], "duration_ms": ms},
            t0 + 0.4,
        ),
    ]
    return Cassette(new_header(argv=["claude"], session_id=session, recording_id=f"r{ms}"), events)


OLD = recording(
    "11111111-1111-4111-8111-111111111111",
    [
        "aaaaaaaa-0000-4000-8000-000000000001",
        "aaaaaaaa-0000-4000-8000-000000000002",
        "aaaaaaaa-0000-4000-8000-000000000003",
    ],
    "req_1_0badf00d",
    "Hello",
    0.01,
    812,
)


def fresh(answer: str) -> Cassette:
    return recording(
        "22222222-2222-4222-8222-222222222222",
        [
            "bbbbbbbb-0000-4000-8000-000000000001",
            "bbbbbbbb-0000-4000-8000-000000000002",
            "bbbbbbbb-0000-4000-8000-000000000003",
        ],
        "req_1_c0ffee11",
        answer,
        0.02,
        907,
    )


def test_an_unchanged_recording_is_the_old_cassette() -> None:
    stable = stabilize(OLD, fresh("Hello"))
    assert [e.data for e in stable.events] == [e.data for e in OLD.events]
    assert [e.t_ns for e in stable.events] == [e.t_ns for e in OLD.events]
    assert stable.header["session_id"] == OLD.header["session_id"]
    assert stable.header["recording_id"] == OLD.header["recording_id"]


def test_a_changed_line_is_new_with_the_old_ids_and_time_line() -> None:
    stable = stabilize(OLD, fresh("Goodbye"))
    changed = [
        i
        for i, (a, b) in enumerate(zip(OLD.events, stable.events, strict=True))
        if a.data != b.data
    ]
    assert changed == [3]
    line = json.loads(stable.events[3].data)
    assert line["text"] == "Goodbye"
    # The session id is the old one (shared with kept lines); the new uuid has no
    # old counterpart and stays new.
    assert line["session_id"] == "11111111-1111-4111-8111-111111111111"
    assert line["uuid"] == "bbbbbbbb-0000-4000-8000-000000000002"
    times = [e.t_ns for e in stable.events]
    assert times == sorted(times) and times[2] <= times[3] <= times[4]


def test_volatile_values_do_not_make_lines_differ() -> None:
    a, b = OLD.events[4], fresh("Hello").events[4]
    assert a.data != b.data and line_key(a) == line_key(b)
