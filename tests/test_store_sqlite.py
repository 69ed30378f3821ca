"""The writer's SQLite writes on sqlite3 alone (claudetrace.store.sqlite): every value
they store is what the store writes through SQLAlchemy, and they fail alike."""

from __future__ import annotations

import contextlib
import math
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import JSON

from claudetrace.cassette import read_cassette
from claudetrace.errors import StoreError
from claudetrace.model import Session
from claudetrace.model.events import Event
from claudetrace.model.summary import outcome_columns, summary_columns
from claudetrace.recording import RecordingInfo
from claudetrace.store import Recording, Store, event_rows, open_store, plain
from claudetrace.store import sqlite as sqlite_writes
from claudetrace.store.engine import error_line, head_revision, is_transient_error
from claudetrace.store.rows import (
    COLUMNS,
    Flat,
    each_row,
    first_seq,
    flat_rows,
    insert_batches,
    row_count,
)
from claudetrace.store.writer import _open_writes

SAMPLES = Path(__file__).parent / "fixtures" / "samples"


def test_the_recordings_columns_are_the_models() -> None:
    table = Recording.__table__
    assert list(plain.RECORDING_DEFAULTS) == [c.name for c in table.columns]
    for column in table.columns:
        default = column.default
        expected = None if default is None else (
            default.arg(None) if default.is_callable else default.arg)  # type: ignore[attr-defined]
        assert plain.RECORDING_DEFAULTS[column.name] == expected, column.name
    assert {c.name for c in table.columns if isinstance(c.type, JSON)} == plain.JSON_COLUMNS
    assert head_revision() == plain.SCHEMA_HEAD


def table_rows(path: Path, table: str) -> list[tuple[Any, ...]]:
    """Every row of ``table`` with each value's storage class, in a stable order."""
    with sqlite3.connect(path) as conn:
        names = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")
                 if row[1] != "id" or table != "event_tools"]
        shown = ", ".join(f"{name}, typeof({name})" for name in names)
        return conn.execute(f"SELECT {shown} FROM {table} ORDER BY 1, 2, 3").fetchall()


@pytest.fixture(scope="module")
def empty_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("empty") / "empty.db"
    open_store(str(path)).close()
    return path


def both(tmp_path: Path, name: str, empty: Path, **plain_options: Any,
         ) -> tuple[Store, sqlite_writes.SqliteWrites, Path, Path]:
    """A store and the plain writes, each on a copy of a database at the newest schema."""
    via_store, via_plain = tmp_path / f"{name}-store.db", tmp_path / f"{name}-plain.db"
    for path in (via_store, via_plain):
        shutil.copyfile(empty, path)
    return (open_store(str(via_store)), sqlite_writes.SqliteWrites(via_plain, **plain_options),
            via_store, via_plain)


def assert_same(via_store: Path, via_plain: Path) -> None:
    for table in ("recordings", "events", "event_tools", "usage_calls"):
        assert table_rows(via_plain, table) == table_rows(via_store, table), table


def sample_events(name: str) -> list[Event]:
    return list(read_cassette(SAMPLES / name).events)


@pytest.mark.parametrize("grouping", [None, 3], ids=["rows", "flat"])
@pytest.mark.parametrize("sample", ["basic.cassette.ndjson", "mcp_hooks.cassette.ndjson"])
def test_a_recording_is_stored_as_the_store_stores_it(tmp_path: Path, sample: str,
                                                      empty_db: Path,
                                                      grouping: int | None) -> None:
    """Rows as the indexer's writer takes them (flat, cut into 3 rows an insert
    here, a batch's rest row by row) or as tuples, stored alike."""
    events = sample_events(sample)
    info = RecordingInfo.start(["claude", "-p", "hi"], name="a name", tags={"k": "v"},
                               env={"CLAUDE_X": "1"}, extra={"nested": {"a": [1, 2.5, None]}})
    store, writes, via_store, via_plain = both(tmp_path, "sample", empty_db,
                                               rows_per_insert=grouping or 200)
    session = Session()
    for target in (store, writes):
        target.create_recording(info)
    for start in range(0, len(events), 7):
        batch = events[start:start + 7]
        for ev in batch:
            session.add(ev)
        # With the calls' usage rows, which replace the recording's each time.
        updates = {"last_seen_ns": 5, "lost_bytes": 0,
                   **summary_columns(session, started_ns=info.started_ns),
                   "cli_session_id": "s", "model": None}
        rows, tools = event_rows(info.id, batch)
        store.write_rows(info.id, rows, tools, updates)
        if grouping is None:
            writes.write_rows(info.id, rows, tools, updates)
        else:
            writes.write_rows(info.id, *flat_rows(info.id, batch), updates)
    ended = {"ended_ns": 9, "exit_code": 0, "signal": None, "error": None,
             **outcome_columns(session.outcome(ended=True, exit_code=0))}
    store.update_recording(info.id, **ended)
    writes.update_recording(info.id, **ended)
    store.close()
    writes.close()
    assert_same(via_store, via_plain)
    assert table_rows(via_plain, "usage_calls"), "the sample's calls are stored"
    if sample.startswith("mcp"):
        assert table_rows(via_plain, "event_tools"), "the sample's tool uses are stored"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Connection.setlimit is Python 3.11's")
