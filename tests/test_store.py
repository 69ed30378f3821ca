"""The recording store (claudetrace.store): import/export, resolution, queries, status."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claudetrace.cassette import Cassette, new_header, read_cassette, write_cassette
from claudetrace.cli import cli
from claudetrace.errors import AmbiguousSession, BadDatabaseURL, SessionNotFound, StoreError
from claudetrace.model.events import Event
from claudetrace.recording import LATE_AFTER_NS, RecordingInfo
from claudetrace.store import EventTool, Recording, Store, open_store, resolve_url
from claudetrace.store.models import STALE_AFTER_NS, number_of

SAMPLES = sorted((Path(__file__).parent / "fixtures" / "samples").glob("*.cassette.ndjson"))
CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    opened = open_store(str(db_path))
    yield opened
    opened.close()


def _export_lines(store: Store, rid: str) -> list[str]:
    cassette = store.load_cassette(rid)
    out = io.StringIO()
    write_cassette(out, cassette.header, cassette.events)
    return out.getvalue().splitlines()


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_import_then_export_reproduces_every_event_line(store: Store, sample: Path) -> None:
    rid = store.import_cassette(read_cassette(sample))
    original = sample.read_text(encoding="utf-8").splitlines()
    exported = _export_lines(store, rid)
    assert exported[1:] == original[1:]
    header = json.loads(exported[0])
    for key, value in json.loads(original[0]).items():
        assert header[key] == value
    rec = store.get(rid)
    assert rec.source == "import" and rec.status == "ok"
    assert rec.event_count == len(original) - 1


def test_import_fills_summary_and_stream_columns(store: Store) -> None:
    rid = store.import_cassette(read_cassette(SAMPLES[1]))
    rec = store.get(rid)
    assert rec.cli_session_id and rec.claude_code_version == "2.1.330"
    assert rec.model and rec.permission_mode
    assert rec.turns >= 1 and rec.tool_calls >= 1
    assert rec.input_tokens + rec.output_tokens > 0
    with store.session() as s:
        tools = s.query(EventTool).filter(EventTool.rec == number_of(rid)).all()
    assert {t.kind for t in tools} >= {"use", "result"}
    assert all(t.tool_use_id for t in tools)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["in", "out", "err"]),
            st.binary(max_size=30).filter(lambda b: b"\n" not in b),
        ),
        max_size=10,
    ),
    st.booleans(),
)
def test_store_round_trip_is_exact_for_any_bytes(
    store: Store, lines: list[tuple[str, bytes]], last_eol: bool
) -> None:
    events = [Event(i, d, i * 1000, data) for i, (d, data) in enumerate(lines)]  # type: ignore[arg-type]
    if events:
        events[-1].eol = last_eol
    rid = store.import_cassette(Cassette(new_header(argv=["x"], exit_code=0), events))
    back = list(store.iter_events(rid))
    assert [(e.seq, e.direction, e.t_ns, e.data, e.eol) for e in back] == [
        (e.seq, e.direction, e.t_ns, e.data, e.eol) for e in events
    ]


def test_an_import_whose_half_cannot_be_deleted_says_so(
    store: Store, capsys: pytest.CaptureFixture[str],
) -> None:
    """A cassette that fails half way is taken back out; should that fail too (a
    full disk), one line names the recording left, and the first error is raised."""
    from claudetrace.store.ingest import import_cassette
    from claudetrace.store.writer import WriterProcess

    def events() -> Iterator[Event]:
        for seq in range(5000):
            yield Event(seq, "out", seq, b'{"type":"x"}')
        raise ValueError("big.ndjson:5002: not JSON")

    def forget(recording_id: str) -> None:
        raise StoreError("delete failed: database or disk is full")

    writer = WriterProcess(store.url, None)
    with pytest.raises(ValueError, match="not JSON"):
        import_cassette(writer, (new_header(argv=["x"]), events()), forget=forget)
    (left,) = [r.id for r in store.list_recordings()]
    assert capsys.readouterr().err == (
        f"claudetrace: the half-imported recording {left} is still in the store: "
        "delete failed: database or disk is full\n")
    store.delete_recording(left)  # as forget does when it can
    assert store.list_recordings() == []


def test_a_ctrl_c_just_after_the_recording_is_made_still_takes_it_back(
    store: Store, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The recording's row is committed, and the Ctrl-C comes before the writer
    could note it (found by a review): in this process's writes on a thread, and
    in a writer process whose request was still in our buffer."""
    from claudetrace.indexer import writer_for
    from claudetrace.store.writer import WriterProcess

    real_create = Store.create_recording

    def create_then_interrupted(self: Store, info: RecordingInfo) -> None:
        real_create(self, info)
        raise KeyboardInterrupt

    monkeypatch.setattr(Store, "create_recording", create_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.import_cassette(read_cassette(SAMPLES[0]))
    assert store.list_recordings() == []
    monkeypatch.undo()

    writer = WriterProcess(store.url, writer_for(store.url))
    buffered = writer._requests

    class InterruptedFlush:
        """The first request written, and a Ctrl-C before it is flushed."""

        def __getattr__(self, name: str) -> object:
            return getattr(buffered, name)

        def flush(self) -> None:
            writer._requests = buffered
            raise KeyboardInterrupt

    writer._requests = InterruptedFlush()  # type: ignore[assignment]
    with pytest.raises(KeyboardInterrupt):
        store.import_cassette(read_cassette(SAMPLES[0]), writer=writer)
    assert store.list_recordings() == []


def test_one_import_of_several_files_takes_back_only_its_own(
    store: Store, capsys: pytest.CaptureFixture[str],
) -> None:
    """A second file refused by the database (locked) stored nothing: nothing is
    taken back nor said for it, though the first file's import stored some."""
    from claudetrace.indexer import start_writer
    from claudetrace.store.writer import WriterProcess

    writer = WriterProcess(store.url, start_writer(store.url, busy_timeout_s=0.2))
    first = store.import_cassette(read_cassette(SAMPLES[0]), writer=writer)
    holder = sqlite3.connect(store.url.removeprefix("sqlite:///"), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError, match="locked"):
            store.import_cassette(read_cassette(SAMPLES[1]), writer=writer)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        writer.close()
    assert [r.id for r in store.list_recordings()] == [first]
    assert "half-imported" not in capsys.readouterr().err


def test_resolve_by_id_prefix_session_and_latest(store: Store) -> None:
    first = store.import_cassette(read_cassette(SAMPLES[0]))
    second = store.import_cassette(read_cassette(SAMPLES[1]))
    assert store.resolve(first).id == first
    assert store.resolve(first.lower()).id == first
    assert store.resolve(first[:-2]).id == first
    assert store.resolve("latest").id in (first, second)
    session_id = store.get(second).cli_session_id
    assert session_id and store.resolve(session_id).id in (first, second)
    with pytest.raises(AmbiguousSession) as info:
        store.resolve(first[:2])
    assert set(info.value.candidates) == {first, second}
    with pytest.raises(SessionNotFound):
        store.resolve("ZZZZ")
    with pytest.raises(SessionNotFound):
        store.resolve("  ")
    with pytest.raises(SessionNotFound):
        store.resolve("%")  # LIKE wildcards are literal


def test_latest_on_an_empty_store(store: Store) -> None:
    with pytest.raises(SessionNotFound, match="no recordings"):
        store.resolve("latest")


def test_iter_events_pages_and_filters(store: Store) -> None:
    rid = store.import_cassette(read_cassette(SAMPLES[1]))
    everything = list(store.iter_events(rid))
    assert [e.seq for e in store.iter_events(rid, chunk=3)] == [e.seq for e in everything]
    assert [e.seq for e in store.iter_events(rid, start_seq=5, limit=4, chunk=3)] == [5, 6, 7, 8]
    ins = list(store.iter_events(rid, directions=["in"]))
    assert ins and all(e.direction == "in" for e in ins)
    results = list(store.iter_events(rid, types=["result"]))
    assert results and all(e.type == "result" for e in results)
    assert store.count_events(rid) == len(everything)


def test_line_pages_hold_every_line_in_order(store: Store) -> None:
    rid = store.import_cassette(read_cassette(SAMPLES[1]))
    rows = [row[:5] for row in store.iter_event_rows(rid)]
    pages = list(store.iter_line_pages(rid, chunk=7))
    assert [len(page) for page in pages[:-1]] == [7] * (len(pages) - 1)
    assert 0 < len(pages[-1]) <= 7
    flat = [tuple(row) for page in pages for row in page]
    assert [(s, d, t, b, bool(e)) for s, d, t, b, e in flat] == rows
    assert [list(page) for page in store.iter_line_pages(rid, chunk=len(rows))] == [rows]
    assert list(store.iter_line_pages("no-such-recording")) == []


def test_list_recordings_order_and_window(store: Store) -> None:
    ids = []
    for k in range(3):
        header = new_header(argv=["x"], exit_code=0, started_ns=1_000_000_000 * (k + 1))
        ids.append(store.import_cassette(Cassette(header, [])))
    assert [r.id for r in store.list_recordings()] == ids[::-1]
    assert [r.id for r in store.list_recordings(newest_first=False, limit=2)] == ids[:2]
    window = store.list_recordings(since_ns=2_000_000_000, until_ns=3_000_000_000)
    assert [r.id for r in window] == [ids[1]]
    assert store.count_recordings() == 3
    store.delete_recording(ids[0])
    assert store.count_recordings() == 2


def _recording(**values: object) -> Recording:
    base: dict[str, object] = {
        "id": "01TEST",
        "started_ns": time.time_ns(),
        "host": "elsewhere",
        "pid": None,
        "source": "proxy",
        "event_count": 1,
        "is_error": False,
    }
    base.update(values)
    return Recording(**base)


def test_status_of_recordings() -> None:
    """An ended recording shows the status the session model stored; one that has not
    ended is running while its proxy beats, else incomplete."""
    now = time.time_ns()
    assert _recording(ended_ns=now, outcome="ok").status == "ok"
    killed = _recording(ended_ns=now, exit_code=137, signal=9, outcome="killed",
                        outcome_reason="killed by SIGKILL during turn 1")
    assert (killed.status, killed.status_reason) == ("killed", "killed by SIGKILL during turn 1")
    assert _recording(ended_ns=now, outcome="interrupted").status == "interrupted"
    assert _recording(last_seen_ns=now).status == "running"
    stale = _recording(last_seen_ns=now - STALE_AFTER_NS - 1)
    assert stale.status == "incomplete"
    assert stale.status_reason == "the recording stopped before the CLI exited"


def test_a_dead_local_proxy_is_incomplete_at_once(store: Store) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    rec = _recording(host=os.uname().nodename, pid=gone.pid, last_seen_ns=time.time_ns())
    assert rec.status == "incomplete"
    rec = _recording(host=os.uname().nodename, pid=os.getpid(), last_seen_ns=time.time_ns())
    assert rec.status == "running"


def test_a_live_local_proxy_is_still_written_whatever_its_heartbeat(store: Store) -> None:
    """An idle-priority indexer on a loaded machine can miss its beats: the proxy's
    process, alive on this host, says the session may still get lines, so prune
    leaves it and a search keeps its words mark (both took it for abandoned), and
    it is running (until its heartbeat is :data:`LATE_AFTER_NS` late).  A pid that
    now names a process started after the recording is a reused one: the
    heartbeat decides."""
    here, now = os.uname().nodename, time.time_ns()
    stale = now - 10 * STALE_AFTER_NS
    rec = _recording(host=here, pid=os.getpid(), started_ns=now, last_seen_ns=stale)
    assert rec.still_written() and rec.status == "running"
    silent = _recording(host=here, pid=os.getpid(), started_ns=now,
                        last_seen_ns=now - LATE_AFTER_NS - 1)
    assert silent.still_written() and silent.status == "incomplete"
    later = subprocess.Popen(["sleep", "30"])
    try:
        rec = _recording(host=here, pid=later.pid, started_ns=now - 60 * 10**9,
                         last_seen_ns=stale)
        assert not rec.still_written()
        rec = _recording(host=here, pid=later.pid, started_ns=now - 60 * 10**9,
                         last_seen_ns=now)
        assert rec.still_written() and rec.status == "running"
    finally:
        later.kill()
        later.wait()
    # On another host only the heartbeat can tell.
    assert not _recording(pid=os.getpid(), last_seen_ns=stale).still_written()


def test_every_view_counts_a_live_local_proxy_with_a_late_heartbeat_as_running(
        store: Store) -> None:
    """The list, its status filters, its tiles and the status counts (SQL, then the
    pid check on what SQL calls running) agree with :attr:`Recording.status`: a
    proxy alive on this host whose indexer is late by more than the 5 s a
    heartbeat is fresh is running, not incomplete; silent past
    :data:`LATE_AFTER_NS` it is incomplete."""
    from claudetrace.store import aggregate, browse

    info = RecordingInfo.start(["claude"], source="proxy")
    store.create_recording(info)

    def seen(late_ns: int) -> tuple[object, ...]:
        store.write_batch(info.id, [], {"last_seen_ns": time.time_ns() - late_ns})
        running = browse.list_sessions(store, browse.Filters(statuses=("running",)))
        gone = browse.list_sessions(store, browse.Filters(statuses=("incomplete",)))
        counts = aggregate.status_counts(store, time.time_ns())
        return (store.get(info.id).status, [r.id for r in running], [r.id for r in gone],
                browse.summary(store, browse.Filters()).running,
                counts["running"], counts["incomplete"])

    assert seen(6 * STALE_AFTER_NS) == ("running", [info.id], [], 1, 1, 0)
    assert seen(LATE_AFTER_NS + 10**9) == ("incomplete", [], [info.id], 0, 0, 1)


def test_write_batch_and_live_recording(store: Store) -> None:
    info = RecordingInfo.start(["claude", "-p"], name="live")
    store.create_recording(info)
    assert store.get(info.id).status == "running"
    store.write_batch(
        info.id,
        [Event(0, "out", 1, b'{"type":"system","subtype":"init"}')],
        {"event_count": 1, "last_seen_ns": time.time_ns()},
    )
    store.write_batch(info.id, [], {"ended_ns": time.time_ns(), "exit_code": 0})
    rec = store.get(info.id)
    assert rec.status == "ok" and rec.name == "live"
    assert [e.type for e in store.iter_events(info.id)] == ["system"]
    with pytest.raises(Exception):  # noqa: B017 - the primary key (recording, seq) holds
        store.write_batch(info.id, [Event(0, "out", 2, b"dup")])
    assert store.count_events(info.id) == 1


def test_long_field_values_are_clipped_not_rejected(store: Store) -> None:
    line = json.dumps({"type": "t" * 300, "request_id": "r" * 500,
                       "parent_tool_use_id": "p" * 200})
    rid = store.import_cassette(Cassette(new_header(), [Event(0, "out", 0, line.encode())]))
    with sqlite3.connect(store.engine.url.database) as conn:
        row = conn.execute(
            "SELECT type, request_id, parent_tool_use_id FROM events WHERE rec = "
            "(SELECT num FROM recordings WHERE id = ?)",
            (rid,)).fetchone()
    assert [len(v) for v in row] == [64, 128, 128]
    assert next(store.iter_events(rid)).data == line.encode()


def test_resolve_url_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_url(str(tmp_path / "x.db")) == f"sqlite:///{tmp_path / 'x.db'}"
    assert resolve_url("postgresql://u@h/db") == "postgresql://u@h/db"
    monkeypatch.setenv("CLAUDETRACE_DB", str(tmp_path / "env.db"))
    assert resolve_url(None).endswith("env.db")
    monkeypatch.delenv("CLAUDETRACE_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert resolve_url(None) == f"sqlite:///{tmp_path / 'data' / 'claudetrace' / 'claudetrace.db'}"


def test_a_relative_xdg_data_home_is_ignored_and_a_read_makes_no_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The XDG spec ignores a relative XDG_DATA_HOME: it made rel/dir/claudetrace
    # under the folder the command ran in.  A missing HOME is said, not made.
    monkeypatch.delenv("CLAUDETRACE_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", "rel/dir")
    home = tmp_path / "gone"
    monkeypatch.setenv("HOME", str(home))
    assert resolve_url(None) == f"sqlite:///{home / '.local' / 'share' / 'claudetrace'}" \
        "/claudetrace.db"
    listed = CliRunner().invoke(cli, ["sessions"])
    assert listed.exit_code == 1
    assert listed.output == (f"claudetrace: no database: the home folder {home} does not exist "
                             "(set HOME, or name one with --db or $CLAUDETRACE_DB)\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", [
    "sqlite://", "sqlite:///:memory:", "sqlite+pysqlite://",
    "sqlite:///file::memory:?uri=true", "sqlite:///file:x?mode=memory&uri=true",
])
def test_an_in_memory_database_is_refused_by_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    # The recorder and the indexer are other processes: nothing would be kept.
    with pytest.raises(BadDatabaseURL, match="in-memory database"):
        resolve_url(url)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    said = (f"claudetrace: {url!r} is an in-memory database: nothing would be kept (the"
            " recorder and indexer are other processes); give a file or a server\n")
    # The proxy ends its process itself: run as a user runs it.
    proxied = subprocess.run([sys.executable, "-m", "claudetrace", "proxy", "--db", url, "--",
                              "true"], capture_output=True, text=True, timeout=120)
    assert (proxied.returncode, proxied.stderr) == (1, said)
    monkeypatch.setenv("CLAUDETRACE_DB", url)
    imported = runner.invoke(cli, ["import", str(CASSETTES / "plain.ndjson")])
    assert (imported.exit_code, imported.stderr) == (1, said)
    assert resolve_url("sqlite:///memory.db").endswith("memory.db")  # a file is a file


@pytest.mark.usefixtures("ct_env")
def test_bad_urls_and_missing_drivers() -> None:
    with pytest.raises(BadDatabaseURL):
        open_store("nosuchdialect://x/y")
    with pytest.raises(BadDatabaseURL):
        open_store("postgresql+nosuchdriver://u@127.0.0.1/db")
    with pytest.raises(BadDatabaseURL):
        open_store("mysql://u@127.0.0.1/db")  # driver not installed


def test_foreign_tables_without_history_are_refused(db_path: Path) -> None:
    with sqlite3.connect(db_path) as conn:
        conn.execute("CREATE TABLE recordings (id TEXT)")
    with pytest.raises(StoreError, match="no migration history"):
        open_store(str(db_path))


def test_schema_head_is_the_newest_migration() -> None:
    from claudetrace.store.engine import SCHEMA_HEAD, head_revision

    assert head_revision() == SCHEMA_HEAD


def test_a_store_at_head_opens_without_alembic(db_path: Path) -> None:
    """The indexer opens the store at every session's start: once the schema is
    there, Alembic (and its migration scripts) stay unread; a schema behind is
    migrated as before."""
    from alembic import command

    from claudetrace.store.engine import SCHEMA_HEAD, alembic_config

    behind = open_store(str(db_path))
    with behind.engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0002_session_model")
    behind.close()
    probe = (
        "import sys; from claudetrace.store import open_store; "
        f"open_store({str(db_path)!r}).close(); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'alembic', 'mako'}))"
    )

    def opened_with() -> str:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              check=True)
        return done.stdout.strip()

    assert opened_with() == "['alembic', 'mako']"  # behind: migrated
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (SCHEMA_HEAD,)]
    assert opened_with() == "[]"


