"""The recording store: recordings and their events in SQLite or PostgreSQL.

:func:`open_store` resolves the database (``--db``, ``$CLAUDETRACE_DB`` or the
default file), migrates it if needed and returns a :class:`Store`, the one API the
proxy, the commands, telemetry backfill, replay and the UI use.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, Final, NamedTuple, cast

from sqlalchemy import (
    Connection,
    Engine,
    Table,
    Text,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import Session

from ..cassette import Cassette, new_header
from ..config import database_named, resolve_url
from ..errors import AmbiguousSession, SessionNotFound, StoreError
from ..model import Session as SessionModel
from ..model.events import Direction, Event
from ..recording import RecordingInfo
from . import keys, unfolded
from .backlog import catch_up
from .engine import (
    BUSY_TIMEOUT_S,
    create_store_engine,
    error_reason,
    shown_url,
    sqlite_file_bytes,
    sqlite_path,
    upgrade,
)
from .importing import IMPORT_CACHE_KIB
from .ingest import Folds, ended_columns, import_cassette, info_from_header
from .models import (
    EventRow,
    EventTool,
    LineDictionary,
    Recording,
    UsageCall,
    number_of,
    type_in,
)
from .packing import Unpacker, pack_all
from .postgres import copy_rows
from .rows import (
    ROWS_PER_INSERT,
    USAGE_CALLS,
    Rows,
    api_message_id,
    chunks,
    each_row,
    event_rows,
    info_columns,
    insert_batches,
    lock_usage,
    numbered,
    rollup_statements,
    row_count,
    rows_per_insert,
    stored_id,
    usage_call_rows,
)
from .textindex import index_events, index_rows, insert_postgres, insert_sqlite
from .values import storable_columns

__all__ = ["Batch", "Store", "info_from_header", "open_store", "resolve_url"]

_EVENTS = cast(Table, EventRow.__table__)
_TOOLS = cast(Table, EventTool.__table__)
_RECORDINGS = cast(Table, Recording.__table__)
_USAGE = cast(Table, UsageCall.__table__)
#: The call ids, of those asked (``ids``), that a recording other than ``rid``
#: holds and counts.  One statement, its ids bound as a list: an ``IN`` of
#: literal ids had SQLAlchemy coerce each into an expression, on every write
#: of a recording's calls.
_HELD_ELSEWHERE: Final = select(_USAGE.c.call_id).where(
    _USAGE.c.call_id.in_(bindparam("ids", expanding=True)),
    _USAGE.c.recording_id != bindparam("rid"), _USAGE.c.duplicate.is_(False))
#: A recording's row written with its columns as parameters (:meth:`Store.put_recording`).
_UPDATE_RECORDING = update(_RECORDINGS).where(_RECORDINGS.c.id == bindparam("_rid"))
_INSERT_RECORDING = insert(_RECORDINGS)
#: The tables that key a recording's rows by its number (:mod:`.keys`).
_NUMBERED: Final = frozenset({"events", "event_search", "event_tools"})


class Put(NamedTuple):
    """What :meth:`Store.put_recording` did."""

    #: The stored events that begin the new ones, kept as they were.
    kept: int
    #: Whether the recording was stored already (by an earlier import, or by
    #: another importer since this one looked).
    found: bool
    #: Whether any event was written or deleted: False when what was stored
    #: was these very events.
    changed: bool


def open_store(
    db: str | None = None, *, migrate: bool = True, create: bool = True,
    busy_timeout_s: float = BUSY_TIMEOUT_S, log_bytes: int | None = None,
) -> Store:
    """Open the store named by ``db`` / ``$CLAUDETRACE_DB``, migrated to the newest
    schema unless ``migrate`` is False.

    Recordings still waiting in capture files are not looked at here: the
    commands open the store with :func:`claudetrace.indexer.open_settled_store`,
    which stores them first (the store does not import the recorder).

    Read commands pass ``create=False``: a SQLite file named with ``--db`` or
    ``$CLAUDETRACE_DB`` that does not exist is an error naming it.  The default
    database is made on first use either way.  ``busy_timeout_s`` is how long a
    write waits on another process's lock (SQLite).
    """
    url = resolve_url(db, memory=True)  # the commands refuse one (open_settled_store)
    if not create and not database_named(db):
        _home_for_default_database()
    engine = create_store_engine(url, create=create or not database_named(db),
                                 busy_timeout_s=busy_timeout_s,
                                 log_bytes=log_bytes)
    if migrate:
        try:
            upgrade(engine)
        except BaseException:
            engine.dispose()
            raise
    return Store(engine)


def _home_for_default_database() -> None:
    """Raise :class:`StoreError` when the home folder the default database would be
    made under does not exist (:func:`~claudetrace.config.default_home_there`)."""
    from pathlib import Path

    from ..config import default_home_there

    if not default_home_there():
        raise StoreError(f"no database: the home folder {Path.home()} does not exist "
                         "(set HOME, or name one with --db or $CLAUDETRACE_DB)")


#: One stored line as :meth:`Store.iter_event_rows` gives it: ``(seq, direction,
#: t_ns, data, eol, wall_ns)``, the positional order of :class:`Event`.
EventTuple = tuple[int, Direction, int, bytes, bool, int]


class Store:
    """Recordings and events in one database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._unpacker: Unpacker | None = None

    def unpacker(self) -> Unpacker:
        """What turns a row's ``data`` and ``codec`` back into its line as recorded
        (:mod:`.packing`), with this store's dictionaries cached."""
        if self._unpacker is None:
            table = cast(Table, LineDictionary.__table__)

            def fetch(number: int) -> bytes | None:
                with _store_errors("read"), self.engine.connect() as conn:
                    found = conn.execute(select(table.c.data).where(
                        table.c.id == number)).scalar()
                return None if found is None else bytes(found)

            self._unpacker = Unpacker(fetch)
        return self._unpacker

    def pack_lines(self, recording_ids: Iterable[str] | None = None, *,
                   catching_up: bool = False) -> int:
        """Pack the lines of ended recordings (``recording_ids``, default every one
        not packed yet: :func:`.packing.unpacked_recordings`), adding the search words
        a burst's batches left out; ``catching_up``: instead, give the index every
        word of every recording whose batches left some out, ended, running or
        abandoned (:func:`.backlog.catch_up`); returns the rows looked at."""
        with _store_errors("settle lines"), self.engine.connect() as conn:
            driver = conn.connection.driver_connection
            dialect = self.engine.dialect.name
            if dialect == "sqlite":
                # The pass opens its own transactions (BEGIN IMMEDIATE).
                conn.connection.commit()
                level = driver.isolation_level  # type: ignore[union-attr]
                driver.isolation_level = None  # type: ignore[union-attr]
                try:
                    if catching_up:
                        return catch_up(driver, dialect)
                    return pack_all(driver, dialect, recording_ids)
                finally:
                    driver.isolation_level = level  # type: ignore[union-attr]
            if catching_up:
                return catch_up(driver, dialect)
            return pack_all(driver, dialect, recording_ids)

    @property
    def url(self) -> str:
        """The database's URL as messages show it (its password hidden)."""
        return shown_url(self.engine.url)

    @property
    def capture_url(self) -> str:
        """The URL naming this database's capture directories (:mod:`claudetrace.capture`)."""
        return self.engine.url.render_as_string(hide_password=False)

    @property
    def in_memory(self) -> bool:
        """A SQLite database in memory: one per connection, seen by no other."""
        url = self.engine.url
        return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")

    def session(self) -> Session:
        return Session(self.engine, expire_on_commit=False)

    def close(self) -> None:
        self.engine.dispose()

    def takes_writes(self) -> bool:
        """False while another process holds SQLite's write lock (longer than this
        engine's busy timeout); always True for server databases."""
        if self.engine.dialect.name != "sqlite":
            return True
        try:
            with self.engine.connect() as conn:
                conn.exec_driver_sql("BEGIN IMMEDIATE")
                conn.exec_driver_sql("ROLLBACK")
        except SQLAlchemyError:
            return False
        return True

    # -- writing -----------------------------------------------------------------

    def create_recording(self, info: RecordingInfo) -> None:
        """Insert the row of a recording that is starting."""
        with _store_errors("create recording"), self.engine.begin() as conn:
            _insert_recording(conn, info)

    def write_batch(
        self,
        recording_id: str,
        events: Sequence[Event],
        recording_updates: dict[str, Any] | None = None,
    ) -> None:
        """Insert events (and their tool refs) and update the recording, atomically."""
        rows, tools = event_rows(recording_id, events)
        self.write_rows(recording_id, rows, tools, recording_updates)

    def add_recordings(
        self, recordings: Sequence[tuple[dict[str, Any], Rows, Rows]]
    ) -> None:
        """Store whole recordings at once, in one transaction: each one's columns
        (every recording the same keys), its ``events`` rows and its
        ``event_tools`` rows (:func:`event_rows`), and its calls' ``usage_calls``
        rows when its columns carry them (``summary_columns(…, started_ns=…)``).
        A bulk load (``bench ui``'s seed): one statement for the recordings, one
        ``COPY`` or batched insert for all their lines, one for their calls."""
        if not recordings:
            return
        rows = [row for _, lines, _ in recordings for row in each_row(lines)]
        tools = [row for _, _, refs in recordings for row in each_row(refs)]
        calls = {c["id"]: c[USAGE_CALLS] for c, _, _ in recordings if USAGE_CALLS in c}
        with _store_errors("add recordings"), self.engine.begin() as conn:
            conn.execute(insert(_RECORDINGS), [
                storable_columns({k: v for k, v in c.items() if k != USAGE_CALLS})
                for c, _, _ in recordings])
            numbers = _numbers(conn, [c["id"] for c, _, _ in recordings])
            rows = [(numbers[row[0]], *row[1:]) for row in rows]
            tools = [(numbers[row[0]], *row[1:]) for row in tools]
            if rows:
                self._insert_rows(conn, _EVENTS, rows)
            if tools:
                self._insert_rows(conn, _TOOLS, tools)
            if calls:
                self._add_usage(conn, calls)

    def _add_usage(self, conn: Connection, calls: dict[str, list[tuple[Any, ...]]]) -> None:
        """The ``usage_calls`` and ``usage_hours`` rows of new recordings' calls; a
        message an earlier recording (stored before, or earlier in ``calls``) holds
        is marked a duplicate, as :meth:`_replace_usage` marks it."""
        ids = sorted({str(stored_id(str(c[0]))) for found in calls.values() for c in found
                      if api_message_id(str(c[0]))})
        lock_usage(conn)
        held: set[str] = set()
        for chunk in chunks(ids):
            held.update(conn.execute(select(_USAGE.c.call_id).where(
                _USAGE.c.call_id.in_(chunk), _USAGE.c.duplicate.is_(False))).scalars())
        usage: list[tuple[Any, ...]] = []
        for recording_id, found in calls.items():
            mine = usage_call_rows(recording_id, found,
                                   lambda asked: [i for i in asked if i in held])
            held.update(r[1] for r in mine if api_message_id(r[1]))
            usage += mine
        if usage:
            self._insert_rows(conn, _USAGE, usage)
        for chunk in chunks(list(calls)):
            for statement in rollup_statements("recording_id IN :ids"):
                conn.execute(text(statement).bindparams(bindparam("ids", expanding=True)),
                             {"ids": chunk})

    def write_rows(
        self,
        recording_id: str,
        rows: Rows,
        tools: Rows,
        recording_updates: dict[str, Any] | None = None,
    ) -> None:
        """:meth:`write_batch` of the rows :func:`event_rows` made (perhaps in
        another process: :mod:`.writer`)."""
        calls = None
        if recording_updates and USAGE_CALLS in recording_updates:
            recording_updates = dict(recording_updates)
            calls = list(recording_updates.pop(USAGE_CALLS))
        with self.engine.begin() as conn:
            has_rows, has_tools = row_count(rows) > 0, row_count(tools) > 0
            if has_rows or has_tools:
                number = _hold_recording(conn, recording_id)
                if has_rows:
                    self._insert_rows(conn, _EVENTS, numbered(rows, number))
                if has_tools:
                    self._insert_rows(conn, _TOOLS, numbered(tools, number))
            if calls is not None:  # the recording's calls as they stand now
                self._replace_usage(conn, recording_id, calls)
            if recording_updates:
                conn.execute(
                    update(_RECORDINGS)
                    .where(_RECORDINGS.c.id == recording_id)
                    .values(**storable_columns(recording_updates))
                )

    def _insert_rows(self, conn: Connection, table: Table, rows: Rows,
                     said: list[tuple[int, int, str]] | None = None) -> None:
        """Insert rows (tuples in :data:`~.rows.COLUMNS` order) in bulk, on the raw DBAPI
        connection: SQLAlchemy's per-row parameter processing would cost more than
        the database's own work.  PostgreSQL through psycopg takes them as one
        binary ``COPY`` (:func:`.postgres.copy_rows`); others as one
        prepared ``executemany``.  Message lines go into the search index too
        (:mod:`.textindex`; ``said``: their entries, when the caller has them)."""
        if self.engine.dialect.driver == "psycopg":
            import psycopg

            driver = conn.connection.driver_connection
            assert driver is not None
            try:
                copy_rows(driver, table.name, rows)
            except psycopg.Error as exc:
                # Raised by the driver, past SQLAlchemy: made what SQLAlchemy
                # raises for the same error, so it is told and handled alike.
                raise DBAPIError.instance(f"COPY {table.name}", None, exc,
                                          psycopg.Error) from exc
        else:
            marker = "?" if self.engine.dialect.paramstyle == "qmark" else "%s"
            per_insert = ROWS_PER_INSERT
            if self.engine.dialect.name == "sqlite":
                per_insert = rows_per_insert(table.name, conn.connection.driver_connection)
            for statement, parameters in insert_batches(table.name, rows, marker, per_insert):
                conn.exec_driver_sql(statement, parameters)
        if said is None:
            said = index_rows(rows) if table is _EVENTS else []
        if said:
            cursor = conn.connection.cursor()
            try:
                postgres = self.engine.dialect.name == "postgresql"
                (insert_postgres if postgres else insert_sqlite)(cursor, said)
            finally:
                cursor.close()

    def checkpoint(self) -> None:
        """Copy what SQLite's write-ahead log holds into the database file, as far
        as no reader needs it still (``PASSIVE``: it never waits for a writer or
        a reader); nothing to do for other databases."""
        if self.engine.dialect.name != "sqlite":
            return
        with self.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")

    def wait_written(self) -> None:
        """Every write above is done when its call returns: nothing to wait for
        (a :class:`~.writer.WriterProcess` writes a batch while its caller goes on)."""

    def update_recording(self, recording_id: str, **values: Any) -> None:
        with _store_errors("update recording"), self.engine.begin() as conn:
            conn.execute(
                update(_RECORDINGS).where(_RECORDINGS.c.id == recording_id)
                .values(**storable_columns(values))
            )

    def import_cassette(
        self,
        cassette: Cassette | tuple[dict[str, Any], Iterable[Event]],
        *,
        name: str | None = None,
        tags: dict[str, str] | None = None,
        batch: int = 2000,
        info: RecordingInfo | None = None,
        writer: Any = None,
        fold: Callable[[RecordingInfo], Folds] | None = None,
        created: bool = False,
    ) -> str:
        """Store a cassette as a new recording; returns its id
        (:func:`.ingest.import_cassette`, through ``writer``, a
        :class:`~.writer.WriterProcess`, or else the store's writes on a thread of
        this process; ``fold``, ``created``: see there)."""
        target = writer if writer is not None else _WritingThread(self)
        with _store_errors("import"):
            rid = import_cassette(target, cassette, forget=self.delete_recording, name=name,
                                  tags=tags, batch=batch, info=info, fold=fold,
                                  created=created)
        if writer is None:
            target.close()
        return rid

    def put_recording(
        self, info: RecordingInfo, events: Iterable[Event], *,
        open_seen_ns: int | None = None, summary: dict[str, Any] | None = None,
    ) -> Put:
        """Make recording ``info.id`` hold exactly ``events`` (numbered from 0), in one
        transaction; returns how many of its stored events were kept, whether it
        was stored already and whether that changed any (:class:`Put`).

        For a recording converted from a file that grows (a Claude Code
        transcript): the first time it is stored whole; afterwards the stored
        events that begin ``events`` are kept and only the rest is written, so a
        reader (``tail``, the UI) never sees the recording missing or half
        written, and one following its events sees the new ones arrive.  It ends
        at its last event, unless ``open_seen_ns`` says it is still going on
        (last seen then): it stays open, ``running`` while that is recent.

        ``summary``: the columns :func:`~.ingest.ended_columns` gives of the
        session model folded over ``events`` already (``info`` having observed
        them), so that ``events`` is read once, as it is written, a batch at a
        time (a converter's spool of any size).
        """
        if summary is None:
            events, summary = _summarised(info, events)
        with _store_errors("import"), self.engine.begin() as conn:
            if self.engine.dialect.name == "sqlite":
                # A session's tool and usage rows go into indexes of random ids
                # (tool use and message ids): SQLite's default cache (2 MB) held
                # too few of their pages, read again from the system's cache.
                # A setting of this connection (memory, not durability).
                conn.exec_driver_sql(f"PRAGMA cache_size = -{IMPORT_CACHE_KIB}")
            return self._put(conn, info, events, open_seen_ns=open_seen_ns, summary=summary)

    def batch(self) -> Batch:
        """Several :meth:`put_recording` in one transaction (:class:`Batch`)."""
        return Batch(self)

    def _put(self, conn: Connection, info: RecordingInfo, events: Iterable[Event], *,
             open_seen_ns: int | None, summary: dict[str, Any]) -> Put:
        """:meth:`put_recording`'s work, in ``conn``'s transaction."""
        columns = {**info_columns(info), **summary}
        calls = list(columns.pop(USAGE_CALLS, ()))
        if open_seen_ns is not None:
            columns.update(ended_ns=None, last_seen_ns=open_seen_ns)
        # A write first, so SQLite takes its write lock before anything is
        # read: what is kept is read in the transaction that keeps it, so two
        # importers of one transcript (import --watch and an import) take turns.
        # Values as parameters of statements made once: ``.values(**stored)``
        # coerced each of the row's values into a new statement, about a sixth
        # of the storing process's time on ``bench import``'s tree.
        stored = storable_columns(columns)
        lock_usage(conn)  # before the recording's row: the one order (a fold's too)
        found = conn.execute(_UPDATE_RECORDING, {**stored, "_rid": info.id}).rowcount
        if not found:
            conn.execute(_INSERT_RECORDING, stored)
        kept, changed = self._put_events(conn, info.id, events, compare=bool(found))
        self._replace_usage(conn, info.id, calls, whole=True, new=not found)
        return Put(kept, bool(found), changed)

    def _put_events(self, conn: Connection, recording_id: str, events: Iterable[Event], *,
                    compare: bool) -> tuple[int, bool]:
        """Write ``events`` over what is stored: the stored ones that begin them are
        kept (read a page at a time), the rest deleted, the new ones inserted a
        batch at a time.  Returns how many were kept, and whether any event was
        deleted or inserted."""
        kept = 0
        changed = False
        number = _hold_recording(conn, recording_id)
        stored = _stored_rows(conn, number, self.unpacker()) if compare else iter(())
        batch: list[Event] = []
        cut = not compare
        for ev in events:
            if not cut:
                row = next(stored, None)
                if row == (kept, ev.direction, ev.t_ns, ev.data, ev.eol, ev.wall_ns):
                    kept += 1
                    continue
                cut = True
                self._cut(conn, recording_id, kept)
            changed = True
            batch.append(ev)
            if len(batch) >= _PUT_BATCH:
                self._insert_events(conn, number, batch)
                batch = []
        if not cut:
            changed = self._cut(conn, recording_id, kept) > 0
        self._insert_events(conn, number, batch)
        return kept, changed

    def _put_unfolded(self, conn: Connection, info: RecordingInfo,
                      lines: Iterable[tuple[bytes, bool]], *, layout: dict[str, Any],
                      summary: dict[str, Any]) -> Put:
        """Store a recording usage first (:mod:`.unfolded`), in ``conn``'s
        transaction: its row (``info`` and ``summary``, with its ``usage_calls``
        rows under :data:`~.ingest.USAGE_CALLS`), its ``lines`` as they are
        (``(bytes, eol)``; the stored ones that begin them kept, as
        :meth:`_put_events`), and its mark."""
        columns = {**info_columns(info), **summary}
        calls = list(columns.pop(USAGE_CALLS, ()))
        stored = storable_columns(columns)
        lock_usage(conn)  # before the recording's row, as :meth:`_put`
        found = conn.execute(_UPDATE_RECORDING, {**stored, "_rid": info.id}).rowcount
        if not found:
            conn.execute(_INSERT_RECORDING, stored)
        number = _hold_recording(conn, info.id)
        rows = _stored_rows(conn, number, self.unpacker()) if found else iter(())
        kept, batch, cut, written = 0, [], not found, 0
        for data, eol in lines:
            if not cut:
                if next(rows, None) == (kept, unfolded.RAW_DIRECTION, 0, data, eol, 0):
                    kept += 1
                    continue
                cut = True
                self._cut(conn, info.id, kept)
            batch.append((data, eol))
            if len(batch) >= _PUT_BATCH:
                written += self._insert_lines(conn, number, batch, kept + written)
        changed = self._cut(conn, info.id, kept) > 0 if not cut else bool(found)
        written += self._insert_lines(conn, number, batch, kept + written)
        self._replace_usage(conn, info.id, calls, whole=True, new=not found)
        unfolded.mark(conn, info.id, layout)
        return Put(kept, bool(found), changed or written > 0)

    def _insert_lines(self, conn: Connection, number: int, batch: list[tuple[bytes, bool]],
                      first: int) -> int:
        """Insert ``batch``, lines stored as they are, numbered from ``first``
        (the batch is emptied); how many."""
        count = len(batch)
        if count:
            self._insert_rows(conn, _EVENTS, list(unfolded.raw_rows(number, batch, first)), [])
            batch.clear()
        return count

    @staticmethod
    def _cut(conn: Connection, recording_id: str, kept: int) -> int:
        return cut_events(conn, recording_id, kept)

    def _insert_events(self, conn: Connection, number: int, events: list[Event]) -> None:
        """Insert ``events`` of the recording numbered ``number``."""
        rows, tools = event_rows(number, events)
        if rows:
            self._insert_rows(conn, _EVENTS, rows, index_events(number, events))
        if tools:
            self._insert_rows(conn, _TOOLS, tools)

    def _replace_usage(self, conn: Connection, recording_id: str,
                       calls: list[tuple[Any, ...]], *, whole: bool = False,
                       new: bool = False) -> None:
        """Make ``calls`` (:func:`~claudetrace.model.summary.usage_rows`) the
        recording's rows of ``usage_calls`` for those calls (``whole``: all its
        rows; ``new``: a recording inserted in this transaction, that holds none
        yet); a message another recording holds is marked a duplicate."""
        def elsewhere(ids: list[str]) -> Iterator[str]:
            for chunk in chunks(ids):
                yield from conn.execute(_HELD_ELSEWHERE,
                                        {"ids": chunk, "rid": recording_id}).scalars()

        lock_usage(conn)
        rows = usage_call_rows(recording_id, calls, elsewhere)
        mine = _USAGE.c.recording_id == recording_id
        dropped: set[str] = set()
        if whole and not new:  # a message it counted and holds no more counts again elsewhere
            dropped = _counted(conn, [recording_id]) - {row[1] for row in rows}
            conn.execute(delete(_USAGE).where(mine))
        elif not new:
            for chunk in chunks([row[1] for row in rows]):
                conn.execute(delete(_USAGE).where(mine, _USAGE.c.call_id.in_(chunk)))
        if rows:
            self._insert_rows(conn, _USAGE, rows)
        _rollup(conn, recording_id)
        if dropped:
            _recount(conn, dropped)

    def tables_bytes(self) -> int:
        """What the store's tables take on disk, with their indexes (and TOAST on
        PostgreSQL, the tables of the current schema); on SQLite the file and its
        write-ahead log."""
        if self.engine.dialect.name == "sqlite":
            path = sqlite_path(str(self.engine.url))
            return 0 if path is None else sqlite_file_bytes(path)
        with _store_errors("measure"), self.engine.connect() as conn:
            size = conn.exec_driver_sql(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE c.relkind = 'r' AND n.nspname = current_schema()").scalar_one()
        return int(size)

    def relation_bytes(self) -> dict[str, int]:
        """Where :meth:`tables_bytes` goes: bytes on disk of each table and each
        index, by name (SQLite: its pages, from ``dbstat``, the FTS5 index's
        shadow tables each on its own; PostgreSQL: each table with its TOAST,
        each index apart, in the current schema).  Free pages and the
        write-ahead log are not any relation's."""
        with _store_errors("measure"), self.engine.connect() as conn:
            if self.engine.dialect.name == "sqlite":
                rows = conn.exec_driver_sql(
                    "SELECT name, sum(pgsize) FROM dbstat GROUP BY name").all()
            else:
                rows = conn.exec_driver_sql(
                    "SELECT c.relname, CASE c.relkind WHEN 'r' THEN"
                    " pg_table_size(c.oid) ELSE pg_relation_size(c.oid) END FROM pg_class c"
                    " JOIN pg_namespace n ON n.oid = c.relnamespace"
                    " WHERE c.relkind IN ('r', 'i') AND n.nspname = current_schema()").all()
        return {str(name): int(size) for name, size in rows}

    def delete_recording(self, recording_id: str) -> None:
        """Delete a recording with its events and tool references (the schema's
        triggers delete those with the row, migration 0006).  A batch being
        written holds the row (``FOR KEY SHARE``, :func:`_hold_recording`): its
        lines are committed first and go with it, and a later batch finds no
        recording."""
        self.delete_recordings([recording_id])

    def import_state(self, recording_id: str) -> tuple[int | None, str] | None:
        """``(ended_ns, extra as stored text)`` of ``recording_id``, or None when it
        is not stored: whether an import of it ended, who imports it, and the text
        :meth:`delete_half_import` compares."""
        t = _RECORDINGS.c
        with _store_errors("read"), self.engine.connect() as conn:
            row = conn.execute(select(t.ended_ns, sql_cast(t.extra, Text))
                               .where(t.id == recording_id)).first()
        return None if row is None else (row[0], str(row[1] or ""))

    def recording_with_tail(self, tail: str) -> str | None:
        """The oldest stored recording whose id ends with ``tail`` (a ULID's 16
        characters after its time), or None: a cassette dated by its file's
        modification time is found again by its bytes' digest after a copy or a
        checkout changed that time (a scan of the ids: asked only then)."""
        t = _RECORDINGS.c
        with _store_errors("read"), self.engine.connect() as conn:
            found = conn.execute(select(t.id).where(func.substr(t.id, 11) == tail)
                                 .order_by(t.id).limit(1)).scalar()
        return None if found is None else str(found)

    def delete_half_import(self, recording_id: str, seen: str,
                           replacement: RecordingInfo | None = None) -> bool:
        """Delete the half-imported recording ``recording_id`` (no end written)
        only while its ``extra`` is still the text ``seen`` (its importer's mark,
        :meth:`import_state`), in one statement: of two imports replacing the same
        dead half at once, one deletes it and the other, finding nothing to
        delete, looks again.  True when this call deleted it.

        ``replacement`` (the replacing import's recording, under the same id, its
        importer's mark in its ``extra``): its row is inserted in the same
        transaction, so the recording is never absent meanwhile: an import that
        looks then finds it being imported, not missing (and so imports it too)."""
        t = _RECORDINGS.c
        with _store_errors("delete"), self.engine.begin() as conn:
            done = _delete_counted(conn, [recording_id], t.ended_ns.is_(None),
                                   sql_cast(t.extra, Text) == seen)
            if done and replacement is not None:
                _insert_recording(conn, replacement)
        return bool(done)

    def fold_recordings(self, into: str, others: Sequence[str]) -> None:
        """Delete the recordings ``others``, whose content the recording ``into``
        now holds (an earlier import's recordings of a resumed session's files,
        joined since), in one transaction, their usage counted again where
        copies are left (:meth:`delete_recordings`)."""
        gone = [rid for rid in others if rid != into]
        if gone:
            self.delete_recordings(gone)

    def delete_recordings(self, ids: Sequence[str]) -> int:
        """Delete the recordings ``ids`` in one transaction (the schema's triggers
        take their rows with them); returns how many were there.  An API message
        whose usage counted in them only (the copies elsewhere marked
        duplicates) counts again in one of the copies left (:func:`_recount`):
        what every other recording holds is counted once, never twice or not at
        all."""
        if not ids:
            return 0
        with _store_errors("delete"), self.engine.begin() as conn:
            return _delete_counted(conn, list(ids))

    # -- reading -----------------------------------------------------------------

    def get(self, recording_id: str) -> Recording:
        with _store_errors("read"), self.session() as s:
            rec = s.get(Recording, recording_id)
        if rec is None:
            raise SessionNotFound(f"no recording {recording_id!r}", query=recording_id)
        return rec

    def resolve(self, query: str) -> Recording:
        """A recording from an id, unique id prefix, CLI session_id, or ``latest``."""
        q = query.strip()
        if not q:
            raise SessionNotFound("empty session id", query=query)
        table = _RECORDINGS.c
        with _store_errors("read"), self.session() as s:
            if q.lower() == "latest":
                rec = s.scalars(
                    select(Recording).order_by(table.started_ns.desc(), table.id.desc()).limit(1)
                ).first()
                if rec is None:
                    raise SessionNotFound("there are no recordings yet", query=query)
                return rec
            exact = s.get(Recording, q.upper())
            if exact is not None:
                return exact
            by_prefix = list(
                s.scalars(
                    select(Recording)
                    .where(table.id.like(_like_prefix(q.upper()), escape="\\"))
                    .limit(6)
                )
            )
            if not by_prefix:
                by_prefix = list(
                    s.scalars(
                        select(Recording)
                        .where(
                            or_(
                                table.cli_session_id == q,
                                table.cli_session_id.like(_like_prefix(q), escape="\\"),
                            )
                        )
                        .order_by(table.started_ns.desc())
                        .limit(6)
                    )
                )
            if not by_prefix:
                by_prefix = self.resumed_into(s, q)
        if len(by_prefix) == 1:
            return by_prefix[0]
        if not by_prefix:
            raise SessionNotFound(
                f"no recording matches {query!r} (try `claudetrace sessions`)", query=query
            )
        ids = [r.id for r in by_prefix[:5]]
        raise AmbiguousSession(
            f"{query!r} matches several recordings: {', '.join(ids)}"
            + (", …" if len(by_prefix) > 5 else ""),
            query=query,
            candidates=ids,
        )

    @staticmethod
    def resumed_into(s: Session, query: str) -> list[Recording]:
        """Recordings a resumed session's new id (or a prefix of one) was joined to
        (``extra.resumed_as``, an imported transcript's ``claude --resume``): the
        text of ``extra`` narrows them in SQL, the list itself decides."""
        extra = sql_cast(_RECORDINGS.c.extra, Text)
        rows = s.scalars(
            select(Recording)
            .where(extra.like('%"resumed\\_as"%', escape="\\"),
                   extra.like("%" + _like_prefix(query)[:-1] + "%", escape="\\"))
            .order_by(_RECORDINGS.c.started_ns.desc())
            .limit(50))
        return [rec for rec in rows
                if any(isinstance(sid, str) and sid.startswith(query)
                       for sid in (rec.extra or {}).get("resumed_as") or ())][:6]

    def list_recordings(
        self,
        *,
        limit: int | None = None,
        offset: int = 0,
        since_ns: int | None = None,
        until_ns: int | None = None,
        newest_first: bool = True,
    ) -> list[Recording]:
        table = _RECORDINGS.c
        stmt = select(Recording)
        if since_ns is not None:
            stmt = stmt.where(table.started_ns >= since_ns)
        if until_ns is not None:
            stmt = stmt.where(table.started_ns < until_ns)
        order = (
            (table.started_ns.desc(), table.id.desc())
            if newest_first
            else (table.started_ns, table.id)
        )
        stmt = stmt.order_by(*order).offset(offset)
        if limit is not None:
            stmt = stmt.limit(limit)
        with _store_errors("read"), self.session() as s:
            return list(s.scalars(stmt))

    def find_by_session(self, source: str, cli_session_id: str) -> Recording | None:
        """The first recording from ``source`` (``transcript`` …) of a CLI session id."""
        table = _RECORDINGS.c
        with _store_errors("read"), self.session() as s:
            return s.scalars(
                select(Recording)
                .where(table.source == source, table.cli_session_id == cli_session_id)
                .order_by(table.started_ns)
                .limit(1)
            ).first()

    def converted_sessions(self, sources: Sequence[str]) -> list[tuple[Any, ...]]:
        """``(id, source, cli_session_id, name, tags, extra)`` of every recording
        converted from ``sources`` (``transcript`` …): what an import needs to know
        which sessions it has, in one query."""
        t = _RECORDINGS.c
        with _store_errors("read"), self.engine.connect() as conn:
            return [tuple(row) for row in conn.execute(
                select(t.id, t.source, t.cli_session_id, t.name, t.tags, t.extra)
                .where(t.source.in_(list(sources))))]

    def half_imported(self) -> list[Recording]:
        """Recordings of cassettes whose import stopped before their end (killed):
        an import writes a cassette's end last, so these never claim to be whole."""
        table = _RECORDINGS.c
        with _store_errors("read"), self.session() as s:
            return list(s.scalars(
                select(Recording).where(table.source == "import", table.ended_ns.is_(None))
                .order_by(table.started_ns.desc(), table.id.desc())
            ))

    def lossy_recordings(self) -> list[Recording]:
        """Recordings that lost bytes of their capture (forwarded, never written:
        a full disk), newest first."""
        table = _RECORDINGS.c
        with _store_errors("read"), self.session() as s:
            return list(s.scalars(
                select(Recording).where(table.lost_bytes > 0)
                .order_by(table.started_ns.desc(), table.id.desc())
            ))

    def count_recordings(self, id_prefix: str = "") -> int:
        """How many recordings the store holds (those whose id begins ``id_prefix``)."""
        stmt = select(func.count()).select_from(Recording)
        if id_prefix:
            stmt = stmt.where(Recording.id.like(_like_prefix(id_prefix), escape="\\"))
        with _store_errors("read"), self.session() as s:
            return int(s.scalar(stmt) or 0)

    def iter_events(
        self,
        recording_id: str,
        start_seq: int = 0,
        limit: int | None = None,
        *,
        directions: Sequence[str] | None = None,
        types: Sequence[str] | None = None,
        chunk: int = 2000,
    ) -> Iterator[Event]:
        """Events of a recording in sequence order, fetched in pages."""
        for row in self.iter_event_rows(recording_id, start_seq, limit, directions=directions,
                                        types=types, chunk=chunk):
            yield Event(*row)

    def iter_event_rows(
        self,
        recording_id: str,
        start_seq: int = 0,
        limit: int | None = None,
        *,
        directions: Sequence[str] | None = None,
        types: Sequence[str] | None = None,
        skip_types: Sequence[str] = (),
        chunk: int = 2000,
    ) -> Iterator[EventTuple]:
        """What :meth:`iter_events` gives, as plain tuples ``(seq, direction, t_ns,
        data, eol, wall_ns)`` (:class:`Event`'s own order): for readers that go
        through every line of a big recording (``show``, ``export``) and need no
        object per line.  Fetched ``chunk`` rows at a time, each page in its own
        short read, so memory stays one page whatever the recording's size.
        ``skip_types`` leaves out the JSON lines of those types (lines that are
        not JSON objects are always given).
        """
        c = _EVENTS.c
        stmt = select(c.seq, c.direction, c.t_ns, c.data, c.eol, c.wall_ns, c.codec).where(
            c.rec == number_of(recording_id))
        unpack = self.unpacker()
        if directions:
            stmt = stmt.where(c.direction.in_(list(directions)))
        if types:
            stmt = stmt.where(type_in(types))
        if skip_types:
            # The indexed type is the line's own (a clipped or escaped one never
            # equals a type it was not).
            stmt = stmt.where(or_(c.type.is_(None), c.type.not_in(list(skip_types))))
        stmt = stmt.order_by(c.seq)

        def read(next_seq: int, page: int) -> Sequence[Any]:
            with _store_errors("read"), self.engine.connect() as conn:
                rows: Sequence[Any] = conn.execute(stmt.where(c.seq >= next_seq).limit(page)).all()
            return [(s, d, t, unpack(b, k), e, w) for s, d, t, b, e, w, k in rows]

        for rows in _seq_pages(read, start_seq, limit, chunk):
            yield from rows

    def iter_line_pages(self, recording_id: str, *, chunk: int = 2000,
                        ) -> Iterator[Sequence[tuple[int, Direction, int, bytes, Any]]]:
        """A recording's ``(seq, direction, t_ns, data, eol)`` in sequence order, a
        page of up to ``chunk`` at a time, each read as :meth:`iter_event_rows`
        reads one: for a reader that only writes every line out again (export).
        ``eol`` is true or false as the database gives it (SQLite: 1 or 0).

        On SQLite the page is read on the driver's own cursor: SQLAlchemy's rows
        and its conversion of ``eol`` cost as much as the database's reading.
        """
        if self.engine.dialect.name != "sqlite":
            rows = self.iter_event_rows(recording_id, chunk=chunk)
            while page := list(islice(rows, chunk)):
                yield [row[:5] for row in page]
            return
        sql = ("SELECT seq, direction, t_ns, data, eol, codec FROM events"
               f" WHERE rec = {keys.number_of('?')} AND seq >= ? ORDER BY seq LIMIT ?")
        unpack = self.unpacker()

        def read(next_seq: int, page: int) -> Sequence[Any]:
            with _store_errors("read"), self.engine.connect() as conn:
                driver = conn.connection.driver_connection
                assert driver is not None
                cursor = driver.cursor()
                try:
                    rows: Sequence[Any] = cursor.execute(
                        sql, (recording_id, next_seq, page)).fetchall()
                    return [row[:5] if row[5] is None else
                            (row[0], row[1], row[2], unpack(row[3], row[5]), row[4])
                            for row in rows]
                finally:
                    cursor.close()

        yield from _seq_pages(read, 0, None, chunk)

    def count_events(self, recording_id: str) -> int:
        with _store_errors("read"), self.engine.connect() as conn:
            return int(
                conn.execute(
                    select(func.count())
                    .select_from(_EVENTS)
                    .where(_EVENTS.c.rec == number_of(recording_id))
                ).scalar_one()
            )

    def rows_per_table(self, recording_id: str) -> dict[str, int]:
        """How many rows each table keyed by recording holds of ``recording_id``
        (``events``, ``event_search``, ``event_tools``, ``usage_calls``,
        ``usage_hours``, ``usage_models``): what a copy of a recording must match."""
        tables = ("events", "event_search", "event_tools", "usage_calls", "usage_hours",
                  "usage_models")
        numbered = f"{keys.KEY} = {keys.number_of(':r')}"
        where = {table: numbered if table in _NUMBERED else "recording_id = :r"
                 for table in tables}
        if self.engine.dialect.name == "sqlite":
            # SQLite's search table (FTS5) has no key of its own: an entry is its
            # event's rowid.
            where["event_search"] = f"rowid IN (SELECT rowid FROM events WHERE {numbered})"
        with _store_errors("read"), self.engine.connect() as conn:
            return {table: int(conn.execute(
                text(f"SELECT count(*) FROM {table} WHERE {where[table]}"),
                {"r": recording_id}).scalar_one()) for table in tables}

    def has_event(self, recording_id: str, seq: int) -> bool:
        """Whether the recording has a line numbered ``seq``."""
        with _store_errors("read"), self.engine.connect() as conn:
            return conn.execute(
                select(_EVENTS.c.seq).where(_EVENTS.c.rec == number_of(recording_id),
                                            _EVENTS.c.seq == seq)
            ).first() is not None

    def recording_info(self, recording_id: str) -> RecordingInfo:
        return self.get(recording_id).info()

    def cassette_header(self, rec: Recording) -> dict[str, Any]:
        """The cassette header for a stored recording (original import fields kept)."""
        original = dict((rec.extra or {}).get("cassette_header") or {})
        header = new_header()
        header.update(original)
        header.update(
            {
                "argv": list(rec.argv or []),
                "exit_code": rec.exit_code,
                "recording_id": rec.id,
                "cwd": rec.cwd,
                "started_ns": rec.started_ns,
                "ended_ns": rec.ended_ns,
                "claude_code_version": rec.claude_code_version,
                "session_id": rec.cli_session_id,
                "model": rec.model,
                "permission_mode": rec.permission_mode,
                "host": rec.host,
                "claudetrace_version": rec.claudetrace_version,
            }
        )
        for key, value in (("signal", rec.signal), ("name", rec.name), ("error", rec.error)):
            if value is not None:
                header[key] = value
        if rec.tags:
            header["tags"] = dict(rec.tags)
        return {k: v for k, v in header.items() if v is not None or k == "exit_code"}

    def load_cassette(self, recording_id: str) -> Cassette:
        rec = self.get(recording_id)
        return Cassette(header=self.cassette_header(rec), events=list(self.iter_events(rec.id)))


def cut_events(conn: Connection, recording_id: str, kept: int) -> int:
    """Delete a recording's events from seq ``kept`` on, with their tool rows and
    search rows (in ``conn``'s transaction); the events deleted."""
    conn.execute(delete(_TOOLS).where(_TOOLS.c.rec == number_of(recording_id),
                                      _TOOLS.c.seq >= kept))
    deleted = conn.execute(delete(_EVENTS).where(_EVENTS.c.rec == number_of(recording_id),
                                                 _EVENTS.c.seq >= kept)).rowcount
    if conn.dialect.name == "postgresql":  # SQLite's search rows go with the events
        conn.exec_driver_sql(f"DELETE FROM event_search WHERE rec = {keys.number_of('%(id)s')} "
                             "AND seq >= %(kept)s", {"id": recording_id, "kept": kept})
    return max(0, int(deleted or 0))


@contextlib.contextmanager
def _store_errors(what: str) -> Iterator[None]:
    """Turn a database error into a one-line :class:`StoreError` saying what failed."""
    try:
        yield
    except SQLAlchemyError as exc:
        raise StoreError(f"{what} failed: {error_reason(exc)}") from exc


def _summarised(info: RecordingInfo,
                events: Iterable[Event]) -> tuple[list[Event], dict[str, Any]]:
    """``events`` read, and the columns :func:`~.ingest.ended_columns` gives of
    the session model folded over them (``info`` observing them)."""
    events = list(events)
    session = SessionModel(model=info.model, session_id=info.cli_session_id)
    for ev in events:
        session.add(ev)
        info.observe(ev)
        ev.forget_parsed()  # a converter's events may come parsed: a copy of each
    return events, ended_columns(session, info, info.started_ns + session.last_ns)


class Batch:
    """Recordings put in one transaction (:meth:`Store.batch`): a folder import's
    new sessions, so that the pages of the indexes of random ids (tool use and
    message ids) each session touches are written once a batch, not once a
    session, and a batch pays one commit.

    Each :meth:`put` is one recording's :meth:`Store.put_recording` in a
    savepoint of the batch's transaction: one that fails is taken back alone
    (and raises), the others stay for :meth:`commit`.  Nothing is seen by other
    connections, nor left by a process killed, before :meth:`commit`.  On
    SQLite the transaction takes the write lock as it begins (``BEGIN
    IMMEDIATE``), as a lone put takes it with its first write; other writers
    wait for the commit, so the caller commits often (:attr:`age`).  Closing
    the batch takes back what was not committed."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._conn: Connection | None = None
        self._began = 0.0
        #: Recordings put since the last commit.
        self.count = 0

    @property
    def age(self) -> float:
        """Seconds since the open transaction began (0: none open)."""
        return time.monotonic() - self._began if self._conn is not None else 0.0

    def put(self, info: RecordingInfo, events: Iterable[Event], *,
            open_seen_ns: int | None = None, summary: dict[str, Any] | None = None) -> Put:
        """:meth:`Store.put_recording` of one recording, in the batch."""
        if summary is None:
            events, summary = _summarised(info, events)
        columns = summary
        return self._saved(lambda conn: self.store._put(
            conn, info, events, open_seen_ns=open_seen_ns, summary=columns))

    def put_unfolded(self, info: RecordingInfo, lines: Iterable[tuple[bytes, bool]], *,
                     layout: dict[str, Any], summary: dict[str, Any]) -> Put:
        """:meth:`Store._put_unfolded` of one recording, in the batch."""
        return self._saved(lambda conn: self.store._put_unfolded(
            conn, info, lines, layout=layout, summary=summary))

    def _saved(self, write: Callable[[Connection], Put]) -> Put:
        """``write`` in a savepoint of the batch's transaction (taken back alone
        when it fails)."""
        with _store_errors("import"):
            conn = self._begin()
            with conn.begin_nested():
                put = write(conn)
        self.count += 1
        return put

    def claim_unfolded(self, recording_id: str) -> dict[str, Any] | None:
        """:func:`.unfolded.claim` in the batch's transaction."""
        with _store_errors("fold"):
            return unfolded.claim(self._begin(), recording_id)

    def _begin(self) -> Connection:
        if self._conn is not None:
            return self._conn
        conn = self.store.engine.connect()
        try:
            conn.begin()
            if conn.dialect.name == "sqlite":
                conn.exec_driver_sql(f"PRAGMA cache_size = -{IMPORT_CACHE_KIB}")
                conn.exec_driver_sql("BEGIN IMMEDIATE")
        except BaseException:
            conn.close()
            raise
        self._conn, self._began = conn, time.monotonic()
        return conn

    def commit(self) -> None:
        """Commit what was put (nothing to do when nothing was)."""
        conn, self._conn, self.count = self._conn, None, 0
        if conn is None:
            return
        try:
            with _store_errors("import"):
                conn.commit()
        finally:
            conn.close()

    def close(self) -> None:
        """Take back what was put and not committed."""
        conn, self._conn, self.count = self._conn, None, 0
        if conn is not None:
            conn.close()

    def __enter__(self) -> Batch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _WritingThread:
    """A store's writes on a thread: one batch is written while the caller reads
    and folds the next (the database's own work runs without the GIL).  A SQLite
    database in memory is one per thread (its pool keeps a connection per
    thread): another thread would find it empty, so it is written on the
    caller's."""

    def __init__(self, store: Store) -> None:
        from concurrent.futures import Future, ThreadPoolExecutor

        self._store = store
        self._here = store.in_memory
        self._thread = ThreadPoolExecutor(1)
        self._writing: Future[None] | None = None
        self.stored_any = False

    def create_recording(self, info: RecordingInfo) -> None:
        # Noted before (a Ctrl-C after the commit must not hide it), taken back
        # when the store refuses it.
        before, self.stored_any = self.stored_any, True
        try:
            self._store.create_recording(info)
        except Exception:
            self.stored_any = before
            raise

    def write_batch(self, recording_id: str, events: Sequence[Event],
                    recording_updates: dict[str, Any] | None = None) -> None:
        self.wait_written()
        if self._here:
            self._store.write_batch(recording_id, events, recording_updates)
        else:
            self._writing = self._thread.submit(self._store.write_batch, recording_id, events,
                                                recording_updates)

    def wait_written(self) -> None:
        writing, self._writing = self._writing, None
        if writing is not None:
            writing.result()

    def close(self) -> None:
        self._thread.shutdown(wait=True)


