"""The search words a burst's batches left for later, added before a search.

The indexer's writer stores a burst's batches without their message lines'
words (:func:`~.plain.defers_words`) and marks the recording
(:data:`~.packing.WORDS_LATER`); the pass that packs the recording's lines once
it ends adds them (:mod:`.packing`).  Before it searches, ``claudetrace search``
(and the session browser's search box) runs :func:`catch_up`, which adds what
is missing of every marked recording, whoever is or is not writing it:

- an **ended** recording whose indexer did not run its pass (killed, the
  machine off) gets that pass (:func:`~.packing.pack_recording`);
- a recording **still being written** (its proxy lives on this host, or its
  heartbeat is fresh: :func:`~claudetrace.recording.still_written`) gets the words of the
  lines stored so far (:func:`add_words`), so a running session is searchable
  as soon as its lines are stored, burst or not; the mark stays for the lines
  to come.  Its own indexer adds them too, once its input pauses
  (:func:`add_running_words`), so that a search usually finds none missing;
- a recording **nobody writes any more** that never ended (its proxy and its
  indexer both killed, and its capture gone: nothing will end it) gets its
  words too, and loses the mark.

:func:`add_words` reads a chunk of the lines without words outside any
transaction, works their words out, and writes them in a short one (the
recording held as the pass holds it), checking again which still lack them:
a writer recording the session waits at most for one such write, and a search
stopped half way leaves what it wrote, the next going on from there.

No SQLAlchemy: ``claudetrace search`` runs this on :mod:`sqlite3` or psycopg alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from ..recording import still_written
from .packing import (
    CHUNK,
    UNINDEXED_POSTGRES,
    WORDS_LATER,
    WORDS_UP_TO,
    Unpacker,
    _Db,
    _words_done,
    chunk_end,
    edit_extra,
    pack_all,
    plain_connection,
    stored_dictionary,
)
from .textindex import SEARCHED_TYPES, entry, insert_postgres, insert_sqlite

#: The message lines the index should hold, in a form that can use
#: ``ix_events_recording_type`` (a partial index: its own condition said too).
_MESSAGES = (f"e.type IN ({', '.join(repr(t) for t in sorted(SEARCHED_TYPES))}) "
             "AND e.type <> 'stream_event'")


def _lacking(db: _Db) -> str:
    """The condition of an event row ``e`` with no entry in the search index."""
    if db.sqlite:
        return "NOT EXISTS (SELECT 1 FROM event_search s WHERE s.rowid = e.rowid)"
    return UNINDEXED_POSTGRES


#: The partial index of the recordings marked (:data:`~.packing.WORDS_LATER`),
#: which a search asks for first (migration 0018): the mark read from every
#: recording's ``extra`` took 75-127 ms at 5,000 recordings on PostgreSQL.
MARKED_INDEX: Final = "ix_recordings_words_later"


def marked_condition(dialect: str) -> str:
    """The condition of a marked recording, as its index (:data:`MARKED_INDEX`)
    says it: a query that says it so reads the index alone."""
    text = "extra" if dialect == "sqlite" else "CAST(extra AS TEXT)"
    return f"{text} LIKE '%\"{WORDS_LATER}\"%'"


def marked(connection: Any, dialect: str, now_ns: int | None = None
           ) -> tuple[list[str], list[tuple[str, bool, int]]]:
    """The recordings some of whose lines may lack their search words
    (:data:`~.packing.WORDS_LATER`): the ended ones' ids, and the others' each
    with whether it is still being written and the seq up to which its lines
    have their words (:data:`~.packing.WORDS_UP_TO`; -1: none known)."""
    db = _Db(connection, dialect)
    text = "extra" if db.sqlite else "CAST(extra AS TEXT)"
    rows = connection.cursor().execute(
        f"SELECT id, ended_ns, host, pid, source, last_seen_ns, started_ns, {text} "
        f"FROM recordings WHERE {marked_condition(dialect)} ORDER BY id").fetchall()
    if not db.sqlite:
        connection.rollback()
    ended = [str(row[0]) for row in rows if row[1] is not None]
    # A proxy living on this host is writing the recording, whatever its
    # heartbeat says (still_written): a recording taken for abandoned loses
    # its mark, and the words of its lines to come would wait for its end.
    others = [(str(rid), still_written(host=host, pid=pid, source=source, last_seen_ns=seen,
                                       started_ns=started, now_ns=now_ns),
               _up_to(extra))
              for rid, end, host, pid, source, seen, started, extra in rows if end is None]
    return ended, others


def _up_to(extra: Any) -> int:
    try:
        found = json.loads(extra).get(WORDS_UP_TO, -1)
    except (TypeError, ValueError, AttributeError):
        return -1
    return found if type(found) is int else -1


def catch_up(connection: Any, dialect: str) -> int:
    """Give the search index every word of every stored line of every recording
    whose writer left some out (:func:`marked`), ended, running or abandoned
    (see the module's text); returns the lines looked at (none when the store
    is caught up: one query of the recordings, and one of each running
    recording's newest line)."""
    ended, others = marked(connection, dialect)
    done = pack_all(connection, dialect, ended)
    for rid, alive, up_to in others:
        done += add_words(connection, dialect, rid, finished=not alive, after=up_to)
    return done


def add_words(connection: Any, dialect: str, recording_id: str, *, finished: bool,
              after: int = -1, chunk: int = CHUNK,
              stop: Callable[[], bool] | None = None) -> int:
    """Add the words of ``recording_id``'s message lines stored so far (past seq
    ``after``, up to its newest now) without them, ``chunk`` lines (at most
    :data:`~.packing.CHUNK_BYTES` of them, but one) a transaction, on a DB-API
    ``connection`` (:mod:`sqlite3` in autocommit mode, or psycopg).  Each
    transaction notes how far it got (:data:`~.packing.WORDS_UP_TO`), where the
    next call goes on; ``finished``: nothing writes the recording any more, and
    the last transaction takes its marks off instead; ``stop()``, asked after
    each transaction, ends the call there (the recording's indexer has new
    lines to store).  Returns the lines looked at.  The lines are left as they
    are stored (as recorded, or packed by PostgreSQL's writer as it stored
    them: read through the store's dictionaries)."""
    db = _Db(connection, dialect)
    lacking = _lacking(db)

    def dictionary(number: int) -> bytes | None:
        found = stored_dictionary(connection.cursor(), number, db.mark)
        if not db.sqlite:
            connection.rollback()
        return found

    lines = Unpacker(dictionary)
    # The lines stored now: a batch commits its lines whole and in order, so every
    # line up to the newest is there (and one stored meanwhile is the next call's).
    # Its number keys its lines (.keys); it never changes.
    held = connection.cursor().execute(db.sql(
        "SELECT num FROM recordings WHERE id = ?"), (recording_id,)).fetchone()
    number = None if held is None else held[0]
    (newest,) = connection.cursor().execute(db.sql(
        "SELECT max(seq) FROM events WHERE rec = ?"), (number,)).fetchone()
    if not db.sqlite:
        connection.rollback()
    newest = -1 if newest is None else newest
    if newest <= after and not finished:
        return 0
    done, noted = 0, after
    while after < newest:
        sizes = connection.cursor().execute(db.sql(
            f"SELECT e.seq, e.size FROM events e WHERE e.rec = ? AND e.seq > ? "
            f"AND e.seq <= ? AND {_MESSAGES} AND {lacking} "
            "ORDER BY e.seq LIMIT ?"), (number, after, newest, chunk)).fetchall()
        if not sizes:
            break
        last = chunk_end(sizes)
        rows = connection.cursor().execute(db.sql(
            f"SELECT e.seq, e.direction, e.data, e.codec FROM events e WHERE e.rec = ? "
            f"AND e.seq > ? AND e.seq <= ? AND {_MESSAGES} AND {lacking} "
            "ORDER BY e.seq"), (number, after, last)).fetchall()
        if not db.sqlite:
            connection.rollback()
        # Worked out before the write: no lock is held meanwhile.
        found = [e for seq, direction, data, codec in rows
                 if (e := entry(number, seq, direction, lines(data, codec))) is not None]
        _write(db, recording_id, after, last, found, last)
        noted = last
        done += len(rows)
        after = last
        if stop is not None and after < newest and stop():
            return done
    if not db.sqlite:
        connection.rollback()
    if finished or noted < newest:
        _write(db, recording_id, newest, newest, [], None if finished else newest)
    return done


#: Lines a transaction of :func:`add_running_words`: a line the indexer reads
#: meanwhile waits for one at most (about 0.06 s on PostgreSQL, the tools shape).
RUNNING_CHUNK = 250


def add_running_words(url: str, recording_id: str, *, stop: Callable[[], bool]) -> bool:
    """:func:`add_words` of a recording still being recorded, in the database
    ``url`` (through :mod:`sqlite3` or psycopg alone), from where the last call
    (or search) left off, :data:`RUNNING_CHUNK` lines a transaction, until
    ``stop()``: its indexer runs this when the recording's input pauses, so that
    a search finds a burst's words without adding them itself.  False when
    stopped first; True when every line stored has its words (or the
    recording says none are missing), or for a database not reached so (a
    search adds them)."""
    with plain_connection(url) as found:
        if found is None:
            return True
        connection, dialect = found
        db = _Db(connection, dialect)
        text = "extra" if db.sqlite else "CAST(extra AS TEXT)"
        row = connection.cursor().execute(db.sql(
            f"SELECT {text} FROM recordings WHERE id = ?"), (recording_id,)).fetchone()
        if not db.sqlite:
            connection.rollback()
        if row is None or row[0] is None or f'"{WORDS_LATER}"' not in row[0]:
            return True
        stopped = False

        def asked() -> bool:
            nonlocal stopped
            stopped = stopped or stop()
            return stopped

        add_words(connection, dialect, recording_id, finished=False, after=_up_to(row[0]),
                  chunk=RUNNING_CHUNK, stop=asked)
        return not stopped


def _write(db: _Db, recording_id: str, after: int, last: int,
           found: list[tuple[Any, int, str]], up_to: int | None) -> None:
    """Add ``found`` (entries of lines ``after < seq <= last``) to the index in one
    transaction, leaving out the lines given words meanwhile (by the ended
    recording's pass, or another search), and note that every line up to
    ``up_to`` has its words (None: every line has, and nothing writes it: take
    the marks off)."""
    cursor = db.begin()
    try:
        number = db.hold(cursor, recording_id)
        if found:
            still = {row[0] for row in cursor.execute(db.sql(
                f"SELECT e.seq FROM events e WHERE e.rec = ? AND e.seq > ? "
                f"AND e.seq <= ? AND {_MESSAGES} AND {_lacking(db)}"),
                (number, after, last)).fetchall()}
            wanted = [e for e in found if e[1] in still]
            if wanted:
                (insert_sqlite if db.sqlite else insert_postgres)(cursor, wanted)
        if up_to is None:
            _words_done(cursor, db, recording_id)
        else:
            edit_extra(cursor, db, recording_id, lambda extra: _note(extra, up_to))
        db.commit()
    except BaseException:
        db.rollback()
        raise


def _note(extra: dict[str, Any], up_to: int) -> bool:
    """Note in a marked recording's ``extra`` that its lines up to ``up_to`` have
    their words (not in one its pass has finished meanwhile)."""
    if WORDS_LATER not in extra or extra.get(WORDS_UP_TO, -1) >= up_to:
        return False
    extra[WORDS_UP_TO] = up_to
    return True


__all__ = ["add_running_words", "add_words", "catch_up", "marked"]
