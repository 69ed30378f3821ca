"""The words of what people read in a recording, as the search index holds them.

Each message line (``user``, ``assistant``, ``result``) has its readable text
(:func:`claudetrace.model.protocol.searchable_text`: message text, tool names
and arguments, results; not ids or JSON keys) indexed as words: runs of letters
and digits, the rest made spaces, so that SQLite's FTS5 and PostgreSQL's text
search cut them alike (and fold their case), a Latin letter's accents taken off
first (:func:`fold`: ``café`` is ``cafe`` on both engines, as SQLite's tokenizer
alone did).  PostgreSQL is given the words already cut (:func:`postgres_words`):
its parser (``to_tsvector``) read a word such as ``49e9e56a893f`` as a number
and a word, which SQLite's FTS5 does not.
An entry holds every word of its line's text in order: SQLite's FTS5 table
keeps their positions (``detail=full``, migration 0021_phrases) and answers a
phrase query.  PostgreSQL's ``tsvector`` holds each word once, without
positions (:func:`postgres_words`), and beside it the keys of the line's pairs
of words (:func:`pair_keys`, migration 0023_pairs): the search asks for the
lines holding a phrase's words and its pairs' keys and reads those alone (a
phrase of common words no line says reads none; positions in the vectors cost
the GIN index's writes 2 times and still read each line holding the words:
docs/benchmarks.md).
The writers add a batch's rows here in the batch's transaction (migration
0006_team_scale); :mod:`.search` queries them.  No SQLAlchemy: the writer
process imports this.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
import zlib
from collections.abc import Iterable
from typing import Any, Final

from ..model.events import Event
from ..model.protocol import line_text, searchable_text
from .keys import KEY
from .rows import COLUMNS, Flat, Rows, each_row

#: The line types whose text is indexed: what was said, not the protocol around it.
SEARCHED_TYPES: Final = frozenset({"user", "assistant", "result"})
#: Characters of a line's text that are indexed (a tool's result can be a whole
#: file; PostgreSQL refuses a ``tsvector`` past 1 MiB).
MOST_CHARS: Final = 100_000

_NOT_WORD: Final = re.compile(r"[\W_]+")
#: ASCII text's bytes: letters and digits as they are, anything else a space.
_ASCII_WORDS: Final = bytes(c if c < 128 and chr(c).isalnum() else 32 for c in range(256))


def _latin_bases() -> dict[int, str]:
    """The Latin letters with accents (Latin-1 Supplement, Extended-A and -B, and
    Extended Additional) that are an ASCII letter and combining marks alone, each
    mapped to that letter: what SQLite's ``unicode61`` tokenizer's
    ``remove_diacritics`` folds, so that PostgreSQL's index folds alike."""
    bases = {}
    for cp in (*range(0xC0, 0x250), *range(0x1E00, 0x1F00)):
        parts = unicodedata.normalize("NFD", chr(cp))
        if (len(parts) > 1 and parts[0].isascii() and parts[0].isalpha()
                and all(unicodedata.combining(c) for c in parts[1:])):
            bases[cp] = parts[0]
    return bases


#: :func:`fold`'s table: a Latin letter with accents to its letter without them.
LATIN_BASES: Final = _latin_bases()
_TYPE: Final = COLUMNS["events"].index("type")
_WIDTH: Final = len(COLUMNS["events"])


def fold(text: str) -> str:
    """``text`` with each Latin letter's accents taken off (``é`` → ``e``, ``Ñ`` →
    ``N``), character for character (its length kept)."""
    return text if text.isascii() else text.translate(LATIN_BASES)


def spaced(text: str) -> str:
    """``text`` with each run of characters other than letters and digits made a
    space and accents taken off (:func:`fold`): its words as the index cuts them
    (each engine folds their case)."""
    if text.isascii():  # most of it: one C call a byte, a tenth of the regular expression's
        return text.encode().translate(_ASCII_WORDS).decode()
    return _NOT_WORD.sub(" ", text.translate(LATIN_BASES))