def _seq_pages(read: Callable[[int, int], Sequence[Any]], start_seq: int, limit: int | None,
               chunk: int) -> Iterator[Sequence[Any]]:
    """Rows whose first column is ``seq``, in its order from ``start_seq`` (at most
    ``limit`` of them), a page of up to ``chunk`` at a time: ``read(next_seq, n)``
    gives the first ``n`` from ``next_seq`` on, each page in a short read of its
    own, so memory stays one page whatever the recording's size."""
    next_seq = start_seq
    remaining = limit
    while remaining is None or remaining > 0:
        page = chunk if remaining is None else min(chunk, remaining)
        rows = read(next_seq, page)
        if rows:
            yield rows
        if len(rows) < page:
            return
        next_seq = rows[-1][0] + 1
        if remaining is not None:
            remaining -= len(rows)


#: Events a statement of :meth:`Store.put_recording` reads or writes at a time.
_PUT_BATCH: Final = 2000


def _hold_recording(conn: Connection, recording_id: str) -> int:
    """Take the recording's row for the transaction (``FOR KEY SHARE``: it cannot be
    deleted meanwhile), or refuse a batch of a recording that is not there: the
    check a foreign key makes for every row, once a batch (on PostgreSQL the
    events have no foreign key trigger: migration 0005).  Returns its number,
    which keys its rows (:mod:`.keys`)."""
    found = conn.execute(
        select(_RECORDINGS.c.num).where(_RECORDINGS.c.id == recording_id)
        .with_for_update(key_share=True, read=True)
    ).first()
    if found is None:
        raise StoreError(f"no recording {recording_id!r} to store events in")
    return int(found[0])


