"""Usage reports over the store, in ccusage's shapes: daily, weekly, monthly, session, blocks.

The figures come from the store's ``usage_calls`` (:mod:`claudetrace.store.usage`):
each model call's tokens (per API message id, its last usage), time and cost, the
CLI's where it reported one, else the price table's (:mod:`claudetrace.pricing`).
The JSON uses ccusage's field names (``inputTokens``, ``cacheCreationTokens``,
``totalCost``, ``modelsUsed``, ``modelBreakdowns`` …) so scripts written for
ccusage keep working; what differs (said in ``docs/usage.md``): a cost the table
cannot give is ``null`` and its model listed in ``unpricedModels`` (ccusage counts
it 0), every entry says where its cost comes from (``costSource``), and a period
also has ``period``.

Days, weeks and months are cut in the report's time zone from buckets the
database sums (a fixed zone's days, else hours, or quarter hours for a zone
whose offset is a part of an hour); blocks are
ccusage's 5-hour billing blocks, made from the calls summed by hour (exactly as
from the calls themselves: :func:`make_blocks`).
"""

from __future__ import annotations

import datetime as dt
import functools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .store import usage as q
from .store.rows import COST_SOURCES
from .store.usage import Figures, FigureValues, Reader, UsageFilter

Report = Literal["daily", "weekly", "monthly", "session", "blocks"]
REPORTS: Final[tuple[Report, ...]] = ("daily", "weekly", "monthly", "session", "blocks")
#: The key of each period report's list and of its period, as ccusage names them.
KEYS: Final = {"daily": ("daily", "date"), "weekly": ("weekly", "week"),
               "monthly": ("monthly", "month")}
#: The buckets the database sums calls into for a zone with an offset of a part
#: of an hour (every UTC offset is a multiple of it).
BUCKET_NS: Final = 15 * 60 * 1_000_000_000
_DAY_NS: Final = 86_400 * 1_000_000_000
#: A billing block's length, ccusage's (and Anthropic's) five hours.
BLOCK_NS: Final = 5 * 3600 * 1_000_000_000
_HOUR_NS: Final = 3600 * 1_000_000_000


#: Each cost source's bit in :attr:`Totals.sources` (the store's masks).
_BIT: Final = {source: 1 << bit for bit, source in enumerate(COST_SOURCES)}
UNKNOWN: Final = _BIT["unknown"]
#: :attr:`Totals.cost_source` of each mask: ``cli`` when every call's cost is the
#: CLI's (or there are none), ``unknown`` when none has a price, else ``estimate``.
SOURCE_OF: Final = ["cli" if mask & ~_BIT["cli"] == 0 else "unknown" if mask == UNKNOWN
                     else "estimate" for mask in range(1 << len(COST_SOURCES))]


