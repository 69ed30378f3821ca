"""PostgreSQL's search entries without a Latin letter's accents, as new ones are

Revision ID: 0016_accents
Revises: 0015_pgfoot
Create Date: 2026-11-29 07:00:00

The search index's words now have a Latin letter's accents taken off before
either engine indexes them (``claudetrace.store.textindex.fold``: ``café`` is
``cafe``), and a query's words alike.  SQLite's FTS5 tokenizer took them off
already, so its entries stay as they are; PostgreSQL's ``to_tsvector('simple',
…)`` kept them, and a search for ``cafe`` (or ``café``, now ``cafe``) missed a
line saying ``café``.  This rewrites the PostgreSQL entries that hold such a
letter, with ``translate`` over the same table: one pass over ``event_search``
(entries that are ASCII are read, not written).  The downgrade leaves them: an
entry without accents is found by every query the earlier code makes but one
with accents.
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

from claudetrace.store.textindex import LATIN_BASES

revision = "0016_accents"
down_revision = "0015_pgfoot"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    accented = "".join(chr(cp) for cp in LATIN_BASES)
    bases = "".join(LATIN_BASES.values())
    # The entries' lexemes are in lower case; translate maps upper case too.
    op.get_bind().execute(text(
        "UPDATE event_search SET terms = strip(to_tsvector('simple', translate("
        "array_to_string(tsvector_to_array(terms), ' '), :accented, :bases))) "
        "WHERE terms::text ~ :pattern"),
        {"accented": accented, "bases": bases, "pattern": f"[{accented}]"})


def downgrade() -> None:
    pass