def test_migration_is_idempotent_and_concurrent_safe(db_path: Path) -> None:
    errors: list[BaseException] = []

    def opener() -> None:
        try:
            open_store(str(db_path)).close()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM alembic_version").fetchone() == (1,)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


@pytest.mark.parametrize("target", ["0002_session_model", "0001"])
def test_a_downgrade_keeps_every_event(db_path: Path, target: str) -> None:
    # SQLite cannot drop a column in place in every version, so Alembic's batch
    # mode copies the table; dropping the old one with foreign keys on (as the
    # store's connections have them) would delete every recording's events.
    from alembic import command

    from claudetrace.store.engine import alembic_config, create_store_engine

    store = open_store(str(db_path))
    rid = store.import_cassette(read_cassette(CASSETTES / "hooks.ndjson"))
    events = [(e.seq, e.data) for e in store.iter_events(rid)]
    store.close()
    engine = create_store_engine(f"sqlite:///{db_path}")
    try:
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), target)
    finally:
        engine.dispose()
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (target,)
        assert conn.execute("SELECT id FROM recordings").fetchall() == [(rid,)]
        kept = conn.execute(
            "SELECT seq, data FROM events WHERE recording_id = ? ORDER BY seq", (rid,)
        ).fetchall()
        assert [(seq, bytes(data)) for seq, data in kept] == events
        assert conn.execute("SELECT count(*) FROM event_tools").fetchone()[0] > 0
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    # And up again: the same recording, summarised by the session model.
    reopened = open_store(str(db_path))
    try:
        assert reopened.get(rid).event_count == len(events)
        assert [(e.seq, e.data) for e in reopened.iter_events(rid)] == events
    finally:
        reopened.close()


