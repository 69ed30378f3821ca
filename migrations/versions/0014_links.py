"""an index on the session a recording continues after a compaction

Revision ID: 0014_links
Revises: 0010_lz4
Create Date: 2026-11-28 15:30:00

A session resumed after a compaction is a recording of its own whose ``extra``
names the session it continues (``extra.continues.session_id``); the earlier
session's page says where it was continued by asking which recordings name it
(:mod:`claudetrace.store.links`).  On a team's store that question read every
row's ``extra``; this partial index on the value (only rows that have one)
answers it directly, on SQLite (3.9 or newer, ``json_extract``) and PostgreSQL.
"""

from __future__ import annotations

from alembic import op

from claudetrace.store.links import EXPRESSION, INDEX

revision = "0014_links"
down_revision = "0013_rollup"
branch_labels = None
depends_on = None


def upgrade() -> None:
    expression = EXPRESSION[op.get_bind().dialect.name]
    op.execute(f"CREATE INDEX IF NOT EXISTS {INDEX} ON recordings ({expression}) "
               f"WHERE {expression} IS NOT NULL")


def downgrade() -> None:
    op.execute(f"DROP INDEX IF EXISTS {INDEX}")
