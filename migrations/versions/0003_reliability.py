"""reliability: the bytes a recording lost (forwarded but never recorded)

Revision ID: 0003_reliability
Revises: 0002_session_model
Create Date: 2026-11-24 19:45:00

``lost_bytes`` is what the proxy forwarded but could not write to its capture
file (a full disk), plus the pieces of lines cut by such a gap, which are not
stored (they would be lines nobody sent).  Zero for every older recording.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from claudetrace.store.engine import require_drop_column

revision = "0003_reliability"
down_revision = "0002_session_model"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("recordings", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lost_bytes", sa.BigInteger(), nullable=False,
                                      server_default="0"))


def downgrade() -> None:
    # In place (SQLite 3.35+ drops a column itself): a batch copy of the table
    # would drop the old one, and with foreign keys on, as the store's connections
    # have them, that deletes every recording's events (ON DELETE CASCADE).
    require_drop_column(op.get_bind(), revision)
    with op.batch_alter_table("recordings", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("lost_bytes")
