"""Which stored sessions go on from which: both ends of a link, from one source.

A session resumed (or forked) after a compaction is a recording of its own, and
its import stores the session it goes on from in ``extra["continues"]``
(:mod:`claudetrace.formats.continuation`); a session resumed without one is
joined to the recording it resumes, whose ``extra["resumed_as"]`` lists its new
ids.  Those two values are the only record of a link: the earlier session's
"continued in" is a query over the later recordings' ``continues``, through an
index on that value (migration 0011), never a second copy written at import.
So neither the order files are imported in, nor a re-import, nor deleting or
pruning either side can leave the two ends disagreeing: a link whose other side
is not stored names its session id with no recording.

The values (:class:`Links`) load without SQLAlchemy, for the commands that only
print them; the queries load it when they run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from sqlalchemy import ColumnElement

    from .api import Store
    from .models import Recording

#: The index on the session a recording continues (migration 0011); a query
#: uses it when it names the same expression.
INDEX: Final = "ix_recordings_continues"

#: That expression on each database (PostgreSQL's ``json`` operators, SQLite's
#: JSON1 function): the migration indexes it and :func:`continuing` asks it.
EXPRESSION: Final = {
    "sqlite": "json_extract(extra, '$.continues.session_id')",
    "postgresql": "(extra -> 'continues' ->> 'session_id')",
}

#: At most this many recordings are said to continue one session.
_MOST: Final = 50


@dataclass(frozen=True, slots=True)
class Link:
    """The other end of a link: its CLI session id and, when it is stored, its
    recording (None: not in this store)."""

    session_id: str
    recording_id: str | None
    #: For ``continues``: the earlier file was beside it and holds the same
    #: compaction (else only what the compaction's summary says).
    certain: bool = True


@dataclass(frozen=True, slots=True)
class Links:
    """How one recording is linked to others."""

    #: The session this one goes on from after a compaction.
    continues: Link | None = None
    #: The sessions that go on from this one after a compaction.
    continued_in: tuple[Link, ...] = ()
    #: The ids this session was resumed (or forked) as, joined into it.
    resumed_as: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.continues or self.continued_in or self.resumed_as)


NO_LINKS: Final = Links()


def resumed_ids(rec: Any) -> tuple[str, ...]:
    """The session ids ``rec`` was resumed (or forked) as (``extra.resumed_as``)."""
    ids = (rec.extra or {}).get("resumed_as")
    return tuple(i for i in ids if isinstance(i, str) and i) if isinstance(ids, list) else ()


def continued_id(rec: Any) -> tuple[str, bool] | None:
    """The session ``rec`` continues and whether that is certain, when it says one."""
    link = (rec.extra or {}).get("continues")
    if not isinstance(link, dict):
        return None
    sid = link.get("session_id")
    if not isinstance(sid, str) or not sid:
        return None
    return sid, bool(link.get("certain"))


def continues_expression(dialect: str) -> ColumnElement[Any]:
    """The indexed expression: the session id a row's ``extra`` says it continues."""
    from sqlalchemy import literal_column

    return literal_column(EXPRESSION[dialect])


def session_links(store: Store, recs: Sequence[Any]) -> dict[str, Links]:
    """Each of ``recs``'s links by recording id (those with none left out), in two
    or three indexed queries however many ``recs`` there are."""
    owned: dict[str, str] = {}  # a session id → the recording of recs holding it
    for rec in recs:
        for sid in (rec.cli_session_id, *resumed_ids(rec)):
            if sid:
                owned.setdefault(sid, rec.id)
    targets = {found[0] for rec in recs if (found := continued_id(rec)) is not None}
    later = _continuing(store, owned)
    holders = _holders(store, targets)
    out: dict[str, Links] = {}
    for rec in recs:
        found = continued_id(rec)
        sids = {s for s in (rec.cli_session_id, *resumed_ids(rec)) if s}
        links = Links(
            continues=None if found is None else Link(
                found[0], holders.get(found[0]), certain=found[1]),
            continued_in=tuple(
                Link(row.cli_session_id or row.id, row.id, certain=certain)
                for row, sid, certain in later if sid in sids and row.id != rec.id),
            resumed_as=resumed_ids(rec),
        )
        if links:
            out[rec.id] = links
    return out


def links_of(store: Store, rec: Any) -> Links:
    """The links of one recording."""
    return session_links(store, [rec]).get(rec.id, NO_LINKS)


def _continuing(store: Store, sids: Iterable[str]) -> list[tuple[Recording, str, bool]]:
    """The recordings that say they continue one of ``sids``, oldest first, each
    with the session id it continues and whether that is certain."""
    from sqlalchemy import select
    from sqlalchemy.orm import load_only

    from .models import Recording

    wanted = sorted(set(sids))
    if not wanted:
        return []
    table = Recording.__table__.c
    expression = continues_expression(store.engine.dialect.name)
    stmt = (select(Recording)
            .options(load_only(Recording.id, Recording.cli_session_id, Recording.extra,
                               Recording.started_ns))
            .where(expression.in_(wanted))
            .order_by(table.started_ns, table.id)
            .limit(_MOST * len(wanted)))
    with store.session() as s:
        rows = list(s.scalars(stmt))
    return [(row, found[0], found[1]) for row in rows
            if (found := continued_id(row)) is not None]


def _holders(store: Store, sids: Iterable[str]) -> dict[str, str]:
    """The recording holding each of ``sids`` (its CLI session id, else one it
    was resumed as), for those stored."""
    from sqlalchemy import select

    from .api import Store
    from .models import Recording

    wanted = sorted(set(sids))
    if not wanted:
        return {}
    table = Recording.__table__.c
    found: dict[str, str] = {}
    with store.session() as s:
        for rid, sid in s.execute(select(table.id, table.cli_session_id)
                                  .where(table.cli_session_id.in_(wanted))
                                  .order_by(table.started_ns)):
            found.setdefault(sid, rid)
        for sid in (sid for sid in wanted if sid not in found):
            # A session resumed before it was compacted: joined into the
            # recording whose ``resumed_as`` names it (as ``Store.resolve`` finds it).
            for rec in Store.resumed_into(s, sid):
                if sid in resumed_ids(rec):
                    found.setdefault(sid, rec.id)
    return found


__all__ = ["EXPRESSION", "INDEX", "NO_LINKS", "Link", "Links", "continued_id",
           "continues_expression", "links_of", "resumed_ids", "session_links"]
