"""PostgreSQL's search index keeps a pending list of 256 kB, not 4 MB

Revision ID: 0015_pgfoot
Revises: 0014_links
Create Date: 2026-11-29 03:00:00

The GIN index on the search vectors (``ix_event_search_terms``, 0006) takes new
entries into a pending list, merged into the index once it passes
``gin_pending_list_limit`` (the server's default: 4 MB); the pages it grew to
stay with the index.  On a store's first 60,000 events (the ingest bench's
sample burst) that list was 30 bytes an event, a tenth of a line's bytes, and
every search reads the whole list.  256 kB keeps the list small (it is merged
16 times as often, in smaller steps).  SQLite has no such index: nothing changes
there.  The downgrade gives the index back the server's default.
"""

from __future__ import annotations

from alembic import op

revision = "0015_pgfoot"
down_revision = "0014_links"
branch_labels = None
depends_on = None

#: The pending list's bound, kB (the least PostgreSQL takes is 64).
PENDING_KB = 256


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER INDEX ix_event_search_terms "
                   f"SET (gin_pending_list_limit = {PENDING_KB})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER INDEX ix_event_search_terms RESET (gin_pending_list_limit)")
