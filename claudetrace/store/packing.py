"""Ended recordings' lines kept compressed, read back byte for byte.

Recording stores each line as it came (``events.codec`` NULL): compressing on
the burst's path cost more than the burst took (docs/benchmarks.md).  Once a
recording is listed complete, :func:`pack_recording` (run by its indexer as
it ends, and by ``claudetrace db pack`` for the rest: imports, a pass
cut short) rewrites its lines with zlib (raw deflate) against a preset
dictionary stored once in the store (``line_dictionaries``), trained on the
first recording large enough to teach it: JSON keys, the session's ids and
the CLI's phrasing repeat from line to line, so a 300-byte line keeps about a
third of its bytes with the dictionary and two thirds without.

The same pass adds the search index's words (:mod:`.textindex`) of each
message line that has no entry yet: the indexer's writer leaves a burst's
words out (:func:`~.plain.defers_words`), so that the recording is listed
complete sooner, and the pass, run as the recording ends, gives them to the
index a moment later, in the same short transactions as the lines it packs.
``codec`` is the pass's marker: a row still as recorded may lack its words; a
row packed (or looked at) has them.  A recording whose writer left any words
out says so in ``extra`` (:data:`WORDS_LATER`, set with that batch, taken off
by the pass's last transaction); an indexer killed before its pass leaves its
recording to the next ``claudetrace search`` (or the UI's search), which runs
the pass first on every ended recording that says so, and adds the words of
one still running or abandoned (:func:`.backlog.catch_up`).

``events.codec`` says how each row's ``data`` is held, so a row is either as
recorded or packed, never between: NULL (as recorded, not packed yet),
:data:`KEPT` (looked at, kept as recorded: packing would not make it
smaller), :data:`ZLIB` (raw deflate, no dictionary) or a dictionary's id
(raw deflate against that dictionary).  Every reader of ``events.data`` goes
through :func:`unpack` (an :class:`Unpacker` caches the dictionaries).  The
pass commits :data:`CHUNK` rows a transaction, each row read and written in
the same one, so a crash loses nothing and a writer of the store never waits
on it for long.

On PostgreSQL a pass that rewrites rows leaves their versions as recorded
behind as dead rows until vacuum (and the table that much bigger), so once the
store has a dictionary the indexer's writer stores every batch's lines packed
(:class:`PackAtIngest`, in the writer process, beside the indexer that parses
the next batch): those rows are never written twice.  Their words, when the
writer leaves them for later (a burst's), are added by the pass as for any
other row (:func:`_words_postgres`).

No SQLAlchemy: the indexer imports this, with :mod:`sqlite3` or psycopg.
"""

from __future__ import annotations

import functools
import itertools
import json
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

#: The key of ``recordings.extra`` that says some of the recording's lines were
#: stored without their search words (a burst's batches), until the pass has
#: added them.
WORDS_LATER: Final = "search_words_later"
#: The key of ``recordings.extra`` beside :data:`WORDS_LATER` of a recording
#: still being written: the seq up to which every line has its words (a search
#: added them, :mod:`.backlog`), where the next search goes on.
WORDS_UP_TO: Final = "search_words_up_to"
#: ``events.codec`` of a row looked at and kept as recorded.
KEPT: Final = 0
#: ``events.codec`` of a row packed with raw deflate and no dictionary.
ZLIB: Final = -1
#: zlib's level: 6 packs the sample shape's lines within 1% of 9, at about
#: half the time.
LEVEL: Final = 6
#: A dictionary's size: deflate looks back 32 KiB at most.
DICTIONARY_BYTES: Final = 32 * 1024
#: Bytes of lines it takes to train a dictionary (the recording's, else with
#: other recordings' lines not packed yet); with fewer, lines are packed
#: without one until the store holds enough.
TRAIN_FROM: Final = 64 * 1024
#: Lines of a recording looked at to train a dictionary.
TRAIN_LINES: Final = 5000
#: The bytes of a line :func:`train` takes as its example, at most.
TRAIN_PREFIX: Final = 2048
#: Rows a transaction of the pass reads, packs and writes, at most; and
#: their bytes, at most (but one row's), so memory holds one chunk of lines.
CHUNK: Final = 1000
CHUNK_BYTES: Final = 8 * 1024 * 1024
#: The line size (bytes) from which PostgreSQL compresses a row's ``data`` itself
#: (its TOAST threshold is about 2 KB a row): such lines are left to it.
POSTGRES_COMPRESSES_FROM: Final = 2000
_WBITS: Final = -15  # raw deflate: no header or checksum (6 bytes a line)
#: The level, window and memory level lines packed as they are recorded (on the
#: burst's path) are compressed with: level 3 (zlib's fastest kind of search;
#: level 1 took about as long for 2-9% more bytes, level 6 a fifth longer for
#: 2-4% fewer), the dictionary's last 8 KiB (its commonest kinds of line), a
#: state a fifth the size to copy for each line: about half the CPU time a line
#: of :func:`pack`'s with a dictionary primed once.  :func:`unpack`
#: reads them as any other: a raw deflate stream never refers back further
#: than its window, and the dictionary's tail is the same bytes.
_INGEST_LEVEL: Final = 3
_INGEST_WBITS: Final = -13
_INGEST_MEMLEVEL: Final = 5


