"""Capture files (claudetrace.capture): the proxy's append-only journal of what it forwarded."""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claudetrace import capture as cap
from claudetrace.recording import RecordingInfo


def new_info(**fields: object) -> RecordingInfo:
    return RecordingInfo.start(["claude", "--output-format", "stream-json"], **fields)


def write_capture(
    path: Path, chunks: list[tuple[str, bytes]], end: dict[str, object] | None = None,
    *, spliced: Iterable[bool] = (),
) -> RecordingInfo:
    """A complete capture file holding ``chunks`` (and ``end``, if given).

    Chunks whose flag in ``spliced`` is true go in as the proxy passes them
    between pipes: waiting in a pipe, spliced into the file.
    """
    info = new_info(name="rt")
    writer = cap.CaptureWriter(path, info)
    pipe_r, pipe_w = os.pipe()
    try:
        flags = itertools.chain(spliced, itertools.repeat(False))
        for (direction, chunk), from_pipe in zip(chunks, flags, strict=False):
            if from_pipe and chunk:
                os.write(pipe_w, chunk)  # small enough for the pipe's buffer
                writer.feed_pipe(direction, pipe_r, len(chunk))
            else:
                writer.feed(direction, chunk)  # type: ignore[arg-type]
    finally:
        os.close(pipe_r)
        os.close(pipe_w)
    report = writer.close(end)
    assert report.problems() == []
    assert report.chunks == len(chunks)
    return info


def read_all(path: Path, block_size: int = 4 * 1024 * 1024) -> list[cap.Record]:
    reader = cap.CaptureReader(path, block_size=block_size)
    try:
        return list(reader)
    finally:
        reader.close()


def test_round_trip_keeps_header_chunks_order_and_end(tmp_path: Path) -> None:
    path = tmp_path / "a.capture"
    chunks = [
        ("in", b'{"type":"user"}\n'),
        ("out", b'{"type":"system"'),
        ("out", b',"subtype":"init"}\n\xff\xfe'),
        ("err", b"warning\n"),
        ("out", b""),  # an empty chunk is still a record
        ("in", b"\x00" * 70000),
    ]
    before = time.time_ns()
    info = write_capture(path, chunks, {"exit_code": 3, "signal": None})
    after = time.time_ns()

    reader = cap.CaptureReader(path)
    assert reader.info == info
    records = list(reader)
    reader.close()
    assert [(r.direction, r.data) for r in records[:-1]] == chunks
    assert records[-1].kind == cap.END and records[-1].json() == {"exit_code": 3, "signal": None}
    stamps = [r.t_ns for r in records]
    assert stamps == sorted(stamps) and stamps[0] >= 0
    assert all(before <= r.wall_ns <= after for r in records)


def test_a_torn_tail_is_ignored_and_completed_later(tmp_path: Path) -> None:
    path = tmp_path / "t.capture"
    write_capture(path, [("out", b"one\n"), ("out", b"two\n"), ("err", b"three\n")])
    whole = path.read_bytes()
    last = cap.RECORD.size + len(b"three\n")
    for cut in (1, cap.RECORD.size - 1, cap.RECORD.size, last - 1):
        torn = tmp_path / f"torn-{cut}.capture"
        torn.write_bytes(whole[: len(whole) - last + cut])
        reader = cap.CaptureReader(torn)
        assert [r.data for r in reader.read()] == [b"one\n", b"two\n"]
        assert reader.pending_bytes == cut
        # The writer finishes the record: a follower picks it up on its next read.
        with open(torn, "ab") as handle:
            handle.write(whole[len(whole) - last + cut :])
        assert [(r.direction, r.data) for r in reader.read()] == [("err", b"three\n")]
        assert reader.pending_bytes == 0
        reader.close()


@pytest.mark.parametrize("cut", [1, cap.RECORD.size - 1, cap.RECORD.size,
                                 cap.RECORD.size + 3, cap.RECORD.size + 5])
