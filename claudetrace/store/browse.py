"""The bounded queries the session browser runs: only what a page shows, nothing more.

The session list reads summary columns (never events); the raw view reads one
page of event metadata (never the bytes, except for the line being expanded);
text search asks the word index over every recording (:mod:`.search`).
Everything goes through the :class:`~claudetrace.store.Store` engine, so it
works on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Text,
    and_,
    case,
    cast,
    func,
    literal,
    null,
    or_,
    select,
    text,
)
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import defer, load_only

from ..errors import StoreError
from ..model import FAILED
from ..model.events import Event
from ..model.protocol import failed_tool_ids, line_text
from ..model.summary import tool_call_counts
from .api import Store
from .models import (
    EventRow,
    EventTool,
    Recording,
    UsageModel,
    number_of,
    numbers_of,
    status_expression,
    type_in,
)
from .packing import KEPT
from .rows import COST_SOURCES, stored_id, tag_condition
from .search import recordings_saying


@dataclass(frozen=True, slots=True)
class Filters:
    """What the session list is narrowed to (all optional)."""

    since: dt.date | None = None
    until: dt.date | None = None  # inclusive
    models: tuple[str, ...] = ()
    errors_only: bool = False
    min_cost: float | None = None
    max_cost: float | None = None
    text: str = ""
    #: Sessions that called one of these tools.
    tools: tuple[str, ...] = ()
    #: Sessions with all of these tags, each ``key=value``.
    tags: tuple[str, ...] = ()
    #: Sessions with one of these statuses (:data:`claudetrace.model.STATUSES`).
    statuses: tuple[str, ...] = ()
    #: Sessions run in one of these folders (the recording's ``cwd``: its project).
    projects: tuple[str, ...] = ()
    #: Sessions from one of these sources (``proxy``, ``import``, ``transcript`` …).
    sources: tuple[str, ...] = ()
    #: Started at or after this time (ns since the epoch), finer than ``since``.
    started_after_ns: int | None = None
    #: The recordings that say ``text``, once asked (:func:`searched`): the
    #: queries of one page ask the index once, not once each.  Not a filter of
    #: its own (left out of comparisons and the URL).
    found: frozenset[str] | None = field(default=None, compare=False, repr=False)

    @property
    def since_ns(self) -> int | None:
        day = None if self.since is None else _day_ns(self.since)
        if self.started_after_ns is None:
            return day
        return self.started_after_ns if day is None else max(day, self.started_after_ns)

    @property
    def until_ns(self) -> int | None:
        """Exclusive upper bound: the start of the day after ``until``."""
        return None if self.until is None else _day_ns(self.until + dt.timedelta(days=1))

    def to_params(self) -> dict[str, str]:
        """URL query parameters (empty filters are left out)."""
        out: dict[str, str] = {}
        if self.since:
            out["since"] = self.since.isoformat()
        if self.until:
            out["until"] = self.until.isoformat()
        if self.models:
            out["model"] = ",".join(self.models)
        if self.errors_only:
            out["errors"] = "1"
        if self.min_cost is not None:
            out["min_cost"] = repr(self.min_cost)
        if self.max_cost is not None:
            out["max_cost"] = repr(self.max_cost)
        if self.text:
            out["q"] = self.text
        for key, values in self._lists().items():
            if values:
                out[key] = _joined(values)
        return out

    def _lists(self) -> dict[str, tuple[str, ...]]:
        return {"tool": self.tools, "tag": self.tags, "status": self.statuses,
                "cwd": self.projects, "source": self.sources}

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> Filters:
        """Filters from query parameters; malformed values are ignored, not fatal."""
        models = tuple(m for m in params.get("model", "").split(",") if m)
        return cls(
            since=_date(params.get("since")),
            until=_date(params.get("until")),
            models=models,
            errors_only=params.get("errors") in ("1", "true", "yes"),
            min_cost=_float(params.get("min_cost")),
            max_cost=_float(params.get("max_cost")),
            text=params.get("q", "").strip(),
            tools=_split(params.get("tool")),
            tags=_split(params.get("tag")),
            statuses=_split(params.get("status")),
            projects=_split(params.get("cwd")),
            sources=_split(params.get("source")),
        )

    def with_(self, **changes: Any) -> Filters:
        return replace(self, **changes)


#: Parameters named in :meth:`Filters.to_params`, in the order the URL shows them.
PARAMS = ("since", "until", "model", "errors", "min_cost", "max_cost", "q", "tool", "tag",
          "status", "cwd", "source")


def searched(store: Store, filters: Filters) -> Filters:
    """``filters`` with the recordings that say its text asked of the search index
    (:attr:`Filters.found`), for several queries of the same list to share."""
    if not filters.text or filters.found is not None:
        return filters
    return replace(filters, found=frozenset(recordings_saying(store, filters.text)))


def _joined(values: Sequence[str]) -> str:
    """Several values in one URL parameter: JSON when one holds a comma (a path may)."""
    if any("," in v or v.startswith("[") for v in values):
        return json.dumps(list(values), ensure_ascii=False)
    return ",".join(values)


def _split(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    if value.startswith("["):
        try:
            parsed = json.loads(value)
        except ValueError:
            return ()
        return tuple(str(v) for v in parsed if v) if isinstance(parsed, list) else ()
    return tuple(v for v in value.split(",") if v)


def _day_ns(day: dt.date) -> int:
    start = dt.datetime.combine(day, dt.time(), tzinfo=dt.timezone.utc)
    return int(start.timestamp()) * 1_000_000_000


def _date(value: str | None) -> dt.date | None:
    try:
        return dt.date.fromisoformat(value) if value else None
    except ValueError:
        return None


def _float(value: str | None) -> float | None:
    try:
        number = float(value) if value else None
    except ValueError:
        return None
    return number if number is not None and math.isfinite(number) else None



_R = Recording.__table__.c
_E = EventRow.__table__.c
_T = EventTool.__table__.c
_U = UsageModel.__table__.c
#: The bit of ``unknown`` (no price) in ``usage_models.sources``.
_UNKNOWN_BIT = 1 << COST_SOURCES.index("unknown")

#: Lines the conversation never shows (streaming deltas, keep-alives).
NOISE_TYPES = ("stream_event", "keep_alive")
CONTROL_TYPES = ("control_request", "control_response", "control_cancel_request")

#: The recording columns the list, tiles and status need (argv/env/extra are not read).
SUMMARY_COLUMNS = (
    Recording.id,
    Recording.name,
    Recording.tags,
    Recording.started_ns,
    Recording.ended_ns,
    Recording.last_seen_ns,
    Recording.exit_code,
    Recording.signal,
    Recording.error,
    Recording.model,
    Recording.claude_code_version,
    Recording.cli_session_id,
    Recording.host,
    Recording.pid,
    Recording.source,
    Recording.cwd,
    Recording.event_count,
    Recording.turns,
    Recording.num_turns,
    Recording.model_calls,
    Recording.tool_calls,
    Recording.tool_errors,
    Recording.input_tokens,
    Recording.output_tokens,
    Recording.cache_read_tokens,
    Recording.cache_creation_tokens,
    Recording.cost_usd,
    Recording.cost_source,
    Recording.is_error,
    Recording.result_subtype,
    Recording.models,
    Recording.outcome,
    Recording.outcome_reason,
    Recording.indexing,
)


@contextmanager
def _guard(what: str) -> Iterator[None]:
    """Turn a database failure into one clear StoreError."""
    try:
        yield
    except SQLAlchemyError as exc:
        first = (
            str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__]
        )[0]
        raise StoreError(f"{what} failed: {first}") from exc


def _filtered(store: Store, filters: Filters, *, full: bool = False) -> Any:
    stmt = select(Recording)
    # ``full``: what `sessions --json` prints; not the environment, nor the
    # Prometheus figures or latency samples (large JSON: at 100,000 recordings
    # their decoding was most of the reading, and of the memory).
    stmt = stmt.options(*(
        [defer(Recording.env), defer(Recording.figures), defer(Recording.latencies)] if full
        else [load_only(*SUMMARY_COLUMNS)]))
    if filters.since_ns is not None:
        stmt = stmt.where(_R.started_ns >= filters.since_ns)
    if filters.until_ns is not None:
        stmt = stmt.where(_R.started_ns < filters.until_ns)
    if filters.models:
        stmt = stmt.where(_R.model.in_(list(filters.models)))
    # Bounds on the cost shown (:attr:`Recording.cost`): one unknown is in none.
    if filters.min_cost is not None:
        stmt = stmt.where(_known_cost() >= filters.min_cost)
    if filters.max_cost is not None:
        stmt = stmt.where(_known_cost() <= filters.max_cost)
    if filters.tools:
        stmt = stmt.where(_R.num.in_(
            select(_T.rec).where(_T.kind == "use", _T.tool_name.in_(list(filters.tools)))
        ))
    if filters.projects:
        stmt = stmt.where(_R.cwd.in_(list(filters.projects)))
    if filters.sources:
        stmt = stmt.where(_R.source.in_(list(filters.sources)))
    if filters.errors_only:
        stmt = stmt.where(
            or_(
                _R.outcome.in_(sorted(FAILED)),
                _R.tool_errors > 0,
                _R.ended_ns.is_(None),  # running or incomplete; running ones are dropped below
            )
        )
    if filters.statuses:
        # A recording the heartbeat calls running may be incomplete (its proxy is
        # gone, which only the pid check below tells).
        wanted = set(filters.statuses) | ({"running"} if "incomplete" in filters.statuses
                                          else set())
        stmt = stmt.where(status_expression(time.time_ns()).in_(sorted(wanted)))
    for number, (key, sep, value) in enumerate(tag.partition("=") for tag in filters.tags):
        if not sep:
            stmt = stmt.where(literal(False))
            continue
        asked = tag_condition(store.engine.dialect.name, f"{Recording.__tablename__}.tags",
                              f":tag_key_{number}", f":tag_value_{number}")
        stmt = stmt.where(text(asked).bindparams(**{f"tag_key_{number}": key,
                                                    f"tag_value_{number}": value}))
    return stmt.order_by(_R.started_ns.desc(), _R.id.desc())


def _scope(store: Store, filters: Filters, *, full: bool = False) -> tuple[Any, list[Any]]:
    """The filtered statement, and the conditions that leave out what only Python
    tells apart: the ``running`` recordings (by heartbeat) whose proxy is gone
    (the pid check), when ``errors_only`` or ``statuses`` would drop them.

    Only the recordings SQL calls running are read here (a handful), so every
    other figure can be counted by the database.  Returns ``(stmt, wheres)``.
    """
    stmt = _filtered(store, filters, full=full)
    wheres: list[Any] = []
    filters = searched(store, filters)
    if filters.found is not None:
        wheres.append(_listed(store, filters.found))
    if filters.errors_only or filters.statuses:
        # No ORDER BY: sorting by start walked the whole table through its index
        # (0.08 s at 10,000 recordings on SQLite, 0.02 s without).
        live = stmt.order_by(None).where(*wheres, status_expression(time.time_ns()) == "running")
        with _guard("list recordings"), store.session() as s:
            dropped = [r.id for r in s.scalars(live) if not _kept(r, filters)]
        if dropped:
            wheres.append(_R.id.notin_(dropped))
    return stmt.where(*wheres), wheres


#: Recordings found past which PostgreSQL reads the list's every recording and
#: keeps those found, rather than looking each up by its id.
_FEW_FOUND = 200


def _listed(store: Store, ids: frozenset[str]) -> Any:
    """The condition of being one of the recordings ``ids``, as one JSON parameter:
    bound as a list, each id was a parameter that SQLAlchemy wrote out and the
    server planned, in each of a page's statements (5,000 sessions found: 1-2 s
    of the page).  On PostgreSQL, past :data:`_FEW_FOUND` ids, a JSON object
    whose keys are the ids, each recording's id looked up among them: the ids as
    rows (the planner takes a function's rows for 100) were each looked up in
    the primary key, 0.12-0.2 s a statement for 5,000 found at 1M events,
    against 0.03-0.07 s."""
    if store.engine.dialect.name != "postgresql":
        each = "SELECT value FROM json_each(:found_ids)"
    elif len(ids) <= _FEW_FOUND:
        each = "SELECT value FROM json_array_elements_text(CAST(:found_ids AS json))"
    else:
        # A scalar subquery: the object is made once, not once a row.
        keys = f"(SELECT CAST(:found_ids AS jsonb)) ? {Recording.__tablename__}.id"
        return text(keys).bindparams(found_ids=json.dumps(dict.fromkeys(sorted(ids), 1)))
    return _R.id.in_(text(each).bindparams(found_ids=json.dumps(sorted(ids))).columns(
        value=Text))


def _kept(rec: Recording, filters: Filters) -> bool:
    """Whether the Python-only status checks keep ``rec``."""
    status = rec.status
    if filters.errors_only and not (status in FAILED or (status != "running"
                                                          and rec.tool_errors)):
        return False
    return not filters.statuses or status in filters.statuses


def list_sessions(store: Store, filters: Filters, *, limit: int | None = None,
                  offset: int = 0, full: bool = False) -> list[Recording]:
    """Recordings matching ``filters``, newest first (summary columns only, unless
    ``full``: every column, as ``sessions --json`` shows them); ``offset`` and
    ``limit`` select one page in the database."""
    stmt, _ = _scope(store, filters, full=full)
    if offset:
        stmt = stmt.offset(offset)
    if limit is not None:
        stmt = stmt.limit(limit)
    with _guard("list recordings"), store.session() as s:
        return list(s.scalars(stmt))


@dataclass(frozen=True, slots=True)
class Tiles:
    """The summary figures above the session list."""

    count: int
    total_cost: float
    error_rate: float | None
    p95_duration_s: float | None
    running: int


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) by linear interpolation; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def _duration_ns() -> Any:
    """:attr:`Recording.duration_ns` in SQL."""
    end = func.coalesce(_R.ended_ns, _R.last_seen_ns)
    return case((end < _R.started_ns, literal(0)), else_=end - _R.started_ns)


def _stored_cost() -> Any:
    """:attr:`Recording.cost` in SQL: NULL where :attr:`Recording.cost_origin` says
    ``unknown`` (an estimate of no model call is no cost; no source and no cost)."""
    unknown = or_(
        _R.cost_source == "unknown",
        and_(_R.cost_source == "estimate", func.coalesce(_R.model_calls, 0) == 0),
        and_(func.coalesce(_R.cost_source, "") == "", func.coalesce(_R.cost_usd, 0.0) == 0),
    )
    return case((unknown, null()), else_=func.coalesce(_R.cost_usd, 0.0))


#: A call's model has no price (a bit of ``usage_models.sources``).
_UNPRICED = case((_U.sources.op("&")(_UNKNOWN_BIT) != 0, 1), else_=0)


def _known_cost() -> Any:
    """A recording's cost in SQL as ``usage session`` gives it
    (:func:`claudetrace.usage.with_usage`): the sum of its calls' costs by model
    (``usage_models``), NULL where one of them has no price; where it has no
    calls there, :func:`_stored_cost`."""
    # One correlated aggregate (a row even where the recording has none there).
    return (select(case((func.count() == 0, _stored_cost()),
                        (func.max(_UNPRICED) == 1, null()),
                        else_=func.coalesce(func.sum(_U.cost_usd), 0.0)))
            .where(_U.recording_id == _R.id).scalar_subquery())


def _rolled_up() -> Any:
    """Each recording's calls' costs summed (``usage_models`` grouped by recording):
    ``n`` rows, ``unpriced`` (1 where a model has no price), ``usd``."""
    return (select(_U.recording_id.label("rid"), func.count().label("n"),
                   func.max(_UNPRICED).label("unpriced"), func.sum(_U.cost_usd).label("usd"))
            .group_by(_U.recording_id).subquery("rolled"))


def _summed_cost(store: Store) -> tuple[Any, Any]:
    """Each recording's cost as the tiles add it (:func:`_known_cost`, 0 where
    unknown), and the table to select it from.

    On PostgreSQL from ``usage_models`` grouped once and joined (a hash join):
    the correlated aggregate, an index lookup a recording, was half the tiles'
    query at 10,000 recordings and 85% of it at 100,000 (7 s against 2 s on a
    loaded 2-core machine).  SQLite joins only by lookups, so there the
    correlated aggregate stays: the grouped roll-up joined through an automatic
    index was slower (0.19-0.21 s against 0.10-0.19 s at 10,000)."""
    if store.engine.dialect.name != "postgresql":
        return func.coalesce(_known_cost(), 0.0), Recording.__table__
    rolled = _rolled_up()
    cost = case((rolled.c.n.is_(None), func.coalesce(_stored_cost(), 0.0)),
                (rolled.c.unpriced == 1, 0.0),
                else_=func.coalesce(rolled.c.usd, 0.0))
    return cost, Recording.__table__.outerjoin(rolled, rolled.c.rid == _R.id)


def _seconds(ns: int) -> float:
    """A duration as the session table shows it (seconds, two decimals)."""
    return round(ns / 1e9, 2)


def summary(store: Store, filters: Filters) -> Tiles:
    """Count, total cost, error rate, p95 duration and running count of the
    recordings matching ``filters``, counted by the database: only the recordings
    it calls running are read (their proxy's pid is checked here)."""
    stmt, _ = _scope(store, filters)
    now = time.time_ns()
    status = status_expression(now)
    where = () if stmt.whereclause is None else (stmt.whereclause,)
    settled = (*where, status != "running")
    # The running ones in no order: ordered by start, SQLite walked the whole table
    # through the start index (0.08 s at 10,000 recordings, 0.02 s unordered).
    live = stmt.order_by(None).where(status == "running")
    with _guard("summarise recordings"), store.session() as s:
        heartbeat = list(s.scalars(live))
        heartbeat_costs = _costs_of(s, [rec.id for rec in heartbeat])
        ended = func.coalesce(_R.ended_ns, _R.last_seen_ns)
        cost_of, table = _summed_cost(store)
        count, cost, errors, n_timed = s.execute(
            select(func.count(), func.coalesce(func.sum(cost_of), 0.0),
                   func.coalesce(func.sum(case((status.in_(sorted(FAILED)), 1), else_=0)), 0),
                   func.count(ended))
            .select_from(table)
            .where(*settled)
        ).one()
        n_timed = int(n_timed)
        timed = (*settled, ended.is_not(None))
        extra = [rec.duration_ns for rec in heartbeat if rec.status != "running"]
        extra_ns = [d for d in extra if d is not None]
        p95 = None
        if n_timed + len(extra_ns):
            pos = (n_timed + len(extra_ns) - 1) * 0.95
            low = math.floor(pos)
            start = max(0, low - len(extra_ns))
            window = s.execute(
                select(_duration_ns()).where(*timed).order_by(_duration_ns())
                .offset(start).limit(low + 2 - start)
            ).scalars()
            merged = sorted([int(d) for d in window] + extra_ns)
            picked = [_seconds(d) for d in merged[low - start: low - start + 2]]
            upper = picked[1] if len(picked) > 1 else picked[0]
            p95 = picked[0] + (upper - picked[0]) * (pos - low)
    count = int(count) + len(heartbeat)
    running = sum(1 for rec in heartbeat if rec.status == "running")
    errors = int(errors) + sum(1 for rec in heartbeat if rec.status in FAILED)
    cost = float(cost) + sum(heartbeat_costs.get(rec.id) or 0.0 for rec in heartbeat)
    finished = count - running
    return Tiles(count=count, total_cost=cost,
                 error_rate=errors / finished if finished else None,
                 p95_duration_s=p95, running=running)


def summary_key(store: Store) -> tuple[Any, ...]:
    """What changes whenever :func:`summary`'s figures can: the recordings' count,
    newest number, latest heartbeat and end, lines in all (a grown import adds
    lines) and how many the heartbeat calls running now (one falls silent).  One
    scan of the recordings' rows, no join: a seventh of the tiles' query."""
    running = status_expression(time.time_ns()) == "running"
    with _guard("summarise recordings"), store.engine.connect() as conn:
        return tuple(conn.execute(select(
            func.count(), func.max(_R.num), func.max(_R.last_seen_ns), func.max(_R.ended_ns),
            func.sum(_R.event_count), func.sum(case((running, 1), else_=0)))).one())


def _costs_of(s: Any, ids: list[str]) -> dict[str, float | None]:
    """The costs of the recordings ``ids`` as ``usage session`` gives them (see
    :func:`_known_cost`), by id: a query per 500 of them."""
    out: dict[str, float | None] = {}
    for at in range(0, len(ids), 500):  # a bounded IN list
        out.update((rid, cost) for rid, cost in s.execute(
            select(_R.id, _known_cost()).where(_R.id.in_(ids[at:at + 500]))))
    return out


def tiles_of(recs: Sequence[Recording], *,
             costs: Mapping[str, float | None] | None = None) -> Tiles:
    """The summary figures of recordings read into Python (``costs``: their costs
    by id as ``usage`` gives them; else each one's :attr:`Recording.cost`)."""
    count = errors = running = 0
    cost = 0.0
    durations: list[float] = []
    for rec in recs:
        count += 1
        cost += (rec.cost if costs is None else costs.get(rec.id, rec.cost)) or 0.0
        status = rec.status
        if status == "running":
            running += 1
            continue
        errors += status in FAILED
        if rec.duration_ns is not None:
            durations.append(_seconds(rec.duration_ns))
    finished = count - running
    return Tiles(count=count, total_cost=cost,
                 error_rate=errors / finished if finished else None,
                 p95_duration_s=percentile(durations, 0.95), running=running)


def first_prompts(
    store: Store, recording_ids: Sequence[str], *, limit: int = 200
) -> dict[str, str]:
    """The first prompt of each recording (at most ``limit`` characters, one line).

    Two indexed queries for a page of the list: the first ``user`` line the host
    sent in each recording (``ix_events_recording_type``), then those lines.
    """
    ids = list(recording_ids)
    if not ids:
        return {}
    out: dict[str, str] = {}
    unpack = store.unpacker()
    with _guard("read first prompts"), store.engine.connect() as conn:
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            firsts = (
                select(_E.rec, func.min(_E.seq).label("seq"))
                .where(_E.rec.in_(numbers_of(chunk)), type_in(["user"]), _E.direction == "in")
                .group_by(_E.rec)
                .subquery()
            )
            rows = conn.execute(
                select(_R.id, _E.seq, _E.data, _E.codec)
                .join(firsts, (_E.rec == firsts.c.rec) & (_E.seq == firsts.c.seq))
                .join(Recording.__table__, _R.num == _E.rec)
            )
            for rid, _seq, data, codec in rows:
                text = line_text(unpack(data, codec))
                text = " ".join(text.split())
                out[rid] = text if len(text) <= limit else text[: limit - 1] + "…"
    return out


def choices(store: Store) -> dict[str, list[str]]:
    """What the list's filters offer: the tools called, tags, projects and sources seen."""
    with _guard("list filter choices"), store.engine.connect() as conn:
        tools = conn.execute(
            select(_T.tool_name).where(_T.kind == "use", _T.tool_name.is_not(None)).distinct()
        ).scalars()
        tool_names = sorted(str(t) for t in tools)
        projects = sorted(str(c) for c in conn.execute(
            select(_R.cwd).where(_R.cwd.is_not(None), _R.cwd != "").distinct()).scalars())
        sources = sorted(str(c) for c in conn.execute(select(_R.source).distinct()).scalars())
        pairs: set[str] = set()
        # Each distinct set of tags once (as its JSON text: PostgreSQL's json has no
        # equality), not every recording's.
        for text in conn.execute(select(cast(_R.tags, Text)).distinct()).scalars():
            tags = json.loads(text) if text else None
            if isinstance(tags, dict):
                pairs.update(f"{k}={v}" for k, v in tags.items())
    return {"tools": tool_names, "tags": sorted(pairs), "projects": projects,
            "sources": sources}


def models(store: Store) -> list[str]:
    """Distinct models seen across recordings (for the model filter)."""
    with _guard("list models"), store.engine.connect() as conn:
        rows = conn.execute(select(_R.model).where(_R.model.is_not(None)).distinct()).scalars()
        return sorted(str(m) for m in rows)


@dataclass(frozen=True, slots=True)
class RawRow:
    """Metadata of one line (no bytes) for the raw table."""

    seq: int
    t: float
    direction: str
    type: str | None
    subtype: str | None
    size: int
    is_json: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "t (s)": round(self.t, 6),
            "dir": self.direction,
            "type": self.type if self.is_json else "(not JSON)",
            "subtype": self.subtype,
            "size": self.size,
        }


