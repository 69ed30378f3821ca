"""PostgreSQL through psycopg alone: the writer's writes, and the ``COPY`` both use.

What :mod:`.sqlite` is for a SQLite file, this is for PostgreSQL: the indexer's
writer process (:mod:`.writer`) writes a database at the newest schema through
:class:`PostgresWrites`, without loading SQLAlchemy and the models.  Loading
them took the writer 0.2 s of CPU time before it could take its first batch, a
burst's first fifth of a second; the batches themselves are the database
server's work.  The same statements in the same transactions as
:class:`~claudetrace.store.Store`'s, the same values (a test holds every column
to what the store writes), the same errors.  Anything else (another driver, a
database to create or migrate, a URL psycopg does not take as it is) goes
through :func:`~claudetrace.store.open_store`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

from ..errors import StoreError
from .plain import JSON_COLUMNS, PlainWrites, require_head
from .rows import CODEC, COLUMNS, DATA_AT, Rows, each_row, row_count
from .sqlite import first_line

if TYPE_CHECKING:
    import psycopg

    from .packing import PackAtIngest

#: The PostgreSQL type of each column of :data:`~.rows.COLUMNS`: binary ``COPY``
#: sends each value as its column's type (a test holds them to the models).
COPY_TYPES: Final = {
    "events": ("integer", "integer", "varchar", "bigint", "bigint", "bytea", "boolean",
               "integer", "boolean", "varchar", "varchar", "varchar", "varchar"),
    "event_tools": ("integer", "integer", "varchar", "varchar", "varchar"),
    "usage_calls": ("varchar", "varchar", "bigint", "varchar", "bigint", "bigint", "bigint",
                    "bigint", "float8", "varchar", "bigint", "boolean"),
}

#: The URLs written plainly: SQLAlchemy's for psycopg, which is libpq's but for
#: the driver's name.
_PREFIX: Final = "postgresql+psycopg://"


def plain_url(url: str) -> str | None:
    """The libpq URI of a ``postgresql+psycopg://`` URL that libpq reads as
    SQLAlchemy does; None for any other.

    Where the two read a URL apart it goes to the store: several hosts (SQLAlchemy
    joins a repeated ``host=`` into a list to fail over along, libpq keeps the
    last), a ``+`` in the options (a space to SQLAlchemy, itself to libpq).
    """
    if not url.startswith(_PREFIX):
        return None
    rest = url[len(_PREFIX):]
    location, _, options = rest.partition("?")
    keys = [pair.split("=", 1)[0] for pair in options.split("&") if pair]
    if "," in location.rpartition("@")[2] or "+" in options or len(keys) != len(set(keys)):
        return None
    return "postgresql://" + rest


def copy_rows(connection: psycopg.Connection[Any], table: str, rows: Rows,
              pack: Callable[[bytes], tuple[bytes, int | None]] | None = None) -> None:
    """Insert ``rows`` into ``table`` as one ``COPY`` in PostgreSQL's binary format
    (the text format spells each byte of a line in hex, twice its size to write,
    send and read back), in the connection's transaction.  ``pack`` (``events``
    only): each line as it gives it, ``(data, codec)``, with its
    :data:`~.rows.CODEC` (a row at a time, while the server stores those sent)."""
    names, types = COLUMNS[table], COPY_TYPES[table]
    if pack is not None:
        names, types = (*names, CODEC), (*types, "smallint")
    with connection.cursor() as cursor, cursor.copy(
        f"COPY {table} ({', '.join(names)}) FROM STDIN (FORMAT BINARY)"
    ) as copy:
        copy.set_types(list(types))
        if pack is None:
            for row in each_row(rows):
                copy.write_row(row)
            return
        at = DATA_AT
        for row in each_row(rows):
            data, codec = pack(row[at])
            copy.write_row((*row[:at], data, *row[at + 1:], codec))


class PostgresWrites(PlainWrites):
    """The writing methods of :class:`~claudetrace.store.Store` on a PostgreSQL
    database at :data:`~.plain.SCHEMA_HEAD`, through psycopg alone (see the
    module's text).

    Each write is one transaction.  As the store's pool checks a connection
    before handing it out, one left unused for ``ping_after_s`` is checked before
    a write, and made again if the server dropped it meanwhile (a restart, an
    idle timeout); one lost during a write fails that write (a transient error)
    and is made again for the next.  Raises :class:`~.plain.NotPlain` when the
    schema is not at the head, ``psycopg.Error`` when the database cannot be
    reached.
    """

    _dialect = "postgresql"
    #: Whether and how each batch's lines are stored packed (the indexer's writer
    #: sets it); None: as recorded, packed after the recording ends.
    packing: PackAtIngest | None = None
    #: What packs the batch being written (:meth:`write_rows`).
    _pack: Callable[[bytes], tuple[bytes, int | None]] | None = None

    def __init__(self, conninfo: str, *, ping_after_s: float = 1.0) -> None:
        import psycopg

        self._conninfo = conninfo
        self._ping_after_s = ping_after_s
        self._conn = psycopg.connect(conninfo)
        self._used = time.monotonic()
        try:
            with self._conn.cursor() as cursor:
                try:
                    heads = [row[0] for row in
                             cursor.execute("SELECT version_num FROM alembic_version")]
                except psycopg.errors.UndefinedTable:  # a database not made yet
                    heads = []
            self._conn.rollback()
            require_head(heads)
        except BaseException:
            self._conn.close()
            raise

    @contextlib.contextmanager
    def _transaction(self, what: str | None = None) -> Iterator[psycopg.Cursor[Any]]:
        """One transaction; a database error inside it is raised as is, or as a
        :class:`StoreError` saying ``what`` failed (the store's words for it)."""
        import psycopg

        try:
            conn = self._connection()
            try:
                with conn.cursor() as cursor:
                    yield cursor
                conn.commit()
            except BaseException:
                with contextlib.suppress(psycopg.Error):
                    conn.rollback()
                raise
            finally:
                self._used = time.monotonic()
        except psycopg.Error as exc:
            if what is None:
                raise
            raise StoreError(f"{what} failed: {first_line(exc)}") from exc

    def _connection(self) -> psycopg.Connection[Any]:
        """The connection, checked when it was left unused a while, and made again
        when it was lost."""
        import psycopg

        conn = self._conn
        if not (conn.closed or conn.broken):
            if time.monotonic() - self._used < self._ping_after_s:
                return conn
            try:
                conn.execute("SELECT 1")
                conn.rollback()
                return conn
            except psycopg.Error:
                pass
        with contextlib.suppress(psycopg.Error):
            conn.close()
        self._conn = psycopg.connect(self._conninfo)
        return self._conn

    #: Takes the recording's row for the batch's transaction (``FOR KEY SHARE``: it
    #: cannot be deleted meanwhile), as the store does (migration 0005).
    _HOLD = "SELECT recordings.num FROM recordings WHERE recordings.id = %s FOR KEY SHARE"

    def write_rows(self, recording_id: str, rows: Rows, tools: Rows,
                   recording_updates: dict[str, Any] | None = None) -> None:
        """:meth:`PlainWrites.write_rows`, with the lines packed as they are copied
        when :attr:`packing` says so (the dictionary is asked for, or stored, in
        a transaction of its own before the batch's)."""
        if self.packing is None or not row_count(rows):
            super().write_rows(recording_id, rows, tools, recording_updates)
            return
        self._pack = self.packing.packer(self._transaction,
                                         (row[DATA_AT] for row in each_row(rows)))
        try:
            super().write_rows(recording_id, rows, tools, recording_updates)
        finally:
            self._pack = None

    def _insert(self, cursor: psycopg.Cursor[Any], table: str, rows: Rows) -> None:
        copy_rows(self._conn, table, rows, self._pack if table == "events" else None)

    def _index(self, cursor: psycopg.Cursor[Any], entries: list[tuple[int, int, str]]) -> None:
        from .textindex import insert_postgres  # the session model: only to write

        insert_postgres(cursor, entries)

    def _placeholder(self, name: str) -> str:
        """JSON (its text) is cast as SQLAlchemy casts it."""
        return "%s::JSON" if name in JSON_COLUMNS else "%s"

    def checkpoint(self) -> None:
        """Nothing to do: PostgreSQL keeps its own log (as :meth:`Store.checkpoint`)."""

    def wait_written(self) -> None:
        """Every write is done when its call returns."""

    def close(self) -> None:
        self._conn.close()

