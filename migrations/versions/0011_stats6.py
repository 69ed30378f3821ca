"""recordings.latencies: the Stats page's latency samples of an ended recording

Revision ID: 0011_stats6
Revises: 0010_lz4
Create Date: 2026-11-28 15:30:00

The Stats page's latency table folded the telemetry spans of the newest
sessions from their lines on every look (2.39 s of its 3.18 s on a 10M-event
store).  An ended recording's samples (each finished span's duration in ms, by
category: :func:`claudetrace.telemetry.latency.latencies`) are kept in this
column the first time the page folds them, with the event count they were
folded from; nothing fills it on the recording path.  A column of its own, not
a key of ``figures``: a cold ``/metrics`` scrape decodes every recording's
``figures``, and the samples would have grown it with every span.  NULL (and
every row stored before this) means not folded yet.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from claudetrace.store.engine import require_drop_column

revision = "0011_stats6"
down_revision = "0010_lz4"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("recordings", schema=None) as batch_op:
        batch_op.add_column(sa.Column("latencies", sa.JSON(), nullable=True))


def downgrade() -> None:
    # In place, as 0007's: a batch copy would delete every recording's events.
    require_drop_column(op.get_bind(), revision)
    with op.batch_alter_table("recordings", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("latencies")
