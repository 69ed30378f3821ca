"""The session list as it is read: recordings as plain rows, a chunk at a time.

``sessions --json -n 0`` prints every recording of a store; loaded as ORM
objects, all of them at once, 100,000 recordings took most of two minutes
and 1.3 GB here.  :func:`session_chunks` reads the same recordings, in the
same order and narrowed by the same :class:`~.browse.Filters`
(:func:`~.browse.list_sessions`' statement), with a core select streamed from
the database (a server-side cursor on PostgreSQL), as :class:`SessionRow`\\ s:
the columns ``sessions --json`` prints, and the recording's own properties
(status, cost, duration…, :class:`~.models.Recording`'s, not written again).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final, NamedTuple, cast

from sqlalchemy import Table

from .browse import Filters, _guard, _scope
from .models import Recording

if TYPE_CHECKING:
    from .api import Store

#: The columns not read (large JSON no list shows: ``_filtered``'s ``full``).
_LEFT_OUT: Final = frozenset({"env", "figures", "latencies"})
_TABLE = cast(Table, Recording.__table__)
_COLUMNS: Final = (*(c for c in _TABLE.columns if c.name not in _LEFT_OUT),
                   Recording.indexing.expression.label("indexing"))
#: Recordings a chunk holds: the costs and links of a chunk are read together.
#: Above 5,000 session ids the links read every recording that continues one at
#: once (:func:`~.links.session_links`); in chunks of 2,000, asked 500 ids a
#: query, PostgreSQL took 0.7 s a query at 100,000 recordings (286 s in all,
#: against 136 s for the whole list at once).
CHUNK: Final = 10_000


class SessionRow(NamedTuple("_Columns", [(c.name, Any) for c in _COLUMNS])):  # type: ignore[misc]
    """A recording's columns as read for the list (not the left-out ones), with
    :class:`~.models.Recording`'s properties that read them: a tuple, made from a
    row in one call (an object whose attributes are set one by one took a fifth
    of ``sessions --json``'s time)."""

    __slots__ = ()

    if TYPE_CHECKING:  # the columns, named at run time
        def __getattr__(self, name: str) -> Any: ...

    status = vars(Recording)["status"]
    status_reason = vars(Recording)["status_reason"]
    cost_origin = vars(Recording)["cost_origin"]
    cost = vars(Recording)["cost"]
    warnings = vars(Recording)["warnings"]
    duration_ns = vars(Recording)["duration_ns"]
    is_live = vars(Recording)["is_live"]


_row = functools.partial(tuple.__new__, SessionRow)


def session_chunks(store: Store, filters: Filters, *, limit: int | None = None,
                   chunk: int | None = None) -> Iterator[list[SessionRow]]:
    """The recordings :func:`~.browse.list_sessions` gives (``full``), as
    :class:`SessionRow`\\ s, ``chunk`` (default :data:`CHUNK`) at a time, read as
    they are used."""
    chunk = chunk or CHUNK
    stmt, _ = _scope(store, filters, full=True)
    stmt = stmt.with_only_columns(*_COLUMNS)
    if limit is not None:
        stmt = stmt.limit(limit)
    with _guard("list recordings"), store.engine.connect().execution_options(
            stream_results=True, yield_per=chunk) as conn:
        result = conn.execute(stmt)
        try:
            for part in result.partitions(chunk):
                yield [_row(values) for values in part]
        finally:
            # A server-side cursor left half read is closed now, not when collected.
            result.close()


__all__ = ["CHUNK", "SessionRow", "session_chunks"]
