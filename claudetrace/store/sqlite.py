"""SQLite through the :mod:`sqlite3` module alone: its set-up, and the writer's writes.

The indexer's writer process (:mod:`.writer`) is on the path that bounds how soon a
burst is queryable, and loading SQLAlchemy (with the models and the engine) is a
fifth of its CPU time under a 200k-line burst.  On a SQLite file that is already
at the newest schema it writes through :class:`SqliteWrites` instead: the same
statements in the same transactions, the same values (a test holds every column
to what :class:`~claudetrace.store.Store` writes), the same errors.  Anything
else (another database, a file to create or migrate, a URL with options) goes
through :func:`~claudetrace.store.open_store`.

:func:`set_up` and :func:`bind_directly` are the connection set-up both use.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from ..config import plain_file as plain_file  # re-exported: it was here
from ..config import plain_name as plain_name
from ..errors import StoreError, not_regular
from .plain import PlainWrites, require_head
from .rows import ROWS_PER_INSERT, Rows, insert_batches, rows_per_insert

#: How long SQLite waits on a lock held by another writer before giving up.
BUSY_TIMEOUT_S: Final = 30.0
#: How long a read command's own writes (storing leftover captures) wait on a
#: lock another process holds before it shows what is stored instead.
SETTLE_BUSY_TIMEOUT_S: Final = 2.0
#: The page size of a SQLite file the store makes (bytes).  A burst's lines go
#: into pages, the log and then the database, a ``pwrite`` a page: in 16 KiB
#: pages rather than SQLite's 4 KiB the writer takes a fifth less CPU time and
#: the burst is queryable about 15% sooner (``bench ingest``; 64 KiB gains
#: nothing more).  A file keeps the page size it was made with.
PAGE_BYTES: Final = 16384


#: The size (bytes) a write-ahead log is cut back to once copied into the
#: database (``journal_size_limit``, with ``log_bytes``): a burst's log, up to
#: the writer's bound, does not stay on disk at that size.
LOG_KEPT_BYTES: Final = 64 * 1024 * 1024


def set_up(connection: Any, busy_timeout_s: float, log_bytes: int | None) -> None:
    """Set a new connection up for concurrent recording: a busy timeout, the
    write-ahead log, foreign keys, :data:`PAGE_BYTES` and incremental auto-vacuum
    for a file still empty;
    ``log_bytes``: the log's size at which a commit copies it into the database
    (and it is cut back to :data:`LOG_KEPT_BYTES` once copied)."""
    cursor = connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        # Before the log: the page size of a file with nothing in it yet (else a no-op).
        cursor.execute(f"PRAGMA page_size = {PAGE_BYTES}")
        if cursor.execute("PRAGMA page_count").fetchone()[0] == 0:
            # Space a prune frees can be given back to the system (only a file
            # with nothing in it takes it; on another file the pragma waits
            # for the write lock, to no effect).
            cursor.execute("PRAGMA auto_vacuum = INCREMENTAL")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        if log_bytes is not None:
            page = cursor.execute("PRAGMA page_size").fetchone()[0]
            cursor.execute(f"PRAGMA wal_autocheckpoint = {max(1, log_bytes // page)}")
            cursor.execute(f"PRAGMA journal_size_limit = {min(log_bytes, LOG_KEPT_BYTES)}")
    finally:
        cursor.close()


def bind_directly() -> None:
    """Have :mod:`sqlite3` bind ``None``, ``bytes`` and ``bool`` through its adapter
    registry, as what they already are (NULL, a BLOB, an INTEGER 0/1).

    On Python before 3.12, a parameter of any type but ``int``, ``float``, ``str``
    and ``bytearray`` is first offered to the adapter registry, and a type with
    no adapter costs a formatted ``AttributeError``, raised and cleared, before
    it is bound as it would be anyway: a third of the binding of an event row
    (six of its fifteen values are such), a tenth of the indexer's CPU time.  An
    adapter found in the registry is called instead; these return the value as
    it is bound without one, so what is stored is the same; each is a function
    in C (an empty dict's ``get`` is None for None), so calling it costs less
    than a Python function would.  An adapter already registered for one of
    these types (by the host program) is left alone, and the store's statements
    are bound past it (:func:`~claudetrace.store.engine.host_adapters`).
    """
    nothing: dict[None, None] = {}
    mine: dict[type[Any], Any] = {type(None): nothing.get, bytes: _BYTES_ADAPTER,
                                  bool: int.__int__}
    for kind, adapter in mine.items():
        key = (kind, sqlite3.PrepareProtocol)
        if key not in sqlite3.adapters:
            sqlite3.register_adapter(kind, adapter)
            ADAPTERS[key] = sqlite3.adapters[key]


#: The adapters registered by :func:`bind_directly`, by key (type, protocol).
ADAPTERS: dict[Any, Any] = {}

#: ``bytes.__bytes__``, which Python 3.10 lacks.
_BYTES_METHOD = getattr(bytes, "__bytes__", None)


def bytes_unchanged(method: Any = _BYTES_METHOD) -> Any:
    """A function in C that gives back a ``bytes`` object itself: its
    ``__bytes__`` (Python 3.11+), else the type ``bytes``, whose call gives back
    an exact ``bytes`` object as it is (Python 3.10 has no ``bytes.__bytes__``)."""
    return method if method is not None else bytes


_BYTES_ADAPTER = bytes_unchanged()


def prepare_file(path: Path, create: bool) -> None:
    """Make ready the SQLite file ``path``: made (``create``) empty and readable by
    its owner only, and so is the default data directory; any other missing
    folder is an error, never made (a mistyped ``--db`` must not start a
    database nobody will look in).  Without ``create``, a missing file is an
    error naming it; a path that is not a regular file (``/dev/null`` would take
    every write and keep nothing) is one either way."""
    from ..config import data_dir

    if path.exists():
        odd = not_regular(path.stat().st_mode)
        if odd:
            raise StoreError(f"cannot use database {path}: {odd}")
        return
    if not create:
        raise StoreError(f"no database at {path} (check --db or $CLAUDETRACE_DB)")
    folder = path.parent
    if not folder.is_dir():
        if folder != data_dir():
            raise StoreError(f"cannot create database {path}: folder {folder} does not exist")
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StoreError(f"cannot create database folder {folder}: {exc.strerror}") from exc
    # The file (and so its WAL and shared memory, which SQLite makes alike) holds
    # recorded content: its owner's only.
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    except OSError as exc:
        raise StoreError(f"cannot create database {path}: {exc.strerror}") from exc


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold the lock that serialises making and migrating the SQLite file ``path``
    (``PATH.migrate.lock`` beside it, locked with ``flock``): one process makes
    or migrates it, the others wait and then find it done."""
    lock_path = f"{path}.migrate.lock"
    try:
        fd = os.open(lock_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot migrate {path}: cannot make its lock "
                         f"file {lock_path}: {exc.strerror}") from exc
    with open(fd, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its type's name when it has none)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` is another connection's lock (``SQLITE_BUSY``, ``SQLITE_LOCKED``)."""
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class SqliteWrites(PlainWrites):
    """The writing methods of :class:`~claudetrace.store.Store` on a SQLite file at
    :data:`SCHEMA_HEAD`, through :mod:`sqlite3` alone (see the module's text).

    Each write is one transaction, begun ``IMMEDIATE`` (it waits up to the busy
    timeout for the write lock, and never fails half way for a writer that went
    first).  :meth:`checkpoint` runs on a connection of its own, from the
    writer's checkpoint thread.  ``rows_per_insert``: the rows an ``INSERT``
    of events takes (:func:`~.rows.insert_batches`).  Raises :class:`NotPlain`
    when the schema is not at the head, ``sqlite3.Error`` when the file cannot
    be opened.
    """

    _dialect = "sqlite"

    def __init__(self, path: Path, *, busy_timeout_s: float = BUSY_TIMEOUT_S,
                 log_bytes: int | None = None, rows_per_insert: int = ROWS_PER_INSERT) -> None:
        self._path = path
        self._rows_per_insert = rows_per_insert
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._checkpoints: sqlite3.Connection | None = None
        bind_directly()
        # The schema is looked at before the connection is set up: a file that
        # another process is still making (or migrating) holds no head yet, and
        # goes to the store, which waits for it, instead of meeting its lock in
        # the switch to the write-ahead log (which does not wait).
        self._conn = self._open()
        try:
            try:
                heads = [row[0] for row in
                         self._conn.execute("SELECT version_num FROM alembic_version")]
            except sqlite3.OperationalError:  # no such table (a file not made yet)
                heads = []
            require_head(heads)
            set_up(self._conn, self._busy_timeout_s, log_bytes)
        except BaseException:
            self._conn.close()
            raise

    def _open(self) -> sqlite3.Connection:
        return sqlite3.connect(self._path, timeout=self._busy_timeout_s, isolation_level=None,
                               check_same_thread=False)

    def _connect(self) -> sqlite3.Connection:
        """A second connection, set up as the first but for the log's bound (the
        checkpoints': the writes' own connection bounds the log)."""
        conn = self._open()
        try:
            set_up(conn, self._busy_timeout_s, None)
        except BaseException:
            conn.close()
            raise
        return conn

    @contextlib.contextmanager
    def _transaction(self, what: str | None = None) -> Iterator[sqlite3.Cursor]:
        """One transaction; a database error inside it is raised as is, or as a
        :class:`StoreError` saying ``what`` failed (the store's words for it)."""
        cursor = self._conn.cursor()
        try:
            cursor.execute("BEGIN IMMEDIATE")
            try:
                yield cursor
                cursor.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.rollback()
                raise
        except sqlite3.Error as exc:
            if what is None:
                raise
            raise StoreError(f"{what} failed: {first_line(exc)}") from exc
        finally:
            cursor.close()

    #: Takes the recording's row (its number) for the batch's transaction, or finds none.
    _HOLD = "SELECT num FROM recordings WHERE id = ?"

    def _placeholder(self, name: str) -> str:
        return "?"

    def _insert(self, cursor: sqlite3.Cursor, table: str, rows: Rows) -> None:
        per_insert = rows_per_insert(table, self._conn, self._rows_per_insert)
        for statement, parameters in insert_batches(table, rows, per_insert=per_insert):
            cursor.executemany(statement, parameters)

    def _index(self, cursor: sqlite3.Cursor, entries: list[tuple[int, int, str]]) -> None:
        from .textindex import insert_sqlite  # the session model: only to write

        insert_sqlite(cursor, entries)

    def checkpoint(self) -> None:
        """``PRAGMA wal_checkpoint(PASSIVE)`` (as :meth:`Store.checkpoint`), on a
        connection of its own: the writes go on beside it."""
        with self._lock:
            if self._checkpoints is None:
                self._checkpoints = self._connect()
            self._checkpoints.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def wait_written(self) -> None:
        """Every write is done when its call returns."""

    def close(self) -> None:
        with self._lock:
            for conn in (self._checkpoints, self._conn):
                if conn is not None:
                    conn.close()
            self._checkpoints = None
