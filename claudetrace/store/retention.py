"""Retention: deleting old recordings while proxies record, and giving the space back.

:func:`matching` finds the recordings a ``claudetrace prune`` names (started
before a time, by tag, name or source), never one still running or still being
imported (by another live process); :func:`prune`
deletes them in short transactions, each followed by a pause at least as long as
it held the database, so a writer waiting for SQLite's lock (the indexer of a
session being recorded) gets it within a batch's time; :func:`give_back_space`
then returns what the engine can without blocking readers.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, cast

from sqlalchemy import Connection, Table, func, select, text
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import load_only

from ..errors import StoreError
from . import unfolded
from .api import Store, cut_events
from .engine import error_reason
from .models import EventRow, Recording, UsageCall, number_of, numbers_of

_RECORDINGS = cast(Table, Recording.__table__)
_R = _RECORDINGS.c
_EVENTS = cast(Table, EventRow.__table__)
_USAGE = cast(Table, UsageCall.__table__)

#: Events a delete transaction takes at most: a few milliseconds of the write lock.
BATCH_EVENTS = 2000
#: The least pause after each delete transaction (seconds), whatever it held.
MIN_PAUSE_S = 0.01
#: Recordings a delete transaction takes at most (small ones, together).
GROUP_MOST = 500
#: SQLite pages ``PRAGMA incremental_vacuum`` gives back a transaction.
VACUUM_PAGES = 2048


#: What deciding whether a recording is still written reads of it.
_LIVE_FIELDS: Final = (Recording.id, Recording.source, Recording.started_ns,
                       Recording.ended_ns, Recording.last_seen_ns, Recording.host,
                       Recording.pid, Recording.extra)
_LIVENESS: Final = load_only(*_LIVE_FIELDS)


@dataclass(frozen=True, slots=True)
class Criteria:
    """Which recordings to delete: all the given conditions hold (none given: none)."""

    started_before_ns: int | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    name: str | None = None
    source: str | None = None

    def given(self) -> bool:
        return bool(self.started_before_ns is not None or self.tags or self.name is not None
                    or self.source is not None)


@dataclass(frozen=True, slots=True)
class Found:
    """What a prune would delete."""

    recordings: list[Recording]
    #: Recordings the criteria name that are still running (or being imported), left alone.
    running: int

    @property
    def events(self) -> int:
        return sum(r.event_count or 0 for r in self.recordings)

    @property
    def bytes(self) -> int:
        return sum(r.byte_count or 0 for r in self.recordings)


def matching(store: Store, criteria: Criteria, *, now_ns: int | None = None) -> Found:
    """The recordings ``criteria`` name, oldest first, without those still running
    or still being imported (counted in :attr:`Found.running`)."""
    if not criteria.given():
        raise StoreError("prune needs --older-than, --tag, --name or --source")
    now = time.time_ns() if now_ns is None else now_ns
    stmt = select(Recording).options(load_only(
        Recording.name, Recording.tags, Recording.event_count, Recording.byte_count,
        *_LIVE_FIELDS))
    if criteria.started_before_ns is not None:
        stmt = stmt.where(_R.started_ns < criteria.started_before_ns)
    if criteria.name is not None:
        stmt = stmt.where(_R.name == criteria.name)
    if criteria.source is not None:
        stmt = stmt.where(_R.source == criteria.source)
    stmt = stmt.order_by(_R.started_ns, _R.id)
    try:
        with store.session() as s:
            found = [r for r in s.scalars(stmt)
                     if all((r.tags or {}).get(k) == v for k, v in criteria.tags.items())]
    except SQLAlchemyError as exc:
        raise StoreError(f"read failed: {error_reason(exc)}") from exc
    # An import's fold yet to come (or under way) writes the recording again: left
    # alone as one still being imported is.
    waiting = set(unfolded.pending(store))
    kept = [r for r in found
            if not (r.still_written(now) or r.being_imported() or r.id in waiting)]
    return Found(kept, len(found) - len(kept))


@dataclass(slots=True)
class Pruned:
    """What :func:`prune` deleted."""

    recordings: int = 0
    events: int = 0
    transactions: int = 0
    #: The longest a delete transaction took (seconds): how long a writer may wait.
    longest_s: float = 0.0
    #: Recordings left alone because they came back to life (a proxy or an import
    #: writing them again) while the prune ran.
    revived: int = 0


def prune(store: Store, ids: Sequence[str], *, batch_events: int = BATCH_EVENTS,
          progress: Callable[[Pruned], None] | None = None) -> Pruned:
    """Delete recordings ``ids`` with their events, at most ``batch_events`` events
    (and calls whose usage they count, counted again elsewhere) a transaction:
    small recordings several at a time, a large one's events from
    its last down, then its row (the schema's triggers delete a deleted
    recording's rows with it, migration 0006).

    A recording interrupted half way keeps its first events and its row; the
    same prune again finishes it.  After each transaction the database is left
    alone at least as long as it was held (:data:`MIN_PAUSE_S` at least).
    """
    done = Pruned()
    group: list[str] = []
    grouped = 0

    def flush() -> None:
        nonlocal grouped
        written = _written_again(store, group)
        done.revived += len(written)
        group[:] = [rid for rid in group if rid not in written]
        if group:
            _delete_rows(store, done, list(group))
            if progress is not None:
                progress(done)
        group.clear()
        grouped = 0

    try:
        for rid in ids:
            with store.engine.connect() as conn:
                top = conn.execute(select(func.max(_EVENTS.c.seq))
                                   .where(_EVENTS.c.rec == number_of(rid))).scalar()
            size = 0 if top is None else int(top) + 1
            if size > batch_events:
                left = _cut_down(store, done, rid, size, batch_events)
                if left is None:
                    done.revived += 1
                    continue
                size = left
            # The calls it counts are counted again in the copies left (the store's
            # delete): as much work a call as a line, so a group takes as many.
            size += _counted_calls(store, rid)
            if group and (grouped + size > batch_events or len(group) >= GROUP_MOST):
                flush()
            group.append(rid)
            grouped += size
        flush()
    except SQLAlchemyError as exc:
        raise StoreError(f"prune failed: {error_reason(exc)} "
                         f"({done.recordings} recordings deleted)") from exc
    except StoreError as exc:  # the store's delete says what failed
        raise StoreError(f"prune failed: {exc} ({done.recordings} recordings deleted)") from exc
    return done


def _cut_down(store: Store, done: Pruned, recording_id: str, size: int,
              batch_events: int) -> int | None:
    """Delete a large recording's events from its last down, ``batch_events`` a
    transaction, until fewer than that are left; returns how many are left, or
    None when it came back to life before a cut (the rest left alone)."""
    end = size - 1
    while end >= batch_events:
        if _written_again(store, [recording_id]):
            return None
        start = end + 1 - batch_events
        done.events += _cut(store, done, recording_id, start)
        end = start - 1
    return end + 1


def _written_again(store: Store, ids: Sequence[str]) -> set[str]:
    """Those of ``ids`` that may get lines again (a proxy or an import writing
    them since they were matched, or an import's fold yet to come or under way:
    :mod:`.unfolded`): left alone, as :func:`matching` leaves them."""
    if not ids:
        return set()
    now = time.time_ns()
    with store.session() as s:
        return {r.id for r in s.scalars(select(Recording).options(_LIVENESS)
                                        .where(_R.id.in_(list(ids))))
                if r.still_written(now) or r.being_imported()} | set(
                    unfolded.among(store, list(ids)))


def _counted_calls(store: Store, recording_id: str) -> int:
    """How many calls' usage counts in the recording (not duplicates)."""
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(_USAGE).where(
            _USAGE.c.recording_id == recording_id, _USAGE.c.duplicate.is_(False))).scalar() or 0)


