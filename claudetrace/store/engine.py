"""Opening the database: URL resolution, SQLite tuning and self-migration.

The database is ``--db``, else ``$CLAUDETRACE_DB``, else ``claudetrace.db`` in the
user's data directory.  Either a SQLAlchemy URL or a plain file path (SQLite).
SQLite runs in WAL mode with a busy timeout so several proxies can record into
one file at once.  The schema is migrated to the newest Alembic revision on first
use, under a lock so concurrent first users do not race.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError, SQLAlchemyError

from ..errors import (
    NO_ROOM_ERRNOS,
    BadDatabaseURL,
    ClaudeTraceError,
    StoreError,
)
from .plain import SCHEMA_HEAD as SCHEMA_HEAD
from .sqlite import ADAPTERS, bind_directly, file_lock, first_line, prepare_file, set_up
from .sqlite import BUSY_TIMEOUT_S as BUSY_TIMEOUT_S
from .sqlite import SETTLE_BUSY_TIMEOUT_S as SETTLE_BUSY_TIMEOUT_S
from .sqlite import bytes_unchanged as bytes_unchanged


def _sqlite_pragmas(busy_timeout_s: float, log_bytes: int | None) -> Any:
    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        set_up(dbapi_conn, busy_timeout_s, log_bytes)

    return on_connect


class _AsIs:
    """A parameter bound as the value it holds, past the adapter registry: its
    adapter (ours; no other program knows the type) gives the value back, and
    :mod:`sqlite3` binds what an adapter gives as it is."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


#: The types of the values the store binds (after SQLAlchemy's own processing).
_BOUND_TYPES = frozenset({type(None), bytes, str, int, float, bool})


def _pass_host_adapters_by() -> None:
    import operator
    import sqlite3

    if (_AsIs, sqlite3.PrepareProtocol) not in sqlite3.adapters:
        sqlite3.register_adapter(_AsIs, operator.attrgetter("value"))


def host_adapters() -> bool:
    """Whether the process has an adapter of its own for a type the store binds
    (``sqlite3.register_adapter(bytes, ...)`` in the program that uses the store, a
    test process running the pytest plugin…): the registry is one for the whole
    process, and such an adapter would change what the store writes (a line
    stored as hex text) and looks up."""
    import sqlite3

    for key, fn in sqlite3.adapters.items():
        if key[0] in _BOUND_TYPES and ADAPTERS.get(key) is not fn:
            return True
    return False


def _as_is(parameters: Any) -> Any:
    if isinstance(parameters, dict):
        return {name: _AsIs(value) for name, value in parameters.items()}
    return [_AsIs(value) for value in parameters]


def _execute_past_host_adapters(cursor: Any, statement: str, parameters: Any,
                                _context: Any) -> bool:
    """Run a statement with each parameter bound as it is when the process has
    adapters of its own for the store's types (:func:`host_adapters`); without
    them (the usual case) leave it to SQLAlchemy, at the cost of this look."""
    if not host_adapters():
        return False
    cursor.execute(statement, _as_is(parameters))
    return True


def _executemany_past_host_adapters(cursor: Any, statement: str, parameters: Any,
                                    _context: Any) -> bool:
    """:func:`_execute_past_host_adapters` for ``executemany``."""
    if not host_adapters():
        return False
    cursor.executemany(statement, [_as_is(row) for row in parameters])
    return True


#: The first SQLite that drops a column in place (``ALTER TABLE ... DROP COLUMN``).
SQLITE_DROPS_COLUMNS = (3, 35)


def require_drop_column(connection: Connection, revision: str) -> None:
    """Stop a downgrade of ``revision`` in one line (Alembic's ``CommandError``) on
    a SQLite too old to drop a column in place: the migrations drop columns in
    place, never by copying the table (which, with foreign keys on, deletes
    every recording's events)."""
    dialect = connection.dialect
    version = dialect.server_version_info or ()
    if dialect.name == "sqlite" and tuple(version) < SQLITE_DROPS_COLUMNS:
        from alembic.util import CommandError

        shown = ".".join(map(str, version))
        raise CommandError(
            f"downgrading {revision} drops columns in place, which needs SQLite 3.35 or"
            f" newer (this one is {shown})")


