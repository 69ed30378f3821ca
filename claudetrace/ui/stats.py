"""Statistics across recordings: usage over time, tools, latencies.

Usage comes from the recordings' summary columns; tool figures from
:func:`claudetrace.store.browse.tool_usage`; latencies from the telemetry spans of
a bounded set of recent recordings (see :func:`claudetrace.ui.timeline.latencies`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..model import FAILED
from ..store.models import Recording
from .sessions import percentile, started_at


def daily_usage(recordings: Iterable[Recording]) -> list[dict[str, Any]]:
    """Sessions, cost and tokens per UTC day, oldest first."""
    days: dict[dt.date, dict[str, Any]] = {}
    for rec in recordings:
        day = started_at(rec.started_ns).date()
        row = days.setdefault(
            day,
            {
                "day": day,
                "sessions": 0,
                "cost ($)": 0.0,
                "of which estimated ($)": 0.0,
                "input tokens": 0,
                "output tokens": 0,
                "cache read tokens": 0,
                "errors": 0,
            },
        )
        row["sessions"] += 1
        row["cost ($)"] += rec.cost_usd or 0.0  # 0 where unknown
        if rec.cost_source == "estimate":
            row["of which estimated ($)"] += rec.cost_usd or 0.0
        row["input tokens"] += rec.input_tokens or 0
        row["output tokens"] += rec.output_tokens or 0
        row["cache read tokens"] += rec.cache_read_tokens or 0
        row["errors"] += 1 if rec.status in FAILED else 0
    return [days[d] for d in sorted(days)]


#: The token series of the usage chart, as daily_usage names them.
TOKEN_SERIES = ("input tokens", "output tokens", "cache read tokens")


def token_chart(daily: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Chart data for tokens per day: a ``day`` column of ISO dates (one stacked bar a
    day, labelled with its date, so a single day draws too) and one column per series."""
    data: dict[str, list[Any]] = {"day": [r["day"].isoformat() for r in daily]}
    for series in TOKEN_SERIES:
        data[series] = [r[series] for r in daily]
    return data


def tool_rates(usage: Mapping[str, tuple[int, int]]) -> list[dict[str, Any]]:
    """Tool calls, failures and failure rate, most used first."""
    rows = [
        {
            "tool": name,
            "calls": calls,
            "failures": failures,
            "failure rate": (failures / calls) if calls else None,
        }
        for name, (calls, failures) in usage.items()
    ]
    return sorted(rows, key=lambda r: (-r["calls"], r["tool"]))


#: Latency categories shown, in order, with their labels.
LATENCY_LABELS = {
    "model": "model calls",
    "tool": "tools",
    "permission": "permission waits",
    "hook": "hooks",
    "mcp": "MCP requests",
    "control": "control requests",
    "turn": "turns",
}


def latency_table(samples: Mapping[str, Sequence[float]]) -> list[dict[str, Any]]:
    """p50 / p90 / p99 / max (ms) per span category."""
    rows = []
    for key, label in LATENCY_LABELS.items():
        values = samples.get(key) or []
        if not values:
            continue
        rows.append(
            {
                "what": label,
                "count": len(values),
                "p50 (ms)": percentile(values, 0.5),
                "p90 (ms)": percentile(values, 0.9),
                "p99 (ms)": percentile(values, 0.99),
                "max (ms)": max(values),
            }
        )
    return rows


def merge_samples(parts: Iterable[Mapping[str, Sequence[float]]]) -> dict[str, list[float]]:
    """Latency samples of several recordings put together."""
    out: dict[str, list[float]] = {}
    for part in parts:
        for key, values in part.items():
            out.setdefault(key, []).extend(values)
    return out