def test_import_into_a_database_in_memory_beyond_one_batch() -> None:
    """A SQLite database in memory is one per thread: the import writes its batches
    on the thread that made the tables, not on a second one."""
    store = open_store("sqlite://", create=True)
    events = [Event(i, "out", i, b'{"n":%d}' % i) for i in range(1200)]
    rid = store.import_cassette(({"argv": []}, iter(events)), batch=500)
    assert [e.data for e in store.iter_events(rid)] == [e.data for e in events]
    store.close()


def test_put_recording_reads_what_it_keeps_in_its_own_transaction(store: Store) -> None:
    """Two importers of one transcript: one that writes between another's look at
    what is stored and its transaction must not leave a mix of the two."""
    from sqlalchemy import event

    def lines(*texts: str) -> list[Event]:
        return [Event(i, "out", i, b'{"n":"%s"}' % t.encode()) for i, t in enumerate(texts)]

    info = RecordingInfo.start(["claude"])
    store.put_recording(info, lines("a", "b", "c"))
    other = lines("a", "X")
    interleaved: list[int] = []

    def the_other_importer(*args: object) -> None:
        # Just before the importer's transaction writes (and takes SQLite's lock).
        if not interleaved and str(args[2]).startswith("UPDATE recordings"):
            interleaved.append(-1)  # once: its own transaction begins too
            interleaved[0] = store.put_recording(RecordingInfo.start(["claude"], id=info.id),
                                                 other).kept

    event.listen(store.engine, "before_cursor_execute", the_other_importer)
    try:
        wanted = lines("a", "b", "c", "d", "e")
        kept = store.put_recording(RecordingInfo.start(["claude"], id=info.id), wanted).kept
    finally:
        event.remove(store.engine, "before_cursor_execute", the_other_importer)
    assert interleaved == [1]
    assert kept == 1
    assert [e.data for e in store.iter_events(info.id)] == [e.data for e in wanted]


