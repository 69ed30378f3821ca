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

A fork is told from a resume by the CLI that wrote the later session
(:func:`is_fork`): from Claude Code 1.0.124, ``--resume`` keeps the session's id
and goes on in its own file (``--fork-session`` came in then for a new one), so
a later session under a new id that goes on from another is a fork
(``--fork-session``, ``/branch``); before it, every resume made a new id and file.

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

#: The ids a recording was resumed as, read without the rest of ``extra`` (a
#: JSON text on SQLite, a value on PostgreSQL).
_RESUMED: Final = {
    "sqlite": "json_extract(extra, '$.resumed_as')",
    "postgresql": "(extra -> 'resumed_as')",
}

#: At most this many recordings are said to continue one session.
_MOST: Final = 50
#: Session ids asked in one ``IN`` list (SQLite takes 32,766 parameters at most).
_CHUNK: Final = 500
#: Above this many session ids, the recordings continuing any session are read
#: at once and matched in Python (0.2 s of a list of 100,000, not 200 queries).
_ALL_AT_ONCE: Final = 5_000
#: Unstored ids looked for one by one among the ids sessions were resumed as (a
#: narrow text match each); more are matched in one read of every resumed session.
_ONE_BY_ONE: Final = 10


@dataclass(frozen=True, slots=True)
class Link:
    """The other end of a link: its CLI session id and, when it is stored, its
    recording (None: not in this store)."""

    session_id: str
    recording_id: str | None
    #: For ``continues``: the earlier file was beside it and holds the same
    #: compaction (else only what the compaction's summary says).
    certain: bool = True
    #: The later of the two sessions is a fork of the earlier (:func:`is_fork`).
    fork: bool = False


@dataclass(frozen=True, slots=True)
class Links:
    """How one recording is linked to others."""

    #: The session this one goes on from after a compaction.
    continues: Link | None = None
    #: The sessions that go on from this one after a compaction.
    continued_in: tuple[Link, ...] = ()
    #: The ids this session was resumed as, joined into it.
    resumed_as: tuple[str, ...] = ()
    #: The ids this session was forked as, joined into it (their files begin
    #: with a copy of its conversation).
    forked_as: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.continues or self.continued_in or self.resumed_as
                    or self.forked_as)


NO_LINKS: Final = Links()


#: The first Claude Code release whose ``--resume`` keeps the session's id (and
#: file), and which has ``--fork-session`` for a new one.
_FORKS_FROM: Final = (1, 0, 124)


def is_fork(version: Any) -> bool:
    """Whether a session written by Claude Code ``version`` under an id of its own,
    going on from another session, is a fork of it (not a resume)."""
    if not isinstance(version, str):
        return False
    parts = version.split("-")[0].split(".")[:3]
    try:
        return tuple(int(part) for part in parts) >= _FORKS_FROM
    except ValueError:
        return False


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


def session_links(store: Store, recs: Sequence[Any], *,
                  find_resumed: bool = True) -> dict[str, Links]:
    """Each of ``recs``'s links by recording id (those with none left out), in
    indexed queries (one per 500 session ids).  A continued session not stored
    under its own id is looked for among the ids sessions were resumed as,
    unless not ``find_resumed`` (a text scan of ``extra``: the session list,
    which shows the ids only, leaves it out)."""
    owned: dict[str, str] = {}  # a session id → the recording of recs holding it
    for rec in recs:
        for sid in (rec.cli_session_id, *resumed_ids(rec)):
            if sid:
                owned.setdefault(sid, rec.id)
    targets = {found[0] for rec in recs if (found := continued_id(rec)) is not None}
    later: dict[str, list[Link]] = {}  # a session id → the recordings continuing it
    for row, sid, certain in _continuing(store, owned):
        later.setdefault(sid, []).append(Link(row.cli_session_id or row.id, row.id, certain,
                                              fork=is_fork(row.claude_code_version)))
    holders = _holders(store, targets, find_resumed=find_resumed)
    out: dict[str, Links] = {}
    for rec in recs:
        found = continued_id(rec)
        joined = resumed_ids(rec)
        forked = is_fork(rec.claude_code_version)
        sids = dict.fromkeys(s for s in (rec.cli_session_id, *joined) if s)
        links = Links(
            continues=None if found is None else Link(
                found[0], holders.get(found[0]), certain=found[1], fork=forked),
            continued_in=tuple(link for sid in sids for link in later.get(sid, ())
                               if link.recording_id != rec.id),
            resumed_as=() if forked else joined,
            forked_as=joined if forked else (),
        )
        if links:
            out[rec.id] = links
    return out


@dataclass(frozen=True, slots=True)
class _Linking:
    """What of a recording its links are found from (its ``extra`` reduced to them)."""

    id: str
    cli_session_id: str | None
    claude_code_version: str | None
    extra: dict[str, Any]


