"""Statistics across recordings: usage over time, tools, latencies.

Every figure but the latencies is an aggregate the database computes, so the page
reads no recording one by one however many the store holds: tokens and cost from
the usage query layer (:mod:`claudetrace.usage`, what ``claudetrace usage``
reports); sessions and failures per day from a ``GROUP BY`` over the recordings'
summary columns (:func:`claudetrace.store.browse.sessions_per_day`); tool figures
from :func:`claudetrace.store.browse.tool_usage`; latencies from the telemetry
spans of the newest sessions, folded once per ended recording and kept in the
store (:func:`claudetrace.telemetry.latency.recent_latencies`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from html import escape
from typing import Any, Final

from ..pricing import NO_COST, dollars
from ..store.usage import Reader, UsageFilter
from ..usage import Totals, periods
from .present import cost_cell
from .sessions import percentile


def daily_usage(days: Iterable[tuple[dt.date, int, int]]) -> list[dict[str, Any]]:
    """Sessions started and failed per UTC day, oldest first, as table rows, from
    :func:`claudetrace.store.browse.sessions_per_day` (their tokens and cost:
    :func:`usage_days`)."""
    return [{"day": day, "sessions": n, "errors": failed} for day, n, failed in sorted(days)]


def usage_days(reader: Reader) -> dict[str, Totals]:
    """Tokens and cost per UTC day and model: ``claudetrace usage daily -z UTC``'s
    figures (the same query; a message two recordings hold counted once)."""
    return periods(reader, "daily", UsageFilter(), dt.timezone.utc)


#: The token series of the usage chart, as :func:`usage_rows` names them.
TOKEN_SERIES = ("input tokens", "output tokens", "cache read tokens", "cache write tokens")


def _figures(t: Totals) -> dict[str, Any]:
    cost = t.cost_or_none()
    # "cost ($)" draws the chart; "cost" is what the tables show (never None).
    return {"cost": cost_cell(cost if t.calls else None, calls=bool(t.calls)),
            "cost ($)": None if cost is None else round(cost, 6), "cost source": t.cost_source,
            "input tokens": t.input, "output tokens": t.output,
            "cache read tokens": t.cache_read, "cache write tokens": t.cache_creation}


def usage_rows(days: Mapping[str, Totals]) -> list[dict[str, Any]]:
    """A row per day of :func:`usage_days`: its cost, tokens and models."""
    return [{"day": day, **_figures(t), "models": ", ".join(t.models)} for day, t in days.items()]


def model_rows(days: Mapping[str, Totals]) -> list[dict[str, Any]]:
    """A row per day and model of :func:`usage_days`."""
    return [{"day": day, "model": model, **_figures(m)}
            for day, t in days.items() for model, m in t.models.items()]


def usage_total(days: Mapping[str, Totals]) -> str:
    """The days' tokens and cost in one line (``usage daily --json``'s ``totals``)."""
    total = Totals()
    for t in days.values():
        total.merge(t)
    cost = dollars(total.cost, digits=6)
    cli = round(total.cost - total.estimated, 9)
    unpriced = total.unpriced
    # The CLI's where it said, the price table's else (an unpriced model is no estimate).
    if total.estimated > 0 or (total.cost_source == "estimate" and not unpriced):
        cost += (f" ({dollars(cli, digits=6)} the CLI's + ~{dollars(total.estimated, digits=6)}"
                 " estimated)" if cli > 0 else " (estimate)")
    if unpriced:  # as every view says it: unknown, never counted as $0
        why = f"unknown (no price for {', '.join(unpriced)})"
        cost = why if total.cost_source == "unknown" else f"{cost} + {why}"
    elif not total.calls:
        cost = NO_COST
    return (f"In all: {total.total_tokens} tokens ({total.input} input, {total.output} "
            f"output, {total.cache_read} cache read, {total.cache_creation} cache write), "
            f"cost {cost}")


def token_chart(daily: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Chart data for tokens and cost per day: a ``day`` column of ISO dates (one
    stacked bar a day, labelled with its date, so a single day draws too), one
    column per token series and ``cost ($)``.  Every day from the first to the last
    has its bar: a day without usage is in it with zeros, so that a week with usage
    on Monday and Thursday does not draw them side by side."""
    rows = every_day(daily)
    data: dict[str, list[Any]] = {"day": [str(r["day"]) for r in rows]}
    for series in (*TOKEN_SERIES, "cost ($)"):
        data[series] = [r.get(series) or 0 for r in rows]
    return data


