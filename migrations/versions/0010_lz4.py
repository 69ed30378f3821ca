"""PostgreSQL compresses the lines and the search vectors with lz4

Revision ID: 0010_lz4
Revises: 0009_footprint
Create Date: 2026-11-28 12:30:00

PostgreSQL compresses a value of a row over about 2 KB (a tool's result, a file
read) with its own pglz unless a column says otherwise: on the ingest bench's
few huge lines (1-5 MB) that compression was most of a burst's time (64 MB of
lines: ``COPY`` 11-14 s with pglz, 1.7-3.7 s with lz4; 0.37 and 0.49 of the
raw bytes).  ``events.data`` and ``event_search.terms`` take lz4 where the
server has it (PostgreSQL 14 or newer, built with lz4); elsewhere, and on
SQLite, nothing changes.  Rows stored before keep their compression, and
both are read alike; the downgrade sets the columns back to the server's
default, for the rows stored after it.
"""

from __future__ import annotations

from alembic import op

revision = "0010_lz4"
down_revision = "0009_footprint"
branch_labels = None
depends_on = None

_COLUMNS = (("events", "data"), ("event_search", "terms"))


def _has_lz4() -> bool:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return False
    found = bind.exec_driver_sql(
        "SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression'"
        " AND 'lz4' = ANY(enumvals)").first()
    return found is not None


def upgrade() -> None:
    if _has_lz4():
        for table, column in _COLUMNS:
            op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION lz4")


def downgrade() -> None:
    if _has_lz4():
        for table, column in _COLUMNS:
            op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION default")
