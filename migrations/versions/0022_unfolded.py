"""The recordings an import stored usage first, not yet folded (``unfolded``)

Revision ID: 0022_unfolded
Revises: 0021_phrases
Create Date: 2026-11-29 19:30:00

``import`` stores a transcript's exact lines, its recording's row and its usage
rows first, and folds the session (converted events, summary, tool rows,
search words, latency samples) in a pass after it (:mod:`claudetrace.formats.
unfolded`).  A row here names such a recording by its number and says how its
lines make up its files (``layout``); the pass deletes it in the transaction
that stores the fold.  The row goes with its recording (a foreign key).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022_unfolded"
down_revision = "0021_phrases"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "unfolded",
        sa.Column("rec", sa.Integer(),
                  sa.ForeignKey("recordings.num", ondelete="CASCADE",
                                name="fk_unfolded_rec_recordings"),
                  primary_key=True, autoincrement=False),
        sa.Column("layout", sa.JSON(), nullable=False),
        sa.Column("stored_ns", sa.BigInteger(), nullable=False),
        if_not_exists=True,
    )


def downgrade() -> None:
    op.drop_table("unfolded", if_exists=True)