def every_day(daily: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rows of :func:`usage_rows` (oldest first) with a row of zeros for each
    day between them that has none; rows whose day is no ISO date as they are."""
    out: list[Mapping[str, Any]] = []
    last: dt.date | None = None
    for row in daily:
        try:
            day = dt.date.fromisoformat(str(row["day"]))
        except ValueError:
            out.append(row)
            continue
        if last is not None:
            gap = (day - last).days
            out.extend({"day": (last + dt.timedelta(days=n)).isoformat()} for n in range(1, gap))
        out.append(row)
        last = day
    return out


#: The bars' colours, series by series (Streamlit's own chart palette).
COLOURS: Final = ("#0068c9", "#83c9ff", "#ff2b2b", "#ffabab", "#29b09d", "#7defa1")


def bars_html(days: Sequence[str], series: Mapping[str, Sequence[float | int | None]],
              *, unit: str, figure: Callable[[float], str] = lambda v: f"{v:,.0f}") -> str:
    """A stacked bar a day drawn with boxes of HTML (no script, so the page draws it
    at once, where a Vega chart waited for Vega's scripts to load and compile; an
    inline SVG the page's sanitizer removes): each part of a bar says its day,
    series and figure on hover (``title``), the y axis its top, middle and zero,
    the x axis a few days (:func:`tick_labels`), each under its bar, the heading the
    first and last; a legend names the series. Every text escaped."""
    names = list(series)
    totals = [sum(float(series[n][i] or 0) for n in names) for i in range(len(days))]
    top = max(totals, default=0.0) or 1.0
    columns = []
    for i, day in enumerate(days):
        boxes = []
        for k, name in enumerate(names):
            value = float(series[name][i] or 0)
            if value > 0:
                tip = escape(f"{day} · {name}: {figure(value)}", quote=True)
                boxes.append(f'<div title="{tip}" style="height:{100 * value / top:.3f}%;'
                             f'min-height:1px;background:{COLOURS[k % len(COLOURS)]}"></div>')
        columns.append('<div class="ct-bar" style="flex:1;display:flex;flex-direction:'
                       f'column-reverse;height:100%;max-width:48px">{"".join(boxes)}</div>')
    axis = "".join(f"<span>{escape(figure(top * f))}</span>" for f in (1.0, 0.5, 0.0))
    labels = tick_labels(days)
    # A cell a day, as wide as its bar, so that each label stands under its bar.
    ticks = "".join(
        '<div style="flex:1;max-width:48px;position:relative">'
        + (f'<span class="ct-tick" data-day="{escape(day, quote=True)}" style="position:'
           'absolute;left:50%;transform:translateX(-50%);white-space:nowrap">'
           f"{escape(labels[i])}</span>" if i in labels else "")
        + "</div>" for i, day in enumerate(days))
    span = f" · {days[0]} to {days[-1]}" if len(days) > 1 else (f" · {days[0]}" if days else "")
    legend = "".join(
        f'<span style="margin-left:10px"><i style="display:inline-block;width:10px;'
        f'height:10px;background:{COLOURS[k % len(COLOURS)]};margin-right:4px"></i>'
        f"{escape(name)}</span>" for k, name in enumerate(names)) if len(names) > 1 else ""
    return (
        f'<div class="ct-bars" role="img" aria-label="{escape(unit, quote=True)} per UTC day" '
        'style="font-size:11px;color:#555;max-width:720px">'
        f"<div>{escape(unit)} per UTC day{escape(span)}{legend}</div>"
        '<div style="display:flex;gap:6px">'
        '<div style="display:flex;flex-direction:column;justify-content:space-between;'
        f'text-align:right;height:180px;min-width:56px">{axis}</div>'
        '<div style="flex:1"><div style="display:flex;align-items:flex-end;gap:2px;height:180px;'
        f'border-left:1px solid #ccc;border-bottom:1px solid #ccc">{"".join(columns)}</div>'
        f'<div style="display:flex;gap:2px;height:16px;padding-left:1px">{ticks}</div>'
        '</div></div></div>')


#: At most this many dates under a chart: a label is as wide as a bar (48 px) of a
#: few days, and a bar is thinner the more days there are.
MOST_TICKS: Final = 6


def tick_labels(days: Sequence[str]) -> dict[int, str]:
    """The x axis's labels by the index of their day: every ``step``-th day from the
    first, at most :data:`MOST_TICKS`, each short (``Nov 28``: the heading gives the
    first and last days in full) so that no two overlap; a day that is no ISO date
    as it is."""
    step = max(1, -(-len(days) // MOST_TICKS))
    out = {}
    for i in range(0, len(days), step):
        try:
            day = dt.date.fromisoformat(days[i])
            out[i] = f"{day:%b} {day.day}"
        except ValueError:
            out[i] = days[i]
    return out


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