def listed_links(store: Store, recording_ids: Sequence[str]) -> dict[str, Links]:
    """The links of the recordings ``recording_ids`` for the session list, which
    loads no ``extra``: the two values read from it by the database, the ids
    only (not looked for among resumed sessions: the list shows the ids)."""
    import json

    from sqlalchemy import literal_column, select

    from .models import Recording

    table = Recording.__table__.c
    dialect = store.engine.dialect.name
    rows: list[Any] = []
    with store.session() as s:
        for wanted in _chunks(recording_ids):
            rows += s.execute(select(table.id, table.cli_session_id, table.claude_code_version,
                                     continues_expression(dialect),
                                     literal_column(_RESUMED[dialect]))
                              .where(table.id.in_(wanted))).all()
    recs = []
    for rid, sid, version, continued, resumed in rows:
        if isinstance(resumed, str):
            resumed = json.loads(resumed)
        recs.append(_Linking(rid, sid, version, {
            "continues": {"session_id": continued} if continued else None,
            "resumed_as": resumed if isinstance(resumed, list) else None}))
    return session_links(store, recs, find_resumed=False)


def links_of(store: Store, rec: Any) -> Links:
    """The links of one recording."""
    return session_links(store, [rec]).get(rec.id, NO_LINKS)


def _continuing(store: Store, sids: Iterable[str]) -> list[tuple[Recording, str, bool]]:
    """The recordings that say they continue one of ``sids``, oldest first, each
    with the session id it continues and whether that is certain."""
    from sqlalchemy import select
    from sqlalchemy.orm import load_only

    from .models import Recording

    table = Recording.__table__.c
    expression = continues_expression(store.engine.dialect.name)
    columns = load_only(Recording.id, Recording.cli_session_id, Recording.extra,
                        Recording.started_ns, Recording.claude_code_version)
    wanted_ids = set(sids)
    rows: list[Recording] = []
    with store.session() as s:
        if len(wanted_ids) > _ALL_AT_ONCE:
            # Many sessions (a whole list): one read of every recording that
            # continues one (the index's rows, a few), not a query per 500 ids.
            rows = list(s.scalars(select(Recording).options(columns)
                                  .where(expression.is_not(None))))
        else:
            for wanted in _chunks(wanted_ids):
                rows += s.scalars(select(Recording).options(columns)
                                  .where(expression.in_(wanted))
                                  .order_by(table.started_ns, table.id)
                                  .limit(_MOST * len(wanted)))
    rows.sort(key=lambda row: (row.started_ns, row.id))
    out: list[tuple[Recording, str, bool]] = []
    counted: dict[str, int] = {}  # at most _MOST a session, the oldest
    for row in rows:
        found = continued_id(row)
        if found is None or found[0] not in wanted_ids:
            continue
        counted[found[0]] = counted.get(found[0], 0) + 1
        if counted[found[0]] <= _MOST:
            out.append((row, *found))
    return out


def _holders(store: Store, sids: Iterable[str], *, find_resumed: bool) -> dict[str, str]:
    """The recording holding each of ``sids`` (its CLI session id, else, when
    ``find_resumed``, one it was resumed as), for those stored."""
    from sqlalchemy import Text, cast, select
    from sqlalchemy.orm import load_only

    from .api import Store
    from .models import Recording

    table = Recording.__table__.c
    found: dict[str, str] = {}
    with store.session() as s:
        for wanted in _chunks(sids):
            for rid, sid in s.execute(select(table.id, table.cli_session_id)
                                      .where(table.cli_session_id.in_(wanted))
                                      .order_by(table.started_ns)):
                found.setdefault(sid, rid)
        rest = {sid for sid in sids if sid not in found} if find_resumed else set()
        # A session resumed before it was compacted: joined into the recording
        # whose ``resumed_as`` names it (as ``Store.resolve`` finds it).
        resumed: Iterable[Recording] = (
            (rec for sid in sorted(rest) for rec in Store.resumed_into(s, sid))
            if len(rest) <= _ONE_BY_ONE else
            s.scalars(select(Recording).options(load_only(Recording.id, Recording.extra))
                      .where(cast(table.extra, Text).like('%"resumed\\_as"%', escape="\\"))
                      .order_by(table.started_ns)))
        for rec in resumed:
            for sid in rest.intersection(resumed_ids(rec)):
                found.setdefault(sid, rec.id)
    return found


def _chunks(sids: Iterable[str]) -> Iterable[list[str]]:
    wanted = sorted(set(sids))
    return (wanted[i:i + _CHUNK] for i in range(0, len(wanted), _CHUNK))


__all__ = ["EXPRESSION", "INDEX", "NO_LINKS", "Link", "Links", "continued_id",
           "continues_expression", "is_fork", "links_of", "listed_links", "resumed_ids",
           "session_links"]
