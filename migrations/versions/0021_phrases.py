"""SQLite's search index holds the order of a line's words: a phrase is found from it

Revision ID: 0021_phrases
Revises: 0020_recnum
Create Date: 2026-11-29 19:40:00

A phrase was looked for in every line holding its words, each read and
checked in Python: the index held no positions (FTS5 ``detail=none``) and an
entry of more than 8,192 characters held each word once.  Now SQLite's FTS5
table is made again ``detail=full`` (positions: a phrase query) and every entry
holds every word of its line in order (``claudetrace.store.textindex.distinct``):
an entry is copied where its line is at most 8,192 bytes (its entry held every
word then: text is never longer than its line) and worked out from its line
otherwise, a page of lines at a time.  The downgrade makes the table
``detail=none`` again with the same entries, which the earlier code reads.

PostgreSQL's entries are left as they are: positions in its ``tsvector``s, or
pairs of words as lexemes, cost its GIN index's writes 2-6 times on tool output
(docs/benchmarks.md), and a phrase's lines are still read there.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from alembic import op

from claudetrace.store.packing import Unpacker, stored_dictionary
from claudetrace.store.textindex import SEARCHED_TYPES, entry, insert_sqlite

revision = "0021_phrases"
down_revision = "0020_recnum"
branch_labels = None
depends_on = None

_TYPES = ", ".join(f"'{kind}'" for kind in sorted(SEARCHED_TYPES))
#: The message lines an entry is made for (``ix_events_recording_type``'s condition too).
_MESSAGES = f"type IN ({_TYPES}) AND type <> 'stream_event'"
#: The longest line whose 0006-0020 entry held every word (``ONCE_FROM`` then).
_WHOLE_UP_TO = 8192
#: Lines read a statement.
_PAGE = 2000


def _pages(cursor: Any, where: str) -> Iterator[list[Any]]:
    """``(rec, seq, direction, data, codec)`` of the message lines ``where`` keeps,
    in the order of their key, :data:`_PAGE` at a time."""
    after = (-1, -1)
    while True:
        page = cursor.execute(
            f"SELECT rec, seq, direction, data, codec FROM events WHERE {_MESSAGES} "
            f"AND {where} AND (rec, seq) > (?, ?) ORDER BY rec, seq LIMIT {_PAGE}",
            after).fetchall()
        if not page:
            return
        yield page
        after = (page[-1][0], page[-1][1])


def _index_again(connection: Any, where: str) -> None:
    """Work out the entries of the message lines ``where`` keeps from their lines
    (packed or not) and add them, on the DB-API ``connection``."""
    cursor = connection.cursor()
    lines = Unpacker(lambda number: stored_dictionary(connection.cursor(), number, "?"))
    for page in _pages(cursor, where):
        found = [e for rec, seq, direction, data, codec in page
                 if (e := entry(rec, seq, direction, lines(bytes(data), codec))) is not None]
        if found:
            insert_sqlite(cursor, found)


#: SQLite: an event deleted takes its entry with it (0006, 0020).
_SQLITE_TRIGGER = f"""
CREATE TRIGGER events_delete_search AFTER DELETE ON events
WHEN OLD.type IN ({_TYPES})
BEGIN
    DELETE FROM event_search WHERE rowid = OLD.rowid;
END"""


def _fts(detail: str, copied: str) -> None:
    """SQLite's ``event_search`` made again with FTS5's ``detail``, holding the
    entries ``copied`` keeps of the old one (``s``; ``e``: its event)."""
    # Renamed, the table would take the trigger's name for it along.
    op.execute("DROP TRIGGER events_delete_search")
    op.execute(f"CREATE VIRTUAL TABLE event_search_new USING fts5(words, detail={detail})")
    op.execute("INSERT INTO event_search_new (rowid, words) SELECT s.rowid, s.words "
               f"FROM event_search s JOIN events e ON e.rowid = s.rowid WHERE {copied}")
    op.execute("DROP TABLE event_search")
    op.execute("ALTER TABLE event_search_new RENAME TO event_search")
    op.execute(_SQLITE_TRIGGER)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    _fts("full", f"e.size <= {_WHOLE_UP_TO}")
    _index_again(bind.connection, f"size > {_WHOLE_UP_TO}")


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    _fts("none", "true")