@dataclass(slots=True)
class Totals:
    """Tokens and cost of a group of calls, per model and in all."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    cost: float = 0.0
    calls: int = 0
    #: Where the calls' costs come from: a bit mask of :data:`_BIT`.
    sources: int = 0
    #: Per model, in first-seen order.
    models: dict[str, Totals] = field(default_factory=dict)
    #: The part of ``cost`` the price table gave (calls the CLI put no cost on).
    estimated: float = 0.0

    def _take(self, i: int, o: int, cr: int, cc: int, cost: float, n: int,
              sources: int, estimated: float = 0.0) -> None:
        self.input += i
        self.output += o
        self.cache_read += cr
        self.cache_creation += cc
        self.cost += cost
        self.calls += n
        self.sources |= sources
        self.estimated += estimated

    def _model(self, model: str) -> Totals:
        mine = self.models.get(model)
        if mine is None:
            mine = self.models[model] = Totals()
        return mine

    def add(self, model: str | None, source: str, f: Figures) -> None:
        """Add one group's figures, under ``model`` too (None: in all only)."""
        estimated = f.cost if source == "estimate" else 0.0
        bit = _BIT[source]
        self._take(*f, bit, estimated)
        if model is not None:
            self._model(model)._take(*f, bit, estimated)

    @classmethod
    def of_models(cls, models: list[tuple[str, int, FigureValues, float]]) -> Totals:
        """The totals of one figure per model (each model once), whose calls'
        costs come from the sources of the mask given, the table's part of it
        estimated."""
        if len(models) == 1:
            model, mask, f, est = models[0]
            return cls(*f, mask, {model: cls(*f, mask, {}, est)}, est)
        by_model = {model: cls(*f, mask, {}, est) for model, mask, f, est in models}
        i, o, cr, cc, cost, n = map(sum, zip(*(f for _, _, f, _ in models), strict=True))
        mask = 0
        for _, each, _, _ in models:
            mask |= each
        return cls(i, o, cr, cc, cost, n, mask, by_model, sum(est for _, _, _, est in models))

    @classmethod
    def sum_of(cls, many: Iterable[Totals]) -> Totals:
        """The sum of ``many``, per model too: what :meth:`merge` of each into an
        empty one makes (the same additions in the same order), without the
        per-model objects of every step."""
        i = o = cr = cc = n = 0
        cost = estimated = 0.0
        sources = 0
        models: dict[str, list[Any]] = {}
        for t in many:
            i += t.input
            o += t.output
            cr += t.cache_read
            cc += t.cache_creation
            cost += t.cost
            n += t.calls
            estimated += t.estimated
            sources |= t.sources
            for model, m in t.models.items():
                acc = models.get(model)
                if acc is None:
                    models[model] = [m.input, m.output, m.cache_read, m.cache_creation,
                                     0.0 + m.cost, m.calls, m.sources, {},
                                     0.0 + m.estimated]
                else:
                    acc[0] += m.input
                    acc[1] += m.output
                    acc[2] += m.cache_read
                    acc[3] += m.cache_creation
                    acc[4] += m.cost
                    acc[5] += m.calls
                    acc[6] |= m.sources
                    acc[8] += m.estimated
        return cls(i, o, cr, cc, cost, n, sources,
                   {model: cls(*acc) for model, acc in models.items()}, estimated)

    def merge(self, other: Totals) -> None:
        """Add ``other``'s figures, per model too."""
        for into, t in [(self, other), *((self._model(m), t) for m, t in other.models.items())]:
            into._take(t.input, t.output, t.cache_read, t.cache_creation, t.cost, t.calls,
                       t.sources, t.estimated)

    @property
    def total_tokens(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_creation

    @property
    def cost_source(self) -> str:
        """``cli`` when every call's cost is the CLI's, ``estimate`` when some are
        the table's, ``unknown`` when none has a price (no calls: ``cli``)."""
        return SOURCE_OF[self.sources]

    @property
    def unpriced(self) -> list[str]:
        """The models of which some calls have no price."""
        if not self.sources & UNKNOWN:
            return []
        return [m for m, t in self.models.items() if t.sources & UNKNOWN]

    def split_json(self) -> dict[str, float]:
        """The cost's parts: the CLI's (what it reported) and the price table's
        (calls it put no cost on, each from its own tokens)."""
        return {"cliCost": round(self.cost - self.estimated, 9),
                "estimatedCost": round(self.estimated, 9)}

    def cost_or_none(self) -> float | None:
        return None if self.sources == UNKNOWN else round(self.cost, 9)

    def tokens_json(self) -> dict[str, Any]:
        return {"inputTokens": self.input, "outputTokens": self.output,
                "cacheCreationTokens": self.cache_creation, "cacheReadTokens": self.cache_read,
                "totalTokens": self.total_tokens}

    def totals_json(self) -> dict[str, Any]:
        return {"inputTokens": self.input, "outputTokens": self.output,
                "cacheCreationTokens": self.cache_creation, "cacheReadTokens": self.cache_read,
                "totalCost": round(self.cost, 9), "totalTokens": self.total_tokens,
                "costSource": self.cost_source, **self.split_json(),
                "unpricedModels": self.unpriced}


def zone(name: str | None) -> dt.tzinfo | None:
    """A time zone by IANA name (``UTC`` too); None (no name): this machine's local
    zone, with its summer time, as :mod:`datetime` reads naive local times."""
    if name is None or name.lower() == "local":  # what the help calls the default
        return None
    if not name.strip():
        raise ValueError("an empty time zone (name one: an IANA name, UTC or local)")
    if name.upper() in ("UTC", "Z"):
        return dt.timezone.utc
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {name!r}") from exc


def _buckets_of(tz: dt.tzinfo | None) -> tuple[int, int]:
    """The buckets to sum calls in for ``tz``'s days: ``(size, shift)`` in ns.

    A fixed offset (UTC): its days themselves.  A zone whose offsets (winter and
    summer) are whole hours: hours; else quarter hours."""
    if isinstance(tz, dt.timezone):
        offset = tz.utcoffset(None)
        return _DAY_NS, int(offset.total_seconds()) * 1_000_000_000
    year = dt.datetime.now().year
    if tz is None:
        offsets = [-time.timezone, -time.altzone]
    else:
        offsets = [int((tz.utcoffset(dt.datetime(year, month, 1)) or dt.timedelta())
                       .total_seconds()) for month in (1, 7)]
    return (_HOUR_NS if all(o % 3600 == 0 for o in offsets) else BUCKET_NS), 0


def _period_key(report: Report, tz: dt.tzinfo | None) -> Callable[[int], str]:
    def key(t_ns: int) -> str:
        day = dt.datetime.fromtimestamp(t_ns / 1e9, tz).date()
        if report == "monthly":
            return f"{day.year:04d}-{day.month:02d}"
        if report == "weekly":  # ccusage's weeks start on Sunday
            day -= dt.timedelta(days=(day.weekday() + 1) % 7)
        return day.isoformat()

    return key


def periods(reader: Reader, report: Report, f: UsageFilter, tz: dt.tzinfo | None,
            ) -> dict[str, Totals]:
    """``daily``, ``weekly`` or ``monthly`` figures, by period (oldest first)."""
    key = _period_key(report, tz)
    out: dict[str, Totals] = {}
    size, shift = _buckets_of(tz)
    for start, model, source, figures in sorted(q.buckets(reader, f, size, shift)):
        out.setdefault(key(start), Totals()).add(model, source, figures)
    return dict(sorted(out.items()))


#: ccusage 20's ``agent`` of a period (every agent's use) and its ``metadata``: the
#: agents whose use it holds, here always Claude Code's (ccusage 20 reads others').
_AGENTS: Final = {"agents": ["claude"]}


def period_json(report: Report, found: dict[str, Totals]) -> dict[str, Any]:
    """A period report as ccusage's ``--json`` writes it (its entries msgspec
    structs, :func:`_entry`, as the session report's)."""
    listed = KEYS[report][0]
    make = _structs()[1][report]
    entries = []
    for when, t in found.items():
        models = [(m, mt.sources, (mt.input, mt.output, mt.cache_read, mt.cache_creation,
                                   mt.cost, mt.calls), mt.estimated)
                  for m, mt in t.models.items()]
        entries.append(_entry(make, (when, when), t.input, t.output, t.cache_read,
                              t.cache_creation, t.cost, t.sources, t.estimated, models,
                              ("all", _AGENTS)))
    return {listed: entries, "totals": Totals.sum_of(found.values()).totals_json()}


@dataclass
class SessionTotals:
    """One recording's figures and what it is."""

    recording_id: str
    session_id: str
    name: str | None
    project: str
    source: str
    last_ns: int
    totals: Totals


def sessions(reader: Reader, f: UsageFilter) -> list[SessionTotals]:
    """Each recording's figures, oldest last activity first."""
    out = []
    for rec in q.by_recording(reader, f):
        out.append(SessionTotals(rec.recording_id, rec.session_id or rec.recording_id, rec.name,
                                 rec.cwd, rec.source, rec.last_ns,
                                 Totals.of_models(rec.models)))
    return out


def recordings_totals(reader: Reader, ids: list[str]) -> dict[str, Totals]:
    """The figures of the recordings ``ids`` that have calls, as :func:`sessions`
    gives them, by recording id."""
    out: dict[str, Totals] = {}
    for at in range(0, len(ids), 500):  # a bounded IN list
        for s in sessions(reader, UsageFilter(recordings=tuple(ids[at:at + 500]))):
            out[s.recording_id] = s.totals
    return out


def recording_totals(reader: Reader, recording_id: str) -> Totals:
    """One recording's figures, as :func:`sessions` gives them (none: empty)."""
    found = sessions(reader, UsageFilter(recordings=(recording_id,)))
    return found[0].totals if found else Totals()


def counted_elsewhere(reader: Reader, recording_id: str) -> frozenset[str]:
    """The ids of the calls of ``recording_id`` that another recording counts (the
    same API message, stored there first: a resumed session's repeated history),
    which its span tree leaves out of its sums; none when every one of its calls
    is (the recording then says its own figures, as :func:`with_usage` does)."""
    sql = f"SELECT call_id, duplicate FROM usage_calls WHERE recording_id = {reader.marker}"
    rows = list(reader.rows(sql, [recording_id]))
    if all(duplicate for _, duplicate in rows):
        return frozenset()
    return frozenset(call_id for call_id, duplicate in rows if duplicate)


def cost_of(mask: int, cost: float) -> tuple[float | None, str]:
    """A recording's single cost figure and where it comes from, from its calls'
    cost sources (``mask``, of :data:`_BIT`) and the sum of their costs.

    A session with a call no price is known for has no cost, however many of
    its other calls are priced (``usage`` sums what is known and lists the
    unpriced models; a session's single figure would silently leave them out)."""
    if mask & UNKNOWN:
        return None, "unknown"
    return round(cost, 9), SOURCE_OF[mask]


class _Costed:
    """A stored recording whose cost is what the usage reports give it (see
    :func:`with_usage`); every other attribute is the recording's."""

    def __init__(self, rec: Any, cost: tuple[float | None, str]) -> None:
        self._rec = rec
        self.cost, self.cost_origin = cost

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rec, name)

    @property
    def cost_usd(self) -> float:
        return float(self.cost or 0.0)


