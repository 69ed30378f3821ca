"""The tables ``claudetrace usage`` prints for people (Rich; recorded names as ``Text``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from rich.text import Text

from ..display import visible
from .usage_grid import Cell, Grid, Shown

if TYPE_CHECKING:
    from ..usage import Block, SessionReport, Totals

_NUMBERS = ("input", "output", "cache create", "cache read", "total tokens", "cost (USD)")


def _text(value: str | None) -> str:
    """Recorded text as a cell: control characters escaped (a ``str`` cell reads
    no markup)."""
    return visible(value or "")


def cost_cell(t: Totals) -> Shown:
    """``$1.23``, ``~$1.23`` for an estimate, ``$1.23 + ~$0.05`` where the CLI
    reported a part (the table priced the calls it put no cost on), ``?`` or
    ``$1.23 + ?`` where some calls have no price."""
    # The figures --json writes (to 1e-9 dollars): a cent's half there reads the
    # same whatever order the database added the calls in.
    return cost_text(t.cost_source, t.cost, t.estimated, bool(t.unpriced))


def cost_text(source: str, cost: float, estimated: float, unpriced: bool, *,
              sums: bool = False) -> Shown:
    """:func:`cost_cell` of a group whose calls' costs come from ``source``
    (``cli``, ``estimate``, ``unknown``), ``estimated`` of ``cost`` the price
    table's, some calls without a price (``unpriced``); ``sums``: ``cost`` and
    ``estimated`` are a session's, each first rounded as ``--json`` writes it.

    Every amount is its figure rounded to 1e-9 dollars, rounded only where that
    can change the text (:func:`_plainly`): ``round`` is some 2,000
    instructions, a fifth of a table's row."""
    if source == "unknown":
        return Text("?", style="yellow")
    amount = None
    if source != "estimate":
        amount = _plainly(cost)
    elif (cli := cost - estimated) > _EDGE:  # the CLI's part, and the table's
        mine, table = _plainly(cli), _plainly(estimated)
        if mine is not None and table is not None:
            amount = f"{mine} + ~{table}"
    elif cli == 0.0 or cli < -_EDGE:  # the table's alone
        shown = _plainly(cost)
        amount = None if shown is None else "~" + shown
    if amount is None:  # a figure within reach of a rounding's edge: rounded
        if sums:
            cost, estimated = round(cost, 9), round(estimated, 9)
        if source == "estimate":
            cli = round(cost - estimated, 9)
            if cli > 0:
                amount = f"{_amount(cli)} + ~{_amount(round(estimated, 9))}"
            else:
                amount = "~" + _amount(round(cost, 9))
        else:
            amount = _amount(round(cost, 9))
    if unpriced:
        cell = Text(amount)
        cell.append(" + ?", style="yellow")
        return cell
    return amount


_CENTS = "${:,.2f}".format
_FOUR = "${:,.4f}".format
#: Far more than rounding to 1e-9 dollars (twice: a session's parts) moves a
#: figure, far less than the places an amount shows.
_EDGE = 1e-7


def _plainly(usd: float) -> str | None:
    """:func:`_amount` of ``usd`` where rounding it to 1e-9 dollars first would
    write the same: no half-unit of the last place shown, nor the edge of 2 or 4
    places, within :data:`_EDGE` of it; else None.  Under $999, with no
    thousands to group, by ``%`` (a third of ``format``'s time)."""
    if 1 + _EDGE < usd < 999:
        return "$%.2f" % usd if abs(usd * 100 % 1 - 0.5) > 1e-3 else None  # noqa: UP031
    if 0.001 + _EDGE < usd < 1 - _EDGE:
        return "$%.4f" % usd if abs(usd * 1e4 % 1 - 0.5) > 1e-2 else None  # noqa: UP031
    if 999 <= usd < 1e6:
        return _CENTS(usd) if abs(usd * 100 % 1 - 0.5) > 1e-3 else None
    return None