def _numbers(conn: Connection, ids: list[str]) -> dict[str, int]:
    """The numbers of the recordings ``ids`` names, by id."""
    found: dict[str, int] = {}
    for chunk in chunks(ids):
        found.update((rid, int(num)) for rid, num in conn.execute(
            select(_RECORDINGS.c.id, _RECORDINGS.c.num).where(_RECORDINGS.c.id.in_(chunk))))
    return found


def _counted(conn: Connection, ids: list[str]) -> set[str]:
    """The API messages whose usage counts in the recordings ``ids`` (not duplicates)."""
    u = _USAGE.c
    held: set[str] = set()
    for chunk in chunks(ids):
        held.update(conn.execute(select(u.call_id).where(
            u.recording_id.in_(chunk), u.duplicate.is_(False))).scalars())
    return {call for call in held if api_message_id(call)}


def _insert_recording(conn: Connection, info: RecordingInfo) -> None:
    """Insert the row of the recording ``info``, starting, in ``conn``'s transaction."""
    columns = info_columns(info)
    columns["last_seen_ns"] = info.started_ns
    conn.execute(insert(_RECORDINGS).values(**storable_columns(columns)))


def _delete_counted(conn: Connection, ids: list[str], *where: Any) -> int:
    """Delete the recordings ``ids`` (those of them ``where`` keeps) in ``conn``'s
    transaction, and count again the messages only they counted
    (:func:`_recount`): the one way every path deletes recordings (delete,
    prune, a fold, a half import's replacement).  How many were deleted."""
    lock_usage(conn)
    held = _counted(conn, ids)
    deleted = 0
    for chunk in chunks(ids):
        deleted += conn.execute(delete(_RECORDINGS).where(
            _RECORDINGS.c.id.in_(chunk), *where)).rowcount or 0
    if deleted and held:
        _recount(conn, held)
    return deleted