def _event_filter(recording_id: str, directions: Sequence[str], types: Sequence[str]) -> list[Any]:
    where: list[Any] = [_E.rec == number_of(recording_id)]
    if directions:
        where.append(_E.direction.in_(list(directions)))
    if types:
        wanted = [t for t in types if t != "(not JSON)"]
        clause: ColumnElement[bool] = type_in(wanted)
        if len(wanted) != len(types):
            clause = or_(clause, _E.is_json.is_(False))
        where.append(clause)
    return where


def raw_page(
    store: Store,
    recording_id: str,
    *,
    directions: Sequence[str] = (),
    types: Sequence[str] = (),
    offset: int = 0,
    limit: int = 200,
) -> list[RawRow]:
    """One page of line metadata, in sequence order."""
    stmt = (
        select(_E.seq, _E.t_ns, _E.direction, _E.type, _E.subtype, _E.size, _E.is_json)
        .where(*_event_filter(recording_id, directions, types))
        .order_by(_E.seq)
        .offset(offset)
        .limit(limit)
    )
    with _guard("read events"), store.engine.connect() as conn:
        return [
            RawRow(r.seq, r.t_ns / 1e9, r.direction, r.type, r.subtype, r.size, bool(r.is_json))
            for r in conn.execute(stmt)
        ]