def _amount(usd: float) -> str:
    """:func:`~claudetrace.pricing.dollars` with 2 places from a dollar up, else 4
    (more for an amount under a tenth of a cent): the same text, the common
    amounts written by a format made once."""
    if usd >= 1:
        return _CENTS(usd)
    if usd >= 0.001:  # dollars' extra places start below 10^(1 - 4)
        return _FOUR(usd)
    from ..pricing import dollars  # the price table's module, loaded for few amounts

    return dollars(usd, digits=4)


def _numbers(t: Totals) -> list[Cell]:
    return [t.input, t.output, t.cache_creation, t.cache_read, t.total_tokens, cost_cell(t)]


def _table(first: list[str]) -> Grid:
    return Grid([(name, "left") for name in first] + [(name, "right") for name in _NUMBERS])


def _breakdown(table: Grid, t: Totals, lead: int) -> None:
    for model, m in sorted(t.models.items(), key=lambda mt: -mt[1].cost):
        # "└ " dim as the row: one text.
        table.add_row(*[""] * (lead - 1), "└ " + _text(model), *_numbers(m), style="dim")


def _models(t: Totals) -> str:
    return _text(", ".join(t.models))


def _notes(table: Grid, estimated: bool, unpriced: Iterable[str]) -> Grid:
    """The caption: what ``~`` means where a row is an estimate (``estimated``),
    and the models without a price (``unpriced``)."""
    caption = Text()
    if estimated:
        caption.append("~ estimated from the price table (genai-prices): the CLI reported no cost")
    named = sorted(set(unpriced))
    if named:
        caption.append("\n? no price for ").append(_text(", ".join(named)))
    if caption:
        table.caption = caption
    return table


def _total(table: Grid, total: Totals, lead: int) -> None:
    table.add_section()
    table.add_row(Text("Total", style="bold"), *[""] * (lead - 1), *_numbers(total))


def period_table(report: str, found: dict[str, Totals], breakdown: bool) -> Grid:
    """Days, weeks or months: tokens by type, models and cost."""
    title = {"daily": "day", "weekly": "week (from Sunday)", "monthly": "month"}[report]
    table = _table([title, "models"])
    for when, t in found.items():
        table.add_row(when, _models(t), *_numbers(t))
        if breakdown:
            _breakdown(table, t, 2)
    from ..usage import Totals

    _total(table, Totals.sum_of(found.values()), 2)
    return _notes(table, any(t.cost_source != "cli" for t in found.values()),
                  (m for t in found.values() for m in t.unpriced))


def _costliest_first(m: Any) -> float:
    """A session's models, the costliest first (:data:`~claudetrace.usage.ModelFigures`)."""
    return -m[2][4]  # type: ignore[no-any-return]


_MINUTE_NS = 60_000_000_000


def _minute_text(tz: dt.tzinfo | None) -> Callable[[int], str]:
    """What writes a time (ns since 1970) in ``tz`` to the minute, ``YYYY-MM-DD
    HH:MM``: ISO's text cut to the minute (strftime's text for the years a store's
    times reach, 1678-2261, in C).  In a fixed zone of whole minutes (UTC), a
    day's text made once and its minutes added (``fromtimestamp`` and
    ``isoformat`` are some 15,000 instructions, a minute apart a session), but
    within a millisecond of a minute's edge, where ``fromtimestamp``'s rounding
    to microseconds of the time as a float could cross it."""

    def exact(t_ns: int) -> str:
        return dt.datetime.fromtimestamp(t_ns / 1e9, tz).isoformat(" ", "minutes")[:16]

    offset = tz.utcoffset(None) if isinstance(tz, dt.timezone) else None
    if offset is None or offset % dt.timedelta(minutes=1):
        return exact
    shift = offset // dt.timedelta(minutes=1)
    days: dict[int, str] = {}
    epoch = dt.date(1970, 1, 1).toordinal()

    def quick(t_ns: int) -> str:
        minute, within = divmod(t_ns, _MINUTE_NS)
        if not 1_000_000 <= within < _MINUTE_NS - 1_000_000:
            return exact(t_ns)
        day, hm = divmod(minute + shift, 1440)
        text = days.get(day)
        if text is None:
            text = days[day] = dt.date.fromordinal(epoch + day).isoformat()
        return f"{text} {hm // 60:02d}:{hm % 60:02d}"

    return quick


