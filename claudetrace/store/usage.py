"""Usage over many recordings: the queries behind ``claudetrace usage``.

Every figure comes from ``usage_calls`` (a row per model call: its time, model,
tokens, cost and where the cost comes from; a message two recordings hold is
counted once), through ``usage_hours``, the sums the store keeps of each
recording's calls by hour, model and cost source (the calls themselves only when
a report's times cut hours: a zone whose days start at a part of an hour).  The
database sums them again: by time bucket and model (:func:`buckets`, for days,
weeks and months in any time zone), by recording and model
(:func:`by_recording`), or by hour in time order (:func:`hours`, for 5-hour
blocks).  :class:`UsageFilter` narrows them by time, model and the recordings'
project (cwd), tags, name and source.

The queries are plain SQL that SQLite and PostgreSQL both read, run by a
:class:`Reader`: the store's connection (:func:`store_reader`), or on a
database at the newest schema a bare :mod:`sqlite3` or psycopg connection
(:func:`plain_reader`): a report then loads neither SQLAlchemy nor the models,
most of its time otherwise.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, Protocol

from ..config import plain_file
from .plain import SCHEMA_HEAD
from .rows import HOUR_NS, hour_columns, sources_mask, tag_condition


class Reader(Protocol):
    """Runs a query: ``marker`` is its driver's parameter, ``dialect`` the database's."""

    marker: str
    dialect: str

    def rows(self, sql: str, params: list[Any]) -> Iterable[tuple[Any, ...]]: ...


class _StoreReader:
    def __init__(self, store: Any) -> None:
        self._store = store
        self.dialect = store.engine.dialect.name
        self.marker = "?" if store.engine.dialect.paramstyle == "qmark" else "%s"

    def rows(self, sql: str, params: list[Any]) -> Iterable[tuple[Any, ...]]:
        from .api import _store_errors

        with _store_errors("read"), self._store.engine.connect() as conn:
            return [tuple(row) for row in conn.exec_driver_sql(sql, tuple(params))]


def store_reader(store: Any) -> Reader:
    """The queries run on a :class:`~claudetrace.store.Store`'s connection."""
    return _StoreReader(store)


class _SqliteReader:
    marker = "?"
    dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def rows(self, sql: str, params: list[Any]) -> Iterable[tuple[Any, ...]]:
        from ..errors import StoreError

        try:
            found: list[tuple[Any, ...]] = self.conn.execute(sql, params).fetchall()
            return found
        except sqlite3.Error as exc:
            raise StoreError(f"read failed: {exc}") from exc


class _PostgresReader:
    marker = "%s"
    dialect = "postgresql"

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def rows(self, sql: str, params: list[Any]) -> Iterable[tuple[Any, ...]]:
        import psycopg

        from ..errors import StoreError

        try:
            # Binary: numbers as they are stored, a fifth less to read than as text.
            found: list[tuple[Any, ...]] = self.conn.execute(
                sql, params, binary=True).fetchall()
            return found
        except psycopg.Error as exc:
            raise StoreError(f"read failed: {str(exc).strip().splitlines()[0]}") from exc


@contextmanager
def plain_reader(url: str) -> Iterator[Reader | None]:
    """A bare reader of the database ``url`` when it is at :data:`~.plain.SCHEMA_HEAD`:
    :mod:`sqlite3` on a SQLite file (read-only), psycopg on a PostgreSQL URL libpq
    reads as SQLAlchemy does; None for any other database, or one to migrate."""
    if url.startswith("postgresql"):
        from .postgres import plain_url

        conninfo = plain_url(url)
        if conninfo is None:
            yield None
            return
        import psycopg

        try:
            pg = psycopg.connect(conninfo, autocommit=True)
        except psycopg.Error:
            yield None  # the store says why, in its words
            return
        try:
            try:
                heads = [row[0] for row in pg.execute("SELECT version_num FROM alembic_version")]
            except psycopg.Error:
                heads = []
            yield _PostgresReader(pg) if heads == [SCHEMA_HEAD] else None
        finally:
            pg.close()
        return
    path = plain_file(url)
    conn = None
    if path is not None:
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
            heads = [row[0] for row in conn.execute("SELECT version_num FROM alembic_version")]
        except sqlite3.Error:
            heads = []
        if heads != [SCHEMA_HEAD] and conn is not None:
            conn.close()
            conn = None
    try:
        yield None if conn is None else _SqliteReader(conn)
    finally:
        if conn is not None:
            conn.close()