def with_usage(rec: Any, usage: Totals | None) -> Any:
    """``rec`` with the cost the usage layer gives it (``usage``: its
    :class:`~claudetrace.usage.Totals`, the recording's entry of ``usage session``),
    so that ``show``, ``sessions``, the HTML report and the UI say the figure
    ``usage`` says: the CLI's reported cost plus the table's price of any call it put no
    cost on (a message it was streaming when it was killed), each API message
    counted once.  ``rec`` itself where the layer holds no call of it (none yet
    written, or every one counted in another recording)."""
    if usage is None or not usage.calls:
        return rec
    return _Costed(rec, cost_of(usage.sources, usage.cost))


def summed_cost(cost: float | None, mask: int | None, calls: int | None
                ) -> tuple[float | None, str] | None:
    """A recording's cost and its source (:func:`cost_of`) from its ``usage_models``
    rows summed (their costs, their sources' masks or-ed, their calls); None
    where it has no calls there (its own figure stands)."""
    if not calls:
        return None
    return cost_of(int(mask or 0), cost or 0.0)


def recording_costs(reader: Reader, ids: list[str]) -> dict[str, tuple[float | None, str]]:
    """The cost and its source (:func:`cost_of`) that :func:`with_usage` gives each
    of the recordings ``ids`` that has calls, by recording id: its models' costs
    added in :func:`sessions`' order (the same sum), read 500 ids a query, with
    no figures made that a cost does not need."""
    out: dict[str, tuple[float | None, str]] = {}
    rid = None
    cost: float = 0.0
    mask = calls = 0

    def done() -> None:
        if rid is not None and (found := summed_cost(cost, mask, calls)) is not None:
            out[rid] = found

    for at in range(0, len(ids), 500):  # a bounded IN list
        for row_id, row_cost, row_mask, row_calls in q.model_costs(reader, ids[at:at + 500]):
            if row_id != rid:
                done()
                rid, cost, mask, calls = row_id, 0, 0, 0
            cost += row_cost or 0.0
            mask |= int(row_mask)
            calls += row_calls
    done()
    return out