def pack(data: bytes, zdict: bytes | None) -> bytes:
    """``data`` compressed as :func:`unpack` reads it back (raw deflate, against
    ``zdict`` when given)."""
    if zdict is None:
        packer = zlib.compressobj(LEVEL, zlib.DEFLATED, _WBITS)
    else:
        packer = zlib.compressobj(LEVEL, zlib.DEFLATED, _WBITS, zdict=zdict)
    return packer.compress(data) + packer.flush()


def unpack(data: Any, codec: int | None, dictionaries: Callable[[int], bytes]) -> bytes:
    """The line as recorded, of a row's ``data`` held as ``codec`` says;
    ``dictionaries`` gives a dictionary's bytes by id."""
    if codec is None or codec == KEPT:
        return data if type(data) is bytes else bytes(data)
    if codec == ZLIB:
        unpacker = zlib.decompressobj(_WBITS)
    else:
        unpacker = zlib.decompressobj(_WBITS, zdict=dictionaries(codec))
    line = unpacker.decompress(data)
    return line + unpacker.flush()


class Unpacker:
    """:func:`unpack` with the store's dictionaries cached (they never change once
    stored); ``fetch`` reads one by id (None: no such dictionary)."""

    def __init__(self, fetch: Callable[[int], bytes | None]) -> None:
        self._fetch = fetch
        self._known: dict[int, bytes] = {}

    def dictionary(self, number: int) -> bytes:
        """The dictionary ``number``."""
        found = self._known.get(number)
        if found is None:
            fetched = self._fetch(number)
            if fetched is None:
                from ..errors import StoreError

                raise StoreError(f"the store has no line dictionary {number}; "
                                 "its lines cannot be read")
            found = self._known[number] = bytes(fetched)
        return found

    def __call__(self, data: Any, codec: int | None) -> bytes:
        return unpack(data, codec, self.dictionary)


class LinePacker:
    """Packs lines one at a time against the store's dictionary ``number`` as they
    are recorded: ``packer(line)`` is the row's ``(data, codec)``.  The
    compressor is primed with the dictionary once and copied for each line
    (priming it again would cost twice the line's own compression)."""

    def __init__(self, number: int, zdict: bytes) -> None:
        self.number = number
        self._primed = zlib.compressobj(_INGEST_LEVEL, zlib.DEFLATED, _INGEST_WBITS,
                                        _INGEST_MEMLEVEL, zdict=zdict)

    def __call__(self, line: bytes) -> tuple[bytes, int]:
        if len(line) >= POSTGRES_COMPRESSES_FROM:
            return line, KEPT  # PostgreSQL compresses it itself (0010_lz4)
        packer = self._primed.copy()
        packed = packer.compress(line) + packer.flush()
        return (packed, self.number) if len(packed) < len(line) else (line, KEPT)