@dataclass(frozen=True)
class UsageFilter:
    """Which calls a report adds up (every condition must hold; empty: no condition)."""

    since_ns: int | None = None
    until_ns: int | None = None
    models: tuple[str, ...] = ()
    #: A part of the recording's working directory.
    project: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    name: str | None = None
    sources: tuple[str, ...] = ()
    #: Only these recordings' calls (their ids).
    recordings: tuple[str, ...] = ()

    @property
    def by_recording(self) -> bool:
        return bool(self.project or self.tags or self.name or self.sources)


class Figures(NamedTuple):
    """Tokens, cost and calls of one group (``cost`` adds the calls that have one)."""

    input: int
    output: int
    cache_read: int
    cache_creation: int
    cost: float
    calls: int


#: Each report's columns on ``usage_hours`` (the per-hour sums the store keeps), and
#: on ``usage_calls`` when a report's times cut hours (a time zone whose days start
#: at a part of an hour, ``since``/``until`` of such a zone).
class _Columns(NamedTuple):
    table: str
    time: str  # a row's time, for buckets of whole hours
    hour: str
    on_hour: str
    first: str
    last: str
    sums: str
    kept: str  # the condition a row needs besides the filter's


def _sums(calls: str) -> str:
    """SQL of a group's :class:`Figures` (whole numbers as integers on both
    databases: PostgreSQL's ``SUM`` of ``BIGINT`` is a ``numeric``)."""
    tokens = ", ".join(f"CAST(SUM(u.{t}) AS BIGINT)" for t in (
        "input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"))
    return f"{tokens}, SUM(u.cost_usd), CAST({calls} AS BIGINT)"


_HOURS = _Columns(
    "usage_hours", "u.hour_ns", "u.hour_ns", "u.on_hour", "MIN(u.first_ns)", "MAX(u.last_ns)",
    _sums("SUM(u.calls)"), "1 = 1")
_CALLS = _Columns(
    "usage_calls", "u.t_ns", *hour_columns("u.t_ns"),
    "MIN(u.t_ns)", "MAX(u.t_ns)",
    _sums("COUNT(*)"),
    "NOT u.duplicate")  # a message two recordings hold, once


#: ``usage_models``' sums (a recording's calls by model): only ever read whole, by
#: :func:`by_recording`, where no time bound cuts them.
_MODELS = _Columns("usage_models", "", "", "", "", "", "", "1 = 1")


def _columns(f: UsageFilter, *times: int) -> _Columns:
    """The per-hour sums when ``f``'s bounds and ``times`` (bucket size and shift)
    are whole hours, else the calls."""
    bounds = [t for t in (f.since_ns, f.until_ns, *times) if t is not None]
    return _HOURS if all(t % HOUR_NS == 0 for t in bounds) else _CALLS


def _figures(row: tuple[Any, ...], at: int) -> Figures:
    """The :class:`Figures` of :data:`_Columns.sums` at ``row[at:]``."""
    return Figures(row[at], row[at + 1], row[at + 2], row[at + 3], row[at + 4] or 0.0,
                   row[at + 5])