def costed(reader: Reader, recs: list[Any]) -> list[Any]:
    """Stored recordings ``recs`` with their costs as ``usage session`` gives them
    (:func:`with_usage`), their figures read in one query per 500 of them: a
    list's page, never the whole store."""
    found = recording_costs(reader, [r.id for r in recs])
    return [r if (cost := found.get(r.id)) is None else _Costed(r, cost) for r in recs]


# -- 5-hour blocks ---------------------------------------------------------------------


@dataclass
class Block:
    """A billing block as ccusage makes them (a gap between two is one too)."""

    start_ns: int
    end_ns: int
    totals: Totals
    first_ns: int | None = None
    last_ns: int | None = None
    gap: bool = False

    def active(self, now_ns: int) -> bool:
        return (not self.gap and self.last_ns is not None
                and now_ns - self.last_ns < BLOCK_NS and now_ns < self.end_ns)

    def burn_rate(self) -> dict[str, float] | None:
        """Tokens a minute (all, and input plus output) and cost an hour, over the
        block's calls so far (ccusage's ``burnRate``); None until a minute lies
        between its first and last call (ccusage divides by any span, so a block of
        one quick session "burns" millions of tokens a minute)."""
        if (self.first_ns is None or self.last_ns is None
                or self.last_ns - self.first_ns < _MINUTE_NS):
            return None
        minutes = (self.last_ns - self.first_ns) / 60e9
        t = self.totals
        return {"tokensPerMinute": t.total_tokens / minutes,
                "tokensPerMinuteForIndicator": (t.input + t.output) / minutes,
                "costPerHour": t.cost / minutes * 60}

    def projection(self, now_ns: int) -> dict[str, float] | None:
        """What the block will have used at its end at this rate (ccusage's ``projection``)."""
        rate = self.burn_rate()
        if rate is None:
            return None
        remaining = max(0.0, (self.end_ns - now_ns) / 60e9)
        return {"totalTokens": round(self.totals.total_tokens
                                     + rate["tokensPerMinute"] * remaining),
                "totalCost": round(self.totals.cost + rate["costPerHour"] / 60 * remaining, 2),
                "remainingMinutes": round(remaining)}


