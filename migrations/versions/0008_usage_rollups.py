"""usage_hours: each recording's calls summed by hour, model and cost source

Revision ID: 0008_usage_rollups
Revises: 0007_usage_calls
Create Date: 2026-11-28 09:50:00

Reports read these sums instead of every call in ``usage_calls`` (350,000 calls
of 10,000 sessions are ~60,000 rows here): the store writes a recording's rows
again whenever it writes its calls; this migration fills them for the calls
stored before.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0008_usage_rollups"
down_revision = "0007_usage_calls"
branch_labels = None
depends_on = None

#: The sums of the calls stored before, as the store made them at this revision
#: (written out here: a migration does not change with the code after it).
#: An hour is (t_ns / 3600e9) * 3600e9 in integer division; a call at its very
#: start is summed apart (on_hour).
_KEYS = ("recording_id, (t_ns / 3600000000000) * 3600000000000, "
         "(t_ns = (t_ns / 3600000000000) * 3600000000000), model, cost_source")
_FILL = ("INSERT INTO usage_hours (recording_id, hour_ns, on_hour, model, cost_source, "
         "input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, cost_usd, "
         "calls, first_ns, last_ns) "
         f"SELECT {_KEYS}, SUM(input_tokens), SUM(output_tokens), SUM(cache_read_tokens), "
         "SUM(cache_creation_tokens), SUM(cost_usd), COUNT(*), MIN(t_ns), MAX(t_ns) "
         f"FROM usage_calls WHERE NOT duplicate GROUP BY {_KEYS}")


def _load_0007() -> Any:
    """Migration 0007's module: its trigger texts, which this one extends."""
    path = Path(__file__).with_name("0007_usage_calls.py")
    spec = importlib.util.spec_from_file_location("claudetrace_migration_0007", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_before = _load_0007()
_CHILDREN = (*_before._CHILDREN_BEFORE, "usage_calls")


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    foreign_key = [] if postgres else [
        sa.ForeignKeyConstraint(["recording_id"], ["recordings.id"],
                                name="fk_usage_hours_recording_id_recordings",
                                ondelete="CASCADE")]
    op.create_table(
        "usage_hours",
        sa.Column("recording_id", sa.String(length=26), nullable=False),
        sa.Column("hour_ns", sa.BigInteger(), nullable=False),
        sa.Column("on_hour", sa.Boolean(), nullable=False),
        sa.Column("model", sa.String(length=100), nullable=False),
        sa.Column("cost_source", sa.String(length=16), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_creation_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("calls", sa.BigInteger(), nullable=False),
        sa.Column("first_ns", sa.BigInteger(), nullable=False),
        sa.Column("last_ns", sa.BigInteger(), nullable=False),
        *foreign_key,
        sa.PrimaryKeyConstraint("recording_id", "hour_ns", "on_hour", "model", "cost_source",
                                name="pk_usage_hours"),
    )
    op.create_index("ix_usage_hours_hour_ns", "usage_hours", ["hour_ns"])
    if postgres:
        op.execute(_before._pg_children((*_CHILDREN, "usage_hours")))
    else:
        op.execute("DROP TRIGGER recordings_delete_children")
        op.execute(_before._SQLITE_TRIGGER.format(usage=(
            "\n    DELETE FROM usage_calls WHERE recording_id = OLD.id;"
            "\n    DELETE FROM usage_hours WHERE recording_id = OLD.id;")))
    op.execute(_FILL)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_before._pg_children(_CHILDREN))
    else:
        op.execute("DROP TRIGGER recordings_delete_children")
        op.execute(_before._SQLITE_TRIGGER.format(
            usage="\n    DELETE FROM usage_calls WHERE recording_id = OLD.id;"))
    op.drop_index("ix_usage_hours_hour_ns", table_name="usage_hours")
    op.drop_table("usage_hours")