def test_a_downgrade_on_a_sqlite_too_old_to_drop_columns_stops_in_one_line(
    db_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from alembic import command
    from alembic.util import CommandError

    from claudetrace.store.engine import SCHEMA_HEAD, alembic_config, create_store_engine

    open_store(str(db_path)).close()
    engine = create_store_engine(f"sqlite:///{db_path}")
    engine.connect().close()  # the dialect reads the version on the first connection
    monkeypatch.setattr(engine.dialect, "server_version_info", (3, 31, 1))
    try:
        with pytest.raises(CommandError) as info, engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0001")
    finally:
        engine.dispose()
    # The newest migration that drops columns is the first to stop.
    assert str(info.value) == (
        "downgrading 0020_recnum drops columns in place, which needs SQLite 3.35 or"
        " newer (this one is 3.31.1)")
    with sqlite3.connect(db_path) as conn:  # nothing done
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (SCHEMA_HEAD,)]


def test_events_of_a_missing_recording_are_refused(store: Store) -> None:
    ghost = RecordingInfo.start(["claude"])
    with pytest.raises(StoreError, match="no recording"):
        store.write_batch(ghost.id, [Event(0, "out", 0, b'{"type":"x"}')])
    assert store.count_events(ghost.id) == 0


def test_a_database_a_newer_claudetrace_migrated_is_one_line(db_path: Path) -> None:
    open_store(str(db_path)).close()
    with sqlite3.connect(db_path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0099_from_the_future'")
    conn.close()
    with pytest.raises(StoreError, match=r"\(0099_from_the_future\) is newer than this"):
        open_store(str(db_path))
    done = subprocess.run([sys.executable, "-m", "claudetrace", "sessions", "--db", str(db_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0 and "upgrade this one" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_database_that_is_no_regular_file_says_so(tmp_path: Path) -> None:
    # /dev/null takes every write and keeps nothing; SQLite's failure read as a full disk.
    runner = CliRunner()
    for args in (["import", str(CASSETTES / "plain.ndjson")], ["sessions"]):
        done = runner.invoke(cli, [*args, "--db", "/dev/null"])
        assert (done.exit_code, done.stderr) == (
            1, "claudetrace: cannot use database /dev/null: not a regular file"
               " (a character device)\n")


def _numbered(*texts: str) -> list[Event]:
    return [Event(i, "out", i, b'{"n":"%s"}' % t.encode()) for i, t in enumerate(texts)]


def test_a_batch_of_recordings_is_seen_whole_at_its_commit_one_that_fails_alone(
        store: Store, db_path: Path) -> None:
    """A folder import's batch: each recording in a savepoint; one that fails is
    taken back alone, the others are stored at the commit and not before."""
    def stored() -> list[str]:
        with sqlite3.connect(db_path) as conn:
            return [r[0] for r in conn.execute("SELECT id FROM recordings ORDER BY id")]

    first, bad, last = (RecordingInfo.start(["claude"], id=f"r{n}") for n in range(3))
    with store.batch() as batch:
        batch.put(first, _numbered("a", "b"))
        with pytest.raises(StoreError):  # two lines numbered 0: the second is refused
            batch.put(bad, [*_numbered("a"), *_numbered("x")])
        batch.put(last, _numbered("c"))
        assert batch.count == 2
        assert stored() == []  # nothing seen before the commit
        batch.commit()
        assert stored() == ["r0", "r2"]
        batch.put(RecordingInfo.start(["claude"], id="r3"), _numbered("d"))
    # Closed without a commit (an import killed): the last one is not there.
    assert stored() == ["r0", "r2"]
    assert [e.data for e in store.iter_events("r0")] == [e.data for e in _numbered("a", "b")]
    assert store.get("r2").event_count == 1


def test_a_long_message_id_stored_in_bulk_counts_once(store: Store, db_path: Path) -> None:
    """A bulk load asks which messages are stored already by their ids cut as the
    column holds them (``rows.stored_id``): a message id past 128 characters was
    asked whole, never found, and counted again."""
    from claudetrace.store.rows import USAGE_CALLS

    long_id = "msg_" + "x" * 300
    for n in range(2):
        calls = [(long_id, 10**18, "claude-sonnet-4-5", 1, 2, 3, 4, 0.001, "cli")]
        store.add_recordings([({"id": f"01BULK{n}", "started_ns": 10**18 + n,
                                "source": "transcript", USAGE_CALLS: calls}, [], [])])
    with sqlite3.connect(db_path) as conn:
        rows = conn.execute("SELECT recording_id, length(call_id), duplicate FROM usage_calls "
                            "ORDER BY recording_id").fetchall()
    assert rows == [("01BULK0", 128, 0), ("01BULK1", 128, 1)]


def test_rows_per_table_counts_a_recording_s_rows_on_sqlite(store: Store) -> None:
    # SQLite's search table (FTS5) has no recording key: the count asked for one.
    rid = store.import_cassette(read_cassette(CASSETTES / "hooks.ndjson"))
    got = store.rows_per_table(rid)
    assert got["events"] == store.count_events(rid) > 0
    assert 0 < got["event_search"] < got["events"] and got["event_tools"] > 0
    other = store.import_cassette(read_cassette(CASSETTES / "mcp_tool.ndjson"))
    assert store.rows_per_table(rid) == got
    with sqlite3.connect(store.engine.url.database) as conn:
        assert conn.execute("SELECT count(*) FROM event_search").fetchone()[0] == \
            got["event_search"] + store.rows_per_table(other)["event_search"]