def _from(reader: Reader, f: UsageFilter, c: _Columns, *, join: bool = False,
          ) -> tuple[str, list[Any]]:
    """The ``FROM … WHERE …`` of the rows ``f`` keeps, and its parameters (``join``:
    with the recordings, ``r``, whatever ``f`` asks)."""
    m = reader.marker
    joins, where = "", [c.kept]
    params: list[Any] = []
    if f.since_ns is not None:
        where.append(f"{c.time} >= {m}")
        params.append(f.since_ns)
    if f.until_ns is not None:
        where.append(f"{c.time} < {m}")
        params.append(f.until_ns)
    if f.models:
        where.append(f"u.model IN ({', '.join([m] * len(f.models))})")
        params.extend(f.models)
    if f.recordings:
        where.append(f"u.recording_id IN ({', '.join([m] * len(f.recordings))})")
        params.extend(f.recordings)
    if f.by_recording or join:
        joins = " JOIN recordings r ON r.id = u.recording_id"
        if f.project:
            escaped = f.project.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            where.append(f"r.cwd LIKE {m} ESCAPE '\\'")
            params.append(f"%{escaped}%")
        if f.name is not None:
            where.append(f"r.name = {m}")
            params.append(f.name)
        if f.sources:
            where.append(f"r.source IN ({', '.join([m] * len(f.sources))})")
            params.extend(f.sources)
        for key, value in f.tags.items():
            where.append(tag_condition(reader.dialect, "r.tags", m, m))
            params.extend([key, value])
    return f" FROM {c.table} u{joins} WHERE {' AND '.join(where)}", params


def buckets(reader: Reader, f: UsageFilter, bucket_ns: int, offset_ns: int = 0,
            ) -> list[tuple[int, str, str, Figures]]:
    """``(bucket start ns, model, cost source, figures)`` per time bucket of
    ``bucket_ns`` that has calls; buckets start at multiples of ``bucket_ns`` in
    Unix time shifted by ``offset_ns`` (a fixed zone's days: its UTC offset)."""
    size, shift = int(bucket_ns), int(offset_ns)  # integer division on both databases
    c = _columns(f, size, shift)
    source, params = _from(reader, f, c)
    bucket = f"({c.time} + {shift}) / {size}"
    sql = (f"SELECT {bucket}, u.model, u.cost_source, {c.sums}{source} "
           f"GROUP BY {bucket}, u.model, u.cost_source")
    return [(int(row[0]) * size - shift, row[1], row[2], _figures(row, 3))
            for row in reader.rows(sql, params)]


#: A model's :class:`Figures` as a plain tuple (no :class:`Figures` made per row).
FigureValues = tuple[int, int, int, int, float, int]


class RecordingUsage(NamedTuple):
    """A recording's figures per model (in the order of their first calls), the
    cost sources of each model's calls, and what the recording is."""

    recording_id: str
    session_id: str | None
    name: str | None
    cwd: str
    source: str
    last_ns: int
    #: ``(model, cost sources (a bit mask, bit i: :data:`~.rows.COST_SOURCES` [i]),
    #: figures (:class:`Figures`' values), the price table's part of the cost)``.
    models: list[tuple[str, int, FigureValues, float]]


#: The recording's columns :func:`by_recording` reads after a model's figures.
_RECORDING_COLUMNS: Final = "r.cli_session_id, r.name, r.cwd, r.source"


def _in_call_order(reader: Reader, t: str) -> str:
    """``ORDER BY`` putting a recording's rows (of ``t``) together, its models in
    the order of their first calls (names compared by code point, as Python
    compares them)."""
    collate = ' COLLATE "C"' if reader.dialect == "postgresql" else ""
    return f" ORDER BY {t}.recording_id, {t}.first_ns, {t}.model{collate}"


def _last_call(t: str) -> str:
    """SQL of the last call of the recording of a row of ``t``, as ``rec_last``."""
    return f"MAX({t}.last_ns) OVER (PARTITION BY {t}.recording_id) AS rec_last"


def _in_last_order(reader: Reader, t: str) -> str:
    """``ORDER BY`` of :func:`by_recording`: the recordings by their last call
    (``rec_last``), then id, a recording's rows together, its models in the order
    of their first calls (ids and names by code point, as Python compares them)."""
    collate = ' COLLATE "C"' if reader.dialect == "postgresql" else ""
    return (f" ORDER BY rec_last, {t}.recording_id{collate}, {t}.first_ns, "
            f"{t}.model{collate}")


