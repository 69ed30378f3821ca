"""Ended recordings' lines kept compressed, read back byte for byte.

Recording stores each line as it came (``events.codec`` NULL) on SQLite:
compressing on the burst's path cost more than the burst took
(docs/benchmarks.md).  Once a recording is listed complete,
:func:`pack_recording` (run by its indexer as it ends, and by ``claudetrace db
pack`` for the rest: imports, a pass cut short) rewrites its lines with zstd
against a dictionary zstd trains on the store's first recording large enough
to teach it (:func:`train_zstd`, stored once in ``line_dictionaries``): JSON
keys, the session's ids and the CLI's phrasing repeat from line to line, so a
300-byte line keeps about a fifth of its bytes with the dictionary.  A store
too small for one packs with zlib alone (:data:`ZLIB`).

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
smaller), :data:`ZLIB` (raw deflate, no dictionary), ``-1 - id`` (zstd
against the dictionary ``id``: :func:`zstd_codec`) or a dictionary's id (raw
deflate against that dictionary: the lines of a store packed by an earlier
build, still read).  Every reader of ``events.data`` goes through
:func:`unpack` (an :class:`Unpacker` caches the dictionaries).  The
pass commits :data:`CHUNK` rows a transaction, each row read and written in
the same one, so a crash loses nothing and a writer of the store never waits
on it for long.

On PostgreSQL a pass that rewrites rows leaves their versions as recorded
behind as dead rows until vacuum (and the table that much bigger), so once the
store has a dictionary the indexer's writer stores every batch's lines packed
(:class:`PackAtIngest`, in the writer process, beside the indexer that parses
the next batch): those rows are never written twice.  zstd with a trained
dictionary packs a line in about a tenth of the time zlib took with a preset
one, and smaller, so the writer packs a burst's lines as well.  Their words, when the
writer leaves them for later (a burst's), are added by the pass as for any
other row (:func:`_words_postgres`).

No SQLAlchemy: the indexer imports this, with :mod:`sqlite3` or psycopg.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
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
#: without one until the store holds enough.  A store trains one dictionary for
#: good: trained on 256 KiB of the bench's sample its lines pack to 0.19 of
#: their bytes, on 64 KiB to 0.28 (docs/benchmarks.md).
TRAIN_FROM: Final = 256 * 1024
#: Lines of a recording looked at to train a dictionary.
TRAIN_LINES: Final = 5000
#: The bytes of a line :func:`train` takes as its example, at most.
TRAIN_PREFIX: Final = 2048
#: Rows a transaction of the pass reads, packs and writes, at most; and
#: their bytes, at most (but one row's), so memory holds one chunk of lines.
CHUNK: Final = 1000
CHUNK_BYTES: Final = 8 * 1024 * 1024
#: The line size (bytes) from which lines are left to PostgreSQL's own compression
#: (lz4, migration 0010_lz4, for a row over about 2 KB): a line of a few
#: megabytes costs the writer nothing so.  Below it zstd's dictionary packs a
#: line of 2-64 KB (a tool's result) to about half what lz4 keeps of it.
POSTGRES_COMPRESSES_FROM: Final = 64 * 1024
_WBITS: Final = -15  # raw deflate: no header or checksum (6 bytes a line)
#: zstd's level for lines packed against a zstd dictionary (:class:`LinePacker`):
#: level 3 with a trained dictionary packs the bench's lines 12% smaller than
#: level 1 for 15% more time, 2-3 us a line, about a tenth of zlib's time with a
#: preset dictionary (level 3, its state copied for each line) for a fifth fewer
#: bytes (docs/benchmarks.md).
ZSTD_LEVEL: Final = 3
#: The first bytes of a dictionary zstd trained (``ZDICT``'s magic number): how a
#: stored zstd dictionary is told from a preset deflate one (their rows are
#: alike; a row's ``codec`` says which its line was packed with).
ZSTD_DICTIONARY_MAGIC: Final = b"\x37\xa4\x30\xec"


def pack(data: bytes) -> bytes:
    """``data`` compressed as :func:`unpack` reads it back with :data:`ZLIB` (raw
    deflate, no dictionary)."""
    packer = zlib.compressobj(LEVEL, zlib.DEFLATED, _WBITS)
    return packer.compress(data) + packer.flush()


def zstd_codec(number: int) -> int:
    """The ``events.codec`` of a line packed with zstd against dictionary ``number``
    (below :data:`ZLIB`: -2 for dictionary 1, and so on)."""
    return ZLIB - number


def is_zstd_dictionary(data: bytes) -> bool:
    """Whether a stored dictionary is one zstd trained (:func:`train_zstd`)."""
    return bytes(data[:4]) == ZSTD_DICTIONARY_MAGIC


def _zstd_frames() -> Any:
    """The frames every zstd line is packed in: no magic number, dictionary id or
    checksum (9 bytes a line the row's ``codec`` and the store make redundant),
    the line's size in the header (what :func:`unpack` allocates)."""
    import zstandard

    return zstandard.FORMAT_ZSTD1_MAGICLESS


def zstd_writer(zdict: bytes, level: int = ZSTD_LEVEL) -> Any:
    """A ``zstandard.ZstdCompressor`` against the dictionary ``zdict``: its
    ``compress(line)`` gives a frame :func:`unpack` reads back.  One thread at a
    time."""
    import zstandard

    params = zstandard.ZstdCompressionParameters.from_level(
        level, format=_zstd_frames(), write_content_size=1, write_checksum=0,
        write_dict_id=0)
    return zstandard.ZstdCompressor(dict_data=zstandard.ZstdCompressionDict(zdict),
                                    compression_params=params)


def zstd_reader(zdict: bytes) -> Any:
    """A ``zstandard.ZstdDecompressor`` for the lines packed against ``zdict``
    (:func:`zstd_writer`).  One thread at a time."""
    import zstandard

    return zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(zdict),
                                      format=_zstd_frames())


