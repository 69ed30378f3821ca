"""The words of what people read in a recording, as the search index holds them.

Each message line (``user``, ``assistant``, ``result``) has its readable text
(:func:`claudetrace.model.protocol.searchable_text`: message text, tool names
and arguments, results; not ids or JSON keys) indexed as words: runs of letters
and digits, the rest made spaces, so that SQLite's FTS5 and PostgreSQL's text
search (``to_tsvector('simple', …)``) cut them alike (and fold their case).  The
writers add a batch's rows here in the batch's transaction (migration
0006_team_scale); :mod:`.search` queries them.  No SQLAlchemy: the writer
process imports this.
"""

from __future__ import annotations

import re
from typing import Any, Final

from .rows import COLUMNS, Flat, Rows, each_row

#: The line types whose text is indexed: what was said, not the protocol around it.
SEARCHED_TYPES: Final = frozenset({"user", "assistant", "result"})
#: Characters of a line's text that are indexed (a tool's result can be a whole
#: file; PostgreSQL refuses a ``tsvector`` past 1 MiB).
MOST_CHARS: Final = 100_000

_NOT_WORD: Final = re.compile(r"[\W_]+")
#: ASCII text's bytes: letters and digits as they are, anything else a space.
_ASCII_WORDS: Final = bytes(c if c < 128 and chr(c).isalnum() else 32 for c in range(256))
_TYPE: Final = COLUMNS["events"].index("type")
_WIDTH: Final = len(COLUMNS["events"])


def spaced(text: str) -> str:
    """``text`` with each run of characters other than letters and digits made a
    space: its words as the index cuts them (each engine folds their case)."""
    if text.isascii():  # most of it: one C call a byte, a tenth of the regular expression's
        return text.encode().translate(_ASCII_WORDS).decode()
    return _NOT_WORD.sub(" ", text)


def words(text: str) -> list[str]:
    """The words of ``text`` (a query) as the index holds them, in lower case."""
    return spaced(text).lower().split()


def index_rows(rows: Rows) -> list[tuple[str, int, str]]:
    """``(recording_id, seq, words)`` for the message lines of a batch's event
    rows that say anything (:func:`spaced`)."""
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


def entry(recording_id: str, seq: int, direction: str,
          data: bytes) -> tuple[str, int, str] | None:
    """``(recording_id, seq, words)`` of one message line; None when it says nothing."""
    from ..model.protocol import line_text

    said = spaced(line_text(bytes(data))[:MOST_CHARS])
    return (recording_id, seq, said) if not said.isspace() and said else None


def insert_sqlite(cursor: Any, entries: list[tuple[str, int, str]]) -> None:
    """Add ``entries`` to SQLite's ``event_search`` (FTS5), each under its event's
    rowid (an event deleted takes its entry with it: a trigger); an entry whose
    event is not stored is left out.

    The rowids are read first, a recording's span of sequence numbers in one
    query, and the entries inserted with them as values: an ``INSERT … SELECT``
    into the FTS5 table an entry, as before, took four times as long in a
    tool-heavy burst (``bench ingest --shape tools``: 8 s of the writer's 10)."""
    spans: dict[str, tuple[int, int]] = {}
    for rid, seq, _said in entries:
        low, high = spans.get(rid, (seq, seq))
        spans[rid] = (min(low, seq), max(high, seq))
    rowids: dict[tuple[str, int], int] = {}
    for rid, (low, high) in spans.items():
        cursor.execute("SELECT seq, rowid FROM events WHERE recording_id = ? "
                       "AND seq BETWEEN ? AND ?", (rid, low, high))
        rowids.update(((rid, seq), rowid) for seq, rowid in cursor.fetchall())
    cursor.executemany(
        "INSERT INTO event_search (rowid, words) VALUES (?, ?)",
        [(rowid, said) for rid, seq, said in entries
         if (rowid := rowids.get((rid, seq))) is not None])


def insert_postgres(cursor: Any, entries: list[tuple[str, int, str]]) -> None:
    """Add ``entries`` to PostgreSQL's ``event_search`` (a ``tsvector`` a line,
    under a GIN index), in one statement."""
    cursor.execute(
        "INSERT INTO event_search (recording_id, seq, terms) "
        "SELECT r, s, to_tsvector('simple', w) FROM unnest(%s::varchar[], %s::int[], "
        "%s::text[]) AS u(r, s, w)",
        ([e[0] for e in entries], [e[1] for e in entries], [e[2] for e in entries]))
