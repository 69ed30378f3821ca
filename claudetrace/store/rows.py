"""A batch's rows, as the writers store them: built without SQLAlchemy.

The indexer builds each batch's rows here and hands them to its writer process
(:mod:`.writer`), which stores them with :mod:`.sqlite` on SQLite or through
:class:`~claudetrace.store.Store` elsewhere; neither side loads SQLAlchemy for
it on SQLite.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeAlias

from ..recording import RecordingInfo
from . import values
from .values import INT64_MAX, INT64_MIN

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from ..model.events import Event

#: Rows an ``INSERT`` statement takes at once: SQLite's per-statement work
#: (reset, step, the module's call) is paid once for them.  200 rows (3,000
#: values) where SQLite takes up to 32,766 parameters a statement (3.32 and
#: later), else 50 (its older limit is 999); fewer on a connection that takes
#: fewer (:func:`rows_per_insert`).
ROWS_PER_INSERT: Final = 200 if sqlite3.sqlite_version_info >= (3, 32) else 50
#: Column order of the rows built by :func:`event_rows`.
COLUMNS: Final = {
    "events": ("rec", "seq", "direction", "t_ns", "wall_ns", "data", "eol", "size",
               "is_json", "type", "subtype", "request_id", "parent_tool_use_id"),
    "event_tools": ("rec", "seq", "tool_use_id", "tool_name", "kind"),
    "usage_calls": ("recording_id", "call_id", "t_ns", "model", "input_tokens",
                    "output_tokens", "cache_read_tokens", "cache_creation_tokens", "cost_usd",
                    "cost_source", "cache_creation_1h_tokens", "duplicate"),
}
#: The rows of ``events`` and ``event_tools`` are built with the recording's id
#: first (:func:`event_rows`), which the writer replaces with the recording's
#: number (:func:`numbered`) once it holds the recording for the batch: the
#: tables key a recording's rows by its number (:mod:`.keys`).

#: The column a ``COPY`` of ``events`` rows packed as they are stored sends last,
#: after :data:`COLUMNS`' (:func:`~.postgres.copy_rows`).
CODEC: Final = "codec"
#: Where a row of :data:`COLUMNS` ``events`` holds its line.
DATA_AT: Final = 5
#: The key of a recording's updates that carries its :data:`COLUMNS` ``usage_calls``
#: rows (without the recording id): they replace the recording's rows.
USAGE_CALLS: Final = "usage_calls"


#: ``usage_hours``' rows sum a recording's calls by hour (UTC, from the hour on),
#: model and cost source: what reports read instead of every call.  A call at
#: the exact start of its hour is summed apart (``on_hour``), so that a 5-hour
#: block, whose end may be that instant, is made from these rows as from the
#: calls themselves (see :func:`claudetrace.usage.make_blocks`).
HOUR_NS: Final = 3600 * 1_000_000_000
_ROLLUP_COLUMNS: Final = ("recording_id, hour_ns, on_hour, model, cost_source, input_tokens, "
                          "output_tokens, cache_read_tokens, cache_creation_tokens, cost_usd, "
                          "calls, first_ns, last_ns")


def hour_columns(t_ns: str) -> tuple[str, str]:
    """SQL of the hour a time column is in and whether it is its very start
    (integer division, no ``%``: psycopg reads that as a parameter's mark)."""
    hour = f"({t_ns} / {HOUR_NS}) * {HOUR_NS}"
    return hour, f"({t_ns} = {hour})"


#: ``usage_models``' rows sum a recording's calls by model (their cost sources a
#: bit mask, :data:`COST_SOURCES`; the price table's part of the cost apart): what
#: the session report, the session list and the HTML report read, a row per
#: recording and model, with nothing left to add up.
_MODEL_COLUMNS: Final = ("recording_id, model, input_tokens, output_tokens, "
                         "cache_read_tokens, cache_creation_tokens, cost_usd, estimated_usd, "
                         "sources, calls, first_ns, last_ns")
#: The cost sources a row of ``usage_calls`` can have, each a bit of a group's
#: :func:`sources_mask`.
COST_SOURCES: Final = ("cli", "estimate", "unknown")


def sources_mask(column: str) -> str:
    """SQL of a group's cost sources as a bit mask (bit i: :data:`COST_SOURCES` [i])."""
    return " + ".join(f"MAX(CASE WHEN {column} = '{s}' THEN {1 << bit} ELSE 0 END)"
                      for bit, s in enumerate(COST_SOURCES))


def tag_condition(dialect: str, tags: str, key: str, value: str) -> str:
    """SQL true when the recording's tags (``tags``: its column, as SQL) hold the
    tag whose key and value are the parameters ``key`` and ``value`` (placeholders).

    SQLite is asked through ``json_each``, whose keys are decoded text: a JSON path
    made of the key (``$."équipe"``) misses a key stored escaped (``\\u00e9``) or
    holding a ``"``.  ``sessions`` and ``usage`` ask it so (``prune`` reads the
    tags in Python)."""
    if dialect == "postgresql":
        return f"(({tags})::json ->> {key}) = {value}"
    return f"EXISTS (SELECT 1 FROM json_each({tags}) WHERE key = {key} AND value = {value})"


def rollup_statements(where: str) -> tuple[str, ...]:
    """``DELETE`` and ``INSERT … SELECT`` that make ``usage_hours`` and
    ``usage_models`` the sums of the ``usage_calls`` that ``where`` keeps (a
    condition on ``recording_id``, once in each statement; duplicates are left
    out), in SQL that SQLite and PostgreSQL both read."""
    hour, on_hour = hour_columns("t_ns")
    keys = f"recording_id, {hour}, {on_hour}, model, cost_source"
    return (f"DELETE FROM usage_hours WHERE {where}",
            f"INSERT INTO usage_hours ({_ROLLUP_COLUMNS}) SELECT {keys}, SUM(input_tokens), "
            f"SUM(output_tokens), SUM(cache_read_tokens), SUM(cache_creation_tokens), "
            f"SUM(cost_usd), COUNT(*), MIN(t_ns), MAX(t_ns) FROM usage_calls "
            f"WHERE ({where}) AND NOT duplicate GROUP BY {keys}",
            f"DELETE FROM usage_models WHERE {where}",
            f"INSERT INTO usage_models ({_MODEL_COLUMNS}) SELECT recording_id, model, "
            f"SUM(input_tokens), SUM(output_tokens), SUM(cache_read_tokens), "
            f"SUM(cache_creation_tokens), SUM(cost_usd), "
            f"SUM(CASE WHEN cost_source = 'estimate' THEN cost_usd ELSE 0 END), "
            f"{sources_mask('cost_source')}, COUNT(*), MIN(t_ns), MAX(t_ns) FROM usage_calls "
            f"WHERE ({where}) AND NOT duplicate GROUP BY recording_id, model")


#: On PostgreSQL, taken before a writer asks which of its messages another
#: recording counts, and held to its commit: two transactions storing the same
#: message at once would otherwise both hear "none" and both count it (under
#: read committed neither sees the other's rows).  One lock for every usage
#: write, so that no two writers can wait on each other's (SQLite writes one
#: transaction at a time already).
USAGE_LOCK: Final = "SELECT pg_advisory_xact_lock(727272)"


def lock_usage(conn: Connection) -> None:
    """Wait for any other transaction writing usage to end (PostgreSQL:
    :data:`USAGE_LOCK`), to the end of this one.  A transaction that stores
    recordings takes it before any recording's row, so that it is always taken
    first (a fold takes it before its claim: :func:`.unfolded.claim`)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(USAGE_LOCK)


def usage_call_rows(recording_id: str, calls: Iterable[tuple[Any, ...]],
                    elsewhere: Callable[[list[str]], Iterable[str]] | None = None,
                    ) -> list[tuple[Any, ...]]:
    """The ``usage_calls`` rows of a recording's calls (ids and models clipped,
    numbers as every engine takes them: :func:`.values.number`), each marked a
    duplicate when ``elsewhere`` (the ids, of those asked, that another recording
    holds) names it."""
    rows = [(recording_id, stored_id(c[0]), *_numbers(c)) for c in calls]
    shared = [r[1] for r in rows if api_message_id(r[1])]
    held = set(elsewhere(shared)) if elsewhere and shared else set()
    return [(*r, r[1] in held) for r in rows]


def _numbers(call: tuple[Any, ...]) -> tuple[Any, ...]:
    """A call's columns after its id: the numbers :func:`.values.number`, with the
    one test most calls need first (every number an int within 64 bits, a cost a
    float or None)."""
    t, model, a, b, c, d, cost, source = call[1:9]
    h = call[9] if len(call) > 9 else 0  # the 1-hour cache writes (0: none told)
    if (type(t) is type(a) is type(b) is type(c) is type(d) is type(h) is int
            and min(t, a, b, c, d, h) >= INT64_MIN and max(t, a, b, c, d, h) <= INT64_MAX
            and (cost is None or (type(cost) is float and math.isfinite(cost)))):
        return t, _short(model, 100), a, b, c, d, cost, source, h
    number = values.number
    return (number(t), _short(model, 100), number(a), number(b), number(c), number(d),
            number(cost), source, number(h))


def api_message_id(call_id: str | None) -> bool:
    """Whether a call's id is the API's message id (the same in every recording
    of the message), not one the session model made up (``unobserved/…``, ``seq…``)."""
    return bool(call_id) and not call_id.startswith(("unobserved/", "seq"))  # type: ignore[union-attr]


def chunks(items: list[str], size: int = 500) -> Iterator[list[str]]:
    """``items`` a bounded ``IN`` list at a time."""
    for at in range(0, len(items), size):
        yield items[at:at + size]


#: The size of the columns of ids: a call's, a tool use's, a request's.
ID_SIZE: Final = 128


def stored_id(value: str | None) -> str | None:
    """An id (a call's message id, a tool use id) as its column holds it: one too
    long keeps a digest of the whole (:func:`.values.ident`).  A row is looked
    up by an id read from a line through this, so it is found however long."""
    return _short(value, ID_SIZE, values.ident)


#: How the fields lines repeat are cut for their columns: type and subtype as
#: text, request_id and parent_tool_use_id as ids (:func:`stored_id`).
_REPEATED: Final = ((values.text, 64), (values.text, 64), (values.ident, ID_SIZE),
                    (values.ident, ID_SIZE))


def event_rows(
    recording_id: str | int, events: Iterable[Event]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Rows for ``events`` and ``event_tools`` from parsed events, as tuples in the
    column order of :data:`COLUMNS`; ``recording_id`` goes first in each (the
    writer puts the recording's number there: :func:`numbered`), or the number."""
    rows: list[tuple[Any, ...]] = []
    tools: list[tuple[Any, ...]] = []
    _fill(recording_id, events, rows.append, tools.append)
    return rows, tools


def flat_rows(recording_id: str | int, events: Iterable[Event]) -> tuple[Flat, Flat]:
    """:func:`event_rows` as :class:`Flat` rows: what the indexer hands its writer
    on SQLite."""
    rows: list[Any] = []
    tools: list[Any] = []
    _fill(recording_id, events, rows.extend, tools.extend)
    return Flat(len(COLUMNS["events"]), rows), Flat(len(COLUMNS["event_tools"]), tools)


def _fill(recording_id: str | int, events: Iterable[Event],
          add_row: Callable[[tuple[Any, ...]], None],
          add_tool: Callable[[tuple[Any, ...]], None]) -> None:
    """Give ``add_row`` and ``add_tool`` each row of ``events`` (a tuple in the column
    order of :data:`COLUMNS`): the hot path of recording, one tuple a row, no
    dict, and an indexed value clipped only when it is too long."""
    # The fields lines repeat (type, subtype, request, parent tool use) are
    # looked at once per combination a batch holds: clipped then, and made one
    # object per value (pickle writes an object once and then refers to it, so
    # a batch crosses to the writer process smaller and unpickles in about half
    # the time there, on the path that bounds the time to queryable).  The
    # line's uuid and session id are not stored apart (migration 0009_footprint).
    known: dict[tuple[str | None, ...], tuple[str | None, ...]] = {}
    same: dict[str | None, str | None] = {}
    one = same.setdefault
    for ev in events:
        f = ev.fields
        key = (f.type, f.subtype, f.request_id, f.parent_tool_use_id)
        shared = known.get(key)
        if shared is None:
            shared = known[key] = tuple(one(value, value) for value in (
                cut(field, size) for (cut, size), field in zip(_REPEATED, key, strict=True)))
        kind, sub, req, parent = shared
        data = ev.data
        # The flags as integers: sqlite3 (before Python 3.12) offers a bool to its
        # adapters first, a tenth of the writer's CPU time under a burst.
        add_row((recording_id, ev.seq, ev.direction, ev.t_ns, ev.wall_ns, data,
                 1 if ev.eol else 0, len(data), 1 if f.is_json else 0, kind, sub, req,
                 parent))
        for ref in f.tools:
            add_tool((recording_id, ev.seq, stored_id(ref.tool_use_id),
                      _short(ref.name, 200), ref.kind))


def _short(value: str | None, size: int,
           cut: Callable[[str | None, int], str | None] | None = None) -> str | None:
    """:func:`clip` (or ``cut``: :func:`.values.ident` for an id), with the one test
    most values need first (an id or a model name: ASCII, short, no NUL), for the
    rows of every call of an import."""
    if type(value) is str and len(value) <= size and value.isascii() and "\x00" not in value:
        return value
    return (cut or clip)(value, size)


def clip(value: str | None, size: int) -> str | None:
    # Indexed columns are bounded (PostgreSQL enforces VARCHAR sizes) and hold
    # only text both engines take; the exact value is always in the event's bytes.
    return values.text(value, size)


def insert_sql(table: str, rows: int, marker: str = "?") -> str:
    """``INSERT`` of ``rows`` rows of :func:`event_rows` into ``table``, with positional
    parameters spelled ``marker`` (the driver's: ``?`` for sqlite3)."""
    columns = COLUMNS[table]
    row = f"({', '.join([marker] * len(columns))})"
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([row] * rows)}"


