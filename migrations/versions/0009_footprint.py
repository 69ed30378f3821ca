"""events keep no copy of the line's uuid and session_id

Revision ID: 0009_footprint
Revises: 0008_usage_rollups
Create Date: 2026-11-28 10:10:00

Every event row held the line's own ``uuid`` and ``session_id`` again (36 bytes
each on most lines of a CLI session), which no query reads: 72 of the 177 bytes
(SQLite) and 221 (PostgreSQL) an event kept beyond a 297-byte line.  The line
holds both, byte for byte.

The columns are dropped in place (SQLite 3.35 or newer: the rows are rewritten
with their rowids, which the search index refers to; an older SQLite keeps the
columns, which new rows leave empty).  Space the old rows held is reused by new
rows; ``VACUUM`` (SQLite) or ``VACUUM FULL`` (PostgreSQL, which drops a column
without rewriting its rows) gives it back to the disk.

The downgrade adds the columns back and fills them from the lines, a page at a
time.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from claudetrace.model.events import line_fields
from claudetrace.store.engine import SQLITE_DROPS_COLUMNS, event_pages
from claudetrace.store.values import text

revision = "0009_footprint"
down_revision = "0008_usage_rollups"
branch_labels = None
depends_on = None

_DROPPED = ("uuid", "session_id")


def _present() -> set[str]:
    return {c["name"] for c in sa.inspect(op.get_bind()).get_columns("events")}


def upgrade() -> None:
    bind = op.get_bind()
    version = tuple(bind.dialect.server_version_info or ())
    if bind.dialect.name == "sqlite" and version < SQLITE_DROPS_COLUMNS:
        return  # a copy of the table would renumber the rowids the search index holds
    present = _present()
    for column in _DROPPED:
        if column in present:
            op.execute(f"ALTER TABLE events DROP COLUMN {column}")


def downgrade() -> None:
    present = _present()
    for column in _DROPPED:
        if column not in present:
            op.execute(f"ALTER TABLE events ADD COLUMN {column} VARCHAR(64)")
    _fill_from_lines()


def _fill_from_lines() -> None:
    """Each line's uuid and session_id from its bytes, in the order of the
    events' key, a page at a time (memory holds one page)."""
    bind = op.get_bind()
    marker = "%s" if bind.dialect.name == "postgresql" else "?"
    cursor = bind.connection.cursor()
    for page in event_pages(bind, "recording_id, seq, data"):
        values = []
        for rid, seq, data in page:
            fields = line_fields(bytes(data))
            if fields.uuid is not None or fields.session_id is not None:
                values.append((text(fields.uuid, 64), text(fields.session_id, 64), rid, seq))
        if values:
            cursor.executemany(
                f"UPDATE events SET uuid = {marker}, session_id = {marker} "
                f"WHERE recording_id = {marker} AND seq = {marker}", values)
    cursor.close()
