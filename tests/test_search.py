"""``claudetrace search`` and claudetrace.store.search on SQLite (PostgreSQL's are in
test_store_postgres.py): the word index the writers keep, over every session."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from claudetrace.cassette import read_cassette
from claudetrace.cli import cli
from claudetrace.indexer import open_settled_store
from claudetrace.model.events import Event
from claudetrace.recording import RecordingInfo
from claudetrace.store import Store, browse, open_store
from claudetrace.store.listing import session_chunks
from claudetrace.store.search import recordings_saying, search, search_plain, snippet
from claudetrace.store.textindex import spaced, words
from tests.test_store_postgres import pg_url  # noqa: F401 - the server, a fixture

CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"


def _said(store: Store, text: str, *, started_ns: int | None = None,
          kind: str = "assistant") -> str:
    info = RecordingInfo.start(["claude"], started_ns=started_ns)
    store.create_recording(info)
    line = {"type": kind, "message": {"role": kind, "content": [{"type": "text", "text": text}]}}
    store.write_batch(info.id, [
        Event(0, "out", 0, json.dumps({"type": "stream_event", "event": {"text": text}}).encode()),
        Event(1, "out", 1, json.dumps(line).encode())])
    return info.id


def _entries(db_path: Path) -> int:
    with sqlite3.connect(db_path) as conn:
        return int(conn.execute("SELECT count(*) FROM event_search").fetchone()[0])


def test_words_are_letters_and_digits_in_lower_case() -> None:
    assert words("Set model to `claude-sonnet-5`; Créé ß Ŀ ǅ Ø") == [
        "set", "model", "to", "claude", "sonnet", "5", "cree", "ß", "ŀ", "ǆ", "ø"]
    ascii_text = "a_b-c.d\te\x1bf 42x!"
    # ASCII text is cut by a byte table, other text by a regular expression: alike.
    assert spaced(ascii_text) == spaced(ascii_text + "é")[:-1] == "a b c d e f 42x "


def accents_are_folded_alike(store: Store) -> None:
    """A Latin letter's accents count for nothing either way, in the index and in the
    query (SQLite's tokenizer took them off, PostgreSQL's kept them)."""
    rid = _said(store, "Un café naïve à Zürich; Ελληνικά")
    for query in ("cafe", "CAFÉ", "naive", "naïve a zür", "à zurich", "ελλην", "café naïve à"):
        assert [(h.recording_id, h.seq) for h in search(store, query)] == [(rid, 1)], query
    assert search(store, "cafes") == [] and search(store, "cafe, naive") == []
    assert search(store, "zürich")[0].snippet == "Un café naïve à Zürich; Ελληνικά"
    assert recordings_saying(store, "naive a") == [rid]  # the session list's search too


def test_accents_are_folded_alike(store: Store) -> None:
    accents_are_folded_alike(store)


def number_like_words_are_whole(store: Store) -> str:
    """A word that starts like a number (a commit's hash) is one word on both
    engines: PostgreSQL's parser read ``49e9e56a893f`` as ``49e9`` and ``e56a893f``,
    so ``e56`` found it there and not on SQLite.  The recording's id."""
    rid = _said(store, "Reverted 49e9e56a893f and 1e5x; kept 9E9")
    for query in ("49e9e56a893f", "49e9e5", "1e5", "1e5x", "9e9", "reverted 49E9E"):
        assert [(h.recording_id, h.seq) for h in search(store, query)] == [(rid, 1)], query
    for query in ("e56", "e56a893f", "x", "49e9e56a893f0"):
        assert search(store, query) == [], query
        assert recordings_saying(store, query) == [], query
    assert recordings_saying(store, "49e9e") == [rid]
    return rid


def test_number_like_words_are_whole(store: Store) -> None:
    number_like_words_are_whole(store)


def test_the_index_holds_message_lines_only_and_goes_with_them(
        store: Store, db_path: Path) -> None:
    rid = _said(store, "the quick brown fox")
    assert _entries(db_path) == 1  # the assistant line, not the stream event
    assert [(h.recording_id, h.seq) for h in search(store, "quick")] == [(rid, 1)]
    store.delete_recording(rid)
    assert _entries(db_path) == 0
    rid = _said(store, "jumps over")
    with sqlite3.connect(db_path) as conn:  # by hand, foreign keys off
        conn.execute("DELETE FROM recordings")
    assert _entries(db_path) == 0 and search(store, "jumps") == []


def test_search_finds_word_beginnings_and_phrases_newest_stored_first(store: Store) -> None:
    old = _said(store, "Hello, world: the deploy FAILED at step 3", started_ns=10**18)
    new = _said(store, "hello again; deploy succeeded")
    assert [h.recording_id for h in search(store, "hel")] == [new, old]
    assert [h.recording_id for h in search(store, "deploy failed")] == [old]
    assert [h.recording_id for h in search(store, "world: the")] == [old]
    assert search(store, "ello") == []  # from a word's beginning only
    assert search(store, "deploy again") == []  # the words, not in this order
    assert search(store, "ploy failed") == []  # a phrase from a word's beginning too
    # Plain words are said one after the other whatever is between them; a query
    # with punctuation is looked for as typed.
    assert [h.recording_id for h in search(store, "again deploy")] == [new]
    assert search(store, "again, deploy") == []
    assert search(store, "!!!") == []
    assert recordings_saying(store, "deploy") == sorted([old, new])
    assert recordings_saying(store, "deploy succeeded") == [new]
    hit = search(store, "failed")[0]
    assert hit.snippet == "Hello, world: the deploy FAILED at step 3"
    assert hit.type == "assistant" and hit.seq == 1


def test_search_reaches_past_the_newest_two_thousand_sessions(
        store: Store, db_path: Path) -> None:
    from claudetrace.store.browse import Filters, list_sessions

    oldest = _said(store, "a needle in an old session", started_ns=10**18)
    with sqlite3.connect(db_path) as conn:
        row = conn.execute("SELECT * FROM recordings WHERE id = ?", (oldest,)).fetchone()
        names = [d[0] for d in conn.execute("SELECT * FROM recordings").description]
        at = names.index("id"), names.index("started_ns"), names.index("num")
        conn.executemany(  # each numbered as it is inserted
            f"INSERT INTO recordings VALUES ({', '.join('?' * len(names))})",
            [tuple(f"{n:026d}" if i == at[0] else 2 * 10**18 + n if i == at[1] else
                   None if i == at[2] else v for i, v in enumerate(row)) for n in range(2500)])
    assert [h.recording_id for h in search(store, "needle")] == [oldest]
    assert [r.id for r in list_sessions(store, Filters(text="needle"))] == [oldest]


def test_snippets_are_one_line_around_the_match() -> None:
    said = "x" * 200 + " the\nneedle\there " + "y" * 200
    shown = snippet(said, "needle")
    assert shown.startswith("…") and shown.endswith("…")
    assert "the needle here" in shown and "\n" not in shown
    assert snippet("short text", "short") == "short text"


def test_the_search_command_escapes_and_speaks_json(store: Store, db_path: Path) -> None:
    rid = _said(store, "ring the bell \x1b]0;owned\x07 now")
    shown = CliRunner().invoke(cli, ["search", "bell", "--db", str(db_path)])
    assert shown.exit_code == 0, shown.output
    assert rid in shown.output and "\\x1b]0;owned\\x07" in shown.output
    assert "\x1b" not in shown.output
    listed = CliRunner().invoke(cli, ["search", "ring the", "--db", str(db_path), "--json"])
    (hit,) = json.loads(listed.output)
    assert (hit["recording_id"], hit["seq"], hit["type"]) == (rid, 1, "assistant")
    assert hit["snippet"].startswith("ring the bell \x1b]0;owned")
    nothing = CliRunner().invoke(cli, ["search", "absent", "--db", str(db_path)])
    assert nothing.exit_code == 1 and "nothing says 'absent'" in nothing.output


#: ``claudetrace search ARGS…`` in a process of its own, naming on stderr the
#: database modules it imported.
SEARCH_ALONE = """
import sys
from claudetrace.cli import cli
try:
    cli(["search", *sys.argv[1:]])
finally:
    # Nor the session fold (the lines' text is all a search reads of them), nor
    # the report's facts and prices (a time is all it prints of a session).
    print(sorted({m.split('.')[0] for m in sys.modules} & {'sqlalchemy', 'alembic'}
                 | set(sys.modules) & {'claudetrace.model.session', 'claudetrace.formats.facts',
                                       'claudetrace.pricing'}), file=sys.stderr)
"""


def search_alone(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SEARCH_ALONE, *args], capture_output=True,
                          text=True, timeout=60)