class PackAtIngest:
    """Packs the lines the indexer's writer stores into PostgreSQL as they are
    stored (:class:`~.postgres.PostgresWrites`), against the store's newest
    dictionary: a row written once, packed, leaves no version as recorded behind
    (as the pass's update does, a dead row until vacuum).  When the store has no
    dictionary yet, one is trained on the first :data:`TRAIN_FROM` bytes of
    lines and stored in a transaction of its own, committed before any row
    packed with it; the lines before are stored as recorded (the pass packs
    them after).  A database that cannot be asked (no such table, a failure)
    gets its lines as recorded, as before.

    ``behind()`` says whether the writer has the next batch in hand already (the
    indexer hands batches over faster than they are written: a burst whose
    bound the writer would become): from that line on, the batch's lines are
    stored as recorded (``codec`` NULL), and packed after the recording ends.
    Packing takes the time the writer would otherwise spend waiting for the
    next batch, not the burst's."""

    def __init__(self, behind: Callable[[], bool] | None = None) -> None:
        self._behind = behind
        self._packer: LinePacker | None = None
        self._asked = False
        self._off = False
        self._lines: list[bytes] = []
        self._bytes = 0

    def packer(self, transaction: Callable[[], Any],
               lines: Iterable[bytes]) -> Callable[[bytes], tuple[bytes, int | None]] | None:
        """What packs a batch of ``lines`` (bytes as recorded); None: store them as
        they are.  ``transaction()`` is a context manager giving a cursor in a
        transaction of its own (committed as it ends).  The database is asked
        once for its dictionary, and once more to store one when it had none and
        enough lines have been seen."""
        if not self._asked:
            self._asked = True
            self._ask(transaction, ())
        if self._packer is None and not self._off:
            for line in itertools.islice(lines, TRAIN_LINES - len(self._lines)):
                self._bytes += len(line)
                self._lines.append(line[:TRAIN_PREFIX])  # all :func:`train` reads of it
            if self._bytes >= TRAIN_FROM or len(self._lines) >= TRAIN_LINES:
                self._ask(transaction, self._lines)
                self._lines = []
                self._off = self._packer is None
        if self._packer is None or self._behind is None:
            return self._packer
        return self._pack_unless_behind

    def _pack_unless_behind(self, line: bytes) -> tuple[bytes, int | None]:
        """The line packed, or as recorded (``codec`` NULL: the pass packs it) once
        the next batch waits for the writer."""
        assert self._packer is not None and self._behind is not None
        return (line, None) if self._behind() else self._packer(line)

    def _ask(self, transaction: Callable[[], Any], lines: Sequence[bytes]) -> bool:
        """Take the newest dictionary; with ``lines``, when there is none, train
        one on them and store it.  False (and no packing) when that fails."""
        try:
            with transaction() as cursor:
                found = _newest_dictionary(cursor)
                if found is None and lines:
                    row = cursor.execute(
                        "INSERT INTO line_dictionaries (data, created_ns) VALUES (%s, %s) "
                        "RETURNING id, data", (train(lines), time.time_ns())).fetchone()
                    found = None if row is None else (int(row[0]), bytes(row[1]))
        except Exception:  # the lines are stored as recorded, and packed after
            self._off = True
            return False
        if found is not None:
            self._packer = LinePacker(*found)
        return True


def train(lines: Sequence[bytes]) -> bytes:
    """A preset dictionary for lines like ``lines``: an example of each kind of
    line (its first 48 bytes: type and subtype), the commonest kinds last, where
    deflate reaches them cheapest, the whole at most :data:`DICTIONARY_BYTES`."""
    kinds: Counter[bytes] = Counter(line[:48] for line in lines)
    example: dict[bytes, bytes] = {}
    for line in lines:
        example.setdefault(line[:48], line[:TRAIN_PREFIX])
    # Rarest first; ties in the order first seen.
    ordered = sorted(example, key=lambda kind: kinds[kind])
    body = b"\n".join(example[kind] for kind in ordered)
    return body[-DICTIONARY_BYTES:]


