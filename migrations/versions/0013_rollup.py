"""usage_models: each recording's calls summed by model

Revision ID: 0013_rollup
Revises: 0011_stats6
Create Date: 2026-11-28 15:30:00

The session report (``usage session``: a row per recording and model) read the
hourly sums (``usage_hours``) and had the database add them up again by
recording and model on every run: on 10,000 PostgreSQL sessions that
aggregate was 0.25-0.5 s of the report, spilling to disk at the default
``work_mem``.  These rows hold those sums, made with the hourly ones from the
same calls in the same transaction (:func:`claudetrace.store.rows.rollup_statements`);
this migration fills them for the calls stored before.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0013_rollup"
down_revision = "0012_footprint2"
branch_labels = None
depends_on = None

#: The sums of the calls stored before, as the store makes them at this revision
#: (written out here: a migration does not change with the code after it).
_FILL = ("INSERT INTO usage_models (recording_id, model, input_tokens, output_tokens, "
         "cache_read_tokens, cache_creation_tokens, cost_usd, estimated_usd, sources, calls, "
         "first_ns, last_ns) "
         "SELECT recording_id, model, SUM(input_tokens), SUM(output_tokens), "
         "SUM(cache_read_tokens), SUM(cache_creation_tokens), SUM(cost_usd), "
         "SUM(CASE WHEN cost_source = 'estimate' THEN cost_usd ELSE 0 END), "
         "MAX(CASE WHEN cost_source = 'cli' THEN 1 ELSE 0 END) "
         "+ MAX(CASE WHEN cost_source = 'estimate' THEN 2 ELSE 0 END) "
         "+ MAX(CASE WHEN cost_source = 'unknown' THEN 4 ELSE 0 END), "
         "COUNT(*), MIN(t_ns), MAX(t_ns) "
         "FROM usage_calls WHERE NOT duplicate GROUP BY recording_id, model")


def _load(name: str) -> Any:
    """An earlier migration's module (its trigger texts, which this one extends)."""
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"claudetrace_migration_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_0007 = _load("0007_usage_calls")
_CHILDREN = (*_0007._CHILDREN_BEFORE, "usage_calls", "usage_hours")
_USAGE = ("\n    DELETE FROM usage_calls WHERE recording_id = OLD.id;"
          "\n    DELETE FROM usage_hours WHERE recording_id = OLD.id;")


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    foreign_key = [] if postgres else [
        sa.ForeignKeyConstraint(["recording_id"], ["recordings.id"],
                                name="fk_usage_models_recording_id_recordings",
                                ondelete="CASCADE")]
    op.create_table(
        "usage_models",
        sa.Column("recording_id", sa.String(length=26), nullable=False),
        sa.Column("model", sa.String(length=100), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_creation_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("estimated_usd", sa.Float(), nullable=False),
        sa.Column("sources", sa.Integer(), nullable=False),
        sa.Column("calls", sa.BigInteger(), nullable=False),
        sa.Column("first_ns", sa.BigInteger(), nullable=False),
        sa.Column("last_ns", sa.BigInteger(), nullable=False),
        *foreign_key,
        sa.PrimaryKeyConstraint("recording_id", "model", name="pk_usage_models"),
    )
    if postgres:
        op.execute(_0007._pg_children((*_CHILDREN, "usage_models")))
    else:
        op.execute("DROP TRIGGER recordings_delete_children")
        op.execute(_0007._SQLITE_TRIGGER.format(usage=(
            _USAGE + "\n    DELETE FROM usage_models WHERE recording_id = OLD.id;")))
    op.execute(_FILL)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_0007._pg_children(_CHILDREN))
    else:
        op.execute("DROP TRIGGER recordings_delete_children")
        op.execute(_0007._SQLITE_TRIGGER.format(usage=_USAGE))
    op.drop_table("usage_models")