_MINUTE_NS: Final = 60_000_000_000


def _hour_of(t_ns: int) -> tuple[int, bool]:
    """The group of :func:`make_blocks` a time is in: its hour, and whether it is
    the hour's very start."""
    return t_ns - t_ns % _HOUR_NS, t_ns % _HOUR_NS == 0


def make_blocks(hours: Iterable[tuple[Any, ...]]) -> list[Block]:
    """ccusage's blocks: a block starts at its first call's hour (UTC) and lasts five
    hours; a call more than five hours after the block's start, or after the
    previous call, starts the next; a pause of more than five hours is a gap block.

    ``hours``: tuples of :class:`~claudetrace.store.usage.HourUsage`'s fields in
    time order, the calls summed by hour (those at the hour's very start apart),
    model and cost source.  That is exact: a block starts at a whole hour, so
    whether a call is more than five hours after it is the same for every call of
    an hour after its start (and for those at its start); the calls of one hour
    are less than an hour apart, so a pause of more than five hours can only come
    before an hour's first call."""
    blocks: list[Block] = []
    start = first = last = -1
    group: tuple[int, bool] | None = None
    # The open block's sums per (model, cost source), in first-seen order.
    sums: dict[tuple[str, str], list[float]] = {}

    def close() -> None:
        totals = Totals()
        for (model, source), (i, o, cr, cc, cost, n) in sums.items():
            totals.add(model, source, Figures(int(i), int(o), int(cr), int(cc), cost, int(n)))
        blocks.append(Block(start, start + BLOCK_NS, totals, first_ns=first, last_ns=last))

    rows = list(hours)
    at = 0
    while at < len(rows):
        group = _hour_of(rows[at][0])
        end = at
        while end < len(rows) and _hour_of(rows[end][0]) == group:
            end += 1
        t_ns = min(row[0] for row in rows[at:end])  # the hour's first call
        if sums and (t_ns - start > BLOCK_NS or t_ns - last > BLOCK_NS):
            close()
            if t_ns - last > BLOCK_NS:
                blocks.append(Block(last + BLOCK_NS, t_ns, Totals(), gap=True))
            sums = {}
        if not sums:
            start, first = t_ns - t_ns % _HOUR_NS, t_ns
        for _first, last_ns, model, source, i, o, cr, cc, cost, n in rows[at:end]:
            mine = sums.get((model, source))
            if mine is None:
                sums[model, source] = [i, o, cr, cc, cost or 0.0, n]
            else:
                mine[0] += i
                mine[1] += o
                mine[2] += cr
                mine[3] += cc
                mine[4] += cost or 0.0
                mine[5] += n
            last = max(last, last_ns)
        at = end
    if sums:
        close()
    return blocks


def _iso(ns: int | None) -> str | None:
    """A time as ccusage writes one: UTC, to the millisecond (cut, not rounded)."""
    if ns is None:
        return None
    return dt.datetime.fromtimestamp(ns // 1_000_000 / 1e3, dt.timezone.utc).isoformat(
        timespec="milliseconds")[:-6] + "Z"