def _cut(store: Store, done: Pruned, recording_id: str, kept: int) -> int:
    """Delete a recording's events from ``kept`` on, with their tool and search
    rows (:func:`~.api.cut_events`), in a transaction of its own, paced."""
    count = 0

    def run() -> None:
        nonlocal count
        with store.engine.begin() as conn:
            count = cut_events(conn, recording_id, kept)
    _paced(done, run)
    return count


def _delete_rows(store: Store, done: Pruned, ids: list[str]) -> None:
    """Delete recordings ``ids`` (their rows take their events with them) in one
    transaction (:meth:`Store.delete_recordings`), counting their events first."""
    with store.engine.connect() as conn:
        events = conn.execute(select(func.count()).select_from(_EVENTS)
                              .where(_EVENTS.c.rec.in_(numbers_of(ids)))).scalar() or 0
    deleted = 0

    def run() -> None:
        nonlocal deleted
        # The store's delete: a message only these counted counts again in a copy left.
        deleted = store.delete_recordings(ids)
    _paced(done, run)
    done.recordings += deleted
    done.events += int(events)


def _paced(done: Pruned, work: Callable[[], None]) -> None:
    """Do ``work`` (one transaction), then leave the database alone at least as
    long as it took (:data:`MIN_PAUSE_S` at least)."""
    began = time.monotonic()
    work()
    held = time.monotonic() - began
    done.transactions += 1
    done.longest_s = max(done.longest_s, held)
    time.sleep(max(MIN_PAUSE_S, held))