def event_pages(connection: Connection, columns: str, where: str = "",
                size: int = 2000) -> Iterator[list[Any]]:
    """The rows of ``events`` (``columns``, which begin with ``recording_id, seq``;
    ``where``: a further condition) in the order of their key, ``size`` at a
    time, for a migration that rewrites them: memory holds one page."""
    marker = "%s" if connection.dialect.name == "postgresql" else "?"
    after: tuple[str, int] = ("", -1)
    while True:
        page = connection.exec_driver_sql(
            f"SELECT {columns} FROM events WHERE {where + ' AND ' if where else ''}"
            f"(recording_id, seq) > ({marker}, {marker}) "
            f"ORDER BY recording_id, seq LIMIT {size}", (after[0], after[1])).all()
        if not page:
            return
        yield list(page)
        after = (page[-1][0], page[-1][1])


def hide_password(url: str) -> str:
    """``url`` with any password replaced by ``***``, even when it does not parse.

    The password runs from the user's ``:`` to the last ``@``: one with an
    unescaped ``@``, ``/`` or ``?`` (SQLAlchemy ends it at its first ``@`` and reads
    the rest as the host) is hidden whole; an ``@`` after the host hides more, never
    less.  A ``password=`` in the query is hidden too."""
    url = re.sub(r"(://[^/@:]*:).*@", r"\1***@", url, count=1, flags=re.DOTALL)
    head, mark, query = url.partition("?")
    query = re.sub(r"((?:^|&)password=)[^&]*", r"\1***", query, flags=re.IGNORECASE)
    return head + mark + query


def shown_url(url: URL) -> str:
    """A parsed URL as messages show it: its password hidden, whole
    (:func:`hide_password`; SQLAlchemy's own hiding stops at the password's first ``@``)."""
    return hide_password(url.render_as_string(hide_password=False))


def sqlite_file_bytes(path: Path) -> int:
    """A SQLite database's size on disk: its file and its write-ahead log."""
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL; None for other databases, memory and ``file:`` URIs."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return None
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:" \
            or database.startswith("file:"):
        return None
    return Path(database)


def require_database(url: str) -> None:
    """Raise :class:`StoreError` naming the file when ``url`` is a SQLite file that
    does not exist (what a read command says of a mistyped ``--db``)."""
    path = sqlite_path(url)
    if path is not None and not path.exists():
        raise StoreError(f"no database at {path} (check --db or $CLAUDETRACE_DB)")


def create_store_engine(
    url: str, *, create: bool = True, busy_timeout_s: float = BUSY_TIMEOUT_S,
    log_bytes: int | None = None,
) -> Engine:
    """An Engine for ``url``, with SQLite set up for concurrent recording.

    A SQLite file is made (``create``) readable by its owner only, and so is the
    default data directory; any other missing folder is an error, never made
    (a mistyped ``--db`` must not start a database nobody will look in).
    Without ``create``, a missing file is an error naming it.
    """
    try:
        parsed = make_url(url)
        parsed.get_backend_name()
        _ = parsed.port  # "host:abc" is only found out here
    except (ArgumentError, ValueError) as exc:
        raise BadDatabaseURL(
            f"not a database URL or path: {hide_password(url)!r}", url=hide_password(url)
        ) from exc
    if "@" in (parsed.host or ""):
        # SQLAlchemy ended the password at its first "@" and took the rest for the
        # host, which a driver's error would then echo: the password's tail.
        raise BadDatabaseURL(
            f"the password in {hide_password(url)!r} holds an '@': write it as %40",
            url=hide_password(url))
    kwargs: dict[str, Any] = {}
    if parsed.get_backend_name() == "sqlite":
        path = sqlite_path(url)
        if path is not None:
            prepare_file(path, create)
        kwargs["connect_args"] = {"timeout": busy_timeout_s, "check_same_thread": False}
        if path is not None and _on_read_only_filesystem(path):
            # Nobody can write it, so it cannot change: read as immutable, the one
            # way SQLite opens a WAL file whose folder takes no shared-memory file.
            kwargs["creator"] = functools.partial(
                sqlite3.connect, f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1",
                uri=True, **kwargs["connect_args"])
    else:
        kwargs["pool_pre_ping"] = True
    try:
        engine = create_engine(parsed, **kwargs)
    except (NoSuchModuleError, ArgumentError, ImportError, ValueError) as exc:
        shown = hide_password(url)
        reason = str(exc).replace(url, shown).splitlines()[0] if str(exc) else type(exc).__name__
        raise BadDatabaseURL(f"unsupported database URL {shown!r}: {reason}", url=shown) from exc
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas(busy_timeout_s, log_bytes))
        if engine.dialect.driver == "pysqlite":
            if sys.version_info < (3, 12):
                bind_directly()
            _pass_host_adapters_by()
            event.listen(engine, "do_execute", _execute_past_host_adapters)
            event.listen(engine, "do_executemany", _executemany_past_host_adapters)
    return engine