def blocks_json(blocks: list[Block], now_ns: int) -> dict[str, Any]:
    """The blocks report as ccusage's ``blocks --json`` writes it."""
    out = []
    for b in blocks:
        t = b.totals
        active = b.active(now_ns)
        out.append({
            "id": ("gap-" if b.gap else "") + (_iso(b.start_ns) or ""),
            "startTime": _iso(b.start_ns), "endTime": _iso(b.end_ns),
            "actualEndTime": _iso(b.last_ns), "isActive": active, "isGap": b.gap,
            "entries": t.calls,
            "tokenCounts": {"inputTokens": t.input, "outputTokens": t.output,
                            "cacheCreationInputTokens": t.cache_creation,
                            "cacheReadInputTokens": t.cache_read},
            "totalTokens": t.total_tokens, "costUSD": round(t.cost, 9),
            "costSource": t.cost_source, **t.split_json(), "unpricedModels": t.unpriced,
            "models": list(t.models),
            "burnRate": b.burn_rate() if active else None,
            "projection": b.projection(now_ns) if active else None,
        })
    return {"blocks": out}


def blocks(reader: Reader, f: UsageFilter) -> list[Block]:
    """The 5-hour blocks of the calls that pass ``f``."""
    return make_blocks(q.hours(reader, f))


def report_json(reader: Reader, report: Report, f: UsageFilter, tz: dt.tzinfo | None,
                now_ns: int) -> dict[str, Any]:
    """Any report as its ``--json``."""
    if report == "session":
        return session_json(session_report(reader, f, tz))
    if report == "blocks":
        return blocks_json(blocks(reader, f), now_ns)
    return period_json(report, periods(reader, report, f, tz))


# -- the entries of the period and session reports, encoded in C ------------------------

#: The fields every period and session entry has, between its own leading and
#: trailing ones (msgspec names them in camel case: ``inputTokens`` …).
_ENTRY_FIELDS: Final = (
    ("input_tokens", int), ("output_tokens", int), ("cache_creation_tokens", int),
    ("cache_read_tokens", int), ("total_tokens", int), ("total_cost", float),
    ("cost_source", str), ("cli_cost", float), ("estimated_cost", float),
    ("unpriced_models", list[str]), ("models_used", list[str]))


@functools.cache
def _structs() -> tuple[type, dict[str, type]]:
    """The reports' entries as msgspec structs, whose fields are their JSON keys in
    their order: a model breakdown, and an entry of each report (a period's key and
    ``period`` first; a session's id first and what the recording is last)."""
    import msgspec

    class Breakdown(msgspec.Struct, rename="camel"):
        model_name: str
        input_tokens: int
        output_tokens: int
        cache_creation_tokens: int
        cache_read_tokens: int
        cost: float | None
        cost_source: str

    middle = [*_ENTRY_FIELDS, ("model_breakdowns", list[Breakdown])]
    # ccusage 20's own keys last: ``agent`` and ``metadata`` (``agents`` of a
    # period, a session's ``lastActivity`` as a time), a session's id as ``period``.
    ccusage20 = [("agent", str), ("metadata", dict[str, Any])]
    entries = {report: msgspec.defstruct(
        f"{report.title()}Entry", [(KEYS[report][1], str), ("period", str), *middle,
                                   *ccusage20], rename="camel") for report in KEYS}
    entries["session"] = msgspec.defstruct(
        "SessionEntry", [("session_id", str), *middle, ("last_activity", str),
                         ("project_path", str), ("recording_id", str),
                         ("name", str | None), ("source", str), ("period", str),
                         *ccusage20], rename="camel")
    return Breakdown, entries


ModelFigures = tuple[str, int, tuple[Any, ...], float]
"""A model's part of an entry: its name, cost sources (a mask of :data:`_BIT`),
:class:`~claudetrace.store.usage.Figures`' values and the price table's part of
its cost."""