def test_a_recordings_first_calls_replace_none_and_later_ones_replace_theirs(
        tmp_path: Path, empty_db: Path) -> None:
    """A burst's calls are all written with its last batch: no call of them is
    looked for to be deleted first, as every later write of them is."""
    path = tmp_path / "usage.db"
    shutil.copyfile(empty_db, path)
    writes = sqlite_writes.SqliteWrites(path)
    deletes: list[str] = []
    writes._conn.set_trace_callback(
        lambda sql: deletes.append(sql) if sql.startswith("DELETE FROM usage_calls") else None)
    info = RecordingInfo.start(["claude"])
    writes.create_recording(info)

    def calls(output: int) -> dict[str, Any]:
        return {"usage_calls": [(f"msg_{i}", 10 + i, "m", 1, output, 0, 0, 0.5, "estimate")
                                for i in range(3)]}

    writes.write_rows(info.id, [], [], calls(2))
    assert deletes == []
    writes.write_rows(info.id, [], [], calls(7))
    assert len(deletes) == 1
    writes.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT call_id, output_tokens FROM usage_calls ORDER BY 1"
                            ).fetchall() == [("msg_0", 7), ("msg_1", 7), ("msg_2", 7)]
        assert conn.execute("SELECT calls, output_tokens FROM usage_models").fetchall() == [
            (3, 21)]


