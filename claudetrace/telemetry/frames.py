"""The frames the proxy streams to its telemetry worker over a pipe.

One direction only, proxy → worker.  Every frame is a 5-byte head — a kind byte
and the body length (little-endian ``uint32``) — and a body:

- ``S`` (start, once, first): JSON ``{"info": RecordingInfo, "settings": OtelSettings}``
- ``E`` (one per event): ``seq`` u64, direction u8 (0 in, 1 out, 2 err), ``eol``
  u8, ``t_ns`` i64, ``wall_ns`` i64, then the line's bytes as recorded
- ``C`` (close, once, last): JSON of the final RecordingInfo (exit code, signal,
  ``ended_ns``, error, the CLI's session metadata)

Events carry the raw line, not parsed fields: the worker parses it with
:mod:`claudetrace.events` like every other consumer.  Encoding an event is one
``struct.pack`` (the proxy's cost); decoding is incremental, for a pipe that
delivers frames in arbitrary pieces.  Pure: no processes, no OpenTelemetry.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from dataclasses import dataclass
from typing import Any, Final

from ..events import Direction, Event
from ..recording import RecordingInfo
from .config import OtelSettings
from .content import ContentPolicy

KIND_START: Final = ord("S")
KIND_EVENT: Final = ord("E")
KIND_CLOSE: Final = ord("C")

_HEAD: Final = struct.Struct("<BI")  # kind, body length
_EVENT: Final = struct.Struct("<QBBqq")  # seq, direction, eol, t_ns, wall_ns
#: Head and event fields in one pack: what the proxy writes per event.
_EVENT_HEAD: Final = struct.Struct("<BIQBBqq")
_DIR_CODE: Final[dict[str, int]] = {"in": 0, "out": 1, "err": 2}
_CODE_DIR: Final[tuple[Direction, ...]] = ("in", "out", "err")


class FrameError(ValueError):
    """The byte stream is not a valid frame sequence (a bug, never user input)."""


@dataclass(frozen=True)
class Start:
    """The first frame: what is recorded and where its telemetry goes."""

    info: RecordingInfo
    settings: OtelSettings


@dataclass(frozen=True)
class Close:
    """The last frame: the recording ended, as described by ``info``."""

    info: RecordingInfo


Frame = Start | Event | Close


def _json_frame(kind: int, value: Any) -> bytes:
    body = json.dumps(value, separators=(",", ":"), default=str).encode()
    return _HEAD.pack(kind, len(body)) + body


def _settings_dict(settings: OtelSettings) -> dict[str, Any]:
    return {
        "protocol": settings.protocol,
        "traces_endpoint": settings.traces_endpoint,
        "metrics_endpoint": settings.metrics_endpoint,
        "resource": dict(settings.resource),
        "content": {"enabled": settings.content.enabled, "limit": settings.content.limit},
    }


def _settings_from(value: dict[str, Any]) -> OtelSettings:
    return OtelSettings(
        protocol=value["protocol"],
        traces_endpoint=value["traces_endpoint"],
        metrics_endpoint=value["metrics_endpoint"],
        resource=dict(value["resource"]),
        content=ContentPolicy(**value["content"]),
    )


def encode_start(info: RecordingInfo, settings: OtelSettings) -> bytes:
    """The start frame."""
    return _json_frame(
        KIND_START, {"info": dataclasses.asdict(info), "settings": _settings_dict(settings)}
    )


def event_head(event: Event) -> bytes:
    """The head of an event's frame; ``event.data`` follows it on the pipe."""
    return _EVENT_HEAD.pack(
        KIND_EVENT, _EVENT.size + len(event.data), event.seq, _DIR_CODE[event.direction],
        event.eol, event.t_ns, event.wall_ns,
    )


def encode_event(event: Event) -> bytes:
    """An event's whole frame (the proxy writes head and data without joining them)."""
    return event_head(event) + event.data


def encode_close(info: RecordingInfo) -> bytes:
    """The close frame."""
    return _json_frame(KIND_CLOSE, dataclasses.asdict(info))


class FrameDecoder:
    """Turns pipe reads back into frames; a frame split across reads waits for the rest."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held back."""
        return len(self._buffer)

    def feed(self, chunk: bytes) -> list[Frame]:
        """The frames completed by ``chunk``, in order."""
        buf = self._buffer
        buf += chunk
        frames: list[Frame] = []
        pos, end = 0, len(buf)
        head_size = _HEAD.size
        while end - pos >= head_size:
            kind, length = _HEAD.unpack_from(buf, pos)
            body = pos + head_size
            if end - body < length:
                break
            pos = body + length
            if kind == KIND_EVENT:
                if length < _EVENT.size:
                    raise FrameError(f"event frame of {length} bytes")
                seq, code, eol, t_ns, wall_ns = _EVENT.unpack_from(buf, body)
                data = bytes(buf[body + _EVENT.size : pos])
                frames.append(Event(seq, _CODE_DIR[code], t_ns, data, bool(eol), wall_ns))
            elif kind == KIND_START:
                value = json.loads(bytes(buf[body:pos]))
                frames.append(
                    Start(RecordingInfo(**value["info"]), _settings_from(value["settings"]))
                )
            elif kind == KIND_CLOSE:
                frames.append(Close(RecordingInfo(**json.loads(bytes(buf[body:pos])))))
            else:
                raise FrameError(f"unknown frame kind {kind!r}")
        del buf[:pos]
        return frames