def test_the_search_command_asks_sqlite_without_sqlalchemy_and_finds_what_the_store_finds(
        store: Store, db_path: Path) -> None:
    old = _said(store, "Hello, world: the deploy FAILED at step 3", started_ns=10**18)
    store.import_cassette(read_cassette(CASSETTES / "plain.ndjson"))
    for query in ("hel", "deploy failed", "fake model", "ello", "!!!"):
        assert search_plain(f"sqlite:///{db_path}", query, limit=None) == search(
            store, query, limit=None)
    done = search_alone("deploy fail", "--db", str(db_path), "--json")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1] == "[]"  # neither SQLAlchemy nor Alembic
    (hit,) = json.loads(done.stdout)
    assert (hit["recording_id"], hit["seq"]) == (old, 1)
    # The text output is the store's, to the byte.
    shown = search_alone("fake", "--db", str(db_path))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == CliRunner().invoke(
        cli, ["search", "fake", "--db", str(db_path)]).output
    nothing = search_alone("absent", "--db", str(db_path))
    assert nothing.returncode == 1 and "nothing says 'absent'" in nothing.stderr


def test_the_search_command_asks_the_store_of_an_older_schema_or_a_missing_file(
        db_path: Path, tmp_path: Path) -> None:
    from alembic import command

    from claudetrace.store.engine import alembic_config

    store = open_store(str(db_path))
    rid = store.import_cassette(read_cassette(CASSETTES / "plain.ndjson"))
    with store.engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0009_footprint")
    store.close()
    assert search_plain(f"sqlite:///{db_path}", "fake") is None  # not at the head
    done = search_alone("fake", "--db", str(db_path))
    assert done.returncode == 0 and rid in done.stdout, done.stderr
    assert "sqlalchemy" in done.stderr.splitlines()[-1]  # the store migrated it
    missing = search_alone("fake", "--db", str(tmp_path / "nope.db"))
    assert missing.returncode != 0 and "nope.db" in missing.stderr