def session_table(found: SessionReport, tz: dt.tzinfo | None, breakdown: bool) -> Grid:
    """Sessions, oldest last activity first: the entries ``--json`` writes, a row
    each (and one per model under it with ``breakdown``), made from the report's
    sums as they are (no entry is made)."""
    from ..usage import SOURCE_OF, UNKNOWN

    table = _table(["session", "project", "last activity", "models"])
    add = table.rows.append
    minutes: dict[int, str] = {}  # many sessions end in the same minute
    minute_of = _minute_text(tz)
    # Many sessions use the same models: each one's cell, and a set's, made once.
    used: dict[tuple[str, ...], str] = {}
    under: dict[str, str] = {}
    by_cost = _costliest_first
    estimated = False
    unpriced: list[str] = []
    for rec, (i, o, cr, cc, cost, mask, est) in zip(found.recordings, found.sums,
                                                    strict=True):
        last_ns = rec.last_ns
        minute = last_ns // 60_000_000_000
        last = minutes.get(minute)
        if last is None:
            last = minutes[minute] = minute_of(last_ns)
        models = rec.models
        name = rec.name or rec.session_id or rec.recording_id
        names = tuple([m[0] for m in models])
        shown = used.get(names)
        if shown is None:
            shown = used[names] = _text(", ".join(names))
        source = SOURCE_OF[mask]
        if source != "cli":
            estimated = True
        if mask & UNKNOWN:
            unpriced += [m[0] for m in models if m[1] & UNKNOWN]
        add(([name if name.isprintable() else visible(name),
              rec.cwd if rec.cwd.isprintable() else visible(rec.cwd),
              last, shown, i, o, cc, cr, i + o + cr + cc,
              cost_text(source, cost, est, mask & UNKNOWN != 0, sums=True)], ""))
        if breakdown:
            for model, mask, (i, o, cr, cc, cost, _), est in (
                    models if len(models) == 1 else sorted(models, key=by_cost)):
                label = under.get(model)
                if label is None:
                    label = under[model] = "└ " + _text(model)
                add((["", "", "", label, i, o, cc, cr, i + o + cr + cc,
                      cost_text(SOURCE_OF[mask], cost, est, mask & UNKNOWN != 0)], "dim"))
    _total(table, found.totals, 4)
    return _notes(table, estimated, unpriced)


def blocks_table(found: list[Block], now_ns: int, breakdown: bool) -> Grid:
    """5-hour blocks (UTC start); the active one with its burn rate and projection."""
    table = _table(["block start (UTC)", "status", "models"])
    for b in found:
        start = dt.datetime.fromtimestamp(b.start_ns / 1e9, dt.timezone.utc)
        if b.gap:
            hours = (b.end_ns - b.start_ns) / 3.6e12
            table.add_row(start.strftime("%Y-%m-%d %H:%M"), Text("gap", style="dim"),
                          Text(f"{hours:.1f} h without calls", style="dim"))
            continue
        status = Text("ACTIVE", style="bold green") if b.active(now_ns) else ""
        table.add_row(start.strftime("%Y-%m-%d %H:%M"), status, _models(b.totals),
                      *_numbers(b.totals))
        if breakdown:
            _breakdown(table, b.totals, 3)
        if b.active(now_ns):
            rate, projection = b.burn_rate(), b.projection(now_ns)
            if rate and projection:
                table.add_row("", Text("burn rate", style="cyan"),
                              (f"{rate['tokensPerMinute']:,.0f} tokens/min, "
                                   f"${rate['costPerHour']:,.2f}/h"))
                table.add_row("", Text("projected", style="cyan"),
                              (f"{projection['totalTokens']:,} tokens, "
                                   f"${projection['totalCost']:,.2f} at the block's end, "
                                   f"{projection['remainingMinutes']} min left"))
            else:
                table.add_row("", Text("burn rate", style="cyan"),
                              Text("not yet: under a minute between its calls", style="dim"))
    return _notes(table, any(b.totals.cost_source != "cli" for b in found if not b.gap),
                  (m for b in found if not b.gap for m in b.totals.unpriced))