def _on_read_only_filesystem(path: Path) -> bool:
    """Whether ``path`` is a file on a file system mounted read-only (a backup, a
    snapshot, a container's ``:ro`` volume) with nothing in a write-ahead log
    beside it (immutable, SQLite would not read the log)."""
    try:
        if not (path.is_file() and os.statvfs(path).f_flag & os.ST_RDONLY):
            return False
    except OSError:
        return False
    log = Path(f"{path}-wal")
    return not log.exists() or log.stat().st_size == 0


def migrations_dir() -> Path:
    """Where the Alembic scripts are: inside the wheel, or the source tree's top level."""
    packaged = Path(__file__).resolve().parent.parent / "_migrations"
    if (packaged / "env.py").exists():
        return packaged
    source = Path(__file__).resolve().parents[2] / "migrations"
    if (source / "env.py").exists():
        return source
    raise StoreError("the Alembic migrations are missing from this installation")


def alembic_config(connection: Connection | None = None) -> Any:
    """An Alembic Config pointing at our migrations (and a live connection)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise StoreError("the Alembic migrations have no head revision")
    return head


def known_revisions() -> set[str]:
    """Every revision of this installation's migrations."""
    from alembic.script import ScriptDirectory

    return {script.revision for script in
            ScriptDirectory.from_config(alembic_config()).walk_revisions()}


