"""The indexer (claudetrace.indexer): from a capture file to stored events, and settling.

Most tests write a capture file with the proxy's :class:`CaptureWriter` and store
it in a real SQLite database; the fault tests against a running proxy are in
``test_proxy.py``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from claudetrace import capture as cap
from claudetrace import indexer as ix
from claudetrace.errors import StoreError
from claudetrace.indexer import open_settled_store
from claudetrace.model.events import Event, LineSplitter
from claudetrace.recording import RecordingInfo
from claudetrace.store import Store, open_store
from claudetrace.store.engine import SETTLE_BUSY_TIMEOUT_S

Row = tuple[int, str, bytes, bool, int, int]


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    opened = open_settled_store(str(db_path))
    yield opened
    opened.close()


def dead_pid() -> int:
    """The pid of a process that has exited (a proxy that was killed)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def new_info(*, pid: int | None = None, **fields: Any) -> RecordingInfo:
    info = RecordingInfo.start(["claude", "-p"], **fields)
    if pid is not None:
        info.pid = pid
    return info


def capture_path(db: Path, info: RecordingInfo) -> Path:
    folder = cap.capture_dirs(cap.resolve_url(str(db)))[0]
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{info.id}{cap.SUFFIX}"


def write_capture(
    path: Path,
    info: RecordingInfo,
    chunks: Sequence[tuple[str, bytes]],
    end: dict[str, Any] | None = None,
) -> None:
    writer = cap.CaptureWriter(path, info)
    for direction, chunk in chunks:
        writer.feed(direction, chunk)  # type: ignore[arg-type]
    writer.close(end)


def split_directly(path: Path) -> list[Row]:
    """The events of a capture file by splitting its chunks, with no indexer involved.

    A line gets the times of the chunk that completed it; a final line without
    newline those of its direction's last chunk.
    """
    reader = cap.CaptureReader(path)
    records = list(reader)
    reader.close()
    splitters = {d: LineSplitter() for d in cap.CHUNK_KINDS}
    last: dict[str, tuple[int, int]] = {}
    rows: list[Row] = []
    for record in records:
        if record.kind >= len(cap.CHUNK_KINDS):
            continue
        last[record.direction] = (record.t_ns, record.wall_ns)
        for line in splitters[record.direction].feed(record.data):
            rows.append((len(rows), record.direction, line, True, record.t_ns, record.wall_ns))
    for direction in cap.CHUNK_KINDS:
        rest = splitters[direction].finish()
        if rest is not None:
            rows.append((len(rows), direction, rest, False, *last[direction]))
    return rows


def stored_rows(store: Store, recording_id: str) -> list[Row]:
    return [
        (e.seq, e.direction, e.data, e.eol, e.t_ns, e.wall_ns)
        for e in store.iter_events(recording_id)
    ]


def random_chunks(seed: int, lines: int = 3000) -> list[tuple[str, bytes]]:
    """Mixed traffic on three streams, cut at random places (as pipes deliver it)."""
    rng = random.Random(seed)
    streams: dict[str, bytearray] = {d: bytearray() for d in cap.CHUNK_KINDS}
    for i in range(lines):
        direction = rng.choice(("in", "out", "out", "out", "err"))
        line = rng.choice(
            [
                b'{"type":"assistant","n":%d,"text":"caf\xc3\xa9"}' % i,
                b'{"type":"stream_event","pad":"' + b"p" * rng.randrange(5000) + b'"}',
                b"\xff\xfe not utf-8 \x00 %d" % i,
                b"",
                b"  \r",
            ]
        )
        streams[direction] += line + b"\n"
    streams["out"] += b"the last line has no newline"
    chunks: list[tuple[str, bytes]] = []
    positions = dict.fromkeys(cap.CHUNK_KINDS, 0)
    while any(positions[d] < len(streams[d]) for d in cap.CHUNK_KINDS):
        direction = rng.choice([d for d in cap.CHUNK_KINDS if positions[d] < len(streams[d])])
        start = positions[direction]
        end = min(len(streams[direction]), start + rng.choice((1, 7, 300, 4096, 65536)))
        chunks.append((direction, bytes(streams[direction][start:end])))
        positions[direction] = end
    return chunks


# -- following a growing file -------------------------------------------------------------


