"""sparse event indexes: only the lines a query looks up are in them

Revision ID: 0004_sparse_indexes
Revises: 0003_reliability
Create Date: 2026-11-24 22:10:00

Every event row went into three indexes besides its primary key; keeping them
up to date was a third of the cost of storing a line.  Now:

- ``ix_events_recording_t`` (recording, t_ns) is gone: no query looks events up
  by time (they are read in ``seq`` order, through the primary key);
- ``ix_events_request_id`` is gone: no query looks events up by request id
  (control requests and responses are paired by the session model as read);
- ``ix_events_recording_type`` leaves out ``stream_event`` lines, two thirds of
  a streaming session, which no query looks up by type: the queries that look
  for other types say ``type <> 'stream_event'`` so that both engines use it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_sparse_indexes"
down_revision = "0003_reliability"
branch_labels = None
depends_on = None

_NOT_STREAM = sa.text("type <> 'stream_event'")


def upgrade() -> None:
    op.drop_index("ix_events_recording_t", table_name="events")
    op.drop_index("ix_events_recording_type", table_name="events")
    op.drop_index("ix_events_request_id", table_name="events")
    op.create_index("ix_events_recording_type", "events", ["recording_id", "type"],
                    sqlite_where=_NOT_STREAM, postgresql_where=_NOT_STREAM)


def downgrade() -> None:
    op.drop_index("ix_events_recording_type", table_name="events")
    op.create_index("ix_events_request_id", "events", ["request_id"])
    op.create_index("ix_events_recording_type", "events", ["recording_id", "type"])
    op.create_index("ix_events_recording_t", "events", ["recording_id", "t_ns"])
