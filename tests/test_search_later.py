"""A burst's search words reach the index after its recording is listed complete
(claudetrace.store.packing adds them as it packs the lines), and a search catches
up on a recording whose indexer was killed before it had."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from claudetrace.bench.shapes import shape_lines
from claudetrace.indexer import open_settled_store
from claudetrace.store.backlog import catch_up
from claudetrace.store.packing import WORDS_LATER, Unpacker, pack_recording, unpack
from claudetrace.store.plain import LATER_FROM_ROWS
from claudetrace.store.textindex import entry
from tests.test_store_postgres import pg_url  # noqa: F401 - the server, a fixture

#: A word of the tools shape's texts (its vocabulary), and one it never says.
SAID, UNSAID = "checklist", "xylophone"


def _pids(needle: str) -> list[int]:
    """The processes whose command line holds ``needle``."""
    found = []
    for entry_ in os.scandir("/proc"):
        if not entry_.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry_.name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if any(needle.encode() in arg for arg in argv) and int(entry_.name) != os.getpid():
            found.append(int(entry_.name))
    return found


def _wanted(rows: list[tuple[Any, ...]]) -> dict[int, str]:
    """What the index should hold for the message lines ``(seq, direction, data)``."""
    return {e[1]: e[2] for seq, direction, data in rows
            if (e := entry("r", seq, direction, bytes(data))) is not None}


def _held_sqlite(db: Path) -> tuple[dict[int, str], dict[int, str]]:
    """The entries the index holds and should hold, by seq, of the file's one recording."""
    from claudetrace.store import open_store

    store = open_store(str(db))
    try:
        rid = store.list_recordings()[0].id
        rows = [(e.seq, e.direction, e.data) for e in store.iter_events(rid)
                if e.fields.type in ("user", "assistant", "result")]
    finally:
        store.close()
    with sqlite3.connect(db) as conn:
        held = dict(conn.execute("SELECT e.seq, s.words FROM event_search s "
                                 "JOIN events e ON e.rowid = s.rowid").fetchall())
    return held, _wanted(rows)


def _search(db: str, word: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "claudetrace", "search", "--db", db,
                           "--limit", "100000", word], capture_output=True, text=True,
                          timeout=300)


def _burst(db: str, tmp_path: Path, lines: int, shape: str = "tools") -> bytes:
    _made(db)
    sent = b"".join(line + b"\n" for line in shape_lines(shape, lines))
    done = subprocess.run([sys.executable, "-m", "claudetrace", "proxy", "--db", db,
                           "--name", f"burst-{tmp_path.name}", "--", "cat"],
                          input=sent, capture_output=True, check=True, cwd=tmp_path)
    assert done.stdout == sent
    return sent


@pytest.mark.parametrize(("shape", "lines", "messages"), [("tools", 2000, 4000), ("huge", 8, 16)])
def test_a_burst_is_searchable_a_moment_after_it_is_listed(
        tmp_path: Path, ct_env: Path, shape: str, lines: int, messages: int) -> None:
    """A burst of many lines, or of a few huge ones (a burst by its bytes)."""
    db = tmp_path / "b.db"
    _burst(str(db), tmp_path, lines, shape)
    open_settled_store(str(db)).close()  # listed complete: the indexer's pass follows
    deadline = time.monotonic() + 120
    while _pids(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.05)
    held, wanted = _held_sqlite(db)
    assert len(wanted) == messages and held == wanted  # both directions of every line