@pytest.mark.parametrize("block", [7, 4 * 1024 * 1024])
def test_a_torn_record_cut_off_and_written_over_is_read_from_the_file(
    tmp_path: Path, cut: int, block: int,
) -> None:
    # A proxy whose write failed part way (a full disk) cuts its torn record off
    # and writes the next records in its place; a follower that read some of the
    # torn one's bytes before that must not take them for the new records' start.
    path = tmp_path / "t.capture"
    write_capture(path, [("out", b"one\n")])
    kept = path.stat().st_size
    torn = cap.RECORD.pack(1, 5, 5, 6) + b"torn\n!"
    with open(path, "ab") as handle:
        handle.write(torn[:cut])
    reader = cap.CaptureReader(path, block_size=block)
    try:
        assert [r.data for r in reader.read()] == [b"one\n"]
        os.truncate(path, kept)
        assert reader.read() == []
        new = [(2, b"after the gap, longer than the torn record\n"), (0, b"in\n")]
        with open(path, "ab") as handle:
            for n, (kind, data) in enumerate(new):
                handle.write(cap.RECORD.pack(kind, 9 + n, 9 + n, len(data)) + data)
        got = []
        while records := reader.read():
            got += records
        assert [(r.kind, r.t_ns, r.data) for r in got] == [(2, 9, new[0][1]), (0, 10, new[1][1])]
        assert reader.pending_bytes == 0
    finally:
        reader.close()