def by_recording(reader: Reader, f: UsageFilter) -> list[RecordingUsage]:
    """Each recording with calls: its figures per model, oldest last activity first.

    Without a time bound: the sums the store keeps by recording and model
    (``usage_models``), read as they are; with one, the hourly sums (or the
    calls) that the database adds up by recording and model.  A row each, with
    the recording's columns, a recording's rows together (the database sorts them:
    Python only reads them in turn)."""
    # PostgreSQL orders the recordings by their last call (a window's MAX); SQLite,
    # which runs the query in this process, groups them and Python sorts them
    # (its window and sort took longer: 0.87 -> 0.95 s of CPU for `session --since`).
    windowed = reader.dialect == "postgresql"
    if f.since_ns is None and f.until_ns is None:
        source, params = _from(reader, f, _MODELS, join=True)
        sql = (f"SELECT u.recording_id, u.model, u.input_tokens, u.output_tokens, "
               f"u.cache_read_tokens, u.cache_creation_tokens, u.cost_usd, u.calls, "
               f"u.sources, u.first_ns, u.last_ns, u.estimated_usd, {_RECORDING_COLUMNS}"
               f"{', ' + _last_call('u') if windowed else ''}{source}")
        t = "u"
    else:
        c = _columns(f)
        source, params = _from(reader, f, c)
        sums = (f"SELECT u.recording_id, u.model, {c.sums}, {sources_mask('u.cost_source')}, "
                f"{c.first} AS first_ns, {c.last} AS last_ns, "
                f"SUM(CASE WHEN u.cost_source = 'estimate' THEN u.cost_usd ELSE 0 END)"
                f"{source} GROUP BY u.recording_id, u.model")
        sql = (f"SELECT s.*, {_RECORDING_COLUMNS}{', ' + _last_call('s') if windowed else ''} "
               f"FROM ({sums}) s JOIN recordings r ON r.id = s.recording_id")
        t = "s"
    sql += _in_last_order(reader, t) if windowed else _in_call_order(reader, t)
    # A recording's fields, its last call's time (SQLite: the most of its models')
    # fifth, made a RecordingUsage by _make (no Python __new__ of seven arguments).
    groups: list[list[Any]] = []
    add = groups.append
    rid = None
    mine: list[Any] = []
    for row in reader.rows(sql, params):
        model = (row[1], int(row[8]),
                 (row[2], row[3], row[4], row[5], row[6] or 0.0, row[7]), row[11] or 0.0)
        if row[0] == rid:
            mine[6].append(model)
            if row[10] > mine[5]:
                mine[5] = row[10]
        else:
            rid = row[0]
            mine = [rid, row[12], row[13], row[14] or "", row[15],
                    row[16] if windowed else row[10], [model]]
            add(mine)
    out = list(map(RecordingUsage._make, groups))
    if not windowed:
        out.sort(key=lambda r: (r.last_ns, r.recording_id))
    return out


def model_costs(reader: Reader, ids: list[str]) -> Iterable[tuple[Any, ...]]:
    """``(recording id, cost (None: none priced), cost sources (a mask), calls)`` of
    each model of the recordings ``ids`` (at most a few hundred: an ``IN`` list),
    a recording's rows together, its models in :func:`by_recording`'s order: what
    a recording's cost is added up from, and no more."""
    sql = (f"SELECT u.recording_id, u.cost_usd, u.sources, u.calls FROM usage_models u "
           f"WHERE u.recording_id IN ({', '.join([reader.marker] * len(ids))})"
           f"{_in_call_order(reader, 'u')}")
    return reader.rows(sql, list(ids))


class HourUsage(NamedTuple):
    """The calls of an hour (UTC; ``on_hour``: those at its very start), model and
    cost source: the first's and last one's times, tokens, cost (None: no price)
    and how many."""

    first_ns: int
    last_ns: int
    model: str
    cost_source: str
    input: int
    output: int
    cache_read: int
    cache_creation: int
    cost: float | None
    calls: int