@dataclass(frozen=True, slots=True)
class Space:
    """What :func:`give_back_space` did: bytes the database's files shrank by (None:
    not measured), and a sentence for the user."""

    returned_bytes: int | None
    note: str


def give_back_space(store: Store) -> Space:
    """Return freed space as far as the engine can without blocking readers.

    SQLite: a file in incremental auto-vacuum mode (the store makes new files so)
    is shrunk by ``PRAGMA incremental_vacuum``, :data:`VACUUM_PAGES` pages a
    transaction; another file keeps its free pages for new recordings, and the
    note says how to convert it.  PostgreSQL: a plain ``VACUUM`` (which neither
    readers nor writers wait for) makes the space reusable by new rows, so a
    store pruned as it grows stays the size of what it holds at most; it hands
    the system back only the empty pages at the end of each table.  Every table
    a recording has rows in is vacuumed (the search index and usage rows too),
    and analyzed in the same pass: half a table gone leaves the planner's
    figures wrong until autovacuum comes round to it.  The events' key keeps
    the pages the deleted keys had (and recordings written at once leave its
    pages half full): when it takes well over what it would packed, the events'
    indexes are built again beside the old ones, whose pages go back to the
    system (:func:`_rebuild_loose_keys`).
    """
    try:
        if store.engine.dialect.name == "sqlite":
            return _sqlite_space(store)
        if store.engine.dialect.name == "postgresql":
            return _postgres_space(store)
    except SQLAlchemyError as exc:
        raise StoreError(f"giving space back failed: {error_reason(exc)}") from exc
    return Space(None, "")


def _sqlite_space(store: Store) -> Space:
    def pragma(conn: Connection, name: str) -> int:
        return int(conn.exec_driver_sql(f"PRAGMA {name}").scalar() or 0)

    with store.engine.connect() as conn:
        mode, page, free = (pragma(conn, n) for n in ("auto_vacuum", "page_size",
                                                      "freelist_count"))
    if mode != 2:
        return Space(0, f"{free * page / 1e6:.1f} MB are free inside the database file and "
                        "go to new recordings first; to give such space back to the system "
                        "from now on, convert the file once, while nothing records into it: "
                        "sqlite3 FILE 'PRAGMA auto_vacuum = INCREMENTAL; VACUUM'")
    before = free
    done = Pruned()
    while free:
        _paced(done, lambda: _incremental_vacuum(store))
        with store.engine.connect() as conn:
            left = pragma(conn, "freelist_count")
        if left >= free:
            break
        free = left
    store.checkpoint()
    returned = (before - free) * page
    return Space(returned, f"{returned / 1e6:.1f} MB given back to the system")


def _incremental_vacuum(store: Store) -> None:
    """Give :data:`VACUUM_PAGES` free pages back, in a transaction of their own.

    Through the driver's ``executescript``, which steps the pragma to its end: a
    statement run otherwise frees one page (its first step) and is reset."""
    raw = store.engine.raw_connection()
    try:
        raw.driver_connection.executescript(  # type: ignore[union-attr]
            f"PRAGMA incremental_vacuum({VACUUM_PAGES})")
    finally:
        raw.close()