def distinct(text: str) -> str:
    """The words of a line's text as its index entry holds them: :func:`spaced`,
    every word in order (FTS5 finds a phrase by their positions); empty when it
    says nothing."""
    said = spaced(text[:MOST_CHARS])
    return "" if said.isspace() else said


def words(text: str) -> list[str]:
    """The words of ``text`` (a query) as the index holds them, in lower case."""
    return spaced(text).lower().split()


#: Bytes of a word PostgreSQL's ``to_tsvector`` leaves out ("word is too long to be
#: indexed"); :func:`postgres_words` leaves it out alike.
PG_WORD_BYTES: Final = 2047


def postgres_words(said: str) -> str:
    """The words of an entry (:func:`spaced` text) as PostgreSQL's index holds them:
    each once, in lower case, those it cannot index left out (the index says
    which lines hold a word, never where or how often)."""
    # A character is at most 4 bytes: only a long word is measured.
    return " ".join(w for w in dict.fromkeys(said.lower().split())
                    if len(w) * 4 < PG_WORD_BYTES or len(w.encode()) < PG_WORD_BYTES)


#: Characters of a pair's second word its key holds (:func:`pair_keys`): a query's
#: last word is looked for from its beginning, so a key cannot hold it whole.
PAIR_FOLLOWER: Final = 2


def pair_key(first: str, follower: str) -> int:
    """The key of the word ``first`` followed by a word starting with ``follower``
    (its first :data:`PAIR_FOLLOWER` characters): a CRC-32, as PostgreSQL's
    ``integer`` (a hash every build and machine gives alike, unlike the server's
    ``hashtext``)."""
    return zlib.crc32(f"{first} {follower[:PAIR_FOLLOWER]}".encode()) - 2**31


def pair_keys(said: str) -> str:
    """The keys of each pair of words said one after the other in an entry
    (:func:`spaced` text), each once, as PostgreSQL's ``integer[]`` literal:
    its index finds the lines that may say a phrase (:func:`phrase_keys`) without
    reading each line holding its words (a key may stand for other words too:
    the lines it finds are checked)."""
    found = said.lower().split()
    keys = {pair_key(first, follower) for first, follower in itertools.pairwise(found)}
    return "{" + ",".join(map(str, keys)) + "}"


def phrase_keys(query_words: list[str]) -> list[int]:
    """The :func:`pair_key` of each pair of ``query_words`` (a phrase, its last
    word from its beginning) that every line saying it holds: all but a last
    word shorter than :data:`PAIR_FOLLOWER`."""
    last = len(query_words) - 1
    return [pair_key(first, query_words[at + 1])
            for at, first in enumerate(query_words[:last])
            if at + 1 < last or len(query_words[last]) >= PAIR_FOLLOWER]


def index_rows(rows: Rows) -> list[tuple[Any, int, str]]:
    """``(rows' first value, seq, words)`` for the message lines of a batch's event
    rows that say anything (:func:`distinct`)."""
    if isinstance(rows, Flat):
        kinds = rows.values[_TYPE::_WIDTH]
        if not SEARCHED_TYPES.intersection(kinds):
            return []
        wanted = [tuple(rows.values[i * _WIDTH:(i + 1) * _WIDTH])
                  for i, kind in enumerate(kinds) if kind in SEARCHED_TYPES]
    else:
        wanted = [row for row in each_row(rows) if row[_TYPE] in SEARCHED_TYPES]
    if not wanted:
        return []
    found = (entry(row[0], row[1], row[2], row[5]) for row in wanted)
    return [e for e in found if e is not None]


def entry(key: Any, seq: int, direction: str, data: bytes) -> tuple[Any, int, str] | None:
    """``(key, seq, words)`` of one message line (``key``: its recording's number,
    or what the caller keys it by); None when it says nothing."""
    said = distinct(line_text(bytes(data)))
    return (key, seq, said) if said else None


def line_words(event: Event) -> str | None:
    """The words of ``event``'s line as the index holds them (:func:`distinct`); None
    for a line that is not a message or says nothing.  An event that holds its
    parsed line (a converter's) is not parsed again."""
    if event.fields.type not in SEARCHED_TYPES:
        return None
    return distinct(searchable_text(event)) or None