def unpack(data: Any, codec: int | None, dictionaries: Callable[[int], bytes]) -> bytes:
    """The line as recorded, of a row's ``data`` held as ``codec`` says;
    ``dictionaries`` gives a dictionary's bytes by id.  (:class:`Unpacker` keeps
    what it needs to read zstd lines; this makes it again for each.)"""
    if codec is None or codec == KEPT:
        return data if type(data) is bytes else bytes(data)
    if codec < ZLIB:
        return bytes(zstd_reader(dictionaries(ZLIB - codec)).decompress(data))
    if codec == ZLIB:
        unpacker = zlib.decompressobj(_WBITS)
    else:
        unpacker = zlib.decompressobj(_WBITS, zdict=dictionaries(codec))
    line = unpacker.decompress(data)
    return line + unpacker.flush()


class Unpacker:
    """:func:`unpack` with the store's dictionaries cached (they never change once
    stored); ``fetch`` reads one by id (None: no such dictionary).  Safe to share
    between threads (the UI's sessions share a store): a zstd reader is made once
    for each thread."""

    def __init__(self, fetch: Callable[[int], bytes | None]) -> None:
        self._fetch = fetch
        self._known: dict[int, bytes] = {}
        self._readers = threading.local()

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
        if codec is not None and codec < ZLIB:
            readers: dict[int, Any] | None = getattr(self._readers, "known", None)
            if readers is None:
                readers = self._readers.known = {}
            reader = readers.get(codec)
            if reader is None:
                reader = readers[codec] = zstd_reader(self.dictionary(ZLIB - codec))
            return bytes(reader.decompress(data))
        return unpack(data, codec, self.dictionary)