def _recount(conn: Connection, calls: set[str]) -> None:
    """Make each API message of ``calls`` that no stored row counts (every copy
    left a duplicate: the recording that counted it deleted, or holding it no
    more) count in the copy of the recording that started first (then: the
    smallest id), and make that recording's hourly sums again (``usage_hours``).
    A statement per recording a chunk touches, not per message."""
    u, r = _USAGE.c, _RECORDINGS.c
    touched: set[str] = set()
    for chunk in chunks(sorted(calls)):
        copies: dict[str, list[tuple[int, str, bool]]] = {}
        for call, rid, dup, started in conn.execute(
                select(u.call_id, u.recording_id, u.duplicate, r.started_ns)
                .join(_RECORDINGS, r.id == u.recording_id).where(u.call_id.in_(chunk))):
            copies.setdefault(call, []).append((int(started or 0), rid, bool(dup)))
        counts: dict[str, list[str]] = {}
        for call, rows in copies.items():
            if all(dup for _started, _rid, dup in rows):
                counts.setdefault(min(rows)[1], []).append(call)
        for rid, ids in counts.items():
            conn.execute(update(_USAGE).where(u.recording_id == rid, u.call_id.in_(ids))
                         .values(duplicate=False))
        touched.update(counts)
    for rid in sorted(touched):
        _rollup(conn, rid)


def _rollup(conn: Connection, recording_id: str) -> None:
    """Make ``usage_hours``' rows of a recording the sums of its counted calls."""
    for statement in rollup_statements("recording_id = :rid"):
        conn.execute(text(statement), {"rid": recording_id})


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _stored_rows(conn: Connection, number: int, unpack: Unpacker,
                 page: int = _PUT_BATCH) -> Iterator[tuple[Any, ...]]:
    """The stored events of the recording numbered ``number`` as ``(seq, direction, t_ns, data, eol,
    wall_ns)``, in order, read a page at a time on ``conn`` (in its transaction)."""
    c = _EVENTS.c
    next_seq = 0
    while True:
        rows = conn.execute(
            select(c.seq, c.direction, c.t_ns, c.data, c.eol, c.wall_ns, c.codec)
            .where(c.rec == number, c.seq >= next_seq)
            .order_by(c.seq).limit(page)).all()
        for seq, direction, t_ns, data, eol, wall_ns, codec in rows:
            yield seq, direction, t_ns, unpack(data, codec), eol, wall_ns
        if len(rows) < page:
            return
        next_seq = rows[-1][0] + 1
