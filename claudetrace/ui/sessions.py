"""The session list: filters, table rows and summary tiles, from summary columns.

Rows are built from :class:`~claudetrace.store.Recording` summary columns only,
so listing 10,000 recordings never reads an event.  Filters are a plain value
(:class:`Filters`) that round-trips through URL query parameters, so a filtered
list is a link.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..display import visible_text
from ..model import FAILED
from ..store.browse import Filters as Filters  # the list's filters are a query
from ..store.models import Recording


def started_at(started_ns: int) -> dt.datetime:
    """A recording's start as an aware UTC datetime."""
    return dt.datetime.fromtimestamp(started_ns / 1e9, tz=dt.timezone.utc)


#: The session table's columns, in order: status, exit and the first prompt first
#: after the link, then failed tools, so they show without scrolling at 1280 px;
#: wide, rarely read ones last.
TABLE_COLUMNS = (
    "open", "status", "exit", "first prompt", "started", "duration (s)", "tool calls",
    "tool errors", "model", "turns", "tokens", "cost ($)", "cost source", "now", "name",
    "reason", "tags", "project", "source", "lines", "CLI", "id",
)


def session_row(rec: Recording) -> dict[str, Any]:
    """One row of the session table (only summary columns are read)."""
    duration = rec.duration_ns
    status = rec.status
    tags = ", ".join(f"{k}={v}" for k, v in sorted((rec.tags or {}).items()))
    # Status and exit come first: the columns people look for (visible at 1280 px).
    row = {
        "id": rec.id,
        "status": status,
        "exit": rec.exit_code if rec.signal is None else -rec.signal,
        "started": started_at(rec.started_ns),
        "duration (s)": None if duration is None else round(duration / 1e9, 2),
        "name": rec.name or "",
        "model": rec.model or "",
        "turns": rec.turns,
        "tool calls": rec.tool_calls,
        "tool errors": rec.tool_errors,
        "tokens": rec.input_tokens
        + rec.output_tokens
        + rec.cache_read_tokens
        + rec.cache_creation_tokens,
        # None when unknown (a model without a price, a running session with no
        # result yet), never 0.
        "cost ($)": None if (cost := rec.cost) is None else round(cost, 6),
        "cost source": rec.cost_origin,
        "tags": tags,
        "reason": rec.status_reason,
        "error": status in FAILED,
        "lines": rec.event_count,
        "CLI": rec.claude_code_version or "",
        "session_id": rec.cli_session_id or "",
        "project": rec.cwd or "",
        "source": rec.source,
        # Filled in for the rows shown: the first prompt, a running session's liveness.
        "first prompt": "",
        "now": "",
    }
    # Recorded and user-given text as every page shows it (bidi controls escaped).
    return {k: visible_text(v) if isinstance(v, str) else v for k, v in row.items()}


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) by linear interpolation; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass(frozen=True, slots=True)
class Tiles:
    """The summary tiles above the session table."""

    count: int
    total_cost: float
    error_rate: float | None
    p95_duration_s: float | None
    running: int


def tiles(rows: Iterable[Mapping[str, Any]]) -> Tiles:
    """Count, total cost, error rate and p95 duration of session rows."""
    count = errors = running = 0
    cost = 0.0
    durations: list[float] = []
    for row in rows:
        count += 1
        cost += float(row.get("cost ($)") or 0.0)
        if row.get("status") == "running":
            running += 1
        elif row.get("error"):
            errors += 1
        if row.get("duration (s)") is not None and row.get("status") != "running":
            durations.append(float(row["duration (s)"]))
    finished = count - running
    return Tiles(
        count=count,
        total_cost=cost,
        error_rate=errors / finished if finished else None,
        p95_duration_s=percentile(durations, 0.95),
        running=running,
    )