class Flat(NamedTuple):
    """A table's rows as one list of values, row after row, ``width`` values a row.

    The indexer hands its writer process each batch's rows so (:func:`flat_rows`),
    on SQLite: one list is built, pickled and read back at less cost than a tuple
    a row (a twentieth of the indexer's CPU time under a burst, on the path that
    bounds how soon it is queryable), and the writer cuts it into its ``INSERT``
    statements' parameters (:func:`insert_batches`) with slices."""

    width: int
    values: list[Any]


#: A table's rows: tuples in :data:`COLUMNS` order, or those :class:`Flat`.
Rows: TypeAlias = "list[tuple[Any, ...]] | Flat"


def each_row(rows: Rows) -> Iterator[tuple[Any, ...]]:
    """Each row of ``rows``, a tuple in :data:`COLUMNS` order."""
    if not isinstance(rows, Flat):
        yield from rows
        return
    width, values = rows
    for start in range(0, len(values), width):
        yield tuple(values[start:start + width])


def numbered(rows: Rows, number: int) -> Rows:
    """``rows`` (of ``events`` or ``event_tools``) with ``number``, the recording's
    number, as their first value (:data:`COLUMNS`' ``rec``) in place of its id."""
    if isinstance(rows, Flat):
        values = list(rows.values)
        values[0::rows.width] = [number] * (len(values) // rows.width)
        return Flat(rows.width, values)
    return [(number, *row[1:]) for row in rows]


def row_count(rows: Rows) -> int:
    """How many rows ``rows`` holds."""
    if isinstance(rows, Flat):
        return len(rows.values) // rows.width
    return len(rows)


#: Where a row of ``events`` holds its line's length.
_SIZE: Final = COLUMNS["events"].index("size")


def row_bytes(rows: Rows) -> int:
    """The bytes of the lines ``rows`` (of ``events``) hold: their ``size`` column."""
    if isinstance(rows, Flat):
        return sum(rows.values[_SIZE::rows.width])
    return sum(row[_SIZE] for row in rows)


def first_seq(rows: Rows) -> int | None:
    """The ``seq`` of the first of ``rows`` (None when there are none)."""
    first = next(each_row(rows), None)
    return None if first is None else first[1]


def rows_per_insert(table: str, connection: Any, most: int = ROWS_PER_INSERT) -> int:
    """Rows of ``table`` an ``INSERT`` on a SQLite ``connection`` (:mod:`sqlite3`'s) may take: up to
    ``most``, as many as its limit on a statement's parameters allows (a build of
    SQLite, or the program, may set it lower than the version's default: a
    statement past it fails with "too many SQL variables")."""
    getlimit = getattr(connection, "getlimit", None)  # Python 3.11 and later
    if getlimit is None:
        return most
    limit: int = getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    return max(1, min(most, limit // len(COLUMNS[table])))


def insert_batches(
    table: str, rows: Rows, marker: str = "?", per_insert: int = ROWS_PER_INSERT,
) -> Iterator[tuple[str, list[tuple[Any, ...]]]]:
    """``(statement, parameters)`` for an ``executemany`` each, that insert ``rows``
    into ``table``: ``per_insert`` rows a statement, the rest one a statement."""
    width = len(COLUMNS[table])
    values = rows.values if isinstance(rows, Flat) else list(chain.from_iterable(rows))
    step = per_insert * width
    whole = len(values) - len(values) % step
    if whole:
        yield (insert_sql(table, per_insert, marker),
               [tuple(values[i:i + step]) for i in range(0, whole, step)])
    if whole < len(values):
        yield (insert_sql(table, 1, marker),
               [tuple(values[i:i + width]) for i in range(whole, len(values), width)])


def stream_columns(info: RecordingInfo) -> dict[str, Any]:
    """A recording's columns that its stream tells (the CLI's ``init``)."""
    return {
        "cli_session_id": clip(info.cli_session_id, 64),
        "claude_code_version": clip(info.claude_code_version, 40),
        "model": clip(info.model, 100),
        "permission_mode": clip(info.permission_mode, 40),
    }


def info_columns(info: RecordingInfo) -> dict[str, Any]:
    """A recording's columns from what is known of it (its other columns, the
    summary figures, start from their defaults)."""
    return {
        "id": info.id,
        "name": clip(info.name, 200),
        "tags": dict(info.tags),
        "argv": list(info.argv),
        "cwd": info.cwd,
        "host": clip(info.host, 255) or "",
        "pid": info.pid,
        "env": dict(info.env),
        "claudetrace_version": info.claudetrace_version,
        "source": info.source,
        "started_ns": info.started_ns,
        "ended_ns": info.ended_ns,
        "exit_code": info.exit_code,
        "signal": info.signal,
        "error": info.error,
        "extra": dict(info.extra),
        **stream_columns(info),
    }