class _Db:
    """What the pass needs of a DB-API connection on either engine."""

    def __init__(self, connection: Any, dialect: str) -> None:
        self.connection = connection
        self.sqlite = dialect == "sqlite"
        self.mark = "?" if self.sqlite else "%s"

    def sql(self, statement: str) -> str:
        return statement.replace("?", self.mark)

    def begin(self) -> Any:
        if self.sqlite:
            self.connection.execute("BEGIN IMMEDIATE")
            return self.connection
        return self.connection.cursor()

    def hold(self, cursor: Any, recording_id: str) -> None:
        """Take the recording for the transaction, against another pass over it
        (``claudetrace search`` catching up while its indexer packs): each row is
        read and rewritten by one pass.  SQLite's ``BEGIN IMMEDIATE`` holds the
        whole database already; PostgreSQL locks the recording's row (``FOR NO
        KEY UPDATE``: its writer's ``FOR KEY SHARE`` goes on beside it)."""
        if not self.sqlite:
            cursor.execute("SELECT id FROM recordings WHERE id = %s FOR NO KEY UPDATE",
                           (recording_id,))

    def commit(self) -> None:
        self.connection.commit() if not self.sqlite else self.connection.execute("COMMIT")

    def rollback(self) -> None:
        if self.sqlite:
            if self.connection.in_transaction:
                self.connection.execute("ROLLBACK")
        else:
            self.connection.rollback()


def _newest_dictionary(cursor: Any) -> tuple[int, bytes] | None:
    row = cursor.execute(
        "SELECT id, data FROM line_dictionaries ORDER BY id DESC LIMIT 1").fetchone()
    return None if row is None else (int(row[0]), bytes(row[1]))


def _stored_dictionary(cursor: Any, number: int) -> bytes | None:
    row = cursor.execute("SELECT data FROM line_dictionaries WHERE id = %s",
                         (number,)).fetchone()
    return None if row is None else bytes(row[0])


def _dictionary_for(db: _Db, recording_id: str) -> tuple[int, bytes] | None:
    """The store's newest dictionary; trained on ``recording_id`` and stored (in a
    transaction of its own) when there is none yet and the recording is large
    enough; None: pack without one."""
    cursor = db.begin()
    try:
        db.hold(cursor, recording_id)
        found = _newest_dictionary(cursor)
        if found is None:
            lines = [bytes(row[0]) for row in cursor.execute(db.sql(
                "SELECT data FROM events WHERE recording_id = ? AND codec IS NULL "
                "ORDER BY seq LIMIT ?"), (recording_id, TRAIN_LINES)).fetchall()]
            if sum(map(len, lines)) < TRAIN_FROM:
                # A small recording: other recordings' lines as recorded teach it too.
                lines += [bytes(row[0]) for row in cursor.execute(db.sql(
                    "SELECT data FROM events WHERE recording_id <> ? AND codec IS NULL "
                    "LIMIT ?"), (recording_id, TRAIN_LINES)).fetchall()]
            if sum(map(len, lines)) >= TRAIN_FROM:
                cursor.execute(db.sql(
                    "INSERT INTO line_dictionaries (data, created_ns) VALUES (?, ?)"),
                    (train(lines), time.time_ns()))
                found = _newest_dictionary(cursor)
        db.commit()
        return found
    except BaseException:
        db.rollback()
        raise