def raw_count(
    store: Store, recording_id: str, *, directions: Sequence[str] = (), types: Sequence[str] = ()
) -> int:
    """How many lines the raw filters match."""
    stmt = (
        select(func.count())
        .select_from(EventRow.__table__)
        .where(*_event_filter(recording_id, directions, types))
    )
    with _guard("count events"), store.engine.connect() as conn:
        return int(conn.execute(stmt).scalar_one())


def line_types(store: Store, recording_id: str) -> list[str]:
    """Distinct line types of a recording (``(not JSON)`` for the rest)."""
    stmt = select(_E.type, _E.is_json).where(_E.rec == number_of(recording_id)).distinct()
    with _guard("read events"), store.engine.connect() as conn:
        rows = conn.execute(stmt).all()
    names = {r[0] for r in rows if r[0]}
    if any(not r[1] for r in rows):
        names.add("(not JSON)")
    return sorted(names)


def event_at(store: Store, recording_id: str, seq: int) -> Event | None:
    """The full line ``seq`` of a recording."""
    return next(iter(store.iter_events(recording_id, start_seq=seq, limit=1)), None)


def conversation_events(
    store: Store, recording_id: str, *, start_seq: int = 0, limit: int = 1500
) -> list[Event]:
    """Up to ``limit`` lines from ``start_seq`` that a conversation shows (no deltas)."""
    stmt = (
        select(_E.seq, _E.direction, _E.t_ns, _E.wall_ns, _E.data, _E.eol, _E.codec)
        .where(
            _E.rec == number_of(recording_id),
            _E.seq >= start_seq,
            or_(_E.type.is_(None), _E.type.notin_(NOISE_TYPES)),
        )
        .order_by(_E.seq)
        .limit(limit)
    )
    unpack = store.unpacker()
    with _guard("read events"), store.engine.connect() as conn:
        return [
            Event(r.seq, r.direction, r.t_ns, unpack(r.data, r.codec), r.eol, r.wall_ns)
            for r in conn.execute(stmt)
        ]