def hours(reader: Reader, f: UsageFilter) -> Iterable[tuple[Any, ...]]:
    """The calls that pass ``f`` summed by hour, model and cost source, in time
    order: tuples of :class:`HourUsage`'s fields (for 5-hour blocks)."""
    c = _columns(f)
    source, params = _from(reader, f, c)
    sql = (f"SELECT {c.first}, {c.last}, u.model, u.cost_source, {c.sums}{source} "
           f"GROUP BY {c.hour}, {c.on_hour}, u.model, u.cost_source "
           f"ORDER BY {c.hour}, {c.on_hour} DESC, u.model, u.cost_source")
    return reader.rows(sql, params)


def by_model(reader: Reader, f: UsageFilter) -> list[tuple[str, str, Figures]]:
    """``(model, cost source, figures)`` of every call ``f`` keeps: the totals of
    ``usage daily --json`` per model (what ``metrics serve`` serves)."""
    c = _columns(f)
    source, params = _from(reader, f, c)
    sql = (f"SELECT u.model, u.cost_source, {c.sums}{source} "
           f"GROUP BY u.model, u.cost_source ORDER BY u.model, u.cost_source")
    return [(row[0], row[1], _figures(row, 2)) for row in reader.rows(sql, params)]


#: A filter's column in :func:`_from`'s tables (``u``: the usage rows, ``r``: their
#: recordings), and how a line says it matched no call.
_FILTERS: Final = {
    "models": ("u.model", "no call used model {}"),
    "project": ("r.cwd", "no call was made in a project matching {}"),
    "name": ("r.name", "no call is of a session named {}"),
    "sources": ("r.source", "no call came from source {}"),
    # As text: PostgreSQL's json has no equality to group by.
    "tags": ("CAST(r.tags AS TEXT)", "no call is of a session tagged {}"),
}
#: Values a line lists of what the store holds, at most.
SHOWN_VALUES: Final = 10


def unmatched(reader: Reader, f: UsageFilter) -> list[str]:
    """A line for each value of ``f``'s model, project, name, source and tag filters
    that matches no call in the store on its own (so that a report it empties is not
    taken for no use): what the store holds instead, most calls first."""
    said: list[str] = []
    for field_name, (column, line) in _FILTERS.items():
        given = getattr(f, field_name)
        values: list[Any] = (
            [{k: v} for k, v in given.items()] if field_name == "tags"
            else list(given) if isinstance(given, tuple) else [] if given is None else [given])
        for value in values:
            alone_by: dict[str, Any] = {
                field_name: value if field_name in ("project", "name", "tags") else (value,)}
            alone = UsageFilter(**alone_by)
            sql, params = _from(reader, alone, _HOURS, join=True)
            if next(iter(reader.rows(f"SELECT 1{sql} LIMIT 1", params)), None) is None:
                shown = (f"{next(iter(value))}={next(iter(value.values()))}"
                         if field_name == "tags" else repr(value))
                said.append(f"{line.format(shown)}; the store has "
                            f"{_held(reader, field_name, column)}")
    return said


def _held(reader: Reader, field_name: str, column: str) -> str:
    """The values of ``column`` among the store's calls, most calls first (at most
    :data:`SHOWN_VALUES`), as a line's end."""
    sql, params = _from(reader, UsageFilter(), _HOURS, join=True)
    rows = reader.rows(f"SELECT {column}, SUM(u.calls){sql} GROUP BY {column}", params)
    calls: dict[str, int] = {}
    for value, n in rows:
        if field_name == "tags":
            tags = json.loads(value) if isinstance(value, str) else value
            for key, tag in (tags.items() if isinstance(tags, dict) else ()):
                calls[f"{key}={tag}"] = calls.get(f"{key}={tag}", 0) + int(n)
        elif value is not None and value != "":
            calls[str(value)] = calls.get(str(value), 0) + int(n)
    if not calls:
        return "none" if field_name != "models" else "no calls"
    top = sorted(calls.items(), key=lambda kv: (-kv[1], kv[0]))
    return some_of([f"{value} ({n} call{'' if n == 1 else 's'})" for value, n in top])


def some_of(values: list[str]) -> str:
    """The first :data:`SHOWN_VALUES` of ``values``, and how many more, as a line's
    end."""
    more = len(values) - SHOWN_VALUES
    return ", ".join(values[:SHOWN_VALUES]) + (f" and {more} more" if more > 0 else "")
