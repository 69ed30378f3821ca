"""usage_calls: each model call's tokens and cost at its time, for claudetrace usage

Revision ID: 0007_usage_calls
Revises: 0007_cost_source
Create Date: 2026-11-28 06:30:00

Reports by day, week, month, session and 5-hour block add up these rows (one per
API message id, written with the recording's summary) instead of reading events.
Every stored recording is folded again by the session model to fill them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_usage_calls"
down_revision = "0007_cost_source"
branch_labels = None
depends_on = None


def _pg_children(tables: tuple[str, ...]) -> str:
    """Migration 0006's PostgreSQL trigger functions, deleting and truncating ``tables``."""
    deletes = "".join(f"""
    DELETE FROM {table} USING deleted_recordings
        WHERE {table}.recording_id = deleted_recordings.id;""" for table in tables)
    return f"""
CREATE OR REPLACE FUNCTION claudetrace_delete_children() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN{deletes}
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION claudetrace_truncate_children() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE {", ".join(tables)};
    RETURN NULL;
END $$;
"""


#: The children a deleted recording took with it before this table, now among them
#: (migration 0006's triggers, redefined): on PostgreSQL the table has no foreign
#: key, as ``events`` has none since 0005, so that ``TRUNCATE recordings`` and the
#: statement trigger empty it as they empty the others.
_CHILDREN_BEFORE = ("event_search", "event_tools", "events")

#: SQLite's trigger deletes the rows whatever ``PRAGMA foreign_keys`` says.
_SQLITE_TRIGGER = """
CREATE TRIGGER recordings_delete_children AFTER DELETE ON recordings
BEGIN
    DELETE FROM event_tools WHERE recording_id = OLD.id;
    DELETE FROM events WHERE recording_id = OLD.id;{usage}
END
"""


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    foreign_key = [] if postgres else [
        sa.ForeignKeyConstraint(["recording_id"], ["recordings.id"],
                                name="fk_usage_calls_recording_id_recordings",
                                ondelete="CASCADE")]
    op.create_table(
        "usage_calls",
        sa.Column("recording_id", sa.String(length=26), nullable=False),
        sa.Column("call_id", sa.String(length=128), nullable=False),
        sa.Column("t_ns", sa.BigInteger(), nullable=False),
        sa.Column("model", sa.String(length=100), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_creation_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("cost_source", sa.String(length=16), nullable=False),
        sa.Column("duplicate", sa.Boolean(), nullable=False),
        *foreign_key,
        sa.PrimaryKeyConstraint("recording_id", "call_id", name="pk_usage_calls"),
    )
    op.create_index("ix_usage_calls_t_ns", "usage_calls", ["t_ns"])
    op.create_index("ix_usage_calls_call_id", "usage_calls", ["call_id"])
    if postgres:
        op.execute(_pg_children((*_CHILDREN_BEFORE, "usage_calls")))
    else:
        op.execute("DROP TRIGGER recordings_delete_children")
        op.execute(_SQLITE_TRIGGER.format(
            usage="\n    DELETE FROM usage_calls WHERE recording_id = OLD.id;"))
    _fill(op.get_bind())


def _fill(conn: sa.Connection) -> None:
    from claudetrace.model import Session
    from claudetrace.model.events import Event
    from claudetrace.model.summary import usage_rows
    from claudetrace.progress import track
    from claudetrace.store.rows import COLUMNS, api_message_id, usage_call_rows

    recordings = sa.table("recordings", sa.column("id"), sa.column("model"),
                          sa.column("started_ns"))
    events = sa.table("events", sa.column("recording_id"), sa.column("seq"),
                      sa.column("direction"), sa.column("t_ns"), sa.column("data"),
                      sa.column("eol"))
    # The columns this revision made (0016 adds the 1-hour writes: 0 in these rows).
    names = [name for name in COLUMNS["usage_calls"] if name != "cache_creation_1h_tokens"]
    usage = sa.table("usage_calls", *(sa.column(name) for name in names))
    rows = conn.execute(sa.select(recordings.c.id, recordings.c.model, recordings.c.started_ns)
                        .order_by(recordings.c.started_ns)).all()
    seen: set[str] = set()  # API message ids stored so far: later copies are duplicates
    with track(rows, "usage of recordings", total=len(rows), unit="recordings") as shown:
        for rid, model, started_ns in shown:
            session = Session(model=model)
            for seq, direction, t_ns, data, eol in conn.execute(
                sa.select(events.c.seq, events.c.direction, events.c.t_ns, events.c.data,
                          events.c.eol)
                .where(events.c.recording_id == rid).order_by(events.c.seq)
            ):
                session.add(Event(seq, direction, t_ns, bytes(data), eol))
            calls = usage_call_rows(rid, usage_rows(session, started_ns),
                                    lambda ids: [i for i in ids if i in seen])
            seen.update(c[1] for c in calls if api_message_id(c[1]))
            if calls:
                conn.execute(sa.insert(usage), [
                    {name: value for name, value in zip(COLUMNS["usage_calls"], call,
                                                        strict=True) if name in names}
                    for call in calls])


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_pg_children(_CHILDREN_BEFORE))
    else:
        op.execute("DROP TRIGGER recordings_delete_children")
        op.execute(_SQLITE_TRIGGER.format(usage=""))
    op.drop_index("ix_usage_calls_call_id", table_name="usage_calls")
    op.drop_index("ix_usage_calls_t_ns", table_name="usage_calls")
    op.drop_table("usage_calls")
