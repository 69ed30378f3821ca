"""A recording's id: a ULID, made before anything else is loaded.

With live telemetry the proxy gives the CLI a ``TRACEPARENT`` derived from the
recording's id, so the id exists before the child starts; this module imports
nothing but :mod:`os` and :mod:`time`, which the interpreter has loaded anyway.
"""

from __future__ import annotations

import os
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_recording_id(now_ns: int | None = None, *, random: bytes | None = None) -> str:
    """A sortable, unique recording id: a ULID (26 Crockford base32 characters).

    The first 10 characters encode the start time in milliseconds, so ids sort by
    start time as text; the last 16 are random (from :func:`os.urandom`, as
    :mod:`secrets` draws them, without its imports), or the first 10 bytes of
    ``random`` (a digest, for an id every importer of one session makes alike).
    """
    ms = (time.time_ns() if now_ns is None else now_ns) // 1_000_000
    tail = os.urandom(10) if random is None else random[:10]
    value = (ms << 80) | int.from_bytes(tail, "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def recording_id_ns(recording_id: str) -> int:
    """The time (Unix ns, to the millisecond) :func:`new_recording_id` made
    ``recording_id`` of: its first 10 characters."""
    ms = 0
    for char in recording_id[:10]:
        ms = (ms << 5) | _CROCKFORD.index(char)
    return ms * 1_000_000
