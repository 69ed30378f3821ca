"""The indexer's writer process: the same rows as a store written directly, in order,
through a locked database and a killed child."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from claudetrace.errors import StoreError
from claudetrace.indexer import HEARTBEAT_S, MAX_LATENCY_S, start_writer
from claudetrace.model.events import Event
from claudetrace.recording import RecordingInfo
from claudetrace.store import Store, open_store
from claudetrace.store import writer as writer_module
from claudetrace.store.writer import WriteFailed, WriterProcess


def events(start: int, count: int) -> list[Event]:
    return [Event(seq, "out" if seq % 2 else "in", seq * 1000,
                  b'{"type":"stream_event","n":%d}' % seq if seq % 3 else b"not json \xff",
                  True, 1_700_000_000_000_000_000 + seq)
            for seq in range(start, start + count)]


def stored_rows(store: Store, recording_id: str) -> list[tuple[object, ...]]:
    return [(e.seq, e.direction, e.t_ns, e.data, e.eol, e.wall_ns)
            for e in store.iter_events(recording_id)]


def stored_seqs(db_path: Path, recording_id: str) -> list[object]:
    store = open_store(str(db_path))
    try:
        return [row[0] for row in stored_rows(store, recording_id)]
    finally:
        store.close()


def writer_for(db_path: Path) -> WriterProcess:
    url = f"sqlite:///{db_path}"
    return WriterProcess(url, start_writer(url, busy_timeout_s=0.2), busy_timeout_s=0.2)


def written_both_ways(url: str, direct_url: str, batches: list[list[Event]], *,
                      name: str | None = None, pack: bool = False) -> tuple[str, list[Any]]:
    """Store ``batches`` as a recording through a writer into ``url`` (each batch
    with its first seq as the recording's ``last_seen_ns``; then ``name``) and
    all at once through a store into ``direct_url``: the recording's id, and
    the rows the store holds."""
    info = RecordingInfo.start(["claude", "-p"])
    writer = WriterProcess(url, start_writer(url, busy_timeout_s=0.2, pack=pack),
                           busy_timeout_s=0.2)
    try:
        writer.create_recording(info)
        for batch in batches:
            writer.write_batch(info.id, batch, {"last_seen_ns": batch[0].seq})
        if name is not None:
            writer.update_recording(info.id, name=name)
        writer.wait_written()
    finally:
        writer.close()
    direct = open_store(direct_url)
    try:
        direct.create_recording(info)
        direct.write_batch(info.id, [event for batch in batches for event in batch])
        return info.id, stored_rows(direct, info.id)
    finally:
        direct.close()


def test_the_writer_stores_what_a_store_written_directly_holds(
    db_path: Path, tmp_path: Path
) -> None:
    # more batches than the window
    batches = [events(start, min(137, 1000 - start)) for start in range(0, 1000, 137)]
    recording, expected = written_both_ways(f"sqlite:///{db_path}",
                                            str(tmp_path / "direct.db"), batches,
                                            name="via the writer")
    store = open_store(str(db_path))
    try:
        assert stored_rows(store, recording) == expected
        assert store.get(recording).name == "via the writer"
        assert store.get(recording).last_seen_ns == 959
    finally:
        store.close()


def long_lines(start: int) -> list[Event]:
    """Lines on either side of the out-of-band length, one of megabytes, one not
    UTF-8, between short ones."""
    size = writer_module.OUT_OF_BAND_BYTES
    data = [b'{"type":"user","n":"' + b"a" * (size - 23) + b'"}',  # one short of it
            b'{"type":"user","n":"' + b"b" * (size - 22) + b'"}',  # just that long
            b"{}",
            b'{"type":"user","said":"' + b"\n".join([b"c" * 999] * 3000) + b'"}',
            b"\xff\xfe" + bytes(range(256)) * (size // 128),
            b"not json"]
    assert [len(line) >= size for line in data] == [False, True, False, True, True, False]
    return [Event(start + n, "out" if n % 2 else "in", n * 1000, line, True, n)
            for n, line in enumerate(data)]


def test_a_long_line_crosses_beside_its_batchs_pickle_as_the_same_bytes() -> None:
    from claudetrace.store.rows import DATA_AT, flat_rows

    lines = long_lines(0)
    rows, tools = flat_rows("r", lines)
    frame = writer_module._Frame.of("write_rows", ("r", rows, tools, None))
    # the long lines themselves (not copies) go beside the pickle, which holds the rest
    assert [id(line) for line in frame.lines] == [id(e.data) for e in lines
                                                   if len(e.data) >= 64 * 1024]
    assert len(frame.body) < sum(len(e.data) for e in lines if len(e.data) < 64 * 1024) + 4096
    op, (recording, back, _, _) = frame.request()
    assert op == "write_rows" and recording == "r"
    assert back.values[DATA_AT::back.width] == [e.data for e in lines]
    assert all(type(line) is bytes for line in back.values[DATA_AT::back.width])


def test_the_writer_stores_long_lines_as_a_store_written_directly_holds(
    db_path: Path, tmp_path: Path
) -> None:
    recording, expected = written_both_ways(f"sqlite:///{db_path}", str(tmp_path / "direct.db"),
                                            [long_lines(start) for start in (0, 6, 12)])
    store = open_store(str(db_path))
    try:
        assert stored_rows(store, recording) == expected
    finally:
        store.close()


def test_long_lines_a_killed_writer_left_are_written_here(db_path: Path) -> None:
    info = RecordingInfo.start(["claude"])
    writer = dying_writer(db_path, die_at=6)
    try:
        writer.create_recording(info)
        for start in (0, 6, 12, 18):
            writer.write_batch(info.id, long_lines(start))
        writer.wait_written()
    finally:
        writer.close()
    assert db_path.with_suffix(".died").read_text() == "6"
    store = open_store(str(db_path))
    try:
        assert [row[3] for row in stored_rows(store, info.id)] == [
            e.data for start in (0, 6, 12, 18) for e in long_lines(start)]
    finally:
        store.close()


def test_a_locked_database_fails_a_later_call_and_the_batches_go_again_in_order(
    db_path: Path,
) -> None:
    info = RecordingInfo.start(["claude", "-p"])
    writer = writer_for(db_path)
    blocker = sqlite3.connect(db_path)
    try:
        writer.create_recording(info)
        writer.write_batch(info.id, events(0, 10))
        writer.wait_written()
        blocker.execute("BEGIN EXCLUSIVE")
        # Both are taken (the window holds two); the first fails in the child, and
        # the child skips the second.
        writer.write_batch(info.id, events(10, 10))
        writer.write_batch(info.id, events(20, 10))
        with pytest.raises(WriteFailed, match="locked") as failed:
            writer.wait_written()
        assert failed.value.transient
        # A batch offered now is refused (the earlier failure is raised again
        # while the database stays locked), so the caller will offer it again.
        with pytest.raises(WriteFailed, match="locked"):
            writer.write_batch(info.id, events(30, 10))
            writer.write_batch(info.id, events(30, 10))
        blocker.rollback()
        writer.write_batch(info.id, events(30, 10))
        writer.wait_written()
    finally:
        blocker.close()
        writer.close()
    assert stored_seqs(db_path, info.id) == list(range(40))


def test_a_killed_writer_leaves_the_rest_to_this_process(db_path: Path) -> None:
    info = RecordingInfo.start(["claude", "-p"])
    writer = writer_for(db_path)
    try:
        writer.create_recording(info)
        writer.write_batch(info.id, events(0, 50))
        writer.wait_written()
        assert writer.pid is not None
        os.kill(writer.pid, signal.SIGKILL)
        time.sleep(0.1)
        writer.write_batch(info.id, events(50, 50))
        writer.write_batch(info.id, events(100, 50))
        writer.wait_written()
        assert writer.pid is None
    finally:
        writer.close()
    assert stored_seqs(db_path, info.id) == list(range(150))


def test_the_writer_holds_no_descriptor_of_its_parent(db_path: Path, tmp_path: Path) -> None:
    kept = os.open(tmp_path / "lock", os.O_WRONLY | os.O_CREAT, 0o600)
    writer = writer_for(db_path)
    try:
        writer.create_recording(RecordingInfo.start(["claude"]))  # the child is at work
        assert writer.pid is not None
        held = set()
        for fd in os.listdir(f"/proc/{writer.pid}/fd"):
            with contextlib.suppress(FileNotFoundError):  # one closed as we looked
                held.add(os.readlink(f"/proc/{writer.pid}/fd/{fd}"))
        assert str(tmp_path / "lock") not in held
    finally:
        writer.close()
        os.close(kept)


def test_the_log_is_copied_into_the_database_beside_the_writes(db_path: Path) -> None:
    # The writer's connection checkpoints at LOG_BYTES (256 MiB): what reaches
    # the database file before then was copied there by the checkpoint thread.
    open_store(str(db_path)).close()
    writer = writer_for(db_path)
    info = RecordingInfo.start(["claude", "-p"])
    try:
        before = db_path.stat().st_size
        writer.create_recording(info)
        for start in range(0, 4000, 500):
            writer.write_batch(info.id, [Event(seq, "out", seq, b"x" * 1000)
                                         for seq in range(start, start + 500)])
        writer.wait_written()
        deadline = time.monotonic() + 30
        while db_path.stat().st_size < before + 3_000_000:
            assert time.monotonic() < deadline, "nothing was copied into the database file"
            time.sleep(0.05)
    finally:
        writer.close()


#: A writer child that commits each request and is killed before it answers the
#: first batch of lines from seq $DIE_AT on (a crash between commit and reply).
DYING_CHILD = """
import os, pickle, signal, sys
from claudetrace.store.rows import first_seq
from claudetrace.store.writer import _read_request, _REPLY, _apply, _open
store = _open(None, 0.2)
while (request := _read_request(sys.stdin.buffer)) is not None:
    number, frame = request
    op, args = frame.request()
    _apply(store, op, args)
    if op == "write_rows" and first_seq(args[1]) >= int(os.environ["DIE_AT"]):
        with open(os.environ["DIED_AT"], "w") as died:
            died.write(str(first_seq(args[1])))
        os.kill(os.getpid(), signal.SIGKILL)
    answer = pickle.dumps((number, True, None, False))
    sys.stdout.buffer.write(_REPLY.pack(len(answer)) + answer)
    sys.stdout.buffer.flush()
"""


def dying_writer(db_path: Path, die_at: int) -> WriterProcess:
    """A writer whose child dies so; the seq it died at is written beside ``db_path``."""
    url = f"sqlite:///{db_path}"
    open_store(url).close()
    child = subprocess.Popen([sys.executable, "-c", DYING_CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE,
                             env={**os.environ, "CLAUDETRACE_DB": url, "DIE_AT": str(die_at),
                                  "DIED_AT": str(db_path.with_suffix(".died"))})
    return WriterProcess(url, child, busy_timeout_s=0.2)


def test_a_batch_committed_by_a_child_that_died_unanswered_is_not_written_twice(
    db_path: Path,
) -> None:
    # A cassette's seqs need only increase (0, 10, 20…): whether the child wrote
    # the batch is looked up by its first line, not by counting lines.  Batches
    # of 450 rows are cut into statements of 200 rows, the rest row by row.
    info = RecordingInfo.start(["claude"])
    writer = dying_writer(db_path, die_at=4500)
    try:
        writer.create_recording(info)
        for start in (0, 4500, 9000):
            writer.write_batch(info.id, [Event(seq, "out", seq, b"{}")
                                         for seq in range(start, start + 4500, 10)])
        writer.wait_written()
    finally:
        writer.close()
    assert db_path.with_suffix(".died").read_text() == "4500"  # after its second batch
    assert stored_seqs(db_path, info.id) == list(range(0, 13500, 10))


def test_a_failure_while_looking_that_up_does_not_forget_to_look(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The database is out of reach for a moment just as the child is found gone:
    # the retry must still ask whether the child wrote the batch.
    info = RecordingInfo.start(["claude"])
    writer = dying_writer(db_path, die_at=0)
    real_open, failures = writer_module._open, [StoreError("cannot open database: refused")]

    def flaky_open(url: str | None, busy_timeout_s: float) -> Store:
        if failures:
            raise failures.pop()
        return real_open(url, busy_timeout_s)

    monkeypatch.setattr(writer_module, "_open", flaky_open)
    try:
        writer.create_recording(info)
        writer.write_batch(info.id, events(0, 10))
        with pytest.raises(StoreError, match="refused"):
            writer.wait_written()
        writer.wait_written()
    finally:
        writer.close()
    assert stored_seqs(db_path, info.id) == list(range(10))


def test_the_writer_holds_the_capture_lock_until_its_requests_end(
    db_path: Path, tmp_path: Path
) -> None:
    # An indexer killed mid-burst leaves its writer to finish what it was sent:
    # until it has, no reader may take the capture over and store it again.
    lock_path = tmp_path / "capture.lock"
    lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock_fd, fcntl.LOCK_EX)
    url = f"sqlite:///{db_path}"
    writer = WriterProcess(url, start_writer(url, lock_fd=lock_fd))
    os.close(lock_fd)  # the indexer is gone (or done)
    other = os.open(lock_path, os.O_RDWR)
    try:
        writer.create_recording(RecordingInfo.start(["claude"]))
        writer.wait_written()
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        writer.close()
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        writer.close()
        os.close(other)


def test_a_batch_holds_each_repeated_field_value_once() -> None:
    # Pickle writes an object once and refers to it after: equal values of the
    # fields lines repeat are one object, so a batch crosses to the writer smaller.
    from claudetrace.store import event_rows
    from claudetrace.store.rows import COLUMNS

    lines = [b'{"type":"stream_event","session_id":"s1","uuid":"u%d","parent_tool_use_id":"p"}'
             % n for n in range(50)]
    rows, _tools = event_rows("R", [Event(n, "out", n, line) for n, line in enumerate(lines)])
    columns = COLUMNS["events"]
    for name in ("type", "parent_tool_use_id"):
        column = columns.index(name)
        assert len({id(row[column]) for row in rows}) == 1, name
    assert len({row[columns.index("data")] for row in rows}) == 50  # lines stay each their own


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="SCHED_IDLE is Linux's")
def test_the_indexers_writer_runs_on_idle_cpu_time_and_an_importers_does_not(
    db_path: Path,
) -> None:
    url = f"sqlite:///{db_path}"
    idle, normal = start_writer(url, idle=True), start_writer(url)
    try:
        deadline = time.monotonic() + 20
        while os.sched_getscheduler(idle.pid) != os.SCHED_IDLE:
            assert time.monotonic() < deadline, "the writer never yielded the CPU"
            time.sleep(0.01)
        writer = WriterProcess(url, normal)
        writer.create_recording(RecordingInfo.start(["claude"]))
        writer.wait_written()  # started up and writing
        assert os.sched_getscheduler(normal.pid) == os.SCHED_OTHER
        writer.close()
    finally:
        for process in (idle, normal):
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    pipe.close()
            process.wait()


class CountedCopies:
    """A store that counts the checkpoints asked of it."""

    def __init__(self) -> None:
        self.copies = 0

    def checkpoint(self) -> None:
        self.copies += 1


def wait_for(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_an_eager_writer_copies_the_log_after_a_write_without_a_pause() -> None:
    store, copies = CountedCopies(), writer_module._Checkpoints()
    try:
        copies.after_write(store, 1)  # type: ignore[arg-type]
        assert copies.copy_now()
        wait_for(lambda: store.copies == 1, "the copy")
    finally:
        copies.stop()


def test_a_lazy_writer_copies_a_burst_once_the_writes_pause() -> None:
    store, copies = CountedCopies(), writer_module._Checkpoints(lazy=True)
    try:
        for _ in range(200):  # a burst: writes back to back
            copies.after_write(store, 1000)  # type: ignore[arg-type]
        last = time.monotonic()
        assert not copies.copy_now()  # far from CHECKPOINT_BYTES: it waits for a pause
        copied = store.copies
        if time.monotonic() - last < writer_module.CHECKPOINT_PAUSE_S:
            assert copied == 0  # nothing yet: the writes have not paused
        wait_for(lambda: store.copies == 1, "the copy after the pause")
        time.sleep(5 * writer_module.CHECKPOINT_PAUSE_S)
        assert store.copies == 1  # one for the whole burst
        # However fast they come, CHECKPOINT_BYTES more written are copied at once.
        copies.after_write(store, writer_module.CHECKPOINT_BYTES)  # type: ignore[arg-type]
        assert copies.copy_now()
        wait_for(lambda: store.copies == 2, "the copy of the bytes")
        assert not copies.copy_now()  # counted from that copy on
    finally:
        copies.stop()


def test_a_lazy_writer_does_not_copy_between_a_bursts_batches() -> None:
    # The indexer cuts a burst's batches every MAX_LATENCY_S: no pause, for the log.
    store, copies = CountedCopies(), writer_module._Checkpoints(lazy=True)
    try:
        last = time.monotonic()
        longest = 0.0
        for _ in range(4):
            copies.after_write(store, 1000)  # type: ignore[arg-type]
            time.sleep(MAX_LATENCY_S)
            now = time.monotonic()
            longest, last = max(longest, now - last), now
        copies.after_write(store, 1000)  # type: ignore[arg-type]
        if longest < 2 * MAX_LATENCY_S:  # the machine kept the pace
            assert store.copies == 0
        # ...and a quiet session's log is copied between its heartbeats.
        assert MAX_LATENCY_S < writer_module.CHECKPOINT_PAUSE_S < HEARTBEAT_S
        wait_for(lambda: store.copies == 1, "the copy once the burst is over")
    finally:
        copies.stop()


def test_a_writer_copies_lazily_when_asked(db_path: Path) -> None:
    # The indexer's asks (tests/test_proxy.py checks its writer's command line).
    url = f"sqlite:///{db_path}"
    lazy, eager = (start_writer(url, lazy_checkpoints=flag) for flag in (True, False))
    for process in (lazy, eager):
        process.communicate(timeout=30)
        assert process.returncode == 0
    assert "--lazy-checkpoints" in lazy.args and "--lazy-checkpoints" not in eager.args


#: In a fresh interpreter: SQLite set up as the writer child sets it up (or not),
#: then a connection's work, and what the library then says of its memory use.
_MEMORY_USED = """
import ctypes, sys
from claudetrace.store.writer_child import configure_sqlite
print("loaded before" if "_sqlite3" in sys.modules else "not loaded before")
if sys.argv[1] == "set up":
    print("took it" if configure_sqlite() else "refused")
import sqlite3
db = sqlite3.connect(":memory:")
db.execute("CREATE TABLE t (x BLOB)")
db.executemany("INSERT INTO t VALUES (?)", [(b"x" * 1000,)] * 1000)
if sys.argv[1] == "too late":
    print("took it" if configure_sqlite() else "refused")
library = ctypes.CDLL("libsqlite3.so.0")
library.sqlite3_memory_used.restype = ctypes.c_int64
print(library.sqlite3_memory_used())
"""


@pytest.mark.parametrize("when", ["set up", "too late", "never"])
def test_the_writer_child_sets_sqlite_up_before_anything_loads_it(when: str) -> None:
    try:
        import ctypes

        ctypes.CDLL("libsqlite3.so.0")
    except OSError:
        pytest.skip("no libsqlite3.so.0 here")
    done = subprocess.run([sys.executable, "-c", _MEMORY_USED, when], capture_output=True,
                          text=True, check=True)
    said = done.stdout.split("\n")
    # Importing the entry loads no SQLite: nothing has started it before it runs.
    assert said[0] == "not loaded before"
    if when == "set up":
        # Taken: the memory statistics are off (nothing counted).
        assert said[1:] == ["took it", "0", ""]
    elif when == "too late":
        # Once the library has started it takes no settings, and keeps counting.
        assert said[1] == "refused" and int(said[2]) > 100_000
    else:
        assert int(said[1]) > 100_000


#: The writer child, run as ``python -m`` runs it, its requests ended at once; as
#: it exits, a connection's work, and what SQLite then says of its memory use.
_CHILD_THEN_MEMORY_USED = """
import atexit, ctypes, runpy, sys

def report():
    import sqlite3
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (x BLOB)")
    db.executemany("INSERT INTO t VALUES (?)", [(b"x" * 1000,)] * 1000)
    library = ctypes.CDLL("libsqlite3.so.0")
    library.sqlite3_memory_used.restype = ctypes.c_int64
    print(library.sqlite3_memory_used(), file=sys.stderr)

atexit.register(report)
runpy.run_module("claudetrace.store.writer_child", run_name="__main__", alter_sys=True)
"""


def test_the_writer_child_runs_with_sqlite_set_up(db_path: Path) -> None:
    try:
        import ctypes

        ctypes.CDLL("libsqlite3.so.0")
    except OSError:
        pytest.skip("no libsqlite3.so.0 here")
    done = subprocess.run([sys.executable, "-c", _CHILD_THEN_MEMORY_USED],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env={**os.environ, "CLAUDETRACE_DB": f"sqlite:///{db_path}"},
                          check=True, timeout=60)
    assert done.stderr.split() == ["0"]  # nothing counted: the statistics are off
    assert db_path.exists()  # it did open the database


def test_the_indexers_writer_is_the_child_entry_that_sets_sqlite_up(db_path: Path) -> None:
    process = start_writer(f"sqlite:///{db_path}")
    try:
        assert process.args[1:3] == ["-m", "claudetrace.store.writer_child"]
    finally:
        process.communicate(timeout=30)  # its requests end: it exits
    assert process.returncode == 0