def test_following_a_growing_file_stores_what_splitting_the_chunks_gives(
    db_path: Path, store: Store
) -> None:
    info = new_info()
    path = capture_path(db_path, info)
    chunks = random_chunks(seed=7)
    writer = cap.CaptureWriter(path, info)
    # A second name for the file: the indexer deletes its own when it is done.
    witness = path.with_name("witness")
    os.link(path, witness)
    wake_r, wake_w = os.pipe()
    writer.notify_to(wake_w)
    reports: list[ix.IndexReport] = []
    follower = threading.Thread(
        target=lambda: reports.append(ix.follow(path, store, wakeup_fd=wake_r))
    )
    follower.start()
    try:
        for k, (direction, chunk) in enumerate(chunks):
            writer.feed(direction, chunk)  # type: ignore[arg-type]
            if k % 500 == 0:
                time.sleep(0.05)  # let the indexer catch up and wait for more
            if k == len(chunks) // 2:
                # It stores while the session runs, not only at the end.
                deadline = time.monotonic() + 60
                while not store.list_recordings() or not store.count_events(info.id):
                    assert time.monotonic() < deadline, "nothing stored while the file grew"
                    time.sleep(0.02)
        writer.close({"exit_code": 0, "signal": None, "ended_ns": time.time_ns()})
        follower.join(timeout=120)
        assert not follower.is_alive(), "the indexer did not finish after the proxy closed"
    finally:
        os.close(wake_r)
    assert not path.exists() and not cap.lock_path(path).exists()

    expected = split_directly(witness)
    got = stored_rows(store, info.id)
    assert got == expected
    # The bytes are the streams, byte for byte.
    for direction in cap.CHUNK_KINDS:
        stream = b"".join(c for d, c in chunks if d == direction)
        rebuilt = b"".join(
            data + (b"\n" if eol else b"") for _, d, data, eol, _, _ in got if d == direction
        )
        assert rebuilt == stream, direction
    [report] = reports
    assert report.events == report.stored == len(got)
    rec = store.get(info.id)
    assert rec.status == "ok" and rec.event_count == len(got)


def test_a_final_line_without_newline_keeps_the_time_its_bytes_arrived(
    db_path: Path, store: Store
) -> None:
    info = new_info()
    path = capture_path(db_path, info)
    writer = cap.CaptureWriter(path, info)
    writer.feed("out", b"complete\nno newline")
    time.sleep(0.3)
    writer.feed("err", b"later\n")
    writer.close({"exit_code": 0})
    reader = cap.CaptureReader(path)
    first, second, _end = list(reader)
    reader.close()
    ix.follow(path, store)
    rows = stored_rows(store, info.id)
    assert rows == [
        (0, "out", b"complete", True, first.t_ns, first.wall_ns),
        (1, "err", b"later", True, second.t_ns, second.wall_ns),
        (2, "out", b"no newline", False, first.t_ns, first.wall_ns),
    ]


@pytest.mark.parametrize(
    ("end", "status"),
    [
        ({"exit_code": 0, "signal": None}, "ok"),
        ({"exit_code": 3, "signal": None}, "error"),
        ({"exit_code": 137, "signal": 9}, "killed"),
    ],
)
def test_the_end_record_gives_the_exit(
    db_path: Path, store: Store, end: dict[str, Any], status: str
) -> None:
    info = new_info(pid=dead_pid())
    path = capture_path(db_path, info)
    ended = time.time_ns()
    write_capture(path, info, [("out", b"x\n")], {**end, "ended_ns": ended})
    ix.follow(path, store)
    rec = store.get(info.id)
    assert (rec.exit_code, rec.signal, rec.ended_ns, rec.status) == (
        end["exit_code"], end["signal"], ended, status
    )


