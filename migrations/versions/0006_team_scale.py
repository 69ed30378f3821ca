"""no delete leaves orphans, on either engine, with or without foreign keys

Revision ID: 0006_team_scale
Revises: 0005_postgres_bulk_events
Create Date: 2026-11-28 05:45:00

A recording's events and tool references go with it whoever deletes it: the
store, ``claudetrace prune``, or a person in ``psql`` or the ``sqlite3`` shell.

- PostgreSQL (no foreign key since 0005: its per-row trigger was nearly half of
  a burst's cost): one trigger a ``DELETE`` statement on ``recordings``, which
  deletes the events and tool references of every recording the statement
  deleted (its transition table), and one a ``TRUNCATE``, which empties them.
  Writing events costs nothing more; the batch's check that its recording is
  there (``FOR KEY SHARE``) stays, so a delete waits for a batch being written
  and then takes its lines too.
- SQLite keeps its foreign keys, which act only on connections that turn them on
  (``PRAGMA foreign_keys``; the ``sqlite3`` shell does not): a trigger after each
  deleted recording deletes its rows whatever the connection's setting.

Rows a delete by hand left behind before this revision (events and tool
references whose recording is gone: nothing can show them) are deleted.
"""

from __future__ import annotations

from alembic import op

revision = "0006_team_scale"
down_revision = "0005_postgres_bulk_events"
branch_labels = None
depends_on = None

_CHILDREN = ("event_tools", "events")

_SQLITE_TRIGGER = """
CREATE TRIGGER recordings_delete_children AFTER DELETE ON recordings
BEGIN
    DELETE FROM event_tools WHERE recording_id = OLD.id;
    DELETE FROM events WHERE recording_id = OLD.id;
END
"""

_PG_FUNCTIONS = """
CREATE FUNCTION claudetrace_delete_children() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM event_tools USING deleted_recordings
        WHERE event_tools.recording_id = deleted_recordings.id;
    DELETE FROM events USING deleted_recordings
        WHERE events.recording_id = deleted_recordings.id;
    RETURN NULL;
END $$;
CREATE FUNCTION claudetrace_truncate_children() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE event_tools, events;
    RETURN NULL;
END $$;
CREATE TRIGGER recordings_delete_children AFTER DELETE ON recordings
    REFERENCING OLD TABLE AS deleted_recordings
    FOR EACH STATEMENT EXECUTE PROCEDURE claudetrace_delete_children();
CREATE TRIGGER recordings_truncate_children AFTER TRUNCATE ON recordings
    FOR EACH STATEMENT EXECUTE PROCEDURE claudetrace_truncate_children();
"""


def upgrade() -> None:
    for table in _CHILDREN:
        op.execute(f"DELETE FROM {table} WHERE NOT EXISTS "
                   f"(SELECT 1 FROM recordings WHERE recordings.id = {table}.recording_id)")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PG_FUNCTIONS)
    else:
        op.execute(_SQLITE_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER recordings_truncate_children ON recordings")
        op.execute("DROP TRIGGER recordings_delete_children ON recordings")
        op.execute("DROP FUNCTION claudetrace_truncate_children()")
        op.execute("DROP FUNCTION claudetrace_delete_children()")
    else:
        op.execute("DROP TRIGGER recordings_delete_children")
