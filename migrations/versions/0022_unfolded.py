"""The recordings an import stored usage first, not yet folded (``unfolded``)

Revision ID: 0022_unfolded
Revises: 0021_phrases
Create Date: 2026-11-29 19:30:00

``import`` stores a transcript's exact lines, its recording's row and its usage
rows first, and folds the session (converted events, summary, tool rows,
search words, latency samples) in a pass after it (:mod:`claudetrace.formats.
unfolded`).  A row here names such a recording by its number and says how its
lines make up its files (``layout``); the pass deletes it in the transaction
that stores the fold.  The row goes with its recording (a trigger on both engines,
and a foreign key on SQLite).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022_unfolded"
down_revision = "0021_phrases"
branch_labels = None
depends_on = None


#: PostgreSQL: the children of ``recordings`` have no foreign key (0005, 0007), so
#: that ``TRUNCATE recordings`` by hand works; statement triggers empty them as a
#: deleted or truncated recording's (0006's for the others), this table's too.
_PG_TRIGGERS = """
CREATE FUNCTION claudetrace_delete_unfolded() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM unfolded USING deleted_recordings WHERE unfolded.rec = deleted_recordings.num;
    RETURN NULL;
END $$;
CREATE FUNCTION claudetrace_truncate_unfolded() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE unfolded;
    RETURN NULL;
END $$;
CREATE TRIGGER recordings_delete_unfolded AFTER DELETE ON recordings
    REFERENCING OLD TABLE AS deleted_recordings
    FOR EACH STATEMENT EXECUTE PROCEDURE claudetrace_delete_unfolded();
CREATE TRIGGER recordings_truncate_unfolded AFTER TRUNCATE ON recordings
    FOR EACH STATEMENT EXECUTE PROCEDURE claudetrace_truncate_unfolded();
"""

#: SQLite: the row goes with its recording whatever ``PRAGMA foreign_keys`` says
#: (the ``sqlite3`` shell's default is off), as the other children do (0020).
_SQLITE_TRIGGER = """
CREATE TRIGGER recordings_delete_unfolded AFTER DELETE ON recordings
BEGIN
    DELETE FROM unfolded WHERE rec = OLD.num;
END"""


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    foreign_key = [] if postgres else [
        sa.ForeignKey("recordings.num", ondelete="CASCADE", name="fk_unfolded_rec_recordings")]
    op.create_table(
        "unfolded",
        sa.Column("rec", sa.Integer(), *foreign_key, primary_key=True, autoincrement=False),
        sa.Column("layout", sa.JSON(), nullable=False),
        sa.Column("stored_ns", sa.BigInteger(), nullable=False),
        if_not_exists=True,
    )
    op.execute(_PG_TRIGGERS if postgres else _SQLITE_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS recordings_truncate_unfolded ON recordings")
        op.execute("DROP TRIGGER IF EXISTS recordings_delete_unfolded ON recordings")
        op.execute("DROP FUNCTION IF EXISTS claudetrace_truncate_unfolded()")
        op.execute("DROP FUNCTION IF EXISTS claudetrace_delete_unfolded()")
    else:
        op.execute("DROP TRIGGER IF EXISTS recordings_delete_unfolded")
    op.drop_table("unfolded", if_exists=True)
