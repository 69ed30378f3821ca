"""A call's 1-hour cache writes are stored apart (``usage_calls.cache_creation_1h_tokens``)

Revision ID: 0017_usage1h
Revises: 0016_accents
Create Date: 2026-11-29 07:00:00

The API splits a call's cache writes into 5-minute and 1-hour ones
(``cache_creation.ephemeral_1h_input_tokens``); the 1-hour ones cost more
(:func:`claudetrace.pricing.call_cost`).  The imported and final figures price
them so, but ``usage_calls`` kept only the writes in all: what priced from these
rows (the Prometheus gauge of the turns still running) read every write as a
5-minute one.  The new column holds the 1-hour part of ``cache_creation_tokens``;
the rows stored before read 0 (every write a 5-minute one, as they were priced),
until their recording is written again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_usage1h"
down_revision = "0016_accents"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Both engines add a column with a constant default in place (no batch mode:
    # it would reflect the tables SQLite's foreign keys name).
    op.add_column("usage_calls", sa.Column("cache_creation_1h_tokens", sa.BigInteger(),
                                           nullable=False, server_default="0"))


def downgrade() -> None:
    from claudetrace.store.engine import require_drop_column

    require_drop_column(op.get_bind(), revision)  # SQLite 3.35 on: in place
    op.drop_column("usage_calls", "cache_creation_1h_tokens")