def test_no_end_record_is_an_incomplete_recording_stored_by_the_next_reader(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The proxy was killed: no END, nobody indexing.  Opening the store settles it.
    info = new_info(pid=dead_pid())
    path = capture_path(db_path, info)
    write_capture(path, info, [("in", b'{"type":"user"}\n'), ("out", b"a\nb\npart")], None)
    store = open_settled_store(str(db_path))
    try:
        rec = store.get(info.id)
        assert rec.status == "incomplete" and rec.ended_ns is None and rec.exit_code is None
        assert [(d, data, eol) for _, d, data, eol, _, _ in stored_rows(store, info.id)] == [
            ("in", b'{"type":"user"}', True),
            ("out", b"a", True),
            ("out", b"b", True),
            ("out", b"part", False),
        ]
        assert rec.event_count == 4
    finally:
        store.close()
    assert not path.exists() and not cap.lock_path(path).exists()
    assert capsys.readouterr().err == ""


def test_settling_replaces_what_an_interrupted_indexer_stored(
    db_path: Path, store: Store
) -> None:
    info = new_info(pid=dead_pid())
    path = capture_path(db_path, info)
    chunks = [("out", b"line %d\n" % i) for i in range(1000)]
    write_capture(path, info, chunks, {"exit_code": 0})
    # An indexer stores the first part, then dies (no finish, file left behind).
    reader = cap.CaptureReader(path)
    partial = ix.Indexer(reader.info, store)
    for record in reader.read()[:400]:
        partial.feed(record)
    reader.close()
    partial.flush()
    assert store.count_events(info.id) == 400

    assert ix.settle(store) == 1
    assert [data for _, _, data, _, _, _ in stored_rows(store, info.id)] == [
        b"line %d" % i for i in range(1000)
    ]
    assert store.count_events(info.id) == 1000
    assert store.get(info.id).status == "ok"
    assert not path.exists()
    assert ix.settle(store) == 0


def test_settling_leaves_a_running_proxys_capture_alone(db_path: Path, store: Store) -> None:
    info = new_info()
    path = capture_path(db_path, info)
    writer = cap.CaptureWriter(path, info)
    writer.feed("out", b"still going\n")
    try:
        assert ix.settle(store) == 0
        assert path.exists()
        assert store.list_recordings() == []
    finally:
        writer.close({"exit_code": 0})
    assert ix.settle(store) == 1
    assert [r.id for r in store.list_recordings()] == [info.id]


HOLD_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


def test_settling_waits_for_an_indexer_at_work(db_path: Path, store: Store) -> None:
    info = new_info(pid=dead_pid())
    path = capture_path(db_path, info)
    write_capture(path, info, [("out", b"a\n")], {"exit_code": 0})
    # Another process holds the indexer lock (an indexer storing it).
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(cap.lock_path(path))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"locked\n"
        done: list[int] = []
        settler = threading.Thread(target=lambda: done.append(ix.settle(store, quiet=True)))
        settler.start()
        settler.join(0.5)
        assert settler.is_alive() and store.list_recordings() == []
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.stdout.close()
        holder.wait(timeout=30)
    settler.join(timeout=60)
    # The holder exited without storing it: the reader did.
    assert done == [1] and store.count_events(info.id) == 1
    assert not path.exists()


#: An indexer writing one large batch: it holds the capture's lock and SQLite's
#: write lock for seconds (``argv[3]``), the write-ahead log growing meanwhile.
WRITE_A_LARGE_BATCH = """
import fcntl, os, sqlite3, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
db = sqlite3.connect(sys.argv[2], isolation_level=None)
db.execute("CREATE TABLE IF NOT EXISTS big (x BLOB)")
db.execute("BEGIN IMMEDIATE")
print("writing", flush=True)
end = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    db.execute("INSERT INTO big VALUES (?)", (os.urandom(1 << 16),))
    time.sleep(0.01)
db.execute("COMMIT")
"""


@pytest.mark.usefixtures("store")
def test_a_reader_waits_for_an_indexer_writing_a_large_batch(db_path: Path,
                                                            tmp_path: Path) -> None:
    """The database takes no writes while the indexer waited for writes one large
    batch (a 64 MiB line): its files change, so the reader waits on, where another
    process's idle lock sends it on at once (test_reliability's)."""
    lock = tmp_path / "capture.lock"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITE_A_LARGE_BATCH, str(lock), str(db_path), "6"],
        stdout=subprocess.PIPE)
    try:
        assert writer.stdout is not None and writer.stdout.readline() == b"writing\n"
        fd = os.open(lock, os.O_RDWR)
        # As settling opens it: SQLite's busy wait as short as the reader's probe.
        settling = open_store(str(db_path), migrate=False,
                              busy_timeout_s=SETTLE_BUSY_TIMEOUT_S)
        try:
            assert ix._lock(fd, 120.0, tmp_path / "capture", True, settling)
        finally:
            settling.close()
            os.close(fd)
        assert writer.wait(timeout=60) == 0  # it finished before the reader went on
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
        assert writer.stdout is not None
        writer.stdout.close()


