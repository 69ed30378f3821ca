"""PostgreSQL's search entries hold SQLite's words: a number-like word is not cut

Revision ID: 0019_pgwords
Revises: 0018_words_later
Create Date: 2026-11-29 10:40:00

PostgreSQL's entries were made by ``to_tsvector('simple', …)``, whose parser
read a word such as ``49e9e56a893f`` as the number ``49e9`` and the word
``e56a893f``: a search for ``e56`` found the line on PostgreSQL and not on
SQLite (FTS5 keeps the word whole), and one for ``49e9e56`` found it on neither
but SQLite.  New entries are the words as cut in Python
(``claudetrace.store.textindex.postgres_words``), and a query is no longer
parsed either.  The parser cut only such words, and each left a lexeme that is
digits, ``e``, digits: the entries holding one are deleted (one pass over
``event_search``) and their recordings marked as having lines without words
(``claudetrace.store.packing.WORDS_LATER``), which the next search adds back
from the lines (``claudetrace.store.backlog.catch_up``).  The downgrade leaves
the entries: the earlier code finds a whole word in them by prefix still.
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

from claudetrace.store.packing import WORDS_LATER

revision = "0019_pgwords"
down_revision = "0018_words_later"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.get_bind().execute(text(
        "WITH cut AS (DELETE FROM event_search s WHERE EXISTS (SELECT 1 FROM "
        "unnest(tsvector_to_array(s.terms)) AS l(w) WHERE l.w ~ '^[0-9]+e[0-9]+$') "
        "RETURNING s.recording_id) "
        "UPDATE recordings SET extra = CAST(CAST(coalesce(NULLIF(CAST(extra AS TEXT), "
        "'null'), '{}') AS jsonb) || jsonb_build_object(CAST(:mark AS TEXT), true) AS json) "
        "WHERE id IN (SELECT recording_id FROM cut)"), {"mark": WORDS_LATER})


def downgrade() -> None:
    pass