def events_since(store: Store, starts: Mapping[str, int], *, chunk: int = 20_000
                 ) -> dict[str, list[Event]]:
    """The lines of several recordings stored from a line of each on (``starts``:
    recording id → first line wanted), in sequence order: what the session list
    feeds the folds of its running sessions, in one statement for all of them (a
    page of ``chunk`` lines at a time), not one per session."""
    wanted = dict(starts)
    out: dict[str, list[Event]] = {rid: [] for rid in wanted}
    if not wanted:
        return out
    unpack = store.unpacker()
    with _guard("read events"), store.engine.connect() as conn:
        while wanted:
            rows = conn.execute(
                select(_R.id, _E.seq, _E.direction, _E.t_ns, _E.data, _E.eol, _E.wall_ns,
                       _E.codec)
                .join(Recording.__table__, _R.num == _E.rec)
                .where(or_(*(and_(_E.rec == number_of(rid), _E.seq >= seq)
                             for rid, seq in wanted.items())))
                .order_by(_E.rec, _E.seq)
                .limit(chunk)
            ).all()
            for rid, seq, direction, t_ns, data, eol, wall_ns, codec in rows:
                out[rid].append(Event(seq, direction, t_ns, unpack(data, codec), eol, wall_ns))
            if len(rows) < chunk:
                break
            # A full page: the recordings before the last one read are done; the
            # last one goes on after its last line read.
            last = rows[-1]
            done = {r[0] for r in rows} - {last[0]}
            wanted = {rid: seq for rid, seq in wanted.items() if rid not in done}
            wanted[last[0]] = last[1] + 1
    return out


