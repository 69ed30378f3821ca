"""The tables ``claudetrace usage`` prints for people (Rich; recorded names as ``Text``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from ..display import visible
from ..pricing import dollars

if TYPE_CHECKING:
    from ..usage import Block, SessionTotals, Totals

_NUMBERS = ("input", "output", "cache create", "cache read", "total tokens", "cost (USD)")


def _text(value: str | None) -> Text:
    """Recorded text as a cell: control characters escaped, no markup read."""
    return Text(visible(value or ""))


def cost_cell(t: Totals) -> Text:
    """``$1.23``, ``~$1.23`` for an estimate, ``?`` or ``$1.23 + ?`` where some
    calls have no price."""
    source = t.cost_source
    if source == "unknown":
        return Text("?", style="yellow")
    amount = dollars(t.cost, digits=2 if t.cost >= 1 else 4)
    cell = Text(("~" if source == "estimate" else "") + amount)
    if t.unpriced:
        cell.append(" + ?", style="yellow")
    return cell


def _numbers(t: Totals) -> list[Text]:
    return [Text(f"{n:,}") for n in (t.input, t.output, t.cache_creation, t.cache_read,
                                       t.total_tokens)] + [cost_cell(t)]


def _table(first: list[str]) -> Table:
    table = Table(header_style="bold", show_footer=False)
    for name in first:
        table.add_column(name)
    for name in _NUMBERS:
        table.add_column(name, justify="right")
    return table


def _breakdown(table: Table, t: Totals, lead: int) -> None:
    for model, m in sorted(t.models.items(), key=lambda mt: -mt[1].cost):
        table.add_row(*[Text("")] * (lead - 1), Text("└ ", style="dim") + _text(model),
                      *_numbers(m), style="dim")


def _models(t: Totals) -> Text:
    return _text(", ".join(t.models))


def _notes(table: Table, rows: Iterable[Totals]) -> Table:
    every = list(rows)
    caption = Text()
    if any(t.cost_source != "cli" for t in every):
        caption.append("~ estimated from the price table (genai-prices): the CLI reported no cost")
    unpriced = sorted({m for t in every for m in t.unpriced})
    if unpriced:
        caption.append("\n? no price for ").append(_text(", ".join(unpriced)))
    if caption:
        table.caption = caption
    return table


def _total(table: Table, every: list[Totals], lead: int) -> None:
    from ..usage import Totals

    total = Totals()
    for t in every:
        total.merge(t)
    table.add_section()
    table.add_row(Text("Total", style="bold"), *[Text("")] * (lead - 1), *_numbers(total))


def period_table(report: str, found: dict[str, Totals], breakdown: bool) -> Table:
    """Days, weeks or months: tokens by type, models and cost."""
    title = {"daily": "day", "weekly": "week (from Sunday)", "monthly": "month"}[report]
    table = _table([title, "models"])
    for when, t in found.items():
        table.add_row(Text(when), _models(t), *_numbers(t))
        if breakdown:
            _breakdown(table, t, 2)
    _total(table, list(found.values()), 2)
    return _notes(table, found.values())


def session_table(found: list[SessionTotals], tz: dt.tzinfo | None, breakdown: bool) -> Table:
    """Sessions, oldest last activity first."""
    table = _table(["session", "project", "last activity", "models"])
    for s in found:
        last = dt.datetime.fromtimestamp(s.last_ns / 1e9, tz).strftime("%Y-%m-%d %H:%M")
        table.add_row(_text(s.name or s.session_id), _text(s.project), Text(last),
                      _models(s.totals), *_numbers(s.totals))
        if breakdown:
            _breakdown(table, s.totals, 4)
    _total(table, [s.totals for s in found], 4)
    return _notes(table, [s.totals for s in found])


def blocks_table(found: list[Block], now_ns: int, breakdown: bool) -> Table:
    """5-hour blocks (UTC start); the active one with its burn rate and projection."""
    table = _table(["block start (UTC)", "status", "models"])
    for b in found:
        start = dt.datetime.fromtimestamp(b.start_ns / 1e9, dt.timezone.utc)
        if b.gap:
            hours = (b.end_ns - b.start_ns) / 3.6e12
            table.add_row(Text(start.strftime("%Y-%m-%d %H:%M")), Text("gap", style="dim"),
                          Text(f"{hours:.1f} h without calls", style="dim"))
            continue
        status = Text("ACTIVE", style="bold green") if b.active(now_ns) else Text("")
        table.add_row(Text(start.strftime("%Y-%m-%d %H:%M")), status, _models(b.totals),
                      *_numbers(b.totals))
        if breakdown:
            _breakdown(table, b.totals, 3)
        if b.active(now_ns):
            rate, projection = b.burn_rate(), b.projection(now_ns)
            if rate and projection:
                table.add_row(Text(""), Text("burn rate", style="cyan"),
                              Text(f"{rate['tokensPerMinute']:,.0f} tokens/min, "
                                   f"${rate['costPerHour']:,.2f}/h"))
                table.add_row(Text(""), Text("projected", style="cyan"),
                              Text(f"{projection['totalTokens']:,} tokens, "
                                   f"${projection['totalCost']:,.2f} at the block's end, "
                                   f"{projection['remainingMinutes']} min left"))
    return _notes(table, [b.totals for b in found if not b.gap])
