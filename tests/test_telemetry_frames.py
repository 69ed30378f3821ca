"""The proxy → telemetry worker frames: a pure encode/decode round trip."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from claudetrace.events import Event
from claudetrace.recording import RecordingInfo
from claudetrace.telemetry.config import resolve_settings
from claudetrace.telemetry.content import ContentPolicy
from claudetrace.telemetry.frames import (
    Close,
    FrameDecoder,
    FrameError,
    Start,
    encode_close,
    encode_event,
    encode_start,
)

INFO = RecordingInfo(
    id="01JTESTFRAMES00000000000000", argv=["claude", "-p"], started_ns=1_700_000_000_000_000_000,
    cwd="/w", host="h", pid=42, name="n", tags={"k": "v"}, env={"A": "1"},
    claudetrace_version="0.1", extra={"nested": [1, "x"]},
)
SETTINGS = resolve_settings(
    endpoint="http://127.0.0.1:4318", capture_content=True,
    environ={"OTEL_RESOURCE_ATTRIBUTES": "team=a,env=b", "CLAUDETRACE_OTEL_CONTENT_LIMIT": "99"},
)
EVENTS = [
    Event(0, "in", 5, b'{"type":"user"}', True, 1_700_000_000_000_000_005),
    Event(1, "out", 7, "{\"text\":\"h\u00e9\"}".encode(), True, 1_700_000_000_000_000_007),
    Event(2, "err", 9, b"\xff\xfe not utf-8", True, 1_700_000_000_000_000_009),
    Event(3, "out", 11, b"", True, 1_700_000_000_000_000_011),
    Event(4, "out", 12, b"x" * 200_000, False, 1_700_000_000_000_000_012),
]


def _stream() -> bytes:
    closed = RecordingInfo(**{**INFO.__dict__, "exit_code": 3, "signal": None,
                              "ended_ns": INFO.started_ns + 99, "model": "claude-x",
                              "cli_session_id": "s-1", "error": "boom"})
    return (encode_start(INFO, SETTINGS) + b"".join(encode_event(e) for e in EVENTS)
            + encode_close(closed))


def _same_event(a: object, b: Event) -> bool:
    assert isinstance(a, Event)
    return (a.seq, a.direction, a.t_ns, a.data, a.eol, a.wall_ns) == (
        b.seq, b.direction, b.t_ns, b.data, b.eol, b.wall_ns)


def _check(frames: list[object]) -> None:
    start, *events, close = frames
    assert isinstance(start, Start)
    assert start.info == INFO
    assert start.settings == SETTINGS
    assert start.settings.content == ContentPolicy(enabled=True, limit=99)
    assert len(events) == len(EVENTS)
    assert all(_same_event(got, want) for got, want in zip(events, EVENTS, strict=True))
    assert isinstance(close, Close)
    assert (close.info.exit_code, close.info.ended_ns, close.info.model, close.info.error) == (
        3, INFO.started_ns + 99, "claude-x", "boom")


def test_round_trip_in_one_read() -> None:
    decoder = FrameDecoder()
    _check(decoder.feed(_stream()))
    assert decoder.pending == 0


def test_round_trip_a_byte_at_a_time() -> None:
    decoder = FrameDecoder()
    data = _stream()
    frames: list[object] = []
    for i in range(0, len(data) - 200_000, 1):  # byte by byte up to the big line
        frames += decoder.feed(data[i : i + 1])
    frames += decoder.feed(data[len(data) - 200_000 :])
    _check(frames)


@given(st.lists(st.integers(min_value=0, max_value=len(_stream())), max_size=30))
def test_round_trip_whatever_the_pipe_splits(cuts: list[int]) -> None:
    data = _stream()
    bounds = [0, *sorted(cuts), len(data)]
    decoder = FrameDecoder()
    frames: list[object] = []
    for lo, hi in itertools.pairwise(bounds):
        frames += decoder.feed(data[lo:hi])
    _check(frames)
    assert decoder.pending == 0


def test_an_incomplete_frame_waits() -> None:
    decoder = FrameDecoder()
    frame = encode_event(EVENTS[0])
    assert decoder.feed(frame[:-1]) == []
    assert decoder.pending == len(frame) - 1
    (event,) = decoder.feed(frame[-1:])
    assert _same_event(event, EVENTS[0])
    assert event.fields.type == "user"  # parsed by the one event parser, on demand


def test_garbage_is_an_error_not_a_guess() -> None:
    with pytest.raises(FrameError, match="unknown frame kind"):
        FrameDecoder().feed(b"Z\x00\x00\x00\x00")
