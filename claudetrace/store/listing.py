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
from typing import TYPE_CHECKING, Any, Final, NamedTuple
from typing import cast as typed

import msgspec
from sqlalchemy import JSON, Table, Text, cast, func, select

from .browse import Filters, _guard, _scope
from .models import Recording, UsageModel
from .rows import COST_SOURCES

if TYPE_CHECKING:
    from .api import Store

#: The columns not read (large JSON no list shows: ``_filtered``'s ``full``).
_LEFT_OUT: Final = frozenset({"env", "figures", "latencies"})
_TABLE = typed(Table, Recording.__table__)
_COLUMNS: Final = (*(c for c in _TABLE.columns if c.name not in _LEFT_OUT),
                   Recording.indexing.expression.label("indexing"))
#: Where the JSON columns are among :data:`_COLUMNS`: read as their text and
#: decoded by msgspec (SQLAlchemy's ``json.loads`` of each was a tenth of the
#: list's time).
_JSON_AT: Final = tuple(at for at, c in enumerate(_COLUMNS) if isinstance(c.type, JSON))
_READ: Final = tuple(cast(c, Text).label(c.name) if at in _JSON_AT else c
                     for at, c in enumerate(_COLUMNS))
_decode: Final = msgspec.json.decode
_U = typed(Table, UsageModel.__table__).c
#: Recordings a chunk holds: the costs and links of a chunk are read together.
#: Above 5,000 session ids the links read every recording that continues one at
#: once (:func:`~.links.session_links`); in chunks of 2,000, asked 500 ids a
#: query, PostgreSQL took 0.7 s a query at 100,000 recordings (286 s in all,
#: against 136 s for the whole list at once).
CHUNK: Final = 10_000


#: The names :func:`_with_usage` reads a recording's usage under.
_USAGE: Final = ("usage_usd", "usage_sources", "usage_calls")
#: Recordings past which PostgreSQL sums every recording's usage rows at once.
_FEW = 1000


def _with_usage(stmt: Any, dialect: str, limit: int | None) -> Any:
    """``stmt`` reading also what :func:`claudetrace.usage.recording_costs` reads of
    each recording's ``usage_models`` rows, summed in the same query: their
    costs added in the order of their first calls (the same sum), their cost
    sources (the rows' masks or-ed) and their calls (:data:`_USAGE`)."""
    bits = [func.max(_U.sources.op("&")(1 << bit)) for bit in range(len(COST_SOURCES))]
    mask, calls = sum(bits[1:], bits[0]), func.sum(_U.calls)
    mine = _U.recording_id == Recording.id
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import aggregate_order_by

        usd = func.sum(aggregate_order_by(_U.cost_usd, _U.first_ns, _U.model.collate("C")))
        if limit is not None and limit <= _FEW:
            return stmt.add_columns(*(select(v).where(mine).scalar_subquery().label(name)
                                      for v, name in zip((usd, mask, calls), _USAGE,
                                                         strict=True)))
        # Many: grouped once and joined (a hash join), not a correlated aggregate
        # (an index look-up) a recording (see browse._summed_cost).
        rolled = (select(_U.recording_id.label("rid"), usd.label("usd"), mask.label("mask"),
                         calls.label("calls"))
                  .group_by(_U.recording_id).subquery("rolled"))
        return (stmt.add_columns(*(c.label(name) for c, name in zip(
                    (rolled.c.usd, rolled.c.mask, rolled.c.calls), _USAGE, strict=True)))
                .outerjoin(rolled, rolled.c.rid == Recording.id))
    # SQLite joins by look-ups only: a correlated aggregate each, on the rows'
    # primary key; a subquery's rows are added in its order.
    ordered = (select(_U.cost_usd).where(mine).order_by(_U.first_ns, _U.model)
               .correlate(_TABLE).subquery("ordered"))
    return stmt.add_columns(*(q.scalar_subquery().label(name) for q, name in zip(
        (select(func.sum(ordered.c.cost_usd)), select(mask).where(mine),
         select(calls).where(mine)), _USAGE, strict=True)))


_FIELDS: Final = [*((c.name, Any) for c in _COLUMNS), *((name, Any) for name in _USAGE)]


class SessionRow(NamedTuple("_Columns", _FIELDS)):  # type: ignore[misc]
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


_made = functools.partial(tuple.__new__, SessionRow)


def _row(values: Any) -> SessionRow:
    values = list(values)
    for at in _JSON_AT:
        text = values[at]
        values[at] = None if text is None else _decode(text)
    return _made(values)


def session_chunks(store: Store, filters: Filters, *, limit: int | None = None,
                   chunk: int | None = None) -> Iterator[list[SessionRow]]:
    """The recordings :func:`~.browse.list_sessions` gives (``full``), as
    :class:`SessionRow`\\ s, ``chunk`` (default :data:`CHUNK`) at a time, read as
    they are used."""
    chunk = chunk or CHUNK
    stmt, _ = _scope(store, filters, full=True)
    stmt = _with_usage(stmt.with_only_columns(*_READ), store.engine.dialect.name, limit)
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