class Said(Event, gc=False):
    """An event with its line's :func:`line_words` worked out already: a converter
    works them out while it holds the parsed line (:class:`~claudetrace.formats.spool.Spool`),
    and the store does not read the line again."""

    words: str | None = None


def index_events(key: Any, events: Iterable[Event]) -> list[tuple[Any, int, str]]:
    """:func:`index_rows` of ``events``' rows (``key``: their recording's number),
    taking the words of each :class:`Said` event as they come."""
    found = []
    for ev in events:
        said = ev.words if isinstance(ev, Said) else line_words(ev)
        if said is not None:
            found.append((key, ev.seq, said))
    return found


def insert_sqlite(cursor: Any, entries: list[tuple[Any, int, str]], key: str = KEY) -> None:
    """Add ``entries`` (``(recording's number, seq, words)``) to SQLite's
    ``event_search`` (FTS5), each under its event's rowid (an event deleted takes
    its entry with it: a trigger); an entry whose event is not stored is left
    out.  ``key``: the column of ``events`` the entries' first value is (a
    migration before 0020_recnum gives the id's).

    The rowids are read first, one query for each recording's range of lines,
    and the entries inserted by rowid: FTS5 took an ``INSERT … SELECT rowid``
    a line at about five times the time (4.1 s against 0.85 s for the 110k
    lines of ``bench import``'s tree)."""
    ranges: dict[Any, tuple[int, int]] = {}
    for rid, seq, _said in entries:
        low, high = ranges.get(rid, (seq, seq))
        ranges[rid] = (min(low, seq), max(high, seq))
    rowids: dict[tuple[Any, int], int] = {}
    for rid, (low, high) in ranges.items():
        found = cursor.execute(f"SELECT seq, rowid FROM events WHERE {key} = ? "
                               "AND seq BETWEEN ? AND ?", (rid, low, high))
        rowids.update(((rid, seq), rowid) for seq, rowid in found)
    cursor.executemany(
        "INSERT INTO event_search (rowid, words) VALUES (?, ?)",
        [(rowid, said) for rid, seq, said in entries
         if (rowid := rowids.get((rid, seq))) is not None])


def insert_postgres(cursor: Any, entries: list[tuple[Any, int, str]], key: str = KEY) -> None:
    """Add ``entries`` (``(recording's number, seq, words)``; ``key`` as
    :func:`insert_sqlite`'s) to PostgreSQL's ``event_search`` (a ``tsvector`` a line,
    under a GIN index), in one statement, each entry's words once
    (:func:`postgres_words`: the index took the tools shape's entries in about a
    third less time), with the keys of its pairs of words (:func:`pair_keys`,
    migration 0023_pairs).  The words go in as they are (``array_to_tsvector``),
    not through PostgreSQL's parser, so they are SQLite's; the vectors hold no
    positions: a phrase's lines are found by its pairs' keys and read
    (:mod:`.search`)."""
    if key != KEY:  # a migration before 0020_recnum: no pairs yet (0023_pairs)
        cursor.execute(
            f"INSERT INTO event_search ({key}, seq, terms) "
            "SELECT r, s, array_to_tsvector(string_to_array(w, ' ')) "
            "FROM unnest(%s::varchar[], %s::int[], %s::text[]) AS u(r, s, w)",
            ([e[0] for e in entries], [e[1] for e in entries],
             [postgres_words(e[2]) for e in entries]))
        return
    cursor.execute(
        "INSERT INTO event_search (rec, seq, terms, pairs) "
        "SELECT r, s, array_to_tsvector(string_to_array(w, ' ')), CAST(p AS integer[]) "
        "FROM unnest(%s::int[], %s::int[], %s::text[], %s::text[]) AS u(r, s, w, p)",
        ([e[0] for e in entries], [e[1] for e in entries],
         [postgres_words(e[2]) for e in entries], [pair_keys(e[2]) for e in entries]))
