"""no delete leaves orphans on either engine; an index of the words people read

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

from typing import Any

import sqlalchemy as sa
from alembic import op

from claudetrace.store.engine import event_pages, require_drop_column
from claudetrace.store.textindex import SEARCHED_TYPES, entry, insert_postgres, insert_sqlite

revision = "0006_team_scale"
down_revision = "0005_postgres_bulk_events"
branch_labels = None
depends_on = None

_CHILDREN = ("event_tools", "events")
_TYPES = ", ".join(f"'{kind}'" for kind in sorted(SEARCHED_TYPES))

_SQLITE = ("""
CREATE TRIGGER recordings_delete_children AFTER DELETE ON recordings
BEGIN
    DELETE FROM event_tools WHERE recording_id = OLD.id;
    DELETE FROM events WHERE recording_id = OLD.id;
END
""", """
CREATE VIRTUAL TABLE event_search USING fts5(words, detail=none)
""", f"""
CREATE TRIGGER events_delete_search AFTER DELETE ON events
WHEN OLD.type IN ({_TYPES})
BEGIN
    DELETE FROM event_search WHERE rowid = OLD.rowid;
END
""")

_PG_FUNCTIONS = """
CREATE TABLE event_search (
    recording_id varchar(26) NOT NULL,
    seq integer NOT NULL,
    terms tsvector NOT NULL,
    CONSTRAINT pk_event_search PRIMARY KEY (recording_id, seq)
);
CREATE INDEX ix_event_search_terms ON event_search USING gin (terms);
CREATE FUNCTION claudetrace_delete_children() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM event_search USING deleted_recordings
        WHERE event_search.recording_id = deleted_recordings.id;
    DELETE FROM event_tools USING deleted_recordings
        WHERE event_tools.recording_id = deleted_recordings.id;
    DELETE FROM events USING deleted_recordings
        WHERE events.recording_id = deleted_recordings.id;
    RETURN NULL;
END $$;
CREATE FUNCTION claudetrace_truncate_children() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE event_search, event_tools, events;
    RETURN NULL;
END $$;
CREATE TRIGGER recordings_delete_children AFTER DELETE ON recordings
    REFERENCING OLD TABLE AS deleted_recordings
    FOR EACH STATEMENT EXECUTE PROCEDURE claudetrace_delete_children();
CREATE TRIGGER recordings_truncate_children AFTER TRUNCATE ON recordings
    FOR EACH STATEMENT EXECUTE PROCEDURE claudetrace_truncate_children();
"""


def upgrade() -> None:
    with op.batch_alter_table("recordings", recreate="never") as batch:
        batch.add_column(sa.Column("figures", sa.JSON(), nullable=True))
    for table in _CHILDREN:
        op.execute(f"DELETE FROM {table} WHERE NOT EXISTS "
                   f"(SELECT 1 FROM recordings WHERE recordings.id = {table}.recording_id)")
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        op.execute(_PG_FUNCTIONS)
    else:
        for statement in _SQLITE:
            op.execute(statement)
    _index_stored_lines(insert_postgres if postgres else insert_sqlite)  # keyed by id then


def _index_stored_lines(insert: Any) -> None:
    """Index the message lines stored before this revision, a page at a time (in
    the order of the events' key, so that memory holds one page)."""
    bind = op.get_bind()
    cursor = bind.connection.cursor()
    for page in event_pages(bind, "recording_id, seq, direction, data",
                            f"type IN ({_TYPES}) AND type <> 'stream_event'"):
        entries = [e for e in (entry(*row) for row in page) if e is not None]
        if entries:
            insert(cursor, entries, key="recording_id")
    cursor.close()


def downgrade() -> None:
    require_drop_column(op.get_bind(), revision)  # before anything is done
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER recordings_truncate_children ON recordings")
        op.execute("DROP TRIGGER recordings_delete_children ON recordings")
        op.execute("DROP FUNCTION claudetrace_truncate_children()")
        op.execute("DROP FUNCTION claudetrace_delete_children()")
        op.execute("DROP TABLE event_search")
    else:
        op.execute("DROP TRIGGER events_delete_search")
        op.execute("DROP TABLE event_search")
        op.execute("DROP TRIGGER recordings_delete_children")
    with op.batch_alter_table("recordings", recreate="never") as batch:
        batch.drop_column("figures")