#: The tables a prune deletes from (their rows go with their recording's).
_PRUNED_TABLES = ("recordings", "events", "event_tools", "event_search", "usage_calls",
                  "usage_hours", "usage_models")
_SIZE = ("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
         f"WHERE c.relname IN ({', '.join(repr(t) for t in _PRUNED_TABLES)}) "
         "AND c.relkind IN ('r', 'p') "
         "AND c.relnamespace = current_schema()::regnamespace")


#: Bytes an entry of ``pk_events`` (a recording's number and a ``seq``: migration
#: 0020_recnum) takes in an index built at once: a 16-byte tuple, its 4-byte
#: line pointer, leaf pages 90% full (measured: 22.5 on 1.1M events; 49.7 with
#: the 26-character id before).
PACKED_KEY_BYTES: Final = 23
#: How many times its packed size ``pk_events`` may take before
#: :func:`give_back_space` builds the events' indexes again.  Recordings written
#: at once split its pages in half and leave them so (74 to 76 B an entry with
#: 4 or 16 of them), and a prune empties pages that stay: 1.25 leaves an index
#: built at once alone.
LOOSE_KEY: Final = 1.25
#: The least ``pk_events`` is built again from (bytes): below, nothing worth it.
REBUILT_FROM: Final = 1 << 20
#: How long the rebuild waits for transactions older than it (it reads the
#: table as of its start) before it gives up, leaving the old indexes.
REBUILD_WAITS: Final = "60s"
#: The indexes built again (``pk_events`` and the partial one, not the line's
#: TOAST index: a few pages).
_EVENTS_INDEXES = ("pk_events", "ix_events_recording_type")
#: What an interrupted ``REINDEX … CONCURRENTLY`` leaves: an index no one reads
#: and every write updates.
_LEFT_OVER = ("SELECT c.oid::regclass::text FROM pg_index i "
              "JOIN pg_class c ON c.oid = i.indexrelid "
              "WHERE i.indrelid = 'events'::regclass AND NOT i.indisvalid "
              "AND c.relname ~ '_cc(new|old)[0-9]*$'")
_KEY_LOOSENESS = ("SELECT pg_relation_size(c.oid), c.reltuples * "
                  f"{PACKED_KEY_BYTES} FROM pg_class c WHERE c.oid = 'pk_events'::regclass")


def _postgres_space(store: Store) -> Space:
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        before = int(conn.exec_driver_sql(_SIZE).scalar() or 0)
        # SKIP_LOCKED: a table another prune's VACUUM or rebuild holds is left to it
        # (and to autovacuum) instead of waited for without a limit.
        conn.exec_driver_sql(f"VACUUM (ANALYZE, SKIP_LOCKED) {', '.join(_PRUNED_TABLES)}")
        rebuilt = _rebuild_loose_keys(conn)
        after = int(conn.exec_driver_sql(_SIZE).scalar() or 0)
    returned = max(0, before - after)
    how = ("(the events' indexes built again beside the old ones)" if rebuilt == "" else
           "(empty pages at the tables' ends)")
    why = f"; the events' indexes were not built again: {rebuilt}" if rebuilt else ""
    return Space(returned, f"VACUUM made the deleted rows' space reusable by new recordings; "
                           f"{returned / 1e6:.1f} MB {how} went back to the system{why} "
                           "(VACUUM FULL returns the rest but blocks every reader while it "
                           "runs)")


def _rebuild_loose_keys(conn: Connection) -> str | None:
    """Build the events' indexes again when ``pk_events`` takes more than
    :data:`LOOSE_KEY` times its packed size (by the figures of the ``VACUUM``
    just run), and drop what an interrupted rebuild left.  None: not needed;
    "": done; else why it was given up (the old indexes kept).

    ``REINDEX … CONCURRENTLY`` builds each new index beside the old one, which
    readers and writers use meanwhile (it takes no lock they wait for), then
    drops the old one: its pages go back to the system."""
    # Bounded: another prune's rebuild holds the table's lock until it is done.
    conn.exec_driver_sql(f"SET lock_timeout = '{REBUILD_WAITS}'")
    try:
        _drop_left_over(conn)
        size, packed = conn.exec_driver_sql(_KEY_LOOSENESS).one()
        if size < REBUILT_FROM or size <= LOOSE_KEY * packed:
            return None
        for index in _EVENTS_INDEXES:
            conn.exec_driver_sql(f"REINDEX INDEX CONCURRENTLY {index}")
    except DBAPIError as exc:
        with contextlib.suppress(DBAPIError):  # the next prune drops them otherwise
            _drop_left_over(conn)
        return error_reason(exc)
    finally:
        conn.exec_driver_sql("RESET lock_timeout")
    return ""


