"""PostgreSQL: events name their recording without a foreign key trigger

Revision ID: 0005_postgres_bulk_events
Revises: 0004_sparse_indexes
Create Date: 2026-11-25 01:20:00

PostgreSQL checks a foreign key with a trigger run for every inserted row: for a
burst of event rows that check was nearly half of the database's time (2.9 s
against 1.6 s for 200k rows, same run).  The store checks it once a batch
instead: a batch of events (all of one recording) is written in a transaction
that first takes the recording's row ``FOR KEY SHARE``, as the trigger would,
so the recording cannot go while its events are written, and a batch of a
recording that is not there is refused; a recording's events and tool
references are deleted with it by the one method that deletes recordings.
SQLite keeps its foreign keys: they cost it little, and dropping one there
means rebuilding the table.
"""

from __future__ import annotations

from alembic import op

revision = "0005_postgres_bulk_events"
down_revision = "0004_sparse_indexes"
branch_labels = None
depends_on = None

_KEYS = (("fk_events_recording_id_recordings", "events"),
         ("fk_event_tools_recording_id_recordings", "event_tools"))


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name, table in _KEYS:
        op.drop_constraint(name, table, type_="foreignkey")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name, table in _KEYS:
        op.create_foreign_key(name, table, "recordings", ["recording_id"], ["id"],
                              ondelete="CASCADE")