def pack_recording(connection: Any, dialect: str, recording_id: str) -> int:
    """Pack the lines of ``recording_id`` (an ended recording) not packed yet, on
    a DB-API ``connection`` (:mod:`sqlite3` in autocommit mode, or psycopg) to a
    database of ``dialect`` (``sqlite``, ``postgresql``); returns how many rows
    it looked at.  A recording still being recorded is left alone."""
    db = _Db(connection, dialect)
    ended = connection.cursor().execute(db.sql(
        "SELECT ended_ns FROM recordings WHERE id = ?"), (recording_id,)).fetchone()
    if db.sqlite is False:
        connection.rollback()
    if ended is None or ended[0] is None:
        return 0
    newest = _dictionary_for(db, recording_id)
    number, zdict = newest if newest is not None else (ZLIB, None)
    done, after = 0, -1
    while True:
        cursor = db.begin()
        try:
            db.hold(cursor, recording_id)
            sizes = cursor.execute(db.sql(
                "SELECT seq, size FROM events WHERE recording_id = ? AND seq > ? "
                "AND codec IS NULL ORDER BY seq LIMIT ?"),
                (recording_id, after, CHUNK)).fetchall()
            if not sizes:
                if db.sqlite:
                    _words_done(cursor, db, recording_id)
                db.commit()
                # PostgreSQL: rows its writer stored packed may still lack their words.
                return done if db.sqlite else done + _words_postgres(db, recording_id)
            last = chunk_end(sizes)
            if db.sqlite:
                rows = _rewrite_sqlite(cursor, recording_id, after, last, number, zdict)
            else:
                _index_postgres(cursor, recording_id, after, last)
                # Lines PostgreSQL compresses itself (lz4, 0010_lz4) are only marked:
                # an update that leaves ``data`` keeps its compressed value as it is.
                cursor.execute(db.sql(
                    "UPDATE events SET codec = ? WHERE recording_id = ? AND seq > ? "
                    "AND seq <= ? AND codec IS NULL AND size >= ?"),
                    (KEPT, recording_id, after, last, POSTGRES_COMPRESSES_FROM))
                rows = cursor.execute(db.sql(
                    "SELECT seq, data FROM events WHERE recording_id = ? AND seq > ? "
                    "AND seq <= ? AND codec IS NULL ORDER BY seq"),
                    (recording_id, after, last)).fetchall()
                cursor.executemany(db.sql(
                    "UPDATE events SET data = ?, codec = ? WHERE recording_id = ? AND seq = ?"),
                    [(*_packed(bytes(data), number, zdict), recording_id, seq)
                     for seq, data in rows])
                rows = rows or [(last,)]
            db.commit()
        except BaseException:
            db.rollback()
            raise
        if not rows:
            return done
        done += len(rows)
        after = rows[-1][0]


def chunk_end(sizes: Sequence[Any]) -> int:
    """The last seq of a chunk of rows ``(seq, size)``: as many as hold
    :data:`CHUNK_BYTES` of lines, one at least."""
    last, total = sizes[0][0], 0
    for seq, size in sizes:
        total += size or 0
        if total > CHUNK_BYTES and seq != sizes[0][0]:
            break
        last = seq
    return int(last)


def _packed(line: bytes, number: int, zdict: bytes | None) -> tuple[bytes, int]:
    """A row's new ``(data, codec)``: packed, or as it is when that is no smaller."""
    packed = pack(line, zdict)
    return (packed, number) if len(packed) < len(line) else (line, KEPT)


def _rewrite_sqlite(cursor: Any, recording_id: str, after: int, last: int, number: int,
                    zdict: bytes | None) -> list[Any]:
    """Pack the rows ``after < seq <= last`` of ``recording_id`` not packed yet, in
    the caller's transaction, as new rows: SQLite leaves a page whose rows were
    made smaller where it is, half empty (a rowid table's new rows go after
    the last, never into it), so the rows are deleted, their pages freed, and
    inserted again, packed, at the end, with their search index entries (which
    name their event by its rowid) moved along.  Returns the ``(seq, …)`` rows."""
    found = cursor.execute(
        "SELECT rowid, * FROM events WHERE recording_id = ? AND seq > ? AND seq <= ? "
        "AND codec IS NULL ORDER BY seq", (recording_id, after, last))
    names = [d[0] for d in found.description][1:]
    rows: list[Any] = found.fetchall()
    if not rows:
        return rows
    at_data, at_codec, at_seq = names.index("data"), names.index("codec"), names.index("seq")
    at_type, at_direction = names.index("type"), names.index("direction")
    words = dict(cursor.execute(
        "SELECT rowid, words FROM event_search WHERE rowid BETWEEN ? AND ?",
        (min(r[0] for r in rows), max(r[0] for r in rows))).fetchall())
    said = {row[1 + at_seq]: words[row[0]] for row in rows if row[0] in words}
    # The message lines the writer left without their words (a burst's).
    from .textindex import SEARCHED_TYPES, entry

    for row in rows:
        if row[0] not in words and row[1 + at_type] in SEARCHED_TYPES:
            found = entry(recording_id, row[1 + at_seq], row[1 + at_direction],
                          bytes(row[1 + at_data]))
            if found is not None:
                said[found[1]] = found[2]
    cursor.executemany("DELETE FROM events WHERE rowid = ?", [(row[0],) for row in rows])
    again = []
    for row in rows:
        values = list(row[1:])
        values[at_data], values[at_codec] = _packed(bytes(values[at_data]), number, zdict)
        again.append(values)
    cursor.executemany(f"INSERT INTO events ({', '.join(names)}) VALUES "
                       f"({', '.join('?' * len(names))})", again)
    if said:
        low, high = min(said), max(said)
        moved = cursor.execute("SELECT seq, rowid FROM events WHERE recording_id = ? AND "
                               "seq BETWEEN ? AND ?", (recording_id, low, high)).fetchall()
        cursor.executemany("INSERT INTO event_search (rowid, words) VALUES (?, ?)",
                           [(rowid, said[seq]) for seq, rowid in moved if seq in said])
    return [(row[1 + at_seq],) for row in rows]