def _entry(make: Callable[..., Any], lead: tuple[Any, ...], i: int, o: int, cr: int,
           cc: int, cost: float, mask: int, est: float, models: Sequence[ModelFigures],
           tail: tuple[Any, ...]) -> Any:
    """A period's or session's entry (``make``: its struct) from its sums and its
    models' (in first-seen order): ccusage's fields and ours, its breakdowns the
    costliest model first, costs to 1e-9 dollars, a model without a price
    ``null``."""
    breakdown = _structs()[0]
    unknown = UNKNOWN
    source_of = SOURCE_OF
    return make(
        *lead, i, o, cc, cr, i + o + cr + cc, round(cost, 9), source_of[mask],
        round(cost - est, 9), round(est, 9),
        [m[0] for m in models if m[1] & unknown] if mask & unknown else [],
        [m[0] for m in models],
        [breakdown(m[0], fig[0], fig[1], fig[3], fig[2],
                   None if m[1] == unknown else round(fig[4], 9), source_of[m[1]])
         for m in (models if len(models) == 1 else sorted(models, key=lambda m: -m[2][4]))
         for fig in (m[2],)],
        *tail)


@dataclass(slots=True)
class SessionReport:
    """The session report: each recording with calls (oldest last activity first)
    and its sums over its models, and the totals.  Its entries, what the JSON
    writes and the table shows, are made from them (:meth:`entries`): the table
    reads the sums as they are."""

    recordings: list[q.RecordingUsage]
    #: Each recording's sums: input, output, cache read and cache creation tokens,
    #: cost, cost sources (a mask of :data:`_BIT`) and the price table's part of
    #: the cost (:meth:`Totals.of_models`'s, the same ``sum`` in the same order).
    sums: list[tuple[int, int, int, int, float, int, float]]
    totals: Totals
    #: The zone of the entries' ``lastActivity``.
    tz: dt.tzinfo | None = None

    @property
    def models(self) -> list[Sequence[ModelFigures]]:
        """Each recording's models, in the order of their first calls."""
        return [rec.models for rec in self.recordings]

    def entries(self) -> list[Any]:
        """Each recording's entry (a msgspec struct: ccusage's fields and ours)."""
        make = _structs()[1]["session"]
        tz = self.tz
        return [_entry(make, (sid,), i, o, cr, cc, cost, mask, est, rec.models,
                       (dt.datetime.fromtimestamp(rec.last_ns / 1e9, tz).date().isoformat(),
                        rec.cwd, rec.recording_id, rec.name, rec.source,
                        sid, "claude", {"lastActivity": _iso(rec.last_ns)}))
                for rec, (i, o, cr, cc, cost, mask, est) in zip(
                    self.recordings, self.sums, strict=True)
                for sid in (rec.session_id or rec.recording_id,)]


def session_report(reader: Reader, f: UsageFilter, tz: dt.tzinfo | None) -> SessionReport:
    """Each recording's sums, added up from the store's rows (no :class:`Totals` or
    dict per session and model: most of a 10,000-session report's time in Python
    otherwise), and the totals.

    A session's sums are :meth:`Totals.of_models`'s (the same ``sum`` of the same
    figures in the same order), the totals :meth:`Totals.sum_of`'s of them."""
    i_all = o_all = cr_all = cc_all = n_all = 0
    cost_all = est_all = 0.0
    mask_all = 0
    masks: dict[str, int] = {}  # each model's cost sources over every session
    recordings = q.by_recording(reader, f)
    sums: list[tuple[int, int, int, int, float, int, float]] = []
    add = sums.append
    for rec in recordings:
        models = rec.models
        if len(models) == 1:
            model, mask, (i, o, cr, cc, cost, n), est = models[0]
            masks[model] = masks.get(model, 0) | mask
        else:  # Totals.of_models's sums
            i, o, cr, cc, cost, n = map(sum, zip(*(m[2] for m in models), strict=True))
            mask = 0
            for m in models:
                mask |= m[1]
                masks[m[0]] = masks.get(m[0], 0) | m[1]
            est = sum(m[3] for m in models)
        i_all += i
        o_all += o
        cr_all += cr
        cc_all += cc
        cost_all += cost
        n_all += n
        est_all += est
        mask_all |= mask
        add((i, o, cr, cc, cost, mask, est))
    totals = Totals(i_all, o_all, cr_all, cc_all, cost_all, n_all, mask_all,
                    {m: Totals(sources=mask) for m, mask in masks.items()}, est_all)
    return SessionReport(recordings, sums, totals, tz)


def session_json(found: SessionReport) -> dict[str, Any]:
    """The session report as ccusage's ``session --json`` writes it: the entries
    under ccusage 18's ``sessions`` and ccusage 20's ``session`` alike."""
    entries = found.entries()
    return {"sessions": entries, "totals": found.totals.totals_json(), "session": entries}
