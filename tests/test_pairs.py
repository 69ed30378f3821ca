"""PostgreSQL's search index holds the pairs of words said one after the other
(migration 0023_pairs).

Each entry holds the keys of its pairs of words (a word and the first letters of
the next), so a phrase's lines are asked of the index by its words and its
pairs' keys: a phrase of common words that no line says is answered without
reading the lines holding its words.  Every line that says a phrase holds its
keys (checked on generated text), the same lines are found on both engines, and
the migration gives a populated store's entries their keys (the downgrade takes
them off).
"""

from __future__ import annotations

import json
import random
from typing import Any

import sqlalchemy as sa

from claudetrace.cassette import read_cassette
from claudetrace.model.events import Event
from claudetrace.recording import RecordingInfo
from claudetrace.store import Store, open_store
from claudetrace.store.search import (
    _param,
    _postgres_match,
    query,
    recordings_saying,
    says_words,
    search,
    search_plain,
)
from claudetrace.store.textindex import distinct, pair_keys, phrase_keys, words
from tests.test_recnum import CASSETTES, _migrate, url  # noqa: F401 - a fixture

_VOCABULARY = ("then", "deploy", "the", "a", "of", "it", "café", "Ünïcode", "x9",
               "49e9e56a893f", "deployment", "théorie", "de", "d", "t", "th", "zebra")


def test_every_line_saying_a_phrase_holds_its_pairs_keys() -> None:
    rng = random.Random(23)
    checked = 0
    for _ in range(300):
        text = " ".join(rng.choice(_VOCABULARY) + rng.choice(["", ",", ";", " —"])
                        for _ in range(rng.randrange(1, 30)))
        held = set(json.loads(pair_keys(distinct(text)).replace("{", "[").replace("}", "]")))
        said = words(text)
        for at in range(len(said)):
            for size in range(2, 5):
                phrase = said[at:at + size]
                if len(phrase) < 2:
                    continue
                for cut in range(1, len(phrase[-1]) + 1):  # the last word from its beginning
                    asked = [*phrase[:-1], phrase[-1][:cut]]
                    assert says_words(text, asked)
                    assert set(phrase_keys(asked)) <= held, (text, asked)
                    checked += 1
    assert checked > 10_000


def test_a_phrase_of_one_letter_last_has_the_keys_of_the_others_only() -> None:
    assert phrase_keys(["deploy", "a"]) == []
    assert len(phrase_keys(["then", "deploy", "a"])) == 1
    assert len(phrase_keys(["then", "de"])) == 1
    assert phrase_keys(["then", "de"]) == phrase_keys(["then", "deploy"])


def _say(store: Store, *texts: str) -> str:
    info = RecordingInfo.start(["claude"])
    store.create_recording(info)
    lines = [{"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "text", "text": text}]}} for text in texts]
    store.write_batch(info.id, [Event(seq, "out", seq, json.dumps(line).encode())
                                for seq, line in enumerate(lines)])
    return info.id


#: Lines holding ``then`` and ``deploy`` without saying ``then deploy``.
_NOT_SAYING = [f"deploy {n} then" if n % 2 else f"then we {n} deploy" for n in range(60)]
PHRASES = ("then deploy", "then dep", "deploy then", "we deploy", "then we", "then d",
           "deploy 7 then", "zebra then")


def _found(store: Store, where: str) -> dict[str, Any]:
    return {phrase: ([(h.recording_id, h.seq, h.snippet) for h in search(store, phrase)],
                     [(h.recording_id, h.seq) for h in search_plain(where, phrase) or []],
                     recordings_saying(store, phrase))
            for phrase in PHRASES}


def _index_rows(where: str, phrase: str) -> int | None:
    """The index's rows the search asks for ``phrase`` on PostgreSQL (None on SQLite)."""
    engine = sa.create_engine(where)
    try:
        if engine.dialect.name != "postgresql":
            return None
        match, asked = _postgres_match(query(phrase, "postgresql"), _param("postgresql"))
        with engine.connect() as conn:
            return int(conn.execute(sa.text(
                f"SELECT count(*) FROM event_search s WHERE {match}"), asked).scalar_one())
    finally:
        engine.dispose()


def _pairs(where: str) -> list[Any] | None:
    engine = sa.create_engine(where)
    try:
        if engine.dialect.name != "postgresql":
            return None
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(sa.text(
                "SELECT rec, seq, pairs FROM event_search ORDER BY rec, seq"))]
    finally:
        engine.dispose()


def test_a_phrase_no_line_says_is_answered_by_the_index_and_0023_fills_the_keys(
        url: str) -> None:  # noqa: F811
    store = open_store(url)
    try:
        for path in CASSETTES:
            store.import_cassette(read_cassette(path))
        quiet = _say(store, *_NOT_SAYING)
        saying = _say(store, "first, then: deploy the zebra", "then deployment")
        found = _found(store, url)
    finally:
        store.close()
    assert [(r, s) for r, s, _ in found["then deploy"][0]] == [(saying, 1), (saying, 0)]
    assert found["then deploy"][2] == [saying]
    assert found["then d"][2] == [saying] and found["zebra then"][2] == []
    assert sorted(found["then we"][2]) == found["then we"][2] == [quiet]
    for phrase, (hits, plain, _sessions) in found.items():
        assert [(r, s) for r, s, _ in hits] == plain, phrase
    # The index gives the lines saying the phrase, not the 60 holding its words.
    assert _index_rows(url, "then deploy") in (None, 2)
    assert _index_rows(url, "we deploy") in (None, 0)
    keys = _pairs(url)
    assert keys is None or all(pairs is not None for _, _, pairs in keys)

    _migrate(url, "0022_unfolded")
    engine = sa.create_engine(url)
    try:
        columns = sa.inspect(engine).get_columns("event_search")
    finally:
        engine.dispose()
    assert "pairs" not in {c["name"] for c in columns}
    _migrate(url, "head")
    assert _pairs(url) == keys
    store = open_store(url)
    try:
        assert _found(store, url) == found
    finally:
        store.close()
