"""Text search over every session, through the word index (:mod:`.textindex`).

A line matches when its readable text (message text, tool names and arguments,
results) says the query, ignoring case and a Latin letter's accents: one word,
a word starting with it; words, those words one after the other, the last
from its beginning (a phrase: what is between them in the line, spaces or
punctuation, is not compared); a query with punctuation, its text as typed,
from a word's beginning.  The index answers a word alone, and on SQLite a
phrase too (FTS5's positions, migration 0021_phrases); otherwise it gives the
lines holding the words and, on PostgreSQL, a phrase's pairs of words (keys of
a word and the next one's first letters, migration 0023_pairs: its
``tsvector``s hold no positions) or saying them one after the other (SQLite),
whose words or text are checked.
``claudetrace search`` and the session browser's search box both ask here.

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

import contextlib
import itertools
import json
import re
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..errors import StoreError
from ..model.protocol import line_text
from . import keys
from .backlog import catch_up
from .packing import Unpacker, stored_dictionary
from .textindex import MOST_CHARS, SEARCHED_TYPES, fold, phrase_keys, spaced, words

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


def _match(query_words: list[str], *, prefix: bool = True) -> str:
    """FTS5's query for lines saying ``query_words`` one after the other (a phrase
    query), the last from its beginning (``prefix``; else as it is)."""
    return f'"{" ".join(query_words)}"' + ("*" if prefix else "")


def _tsquery(query_words: list[str]) -> str:
    """PostgreSQL's query for lines with a word starting with each of ``query_words``,
    written out whole (cast, not parsed by ``to_tsquery``, which cuts a word such as
    ``49e9e56a893f`` in two as it once cut the index's words)."""
    return " & ".join(f"'{w}':*" for w in query_words)


#: How a line the index finds is checked (:func:`query`): not at all (the index
#: answers), its words (PostgreSQL, a phrase: its index holds no positions) or
#: its text (a query with punctuation).
BY_INDEX, BY_WORDS, BY_TEXT = "index", "words", "text"


@dataclass(frozen=True, slots=True)
class Query:
    """A query as the search asks it (:func:`query`)."""

    #: Its words as the index holds them.
    words: list[str]
    #: The query as looked for in a line's text (case- and accent-folded).
    wanted: str
    #: How a line the index finds is checked (:data:`BY_INDEX`…).
    check: str
    #: :data:`BY_TEXT`: the query as a line's bytes hold it (:func:`_literal`).
    literal: bytes | None = None
    #: :data:`BY_WORDS`: the words as a line's bytes hold them (:func:`_written`).
    written: re.Pattern[bytes] | None = None
    #: :data:`BY_WORDS`: the keys of the phrase's pairs of words every line saying
    #: it holds in PostgreSQL's index (:func:`~.textindex.phrase_keys`; empty:
    #: none, a phrase of two words the last of one letter).
    pairs: tuple[int, ...] = ()

    def may_say(self, line: bytes) -> bool:
        """False only when ``line`` (its bytes) cannot say the query, told
        without decoding it (:func:`_may_say`, :func:`_may_say_words`)."""
        if self.check == BY_WORDS:
            return _may_say_words(line, self.written)
        return self.check != BY_TEXT or _may_say(line, self.literal)

    def says(self, said: str, folded: str) -> bool:
        """Whether a line the index found, whose text is ``said`` (``folded``:
        case- and accent-folded), says the query."""
        if self.check == BY_WORDS:
            return says_words(said, self.words)
        return self.check == BY_INDEX or said_at(folded, self.wanted) >= 0


def query(needle: str, dialect: str) -> Query:
    """``needle`` as the search asks it on the engine ``dialect``: its words, and
    how a line the index finds is checked (a query of plain words, by the index
    alone where it answers: one word, or a phrase on SQLite)."""
    query_words = words(needle)
    # Spaces and tabs between words are one space: whitespace, not punctuation.
    wanted = " ".join(fold(needle.casefold()).split())
    if wanted != " ".join(query_words):
        return Query(query_words, wanted, BY_TEXT, literal=_literal(wanted))
    if dialect == "sqlite" or len(query_words) == 1:
        return Query(query_words, wanted, BY_INDEX)
    return Query(query_words, wanted, BY_WORDS, written=_written(query_words),
                 pairs=tuple(phrase_keys(query_words)))


def says_words(said: str, query_words: list[str]) -> bool:
    """Whether the text ``said`` holds ``query_words`` one after the other, the
    last from its beginning, as the index cuts it (FTS5's phrase query)."""
    line_words = spaced(said[:MOST_CHARS]).lower().split()
    *whole, last = query_words
    size = len(query_words)
    return any(line_words[at:at + size - 1] == whole
               and line_words[at + size - 1].startswith(last)
               for at in range(len(line_words) - size + 1))


def said_at(folded: str, wanted: str) -> int:
    """Where the folded text ``folded`` says ``wanted`` from a word's beginning
    (not inside a word: the index finds words from their beginnings); -1 when
    it does not."""
    at = folded.find(wanted)
    while at > 0 and wanted[:1].isalnum() and folded[at - 1].isalnum():
        at = folded.find(wanted, at + 1)
    return at


#: The punctuation a JSON writer never escapes (RFC 8259 escapes ``"``, ``\\`` and
#: control characters; ``/`` may be; ``\\u`` escapes are told apart by the line).
_AS_WRITTEN: Final = frozenset(" !#$%&'()*+,-.:;<=>?@[]^_`{|}~")


def _literal(wanted: str) -> bytes | None:
    """``wanted`` (a query as looked for in a line's text) as an ASCII line's bytes
    hold it wherever its text says it, lower-cased (:func:`_may_say`); None when
    it holds a character a JSON writer may escape."""
    if wanted.isascii() and all(c.isalnum() or c in _AS_WRITTEN for c in wanted):
        return wanted.encode()
    return None


def _may_say(line: bytes, literal: bytes | None) -> bool:
    """Whether ``line`` (its bytes) may say the query whose :func:`_literal` is
    ``literal``: False only when it cannot, told without decoding it.

    An ASCII line with no ``\\u`` escape has an ASCII text whose letters, digits,
    spaces and unescaped punctuation are its bytes as they are, in order (JSON
    writes no other way a character ``literal`` holds), and such text is
    case-folded as its bytes are lower-cased (no accents to take off): a line
    whose lower-cased bytes do not hold ``literal`` cannot say it.  Most lines
    the index finds for a phrase whose words are common but which few lines
    say are left so, without parsing them (each parsed, a phrase no line said
    took 3.9 s at 1M events on PostgreSQL, loaded)."""
    return (literal is None or not line.isascii() or b"\\u" in line
            or literal in line.lower())


#: Between two words of a phrase in a line's bytes: what is not a letter or a
#: digit, or, the phrase going on in a later part of the line's text (its parts
#: are joined by a line break), the rest of one JSON string and the start of a
#: later one.
_BETWEEN: Final = rb'(?:[^a-z0-9]+|[^a-z0-9]*".*?"[^a-z0-9]*)'
#: The longest line :func:`_may_say_words` looks at in its bytes (the pattern
#: may read a line again for each place it holds the first word).
_WRITTEN_UP_TO: Final = 65536


def _written(query_words: list[str]) -> re.Pattern[bytes] | None:
    """A pattern of ``query_words`` said one after the other in an ASCII line's
    lower-cased bytes (:func:`_may_say_words`); None when a word is not ASCII.
    It begins with the first word as it is, which the pattern's search looks
    for first (begun with a look-behind for a word's beginning, it took five
    times as long: 0.48 s for 42,000 lines)."""
    if not all(w.isascii() for w in query_words):
        return None
    return re.compile(_BETWEEN.join(w.encode() for w in query_words))


def _may_say_words(line: bytes, written: re.Pattern[bytes] | None) -> bool:
    """Whether ``line`` (its bytes) may hold the words of the phrase whose
    :func:`_written` pattern is ``written`` one after the other: False only when
    it cannot, told without decoding it.

    An ASCII line with no ``\\`` escape writes its text's letters and digits as
    they are, each run of other characters between two words of one string as
    what is not a letter or a digit, and between two strings (the text's parts)
    a closing and an opening quote: a line whose lower-cased bytes do not
    match cannot say the phrase (each line holding the words parsed, a phrase
    no line said took 3.9 s at 1M events on PostgreSQL, loaded)."""
    return (written is None or len(line) > _WRITTEN_UP_TO or not line.isascii()
            or b"\\" in line or written.search(line.lower()) is not None)


#: What :func:`search` reads of each line found, in order.
_HIT_COLUMNS = ("r.id, e.seq, e.direction, e.type, e.data, e.codec, "
                "r.started_ns, r.name")
#: :func:`search`'s order: the newest session first (a recording's id begins with
#: its start time), a session's last lines first.  The index's rows are keyed by
#: the recording's number (:mod:`.keys`), whose order is the order recordings
#: were stored in (an old session imported today is numbered last): the id gives
#: the order, through ``recordings``.
_NEWEST: Final = "ORDER BY r.id DESC, e.seq DESC"


#: On SQLite, the lines the index finds are read and sorted when they are at most
#: this many; past it the lines are read in order and those it found kept.  On
#: PostgreSQL, the index's newest rows looked at before the rest are asked of it.
FEW_LINES: Final = 2000
#: Lines read a statement, once the index's keys are sorted (PostgreSQL).
_KEYS_A_READ: Final = 200

#: Rows of a statement and its parameters, run on the caller's connection:
#: streamed (read only as far as they are taken; on PostgreSQL a server-side
#: cursor, which the planner makes the first rows quick for), or, ``False``, all
#: at once (planned for all of them).
Run = Callable[[str, dict[str, Any], bool], Iterator[Any]]


def _param(dialect: str) -> Callable[[str], str]:
    """How a statement names a parameter: psycopg's ``%(name)s``, else ``:name``
    (SQLAlchemy's and :mod:`sqlite3`'s)."""
    if dialect == "psycopg":
        return lambda name: f"%({name})s"
    return lambda name: f":{name}"


def _lines(dialect: str, asked: Query, limit: int | None,
           run: Run) -> Generator[Any, None, None]:
    """The lines (:data:`_HIT_COLUMNS`) the index finds holding a word that starts
    with each of ``query_words``, in :func:`search`'s order: the newest session
    first (a recording's id begins with its start time), and a session's last
    lines first (``seq``); read only as far as they are taken (the caller keeps
    those saying the query until it has ``limit``); on PostgreSQL, holding the
    keys of a phrase's pairs of words too (``asked.pairs``).  ``dialect`` is
    ``postgresql`` through SQLAlchemy, ``psycopg`` through psycopg alone, or
    ``sqlite``."""
    if dialect == "sqlite":
        yield from _sqlite_lines(asked.words, run)
    else:
        yield from _postgres_lines(asked, limit, run, _param(dialect))


def _postgres_match(asked: Query, param: Callable[[str], str]) -> tuple[str, dict[str, Any]]:
    """The condition on the index's rows (``s``) of the lines that may say ``asked``
    on PostgreSQL, and its parameters: a word starting with each of its words,
    and for a phrase the keys of its pairs (migration 0023_pairs: a phrase of
    common words that no line says is answered by the index, no line read)."""
    found = f"s.terms @@ CAST({param('q')} AS tsquery)"
    if not asked.pairs:
        return found, {"q": _tsquery(asked.words)}
    return (f"{found} AND s.pairs @> CAST({param('p')} AS integer[])",
            {"q": _tsquery(asked.words), "p": list(asked.pairs)})


def _postgres_lines(asked_for: Query, limit: int | None, run: Run,
                    param: Callable[[str], str]) -> Iterator[Any]:
    """:func:`_lines` on PostgreSQL.

    With a limit, the index's newest :data:`FEW_LINES` rows are looked at first,
    read in order by its primary key: a word many lines say is met there soon.
    Past them (or with no limit), the GIN index gives the keys of every line
    holding the words, which are sorted and read a few hundred at a time.  Asked
    as one statement, newest first, the planner read the primary key backwards
    for any word, a rare one to the end of the index (0.34 s at 1M events, in
    proportion to them), since it cannot tell a rare word's prefix from a
    common one's."""
    match, asked = _postgres_match(asked_for, param)
    below: tuple[str, int] | None = None
    if limit is not None:
        # The index's newest rows: the recordings newest first (their key read
        # backwards), each one's rows by its key, a recording's sorted at a time.
        newest = ("FROM recordings r CROSS JOIN LATERAL (SELECT x.rec, x.seq, x.terms, "
                  "x.pairs FROM event_search x WHERE x.rec = r.num) s "
                  "ORDER BY r.id DESC, s.seq DESC")
        window = f"(SELECT s.rec, s.seq, s.terms, s.pairs {newest} LIMIT {FEW_LINES}) s"
        yield from run(f"SELECT {_HIT_COLUMNS} FROM {window} JOIN events e ON e.rec = s.rec "
                       f"AND e.seq = s.seq {keys.join('e')} WHERE {match} {_NEWEST}",
                       asked, True)
        last = list(run(f"SELECT r.id, s.seq {newest} OFFSET {FEW_LINES - 1} LIMIT 1",
                        {}, False))
        if not last:
            return  # the window was the whole index
        below = (last[0][0], last[0][1])
    # All at once: a server-side cursor's plan, made to give its first rows
    # soon, read the whole table for a rare word (0.64 s at 1M events).
    found = sorted(((rid, seq) for rid, seq in run(
        f"SELECT r.id, s.seq FROM event_search s {keys.join('s')} WHERE {match}", asked,
        False)), reverse=True)
    if below is not None:
        found = [key for key in found if key < below]
    listed = (f"unnest(CAST({param('r')} AS varchar[]), CAST({param('n')} AS integer[])) "
              "AS k(id, seq) JOIN recordings r ON r.id = k.id "
              "JOIN events e ON e.rec = r.num AND e.seq = k.seq")
    for at in range(0, len(found), _KEYS_A_READ):
        part = found[at:at + _KEYS_A_READ]
        yield from run(f"SELECT {_HIT_COLUMNS} FROM {listed} {_NEWEST}",
                       {"r": [rid for rid, _ in part], "n": [seq for _, seq in part]}, True)


def _sqlite_lines(query_words: list[str], run: Run) -> Iterator[Any]:
    """:func:`_lines` on SQLite.

    The lines FTS5 finds (its rowids, the events') are read and sorted when they
    are few (:data:`FEW_LINES`); else the events' primary key is read from its
    end and the lines FTS5 found kept: a word many lines say is met again soon,
    and only the lines listed are read whole."""
    found = _few_rowids(query_words, run)
    head = f"SELECT {_HIT_COLUMNS} FROM recordings r JOIN events e ON e.rec = r.num WHERE "
    order = f" {_NEWEST}"
    if found is not None:
        yield from run(f"{head}e.rowid IN ({_numbers(found)}){order}", {}, True)
        return
    # ``+``: the rowids do not drive the query (SQLite would sort every line
    # found); the primary key's order does, each rowid looked up among FTS5's.
    yield from run(f"{head}+e.rowid IN ({_FOUND}){order}", {"q": _match(query_words)}, True)


#: The rowids of the lines FTS5 finds (SQLite), a set SQLite makes once a statement.
_FOUND: Final = "SELECT rowid FROM event_search WHERE event_search MATCH :q"


def _few_rowids(query_words: list[str], run: Run) -> list[int] | None:
    """The rowids of the lines FTS5 finds holding a word that starts with each of
    ``query_words`` when they are :data:`FEW_LINES` or fewer; else None."""
    # FTS5 merges the lines of every word a prefix starts before it gives the
    # first (a word many lines say: 0.06-0.1 s at 1M events, loaded, whatever
    # rowids are asked for), and a walk merges them again; the words as they
    # are (each one list, read only as far as the limit) tell the most common
    # queries from the rest first.
    capped = f"{_FOUND} LIMIT {FEW_LINES + 1}"
    found = list(run(capped, {"q": _match(query_words, prefix=False)}, False))
    if len(found) <= FEW_LINES:
        found = list(run(capped, {"q": _match(query_words)}, False))
    return [int(row[0]) for row in found] if len(found) <= FEW_LINES else None


def _numbers(values: Iterable[int]) -> str:
    """A list of integers as SQL (none: ``NULL``), written as numbers, not bound
    (a parameter each would pass the 999 older SQLite builds bind)."""
    return ", ".join(str(int(value)) for value in values) or "NULL"


def _hits(rows: Generator[Any, None, None], asked: Query, limit: int | None,
          unpack: Unpacker) -> list[Hit]:
    """The lines of ``rows`` (:data:`_HIT_COLUMNS`) that say ``asked``, at most
    ``limit``: read only until the limit is reached (``rows`` is closed then)."""
    hits: list[Hit] = []
    with contextlib.closing(rows):
        for rid, seq, direction, kind, data, codec, started_ns, name in rows:
            line = unpack(data, codec)
            if not asked.may_say(line):
                continue
            said = line_text(line)
            folded = fold(said.casefold())
            if not asked.says(said, folded):
                continue
            hits.append(Hit(rid, seq, direction, kind, started_ns, name,
                            snippet(said, asked.wanted, folded=folded)))
            if limit is not None and len(hits) >= limit:
                break
    return hits


def search(store: Store, needle: str, *, limit: int | None = 50) -> list[Hit]:
    """The lines of every recording that say ``needle``, the newest stored first,
    at most ``limit``."""
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    from .engine import error_reason

    dialect = store.engine.dialect.name
    asked = query(needle, dialect)
    if not asked.words:
        return []
    _catch_up_store(store)
    try:
        with store.engine.connect() as conn:

            def run(statement: str, params: dict[str, Any], stream: bool) -> Iterator[Any]:
                # Streamed: a server-side cursor on PostgreSQL, only the lines read
                # until the limit is reached fetched; closed when it is reached
                # before its end (the cursor said so as it was collected, a
                # ResourceWarning).
                if not stream:
                    yield from conn.execute(text(statement), params).all()
                    return
                options = {"stream_results": True, "yield_per": _KEYS_A_READ}
                with conn.execute(text(statement), params, execution_options=options) as rows:
                    yield from rows

            return _hits(_lines(dialect, asked, limit, run), asked, limit,
                         store.unpacker())
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
        asked = query(needle, "postgresql")
        if not asked.words:
            return []
        try:
            catch_up(conn, "postgresql")
        except psycopg.Error:  # not ours to write: searched as it stands
            conn.rollback()
        unpack = Unpacker(lambda number: stored_dictionary(conn.cursor(), number))
        cursors = itertools.count()

        def run(statement: str, params: dict[str, Any], stream: bool) -> Iterator[Any]:
            # Streamed: a server-side cursor, only the lines read until the limit
            # is reached fetched.
            if not stream:
                yield from conn.execute(statement, params).fetchall()
                return
            with conn.cursor(name=f"claudetrace_search_{next(cursors)}") as cursor:
                cursor.itersize = _KEYS_A_READ
                cursor.execute(statement, params)
                yield from cursor

        return _hits(_lines("psycopg", asked, limit, run), asked, limit, unpack)
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
        asked = query(needle, "sqlite")
        if not asked.words:
            return []
        _catch_up_sqlite(path)

        def run(statement: str, params: dict[str, Any], _stream: bool) -> Iterator[Any]:
            yield from conn.execute(statement, params)

        unpack = Unpacker(lambda number: stored_dictionary(conn.cursor(), number, "?"))
        return _hits(_lines("sqlite", asked, limit, run), asked, limit, unpack)
    except sqlite3.Error as exc:
        raise StoreError(f"search failed: {first_line(exc)}") from exc
    finally:
        conn.close()


def recordings_saying(store: Store, needle: str) -> list[str]:
    """The ids of the recordings that have a line saying ``needle`` (words: from
    the index alone where it answers, :func:`query`; else the lines it finds are
    read, one recording's only until one says it: :func:`_saying`)."""
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    from .engine import error_reason

    dialect = store.engine.dialect.name
    asked = query(needle, dialect)
    if not asked.words:
        return []
    _catch_up_store(store)
    try:
        with store.engine.connect() as conn:

            def run(statement: str, params: dict[str, Any], _stream: bool) -> Iterator[Any]:
                # Not a server-side cursor: planned for every row, not the first;
                # taken a part at a time (a row at a time, 34,000 rows of a
                # phrase took 0.5 s).
                for part in conn.execute(text(statement), params).partitions(_KEYS_A_READ):
                    yield from part

            if asked.check == BY_INDEX and dialect == "postgresql":
                # The index's rows name their recording: no event is read (joined
                # to the events, a word every session says took 7.8-11.9 s at
                # 10M events, against 0.37-0.59 s so).
                return sorted(rid for (rid,) in run(
                    "SELECT r.id FROM recordings r WHERE r.num IN (SELECT s.rec "
                    "FROM event_search s WHERE s.terms @@ CAST(:q AS tsquery))",
                    {"q": _tsquery(asked.words)}, False))
            found_by = (_postgres_found(asked, run) if dialect == "postgresql"
                        else _sqlite_found(asked.words, run))
            if asked.check == BY_INDEX:
                return sorted(found_by[0]())
            return sorted(_saying(dialect, found_by, asked, run, store.unpacker()))
    except SQLAlchemyError as exc:
        raise StoreError(f"search messages failed: {error_reason(exc)}") from exc


#: Where :func:`_saying` reads: each recording's first line the index finds
#: holding the words (its key: ``seq`` on PostgreSQL, the rowid on SQLite), and
#: ``(recording_id, key, data, codec)`` of every such line of the recordings named.
Found = tuple[Callable[[], dict[str, int]], Callable[[list[str]], Iterator[Any]]]


def _postgres_found(asked_for: Query, run: Run) -> Found:
    """:data:`Found` on PostgreSQL, the first lines from the index's rows alone
    (holding a phrase's pairs' keys too: :func:`_postgres_match`)."""
    match, asked = _postgres_match(asked_for, _param("postgresql"))

    def first() -> dict[str, int]:
        # Grouped by the recording's number first: its id looked up once a
        # recording, not once a line.
        return dict(run(f"SELECT r.id, f.seq FROM (SELECT s.rec, min(s.seq) AS seq "
                        f"FROM event_search s WHERE {match} GROUP BY s.rec) f "
                        "JOIN recordings r ON r.num = f.rec", asked, False))

    def lines(among: list[str]) -> Iterator[Any]:
        return run("SELECT r.id, s.seq, e.data, e.codec FROM event_search s JOIN "
                   f"events e ON e.rec = s.rec AND e.seq = s.seq {keys.join('s')} "
                   f"WHERE {match} AND r.id = ANY(:ids)",
                   {**asked, "ids": among}, False)

    return first, lines


def _sqlite_found(query_words: list[str], run: Run) -> Found:
    """:data:`Found` on SQLite.  When FTS5 finds few lines (:func:`_few_rowids`)
    their recordings are read from their rows; else the message lines of each
    recording are read from an index (``ix_events_recording_type``, no row read)
    and kept when FTS5 found them: each line found joined to its row took
    0.81-1.12 s at 1M events for a word every session says, against 0.18-0.45 s
    so."""
    few = _few_rowids(query_words, run)
    messages = (f"e.type IN ({', '.join(repr(t) for t in sorted(SEARCHED_TYPES))}) "
                "AND e.type <> 'stream_event'")  # the partial index's own condition too
    asked = {"q": _match(query_words)}

    def first() -> dict[str, int]:
        if few is not None:
            return dict(run(f"SELECT r.id, min(e.rowid) FROM events e {keys.join('e')} "
                            f"WHERE e.rowid IN ({_numbers(few)}) GROUP BY r.id", {}, False))
        # (A condition on the first line would look for it again.)
        return {rid: rowid for rid, rowid in run(
            "SELECT r.id, (SELECT min(e.rowid) FROM events e WHERE e.rec = r.num "
            f"AND {messages} AND +e.rowid IN ({_FOUND})) FROM recordings r", asked, False)
            if rowid is not None}

    def lines(among: list[str]) -> Iterator[Any]:
        wanted = set(among)
        if few is not None:
            found = run(f"SELECT r.id, e.rowid, e.data, e.codec FROM events e {keys.join('e')} "
                        f"WHERE e.rowid IN ({_numbers(few)})", {}, False)
        else:  # each line's row read by its rowid (a scan of the messages' index read more)
            found = run("SELECT r.id, e.rowid, e.data, e.codec FROM event_search s "
                        f"JOIN events e ON e.rowid = s.rowid {keys.join('e')} "
                        "WHERE event_search MATCH :q", asked, False)
        return (row for row in found if row[0] in wanted)

    return first, lines


def _saying(dialect: str, found_by: Found, asked: Query, run: Run,
            unpack: Unpacker) -> set[str]:
    """The recordings with a line saying ``wanted`` among the lines the index
    finds (``found_by``): first one line of each recording is read, then, in one
    statement, the others of those whose line did not say it, each decoded but
    for the recordings found meanwhile.  A phrase many sessions say is said in
    the first line read of most (every line holding its words read and decoded
    took 3.5-6.2 s at 1M events on PostgreSQL, loaded, for a phrase every
    session says)."""

    def says(data: bytes, codec: int | None) -> bool:
        line = unpack(data, codec)
        if not asked.may_say(line):
            return False
        said = line_text(line)
        return asked.says(said, fold(said.casefold()))

    first_of, lines_of = found_by
    first = first_of()
    found = {rid for rid, data, codec in _lines_by_key(dialect, list(first.items()), run)
             if says(data, codec)}
    rest = sorted(set(first) - found)
    if rest:
        for rid, key, data, codec in lines_of(rest):
            if rid not in found and key != first[rid] and says(data, codec):
                found.add(rid)
    return found


def _lines_by_key(dialect: str, found: list[tuple[str, int]], run: Run) -> Iterator[Any]:
    """``(recording_id, data, codec)`` of the lines ``found`` names (:data:`Found`).
    On PostgreSQL the keys are one JSON parameter (as two arrays, psycopg took
    0.06 s to write 5,000 keys, loaded)."""
    if not found:
        return iter(())
    if dialect == "postgresql":
        return run("SELECT r.id, e.data, e.codec FROM "
                   "(SELECT p->>0 AS id, CAST(p->>1 AS integer) AS k "
                   "FROM json_array_elements(CAST(:keys AS json)) AS p) AS f "
                   "JOIN recordings r ON r.id = f.id JOIN events e ON e.rec = r.num "
                   "AND e.seq = f.k",
                   {"keys": json.dumps(found)}, False)
    return run(f"SELECT r.id, e.data, e.codec FROM events e {keys.join('e')} WHERE e.rowid IN "
               f"({_numbers(k for _, k in found)})", {}, False)


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


def snippet(said: str, wanted: str, context: int = SNIPPET_CONTEXT, *,
            folded: str | None = None) -> str:
    """``said`` around the first place it says ``wanted`` (else its first word of
    the query, else its start), whitespace runs made single spaces; ``folded``:
    ``said`` case- and accent-folded, when the caller has it."""
    if folded is None:
        folded = fold(said.casefold())
    at = said_at(folded, wanted)
    if at < 0:
        first = words(wanted)
        at = folded.find(first[0]) if first else 0
    at = max(at, 0)
    start, end = max(0, at - context), min(len(said), at + len(wanted) + context)
    shown = " ".join(said[start:end].split())
    return ("…" if start else "") + shown + ("…" if end < len(said) else "")