def test_a_record_written_again_whole_after_its_header_is_read_once(tmp_path: Path) -> None:
    # A file that takes no splice: the proxy wrote the header, cut it off, and
    # wrote the same record again whole.
    path = tmp_path / "t.capture"
    write_capture(path, [("out", b"one\n")])
    kept = path.stat().st_size
    record = cap.RECORD.pack(1, 5, 5, 4) + b"two\n"
    with open(path, "ab") as handle:
        handle.write(record[:cap.RECORD.size])
    reader = cap.CaptureReader(path)
    try:
        assert [r.data for r in reader.read()] == [b"one\n"]
        os.truncate(path, kept)
        with open(path, "ab") as handle:
            handle.write(record)
        assert [r.data for r in reader.read()] == [b"two\n"]
        assert reader.read() == [] and reader.pending_bytes == 0
    finally:
        reader.close()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "not a claudetrace capture file"),
        (b"claudetrace capture 9\n{}\n", "not a claudetrace capture file"),
        (b'{"type":"user"}\n', "not a claudetrace capture file"),
        (cap.MAGIC, "header is incomplete"),
        (cap.MAGIC + b'{"id": "x", "argv"', "header is incomplete"),
        (cap.MAGIC + b"not json\n", "bad capture header"),
        (cap.MAGIC + b"[1, 2]\n", "bad capture header"),
        (cap.MAGIC + b'{"id": "x"}\n', "bad capture header"),  # argv, started_ns missing
    ],
)
def test_bad_magic_or_header_is_a_capture_error(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "bad.capture"
    path.write_bytes(content)
    with pytest.raises(cap.CaptureError, match=message):
        cap.CaptureReader(path)


def test_unknown_header_fields_are_ignored(tmp_path: Path) -> None:
    # A newer claudetrace may add metadata; an older reader still stores the rest.
    info = new_info()
    header = json.loads(cap.info_to_json(info))
    header["added_later"] = {"x": 1}
    path = tmp_path / "newer.capture"
    path.write_bytes(cap.MAGIC + json.dumps(header).encode() + b"\n")
    reader = cap.CaptureReader(path)
    assert reader.info == info and reader.read() == []
    reader.close()


chunk_lists = st.lists(
    st.tuples(
        st.sampled_from(cap.CHUNK_KINDS),
        st.one_of(
            st.binary(max_size=64),
            st.just(b"\n"),
            st.binary(min_size=1000, max_size=5000),
        ),
    ),
    max_size=40,
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(chunks=chunk_lists, block=st.integers(1, 9000), end=st.booleans(),
       spliced=st.lists(st.booleans(), max_size=40))
def test_any_chunk_sequence_reads_back_the_same(
    tmp_path: Path, chunks: list[tuple[str, bytes]], block: int, end: bool, spliced: list[bool]
) -> None:
    path = tmp_path / f"h-{time.monotonic_ns()}.capture"
    write_capture(path, chunks, {"exit_code": 0} if end else None, spliced=spliced)
    # A small block size splits records across reads: the reader must join them.
    records = read_all(path, block_size=block)
    assert [(r.direction, r.data) for r in records if r.kind != cap.END] == chunks
    assert [r.kind for r in records].count(cap.END) == int(end)
    assert [r.t_ns for r in records] == sorted(r.t_ns for r in records)
    path.unlink()


def test_a_reader_holds_no_more_memory_than_the_file_needs(tmp_path: Path) -> None:
    # It reads into one buffer: grown only as far as the file has bytes, and given
    # back once a record larger than a block has been read.
    small, large = tmp_path / "small.capture", tmp_path / "large.capture"
    write_capture(small, [("out", b"small\n")])
    write_capture(large, [("out", b"x" * (8 << 20)), ("out", b"y\n")])
    tracemalloc.start()
    try:
        reader = cap.CaptureReader(small)  # a 4 MiB block, the indexer's
        assert [r.data for r in reader.read()] == [b"small\n"]
        assert tracemalloc.get_traced_memory()[0] < 256 * 1024
        reader.close()
        reader = cap.CaptureReader(large)
        records = reader.read()  # the large one read over three blocks
        assert [len(r.data) for r in records] == [8 << 20, 2]
        del records
        assert tracemalloc.get_traced_memory()[0] < 5 << 20  # a block, not the record
        reader.close()
    finally:
        tracemalloc.stop()


def test_a_reader_follows_a_file_while_it_is_written(tmp_path: Path) -> None:
    path = tmp_path / "live.capture"
    writer = cap.CaptureWriter(path, new_info())
    reader = cap.CaptureReader(path)
    got: list[bytes] = []
    for i in range(50):
        writer.feed("out", b"line %d\n" % i)
        deadline = time.monotonic() + 30
        while len(got) < i + 1:
            got += [r.data for r in reader.read()]
            assert time.monotonic() < deadline, "the chunk never reached the file"
    writer.close({"exit_code": 0})
    assert got == [b"line %d\n" % i for i in range(50)]
    assert [r.kind for r in reader.read()] == [cap.END]
    reader.close()


def test_writer_lock_tells_readers_a_proxy_is_still_writing(tmp_path: Path) -> None:
    path = tmp_path / "lock.capture"
    writer = cap.CaptureWriter(path, new_info())
    assert cap.writer_alive(path)
    # Another process sees it too (flock is per open file, not per process).
    probe = [sys.executable, "-c",
             f"from claudetrace.capture import writer_alive; from pathlib import Path;"
             f"print(writer_alive(Path({str(path)!r})))"]
    assert subprocess.run(probe, capture_output=True, text=True, check=True).stdout == "True\n"
    writer.close(None)
    assert not cap.writer_alive(path)
    assert subprocess.run(probe, capture_output=True, text=True, check=True).stdout == "False\n"
    assert not cap.writer_alive(tmp_path / "missing.capture")


def test_a_capture_file_never_appears_without_its_writer_lock_and_header(tmp_path: Path) -> None:
    # A reader that settles leftovers must never find a new capture file that is
    # not yet locked (it would take it for a dead proxy's) or has no header yet
    # (it would set it aside as damaged).
    folder = tmp_path / "captures"
    folder.mkdir()
    stop = threading.Event()
    seen_bad: list[str] = []

    def watch() -> None:
        while not stop.is_set():
            for path in folder.glob("*" + cap.SUFFIX):
                try:
                    size = path.stat().st_size
                except FileNotFoundError:
                    continue
                alive = cap.writer_alive(path)
                if path.exists() and (not alive or size < len(cap.MAGIC)):
                    seen_bad.append(f"{path.name}: alive={alive} size={size}")

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        writers = []
        for _ in range(200):
            info = new_info()
            writers.append(cap.CaptureWriter(folder / f"{info.id}{cap.SUFFIX}", info))
    finally:
        stop.set()
        watcher.join()
    for writer in writers:
        writer.close(None)
    assert seen_bad == []


def test_capture_dirs_beside_sqlite_then_data_dir(tmp_path: Path, ct_env: Path) -> None:
    db = tmp_path / "x.db"
    assert cap.capture_dirs(f"sqlite:///{db}") == [
        tmp_path / "x.db.capture",
        ct_env / "capture" / cap.capture_dirs(f"sqlite:///{db}")[1].name,
    ]
    assert cap.resolve_url(str(db)) == f"sqlite:///{db}"
    # Server databases have only the data directory, keyed without the password.
    one = cap.capture_dirs("postgresql+psycopg://u:secret1@db.example:5432/ct")
    two = cap.capture_dirs("postgresql+psycopg://u:secret2@db.example:5432/ct")
    other = cap.capture_dirs("postgresql+psycopg://u:secret1@db.example:5432/other")
    assert one == two != other
    assert len(one) == 1 and one[0].parent == ct_env / "capture"
    assert "secret" not in str(one[0])
    [memory] = cap.capture_dirs("sqlite://")
    assert memory.parent == ct_env / "capture"


@pytest.mark.parametrize("url", [
    "postgresql://postgres@/ct?host=/run/postgresql&port=5433",  # a socket directory
    "postgresql://postgres@/ct?port=5433&host=/run/postgresql",
    "postgresql+psycopg://u:p%40ss%2Fw@db.example:5432/ct?sslmode=require&application_name=a",
    "postgresql://u@db.example/ct?options=-c%20search_path%3Dx",
])
def test_the_proxy_and_a_command_find_one_capture_folder(url: str, ct_env: Path) -> None:
    # The proxy keys by the URL as given, a command by its store's (SQLAlchemy
    # sorts and encodes the query): with a socket directory in ``host=`` they
    # differed, so no command waited for the indexer or stored what it left.
    from sqlalchemy.engine import make_url

    assert cap.capture_dirs(url) == cap.capture_dirs(
        make_url(url).render_as_string(hide_password=False))


def test_create_falls_back_to_the_data_dir(tmp_path: Path, ct_env: Path) -> None:
    # A regular file where the database's directory should be: nothing can be
    # created beside the database (this holds for root too, unlike permissions).
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    url = f"sqlite:///{blocker / 'x.db'}"
    writer = cap.CaptureWriter.create(url, new_info())
    try:
        assert writer.path.parent == cap.capture_dirs(url)[1]
        assert writer.path.parent.is_relative_to(ct_env)
        assert cap.capture_files(url) == [writer.path]
    finally:
        writer.close(None)
    cap.remove(writer.path)
    assert cap.capture_files(url) == []


FULL_DISK = """
import json, os, resource, signal, time
from pathlib import Path
from claudetrace import capture as cap
from claudetrace.recording import RecordingInfo

# A real write failure: past the file size limit, writes fail with EFBIG.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_LIMIT, resource.RLIM_INFINITY))
writer = cap.CaptureWriter(Path(PATH), RecordingInfo.start(["x"]))
FROM_PIPE = FROM_PIPE_FLAG
pipe_r, pipe_w = os.pipe()

def feed(chunk):
    # As the proxy does: the chunk waits in a pipe and is spliced into the
    # file, or it is handed over as bytes.  Either way the pipe is left empty.
    if FROM_PIPE:
        os.write(pipe_w, chunk)
        writer.feed_pipe("out", pipe_r, len(chunk))
        os.set_blocking(pipe_r, False)
        try:
            left = os.read(pipe_r, 1)
        except BlockingIOError:
            left = b""
        os.set_blocking(pipe_r, True)
        assert left == b"", "the pipe was not emptied"
    else:
        writer.feed("out", chunk)

for i in range(100):
    feed(b"%03d" % i + b"x" * 96 + b"\\n")
deadline = time.monotonic() + 30
while writer.report.chunks + writer.report.lost_chunks < 100 and time.monotonic() < deadline:
    time.sleep(0.01)
lost = writer.report.lost_chunks
# Space again.  The next chunk is still counted as lost (the writer learns that
# writing works from the LOST record it then writes); once that record is in
# the file, chunks are written again.
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
feed(b"100" + b"x" * 96 + b"\\n")
reader = cap.CaptureReader(Path(PATH))
while not any(r.kind == cap.LOST for r in reader.read()) and time.monotonic() < deadline:
    time.sleep(0.01)
for i in range(101, 110):
    feed(b"%03d" % i + b"x" * 96 + b"\\n")
report = writer.close({"exit_code": 0})
print(json.dumps({"lost_while_full": lost, "lost": report.lost_chunks,
                  "problems": report.problems()}))
"""


@pytest.mark.parametrize("from_pipe", [False, True], ids=["bytes", "spliced"])
def test_a_failing_disk_loses_whole_chunks_counts_them_and_recovers(
    tmp_path: Path, from_pipe: bool
) -> None:
    path = tmp_path / "full.capture"
    limit = 4096 + 37  # not on a record boundary: one record is torn by the limit
    code = (
        FULL_DISK.replace("FSIZE_LIMIT", str(limit))
        .replace("PATH", repr(str(path)))
        .replace("FROM_PIPE_FLAG", str(from_pipe))
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["lost_while_full"] > 0
    [problem] = result["problems"]
    assert f"{result['lost']} chunks" in problem and "forwarded but not recorded" in problem
    assert "too large" in problem.lower()  # the reason, from the OS
    records = read_all(path)
    chunks = [r.data for r in records if r.kind < len(cap.CHUNK_KINDS)]
    # Every record is whole: a torn one was cut off, not left mid-file.
    assert all(len(c) == 100 and c.endswith(b"x\n") for c in chunks)
    numbers = [int(c[:3]) for c in chunks]
    assert numbers == sorted(numbers) and numbers[-9:] == list(range(101, 110))
    assert len(chunks) + result["lost"] == 110
    # The file says how much is missing, and where: after the last chunk before the gap.
    lost = [r for r in records if r.kind == cap.LOST]
    assert sum(r.json()["out"] for r in lost) == 100 * result["lost"]
    before_gap = max(n for n in numbers if n < 100)
    assert records.index(lost[0]) == numbers.index(before_gap) + 1
    assert records[-1].kind == cap.END


def test_removing_the_last_capture_removes_its_empty_folder_too(tmp_path: Path) -> None:
    folder = tmp_path / "x.db.capture"
    folder.mkdir()
    first, second = (folder / f"{name}{cap.SUFFIX}" for name in ("A", "B"))
    for path in (first, second):
        write_capture(path, [("out", b"x\n")])
        cap.open_lock(path)
    cap.remove(first)
    assert folder.is_dir() and not first.exists() and not cap.lock_path(first).exists()
    cap.remove(second)
    assert not folder.exists()
    # A proxy starting afterwards makes the folder again.
    url = f"sqlite:///{tmp_path / 'x.db'}"
    writer = cap.CaptureWriter.create(url, new_info())
    assert writer.path.parent == folder
    writer.close(None)


def test_half_created_captures_of_killed_proxies_are_removed_once_stale(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    folder = cap.capture_dirs(url)[0]
    folder.mkdir()
    stale, fresh, held = (folder / f"{name}{cap.SUFFIX}.new" for name in ("A", "B", "C"))
    for path in (stale, fresh, held):
        path.write_bytes(cap.MAGIC)
    old = time.time() - cap.STALE_NEW_S - 10
    os.utime(stale, (old, old))
    os.utime(held, (old, old))
    fd = os.open(held, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a proxy still between create and rename
    try:
        assert cap.remove_stale_new(url) == 1
    finally:
        os.close(fd)
    assert not stale.exists() and fresh.exists() and held.exists()