def _words_done(cursor: Any, db: _Db, recording_id: str) -> None:
    """Take :data:`WORDS_LATER` (and :data:`WORDS_UP_TO`) off the recording's
    ``extra``: every line has its words (in the pass's last transaction, the
    recording held)."""

    def done(extra: dict[str, Any]) -> bool:
        if WORDS_LATER not in extra:
            return False
        extra.pop(WORDS_UP_TO, None)
        del extra[WORDS_LATER]
        return True

    edit_extra(cursor, db, recording_id, done)


def edit_extra(cursor: Any, db: _Db, recording_id: str,
               edit: Callable[[dict[str, Any]], bool]) -> None:
    """Read the recording's ``extra``, let ``edit`` change it (it says whether it
    did) and write it back, in the caller's transaction, the recording held."""
    row = cursor.execute(db.sql("SELECT extra FROM recordings WHERE id = ?"),
                         (recording_id,)).fetchone()
    if row is None or row[0] is None:
        return
    extra = json.loads(row[0]) if isinstance(row[0], (str, bytes)) else row[0]
    if not isinstance(extra, dict) or not edit(extra):
        return
    cast = "" if db.sqlite else "::JSON"
    cursor.execute(db.sql(f"UPDATE recordings SET extra = ?{cast} WHERE id = ?"),
                   (json.dumps(extra), recording_id))


def _index_postgres(cursor: Any, recording_id: str, after: int, last: int) -> None:
    """Add the words of the message lines ``after < seq <= last`` of
    ``recording_id`` not packed yet that have no entry in the search index (the
    writer leaves a burst's out), in the caller's transaction."""
    from .textindex import SEARCHED_TYPES, entry, insert_postgres

    rows = cursor.execute(
        "SELECT e.seq, e.direction, e.data FROM events e WHERE e.recording_id = %s "
        "AND e.seq > %s AND e.seq <= %s AND e.codec IS NULL AND e.type = ANY(%s) "
        "AND NOT EXISTS (SELECT 1 FROM event_search s WHERE s.recording_id = e.recording_id "
        "AND s.seq = e.seq) ORDER BY e.seq",
        (recording_id, after, last, sorted(SEARCHED_TYPES))).fetchall()
    found = [e for seq, direction, data in rows
             if (e := entry(recording_id, seq, direction, bytes(data))) is not None]
    if found:
        insert_postgres(cursor, found)


