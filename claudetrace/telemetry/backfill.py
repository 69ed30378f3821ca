"""Backfill: stored recordings exported as OTLP traces and metrics.

The same span builder runs over the events read back from the store, with the
recording's stored metadata, so a backfill reproduces the live export exactly:
same ids, names, attributes and recorded times.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..errors import TelemetryError
from .content import ContentPolicy
from .records import SpanRecord
from .spans import SpanBuilder

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
#: The latest time a stored ``started_ns`` (a signed 64-bit integer) can hold.
_LAST_NS = 2**63 - 1


def _epoch_ns(ns: float) -> int:
    """``ns`` since the epoch held to what a store can compare: a time before 1970
    is 0 (no recording is older), one past 2262 the last ns a store holds."""
    return 0 if ns <= 0 else _LAST_NS if ns >= _LAST_NS else int(ns)


def parse_since(text: str, now_ns: int | None = None, *, option: str = "--since") -> int:
    """Epoch ns from ``--since`` (or another ``option``): a duration ago (``30m``,
    ``2h``, ``7d``) or an ISO date.

    A date or datetime without a zone is local time.
    """
    now = time.time_ns() if now_ns is None else now_ns
    match = _DURATION.match(text)
    if match:
        ago = float(match.group(1)) * _UNIT_S[match.group(2)] * 1e9  # inf for 400 digits
        return now - int(ago) if ago < now else 0
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise TelemetryError(
            f"{option} {text!r} is neither a duration (30m, 2h, 7d) nor an ISO date"
        ) from exc
    try:
        seconds = when.timestamp()
    except (OverflowError, OSError, ValueError):  # year 1 in local time is year 0 in UTC
        seconds = 0.0 if when.year < 1970 else math.inf
    return _epoch_ns(seconds * 1e9)


def select_recordings(
    store: Any, sessions: Sequence[str], *, all_: bool = False, since_ns: int | None = None
) -> list[str]:
    """Recording ids named by SESSION arguments, ``--all`` and ``--since`` (oldest first)."""
    ids: list[str] = []
    for query in sessions:
        rec = store.resolve(query)
        if rec.id not in ids:
            ids.append(rec.id)
    if all_ or since_ns is not None:
        for rec in store.list_recordings(since_ns=since_ns, newest_first=False):
            if rec.id not in ids:
                ids.append(rec.id)
    return ids


def recording_spans(
    store: Any,
    recording_id: str,
    *,
    content: ContentPolicy | None = None,
    on_end: Callable[[SpanRecord], None] | None = None,
    info: Any = None,
) -> list[SpanRecord]:
    """Build the spans of one stored recording (handed to ``on_end`` when given);
    a recording still being made has its open spans in progress, not failed."""
    info = store.recording_info(recording_id) if info is None else info
    live = info.ended_ns is None and store.get(recording_id).is_live()
    builder = SpanBuilder(info, content=content, on_end=on_end)
    builder.feed_many(store.iter_events(recording_id))
    builder.close(info, live=live)
    return builder.finished


def backfill(
    store: Any, recording_ids: Iterable[str], exporter: Any, *,
    content: ContentPolicy | None = None, metrics_of_live: bool = False,
    live_metrics: list[str] | None = None,
) -> int:
    """Export the recordings' spans and metrics through ``exporter``; the span count.

    ``exporter`` is a :class:`~claudetrace.telemetry.export.Telemetry` (or
    anything with ``span_ended``); the caller shuts it down to flush.  The
    metrics of a recording whose live export delivered them (its ``extra``
    says where, :data:`~claudetrace.telemetry.live.LIVE_METRICS`) are not
    recorded again — a collector would count them twice — unless
    ``metrics_of_live``; such recordings' ids are added to ``live_metrics``.
    Spans have the ids of the live export, so a trace backend keeps one copy.
    """
    from .live import LIVE_METRICS

    count = 0
    measure = True

    def ended(span: SpanRecord) -> None:
        nonlocal count
        count += 1
        exporter.span_ended(span, measure=measure)

    for recording_id in recording_ids:
        info = store.recording_info(recording_id)
        measure = metrics_of_live or not info.extra.get(LIVE_METRICS)
        if not measure and live_metrics is not None:
            live_metrics.append(recording_id)
        recording_spans(store, recording_id, content=content, on_end=ended, info=info)
    return count
