"""Ended recordings' lines are kept compressed (events.codec, line_dictionaries)

Revision ID: 0012_footprint2
Revises: 0010_lz4
Create Date: 2026-11-28 15:30:00

``events.codec`` says how a row's ``data`` is held: NULL as recorded (every
row stored before, and every row while its recording runs), 0 kept as
recorded after a look, -1 raw deflate, and a positive number raw deflate
against the preset dictionary of that id in ``line_dictionaries``
(:mod:`claudetrace.store.packing`).  Both are new, so the upgrade rewrites no
row.  The downgrade unpacks every packed row first (the older code reads
``data`` as it is), then drops both.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_footprint2"
down_revision = "0011_stats6"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "line_dictionaries",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_ns", sa.BigInteger(), nullable=False),
    )
    op.add_column("events", sa.Column("codec", sa.SmallInteger(), nullable=True))


def downgrade() -> None:
    from claudetrace.store.engine import event_pages, require_drop_column
    from claudetrace.store.packing import KEPT, Unpacker

    bind = op.get_bind()
    require_drop_column(bind, revision)
    marker = "%s" if bind.dialect.name == "postgresql" else "?"

    def fetch(number: int) -> bytes | None:
        row = bind.exec_driver_sql(
            f"SELECT data FROM line_dictionaries WHERE id = {marker}", (number,)).first()
        return None if row is None else bytes(row[0])

    unpack = Unpacker(fetch)
    for page in event_pages(bind, "recording_id, seq, data, codec",
                            f"codec IS NOT NULL AND codec <> {KEPT}", size=500):
        for rid, seq, data, codec in page:
            bind.exec_driver_sql(
                f"UPDATE events SET data = {marker}, codec = NULL "
                f"WHERE recording_id = {marker} AND seq = {marker}",
                (unpack(data, codec), rid, seq))
    op.drop_column("events", "codec")
    op.drop_table("line_dictionaries")