def current_revision(connection: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


@contextlib.contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    """Serialise migrations: a lock file beside SQLite, an advisory lock on PostgreSQL."""
    if engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:"):
        with file_lock(Path(engine.url.database)):
            yield
    elif engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT pg_advisory_lock(727271)")
            try:
                yield
            finally:
                conn.exec_driver_sql("SELECT pg_advisory_unlock(727271)")
                conn.commit()
    else:
        yield


def upgrade(engine: Engine, *, only_if_needed: bool = True, script: bool = True) -> str | None:
    """Bring the schema to the newest revision; returns the revision it was at.

    A SQLite database that holds nothing yet is made from the schema script
    (:mod:`.schema`: the same tables, without loading Alembic or running each
    migration) unless ``script`` is False; any other goes through Alembic.

    On a brand-new SQLite file, concurrent first users can get "database is
    locked" at once (SQLite refuses to wait where waiting could deadlock, e.g.
    while one of them switches the file to WAL), so a locked database is retried
    for up to :data:`BUSY_TIMEOUT_S`.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    delay = 0.02
    while True:
        try:
            return _upgrade_once(engine, only_if_needed=only_if_needed, script=script)
        except OperationalError as exc:
            reason = error_reason(exc)
            if "locked" not in reason or time.monotonic() + delay > deadline:
                raise StoreError(f"cannot open database {shown_url(engine.url)}: {reason}") from exc
        except SQLAlchemyError as exc:
            reason = error_reason(exc)
            raise StoreError(f"cannot migrate database {shown_url(engine.url)}: {reason}") from exc
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def at_head(connection: Connection) -> bool:
    """True when the schema is at :data:`SCHEMA_HEAD` (read without Alembic; a
    database without Alembic's table, or any error reading it, is not)."""
    try:
        versions = connection.exec_driver_sql("SELECT version_num FROM alembic_version").all()
    except SQLAlchemyError:
        connection.rollback()
        return False
    return [row[0] for row in versions] == [SCHEMA_HEAD]


def _upgrade_once(engine: Engine, *, only_if_needed: bool, script: bool) -> str | None:
    if only_if_needed:
        with engine.connect() as conn:
            if at_head(conn):
                return SCHEMA_HEAD
    if script and engine.dialect.name == "sqlite" and _made_by_script(engine):
        return None
    from alembic import command

    head = head_revision()
    if only_if_needed:
        with engine.connect() as conn:
            if current_revision(conn) == head:
                return head
    with _migration_lock(engine), engine.begin() as conn:
        before = current_revision(conn)
        if before != head:
            if conn.dialect.name == "sqlite":
                # pysqlite opens a transaction only before it writes a row, so each
                # CREATE TABLE of the first migration would be kept on its own and a
                # full disk at its first row would leave the tables without their
                # history: the whole upgrade is one transaction, begun here.
                conn.exec_driver_sql("BEGIN IMMEDIATE")
                if before is None:
                    _drop_half_made(conn)
            if before is None and inspect(conn).has_table("recordings"):
                raise StoreError(
                    "the database has claudetrace tables but no migration history; "
                    "it was not created by claudetrace"
                )
            if before is not None and before not in known_revisions():
                raise StoreError(
                    f"the database's schema ({before}) is newer than this claudetrace knows "
                    f"(up to {head}): it was opened by a newer claudetrace; upgrade this one"
                )
            command.upgrade(alembic_config(conn), "head")
        return before


def _made_by_script(engine: Engine) -> bool:
    """Make a SQLite database that holds nothing yet from the schema script
    (:mod:`.schema`), in one transaction under the migration lock; False, with
    nothing done, when it holds anything (made meanwhile, or to migrate)."""
    from .schema import ANYTHING, run_script

    with engine.connect() as conn:
        if conn.exec_driver_sql(ANYTHING).first() is not None:
            return False
    with _migration_lock(engine), engine.begin() as conn:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        if conn.exec_driver_sql(ANYTHING).first() is not None:
            return False
        run_script(conn.exec_driver_sql)
    return True


def _drop_half_made(conn: Connection) -> None:
    """Drop what a first migration left on SQLite when it failed part way
    (an earlier claudetrace kept each table it created): our ``recordings`` and an
    empty ``alembic_version`` among tables that hold no row at all, so nothing
    recorded is lost.  A database holding any row is left as it is."""
    found = conn.exec_driver_sql(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table'"
        " AND name NOT LIKE 'sqlite~_%' ESCAPE '~' ORDER BY rowid").all()
    virtual = [name for name, sql in found
               if (sql or "").upper().startswith("CREATE VIRTUAL TABLE")]
    # A full-text index's own tables go with it (and hold rows while it is empty).
    names = [name for name, _ in found
             if not any(name.startswith(f"{index}_") for index in virtual)]
    if "recordings" not in names or "alembic_version" not in names:
        return
    quoted = [conn.dialect.identifier_preparer.quote(name) for name in names]
    if any(conn.exec_driver_sql(f"SELECT 1 FROM {name} LIMIT 1").first() is not None
           for name in quoted):
        return
    for name in reversed(quoted):  # a table before those it refers to
        conn.exec_driver_sql(f"DROP TABLE {name}")


def error_reason(exc: SQLAlchemyError) -> str:
    """The first line of the driver's message (or the error's type when it has none)."""
    return first_line(getattr(exc, "orig", None) or exc)


def is_transient_error(exc: BaseException) -> bool:
    """True for a database failure that says nothing about the data: a lock, a full
    disk, a lost connection (an ``OperationalError`` and its kin anywhere in the
    causes, sqlite3's and psycopg's own as :mod:`.sqlite` and :mod:`.postgres` raise
    them, an ``OSError``, or a
    :class:`StoreError` that says so)."""
    import sqlite3

    from sqlalchemy.exc import DisconnectionError, InterfaceError
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    kinds: tuple[type[BaseException], ...] = (
        OperationalError, InterfaceError, DisconnectionError, PoolTimeout,
        sqlite3.OperationalError, sqlite3.InterfaceError, OSError)
    psycopg = sys.modules.get("psycopg")  # its own, as :mod:`.postgres` raises them
    if psycopg is not None:
        kinds += (psycopg.OperationalError, psycopg.InterfaceError)
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, StoreError) and seen.transient:
            return True
        if isinstance(seen, kinds):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


#: What a database says when a write found no room: SQLite's ``SQLITE_FULL`` and
#: ``SQLITE_IOERR`` (a file size limit, ``ulimit -f``, fails its write with EFBIG,
#: which SQLite reports as an I/O error), the system's own words, PostgreSQL's.
_NO_ROOM = ("disk i/o error", "database or disk is full", "no space left on device",
            "file too large", "disk quota exceeded", "could not extend file")


def is_out_of_room(exc: BaseException) -> bool:
    """True when ``exc`` (or anything in its causes) says a write found no room:
    the disk full, a quota, a file size limit.  Told by the words too, as an
    error from a writer process arrives as its line only."""
    for seen in _causes(exc):
        if isinstance(seen, OSError) and seen.errno in NO_ROOM_ERRNOS:
            return True
        if isinstance(seen, sqlite3.Error) and \
                (getattr(seen, "sqlite_errorcode", 0) & 0xFF) in (sqlite3.SQLITE_FULL,
                                                                 sqlite3.SQLITE_IOERR):
            return True
        if any(words in _said(seen) for words in _NO_ROOM):
            return True
    return False


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what caused it, in turn."""
    seen: BaseException | None = exc
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


def _said(exc: BaseException) -> str:
    """An error's first line, in lower case: a SQLAlchemy error goes on with the
    statement and its parameters (recorded text, which may say anything)."""
    return first_line(getattr(exc, "orig", None) or exc).lower()


def out_of_room_line(url: str, opening: bool) -> str:
    """The one line said when the database at ``url`` found no room to write."""
    path = sqlite_path(url)
    where = str(path) if path is not None else hide_password(url)
    why = ("likely because the disk is full or a file size limit (ulimit -f) is reached"
           if url.startswith("sqlite") else "likely because the database server's disk is full")
    side = (f" (SQLite writes its side files {path.name}-wal and {path.name}-shm even to open it)"
            if opening and path is not None else "")
    return (f"cannot write database {where}, {why}{side}; free space or raise the limit "
            "and run it again (what is stored is kept)")


def is_read_only(exc: BaseException) -> bool:
    """True when ``exc`` (or anything in its causes) says the database cannot be
    written at all: a read-only SQLite file or folder, a read-only PostgreSQL
    transaction (a standby, ``default_transaction_read_only``)."""
    return any("readonly database" in _said(seen) or "read-only transaction" in _said(seen)
               for seen in _causes(exc))


def read_only_line(url: str, exc: BaseException) -> str:
    """The one line said when the database at ``url`` is read-only."""
    path = sqlite_path(url)
    where = str(path) if path is not None else hide_password(url)
    reason = first_line(getattr(exc, "orig", None) or exc)
    return (f"cannot write database {where}: {reason} (read commands still "
            "work; nothing was changed)")


def database_error_line(exc: BaseException) -> str | None:
    """``Type: reason`` for a database error (never its statement or parameters:
    they hold recorded bytes); None when ``exc`` is not one."""
    if isinstance(exc, SQLAlchemyError):
        return f"{type(getattr(exc, 'orig', None) or exc).__name__}: {error_reason(exc)}"
    return None


def error_line(exc: BaseException) -> str:
    """An error as one line: a database's own reason, never the statement or its
    parameters (they hold recorded bytes)."""
    if isinstance(exc, ClaudeTraceError):
        text = str(exc)
    else:
        text = database_error_line(exc) or f"{type(exc).__name__}: {exc}"
    return (text.splitlines() or [type(exc).__name__])[0][:500]
