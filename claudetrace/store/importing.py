"""A folder import's new sessions, stored usage first through :mod:`sqlite3` alone.

``import`` of a Claude Code tree stores each new session's lines as they are,
its recording's row, its ``usage_calls`` rows and its mark in ``unfolded``
(:mod:`claudetrace.formats.unfolded`).  Through :class:`~claudetrace.store.Store`
that was SQLAlchemy's statements a session (and its import, a fifth of the
command's CPU time on ``bench import``'s tree, with the models).  On a plain
SQLite file at :data:`~.plain.SCHEMA_HEAD` :class:`ImportBatch` writes the same
rows in the same order (a test holds every table, rowids included, to what the
store writes) in the store's transactions: a batch of recordings in one
``BEGIN IMMEDIATE`` transaction, each in a savepoint of its own.

Only a session not stored yet is written here: one the store holds already
(found in the batch's transaction, by id or by its CLI session id) is left to
the store's update, which compares its lines (:meth:`ImportBatch.put_new`
says so).  Another database, or a file not at the head, is the store's
(:class:`~.plain.NotPlain`).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final

from ..errors import StoreError
from ..recording import RecordingInfo
from .plain import recording_row, updated_columns
from .rows import USAGE_CALLS, insert_batches, rows_per_insert
from .sqlite import SqliteWrites, first_line

#: SQLite's page cache (KiB) on a connection that imports: a session's usage
#: rows go into an index of random ids (message ids), whose pages SQLite's
#: default 2 MB cache read again from the system's cache; the tool and usage
#: rows of ``bench import``'s tree took a quarter less CPU time with it than
#: with the default 2 MB.
IMPORT_CACHE_KIB: Final = 32768

#: The direction an unfolded recording's lines are stored with (the transcript's
#: lines, none of them a line of the CLI's streams yet).
RAW_DIRECTION: Final = "in"


def raw_rows(number: int, lines: Iterable[tuple[bytes, bool]], first: int = 0
             ) -> Iterator[tuple[Any, ...]]:
    """``events`` rows (:data:`~.rows.COLUMNS` order) of a recording's lines as
    they are: no time of their own, no fields (the fold gives them)."""
    for seq, (data, eol) in enumerate(lines, first):
        yield (number, seq, RAW_DIRECTION, 0, 0, data, 1 if eol else 0, len(data), 0,
               None, None, None, None)


#: Lines a statement inserts at a time, as :meth:`~claudetrace.store.Store.put_recording`
#: (the events' rowids follow the same order).
_LINES_AT_ONCE: Final = 2000
#: A recording stored already, by id or by CLI session id: the store's to update.
_STORED = ("SELECT 1 FROM recordings WHERE id = ? OR (source = ? AND cli_session_id = ?)"
           " LIMIT 1")


class ImportBatch(SqliteWrites):
    """New recordings stored usage first, several in one transaction (as
    :class:`~claudetrace.store.api.Batch`), on the SQLite file ``path`` at the
    newest schema.  Nothing is seen by other connections, nor left by a process
    killed, before :meth:`commit`; :meth:`close` takes back what was not
    committed.  Raises :class:`~.plain.NotPlain` when the file is not at the
    head, ``sqlite3.Error`` when it cannot be opened."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._conn.execute(f"PRAGMA cache_size = -{IMPORT_CACHE_KIB}")
        self._began: float | None = None
        #: Recordings put since the last commit.
        self.count = 0

    @property
    def age(self) -> float:
        """Seconds since the open transaction began (0: none open)."""
        return 0.0 if self._began is None else time.monotonic() - self._began

    def put_new(self, info: RecordingInfo, lines: Iterable[tuple[bytes, bool]], *,
                layout: dict[str, Any], summary: dict[str, Any]) -> bool:
        """Store the recording ``info`` usage first, as the store's
        ``put_unfolded`` stores one not stored yet: its row (``info`` and
        ``summary``, its ``usage_calls`` rows under :data:`~.rows.USAGE_CALLS`),
        its ``lines`` (``(bytes, eol)``) and its mark; False, with nothing
        written, when the store holds it already (the store's to update).  A
        database error takes back this recording alone and raises
        :class:`StoreError`."""
        row = recording_row(info)
        columns = {name: value for name, value in summary.items() if name != USAGE_CALLS}
        row.update(updated_columns(columns))
        cursor = self._begin()
        try:
            cursor.execute("SAVEPOINT put_new")
            try:
                stored = cursor.execute(_STORED, (info.id, row["source"],
                                                  row["cli_session_id"])).fetchone()
                if stored is None:
                    self._put(cursor, info.id, row, lines, layout,
                              list(summary.get(USAGE_CALLS, ())))
                cursor.execute("RELEASE put_new")
            except BaseException:
                cursor.execute("ROLLBACK TO put_new")
                cursor.execute("RELEASE put_new")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"import failed: {first_line(exc)}") from exc
        finally:
            cursor.close()
        if stored is not None:
            return False
        self.count += 1
        return True

    def _put(self, cursor: sqlite3.Cursor, recording_id: str, row: dict[str, Any],
             lines: Iterable[tuple[bytes, bool]], layout: dict[str, Any],
             calls: list[Any]) -> None:
        cursor.execute(f"INSERT INTO recordings ({', '.join(row)}) "
                       f"VALUES ({', '.join('?' * len(row))})", list(row.values()))
        number = cursor.execute(self._HOLD, (recording_id,)).fetchone()[0]
        batch: list[tuple[bytes, bool]] = []
        written = 0
        for line in lines:
            batch.append(line)
            if len(batch) >= _LINES_AT_ONCE:
                written += self._lines(cursor, number, batch, written)
        self._lines(cursor, number, batch, written)
        self._replace_usage(cursor, recording_id, calls, new=True)
        cursor.execute("INSERT INTO unfolded (rec, layout, stored_ns) VALUES (?, ?, ?)",
                       (number, json.dumps(layout), time.time_ns()))

    def _lines(self, cursor: sqlite3.Cursor, number: int, batch: list[tuple[bytes, bool]],
               first: int) -> int:
        """Insert ``batch`` (then emptied), numbered from ``first``; how many."""
        count = len(batch)
        if count:
            rows = list(raw_rows(number, batch, first))
            per_insert = rows_per_insert("events", self._conn, self._rows_per_insert)
            for statement, parameters in insert_batches("events", rows, per_insert=per_insert):
                cursor.executemany(statement, parameters)
            batch.clear()
        return count

    def _begin(self) -> sqlite3.Cursor:
        cursor = self._conn.cursor()
        if self._began is None:
            try:
                cursor.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                cursor.close()
                raise StoreError(f"import failed: {first_line(exc)}") from exc
            self._began = time.monotonic()
        return cursor

    def commit(self) -> None:
        """Commit what was put (nothing to do when nothing was)."""
        began, self._began, self.count = self._began, None, 0
        if began is None:
            return
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"import failed: {first_line(exc)}") from exc

    def close(self) -> None:
        """Take back what was put and not committed, and close the file."""
        began, self._began, self.count = self._began, None, 0
        if began is not None and self._conn.in_transaction:
            self._conn.rollback()
        super().close()


__all__ = ["IMPORT_CACHE_KIB", "RAW_DIRECTION", "ImportBatch", "raw_rows"]
