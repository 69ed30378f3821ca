"""Alembic environment for claudetrace.

claudetrace runs migrations itself (``claudetrace db upgrade``, or on first use of
a store), handing Alembic a live connection in ``config.attributes``.  Running
``alembic`` by hand also works with ``-x url=...``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from claudetrace.store.models import Base

target_metadata = Base.metadata


def _run(connection: object) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    from claudetrace.store.engine import resolve_url

    url = context.get_x_argument(as_dictionary=True).get("url") or resolve_url(None)
    engine = create_engine(url)
    with engine.begin() as conn:
        _run(conn)
