"""The writes the writer process makes without SQLAlchemy, on either database.

The indexer's writer (:mod:`.writer`) writes a database already at the newest
schema through :mod:`sqlite3` (:class:`~.sqlite.SqliteWrites`) or psycopg
(:class:`~.postgres.PostgresWrites`) alone: loading SQLAlchemy and the models
would cost it more than a burst's first batches.  Both write what
:class:`~claudetrace.store.Store` writes (tests hold every column of each to the
store's): this module holds what they share, the schema at its head as the
models define it, the values a recording's row takes, and the transactions
(:class:`PlainWrites`); each driver's module its connection, parameters and bulk
insert.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any, Final

from ..errors import StoreError
from ..recording import RecordingInfo
from . import values
from .rows import (
    USAGE_CALLS,
    USAGE_LOCK,
    Rows,
    chunks,
    info_columns,
    numbered,
    rollup_statements,
    row_bytes,
    row_count,
    usage_call_rows,
)

#: The newest migration's revision (``migrations/versions``), known without
#: Alembic: a store that is already there opens without importing Alembic or
#: reading the migration scripts (a third of an indexer's start-up).  A test
#: checks it against the scripts' head.
SCHEMA_HEAD: Final = "0023_pairs"

#: The ``recordings`` table's columns at :data:`SCHEMA_HEAD`, with the value a new
#: row takes where none is given (the models' defaults; None: NULL), and which
#: columns hold JSON (as its text): a test holds them to the models.
RECORDING_DEFAULTS: Final[dict[str, Any]] = {
    "id": None, "num": None, "name": None, "tags": {}, "argv": [], "cwd": "", "host": "",
    "pid": None, "env": {}, "claudetrace_version": "", "source": "proxy", "started_ns": None,
    "ended_ns": None, "last_seen_ns": None, "exit_code": None, "signal": None, "error": None,
    "cli_session_id": None, "claude_code_version": None, "model": None,
    "permission_mode": None, "event_count": 0, "byte_count": 0, "turns": 0, "num_turns": 0,
    "model_calls": 0, "tool_calls": 0, "tool_errors": 0, "input_tokens": 0,
    "output_tokens": 0, "cache_read_tokens": 0, "cache_creation_tokens": 0,
    "cost_usd": 0.0, "cost_source": None, "is_error": False, "result_subtype": None,
    "models": None, "outcome": None, "outcome_reason": None, "lost_bytes": 0, "figures": None,
    "extra": {}, "latencies": None,
}
_DEFAULTS_GIVEN: Final = {name: value for name, value in RECORDING_DEFAULTS.items()
                           if value is not None}
JSON_COLUMNS: Final = frozenset({"tags", "argv", "env", "models", "figures", "extra",
                                  "latencies"})


#: A batch of at least this many rows (a burst's: the indexer cuts one every
#: 0.2 s or 5,000 events) is written without its words in the search index when
#: the writer defers them (:attr:`PlainWrites.words_later`): the pass that
#: runs once the recording is listed complete adds them (:mod:`.packing`).  A
#: session at a person's pace writes a few lines a batch (a fast stream of text
#: deltas some twenty in 0.2 s), which go in at once.  Not more: a batch is cut
#: by time, and a burst the indexer parses slowly (tool results of kilobytes, a
#: loaded machine) came in batches of about 240 lines, whose words PostgreSQL's
#: writer then added on the burst's path (a third of its CPU time).
LATER_FROM_ROWS: Final = 64
#: …or of at least this many bytes of lines: a few huge lines (files read whole)
#: are a burst by their bytes, and their words (each line's text decoded, up to
#: :data:`~.textindex.MOST_CHARS` of it) took the writer as long as the lines' own
#: writes (docs/benchmarks.md).
LATER_FROM_BYTES: Final = 1 << 20


def defers_words(rows: int, size: int) -> bool:
    """Whether the indexer's writer leaves the words of a batch of ``rows`` lines
    of ``size`` bytes for the pass after the recording ends (a burst's batch)."""
    return rows >= LATER_FROM_ROWS or size >= LATER_FROM_BYTES


class NotPlain(Exception):
    """The database is not one the plain writes write (not at the newest schema):
    it is opened with :func:`~claudetrace.store.open_store` instead."""


def recording_row(info: RecordingInfo) -> dict[str, Any]:
    """The row a recording starts with, as the store inserts it (column → value,
    bound as SQLAlchemy's types bind it: :func:`bound`).  A column given no value
    and no default is left out (NULL), as SQLAlchemy leaves it."""
    columns = info_columns(info)
    columns["last_seen_ns"] = info.started_ns
    row = {**_DEFAULTS_GIVEN, **values.storable_columns(columns)}
    return {name: bound(name, value) for name, value in row.items()}


def updated_columns(columns: dict[str, Any]) -> dict[str, Any]:
    """A recording's changed columns as the store sets them (bound: :func:`bound`);
    a :class:`StoreError` for a column ``recordings`` does not have."""
    unknown = set(columns) - RECORDING_DEFAULTS.keys()
    if unknown:
        raise StoreError(f"recordings has no column {sorted(unknown)[0]!r}")
    return {name: bound(name, value)
            for name, value in values.storable_columns(columns).items()}


def bound(name: str, value: Any) -> Any:
    """A recording's column value as SQLAlchemy's types bind it: JSON as its text
    (``json.dumps``; None too, as ``null``); the others as they are (on SQLite a
    boolean is an integer to :mod:`sqlite3`, as to SQLAlchemy's ``Boolean``)."""
    return json.dumps(value) if name in JSON_COLUMNS else value


class PlainWrites:
    """The writing methods of :class:`~claudetrace.store.Store`, on one driver's
    connection: each write one transaction, in the store's statements.

    A driver's class gives :meth:`_transaction` (a database error raised as is,
    or as a :class:`StoreError` saying what failed, in the store's words),
    :meth:`_insert` (a table's rows in bulk), :meth:`_index` (a batch's entries
    in the search index), :meth:`_placeholder` (a recording's column's
    parameter) and :attr:`_HOLD`, the statement that takes a recording's row for
    a batch's transaction.
    """

    _HOLD: str

    def _transaction(self, what: str | None = None) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def _insert(self, cursor: Any, table: str, rows: Rows) -> None:
        raise NotImplementedError

    def _placeholder(self, name: str) -> str:
        raise NotImplementedError

    #: The database's: ``sqlite`` or ``postgresql``.
    _dialect: str = ""
    #: Whether a burst's batch (:func:`defers_words`) is written without its
    #: message lines' words, left for the pass after the recording ends
    #: (:mod:`.packing`); else they go with every batch.  The indexer's writer
    #: sets it.
    words_later: bool = False

    def _index(self, cursor: Any, entries: list[tuple[int, int, str]]) -> None:
        """Add message lines' words to the search index (:mod:`.textindex`)."""
        raise NotImplementedError

    def create_recording(self, info: RecordingInfo) -> None:
        row = recording_row(info)
        with self._transaction("create recording") as cursor:
            cursor.execute(f"INSERT INTO recordings ({', '.join(row)}) "
                           f"VALUES ({', '.join(self._placeholder(name) for name in row)})",
                           list(row.values()))

    def write_rows(self, recording_id: str, rows: Rows, tools: Rows,
                   recording_updates: dict[str, Any] | None = None) -> None:
        from .textindex import index_rows  # the session model: not for a reader

        # Before the transaction: not while holding SQLite's lock.
        later = self.words_later and defers_words(row_count(rows), row_bytes(rows))
        said = [] if later else index_rows(rows)
        calls = None
        if recording_updates and USAGE_CALLS in recording_updates:
            recording_updates = dict(recording_updates)
            calls = list(recording_updates.pop(USAGE_CALLS))
        with self._transaction() as cursor:
            # The check a foreign key makes for every row, once a batch; the
            # recording stays meanwhile.  Its number keys the rows (.keys).
            if row_count(rows) or row_count(tools):
                held = cursor.execute(self._HOLD, (recording_id,)).fetchone()
                if held is None:
                    raise StoreError(f"no recording {recording_id!r} to store events in")
                number = held[0]
                for table, table_rows in (("events", rows), ("event_tools", tools)):
                    if row_count(table_rows):
                        self._insert(cursor, table, numbered(table_rows, number))
                if said:
                    self._index(cursor, [(number, seq, words) for _, seq, words in said])
            if calls is not None:  # the recording's calls as they stand now
                self._replace_usage(cursor, recording_id, calls)
            if recording_updates:
                self._update(cursor, recording_id, recording_updates)

    def _replace_usage(self, cursor: Any, recording_id: str, calls: list[Any], *,
                       new: bool = False) -> None:
        """As :meth:`~claudetrace.store.Store._replace_usage` does (those calls' rows;
        ``new``: a recording inserted in this transaction, that holds none yet)."""
        mark = self._placeholder("recording_id")

        def elsewhere(ids: list[str]) -> Iterator[str]:
            for chunk in chunks(ids):
                listed = ", ".join([mark] * len(chunk))
                cursor.execute(f"SELECT call_id FROM usage_calls WHERE call_id IN ({listed}) "
                               f"AND recording_id <> {mark} AND NOT duplicate",
                               [*chunk, recording_id])
                yield from (row[0] for row in cursor.fetchall())

        if self._dialect == "postgresql":
            cursor.execute(USAGE_LOCK)
        rows = usage_call_rows(recording_id, calls, elsewhere)
        # A recording's first calls (a burst's, all at its end; a new import's)
        # replace none: one look at its key, not one a call.
        stored = False
        if not new:
            cursor.execute(f"SELECT 1 FROM usage_calls WHERE recording_id = {mark} LIMIT 1",
                           [recording_id])
            stored = cursor.fetchone() is not None
        for chunk in chunks([row[1] for row in rows]) if stored else []:
            cursor.execute(f"DELETE FROM usage_calls WHERE recording_id = {mark} AND call_id IN "
                           f"({', '.join([mark] * len(chunk))})", [recording_id, *chunk])
        if rows:
            self._insert(cursor, "usage_calls", rows)
        for statement in rollup_statements(f"recording_id = {mark}"):
            cursor.execute(statement, [recording_id])

    def update_recording(self, recording_id: str, **columns: Any) -> None:
        with self._transaction("update recording") as cursor:
            self._update(cursor, recording_id, columns)

    def _update(self, cursor: Any, recording_id: str, columns: dict[str, Any]) -> None:
        row = updated_columns(columns)
        sets = ", ".join(f"{name} = {self._placeholder(name)}" for name in row)
        cursor.execute(f"UPDATE recordings SET {sets} WHERE id = {self._placeholder('id')}",
                       [*row.values(), recording_id])


def require_head(heads: list[Any]) -> None:
    """Raise :class:`NotPlain` unless ``heads`` (the revisions in ``alembic_version``)
    are :data:`SCHEMA_HEAD` alone."""
    if heads != [SCHEMA_HEAD]:
        raise NotPlain(f"the schema is at {heads!r}, not {SCHEMA_HEAD}")
