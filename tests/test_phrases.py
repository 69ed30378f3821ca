"""SQLite's search index holds the order of a line's words (migration 0021_phrases).

SQLite's FTS5 table keeps positions (``detail=full``) and every entry every
word: the migration makes it so on a populated store, from 0020's (a long
line's words each once), and the downgrade gives 0020's form back.
PostgreSQL's entries are left as they were.  The same phrases are found on
both engines, before and after.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from claudetrace.cassette import read_cassette
from claudetrace.model.events import Event
from claudetrace.recording import RecordingInfo
from claudetrace.store import Store, open_store
from claudetrace.store.search import recordings_saying, search, search_plain
from claudetrace.store.textindex import spaced
from tests.test_recnum import CASSETTES, _migrate, url  # noqa: F401 - a fixture

#: A line longer than the 8,192 characters past which 0006-0020 kept each word once.
LONG = "Again and again, AGAIN: again_and_again " * 400 + "then the zebra deploys"
PHRASES = ("the zebra depl", "then the zebra", "again the zebra", "zebra the", "the user",
           "hello world", "again, AGAIN", "again and again")


def _say(store: Store, text: str) -> str:
    info = RecordingInfo.start(["claude"])
    store.create_recording(info)
    line = {"type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}}
    store.write_batch(info.id, [Event(0, "out", 0, json.dumps(line).encode())])
    return info.id


def _found(store: Store, where: str) -> dict[str, Any]:
    return {phrase: ([(h.recording_id, h.seq, h.snippet) for h in search(store, phrase)],
                     [(h.recording_id, h.seq) for h in search_plain(where, phrase) or []],
                     recordings_saying(store, phrase))
            for phrase in PHRASES}


def _entries(where: str) -> tuple[str, list[Any]]:
    """The index's definition (SQLite) and its entries, in the order of their key."""
    engine = sa.create_engine(where)
    try:
        with engine.connect() as conn:
            if engine.dialect.name == "sqlite":
                made = conn.execute(sa.text(
                    "SELECT sql FROM sqlite_master WHERE name = 'event_search'")).scalar()
                return str(made), list(conn.execute(sa.text(
                    "SELECT rowid, words FROM event_search ORDER BY rowid")).all())
            return "", [(rec, seq, sorted(terms)) for rec, seq, terms in conn.execute(sa.text(
                "SELECT rec, seq, tsvector_to_array(terms) FROM event_search ORDER BY 1, 2"))]
    finally:
        engine.dispose()


def _as_0020_wrote_them(where: str) -> None:
    """The long line's entry as 0020's writers made it on SQLite: each word once."""
    engine = sa.create_engine(where)
    try:
        if engine.dialect.name != "sqlite":
            return
        once = " ".join(dict.fromkeys(spaced(LONG).split()))
        with engine.begin() as conn:
            changed = conn.execute(sa.text(
                "UPDATE event_search SET words = :once WHERE words = :all"),
                {"once": once, "all": spaced(LONG)}).rowcount
        assert changed == 1
    finally:
        engine.dispose()


def test_0021_indexes_a_populated_store_again_and_the_downgrade_gives_0020s_form(
        url: str) -> None:  # noqa: F811
    store = open_store(url)
    try:
        for path in CASSETTES:
            store.import_cassette(read_cassette(path))
        long = _say(store, LONG)
        found = _found(store, url)
    finally:
        store.close()
    assert [r for r, _, _ in found["the zebra depl"][0]] == [long]
    assert found["then the zebra"][2] == [long]
    assert found["again the zebra"][2] == found["zebra the"][2] == []
    assert found["the user"][2] and found["again, AGAIN"][2] == [long]
    made, entries = _entries(url)
    assert "detail=full" in made.replace(" ", "") or url.startswith("postgresql")

    _migrate(url, "0020_recnum")
    old_made, old_entries = _entries(url)
    assert "detail=none" in old_made.replace(" ", "") or url.startswith("postgresql")
    assert old_entries == entries
    _as_0020_wrote_them(url)

    _migrate(url, "head")
    assert _entries(url) == (made, entries)
    store = open_store(url)
    try:
        assert _found(store, url) == found
    finally:
        store.close()
