"""recordings.cost_source: the CLI's cost, the price table's estimate, or unknown

Revision ID: 0007_cost_source
Revises: 0005_postgres_bulk_events
Create Date: 2026-11-28 06:10:00

A recording whose cost the CLI did not report (an imported transcript without
``cost-state`` lines, a session that ended before its first result) had
``cost_usd`` 0.  ``cost_source`` says where the figure comes from (``cli``,
``estimate`` from the price table, ``unknown`` for a model the table does not
know, ``cost_usd`` then 0): a recording with a cost is the CLI's; the others
are folded again by the session model, which prices them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from claudetrace.store.engine import require_drop_column

revision = "0007_cost_source"
down_revision = "0006_team_scale"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("recordings", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cost_source", sa.String(length=16), nullable=True))
    conn = op.get_bind()
    recordings = sa.table("recordings", sa.column("id"), sa.column("cost_usd"),
                          sa.column("cost_source"), sa.column("models", sa.JSON()))
    conn.execute(sa.update(recordings).where(recordings.c.cost_usd > 0)
                 .values(cost_source="cli"))
    rows = conn.execute(sa.select(recordings.c.id)
                        .where(recordings.c.cost_source.is_(None))).scalars().all()
    _price(conn, recordings, rows)


def _price(conn: sa.Connection, recordings: sa.TableClause, ids: list[str]) -> None:
    from claudetrace.model import Session
    from claudetrace.model.events import Event
    from claudetrace.model.summary import summary_columns
    from claudetrace.progress import track

    events = sa.table("events", sa.column("recording_id"), sa.column("seq"),
                      sa.column("direction"), sa.column("t_ns"), sa.column("data"),
                      sa.column("eol"))
    model = sa.table("recordings", sa.column("id"), sa.column("model"))
    with track(ids, "pricing recordings", total=len(ids), unit="recordings") as shown:
        for rid in shown:
            session = Session(model=conn.execute(
                sa.select(model.c.model).where(model.c.id == rid)).scalar())
            for seq, direction, t_ns, data, eol in conn.execute(
                sa.select(events.c.seq, events.c.direction, events.c.t_ns, events.c.data,
                          events.c.eol)
                .where(events.c.recording_id == rid).order_by(events.c.seq)
            ):
                session.add(Event(seq, direction, t_ns, bytes(data), eol))
            columns = summary_columns(session)
            conn.execute(sa.update(recordings).where(recordings.c.id == rid).values(
                cost_usd=columns["cost_usd"], cost_source=columns["cost_source"],
                models=columns["models"]))


def downgrade() -> None:
    # In place, as 0002's: a batch copy would delete every recording's events.
    require_drop_column(op.get_bind(), revision)
    with op.batch_alter_table("recordings", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("cost_source")