def test_a_connection_taking_fewer_parameters_gets_fewer_rows_a_statement(
    tmp_path: Path, empty_db: Path,
) -> None:
    # A build of SQLite may take fewer than the version's 32,766 parameters a
    # statement (SQLITE_MAX_VARIABLE_NUMBER): past it every batch would fail.
    from sqlalchemy import event

    store, writes, via_store, via_plain = both(tmp_path, "limited", empty_db)
    limit = sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER
    event.listen(store.engine, "connect", lambda dbapi, _record: dbapi.setlimit(limit, 40))
    store.engine.dispose()
    writes._conn.setlimit(limit, 40)  # two rows of events (15 values), eight of tools (5)
    sample = sample_events("mcp_hooks.cassette.ndjson")
    # More rows than a statement takes at the version's limit, of both tables.
    events = [Event(seq, ev.direction, ev.t_ns, ev.data, ev.eol, ev.wall_ns)
              for seq, ev in enumerate(sample * (1 + 2000 // len(sample)))]
    info = RecordingInfo.start(["claude"])
    try:
        for target in (store, writes):
            target.create_recording(info)
        store.write_batch(info.id, events)
        writes.write_rows(info.id, *event_rows(info.id, events))
    finally:
        store.close()
        writes.close()
    assert_same(via_store, via_plain)
    assert len(table_rows(via_plain, "events")) == len(events)
    assert len(table_rows(via_plain, "event_tools")) > 200


@settings(max_examples=200, deadline=None)
@given(count=st.integers(0, 450), per_insert=st.sampled_from([1, 3, 50, 200]))
def test_flat_rows_are_the_rows(count: int, per_insert: int) -> None:
    width = len(COLUMNS["events"])
    rows = [(f"r{seq}", seq, *range(width - 2)) for seq in range(count)]
    flat = Flat(width, [value for row in rows for value in row])
    assert list(each_row(flat)) == rows == list(each_row(rows))
    assert row_count(flat) == count == row_count(rows)
    assert first_seq(flat) == first_seq(rows) == (0 if rows else None)
    for taken in (rows, flat):
        batches = list(insert_batches("events", taken, per_insert=per_insert))
        inserted = [row for statement, parameters in batches for group in parameters
                    for row in each_row(Flat(width, list(group)))]
        assert inserted == rows
        # Whole statements of per_insert rows, then fewer rows than that, one a statement.
        sizes = [(statement.count("(?"), len(parameters)) for statement, parameters in batches]
        whole = count // per_insert
        assert sizes == ([(per_insert, whole)] if whole else []) + (
            [(1, count % per_insert)] if count % per_insert else [])


texts = st.text(st.characters(codec=None, exclude_categories=()), max_size=30)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8)
column_values = {
    "last_seen_ns": st.integers(-2**70, 2**70), "event_count": st.integers(-2**70, 2**70),
    "cost_usd": st.floats() | st.integers(0, 10), "is_error": st.booleans(),
    "result_subtype": st.none() | texts, "models": json_values, "outcome": st.none() | texts,
    "outcome_reason": st.none() | texts, "extra": st.dictionaries(texts, json_values),
    "cli_session_id": st.none() | texts,
}


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(name=st.none() | texts, cwd=texts, tags=st.dictionaries(texts, texts, max_size=3),
       argv=st.lists(texts, max_size=3), pid=st.none() | st.integers(-2**40, 2**40),
       extra=st.dictionaries(texts, json_values, max_size=3),
       updates=st.fixed_dictionaries({}, optional=column_values))
def test_any_value_is_stored_as_the_store_stores_it(
    tmp_path_factory: pytest.TempPathFactory, empty_db: Path, name: str | None, cwd: str,
    tags: dict[str, str], argv: list[str], pid: int | None, extra: dict[str, Any],
    updates: dict[str, Any],
) -> None:
    tmp_path = tmp_path_factory.mktemp("values")
    info = RecordingInfo.start(argv, name=name, tags=tags, extra=extra)
    info.cwd, info.pid = cwd, pid
    store, writes, via_store, via_plain = both(tmp_path, "any", empty_db)
    try:
        store.create_recording(info)
        writes.create_recording(info)
        if updates:
            store.update_recording(info.id, **updates)
            writes.update_recording(info.id, **updates)
    finally:
        store.close()
        writes.close()
    assert_same(via_store, via_plain)


def test_a_float_that_is_no_number_is_stored_as_zero(tmp_path: Path, empty_db: Path) -> None:
    store, writes, via_store, via_plain = both(tmp_path, "nan", empty_db)
    info = RecordingInfo.start(["claude"])
    for target in (store, writes):
        target.create_recording(info)
        target.update_recording(info.id, cost_usd=math.nan, models={"m": {"cost": math.inf}})
        target.close()
    assert_same(via_store, via_plain)
    with sqlite3.connect(via_plain) as conn:
        assert conn.execute("SELECT cost_usd, typeof(cost_usd), models FROM recordings"
                            ).fetchall() == [(0.0, "real", '{"m": {"cost": 0.0}}')]


def test_they_fail_alike(tmp_path: Path, empty_db: Path) -> None:
    store, writes, _, _ = both(tmp_path, "fail", empty_db)
    info = RecordingInfo.start(["claude"])
    rows, tools = event_rows("missing", [Event(0, "out", 1, b"{}", True, 2)])
    failures = []
    for target in (store, writes):
        with pytest.raises(StoreError) as missing:
            target.write_rows("missing", rows, tools)
        target.create_recording(info)
        with pytest.raises(StoreError) as twice:
            target.create_recording(info)
        failures.append((str(missing.value), str(twice.value), is_transient_error(twice.value)))
        target.close()
    assert failures[0] == failures[1]
    assert failures[1][1] == "create recording failed: UNIQUE constraint failed: recordings.id"
    assert failures[1][2] is False


def test_a_locked_database_is_a_transient_failure_said_alike(tmp_path: Path,
                                                            empty_db: Path) -> None:
    store, writes, via_store, via_plain = both(tmp_path, "locked", empty_db)
    store.close()
    writes.close()
    info = RecordingInfo.start(["claude"])
    lines = []
    for path, opened in ((via_store, lambda p: open_store(str(p), busy_timeout_s=0.1)),
                         (via_plain, lambda p: sqlite_writes.SqliteWrites(p, busy_timeout_s=0.1))):
        target = opened(path)
        target.create_recording(info)
        rows, tools = event_rows(info.id, [Event(0, "out", 1, b"{}", True, 2)])
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(Exception) as locked:
                target.write_rows(info.id, rows, tools, {"event_count": 1})
            assert is_transient_error(locked.value)
            lines.append(error_line(locked.value))
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        target.write_rows(info.id, rows, tools, {"event_count": 1})  # and then it goes on
        target.close()
    assert lines == ["OperationalError: database is locked"] * 2
    assert_same(via_store, via_plain)


@pytest.mark.parametrize("url, plain_one", [
    ("sqlite:///{}", True), ("{}", False), ("sqlite:///{}?mode=ro", False),
    ("sqlite:///:memory:", False), ("sqlite://", False), ("sqlite:///{}.missing", False),
    ("postgresql://u@h/db", False),
])
def test_which_urls_are_written_plainly(tmp_path: Path, url: str, plain_one: bool) -> None:
    path = tmp_path / "x.db"
    path.touch()
    found = sqlite_writes.plain_file(url.format(path))
    assert (found == path) if plain_one else found is None


def test_a_database_not_at_the_newest_schema_goes_through_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from alembic import command

    from claudetrace.store.engine import alembic_config, create_store_engine

    path = tmp_path / "old.db"
    engine = create_store_engine(f"sqlite:///{path}")
    with engine.begin() as conn:  # a file an older claudetrace made
        command.upgrade(alembic_config(conn), "0019_pgwords")
    engine.dispose()
    with pytest.raises(plain.NotPlain):
        sqlite_writes.SqliteWrites(path)
    monkeypatch.setenv("CLAUDETRACE_DB", str(path))
    opened = _open_writes(1.0)
    try:
        assert isinstance(opened, Store)  # which migrates it
    finally:
        opened.close()
    again = _open_writes(1.0)
    try:
        assert isinstance(again, sqlite_writes.SqliteWrites)
    finally:
        again.close()


def test_a_database_not_made_yet_is_made_and_written_plainly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new file (or one a proxy made empty) is made from the schema script and
    written through sqlite3 alone (tests/test_schema.py compares the two ways)."""
    for path in (tmp_path / "new.db", tmp_path / "empty.db"):
        if path.name == "empty.db":
            path.touch()  # made by a proxy that has not migrated it yet
        monkeypatch.setenv("CLAUDETRACE_DB", str(path))
        opened = _open_writes(1.0)
        try:
            assert isinstance(opened, sqlite_writes.SqliteWrites)
        finally:
            opened.close()
        with contextlib.closing(sqlite3.connect(path)) as conn:
            assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == \
                [(head_revision(),)]


def held_for_a_while(path: Path, statements: list[str], seconds: float = 1.0) -> Any:
    """Another process's write under way on ``path``: a connection that runs
    ``statements`` in a transaction and rolls it back after ``seconds``."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    for statement in statements:
        holder.execute(statement)

    def release() -> None:
        time.sleep(seconds)
        holder.execute("ROLLBACK")
        holder.close()

    thread = threading.Thread(target=release)
    thread.start()
    return thread


@pytest.mark.parametrize("making", [True, False], ids=["being-made", "not-yet-wal"])
def test_a_file_another_process_is_writing_is_waited_for(
    tmp_path: Path, empty_db: Path, monkeypatch: pytest.MonkeyPatch, making: bool,
) -> None:
    """A file a starting proxy is still making (its schema under way), or one at
    the newest schema but not in the write-ahead log yet, whose lock another
    process holds: the writer waits for it as the store does (the switch to the
    log does not wait, and failed at once: ``import`` said 'database is locked')."""
    path = tmp_path / "busy.db"
    if making:
        path.touch()
        statements = ["CREATE TABLE being_made (x)"]
    else:
        shutil.copy(empty_db, path)
        with sqlite3.connect(path, isolation_level=None) as conn:
            assert conn.execute("PRAGMA journal_mode = DELETE").fetchone() == ("delete",)
        conn.close()
        statements = ["CREATE TABLE other_work (x)"]
    monkeypatch.setenv("CLAUDETRACE_DB", str(path))
    released = held_for_a_while(path, statements)
    try:
        opened = _open_writes(30.0)
    finally:
        released.join()
    try:
        info = RecordingInfo.start(["claude"])
        opened.create_recording(info)
        # A file being made is waited for, then (the other's making undone) made
        # from the schema script and written plainly; the other waits in the store.
        assert isinstance(opened, sqlite_writes.SqliteWrites if making else Store)
    finally:
        opened.close()
    again = _open_writes(1.0)  # made, and in the log now: written plainly
    try:
        assert isinstance(again, sqlite_writes.SqliteWrites)
    finally:
        again.close()


def test_a_new_file_has_larger_pages_and_an_older_one_keeps_its_own(tmp_path: Path) -> None:
    """A file the store makes has pages of PAGE_BYTES; a store made with SQLite's
    4 KiB pages (before) keeps them, written alike by both; either's log is
    bounded at the same size in bytes."""
    from claudetrace.store.writer import LOG_BYTES

    new = tmp_path / "new.db"
    open_store(str(new)).close()
    older = tmp_path / "older.db"
    with sqlite3.connect(older) as conn:
        conn.execute("PRAGMA page_size = 4096")
        conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    open_store(str(older)).close()
    for path, page in ((new, sqlite_writes.PAGE_BYTES), (older, 4096)):
        for opened in (open_store(str(path), log_bytes=LOG_BYTES),
                       sqlite_writes.SqliteWrites(path, log_bytes=LOG_BYTES)):
            try:
                info = RecordingInfo.start(["claude"])
                opened.create_recording(info)
                rows, tools = event_rows(info.id, [Event(0, "out", 1, b"{}", True, 2)])
                opened.write_rows(info.id, rows, tools, {"event_count": 1})
                connection = (opened._conn if isinstance(opened, sqlite_writes.SqliteWrites)
                              else opened.engine.raw_connection())
                try:
                    pages = connection.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
                finally:
                    if not isinstance(opened, sqlite_writes.SqliteWrites):
                        connection.close()
                assert pages * page == LOG_BYTES
            finally:
                opened.close()
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA page_size").fetchone() == (page,)
            assert conn.execute("SELECT count(*) FROM events").fetchone() == (2,)
        conn.close()


def test_a_file_sqlite_cannot_open_is_a_store_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"not a database at all" * 100)
    monkeypatch.setenv("CLAUDETRACE_DB", str(path))
    with pytest.raises(StoreError, match=f"cannot open database {path}: file is not a database"):
        _open_writes(1.0)


def test_the_writer_and_the_indexer_do_not_load_sqlalchemy() -> None:
    code = ("import sys, claudetrace.indexer, claudetrace.store.writer; "
            "from claudetrace.store.writer import WriterProcess, _open_writes; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'alembic')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def _read_only_mount_works() -> bool:
    return shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-m", "true"], capture_output=True, check=False).returncode == 0


@pytest.mark.skipif(not _read_only_mount_works(), reason="needs unshare -m (root)")
def test_a_database_on_a_read_only_file_system_is_read(tmp_path: Path) -> None:
    # A store on a read-only mount (a backup, a ``:ro`` volume): SQLite cannot make
    # the WAL's shared-memory file beside it, and every read command said "unable
    # to open database file"; ``db upgrade`` was a traceback.
    sample = SAMPLES / "basic.cassette.ndjson"
    folder = tmp_path / "backup"
    folder.mkdir()
    db = folder / "claudetrace.db"
    store = open_store(str(db))
    try:
        rid = store.import_cassette(read_cassette(sample))
    finally:
        store.close()
    assert not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists()
    script = f"""
mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} || exit 99
for args in "sessions --json" "show {rid}" "search the" "db upgrade" "import {sample}" \
            "db pack" "prune --older-than 0d -y"; do
  {sys.executable} -m claudetrace $args --db {db}; echo "rc=$?"
done
"""
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode != 99, done.stderr
    codes = [line for line in done.stdout.splitlines() if line.startswith("rc=")]
    assert codes == ["rc=0", "rc=0", "rc=0", "rc=1", "rc=1", "rc=1", "rc=1"], (done.stdout,
                                                                              done.stderr)
    assert rid in done.stdout and "Traceback" not in done.stderr
    errors = done.stderr.splitlines()
    assert len(errors) == 4 and "Read-only file system" in errors[0], errors
    assert all("readonly database" in line for line in errors[1:]), errors
    # db pack was a traceback (sqlite3.OperationalError from the packer).
    assert errors[2] == (f"claudetrace: cannot write database {db}: attempt to write a "
                         "readonly database (read commands still work; nothing was changed)")