def _drop_left_over(conn: Connection) -> None:
    """Drop the indexes an interrupted rebuild of the events' left behind."""
    for (name,) in conn.exec_driver_sql(_LEFT_OVER).all():
        conn.exec_driver_sql(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


# -- checking what a delete left (the team-store bench, the tests) ----------------------------

#: Rows of each table whose recording (or, for the search index, event) is gone;
#: ``{search}`` is the search index's own test (its rows name their event on
#: PostgreSQL, share its rowid in SQLite's FTS5 table).
_ORPHANS: Final = {
    "events": "SELECT count(*) FROM events e WHERE NOT EXISTS "
              "(SELECT 1 FROM recordings r WHERE r.num = e.rec)",
    "event_tools": "SELECT count(*) FROM event_tools t WHERE NOT EXISTS "
                   "(SELECT 1 FROM events e WHERE e.rec = t.rec AND e.seq = t.seq)",
    "event_search": "SELECT count(*) FROM event_search s WHERE NOT EXISTS "
                    "(SELECT 1 FROM events e WHERE {search})",
    "usage_calls": "SELECT count(*) FROM usage_calls u WHERE NOT EXISTS "
                   "(SELECT 1 FROM recordings r WHERE r.id = u.recording_id)",
    "usage_hours": "SELECT count(*) FROM usage_hours u WHERE NOT EXISTS "
                   "(SELECT 1 FROM recordings r WHERE r.id = u.recording_id)",
    "usage_models": "SELECT count(*) FROM usage_models u WHERE NOT EXISTS "
                    "(SELECT 1 FROM recordings r WHERE r.id = u.recording_id)",
}
_SEARCH_ROW: Final = {"postgresql": "e.rec = s.rec AND e.seq = s.seq",
                      "sqlite": "e.rowid = s.rowid"}


def orphans(store: Store) -> dict[str, int]:
    """The tables with rows whose recording (or event) is gone, and how many
    (none: the schema and the deletes left nothing behind)."""
    search = _SEARCH_ROW.get(store.engine.dialect.name, _SEARCH_ROW["postgresql"])
    try:
        with store.engine.connect() as conn:
            counts = {table: int(conn.exec_driver_sql(sql.format(search=search)).scalar() or 0)
                      for table, sql in _ORPHANS.items()}
    except SQLAlchemyError as exc:
        raise StoreError(f"read failed: {error_reason(exc)}") from exc
    return {table: n for table, n in counts.items() if n}


def delete_row_by_hand(store: Store, recording_id: str) -> None:
    """Delete a recording's row alone, in the one plain ``DELETE FROM recordings``
    a person types in ``psql`` or ``sqlite3`` (none of the store's own cleaning:
    what its other rows become is the schema's doing; :func:`orphans` says)."""
    try:
        with store.engine.begin() as conn:
            conn.execute(text("DELETE FROM recordings WHERE id = :id"), {"id": recording_id})
    except SQLAlchemyError as exc:
        raise StoreError(f"delete failed: {error_reason(exc)}") from exc


def waiting_locks(store: Store) -> int:
    """How many locks someone waits for in the database now (PostgreSQL's
    ``pg_locks``); 0 on SQLite, which shows no one's waits."""
    if store.engine.dialect.name != "postgresql":
        return 0
    try:
        with store.engine.connect() as conn:
            return int(conn.exec_driver_sql(
                "SELECT count(*) FROM pg_locks WHERE NOT granted").scalar() or 0)
    except SQLAlchemyError as exc:
        raise StoreError(f"read failed: {error_reason(exc)}") from exc
