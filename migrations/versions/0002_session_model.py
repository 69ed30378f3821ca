"""session model summary: the CLI's num_turns, model calls, usage and cost per model, status

Revision ID: 0002_session_model
Revises: 0001
Create Date: 2026-11-24 18:50:00

The summary columns of every recording are computed again by the session model
(:mod:`claudetrace.model`) from its stored events, so old and new recordings
report the same figures and the same status.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from claudetrace.store.engine import require_drop_column

revision = "0002_session_model"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("recordings", schema=None) as batch_op:
        batch_op.add_column(sa.Column("num_turns", sa.Integer(), nullable=False,
                                      server_default="0"))
        batch_op.add_column(sa.Column("model_calls", sa.Integer(), nullable=False,
                                      server_default="0"))
        batch_op.add_column(sa.Column("models", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("outcome", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("outcome_reason", sa.Text(), nullable=True))
    _summarise_again(op.get_bind())


def _summarise_again(conn: sa.Connection) -> None:
    from claudetrace.progress import track

    recordings = sa.table(
        "recordings", sa.column("id"), sa.column("ended_ns"), sa.column("exit_code"),
        sa.column("signal"), sa.column("error"), sa.column("model"),
        # A dict is bound only through the JSON type.
        sa.column("models", sa.JSON()),
        *(sa.column(name) for name in (
            "event_count", "byte_count", "turns", "num_turns", "model_calls", "tool_calls",
            "tool_errors", "input_tokens", "output_tokens", "cache_read_tokens",
            "cache_creation_tokens", "cost_usd", "is_error", "result_subtype",
            "outcome", "outcome_reason")),
    )
    rows = conn.execute(sa.select(recordings.c.id, recordings.c.ended_ns,
                                  recordings.c.exit_code, recordings.c.signal,
                                  recordings.c.error)).all()
    with track(rows, "summarising recordings", total=len(rows), unit="recordings") as shown:
        for row in shown:
            _summarise_one(conn, recordings, *row)


def _summarise_one(conn: sa.Connection, recordings: sa.TableClause, rid: str,
                   ended_ns: int | None, exit_code: int | None, signal: int | None,
                   error: str | None) -> None:
    from claudetrace.model import Session
    from claudetrace.model.events import Event
    from claudetrace.model.summary import outcome_columns, summary_columns

    events = sa.table("events", sa.column("recording_id"), sa.column("seq"),
                      sa.column("direction"), sa.column("t_ns"), sa.column("data"),
                      sa.column("eol"))
    session = Session()
    for seq, direction, t_ns, data, eol in conn.execute(
        sa.select(events.c.seq, events.c.direction, events.c.t_ns, events.c.data,
                  events.c.eol)
        .where(events.c.recording_id == rid).order_by(events.c.seq)
    ):
        session.add(Event(seq, direction, t_ns, bytes(data), eol))
    # Only the columns this revision has (later ones add theirs, e.g. cost_source).
    values = {k: v for k, v in summary_columns(session).items() if k in recordings.c}
    if ended_ns is not None:
        values.update(outcome_columns(session.outcome(
            ended=True, exit_code=exit_code, signal=signal, error=error)))
    conn.execute(sa.update(recordings).where(recordings.c.id == rid).values(**values))


def downgrade() -> None:
    # In place (SQLite 3.35+ drops a column itself): a batch copy of the table
    # would drop the old one, and with foreign keys on, as the store's connections
    # have them, that deletes every recording's events (ON DELETE CASCADE).
    require_drop_column(op.get_bind(), revision)
    with op.batch_alter_table("recordings", schema=None, recreate="never") as batch_op:
        for name in ("outcome_reason", "outcome", "models", "model_calls", "num_turns"):
            batch_op.drop_column(name)
