"""PostgreSQL's search index holds the pairs of words said one after the other

Revision ID: 0023_pairs
Revises: 0022_unfolded
Create Date: 2026-11-29 23:20:00

A phrase was looked for in every line holding its words, each read and
checked in Python: PostgreSQL's ``tsvector``s hold each word once, without
positions.  Now each entry also holds the keys of its pairs of words, a word
and the first characters of the next (``event_search.pairs``,
:func:`claudetrace.store.textindex.pair_keys`), under a GIN index of their own,
so a phrase's lines are those holding its words and its pairs' keys: a phrase
of common words that no line says reads no line.  The migration works out the
keys of every stored entry from its line (packed or not), a page of lines at a
time; the downgrade drops the column and its index.  SQLite's FTS5 answers a
phrase from its positions (0021_phrases): nothing changes there.
"""

from __future__ import annotations

from typing import Any

from alembic import op

from claudetrace.store.packing import Unpacker, stored_dictionary
from claudetrace.store.textindex import entry, pair_keys

revision = "0023_pairs"
down_revision = "0022_unfolded"
branch_labels = None
depends_on = None

#: The pending list's bound, kB, as the words' index has it (0015_pgfoot).
PENDING_KB = 256
#: Entries read a statement.
_PAGE = 2000


def _fill(connection: Any) -> None:
    """Work out the pairs' keys of every entry from its line, on the DB-API
    ``connection`` (psycopg), in the order of the entries' key."""
    lines = Unpacker(lambda number: stored_dictionary(connection.cursor(), number))
    cursor = connection.cursor()
    after = (-1, -1)
    while True:
        cursor.execute(
            "SELECT s.rec, s.seq, e.direction, e.data, e.codec FROM event_search s "
            "JOIN events e ON e.rec = s.rec AND e.seq = s.seq "
            "WHERE (s.rec, s.seq) > (%s, %s) ORDER BY s.rec, s.seq LIMIT %s",
            (*after, _PAGE))
        page = cursor.fetchall()
        if not page:
            return
        found = [e for rec, seq, direction, data, codec in page
                 if (e := entry(rec, seq, direction, lines(bytes(data), codec))) is not None]
        cursor.execute(
            "UPDATE event_search s SET pairs = CAST(u.p AS integer[]) "
            "FROM unnest(%s::int[], %s::int[], %s::text[]) AS u(r, n, p) "
            "WHERE s.rec = u.r AND s.seq = u.n",
            ([e[0] for e in found], [e[1] for e in found], [pair_keys(e[2]) for e in found]))
        after = (page[-1][0], page[-1][1])


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE event_search ADD COLUMN pairs integer[]")
    _fill(bind.connection)
    # Made once they are filled (built in one pass, not a row at a time).
    op.execute("CREATE INDEX ix_event_search_pairs ON event_search USING gin (pairs) "
               f"WITH (gin_pending_list_limit = {PENDING_KB})")
    # The planner's figures for the new column: without them it took a phrase's
    # keys for a handful of rows whatever they were.
    op.execute("ANALYZE event_search")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP INDEX ix_event_search_pairs")
    op.execute("ALTER TABLE event_search DROP COLUMN pairs")