def control_events(store: Store, recording_id: str) -> list[Event]:
    """The control lines of a recording (through the ``(rec, type)`` index, ``rec``
    the recording's number: :mod:`.keys`)."""
    return list(store.iter_events(recording_id, types=CONTROL_TYPES))


_DAY_NS = 86_400 * 1_000_000_000


def sessions_per_day(store: Store) -> list[tuple[dt.date, int, int]]:
    """``(UTC day, sessions started, sessions failed)`` per day, oldest first: counted
    by the database (one ``GROUP BY`` over the recordings' summary columns); only the
    recordings it calls running are read, for the pid check :func:`summary` makes."""
    day = (_R.started_ns // _DAY_NS).label("day")
    status = status_expression(time.time_ns())
    failed = func.coalesce(func.sum(case((status.in_(sorted(FAILED)), 1), else_=0)), 0)
    with _guard("count sessions per day"), store.session() as s:
        rows = {int(d): [int(n), int(e)] for d, n, e in s.execute(
            select(day, func.count(), failed).group_by(day))}
        # A recording whose heartbeat says running but whose proxy is gone failed
        # (incomplete): only this check tells, as the list's status does.
        for rec in s.scalars(select(Recording).options(load_only(*SUMMARY_COLUMNS))
                             .where(status == "running")):
            if rec.status in FAILED:
                rows[rec.started_ns // _DAY_NS][1] += 1
    epoch = dt.date(1970, 1, 1)
    return [(epoch + dt.timedelta(days=d), n, e) for d, (n, e) in sorted(rows.items())]


def tool_usage(
    store: Store, recording_ids: Sequence[str] | None = None
) -> dict[str, tuple[int, int]]:
    """``tool name -> (calls, failures)`` across recordings (all, or the ids given).

    An ended recording's calls and failures are in the records it stored as it
    ended (its ``figures``: calls by tool name and outcome, or before the sums one
    record a call: :func:`claudetrace.model.summary.tool_call_counts`), read without its
    events; so a Stats page costs the same on a store of 1M events as of 10M.
    The others (running, or stored before migration 0006) are counted from
    their events (:func:`_tool_usage_from_events`).
    """
    stmt = select(_R.id, _R.figures)
    if recording_ids is not None:
        stmt = stmt.where(_R.id.in_(list(recording_ids)))
    calls: dict[str, int] = {}
    failures: dict[str, int] = {}
    unstored: list[str] = []
    with _guard("read tool usage"), store.engine.connect() as conn:
        for rid, figures in conn.execute(stmt):
            if figures is None:
                unstored.append(rid)
                continue
            for name, outcome, n in tool_call_counts(figures):
                name = str(name or "?")
                calls[name] = calls.get(name, 0) + n
                if outcome == "error":
                    failures[name] = failures.get(name, 0) + n
    for start in range(0, len(unstored), 500):  # bounded IN lists
        for name, (n, failed) in _tool_usage_from_events(
                store, unstored[start:start + 500]).items():
            calls[name] = calls.get(name, 0) + n
            failures[name] = failures.get(name, 0) + failed
    return {
        name: (calls.get(name, 0), failures.get(name, 0))
        for name in sorted(set(calls) | set(failures))
    }


def _tool_usage_from_events(
    store: Store, recording_ids: Sequence[str]
) -> dict[str, tuple[int, int]]:
    """:func:`tool_usage` of recordings ``recording_ids`` from their events.

    Calls come from the ``event_tools`` index (each tool use id once); failures
    from the few result lines that contain ``"is_error":true``, parsed to find
    which tool use failed.
    """
    # A streamed call names its tool use twice (its content_block_start and the
    # assistant line): each id counts once, as the session model counts it.
    named = (select(_T.rec, _T.tool_use_id, _T.tool_name).distinct()
             .where(_T.kind == "use", _T.rec.in_(numbers_of(recording_ids))).subquery())
    uses = select(named.c.tool_name, func.count()).group_by(named.c.tool_name)
    # A packed line (an ended recording's, :mod:`.packing`) cannot be searched in
    # SQL: it is read and looked at here.
    failing = select(_E.rec, _E.seq, _E.direction, _E.t_ns, _E.data, _E.codec).where(
        type_in(["user"]),
        _E.direction == "out",
        or_(
            _E.codec.is_not(None) & (_E.codec != KEPT),
            cast(_E.data, Text).like('%"is\\_error":true%', escape="\\"),
            cast(_E.data, Text).like('%"is\\_error": true%', escape="\\"),
        )
        if store.engine.dialect.name == "sqlite"
        else or_(_E.codec.is_not(None) & (_E.codec != KEPT),
                 func.position(literal(b'"is_error"').op("IN")(_E.data)) > 0),
    )
    failing = failing.where(_E.rec.in_(numbers_of(recording_ids)))
    # Only recordings whose summary counts a failed tool (or that are still being
    # recorded, their summary not final) hold a failing result: the scan of result
    # lines stays the size of the failures, not of the store.
    failing = failing.where(_E.rec.in_(
        select(_R.num).where(or_(_R.tool_errors > 0, _R.ended_ns.is_(None)))))
    with _guard("read tool usage"), store.engine.connect() as conn:
        calls = {str(name or "?"): int(n) for name, n in conn.execute(uses)}
        failed_ids: list[str] = []
        unpack = store.unpacker()
        for row in conn.execute(failing.limit(20000)):
            line = unpack(row.data, row.codec)
            if b'"is_error"' in line:
                failed_ids.extend(failed_tool_ids(Event(row.seq, row.direction, row.t_ns, line)))
        failures: dict[str, int] = {}
        # Asked as the column holds them (a long id keeps a digest: stored_id).
        failed_ids = [str(stored_id(tid)) for tid in failed_ids]
        for start in range(0, len(failed_ids), 500):
            chunk = failed_ids[start : start + 500]
            names = conn.execute(
                select(_T.tool_use_id, _T.tool_name).where(
                    _T.kind == "use", _T.tool_use_id.in_(chunk)
                )
            ).all()
            by_id = {tid: name for tid, name in names}
            for tid in chunk:
                name = str(by_id.get(tid) or "?")
                failures[name] = failures.get(name, 0) + 1
    return {
        name: (calls.get(name, 0), failures.get(name, 0))
        for name in sorted(set(calls) | set(failures))
    }
