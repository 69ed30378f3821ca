"""Stable re-recording: a new recording of an unchanged application is the old cassette.

Every recording differs from the last in values nobody changed: the CLI's
session id and message uuids, the host's request ids, timestamps, durations,
the time stamp ``t`` of each line.  Committed as they are, a re-recorded
cassette would differ on every line and its diff would hide what did change.

:func:`stabilize` compares the new recording with the cassette it replaces,
line by line, after masking those volatile values (:func:`line_key`).  Lines
that are the same apart from them keep their old text and time stamp; lines
that really changed take the new text, with each volatile id the two recordings
share spelled as in the old cassette, and a time stamp shifted onto the old
time line.  The replay engine treats those ids as it treats any recorded id
(host ids are bound to live values, CLI ids are replayed), so the kept values
replay exactly as fresh ones would.  An unchanged application re-records to a
byte-identical cassette.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import Any, Final

from ..cassette import Cassette
from ..model.events import Event

#: Ids generated afresh by every run: uuids, SDK request ids, the real API's
#: message, tool use and request ids.
VOLATILE_IDS: Final = re.compile(
    rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    rb"|req_\d+_[0-9a-f]{6,}"
    rb"|(?:msg|toolu|req|srvtoolu)_[A-Za-z0-9]{20,}"
)

#: JSON keys whose (number or string) values vary from run to run: durations,
#: timings, timestamps, the CLI's process id and the socket named after it.
VOLATILE_KEYS: Final = (
    "pid",
    "messaging_socket_path",
    "duration_ms",
    "duration_api_ms",
    "ttft_ms",
    "ttft_stream_ms",
    "time_to_request_ms",
    "first_content_frame_ms",
    "totalDurationMs",
    "timestamp",
    "end_time",
    "start_time",
)
_KEYS_RE: Final = re.compile(
    rb'("(?:' + b"|".join(k.encode() for k in VOLATILE_KEYS) + rb')"\s*:\s*)'
    rb'(?:-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|"[^"\\]*")'
)
#: ISO 8601 timestamps inside any string.
_ISO_TIME: Final = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?")

#: Header fields that describe one run, not the session: kept from the old cassette.
RUN_FIELDS: Final = (
    "recording_id",
    "started_ns",
    "ended_ns",
    "started_at",
    "ended_at",
    "recorded_at",
    "duration_ms",
    "session_id",
)


def line_key(event: Event) -> tuple[str, bytes, bool]:
    """What must be equal for two recorded lines to count as the same line."""
    data = _KEYS_RE.sub(rb"\1<v>", event.data)
    data = _ISO_TIME.sub(b"<time>", data)
    data = VOLATILE_IDS.sub(b"<id>", data)
    return event.direction, data, event.eol


def _id_pairs(old: bytes, new: bytes) -> list[tuple[bytes, bytes]]:
    return list(
        zip(
            (m.group() for m in VOLATILE_IDS.finditer(new)),
            (m.group() for m in VOLATILE_IDS.finditer(old)),
            strict=False,
        )
    )


def stabilize(old: Cassette, new: Cassette) -> Cassette:
    """``new`` with the lines and values it shares with ``old`` spelled as in ``old``.

    Returns ``new`` unchanged when the two cannot be reconciled (an id of the new
    recording would map to two different old ids).
    """
    old_keys = [line_key(e) for e in old.events]
    new_keys = [line_key(e) for e in new.events]
    matcher = difflib.SequenceMatcher(a=old_keys, b=new_keys, autojunk=False)
    blocks = matcher.get_matching_blocks()
    # new line index -> old line index, for lines that are the same.
    same: dict[int, int] = {}
    for a, b, size in blocks:
        for k in range(size):
            same[b + k] = a + k
    ids: dict[bytes, bytes] = {}
    for j, i in same.items():
        for fresh, kept in _id_pairs(old.events[i].data, new.events[j].data):
            if ids.setdefault(fresh, kept) != kept:
                return new
    if _inverse_conflicts(ids):
        return new
    rename = _renamer(ids)
    # A changed line's time stamp moves onto the old time line, between the kept
    # lines around it, so that kept lines keep theirs exactly.
    ceiling = [0] * len(new.events)
    limit: int | None = None
    for j in range(len(new.events) - 1, -1, -1):
        if j in same:
            limit = old.events[same[j]].t_ns
        ceiling[j] = limit if limit is not None else -1
    events: list[Event] = []
    shift = 0
    for j, event in enumerate(new.events):
        if j in same:
            before = old.events[same[j]]
            shift = before.t_ns - event.t_ns
            data, t_ns, wall = before.data, before.t_ns, before.wall_ns
        else:
            data, t_ns, wall = rename(event.data), max(0, event.t_ns + shift), event.wall_ns
            if events:
                t_ns = max(t_ns, events[-1].t_ns)
            if ceiling[j] >= 0:
                t_ns = min(t_ns, ceiling[j])
        events.append(Event(j, event.direction, t_ns, data, event.eol, wall))
    return Cassette(header=_header(old.header, new.header), events=events)


def _inverse_conflicts(ids: Mapping[bytes, bytes]) -> set[bytes]:
    """Old ids that two different new ids map to."""
    seen: dict[bytes, bytes] = {}
    clash: set[bytes] = set()
    for fresh, kept in ids.items():
        if seen.setdefault(kept, fresh) != fresh:
            clash.add(kept)
    return clash


def _renamer(ids: Mapping[bytes, bytes]) -> Any:
    if not ids:
        return lambda data: data
    table = dict(ids)

    def rename(data: bytes) -> bytes:
        return VOLATILE_IDS.sub(lambda m: table.get(m.group(), m.group()), data)

    return rename


def _header(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(new)
    for key, value in new.items():
        if key not in old or old[key] == value:
            continue
        # Run details, and fields that differ only in volatile values, keep the
        # old spelling; anything else is a real change.
        if key in RUN_FIELDS or _masked(old[key]) == _masked(value):
            out[key] = old[key]
    return out


def _masked(value: Any) -> bytes:
    data = json.dumps(value, sort_keys=True).encode()
    return VOLATILE_IDS.sub(b"<id>", _ISO_TIME.sub(b"<time>", _KEYS_RE.sub(rb"\1<v>", data)))


__all__ = ["RUN_FIELDS", "VOLATILE_IDS", "VOLATILE_KEYS", "line_key", "stabilize"]