def test_a_damaged_capture_is_set_aside_with_one_warning_never_deleted(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    info = new_info()
    path = capture_path(db_path, info)
    junk = b"this is not a capture file\n" + bytes(range(256))
    path.write_bytes(junk)
    open_settled_store(str(db_path)).close()
    err = capsys.readouterr().err.splitlines()
    damaged = path.with_name(path.name + ".damaged")
    assert len(err) == 1 and "warning" in err[0] and str(damaged) in err[0]
    assert not path.exists() and damaged.read_bytes() == junk
    # Not reported again, and still kept.
    open_settled_store(str(db_path)).close()
    assert capsys.readouterr().err == ""
    assert damaged.read_bytes() == junk


# -- the indexer itself, with fake stores ----------------------------------------------------


class FakeStore:
    """Keeps batches in memory; can fail a number of times, or always."""

    def __init__(self, *, fail_times: int = 0) -> None:
        self.fail_times = fail_times
        self.events: list[Event] = []
        self.updates: list[dict[str, Any]] = []

    def create_recording(self, info: RecordingInfo) -> None:
        pass

    def write_batch(
        self, recording_id: str, events: Sequence[Event], updates: dict[str, Any] | None = None
    ) -> None:
        if self.fail_times:
            self.fail_times -= 1
            raise StoreError("database is locked")
        self.events.extend(events)
        self.updates.append(dict(updates or {}))

    def update_recording(self, recording_id: str, **values: Any) -> None:
        self.updates.append(values)

    def wait_written(self) -> None:
        pass


def records(*chunks: tuple[int, bytes]) -> list[cap.Record]:
    return [cap.Record(kind, i, 1_700_000_000_000_000_000 + i, data)
            for i, (kind, data) in enumerate(chunks)]


def test_a_store_that_fails_then_recovers_loses_nothing() -> None:
    store = FakeStore(fail_times=2)
    indexer = ix.Indexer(new_info(), store, give_up_s=30)
    for record in records((1, b"a\nb\n"), (cap.END, b'{"exit_code": 0}')):
        indexer.feed(record)
    indexer.finish()
    assert [e.data for e in store.events] == [b"a", b"b"]
    assert indexer.report.store_error is None
    assert store.updates[-1]["exit_code"] == 0


def test_a_store_that_never_works_gives_up_and_keeps_the_capture(
    db_path: Path, store: Store
) -> None:
    info = new_info(pid=dead_pid())
    path = capture_path(db_path, info)
    write_capture(path, info, [("out", b"kept\n")], {"exit_code": 0})
    with pytest.raises(ix.GaveUp, match="database is locked"):
        ix.follow(path, FakeStore(fail_times=10**9), give_up_s=0.3)
    assert path.exists()
    # The next reader with a working store stores it.
    assert ix.settle(store) == 1
    assert [e.data for e in store.iter_events(info.id)] == [b"kept"]


def test_lost_bytes_are_counted_from_lost_records() -> None:
    indexer = ix.Indexer(new_info(), FakeStore())
    lost = b'{"out": 300, "err": 12, "open": []}'  # both gaps ended a line
    for record in records((1, b"a\n"), (cap.LOST, lost), (1, b"b\n")):
        indexer.feed(record)
    indexer.finish()
    assert indexer.report.lost_bytes == 312 and indexer.report.events == 2


@pytest.mark.parametrize("direction", cap.CHUNK_KINDS)
def test_directions_keep_their_own_framing(direction: str) -> None:
    other = "out" if direction != "out" else "in"
    store = FakeStore()
    indexer = ix.Indexer(new_info(), store)
    code = cap.KIND_CODE
    for record in records(
        (code[direction], b"ab"), (code[other], b"zz\n"), (code[direction], b"c\n")
    ):
        indexer.feed(record)
    indexer.finish()
    assert [(e.seq, e.direction, e.data) for e in store.events] == [
        (0, other, b"zz"),
        (1, direction, b"abc"),
    ]


def test_sinks_see_every_event_with_fields_then_close() -> None:
    seen: list[tuple[int, str | None]] = []
    closed: list[RecordingInfo] = []

    class Sink:
        def child_env(self) -> dict[str, str]:
            return {}

        def on_events(self, events: Sequence[Event]) -> None:
            seen.extend((event.seq, event.fields.type) for event in events)

        def on_close(self, info: RecordingInfo) -> None:
            closed.append(info)

    info, store = new_info(), FakeStore()
    indexer = ix.Indexer(info, store, sinks=[Sink()])
    for record in records((0, b'{"type":"user"}\n'), (1, b'{"type":"result"}\nnot json\n')):
        indexer.feed(record)
    indexer.finish()
    assert seen == [(0, "user"), (1, "result"), (2, None)]
    assert closed == [info]
    assert "extra" not in info.extra and not any("extra" in u for u in store.updates)


def test_a_sink_that_reads_the_capture_itself_is_not_shown_the_events() -> None:
    # Live telemetry's worker reads the capture file on its own: calling it for
    # every chunk would only cost the indexer.
    class Reader:
        reads_capture = True

        def __init__(self) -> None:
            self.calls = 0
            self.closed = False

        def child_env(self) -> dict[str, str]:
            return {}

        def on_events(self, events: Sequence[Event]) -> None:
            self.calls += 1

        def on_close(self, info: RecordingInfo) -> None:
            self.closed = True

    reader = Reader()
    indexer = ix.Indexer(new_info(), FakeStore(), sinks=[reader])
    for record in records((1, b"x\n"), (0, b"y\n")):
        indexer.feed(record)
    indexer.finish()
    assert indexer.report.events == 2
    assert reader.calls == 0 and reader.closed


def test_a_broken_sink_is_dropped_and_reported() -> None:
    class Broken:
        def child_env(self) -> dict[str, str]:
            return {}

        def on_events(self, events: Sequence[Event]) -> None:
            raise ValueError("boom")

        def on_close(self, info: RecordingInfo) -> None:
            raise AssertionError("not called once disabled")

    class Working:
        def __init__(self) -> None:
            self.seen: list[bytes] = []
            self.closed = False
            self.warnings: list[str] = []

        def child_env(self) -> dict[str, str]:
            return {}

        def on_events(self, events: Sequence[Event]) -> None:
            self.seen.extend(event.data for event in events)

        def on_close(self, info: RecordingInfo) -> None:
            self.closed = True

    class BreaksOnClose(Working):
        def on_close(self, info: RecordingInfo) -> None:
            self.warnings.append("flush failed")
            raise OSError("gone")

    class Warns(Working):
        def on_events(self, events: Sequence[Event]) -> None:
            super().on_events(events)
            self.warnings.append(f"saw {len(self.seen)}")

    store = FakeStore()
    before, after, late = Warns(), Working(), BreaksOnClose()
    indexer = ix.Indexer(new_info(), store, sinks=[before, Broken(), after, late])
    for record in records((1, b"x\ny\n"), (0, b"z\n")):
        indexer.feed(record)
    indexer.finish()
    assert [e.data for e in store.events] == [b"x", b"y", b"z"]
    # The sinks on either side of the broken one see every line and the close.
    assert before.seen == after.seen == late.seen == [b"x", b"y", b"z"]
    assert before.closed and after.closed
    errors = [
        "Broken disabled after error: ValueError: boom",
        "BreaksOnClose disabled after error: OSError: gone",
    ]
    assert indexer.report.sink_errors == errors
    # They are stored with the recording once every sink is closed, with the
    # sinks' own warnings (a disabled sink's too): stderr may reach no one by then.
    assert store.updates[-1] == {"extra": {"warnings": [*errors, "saw 2", "saw 3",
                                                        "flush failed"]}}


def test_the_indexer_process_stores_a_capture_on_its_own(db_path: Path) -> None:
    # ``python -m claudetrace.indexer CAPTURE`` without the proxy's descriptors
    # takes the lock itself and stores the file (database from $CLAUDETRACE_DB).
    info = new_info(pid=dead_pid())
    path = capture_path(db_path, info)
    write_capture(path, info, [("out", b"one\ntwo\n")], {"exit_code": 0})
    # The default idle scheduling class waits for a free core: on a busy machine
    # (the suite's own processes) that alone can outlast any bound.
    env = {**os.environ, "CLAUDETRACE_DB": str(db_path), "CLAUDETRACE_INDEXER_PRIORITY": "normal"}
    done = subprocess.run(
        [sys.executable, "-m", "claudetrace.indexer", str(path)],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert not path.exists()
    # Run again on the same (now stored) file: nothing to do, no traceback.
    again = subprocess.run(
        [sys.executable, "-m", "claudetrace.indexer", str(path)],
        env=env,
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert "Traceback" not in again.stderr
    store = open_settled_store(str(db_path))
    try:
        assert [e.data for e in store.iter_events(info.id)] == [b"one", b"two"]
    finally:
        store.close()


@pytest.mark.parametrize(
    ("lost", "stored", "lost_bytes"),
    [
        # The gap ended inside a line: its head ("par") and tail ("tial") are not lines.
        (b'{"out": 5, "open": ["out"]}', [b"a", b"b"], 5 + 3 + 5),
        # The gap ended a line: what follows starts one, and is kept.
        (b'{"out": 5, "open": []}', [b"a", b"tial", b"b"], 5 + 3),
        # A writer that did not say (or a damaged record): taken as cut.
        (b'{"out": 5}', [b"a", b"b"], 5 + 3 + 5),
        # A damaged record: the gap may be anywhere, in any direction.
        (b"\xff damaged", [b"a", b"b"], 3 + 5),
    ],
)
def test_a_gap_never_glues_two_lines(lost: bytes, stored: list[bytes], lost_bytes: int) -> None:
    """Issue 17: after a full disk, the head of one sent line was stored glued to the
    tail of another."""
    store = FakeStore()
    indexer = ix.Indexer(new_info(), store)
    for record in records((1, b"a\npar"), (cap.LOST, lost), (1, b"tial\nb\n"),
                          (cap.END, b'{"exit_code": 0}')):
        indexer.feed(record)
    indexer.finish()
    assert [e.data for e in store.events] == stored
    assert indexer.report.lost_bytes == lost_bytes


class BatchStore(FakeStore):
    """A :class:`FakeStore` that also keeps each batch's lines apart."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[bytes]] = []

    def write_batch(
        self, recording_id: str, events: Sequence[Event], updates: dict[str, Any] | None = None
    ) -> None:
        super().write_batch(recording_id, events, updates)
        self.batches.append([event.data for event in events])


def test_the_last_lines_go_before_the_figures_of_the_whole_session() -> None:
    # A writer process stores the last lines while the last batch's figures
    # (every call and tool added up, priced) are made: they go in two batches,
    # the lines with their counts, then the figures and the exit.
    store = BatchStore()
    indexer = ix.Indexer(new_info(), store)
    lines = [json.dumps({"type": "assistant", "message": {
        "id": f"msg_{i}", "role": "assistant", "model": "m", "content": [],
        "usage": {"input_tokens": i, "output_tokens": 2}}}).encode() for i in range(1, 4)]
    for record in records(*((cap.KIND_CODE["out"], line + b"\n") for line in lines),
                          (cap.END, b'{"exit_code": 0}')):
        indexer.feed(record)
    indexer.finish()
    assert store.batches[-2:] == [lines, []]
    lines_batch, last = store.updates[-2:]
    assert lines_batch["event_count"] == 3 and "input_tokens" not in lines_batch
    assert "ended_ns" not in lines_batch and "usage_calls" not in lines_batch
    assert last["event_count"] == 3 and last["input_tokens"] == 6 and last["exit_code"] == 0
    assert [row[0] for row in last["usage_calls"]] == ["msg_1", "msg_2", "msg_3"]


def test_a_batch_carries_its_counts_and_the_summary_figures_when_due(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Refreshing the figures (every model call added up) is never due here but
    # with the last batch: the batches between carry the counts alone, and the
    # last one every figure, those of the whole session.
    from claudetrace.model.session import fold
    from claudetrace.model.summary import summary_columns

    monkeypatch.setattr(ix, "SUMMARY_SHARE", 1e-12)
    store = FakeStore()
    indexer = ix.Indexer(new_info(), store)
    lines = [json.dumps({"type": "assistant", "message": {
        "id": f"msg_{i}", "role": "assistant", "model": "m", "content": [],
        "usage": {"input_tokens": i, "output_tokens": 2}}}).encode() for i in range(1, 6)]
    for record in records(*((cap.KIND_CODE["out"], line + b"\n") for line in lines)):
        indexer.feed(record)
        indexer.flush()
    indexer.finish()
    batches = [u for u in store.updates if "event_count" in u]
    assert batches[0]["input_tokens"] == 1  # the first refresh is due at once
    assert [u["event_count"] for u in batches[1:-1]] == [2, 3, 4, 5]
    assert not any("input_tokens" in u or "models" in u for u in batches[1:-1])
    whole = summary_columns(fold(store.events))
    assert {k: batches[-1][k] for k in whole} == whole
    assert whole["input_tokens"] == 15 and whole["model_calls"] == 5