def _kill_the_indexer_once_listed(db: str, tmp_path: Path, hold: Any) -> None:
    """Run a tools burst through the proxy; once its recording is listed complete,
    keep the indexer's pass from going on (``hold()``) and kill it (SIGKILL)."""
    _made(db)
    proxy = subprocess.Popen(
        [sys.executable, "-m", "claudetrace", "proxy", "--db", db, "--name",
         f"killed-{tmp_path.name}", "--", "cat"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, cwd=tmp_path)
    assert proxy.stdin is not None
    proxy.stdin.write(b"".join(line + b"\n" for line in shape_lines("tools", 6000)))
    proxy.stdin.close()
    assert proxy.wait(120) == 0
    indexers = _pids("claudetrace.indexer")
    mine = [pid for pid in indexers if str(tmp_path) in _cmdline(pid)]
    assert mine, "the indexer ended before it could be killed"
    hold()
    for pid in mine:
        os.kill(pid, signal.SIGKILL)


def _made(db: str) -> None:
    """The store made, as any in use is (a database still to make is written by
    the store itself, which adds the words with each batch)."""
    from claudetrace.store import open_store

    open_store(db).close()


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _listed(conn: Any, name: str) -> bool:
    row = conn.execute("SELECT ended_ns FROM recordings WHERE name = ?", (name,)).fetchone()
    return row is not None and row[0] is not None


def test_search_catches_up_on_a_burst_whose_indexer_was_killed_after_listing(
        tmp_path: Path, ct_env: Path) -> None:
    db = tmp_path / "k.db"
    _made(str(db))
    lock = sqlite3.connect(db, timeout=60, isolation_level=None)

    def hold() -> None:
        # Wait for the recording to be listed complete, then take the write lock
        # the indexer's pass needs for each of its transactions.
        deadline = time.monotonic() + 120
        while True:
            try:
                if _listed(lock, f"killed-{tmp_path.name}"):
                    break
            except sqlite3.OperationalError:  # no table yet
                pass
            assert time.monotonic() < deadline, "never listed complete"
            time.sleep(0.002)
        lock.execute("BEGIN IMMEDIATE")

    try:
        _kill_the_indexer_once_listed(str(db), tmp_path, hold)
    finally:
        if lock.in_transaction:
            lock.execute("ROLLBACK")
        lock.close()
    held, wanted = _held_sqlite(db)
    assert len(wanted) == 12_000
    # Listed complete without most of its words: they come after, and the
    # recording says so.
    assert len(held) < len(wanted) // 2, (len(held), len(wanted))
    assert _marked(db)
    found = _search(str(db), SAID)
    assert found.returncode == 0, found.stderr
    held, wanted = _held_sqlite(db)
    assert held == wanted  # every word of every line, once
    assert len(found.stdout.splitlines()) == sum(SAID in w.lower().split()
                                                 for w in wanted.values())
    assert _search(str(db), UNSAID).returncode == 1
    # Caught up: the next search finds nothing to do.
    assert not _marked(db)
    with sqlite3.connect(db, isolation_level=None) as conn:
        assert catch_up(conn, "sqlite") == 0


def _marked(db: Path) -> bool:
    with sqlite3.connect(db) as conn:
        (extra,) = conn.execute("SELECT extra FROM recordings").fetchone()
    return WORDS_LATER in json.loads(extra)


def test_a_search_leaves_a_recording_with_its_words_as_it_is(tmp_path: Path,
                                                              ct_env: Path) -> None:
    """An import writes its words with its lines and leaves them unpacked (for
    ``db pack``): a search has nothing to catch up on, and packs nothing."""
    cassette = Path(__file__).parent / "fixtures" / "cassettes" / "plain.ndjson"
    db = tmp_path / "i.db"
    subprocess.run([sys.executable, "-m", "claudetrace", "import", "--db", str(db),
                    str(cassette)], check=True, capture_output=True)
    _search(str(db), "hello")
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM events WHERE codec IS NOT NULL"
                            ).fetchone() == (0,)


