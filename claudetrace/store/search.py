"""Text search over every session, through the word index (:mod:`.textindex`).

A line matches when its readable text (message text, tool names and arguments,
results) contains the query, ignoring case, the query's words found from
their beginnings: the index gives the lines holding a word starting with each
of the query's words (SQLite FTS5, PostgreSQL ``tsvector`` under GIN), and,
where the query is more than one plain word, the text of those lines is
checked for the query itself.  ``claudetrace search`` and the session
browser's search box both ask here.

A burst's words reach the index a moment after its recording is listed
complete (the pass that packs its lines adds them, :mod:`.packing`), or, while
it runs, once its input pauses (its indexer adds them, :mod:`.backlog`); each
search first adds what is missing of every recording whose batches left words
out (:func:`~.backlog.catch_up`: one query of the recordings when there is
none): the pass of an ended recording whose indexer did not run it, and the
words of the lines stored so far of one still running or abandoned, so it
finds every word of every stored line.  A store it cannot write (a read-only
file or user) is searched as it stands.

No SQLAlchemy at import: ``claudetrace search`` asks a plain SQLite file or
PostgreSQL URL through :mod:`sqlite3` or psycopg alone (:func:`search_plain`),
the statements and the reading of the lines found being the store's, so a new
process answers in the time of its start-up and the query.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..errors import StoreError
from ..model.protocol import line_text
from .backlog import catch_up
from .packing import Unpacker, stored_dictionary
from .textindex import fold, words

if TYPE_CHECKING:
    from .api import Store

#: Characters of context on each side of the match in a snippet.
SNIPPET_CONTEXT = 60


@dataclass(frozen=True, slots=True)
class Hit:
    """One line that says the query."""

    recording_id: str
    seq: int
    direction: str
    type: str | None
    started_ns: int
    name: str | None
    #: The readable text around the match, on one line (not escaped: the caller
    #: escapes it for where it is shown).
    snippet: str


def _candidates(dialect: str, query_words: list[str], columns: str, order: str = "",
                mark: str = ":q") -> tuple[str, dict[str, str]]:
    """A ``SELECT columns`` (of ``e``, the events, and ``r``, their recordings) of
    the lines the index finds holding a word that starts with each of
    ``query_words``, ordered by ``order``; the query's parameter written
    ``mark`` (``:q``: SQLAlchemy's and :mod:`sqlite3`'s; psycopg's ``%(q)s``)."""
    if dialect == "postgresql":
        return (f"SELECT {columns} FROM event_search s "
                "JOIN events e ON e.recording_id = s.recording_id AND e.seq = s.seq "
                "JOIN recordings r ON r.id = e.recording_id "
                f"WHERE s.terms @@ CAST({mark} AS tsquery) {order}",
                {"q": _tsquery(query_words)})
    return (f"SELECT {columns} FROM event_search s "
            "JOIN events e ON e.rowid = s.rowid "
            "JOIN recordings r ON r.id = e.recording_id "
            f"WHERE event_search MATCH {mark} {order}",
            {"q": _match(query_words)})


def _match(query_words: list[str]) -> str:
    """FTS5's query for lines with a word starting with each of ``query_words``."""
    return " ".join(f'"{w}"*' for w in query_words)


def _tsquery(query_words: list[str]) -> str:
    """PostgreSQL's query for lines with a word starting with each of ``query_words``,
    written out whole (cast, not parsed by ``to_tsquery``, which cuts a word such as
    ``49e9e56a893f`` in two as it once cut the index's words)."""
    return " & ".join(f"'{w}':*" for w in query_words)


def _query(needle: str) -> tuple[list[str], str, bool]:
    """The query's words, the query as looked for in a line's text (case-folded),
    and whether the index alone answers it (one word, nothing else)."""
    query_words = words(needle)
    wanted = fold(needle.strip().casefold())
    return query_words, wanted, query_words == [wanted]


#: What :func:`search` reads of each line found, in order.
_HIT_COLUMNS = ("e.recording_id, e.seq, e.direction, e.type, e.data, e.codec, "
                "r.started_ns, r.name")


#: On SQLite, the lines the index finds are read and sorted when they are at most
#: this many; past it the lines are read in order and those it found kept.
FEW_LINES: Final = 2000

#: Rows: a statement and its parameters, run on the caller's connection.
Fetch = Callable[[str, dict[str, str]], Sequence[Any]]


def _statement(dialect: str, needle: str, fetch: Fetch | None = None,
               mark: str = ":q") -> tuple[str, dict[str, str], str, bool] | None:
    """:func:`search`'s statement and parameters on ``dialect`` (asking the
    database through ``fetch`` which suits), with the query as looked for in a
    line and whether the index alone answers it; None for a query without
    words.  ``fetch`` is needed on SQLite alone.

    Both engines list the lines in one order: the newest session first (a
    recording's id begins with its start time), and a session's last lines
    first (``seq``).  PostgreSQL's planner reads the index's rows by their
    primary key, newest first, for a word many lines say, and sorts those the
    GIN index finds for a rarer one.  On SQLite the lines FTS5 finds (its
    rowids, the events') are read and sorted when they are few
    (:data:`FEW_LINES`); else the events' primary key is read from its end and
    the lines FTS5 found kept: a word many lines say is met again soon, and
    only the lines listed are read whole."""
    query_words, wanted, plain = _query(needle)
    if not query_words:
        return None
    if dialect == "postgresql":
        statement, params = _candidates(dialect, query_words, _HIT_COLUMNS,
                                        "ORDER BY s.recording_id DESC, s.seq DESC", mark)
        return statement, params, wanted, plain
    assert fetch is not None
    params = {"q": _match(query_words)}
    # FTS5 merges the lines of every word a prefix starts before it gives the
    # first (a word many lines say: 0.04-0.07 s at 1M events), and the walk below
    # merges them again; the words as they are (each one list, read only as far
    # as the limit) tell the most common queries from the rest first.
    capped = f"SELECT rowid FROM event_search WHERE event_search MATCH :q LIMIT {FEW_LINES + 1}"
    found = fetch(capped, {"q": " ".join(f'"{w}"' for w in query_words)})
    if len(found) <= FEW_LINES:
        found = fetch(capped, params)
    head = (f"SELECT {_HIT_COLUMNS} FROM events e JOIN recordings r ON r.id = e.recording_id "
            "WHERE ")
    order = " ORDER BY e.recording_id DESC, e.seq DESC"
    if len(found) <= FEW_LINES:
        listed = ", ".join(str(int(row[0])) for row in found) or "NULL"
        return f"{head}e.rowid IN ({listed}){order}", {}, wanted, plain
    # ``+``: the rowids do not drive the query (SQLite would sort every line
    # found); the primary key's order does, each rowid looked up among FTS5's.
    return (f"{head}+e.rowid IN (SELECT rowid FROM event_search WHERE event_search "
            f"MATCH :q){order}", params, wanted, plain)


def _hits(rows: Iterable[Any], wanted: str, plain: bool, limit: int | None,
          unpack: Unpacker) -> list[Hit]:
    """The lines of ``rows`` (:data:`_HIT_COLUMNS`) that say ``wanted``, at most
    ``limit``: read only until the limit is reached."""
    hits: list[Hit] = []
    for rid, seq, direction, kind, data, codec, started_ns, name in rows:
        said = line_text(unpack(data, codec))
        if not (plain or wanted in fold(said.casefold())):
            continue
        hits.append(Hit(rid, seq, direction, kind, started_ns, name, snippet(said, wanted)))
        if limit is not None and len(hits) >= limit:
            break
    return hits


def search(store: Store, needle: str, *, limit: int | None = 50) -> list[Hit]:
    """The lines of every recording that say ``needle``, the newest stored first,
    at most ``limit``."""
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    from .engine import error_reason

    if not words(needle):
        return []
    _catch_up_store(store)
    try:
        # Streamed (a server-side cursor on PostgreSQL): only the lines read until
        # the limit is reached are fetched.
        with store.engine.connect().execution_options(stream_results=True,
                                                      yield_per=200) as conn:
            asked = _statement(store.engine.dialect.name, needle,
                               lambda sql, params: conn.execute(text(sql), params).fetchall())
            assert asked is not None
            statement, params, wanted, plain = asked
            # Closed when the limit is reached before its end (PostgreSQL's
            # server-side cursor said so as it was collected, a ResourceWarning).
            with conn.execute(text(statement), params) as rows:
                return _hits(rows, wanted, plain, limit, store.unpacker())
    except SQLAlchemyError as exc:
        raise StoreError(f"search failed: {error_reason(exc)}") from exc


def search_plain(url: str, needle: str, *, limit: int | None = 50) -> list[Hit] | None:
    """:func:`search` of the database ``url`` through :mod:`sqlite3` or psycopg
    alone, without SQLAlchemy or the store: a SQLite file named plainly
    (:func:`~.sqlite.plain_file`) or a PostgreSQL URL libpq reads as SQLAlchemy
    does (:func:`~.postgres.plain_url`), at the newest schema.  None for any
    other database, a schema not at the head, or a server that cannot be
    reached: the caller asks the store (:func:`search`), which says why."""
    from .plain import NotPlain, require_head
    from .sqlite import first_line, plain_file

    path = plain_file(url)
    if path is not None:
        return _search_sqlite(path, needle, limit)
    if not url.startswith("postgresql+psycopg://"):
        return None
    from .postgres import plain_url

    conninfo = plain_url(url)
    if conninfo is None:
        return None
    import psycopg

    try:
        conn = psycopg.connect(conninfo)
    except psycopg.Error:
        return None
    try:
        with conn.cursor() as cursor:
            require_head([row[0] for row in cursor.execute(
                "SELECT version_num FROM alembic_version")])
        asked = _statement("postgresql", needle, mark="%(q)s")
        if asked is None:
            return []
        try:
            catch_up(conn, "postgresql")
        except psycopg.Error:  # not ours to write: searched as it stands
            conn.rollback()
        statement, params, wanted, plain = asked
        unpack = Unpacker(lambda number: stored_dictionary(conn.cursor(), number))
        # A server-side cursor: only the lines read until the limit are fetched.
        with conn.cursor(name="claudetrace_search") as cursor:
            cursor.itersize = 200
            cursor.execute(statement, params)
            return _hits(cursor, wanted, plain, limit, unpack)
    except (NotPlain, psycopg.errors.UndefinedTable):
        return None
    except psycopg.Error as exc:
        raise StoreError(f"search failed: {first_line(exc)}") from exc
    finally:
        conn.close()


def _search_sqlite(path: Any, needle: str, limit: int | None) -> list[Hit] | None:
    """:func:`search_plain` of a SQLite file (it exists: :func:`~.sqlite.plain_file`)."""
    import sqlite3

    from .plain import NotPlain, require_head
    from .sqlite import BUSY_TIMEOUT_S, first_line

    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error:
        return None
    try:
        try:
            require_head([row[0] for row in conn.execute(
                "SELECT version_num FROM alembic_version")])
        except (NotPlain, sqlite3.Error):
            return None
        if not words(needle):
            return []
        _catch_up_sqlite(path)
        asked = _statement("sqlite", needle,
                           lambda sql, params: conn.execute(sql, params).fetchall())
        assert asked is not None
        statement, params, wanted, plain = asked
        unpack = Unpacker(lambda number: stored_dictionary(conn.cursor(), number, "?"))
        return _hits(conn.execute(statement, params), wanted, plain, limit, unpack)
    except sqlite3.Error as exc:
        raise StoreError(f"search failed: {first_line(exc)}") from exc
    finally:
        conn.close()


def recordings_saying(store: Store, needle: str) -> list[str]:
    """The ids of the recordings that have a line saying ``needle`` (one word: from
    the index alone; else the lines it finds are read, one recording's only
    until one says it)."""
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    from .engine import error_reason

    query_words, wanted, plain = _query(needle)
    if not query_words:
        return []
    _catch_up_store(store)
    dialect = store.engine.dialect.name
    found: set[str] = set()
    try:
        with store.engine.connect() as conn:
            if plain and dialect == "postgresql":
                # The index's rows name their recording: no event is read (joined
                # to the events, a word every session says took 7.8-11.9 s at
                # 10M events, against 0.37-0.59 s so).
                return sorted(conn.execute(text(
                    "SELECT r.id FROM recordings r WHERE r.id IN (SELECT s.recording_id "
                    "FROM event_search s WHERE s.terms @@ CAST(:q AS tsquery))"),
                    {"q": _tsquery(query_words)}).scalars())
            if plain:
                statement, params = _candidates(dialect, query_words, "DISTINCT e.recording_id")
                return sorted(conn.execute(text(statement), params).scalars())
            statement, params = _candidates(dialect, query_words,
                                            "e.recording_id, e.seq, e.data, e.codec")
            unpack = store.unpacker()
            for rid, _seq, data, codec in conn.execute(text(statement), params):
                if rid not in found and wanted in fold(line_text(unpack(data, codec)).casefold()):
                    found.add(rid)
    except SQLAlchemyError as exc:
        raise StoreError(f"search messages failed: {error_reason(exc)}") from exc
    return sorted(found)


def _catch_up_store(store: Store) -> None:
    """:func:`~.packing.catch_up` through the store; a store it cannot write is
    searched as it stands."""
    try:
        store.pack_lines(catching_up=True)
    except StoreError:
        pass
    except Exception as exc:  # the driver's own (the pass runs on it): sqlite3, psycopg
        if type(exc).__module__.split(".")[0] not in ("sqlite3", "psycopg"):
            raise


def _catch_up_sqlite(path: Any) -> None:
    """:func:`~.packing.catch_up` of a SQLite file, on a connection of its own (the
    pass opens its own transactions); a file it cannot write is searched as it
    stands."""
    import sqlite3

    from .sqlite import BUSY_TIMEOUT_S

    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error:
        return
    try:
        catch_up(conn, "sqlite")
    except sqlite3.Error:
        pass
    finally:
        conn.close()


def snippet(said: str, wanted: str, context: int = SNIPPET_CONTEXT) -> str:
    """``said`` around the first place it says ``wanted`` (else its first word of
    the query, else its start), whitespace runs made single spaces."""
    folded = fold(said.casefold())
    at = folded.find(wanted)
    if at < 0:
        first = words(wanted)
        at = folded.find(first[0]) if first else 0
    at = max(at, 0)
    start, end = max(0, at - context), min(len(said), at + len(wanted) + context)
    shown = " ".join(said[start:end].split())
    return ("…" if start else "") + shown + ("…" if end < len(said) else "")