class LinePacker:
    """Packs lines one at a time with zstd against the store's dictionary
    ``number`` (:func:`train_zstd`): ``packer(line)`` is the row's ``(data,
    codec)``, the line as it is (:data:`KEPT`) where packing would not make it
    smaller, or from ``keep_from`` bytes on (PostgreSQL compresses those itself,
    :data:`POSTGRES_COMPRESSES_FROM`).  One thread at a time."""

    def __init__(self, number: int, zdict: bytes, *, keep_from: int | None = None) -> None:
        self.number = number
        self.codec = zstd_codec(number)
        self._keep_from = keep_from
        self._compress = zstd_writer(zdict).compress

    def __call__(self, line: bytes) -> tuple[bytes, int]:
        if self._keep_from is not None and len(line) >= self._keep_from:
            return line, KEPT
        packed = self._compress(line)
        return (packed, self.codec) if len(packed) < len(line) else (line, KEPT)


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

    Every line is packed, a burst's too: with zstd against a trained dictionary
    (:class:`LinePacker`) that takes the writer 2-3 us a line.  With zlib and a
    preset dictionary (ten times as long) the writer stopped packing wherever
    the next batch waited for it, and the pass after the listing rewrote those
    rows: right after a burst the table held each of them twice, a dead
    version as recorded beside the packed one, until vacuum (docs/benchmarks.md)."""

    def __init__(self) -> None:
        self._packer: LinePacker | None = None
        self._asked = False
        self._off = False
        self._lines: list[bytes] = []
        self._bytes = 0

    def packer(self, transaction: Callable[[], Any],
               lines: Iterable[bytes]) -> Callable[[bytes], tuple[bytes, int]] | None:
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
                self._lines.append(line[:TRAIN_PREFIX])
            if self._bytes >= TRAIN_FROM or len(self._lines) >= TRAIN_LINES:
                self._ask(transaction, self._lines)
                self._lines = []
                self._off = self._packer is None
        return self._packer

    def _ask(self, transaction: Callable[[], Any], lines: Sequence[bytes]) -> bool:
        """Take the newest zstd dictionary; with ``lines``, when there is none, train
        one on them and store it.  False (and no packing) when that fails."""
        try:
            with transaction() as cursor:
                found = _newest_dictionary(cursor)
                trained = train_zstd(lines) if found is None and lines else None
                if trained is not None:
                    row = cursor.execute(
                        "INSERT INTO line_dictionaries (data, created_ns) VALUES (%s, %s) "
                        "RETURNING id, data", (trained, time.time_ns())).fetchone()
                    found = None if row is None else (int(row[0]), bytes(row[1]))
        except Exception:  # the lines are stored as recorded, and packed after
            self._off = True
            return False
        if found is not None:
            self._packer = LinePacker(*found, keep_from=POSTGRES_COMPRESSES_FROM)
        return True


def train_zstd(lines: Sequence[bytes]) -> bytes | None:
    """A zstd dictionary (at most :data:`DICTIONARY_BYTES`) for lines like
    ``lines``, trained by zstd itself (``ZDICT``: the byte strings the lines
    repeat, JSON keys, the session's ids, the CLI's phrasing, with the entropy
    tables to code them); None when there are too few lines to train on."""
    import zstandard

    try:
        trained = zstandard.train_dictionary(DICTIONARY_BYTES, list(lines))
    except zstandard.ZstdError:
        return None
    data = bytes(trained.as_bytes())
    return data if is_zstd_dictionary(data) else None


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

    def hold(self, cursor: Any, recording_id: str) -> int | None:
        """Take the recording for the transaction, against another pass over it
        (``claudetrace search`` catching up while its indexer packs): each row is
        read and rewritten by one pass.  SQLite's ``BEGIN IMMEDIATE`` holds the
        whole database already; PostgreSQL locks the recording's row (``FOR NO
        KEY UPDATE``: its writer's ``FOR KEY SHARE`` goes on beside it).  Returns
        the recording's number, which keys its rows (:mod:`.keys`); None when it
        is gone."""
        lock = "" if self.sqlite else " FOR NO KEY UPDATE"
        row = cursor.execute(self.sql(f"SELECT num FROM recordings WHERE id = ?{lock}"),
                             (recording_id,)).fetchone()
        return None if row is None else int(row[0])

    def commit(self) -> None:
        self.connection.commit() if not self.sqlite else self.connection.execute("COMMIT")

    def rollback(self) -> None:
        if self.sqlite:
            if self.connection.in_transaction:
                self.connection.execute("ROLLBACK")
        else:
            self.connection.rollback()


def _newest_dictionary(cursor: Any) -> tuple[int, bytes] | None:
    """The store's newest zstd dictionary (a store packed by an earlier build has
    deflate ones too, which only its lines are read with)."""
    found = cursor.execute("SELECT id, data FROM line_dictionaries ORDER BY id DESC")
    for number, data in found.fetchall():
        if is_zstd_dictionary(data):
            return int(number), bytes(data)
    return None


def stored_dictionary(cursor: Any, number: int, mark: str = "%s") -> bytes | None:
    """The line dictionary ``number`` (None: the store has none so numbered), read on
    a DB-API ``cursor`` whose driver writes a parameter ``mark`` (psycopg's
    ``%s``, :mod:`sqlite3`'s ``?``): what an :class:`Unpacker` fetches."""
    row = cursor.execute(f"SELECT data FROM line_dictionaries WHERE id = {mark}",
                         (number,)).fetchone()
    return None if row is None else bytes(row[0])


def _examples(cursor: Any, db: _Db, where: str,
              number: int | None) -> list[tuple[bytes, int]]:
    """Up to :data:`TRAIN_LINES` lines of the rows ``where`` keeps (its one
    parameter ``number``, a recording's number; None, gone: none) to train a dictionary on: each
    line's first :data:`TRAIN_PREFIX` bytes, as read from the database, and its size."""
    rows = cursor.execute(db.sql(
        "SELECT substr(data, 1, ?), COALESCE(size, length(data)) FROM events "
        f"WHERE {where} LIMIT ?"), (TRAIN_PREFIX, number, TRAIN_LINES)).fetchall()
    # SQLite's substr of an empty blob is NULL.
    return [(bytes(prefix or b""), int(size or 0)) for prefix, size in rows]


def _dictionary_for(db: _Db, recording_id: str) -> tuple[int, bytes] | None:
    """The store's newest dictionary; trained on ``recording_id`` and stored (in a
    transaction of its own) when there is none yet and the recording is large
    enough; None: pack without one."""
    cursor = db.begin()
    try:
        number = db.hold(cursor, recording_id)
        found = _newest_dictionary(cursor)
        if found is None:
            # Each line's first TRAIN_PREFIX bytes, what training takes of it, and
            # its size: a recording of files read whole (lines of megabytes) was
            # read whole into memory here, its every line at once.
            examples = _examples(cursor, db, "rec = ? AND codec IS NULL ORDER BY seq", number)
            if sum(size for _, size in examples) < TRAIN_FROM:
                # A small recording: other recordings' lines as recorded teach it too.
                examples += _examples(cursor, db, "rec <> ? AND codec IS NULL", number)
            trained = (train_zstd([line for line, _ in examples])
                       if sum(size for _, size in examples) >= TRAIN_FROM else None)
            if trained is not None:
                cursor.execute(db.sql(
                    "INSERT INTO line_dictionaries (data, created_ns) VALUES (?, ?)"),
                    (trained, time.time_ns()))
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
    packer = _deflate_alone if newest is None else LinePacker(*newest)
    done, after = 0, -1
    while True:
        cursor = db.begin()
        try:
            number = db.hold(cursor, recording_id)
            sizes = cursor.execute(db.sql(
                "SELECT seq, size FROM events WHERE rec = ? AND seq > ? "
                "AND codec IS NULL ORDER BY seq LIMIT ?"),
                (number, after, CHUNK)).fetchall()
            if not sizes:
                if db.sqlite:
                    _words_done(cursor, db, recording_id)
                db.commit()
                # PostgreSQL: rows its writer stored packed may still lack their words.
                return done if db.sqlite else done + _words_postgres(db, recording_id)
            last = chunk_end(sizes)
            if db.sqlite:
                rows = _rewrite_sqlite(cursor, number, after, last, packer)
            else:
                _index_postgres(cursor, number, after, last)
                # Lines PostgreSQL compresses itself (lz4, 0010_lz4) are only marked:
                # an update that leaves ``data`` keeps its compressed value as it is.
                cursor.execute(db.sql(
                    "UPDATE events SET codec = ? WHERE rec = ? AND seq > ? "
                    "AND seq <= ? AND codec IS NULL AND size >= ?"),
                    (KEPT, number, after, last, POSTGRES_COMPRESSES_FROM))
                rows = cursor.execute(db.sql(
                    "SELECT seq, data FROM events WHERE rec = ? AND seq > ? "
                    "AND seq <= ? AND codec IS NULL ORDER BY seq"),
                    (number, after, last)).fetchall()
                cursor.executemany(db.sql(
                    "UPDATE events SET data = ?, codec = ? WHERE rec = ? AND seq = ?"),
                    [(*packer(bytes(data)), number, seq)
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


def _deflate_alone(line: bytes) -> tuple[bytes, int]:
    """A row's new ``(data, codec)`` in a store too small to train a dictionary:
    raw deflate (:data:`ZLIB`), or as it is when that is no smaller."""
    packed = pack(line)
    return (packed, ZLIB) if len(packed) < len(line) else (line, KEPT)


def _rewrite_sqlite(cursor: Any, number: int | None, after: int, last: int,
                    packer: Callable[[bytes], tuple[bytes, int]]) -> list[Any]:
    """Pack the rows ``after < seq <= last`` of the recording numbered ``number``
    not packed yet, in
    the caller's transaction, as new rows: SQLite leaves a page whose rows were
    made smaller where it is, half empty (a rowid table's new rows go after
    the last, never into it), so the rows are deleted, their pages freed, and
    inserted again, packed, at the end, with their search index entries (which
    name their event by its rowid) moved along.  Returns the ``(seq, …)`` rows."""
    found = cursor.execute(
        "SELECT rowid, * FROM events WHERE rec = ? AND seq > ? AND seq <= ? "
        "AND codec IS NULL ORDER BY seq", (number, after, last))
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
            found = entry(number, row[1 + at_seq], row[1 + at_direction],
                          bytes(row[1 + at_data]))
            if found is not None:
                said[found[1]] = found[2]
    cursor.executemany("DELETE FROM events WHERE rowid = ?", [(row[0],) for row in rows])
    again = []
    for row in rows:
        values = list(row[1:])
        values[at_data], values[at_codec] = packer(bytes(values[at_data]))
        again.append(values)
    cursor.executemany(f"INSERT INTO events ({', '.join(names)}) VALUES "
                       f"({', '.join('?' * len(names))})", again)
    if said:
        low, high = min(said), max(said)
        moved = cursor.execute("SELECT seq, rowid FROM events WHERE rec = ? AND "
                               "seq BETWEEN ? AND ?", (number, low, high)).fetchall()
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


#: The condition of an event row ``e`` that has no entry in PostgreSQL's search
#: index: a lookup of its key for each row the query reads.  Written as ``NOT
#: EXISTS``, the planner made it an anti-join, and for a recording newer than the
#: table's statistics (it expects one entry) a nested loop over all of the
#: recording's entries for each line: 4.8 s a chunk of 250 lines in a
#: recording of 20,000 (15 ms so).
UNINDEXED_POSTGRES: Final = ("(SELECT 1 FROM event_search s WHERE s.rec = "
                             "e.rec AND s.seq = e.seq) IS NULL")


def _index_postgres(cursor: Any, number: int | None, after: int, last: int) -> None:
    """Add the words of the message lines ``after < seq <= last`` of the recording
    numbered ``number`` not packed yet that have no entry in the search index
    (the writer leaves a burst's out), in the caller's transaction."""
    from .textindex import SEARCHED_TYPES, entry, insert_postgres

    rows = cursor.execute(
        "SELECT e.seq, e.direction, e.data FROM events e WHERE e.rec = %s "
        "AND e.seq > %s AND e.seq <= %s AND e.codec IS NULL AND e.type = ANY(%s) "
        f"AND {UNINDEXED_POSTGRES} ORDER BY e.seq",
        (number, after, last, sorted(SEARCHED_TYPES))).fetchall()
    found = [e for seq, direction, data in rows
             if (e := entry(number, seq, direction, bytes(data))) is not None]
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
    lacking = ("FROM events e WHERE e.rec = %s AND e.seq > %s AND e.type = ANY(%s) "
               f"AND {UNINDEXED_POSTGRES}")
    done, after = 0, -1
    while True:
        cursor = db.begin()
        try:
            number = db.hold(cursor, recording_id)
            lines = Unpacker(functools.partial(stored_dictionary, cursor))
            sizes = cursor.execute(f"SELECT e.seq, e.size {lacking} ORDER BY e.seq LIMIT %s",
                                   (number, after, kinds, CHUNK)).fetchall()
            last, total = after, 0
            for seq, size in sizes:
                total += size or 0
                if total > CHUNK_BYTES and last != after:
                    break
                last = seq
            rows = cursor.execute(
                f"SELECT e.seq, e.direction, e.data, e.codec {lacking} AND e.seq <= %s "
                "ORDER BY e.seq", (number, after, kinds, last)).fetchall()
            found = [e for seq, direction, data, codec in rows
                     if (e := entry(number, seq, direction, lines(data, codec)))
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
        "SELECT 1 FROM events e WHERE e.rec = r.num AND e.codec IS NULL "
        "AND e.seq = (SELECT max(m.seq) FROM events m WHERE m.rec = r.num)) "
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
    with plain_connection(url) as found:
        if found is None:
            return None
        connection, dialect = found
        done = pack_recording(connection, dialect, recording_id)
        if dialect == "sqlite":
            give_back_sqlite(connection)
        return done


@contextlib.contextmanager
def plain_connection(url: str) -> Iterator[tuple[Any, str] | None]:
    """A DB-API connection to the database ``url`` and its dialect, through
    :mod:`sqlite3` (a SQLite file named plainly, in autocommit mode: the
    passes open their own transactions) or psycopg alone, closed after; None
    for a database not reached so."""
    from .postgres import plain_url
    from .sqlite import BUSY_TIMEOUT_S, plain_file

    path = plain_file(url)
    if path is not None:
        import sqlite3

        connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            yield connection, "sqlite"
        finally:
            connection.close()
        return
    conninfo = plain_url(url)
    if conninfo is None:
        yield None
        return
    import psycopg

    with psycopg.connect(conninfo) as server:
        yield server, "postgresql"


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