def test_search_catches_up_on_postgresql(tmp_path: Path, ct_env: Path,
                                         pg_url: str) -> None:  # noqa: F811
    import psycopg

    from claudetrace.store.postgres import plain_url

    conninfo = plain_url(pg_url)
    assert conninfo is not None
    name = f"killed-{tmp_path.name}"
    held_by: list[Any] = []

    def hold() -> None:
        conn = psycopg.connect(conninfo)
        held_by.append(conn)
        deadline = time.monotonic() + 120
        while True:
            row = conn.execute("SELECT id, ended_ns FROM recordings WHERE name = %s",
                               (name,)).fetchone()
            conn.rollback()
            if row is not None and row[1] is not None:
                break
            assert time.monotonic() < deadline, "never listed complete"
            time.sleep(0.002)
        # The lock each transaction of the pass takes first.
        conn.execute("SELECT id FROM recordings WHERE id = %s FOR NO KEY UPDATE", (row[0],))

    try:
        _kill_the_indexer_once_listed(pg_url, tmp_path, hold)
    finally:
        for conn in held_by:
            conn.rollback()
            conn.close()
    with psycopg.connect(conninfo) as conn:
        (rid,) = conn.execute("SELECT id FROM recordings WHERE name = %s", (name,)).fetchone()
        rows = conn.execute("SELECT seq, direction, data, codec FROM events WHERE "
                            "rec = (SELECT num FROM recordings WHERE id = %s) "
                            "AND type IN ('user', 'assistant', 'result')",
                            (rid,)).fetchall()
        # The writer stores the lines packed once the store has a dictionary.
        zdicts = {n: bytes(d) for n, d in conn.execute("SELECT id, data FROM line_dictionaries")}
        assert any(codec for *_, codec in rows)
        wanted = _wanted([(seq, direction, unpack(data, codec, zdicts.__getitem__))
                          for seq, direction, data, codec in rows])
        assert len(wanted) == 12_000
        indexed = conn.execute("SELECT count(*) FROM event_search WHERE rec = "
                               "(SELECT num FROM recordings WHERE id = %s)",
                               (rid,)).fetchone()[0]
        assert indexed < len(wanted) // 2, indexed
        assert conn.execute("SELECT extra::jsonb ? %s FROM recordings WHERE id = %s",
                            (WORDS_LATER, rid)).fetchone() == (True,)
    found = _search(pg_url, SAID)
    assert found.returncode == 0, found.stderr
    with psycopg.connect(conninfo) as conn:
        held = dict(conn.execute(
            "SELECT seq, terms::text FROM event_search WHERE rec = "
            "(SELECT num FROM recordings WHERE id = %s)",
            (rid,)).fetchall())
        assert held.keys() == wanted.keys()
        # Each entry's words (PostgreSQL's vector: 'word' 'word' …).
        for seq, said in wanted.items():
            assert sorted(held[seq].replace("'", "").split()) == sorted(
                set(said.lower().split())), seq
        assert conn.execute("SELECT extra::jsonb ? %s FROM recordings WHERE id = %s",
                            (WORDS_LATER, rid)).fetchone() == (False,)
        # The command that settled the killed indexer's capture gave the lines their
        # words and took the mark off; their packing is left to the next pass.
        pack_recording(conn, "postgresql", rid)
        assert pack_recording(conn, "postgresql", rid) == 0


@pytest.mark.parametrize("rows", [1, 20, LATER_FROM_ROWS - 1])
def test_a_batch_at_a_persons_pace_has_its_words_at_once(tmp_path: Path, rows: int) -> None:
    """The writer leaves words out only of a burst's batches (LATER_FROM_ROWS)."""
    from claudetrace.model.events import Event
    from claudetrace.store.rows import flat_rows

    db = tmp_path / "p.db"
    writes, info = _indexers_writes(db)
    lines = list(shape_lines("tools", rows + LATER_FROM_ROWS))
    small = [Event(i, "out", i, line) for i, line in enumerate(lines[:rows])]
    big = [Event(rows + i, "out", rows + i, line)
           for i, line in enumerate(lines[rows:])]
    for batch in (small, big):
        writes.write_rows(info.id, *flat_rows(info.id, batch))
    writes.close()
    assert _indexed(db) == set(range(rows))


def _indexers_writes(db: Path) -> tuple[Any, Any]:
    """The writes of an indexer's writer (a burst's words left for later) into a
    new store at ``db``, and a recording made there."""
    from claudetrace.recording import RecordingInfo
    from claudetrace.store import open_store
    from claudetrace.store.sqlite import SqliteWrites

    open_store(str(db)).close()
    writes = SqliteWrites(db)
    writes.words_later = True
    info = RecordingInfo.start(["claude"])
    writes.create_recording(info)
    return writes, info


def _indexed(db: Path) -> set[int]:
    """The seqs of the lines the search index holds words of."""
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute(
            "SELECT e.seq FROM event_search s JOIN events e ON e.rowid = s.rowid")}


