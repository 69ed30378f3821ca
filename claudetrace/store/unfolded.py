"""Recordings stored usage first, whose session is not folded yet (``unfolded``).

A folder import stores each session's transcript lines as they are (exact
bytes, no fields, no tool rows, no search words), its recording's row with
what ``sessions`` and ``usage`` read (times, project, model, tokens, cost) and
its ``usage_calls`` rows, and a row of ``unfolded`` (migration 0022_unfolded)
saying which lines make up which file.  The fold, which converts those lines
into the recording's events and stores what the session model says of them,
comes after (:mod:`claudetrace.formats.unfolded`): it :func:`claim`\\ s the
recording's row of ``unfolded`` in the transaction that stores the fold, so a
fold killed leaves it to do again, and of two folds of one recording at once
one does it and the other finds it done (SQLite's write lock, PostgreSQL's row
lock on the row deleted).

The functions here work in a connection's transaction (a
:class:`~claudetrace.store.api.Batch`'s).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, Table, delete, insert, select

from .importing import RAW_DIRECTION, raw_rows
from .models import Recording, Unfolded, number_of
from .rows import lock_usage

if TYPE_CHECKING:
    from .api import Store

_TABLE = cast(Table, Unfolded.__table__)
_RECORDINGS = cast(Table, Recording.__table__)


def mark(conn: Connection, recording_id: str, layout: dict[str, Any]) -> None:
    """Say that ``recording_id`` is stored usage first, its lines laid out as ``layout``."""
    conn.execute(delete(_TABLE).where(_TABLE.c.rec == number_of(recording_id)))
    conn.execute(insert(_TABLE).values(rec=number_of(recording_id), layout=layout,
                                       stored_ns=time.time_ns()))


def claim(conn: Connection, recording_id: str) -> dict[str, Any] | None:
    """Take ``recording_id``'s row of ``unfolded`` for a fold in ``conn``'s
    transaction (deleted: committed with the fold, or back when it is taken
    back); its layout, or None when it is folded (or being folded) already."""
    # Usage's lock, then the recording's row, then its mark: the order an import
    # storing recordings takes them in (:func:`~.rows.lock_usage`); any other
    # deadlocks with it on PostgreSQL (SQLite's write lock is one for the file).
    lock_usage(conn)
    conn.execute(select(_RECORDINGS.c.num).where(_RECORDINGS.c.id == recording_id)
                 .with_for_update(key_share=True))
    found = conn.execute(select(_TABLE.c.layout).where(_TABLE.c.rec == number_of(recording_id))
                         ).first()
    if found is None:
        return None
    # The delete decides: a second fold waits here for the first one's
    # transaction, then deletes nothing.
    done = conn.execute(delete(_TABLE).where(_TABLE.c.rec == number_of(recording_id))).rowcount
    return dict(found[0]) if done else None


def layout_of(store: Store, recording_id: str) -> dict[str, Any] | None:
    """``recording_id``'s layout, read without claiming it (a fold that stores
    nothing: :func:`~claudetrace.formats.unfolded.folded_apart`); None when folded."""
    with store.engine.connect() as conn:
        found = conn.execute(select(_TABLE.c.layout).where(
            _TABLE.c.rec == number_of(recording_id))).first()
    return None if found is None else dict(found[0])


def pending(store: Store) -> list[str]:
    """The ids of the recordings not folded yet, the first stored first."""
    with store.engine.connect() as conn:
        return [str(rid) for rid in conn.execute(
            select(_RECORDINGS.c.id).join(_TABLE, _TABLE.c.rec == _RECORDINGS.c.num)
            .order_by(_TABLE.c.stored_ns, _RECORDINGS.c.id)).scalars()]


def is_unfolded(store: Store, recording_id: str) -> bool:
    """Whether ``recording_id`` is stored usage first and not folded yet."""
    with store.engine.connect() as conn:
        return conn.execute(select(_TABLE.c.rec).where(
            _TABLE.c.rec == number_of(recording_id))).first() is not None


def among(store: Store, ids: list[str]) -> set[str]:
    """Those of ``ids`` not folded yet (or being folded now: a fold's claim is seen
    once it is committed)."""
    with store.engine.connect() as conn:
        return {str(rid) for rid in conn.execute(
            select(_RECORDINGS.c.id).join(_TABLE, _TABLE.c.rec == _RECORDINGS.c.num)
            .where(_RECORDINGS.c.id.in_(ids))).scalars()}


__all__ = ["RAW_DIRECTION", "among", "claim", "is_unfolded", "layout_of", "mark", "pending",
           "raw_rows"]