def test_the_search_command_stores_a_finished_recording_waiting_in_its_capture_first(
        store: Store, db_path: Path) -> None:
    from tests.test_indexer import capture_path, dead_pid, new_info, write_capture

    info = new_info(pid=dead_pid())  # its proxy was killed before its indexer stored it
    path = capture_path(db_path, info)
    line = b'{"type":"result","subtype":"success","result":"a walrus waited"}\n'
    write_capture(path, info, [("out", line)], {"exit_code": 0})
    done = search_alone("walrus", "--db", str(db_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(info.id) and "a walrus waited" in done.stdout
    assert not path.exists()
    # Once stored, the next search asks the database alone.
    again = search_alone("walrus", "--db", str(db_path))
    assert again.stdout == done.stdout and again.stderr.splitlines()[-1] == "[]"


def test_a_proxied_session_is_indexed_by_the_writer(db_path: Path) -> None:
    open_store(str(db_path)).close()  # at the head: the writer writes it plainly
    line = b'{"type":"result","subtype":"success","result":"proxied zebra text"}\n'
    done = subprocess.run(
        [sys.executable, "-m", "claudetrace", "proxy", "--db", str(db_path), "--", "cat"],
        input=line, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    store = open_settled_store(str(db_path))
    try:
        # Both directions were recorded (cat echoes): two lines say it.
        assert [(h.seq, h.direction) for h in search(store, "zebra")] == [(1, "out"), (0, "in")]
    finally:
        store.close()


def test_the_migration_indexes_what_was_stored_before_it(db_path: Path) -> None:
    from alembic import command

    from claudetrace.store.engine import alembic_config

    store = open_store(str(db_path))
    rid = store.import_cassette(read_cassette(CASSETTES / "plain.ndjson"))
    before = [(h.recording_id, h.seq) for h in search(store, "fake model")]
    assert before and before[0][0] == rid
    with store.engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0005_postgres_bulk_events")
    store.close()
    store = open_store(str(db_path))
    try:
        assert [(h.recording_id, h.seq) for h in search(store, "fake model")] == before
    finally:
        store.close()


def test_the_session_list_takes_more_sessions_saying_it_than_a_statement_binds(
        store: Store, pg_url: str) -> None:  # noqa: F811
    """The recordings found go to the list's statements as one parameter: more than
    SQLite binds (32,766) are listed, tiled and streamed as they are, on both
    engines (on PostgreSQL, few looked up by id, many kept as each is read)."""
    server = open_store(pg_url)
    try:
        for where in (store, server):
            ids = [_said(where, f"common word {n}") for n in range(5)]
            for unknown in (40_000, 3):
                found = {f"01ZZZZZZZZZZZZZZZZZZZ{n:05d}" for n in range(unknown)} | set(ids)
                filters = browse.Filters(text="common", found=frozenset(found))
                assert [r.id for r in browse.list_sessions(where, filters, limit=3)] == \
                    ids[::-1][:3]
                assert browse.summary(where, filters).count == 5
                assert [r.id for part in session_chunks(where, filters) for r in part] == \
                    ids[::-1]
    finally:
        server.close()


def test_each_entry_goes_under_its_own_events_rowid(store: Store, db_path: Path) -> None:
    """insert_sqlite reads a batch's rowids by its span of sequence numbers: each
    word lands on its own event (two recordings' rows interleaved), and an entry
    whose event is not stored is left out."""
    from claudetrace.store.textindex import insert_sqlite

    ids = []
    for _ in range(2):
        info = RecordingInfo.start(["claude"])
        store.create_recording(info)
        ids.append(info.id)
    line = b'{"type":"stream_event","event":{}}'  # not indexed by the store itself
    for seq in range(6):
        for rid in ids:
            store.write_batch(rid, [Event(seq, "out", seq, line)])
    a, b = ids
    with sqlite3.connect(db_path) as conn:
        n = dict(conn.execute("SELECT id, num FROM recordings"))  # the rows' key
        insert_sqlite(conn.cursor(), [(n[a], 1, "alpha1"), (n[b], 4, "beta4"),
                                      (n[a], 5, "alpha5"), (n[b], 2, "beta2"),
                                      (n[a], 9, "nowhere")])
        found = conn.execute(
            "SELECT r.id, e.seq, s.words FROM event_search s JOIN events e ON "
            "e.rowid = s.rowid JOIN recordings r ON r.num = e.rec ORDER BY s.words").fetchall()
    assert found == [(a, 1, "alpha1"), (a, 5, "alpha5"), (b, 2, "beta2"), (b, 4, "beta4")]


def test_a_long_entry_holds_every_word_in_order_and_its_phrases_are_found(
        store: Store, db_path: Path, pg_url: str) -> None:  # noqa: F811
    """An entry holds every word of its line in order, however long (up to
    MOST_CHARS): a phrase said past the first 8,192 characters, words said
    again, is found on both engines (SQLite from FTS5's positions alone); the
    words said apart are not."""
    from claudetrace.store.textindex import MOST_CHARS, distinct

    text = "Again and again, AGAIN: again_and_again " * 400 + "then the zebra deploys"
    assert 8192 < len(text) < MOST_CHARS
    server = open_store(pg_url)
    try:
        long = _said(store, text)
        far = _said(server, text)
        with sqlite3.connect(db_path) as conn:
            assert conn.execute("SELECT words FROM event_search").fetchall() == [
                (distinct(text),)]
        assert distinct(text).split()[-4:] == ["then", "the", "zebra", "deploys"]
        for where, rid in ((store, long), (server, far)):
            assert [h.recording_id for h in search(where, "the zebra depl")] == [rid]
            assert recordings_saying(where, "then the zebra") == [rid]
            assert search(where, "zebra the") == search(where, "again zebra") == []
            assert recordings_saying(where, "again the zebra") == []
    finally:
        server.close()


def _lines_to_read(*shapes: tuple[str, int]) -> list[bytes]:
    """The odd lines above, the fixture cassettes' lines and ``shapes``' lines
    (a bench shape's name and how many of its lines)."""
    from claudetrace.bench.shapes import shape_lines

    lines = list(_EDGE_LINES)
    for path in sorted(CASSETTES.glob("*.ndjson")):
        lines += [event.data for event in read_cassette(path).events]
    for shape, count in shapes:
        lines += list(shape_lines(shape, count))
    return lines


def _whole(data: bytes) -> str:
    """searchable_text over the whole line parsed (the way line_text is held to)."""
    from claudetrace.model.protocol import searchable_text

    return searchable_text(Event(0, "in", 0, data))


_EDGE_LINES = [
    b"", b"not json", b"[1, 2]", b'"text"', b"\xef\xbb\xbf{}",
    b'{"type":"assistant","message":{"content":[{"type":"text","text":"ok"}]},"x":NaN}',
    b'{"type":"user","message":{"content":"bad \xff byte"}}',
    b'{"type":"user","message":{"content":"ok"},"tool_use_result":"bad \xff byte"}',
    b'{"type":"user","message":{"content":"lone \\ud800 surrogate"}}',
    b'{"type":"user","message":{"content":"raw \xed\xa0\x80 surrogate"}}',
    b'{"type":"assistant","type":"user","message":{"content":"last type wins"}}',
    b'{"type":"user","message":{"content":"one"},"message":{"content":"two"}}',
    b'{"type":"result","result":"done \\u00e9","usage":{"input_tokens":1e400}}',
    b'{"type":"user","message":{"content":"ctl \x01 char"}}',
    b' {"type":"user","message":{"content":"spaced"}} ',
    b'{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash",'
    b'"input":{"n":123456789012345678901234567890,"f":1.5,"b":true,"z":null}}]}}',
    b'{"type":"user","message":{"content":' + b"[" * 300 + b"]" * 300 + b"}}",
    b'{"type":"user","message":{"content":[' + b"{}," * 250 + b'{"type":"text","text":"deep"}]}}',
]


def test_line_text_reads_lines_as_the_whole_parse_does() -> None:
    """line_text (the index's writer, the search, the first prompts) parses only the
    parts of a line the readable text is made of; the text is the same as from
    the whole line, on every fixture and bench shape's lines and on lines the
    quick decoder refuses or would read otherwise (NaN, bytes that are not
    UTF-8, lone surrogates, duplicate keys, nesting past the limit)."""
    from claudetrace.model.protocol import line_text

    lines = _lines_to_read(("deltas", 120), ("tools", 40), ("huge", 4))
    said = [line_text(line) for line in lines]
    assert said == [_whole(line) for line in lines]
    spaced_line = b' {"type":"user","message":{"content":"spaced"}} '
    assert said[_EDGE_LINES.index(spaced_line)] == "spaced"


def test_a_negative_limit_is_a_usage_error(tmp_path: Path) -> None:
    """``-n -1`` is refused in one line (it gave every line but the newest)."""
    result = CliRunner().invoke(cli, ["search", "hello", "--db", str(tmp_path / "x.db"),
                                      "-n", "-1"])
    assert result.exit_code == 2
    assert "-1 is not in the range x>=0" in result.output


def _two_sessions(store: Store, word: str, newer: RecordingInfo,
                  older: RecordingInfo) -> None:
    """Each of ``newer`` and ``older`` says ``word`` in four lines, the newer stored
    first (SQLite's rowids then run against the sessions' order)."""
    for info in (newer, older):
        store.create_recording(info)
        lines = []
        for seq in range(8):
            text = f"{word} deploy step {seq}" if seq % 2 else f"nothing here {seq}"
            lines.append(Event(seq, "out", seq, json.dumps({
                "type": "assistant",
                "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
            }).encode()))
        store.write_batch(info.id, lines)


@pytest.mark.parametrize("few", [2000, 1])
def test_both_engines_list_the_newest_session_first_and_its_last_lines_first(
        store: Store, db_path: Path, pg_url: str, few: int,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same lines in a SQLite file and on PostgreSQL are listed in one order,
    whichever was stored first; on SQLite both when FTS5 finds few lines (read
    and sorted) and many (the events read in order: ``few`` 1)."""
    import uuid

    import claudetrace.store.search as searching

    monkeypatch.setattr(searching, "FEW_LINES", few)
    word = f"okapi{uuid.uuid4().hex}"
    newer = RecordingInfo.start(["claude"], started_ns=2 * 10**18)
    older = RecordingInfo.start(["claude"], started_ns=10**18)
    _two_sessions(store, word, newer, older)
    server = open_store(pg_url)
    try:
        _two_sessions(server, word, newer, older)
        wanted = [(rid, seq) for rid in (newer.id, older.id) for seq in (7, 5, 3, 1)]
        for query in (word, f"{word} deploy"):
            found = {}
            for name, hits in [
                    ("sqlite", search(store, query, limit=None)),
                    ("sqlite plain", search_plain(f"sqlite:///{db_path}", query, limit=None)),
                    ("postgresql", search(server, query, limit=None)),
                    ("postgresql plain", search_plain(pg_url, query, limit=None))]:
                assert hits is not None
                found[name] = [(h.recording_id, h.seq) for h in hits]
            assert found == dict.fromkeys(found, wanted), query
            assert [(h.recording_id, h.seq) for h in search(store, query, limit=3)] == \
                [(h.recording_id, h.seq) for h in search(server, query, limit=3)] == wanted[:3]
    finally:
        server.close()


def _lines_saying(store: Store, info: RecordingInfo, *texts: str) -> None:
    store.create_recording(info)
    store.write_batch(info.id, [Event(seq, "out", seq, json.dumps({
        "type": "assistant",
        "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
    }).encode()) for seq, text in enumerate(texts)])


@pytest.mark.parametrize("few", [2000, 1])
def test_the_search_box_reads_a_sessions_lines_past_the_first_holding_the_words(
        store: Store, pg_url: str, few: int,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A phrase is looked for in one line holding its words of each session first,
    then in the others of those whose line did not say it: a session saying it
    in a later line is found, one holding the words apart is not, on both
    engines, FTS5 finding few lines or many (``few`` 1: each session's message
    lines read from their index)."""
    import uuid

    import claudetrace.store.search as searching

    monkeypatch.setattr(searching, "FEW_LINES", few)
    word = f"okapi{uuid.uuid4().hex}"
    later, apart, first = (RecordingInfo.start(["claude"], started_ns=n * 10**18)
                           for n in (1, 2, 3))
    sessions = [(later, (f"zebra then {word}", "nothing", f"say {word} zebra now")),
                (apart, (f"{word} or zebra", f"zebra, {word}")),
                (first, (f"{word} zebra", f"{word} zebra again"))]
    server = open_store(pg_url)
    try:
        for where in (store, server):
            for info, texts in sessions:
                _lines_saying(where, info, *texts)
        for where in (store, server):
            assert recordings_saying(where, f"{word} zebra") == sorted([later.id, first.id])
            assert recordings_saying(where, f"{word} or") == [apart.id]
            assert recordings_saying(where, word) == sorted([later.id, apart.id, first.id])
            assert [(h.recording_id, h.seq) for h in search(where, f"{word} zebra")] == [
                (first.id, 1), (first.id, 0), (later.id, 2)]
            # The session list's rows and tiles, the ids found bound as one parameter.
            listed = browse.searched(where, browse.Filters(text=f"{word} zebra"))
            assert [r.id for r in browse.list_sessions(where, listed)] == [first.id, later.id]
            assert browse.summary(where, listed).count == 2
    finally:
        server.close()


def _written(text: str, *, ensure_ascii: bool = False) -> bytes:
    return json.dumps({"type": "assistant", "message": {
        "role": "assistant", "content": [{"type": "text", "text": text}]}},
        ensure_ascii=ensure_ascii).encode()


def test_a_phrase_is_found_however_its_line_writes_its_text(
        store: Store, db_path: Path, pg_url: str) -> None:  # noqa: F811
    """A line that says a phrase is found however it is written (escapes, accents,
    letters that case-fold to ASCII, upper case), on both engines, by the
    command and the search box; plain words whatever is between them in the
    line (and whatever spaces or tabs between them in the query), a query with
    punctuation as typed (looked for in a line's bytes before its text is read: a
    line that cannot say it is not decoded)."""
    import uuid

    word = f"okapi{uuid.uuid4().hex[:12]}"
    lines = {
        "escaped accent": _written(f"{word} THÉ end", ensure_ascii=True),
        "raw accent": _written(f"{word} thé end"),
        "kelvin": _written(f"{word} \u212aelvin end"),  # the Kelvin sign folds to k
        "dotted": _written(f"{word} \u0130t end"),  # İ folds to i and a dot
        "solidus": b'{"type":"assistant","message":{"content":[{"type":"text","text":"'
                   + word.encode() + b' the\\/end"}]}}',
        "upper": _written(f"{word.upper()} THE END"),
        "apart": _written(f"{word}, the end"),
        "line break": _written(f"{word}\n  the end"),
        "parts": json.dumps({"type": "assistant", "message": {"content": [
            {"type": "text", "text": f"so {word}"},
            {"type": "tool_use", "id": "toolu_1", "name": "The", "input": {"end": 1}}]}}).encode(),
        "farther": _written(f"{word} then the end"),  # the last word from its beginning
        "after": _written(f"the {word} end"),
    }
    infos = {name: RecordingInfo.start(["claude"], started_ns=(n + 1) * 10**18)
             for n, name in enumerate(lines)}
    server = open_store(pg_url)
    try:
        for where in (store, server):
            for name, line in lines.items():
                where.create_recording(infos[name])
                where.write_batch(infos[name].id, [Event(0, "out", 0, line)])
        plain = {"escaped accent", "raw accent", "upper", "solidus", "apart", "line break",
                 "parts", "farther"}
        for query, says in (
                (f"{word} the", plain), (f"{word}  the", plain), (f" {word}\tthe", plain),
                (f"{word} k", {"kelvin"}), (f"{word} i", {"dotted"}),
                (f"{word} the/end", {"solidus"}), (f"{word}, the", {"apart"}),
                (f"{word},\t the", {"apart"})):
            wanted = sorted(infos[name].id for name in says)
            for where, url in ((store, f"sqlite:///{db_path}"), (server, pg_url)):
                assert recordings_saying(where, query) == wanted, (query, url)
                for hits in (search(where, query), search_plain(url, query)):
                    assert hits is not None
                    assert sorted(h.recording_id for h in hits) == wanted, (query, url)
    finally:
        server.close()


def test_a_search_asks_for_the_recordings_words_were_left_out_of_by_their_index(
        store: Store, db_path: Path) -> None:
    """Migration 0018's partial index answers which recordings a burst left words
    out of (``search_words_later``), not a read of every recording's ``extra``."""
    from claudetrace.store.backlog import MARKED_INDEX, marked_condition

    with sqlite3.connect(db_path) as conn:
        plan = conn.execute("EXPLAIN QUERY PLAN SELECT id, extra FROM recordings WHERE "
                            f"{marked_condition('sqlite')} ORDER BY id").fetchall()
    assert MARKED_INDEX in " ".join(str(step) for step in plan)