def test_a_few_huge_lines_are_a_burst_by_their_bytes(tmp_path: Path) -> None:
    """A batch of a few lines of a megabyte or more goes without its words (they
    took the writer as long as the lines' writes); one just under goes with them."""
    from claudetrace.model.events import Event
    from claudetrace.store.plain import LATER_FROM_BYTES, defers_words
    from claudetrace.store.rows import flat_rows, row_bytes

    db = tmp_path / "h.db"
    writes, info = _indexers_writes(db)
    huge = next(line for line in shape_lines("huge", 8) if len(line) > LATER_FROM_BYTES)
    said = b'{"type":"user","message":{"role":"user","content":"' + SAID.encode()
    under = said + b" " * (LATER_FROM_BYTES - len(said) - 4) + b'"}}'
    batches = [[Event(0, "out", 0, under)], [Event(1, "out", 1, huge)]]
    for batch in batches:
        rows, tools = flat_rows(info.id, batch)
        assert row_bytes(rows) == len(batch[0].data)
        assert defers_words(1, row_bytes(rows)) == (batch[0].seq == 1)
        writes.write_rows(info.id, rows, tools)
    writes.close()
    assert _indexed(db) == {0}


# -- recordings that did not end: abandoned, or still running --------------------------


def _open_burst(db: str, tmp_path: Path, lines: int,
                quiet: float | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """A proxy recording ``cat`` into ``db``, sent a tools burst of ``lines`` lines
    and held open (its stdin not closed); returns it and its recording's name
    once every line of the burst, both directions, is stored.  ``quiet``: the
    seconds its indexer waits on a pause before adding the burst's words."""
    _made(db)
    name = f"open-{tmp_path.name}"
    env = dict(os.environ)
    if quiet is not None:
        env["CLAUDETRACE_WORDS_QUIET"] = str(quiet)
    proxy = subprocess.Popen(
        [sys.executable, "-m", "claudetrace", "proxy", "--db", db, "--name", name, "--", "cat"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, cwd=tmp_path, env=env)
    assert proxy.stdin is not None
    proxy.stdin.write(b"".join(line + b"\n" for line in shape_lines("tools", lines)))
    proxy.stdin.flush()
    deadline = time.monotonic() + 120
    while _stored(db, name) < 2 * lines:
        assert proxy.poll() is None, "the proxy ended"
        assert time.monotonic() < deadline, "the burst was never stored"
        time.sleep(0.05)
    return proxy, name


def _connect(db: str) -> Any:
    if db.startswith("postgresql"):
        import psycopg

        from claudetrace.store.postgres import plain_url

        return psycopg.connect(plain_url(db), autocommit=True)
    return sqlite3.connect(db, isolation_level=None)


def _one(db: str, statement: str, params: tuple[Any, ...] = ()) -> Any:
    conn = _connect(db)
    try:
        mark = "%s" if db.startswith("postgresql") else "?"
        return conn.execute(statement.replace("?", mark), params).fetchone()
    finally:
        conn.close()


def _stored(db: str, name: str) -> int:
    try:
        return int(_one(db, "SELECT count(*) FROM events e JOIN recordings r ON "
                            "r.num = e.rec WHERE r.name = ?", (name,))[0])
    except Exception:  # no table yet
        return 0


def _state(db: str, name: str) -> tuple[str, int | None, bool]:
    """The recording's id, its end, and whether it says its words came later."""
    rid, ended, extra = _one(db, "SELECT id, ended_ns, extra FROM recordings WHERE name = ?",
                             (name,))
    extra = json.loads(extra) if isinstance(extra, str) else extra
    return rid, ended, WORDS_LATER in (extra or {})


def _index(db: str, rid: str) -> tuple[dict[int, str], dict[int, str], int]:
    """The words the index holds by seq (each entry's distinct words, sorted), what
    it should hold, and how many entries it has (a line indexed twice counts twice)."""
    conn = _connect(db)
    mark = "%s" if db.startswith("postgresql") else "?"
    unpack = Unpacker(lambda number: conn.execute(
        f"SELECT data FROM line_dictionaries WHERE id = {mark}", (number,)).fetchone()[0])
    try:
        rows = [(seq, direction, unpack(data, codec)) for seq, direction, data, codec in
                conn.execute(f"SELECT seq, direction, data, codec FROM events WHERE "
                             f"rec = (SELECT num FROM recordings WHERE id = {mark}) "
                             "AND type IN ('user', 'assistant', "
                             "'result')", (rid,)).fetchall()]
        if db.startswith("postgresql"):
            held = conn.execute("SELECT seq, terms::text FROM event_search WHERE "
                                "rec = (SELECT num FROM recordings WHERE id = %s)",
                                (rid,)).fetchall()
            held = [(seq, said.replace("'", "")) for seq, said in held]
        else:
            held = conn.execute("SELECT e.seq, s.words FROM event_search s JOIN events e "
                                "ON e.rowid = s.rowid WHERE e.rec = "
                                "(SELECT num FROM recordings WHERE id = ?)",
                                (rid,)).fetchall()
    finally:
        conn.close()
    words_of = {seq: " ".join(sorted(set(said.lower().split()))) for seq, said in held}
    wanted = {seq: " ".join(sorted(set(said.lower().split())))
              for seq, said in _wanted(rows).items()}
    return words_of, wanted, len(held)


def _said(wanted: dict[int, str]) -> int:
    return sum(SAID in said.split() for said in wanted.values())


def _searched_whole(db: str, name: str) -> str:
    """Check that the recording ``name`` has not ended and most of its 12,000
    message lines lack their words; search; check that the index holds every
    word of every line, once, and the search found each line saying it.
    Returns the recording's id."""
    rid, ended, mark = _state(db, name)
    held, wanted, _ = _index(db, rid)
    assert ended is None and mark and len(wanted) == 12_000
    assert len(held) < len(wanted) // 2, (len(held), len(wanted))
    found = _search(db, SAID)
    assert found.returncode == 0, found.stderr
    held, wanted, entries = _index(db, rid)
    assert held == wanted and entries == len(wanted)
    assert len([line for line in found.stdout.splitlines() if line.startswith(rid)]) == \
        _said(wanted)
    return rid


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db(request: pytest.FixtureRequest, tmp_path: Path, ct_env: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "o.db")
    return str(request.getfixturevalue("pg_url"))


def test_search_finds_every_word_of_an_abandoned_recording(tmp_path: Path, any_db: str) -> None:
    """Proxy and indexer SIGKILLed mid-burst and the capture gone: nothing will
    ever end the recording; a search still gives the index all its words."""
    proxy, name = _open_burst(any_db, tmp_path, 6000, quiet=3600)
    indexers = [pid for pid in _pids("claudetrace.indexer") if str(tmp_path) in _cmdline(pid)]
    assert indexers
    for pid in [proxy.pid, *indexers]:
        os.kill(pid, signal.SIGKILL)
    proxy.wait(30)
    assert proxy.stdin is not None
    with contextlib.suppress(BrokenPipeError):
        proxy.stdin.close()
    deadline = time.monotonic() + 60
    while _pids(str(tmp_path)):  # the writer ends once it has what it was sent
        assert time.monotonic() < deadline
        time.sleep(0.05)
    captures = [p for p in tmp_path.rglob("*.capture*") if p.is_file()]
    assert captures
    for path in captures:
        path.unlink()
    rid = _searched_whole(any_db, name)
    # Nobody writes it: the mark is off, and the next search has nothing to do.
    assert _state(any_db, name) == (rid, None, False)
    conn = _connect(any_db)
    try:
        assert catch_up(conn, "postgresql" if any_db.startswith("postgresql") else "sqlite") == 0
    finally:
        conn.close()


def test_a_running_burst_is_searchable_before_it_ends(tmp_path: Path, any_db: str) -> None:
    """A proxy held open mid-burst: its stored lines are found at once; the mark
    stays for the lines to come, and the pass at its end adds no word twice.  (Its
    indexer does not add them on the pause, so that the search is what adds them.)"""
    proxy, name = _open_burst(any_db, tmp_path, 6000, quiet=3600)
    try:
        rid = _searched_whole(any_db, name)
        assert _state(any_db, name) == (rid, None, True)  # still running, still marked
    finally:
        _ended_whole(proxy, any_db, name, tmp_path)


def _ended_whole(proxy: subprocess.Popen[bytes], db: str, name: str, tmp_path: Path) -> None:
    """End the held-open proxy; once its indexer's pass is done, check that the
    recording ended, lost its mark, and its index holds every line's words once."""
    assert proxy.stdin is not None
    proxy.stdin.close()
    assert proxy.wait(120) == 0
    deadline = time.monotonic() + 120
    while _pids(str(tmp_path)):  # the indexer's pass at the end
        assert time.monotonic() < deadline
        time.sleep(0.05)
    rid, ended, mark = _state(db, name)
    assert ended is not None and not mark
    held, wanted, entries = _index(db, rid)
    assert held == wanted and entries == len(wanted)


def test_a_running_burst_gets_its_words_once_its_input_pauses(tmp_path: Path,
                                                              any_db: str) -> None:
    """A proxy held open after a burst: its indexer adds the words its writer left
    out once the input pauses (WORDS_QUIET_S), with no search asking; a search
    then has nothing to add, and the pass at the end adds no word twice."""
    proxy, name = _open_burst(any_db, tmp_path, 2000)
    try:
        rid, ended, mark = _state(any_db, name)
        assert ended is None and mark  # the burst's batches went without their words
        deadline = time.monotonic() + 240
        while True:
            held, wanted, entries = _index(any_db, rid)
            if held == wanted:
                break
            assert time.monotonic() < deadline, (len(held), len(wanted))
            time.sleep(0.2)
        assert entries == len(wanted) == 4000  # each line once
        conn = _connect(any_db)
        try:
            assert catch_up(conn, "postgresql" if any_db.startswith("postgresql")
                            else "sqlite") == 0  # a search finds every word added
        finally:
            conn.close()
    finally:
        _ended_whole(proxy, any_db, name, tmp_path)


def test_the_pass_over_a_running_recording_stops_when_asked_and_goes_on_from_there(
        tmp_path: Path) -> None:
    """``add_running_words`` (the indexer's, while its input pauses): one
    transaction, then ``stop()`` ends it; the next call goes on where it stopped,
    and the recording keeps its mark for the lines to come."""
    from claudetrace.model.events import Event
    from claudetrace.recording import RecordingInfo
    from claudetrace.store import open_store
    from claudetrace.store.backlog import RUNNING_CHUNK, add_running_words
    from claudetrace.store.rows import flat_rows
    from claudetrace.store.sqlite import SqliteWrites

    db = tmp_path / "r.db"
    open_store(str(db)).close()
    writes = SqliteWrites(db)
    writes.words_later = True
    info = RecordingInfo.start(["claude"])
    info.extra[WORDS_LATER] = True
    writes.create_recording(info)
    lines = list(shape_lines("tools", 3 * RUNNING_CHUNK))
    writes.write_rows(info.id, *flat_rows(info.id, [
        Event(i, "out", i, line) for i, line in enumerate(lines)]))
    writes.close()
    url = f"sqlite:///{db}"
    asked: list[int] = []
    assert not add_running_words(url, info.id, stop=lambda: not asked.append(1))
    held, wanted, entries = _index(str(db), info.id)
    assert asked == [1] and entries == len(held) == RUNNING_CHUNK
    assert add_running_words(url, info.id, stop=lambda: False)
    held, wanted, entries = _index(str(db), info.id)
    assert held == wanted and entries == len(wanted) == len(lines)
    assert _marked(db)  # still running: the lines to come may lack theirs
    assert add_running_words(url, info.id, stop=lambda: True)  # nothing left to add


def test_a_recording_whose_proxy_lives_here_is_still_written_though_its_heartbeat_is_late(
        tmp_path: Path) -> None:
    """An indexer on idle CPU time can miss its heartbeat under load: a search
    still takes the recording for one being written while its proxy lives on
    this host (its mark kept for the lines to come), and for abandoned once the
    proxy is gone."""
    from claudetrace.recording import RecordingInfo
    from claudetrace.store import open_store
    from claudetrace.store.backlog import marked

    db = tmp_path / "store.db"
    store = open_store(str(db))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    infos = {}
    for name, pid in (("living", os.getpid()), ("gone", int(gone.stdout))):
        # Started after this process (an earlier start would make its pid a reused one).
        info = RecordingInfo.start(["claude"], started_ns=time.time_ns())
        info.host, info.pid, info.source = os.uname().nodename, pid, "proxy"
        store.create_recording(info)
        infos[name] = info.id
    store.close()
    with sqlite3.connect(db, isolation_level=None) as conn:
        conn.execute("UPDATE recordings SET extra = ?, last_seen_ns = ?",
                     (json.dumps({WORDS_LATER: True}), time.time_ns() - 30 * 10**9))
        ended, others = marked(conn, "sqlite")
    assert ended == []
    assert sorted(others) == sorted([(infos["living"], True, -1), (infos["gone"], False, -1)])