def _words_postgres(db: _Db, recording_id: str) -> int:
    """Add the words of the message lines of ``recording_id`` that have none in the
    search index, whatever their ``codec`` (the indexer's writer stores a burst's
    lines packed, :class:`PackAtIngest`, and leaves their words for later), when
    the recording says some are missing (:data:`WORDS_LATER`), :data:`CHUNK` lines
    (or :data:`CHUNK_BYTES`) a transaction, the recording held; the last takes
    the mark off.  Returns the lines looked at."""
    from .textindex import SEARCHED_TYPES, entry, insert_postgres

    cursor = db.begin()
    row = cursor.execute("SELECT CAST(extra AS TEXT) FROM recordings WHERE id = %s",
                         (recording_id,)).fetchone()
    db.commit()
    if row is None or row[0] is None or f'"{WORDS_LATER}"' not in row[0]:
        return 0
    kinds = sorted(SEARCHED_TYPES)
    lacking = ("FROM events e WHERE e.recording_id = %s AND e.seq > %s AND e.type = ANY(%s) "
               "AND NOT EXISTS (SELECT 1 FROM event_search s WHERE s.recording_id = "
               "e.recording_id AND s.seq = e.seq)")
    done, after = 0, -1
    while True:
        cursor = db.begin()
        try:
            db.hold(cursor, recording_id)
            lines = Unpacker(functools.partial(_stored_dictionary, cursor))
            sizes = cursor.execute(f"SELECT e.seq, e.size {lacking} ORDER BY e.seq LIMIT %s",
                                   (recording_id, after, kinds, CHUNK)).fetchall()
            last, total = after, 0
            for seq, size in sizes:
                total += size or 0
                if total > CHUNK_BYTES and last != after:
                    break
                last = seq
            rows = cursor.execute(
                f"SELECT e.seq, e.direction, e.data, e.codec {lacking} AND e.seq <= %s "
                "ORDER BY e.seq", (recording_id, after, kinds, last)).fetchall()
            found = [e for seq, direction, data, codec in rows
                     if (e := entry(recording_id, seq, direction, lines(data, codec)))
                     is not None]
            if found:
                insert_postgres(cursor, found)
            if len(rows) == len(sizes) < CHUNK:  # nothing after these
                _words_done(cursor, db, recording_id)
                db.commit()
                return done + len(rows)
            db.commit()
        except BaseException:
            db.rollback()
            raise
        done += len(rows)
        after = last


def unpacked_recordings(connection: Any, dialect: str) -> list[str]:
    """The ended recordings whose newest line is not packed yet (the pass
    packs a recording's lines in order, and new lines come after the old)."""
    db = _Db(connection, dialect)
    cursor = connection.cursor()
    found = [str(row[0]) for row in cursor.execute(
        "SELECT r.id FROM recordings r WHERE r.ended_ns IS NOT NULL AND EXISTS ("
        "SELECT 1 FROM events e WHERE e.recording_id = r.id AND e.codec IS NULL "
        "AND e.seq = (SELECT max(m.seq) FROM events m WHERE m.recording_id = r.id)) "
        "ORDER BY r.id").fetchall()]
    if not db.sqlite:
        connection.rollback()
    return found


def pack_all(connection: Any, dialect: str, ids: Iterable[str] | None = None) -> int:
    """:func:`pack_recording` of each of ``ids`` (default: :func:`unpacked_recordings`);
    returns the rows looked at."""
    wanted = unpacked_recordings(connection, dialect) if ids is None else list(ids)
    return sum(pack_recording(connection, dialect, rid) for rid in wanted)


#: Free pages a SQLite transaction gives back after the pass (16 KiB pages: 8 MiB).
GIVE_BACK_PAGES: Final = 512


def pack_url(url: str, recording_id: str) -> int | None:
    """:func:`pack_recording` of ``recording_id`` in the database ``url`` through
    :mod:`sqlite3` or psycopg alone (the indexer's way, once its recording is
    stored), then, on a SQLite file in incremental auto-vacuum mode, the pages
    it freed given back to the system a few at a time; None for a database
    not reached so (``claudetrace db pack`` packs those)."""
    from .postgres import plain_url
    from .sqlite import BUSY_TIMEOUT_S, plain_file

    path = plain_file(url)
    if path is not None:
        import sqlite3

        connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            done = pack_recording(connection, "sqlite", recording_id)
            give_back_sqlite(connection)
            return done
        finally:
            connection.close()
    conninfo = plain_url(url)
    if conninfo is None:
        return None
    import psycopg

    with psycopg.connect(conninfo) as server:
        return pack_recording(server, "postgresql", recording_id)


def give_back_sqlite(connection: Any) -> None:
    """Give a SQLite file's free pages back to the system, :data:`GIVE_BACK_PAGES`
    a transaction, when it is in incremental auto-vacuum mode (the store makes
    new files so); another file keeps them for new lines."""
    if connection.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
        return
    free = connection.execute("PRAGMA freelist_count").fetchone()[0]
    while free:
        # executescript steps the pragma to its end (a plain statement frees one page).
        connection.executescript(f"PRAGMA incremental_vacuum({GIVE_BACK_PAGES})")
        left = connection.execute("PRAGMA freelist_count").fetchone()[0]
        if left >= free:
            return
        free = left
