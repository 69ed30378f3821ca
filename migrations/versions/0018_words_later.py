"""an index of the recordings whose lines may lack their search words

Revision ID: 0018_words_later
Revises: 0017_usage1h
Create Date: 2026-11-29 10:00:00

Before it searches, ``claudetrace search`` (and the session browser's search
box) asks which recordings a burst left words out of (``extra`` holds
``search_words_later``: :mod:`claudetrace.store.backlog`).  On a team's store
that question read every recording's ``extra`` (75-127 ms at 5,000 recordings
on PostgreSQL, in proportion to them); this partial index holds only the
recordings so marked, and answers it directly on SQLite and PostgreSQL.
"""

from __future__ import annotations

from alembic import op

from claudetrace.store.backlog import MARKED_INDEX, marked_condition

revision = "0018_words_later"
down_revision = "0017_usage1h"
branch_labels = None
depends_on = None


def upgrade() -> None:
    condition = marked_condition(op.get_bind().dialect.name)
    op.execute(f"CREATE INDEX IF NOT EXISTS {MARKED_INDEX} ON recordings (id) WHERE {condition}")


def downgrade() -> None:
    op.execute(f"DROP INDEX IF EXISTS {MARKED_INDEX}")
