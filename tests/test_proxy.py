"""The proxy as a drop-in executable: `python -m claudetrace proxy --db DB -- CHILD`.

The children are small Python or sh scripts; the real CLI is driven by the
end-to-end tests elsewhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from claudetrace import capture as cap
from claudetrace.errors import StoreError
from claudetrace.indexer import open_settled_store
from claudetrace.model.events import Event, iter_lines
from claudetrace.pricing import NO_COST, cost_text
from claudetrace.recording import stat_fields

pytestmark = pytest.mark.usefixtures("ct_env")

PY = sys.executable


def proxy_argv(db: Path, *child: str, extra: tuple[str, ...] = ()) -> list[str]:
    return [PY, "-m", "claudetrace", "proxy", "--db", str(db), *extra, "--", *child]


def py_child(code: str) -> list[str]:
    """A Python child running ``code`` (dedented), unbuffered."""
    return [PY, "-u", "-c", textwrap.dedent(code)]


def run(
    db: Path, *child: str, data: bytes = b"", timeout: float = 60, **kw: object
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        proxy_argv(db, *child),
        input=data,
        capture_output=True,
        timeout=timeout,
        check=False,
        **kw,  # type: ignore[arg-type]
    )


@contextlib.contextmanager
def spawn(argv: list[str], **kw: object) -> Iterator[subprocess.Popen[bytes]]:
    """A process that is killed, reaped and whose pipes are closed on the way out."""
    with subprocess.Popen(argv, **kw) as proc:  # type: ignore[call-overload]
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()


def latest_events(db: Path) -> tuple[object, list[Event]]:
    store = open_settled_store(str(db))
    try:
        rec = store.resolve("latest")
        return rec, list(store.iter_events(rec.id))
    finally:
        store.close()


def settle(db: Path) -> None:
    """Store what the indexers have not stored yet, before reading the file directly."""
    open_settled_store(str(db)).close()


def capture_dir(db: Path) -> Path:
    return db.with_name(db.name + cap.SUFFIX)


def indexer_pids(marker: Path) -> list[int]:
    """Indexer processes (and their writers) working on a capture file under
    ``marker`` (a test's tmp dir).

    Found by command line: an indexer runs in a session of its own and outlives
    its proxy, so it is no child of anything the test started.
    """
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (b"claudetrace.indexer" in argv or b"claudetrace.store.writer_child" in argv) \
                and any(str(marker).encode() in a for a in argv):
            pids.append(int(entry.name))
    return pids


def indexer_and_writer(marker: Path) -> tuple[int, int]:
    """The pids of the indexer and of its writer (``claudetrace.store.writer_child``)."""
    [writer] = [pid for pid in indexer_pids(marker)
                if b"claudetrace.store.writer_child" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    [indexer] = [pid for pid in indexer_pids(marker) if pid != writer]
    return indexer, writer


def wait_until(predicate: Callable[[], object], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def stored_count(db: Path) -> int:
    """Events stored so far, read directly (the indexer may still be writing)."""
    try:
        with contextlib.closing(sqlite3.connect(db, timeout=30)) as conn:
            return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])
    except sqlite3.OperationalError:  # no schema yet
        return 0


def by_direction(events: list[Event], direction: str) -> list[tuple[bytes, bool]]:
    return [(e.data, e.eol) for e in events if e.direction == direction]


MIXED = (
    b'{"type":"user","message":{"content":"hi \xc3\xa9"}}\n'
    b"\n"
    b"not json at all\n"
    b"\xff\xfe binary \x00 bytes\n"
    b"  \r\n"
    b'{"type":"result","subtype":"success"}\n'
    b"last line without newline"
)


def test_forwards_both_ways_byte_exact_and_records_every_line(db_path: Path) -> None:
    done = run(db_path, "cat", data=MIXED)
    assert done.returncode == 0, done.stderr
    assert done.stdout == MIXED
    assert done.stderr == b""
    rec, events = latest_events(db_path)
    assert by_direction(events, "in") == list(iter_lines(MIXED))
    assert by_direction(events, "out") == list(iter_lines(MIXED))
    assert [e.seq for e in events] == list(range(len(events)))
    assert rec.status == "ok" and rec.exit_code == 0 and rec.event_count == len(events)


def test_stderr_is_forwarded_and_recorded_and_fields_stored(db_path: Path) -> None:
    child = py_child(
        """
        import sys
        sys.stderr.buffer.write(b"warning \\xff\\n")
        sys.stdout.buffer.write(b'{"type":"system","subtype":"init","session_id":"sess-1","model":"m1"}\\n')
        """
    )
    done = run(db_path, *child)
    assert done.returncode == 0
    assert done.stderr == b"warning \xff\n"
    rec, events = latest_events(db_path)
    assert by_direction(events, "err") == [(b"warning \xff", True)]
    assert rec.cli_session_id == "sess-1" and rec.model == "m1"
    with sqlite3.connect(db_path) as conn:
        rows = conn.execute(
            "SELECT direction, is_json, type, subtype FROM events ORDER BY seq"
        ).fetchall()
    assert sorted(rows) == sorted([("err", 0, None, None), ("out", 1, "system", "init")])


def test_a_line_arrives_at_once_not_when_a_buffer_fills(db_path: Path) -> None:
    child = py_child(
        """
        import sys, time
        sys.stdout.write('{"type":"ping"}\\n'); sys.stdout.flush()
        time.sleep(40)
        """
    )
    argv = proxy_argv(db_path, *child)
    with spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE) as proc:
        start = time.monotonic()
        assert proc.stdout is not None
        line = proc.stdout.readline()
        elapsed = time.monotonic() - start
    assert line == b'{"type":"ping"}\n'
    # Python start-up of proxy and child fits well inside this, on a loaded machine
    # too; a buffered proxy would hold the line until the child exits after 40 s.
    # (The child, orphaned when the proxy is killed, ends by itself.)
    assert elapsed < 20


def test_stdin_eof_closes_the_childs_stdin(db_path: Path) -> None:
    child = py_child(
        """
        import sys
        data = sys.stdin.buffer.read()
        print("child saw EOF after", len(data))
        """
    )
    done = run(db_path, *child, data=b"abc\n" * 1000, timeout=20)
    assert done.returncode == 0
    assert done.stdout == b"child saw EOF after 4000\n"


def test_exit_code_preserved(db_path: Path) -> None:
    done = run(db_path, "sh", "-c", "echo bye; exit 7")
    assert done.returncode == 7
    assert done.stdout == b"bye\n"
    rec, _ = latest_events(db_path)
    assert (rec.exit_code, rec.signal, rec.status) == (7, None, "error")


def test_child_killed_by_signal_gives_128_plus_n(db_path: Path) -> None:
    done = run(db_path, "sh", "-c", "kill -KILL $$")
    assert done.returncode == 128 + signal.SIGKILL
    rec, _ = latest_events(db_path)
    assert (rec.exit_code, rec.signal) == (128 + signal.SIGKILL, signal.SIGKILL)


def _claude_symlink(tmp_path: Path) -> Path:
    """A ``claude`` symlink to the installed console script (argv[0] dispatch)."""
    script = Path(sys.executable).parent / "claudetrace"
    if not script.exists():
        pytest.skip("the claudetrace console script is not installed next to the interpreter")
    link = tmp_path / "bin" / "claude"
    link.parent.mkdir()
    link.symlink_to(script)
    return link


@pytest.mark.parametrize("way", ["proxy", "live telemetry", "claude symlink"])
def test_the_recording_starts_when_the_child_started(
    db_path: Path, tmp_path: Path, way: str
) -> None:
    # Line times count from the spawn; the recording's start must be that moment
    # too, not when the proxy had loaded its modules after it: so each line's
    # wall clock is its start plus its time, and the duration covers every line.
    child = ["sh", "-c", 'echo "{}"; sleep 0.3; echo "{}"']
    env = dict(os.environ)
    if way == "claude symlink":
        env.update(CLAUDETRACE_REAL_CLI="sh", CLAUDETRACE_DB=str(db_path))
        argv = [str(_claude_symlink(tmp_path)), *child[1:]]
    else:
        argv = proxy_argv(db_path, *child)
    if way == "live telemetry":  # the recording's id is made before the spawn
        env.update(OTEL_TRACES_EXPORTER="console", OTEL_METRICS_EXPORTER="none")
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=env,
                          timeout=60, check=False)
    assert (done.returncode, done.stdout) == (0, b"{}\n{}\n"), done.stderr
    rec, events = latest_events(db_path)
    assert len(events) == 2
    for event in events:
        # The start is read just before the clock lines count on, so never later.
        assert event.wall_ns - event.t_ns >= rec.started_ns, (event, rec.started_ns)
    assert rec.ended_ns - rec.started_ns >= events[-1].t_ns


TRAPPER = """
import signal, sys, time
def report(signum, frame):
    sys.stdout.write(f"got {signum}\\n"); sys.stdout.flush()
    if signum == signal.SIGTERM:
        sys.exit(3)
for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
    signal.signal(s, report)
print("ready", flush=True)
for _ in range(200):
    time.sleep(0.05)
"""


def test_sigint_sighup_sigterm_are_forwarded_to_the_child(db_path: Path) -> None:
    argv = proxy_argv(db_path, *py_child(TRAPPER))
    with spawn(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
            proc.send_signal(signum)
            assert proc.stdout.readline() == f"got {int(signum)}\n".encode()
        assert proc.wait(timeout=10) == 3
    rec, events = latest_events(db_path)
    assert [e.data for e in events if e.direction == "out"] == [
        b"ready",
        b"got 2",
        b"got 1",
        b"got 15",
    ]
    assert rec.exit_code == 3


def test_a_sigint_while_the_proxy_starts_ends_it_quietly(db_path: Path) -> None:
    # Until the forwarder takes SIGINT, Python's own handler raises
    # KeyboardInterrupt.  A Ctrl-C at any point of the start ends the proxy with
    # 130 and no traceback: before the child started, the proxy itself; after
    # that, the child (``sleep`` dies of the forwarded SIGINT).  Each run is
    # signalled a little later after claudetrace.cli.main has imported
    # claudetrace.cli.launch, as ``-X importtime`` says on stderr (before main
    # runs, the interpreter's own start is Python's to report).
    python = [PY, "-X", "importtime", "-c",
              "import sys; from claudetrace.cli import main; sys.exit(main())"]
    argv = [*python, "proxy", "--db", str(db_path), "--", "sleep", "30"]
    for delay in (0, 0.001, 0.002, 0.003, 0.004, 0.006, 0.008, 0.012, 0.02, 0.05, 0.2):
        with spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE) as proc:
            assert proc.stderr is not None
            seen = []
            for line in proc.stderr:
                seen.append(line)
                if line.rstrip().endswith(b"| claudetrace.cli.launch"):
                    break
            time.sleep(delay)
            proc.send_signal(signal.SIGINT)
            _, rest = proc.communicate(timeout=60)
        err = b"".join(seen) + rest
        assert proc.returncode == 130, (delay, err.decode())
        assert b"Traceback" not in err and b"KeyboardInterrupt" not in err, (delay, err.decode())


def _blocked_signals(pid: int, tid: int) -> set[int]:
    """The signals thread ``tid`` of process ``pid`` blocks, from /proc."""
    status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
    mask = int(next(line.split()[1] for line in status.splitlines()
                    if line.startswith("SigBlk:")), 16)
    return {n for n in range(1, 65) if mask >> (n - 1) & 1}


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_only_the_proxys_main_thread_takes_the_signals_it_forwards(db_path: Path) -> None:
    # Python runs handlers in the main thread; a signal the kernel gave a pump
    # thread would wait until the child exited on its own to be forwarded.
    argv = proxy_argv(db_path, *py_child(TRAPPER))
    with spawn(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        # The child's line can come through while the proxy still starts its
        # helpers: the three pumps, and the indexer's stderr relay.  The main
        # thread blocks the forwarded signals for a moment while it starts each
        # helper (so the helper begins with them blocked): wait until it has
        # started them all and unblocked them again.
        forwarded = {int(s) for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM)}
        deadline = time.monotonic() + 30
        while True:
            threads = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task")]
            helpers = [tid for tid in threads if tid != proc.pid]
            settled = len(helpers) >= 4 and not forwarded & _blocked_signals(proc.pid, proc.pid)
            if settled or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert settled, (helpers, _blocked_signals(proc.pid, proc.pid))
        for tid in helpers:
            assert forwarded <= _blocked_signals(proc.pid, tid), tid
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout.readline() == b"got 15\n"
        assert proc.wait(timeout=10) == 3


@pytest.mark.parametrize("closed", [0, 1, 2])
def test_a_proxy_started_with_a_standard_fd_closed_records_and_exits_as_the_child(
    db_path: Path, closed: int
) -> None:
    # The first file the proxy opened took the free number: with fd 1 closed, the
    # capture file became fd 1 and the child's stdout was forwarded into it.
    child = ["sh", "-c", "echo out; echo err >&2; exit 5"]
    redirect = {0: "<&-", 1: ">&-", 2: "2>&-"}[closed]
    argv = ["sh", "-c", f'exec "$@" {redirect}', "sh", *proxy_argv(db_path, *child)]
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
                          check=False)
    assert done.returncode == 5, done.stderr
    assert done.stdout == (b"" if closed == 1 else b"out\n")
    assert done.stderr == (b"" if closed == 2 else b"err\n")
    rec, events = latest_events(db_path)
    assert sorted((e.direction, e.data) for e in events) == [("err", b"err"), ("out", b"out")]
    assert (rec.status, rec.exit_code) == ("error", 5)


def test_child_that_cannot_start_is_one_line_exit_127_and_a_failed_session(
    db_path: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-claude"
    done = run(db_path, str(missing), "--flag")
    assert done.returncode == 127
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0] and "Traceback" not in done.stderr.decode()
    not_exec = tmp_path / "not-executable"
    not_exec.write_text("#!/bin/sh\n")
    done = run(db_path, str(not_exec))
    assert done.returncode == 127 and len(done.stderr.splitlines()) == 1
    store = open_settled_store(str(db_path))
    try:
        recs = store.list_recordings()
        assert [r.status for r in recs] == ["error", "error"]
        assert all(r.status_reason.startswith("the CLI did not start: ") for r in recs)
        assert all(r.exit_code == 127 and r.error for r in recs)
    finally:
        store.close()


def test_a_misspelt_option_is_a_usage_error_not_a_command(db_path: Path) -> None:
    # ``--nmae smoke -- claude`` ran "--nmae" as the command: exit 127 and a
    # failed recording in the store for a typo.
    def proxied(*extra: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(proxy_argv(db_path, "true", extra=extra), capture_output=True,
                              timeout=60, check=False)

    done = proxied("--nmae", "smoke")
    assert done.returncode == 2, done.stderr
    assert "No such option '--nmae'. Did you mean '--name'?" in done.stderr.decode()
    for extra in (("--bogus=1",), ("-x",)):
        assert proxied(*extra).returncode == 2, extra
    assert not db_path.exists() or not open_settled_store(str(db_path)).list_recordings()


def test_64_mib_line_is_forwarded_and_stored_exactly(db_path: Path) -> None:
    size = 64 * 1024 * 1024
    line = (b'{"type":"big","pad":"' + b"x" * (size - 40) + b'"}').ljust(size, b" ")
    done = run(db_path, "cat", data=line + b"\n" + b"tail", timeout=120)
    assert done.returncode == 0
    assert len(done.stdout) == size + 5 and done.stdout == line + b"\ntail"
    del done
    # Storing 128 MB in one transaction can hold SQLite's write lock past a reader's
    # settle wait (2 s) on a loaded machine: the reader then goes on with what is
    # stored, without the lines still being written.  Wait for the indexer itself.
    wait_until(lambda: not indexer_pids(db_path.parent), "the indexer to store the lines",
               timeout=120)
    settle(db_path)
    with sqlite3.connect(db_path) as conn:
        rows = conn.execute(
            "SELECT direction, size, eol, is_json, type FROM events ORDER BY seq"
        ).fetchall()
    conn.close()
    assert sorted(rows) == sorted(
        [
            ("in", size, 1, 1, "big"),
            ("out", size, 1, 1, "big"),
            ("in", 4, 0, 0, None),
            ("out", 4, 0, 0, None),
        ]
    )
    # The bytes as the store reads them back (its indexer packs a finished
    # recording's lines: the column then holds them compressed).
    _rec, events = latest_events(db_path)
    assert sorted((e.direction, e.data == line, e.data == b"tail", e.eol) for e in events) == [
        ("in", False, True, False), ("in", True, False, True),
        ("out", False, True, False), ("out", True, False, True),
    ]


def test_a_host_that_reads_slowly_still_gets_everything(db_path: Path) -> None:
    # The child is long gone before the host reads: its output sits in the
    # pipes, and the proxy must wait for the host rather than drop it.
    child = py_child(
        """
        import sys
        for i in range(20000):
            sys.stdout.write('{"type":"assistant","n":%d}\\n' % i)
        """
    )
    with spawn(
        proxy_argv(db_path, *child), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
    ) as proc:
        time.sleep(3.5)
        out, _ = proc.communicate(timeout=60)
    expected = [b'{"type":"assistant","n":%d}' % i for i in range(20000)]
    assert proc.returncode == 0
    assert out.splitlines() == expected
    _rec, events = latest_events(db_path)
    assert [e.data for e in events] == expected


def test_a_grandchild_holding_the_pipes_does_not_keep_the_proxy_alive(db_path: Path) -> None:
    start = time.monotonic()
    done = run(db_path, "sh", "-c", "sleep 30 & echo started; exit 5", timeout=30)
    assert done.returncode == 5
    assert done.stdout == b"started\n"
    assert time.monotonic() - start < 20


def test_sigkill_of_the_proxy_mid_stream_stores_it_incomplete_without_gaps(db_path: Path) -> None:
    child = py_child(
        """
        import sys, time
        i = 0
        while True:
            sys.stdout.write(f'{{"type":"tick","n":{i}}}\\n'); sys.stdout.flush()
            i += 1
            time.sleep(0.002)
        """
    )
    argv = proxy_argv(db_path, *child)
    received: list[tuple[float, int]] = []
    with spawn(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True) as proc:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = b""
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if select.select([fd], [], [], 0.05)[0]:
                buf += os.read(fd, 65536)
                *lines, buf = buf.split(b"\n")
                now = time.monotonic()
                received += [(now, int(line.split(b":")[-1].rstrip(b"}"))) for line in lines]
        proc.kill()
        proc.wait()
        os.killpg(proc.pid, signal.SIGKILL)  # the orphaned child
    assert [n for _, n in received] == list(range(len(received)))
    settle(db_path)
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    rec, events = latest_events(db_path)
    ticks = [e.data for e in events]
    assert ticks == [b'{"type":"tick","n":%d}' % i for i in range(len(ticks))]
    # Each chunk is in the capture file before it is forwarded: everything the
    # host received was recorded (a line read after the last one we saw may be too).
    assert received and len(ticks) >= len(received)
    assert rec.status == "incomplete" and rec.ended_ns is None and rec.exit_code is None
    assert not list(capture_dir(db_path).glob("*" + cap.SUFFIX))


def test_sigkill_of_the_proxy_ends_its_child_as_it_would_without_claudetrace(
    db_path: Path, tmp_path: Path,
) -> None:
    # A host that SIGKILLs what it started (Go's exec.CommandContext on a timeout)
    # kills the CLI itself without claudetrace; the proxy cannot pass SIGKILL on,
    # so the indexer, which outlives it, ends the child.
    child = py_child(
        """
        import os, time
        print('{"type":"pid","pid":%d}' % os.getpid(), flush=True)
        time.sleep(120)
        """
    )
    with spawn(proxy_argv(db_path, *child), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
               start_new_session=True) as proc:
        assert proc.stdout is not None
        pid = json.loads(proc.stdout.readline())["pid"]
        try:
            wait_until(lambda: indexer_pids(tmp_path), "the indexer")
            proc.kill()
            proc.wait()

            def gone() -> bool:
                fields = stat_fields(pid)
                return fields is None or fields[0] == b"Z"

            wait_until(gone, "the orphaned child to end")
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    # What it said is stored, and the recording is over, never ended by an exit.
    rec, events = latest_events(db_path)
    assert [e.data for e in events] == [b'{"type":"pid","pid":%d}' % pid]
    assert rec.status == "incomplete" and rec.exit_code is None
    # Nothing will report its cost now: not "not yet reported", as a running one says.
    assert cost_text(rec) == NO_COST


STAGED = """
import sys
for stage in range(2):
    for i in range(STAGE_LINES):
        sys.stdout.write('{"type":"assistant","stage":%d,"n":%d}\\n' % (stage, i))
    sys.stdout.flush()
    if stage == 0:
        sys.stdin.readline()  # wait for the test
"""
STAGE_LINES = 2000


def staged_lines() -> list[bytes]:
    return [
        b'{"type":"assistant","stage":%d,"n":%d}' % (stage, i)
        for stage in range(2)
        for i in range(STAGE_LINES)
    ]


def read_lines(fd: int, count: int, pending: bytes = b"") -> tuple[list[bytes], bytes]:
    lines: list[bytes] = []
    while len(lines) < count:
        ready, _, _ = select.select([fd], [], [], 60)
        assert ready, "the proxy stopped forwarding"
        chunk = os.read(fd, 1 << 16)
        assert chunk, "the proxy closed its stdout early"
        pending += chunk
        *more, pending = pending.split(b"\n")
        lines += more
    return lines, pending


@contextlib.contextmanager
def staged_session_stored_in_part(
    db_path: Path, tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[bytes], list[bytes], bytes]]:
    """A proxied session that has sent its first stage, of which the indexer has
    stored a part; the process, the lines read and what is read of the next."""
    child = py_child(STAGED.replace("STAGE_LINES", str(STAGE_LINES)))
    with spawn(
        proxy_argv(db_path, *child), stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        first, pending = read_lines(proc.stdout.fileno(), STAGE_LINES)
        wait_until(lambda: len(indexer_pids(tmp_path)) == 2, "the indexer and its writer")
        wait_until(lambda: stored_count(db_path) > 0, "the indexer to store something")
        yield proc, first, pending


def finish_staged_session(proc: subprocess.Popen[bytes], pending: bytes) -> list[bytes]:
    """Let the session of :func:`staged_session_stored_in_part` send its second stage
    and end; the lines of that stage."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"go\n")
    proc.stdin.close()
    second, pending = read_lines(proc.stdout.fileno(), STAGE_LINES, pending)
    assert proc.wait(timeout=60) == 0
    assert pending == b"" and proc.stdout.read() == b""
    return second


def test_sigkill_of_the_indexer_mid_session_the_next_reader_stores_it_all(
    db_path: Path, tmp_path: Path
) -> None:
    # Killed once it has stored part of the session: those rows must be replaced,
    # not duplicated.
    with staged_session_stored_in_part(db_path, tmp_path) as (proc, first, pending):
        # The indexer itself: its writer ends with it (after the batches it has).
        pid, _writer = indexer_and_writer(tmp_path)
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not indexer_pids(tmp_path), "the indexer and its writer to end")
        partial = stored_count(db_path)
        second = finish_staged_session(proc, pending)
    assert first + second == staged_lines()
    # Nobody stored the rest yet: the capture file holds it.
    assert stored_count(db_path) == partial
    [capture] = capture_dir(db_path).glob("*" + cap.SUFFIX)

    rec, events = latest_events(db_path)  # opening the store settles
    assert [e.data for e in events if e.direction == "out"] == staged_lines()
    assert [e.data for e in events if e.direction == "in"] == [b"go"]
    assert [e.seq for e in events] == list(range(len(events)))
    assert rec.event_count == len(events) == 2 * STAGE_LINES + 1
    assert rec.status == "ok"
    assert not capture.exists()
    settle(db_path)
    assert stored_count(db_path) == 2 * STAGE_LINES + 1


def test_sigkill_of_the_indexers_writer_the_indexer_writes_the_rest_itself(
    db_path: Path, tmp_path: Path
) -> None:
    with staged_session_stored_in_part(db_path, tmp_path) as (proc, _first, pending):
        indexer, writer = indexer_and_writer(tmp_path)
        # The indexer's writer runs on idle CPU time and copies SQLite's log lazily.
        argv = Path(f"/proc/{writer}/cmdline").read_bytes().split(b"\0")
        assert b"--idle" in argv and b"--lazy-checkpoints" in argv
        os.kill(writer, signal.SIGKILL)
        wait_until(lambda: indexer_pids(tmp_path) == [indexer], "the writer to die")
        finish_staged_session(proc, pending)
    wait_until(lambda: not indexer_pids(tmp_path), "the indexer to finish")
    # Stored whole by the indexer alone: no capture file is left for a reader.
    assert not list(capture_dir(db_path).glob("*" + cap.SUFFIX))
    assert stored_count(db_path) == 2 * STAGE_LINES + 1
    rec, events = latest_events(db_path)
    assert [e.data for e in events if e.direction == "out"] == staged_lines()
    assert [e.seq for e in events] == list(range(len(events)))
    assert rec.status == "ok"


def test_eight_concurrent_proxies_on_one_sqlite_file(db_path: Path) -> None:
    lines = 3000
    child = py_child(
        f"""
        import sys
        w = sys.stdout.write
        for i in range({lines}):
            w('{{"type":"assistant","n":%d}}\\n' % i)
        """
    )
    # Create the schema first so the 8 do not all start by migrating.
    open_settled_store(str(db_path)).close()
    with contextlib.ExitStack() as stack:
        procs = [
            stack.enter_context(
                spawn(
                    proxy_argv(db_path, *child, extra=("--name", f"p{k}")),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
            )
            for k in range(8)
        ]
        outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, [o[1] for o in outs]
    assert all(o[1] == b"" for o in outs)
    store = open_settled_store(str(db_path))
    try:
        recs = store.list_recordings()
        assert sorted(r.name for r in recs) == [f"p{k}" for k in range(8)]
        for rec in recs:
            datas = [e.data for e in store.iter_events(rec.id)]
            assert datas == [b'{"type":"assistant","n":%d}' % i for i in range(lines)]
            assert rec.event_count == lines and rec.status == "ok"
    finally:
        store.close()


class ExclusiveLock:
    """Another connection holding ``BEGIN EXCLUSIVE`` on the database."""

    def __init__(self, db: Path) -> None:
        self.conn: sqlite3.Connection | None = sqlite3.connect(db, isolation_level=None)
        self.conn.execute("BEGIN EXCLUSIVE")  # type: ignore[union-attr]

    def release(self) -> None:
        if self.conn is not None:
            self.conn.execute("COMMIT")
            self.conn.close()
            self.conn = None


def _peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def test_locked_database_forwarding_continues_memory_bounded_all_lands_later(
    db_path: Path, tmp_path: Path
) -> None:
    open_settled_store(str(db_path)).close()
    total_mb = 120
    child = py_child(
        f"""
        import sys, time
        line = b'{{"type":"stream_event","pad":"' + b"y" * 8000 + b'"}}\\n'
        for i in range({total_mb} * 1024 * 1024 // len(line)):
            sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
        print("done", flush=True)
        time.sleep(3)
        """
    )
    lock = ExclusiveLock(db_path)
    argv = proxy_argv(db_path, *child)
    try:
        with spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE) as proc:
            assert proc.stdout is not None
            got = 0
            peak = 0
            deadline = time.monotonic() + 60
            fd = proc.stdout.fileno()
            # Getting all of it while the lock is held shows that forwarding
            # does not wait on the store.
            while time.monotonic() < deadline:
                if select.select([fd], [], [], 1)[0]:
                    chunk = os.read(fd, 1 << 20)
                    got += len(chunk)
                    peak = max(peak, _peak_rss_kib(proc.pid))
                    if chunk.endswith(b"done\n") or not chunk:
                        break
            lock.release()
            assert proc.wait(timeout=60) == 0
    finally:
        lock.release()
    size = len(b'{"type":"stream_event","pad":""}\n') + 8000
    lines = total_mb * 1024 * 1024 // size
    assert got == lines * size + len(b"done\n")
    # 120 MB went through while nothing could be stored: it waited in the
    # capture file, not in the proxy's memory (whose queue only fills, up to
    # 64 MiB, when the disk itself falls behind).
    assert 0 < peak < 110 * 1024
    rec, events = latest_events(db_path)
    assert len(events) == lines + 1
    assert {len(e.data) for e in events} == {size - 1, 4}
    assert rec.status == "ok"


def test_a_locked_database_does_not_hold_the_session_up(
    db_path: Path, tmp_path: Path
) -> None:
    settle(db_path)
    lock = ExclusiveLock(db_path)
    try:
        # The indexer would retry for ten minutes: a proxy that waited for it
        # would not return within the timeout.
        done = run(
            db_path,
            "sh",
            "-c",
            "printf 'a\\nb\\nc'; exit 3",
            env={**os.environ, "CLAUDETRACE_FLUSH_TIMEOUT": "600"},
            timeout=60,
        )
        assert done.returncode == 3 and done.stdout == b"a\nb\nc"
        assert b"Traceback" not in done.stderr and len(done.stderr.splitlines()) <= 1
        # Nothing could be stored yet; the indexer is still at it.
        assert indexer_pids(tmp_path)
        [capture] = capture_dir(db_path).glob("*" + cap.SUFFIX)
    finally:
        lock.release()
    rec, events = latest_events(db_path)  # waits for the indexer, now unblocked
    assert [(e.data, e.eol) for e in events] == [(b"a", True), (b"b", True), (b"c", False)]
    assert (rec.exit_code, rec.status) == (3, "error")
    assert not capture.exists()
    wait_until(lambda: not indexer_pids(tmp_path), "the indexer to exit")


def test_an_unwritable_database_location_still_forwards_and_records_later(
    tmp_path: Path, ct_env: Path
) -> None:
    # A regular file where the database's directory should be: neither the
    # database nor a capture directory beside it can be created (even as root).
    blocker = tmp_path / "dbdir"
    blocker.write_text("not a directory")
    db = blocker / "claudetrace.db"
    done = run(
        db, "cat", data=MIXED, env={**os.environ, "CLAUDETRACE_FLUSH_TIMEOUT": "0.5"}, timeout=60
    )
    assert done.returncode == 0 and done.stdout == MIXED
    err = done.stderr.decode()
    assert "Traceback" not in err and len(err.splitlines()) <= 1
    if err:
        assert err.startswith("claudetrace: ") and "kept in" in err
    # The capture went to the data directory; the indexer gives up and leaves it.
    url = cap.resolve_url(str(db))
    [capture] = cap.capture_files(url)
    assert capture.is_relative_to(ct_env)
    wait_until(lambda: not indexer_pids(tmp_path), "the indexer to give up")
    assert capture.exists()
    with pytest.raises(StoreError):
        open_settled_store(str(db))

    blocker.unlink()
    blocker.mkdir()
    rec, events = latest_events(db)
    assert by_direction(events, "in") == list(iter_lines(MIXED))
    assert by_direction(events, "out") == list(iter_lines(MIXED))
    assert rec.status == "ok"
    assert cap.capture_files(url) == [] and not capture.exists()


def test_a_damaged_capture_is_set_aside_by_the_next_command(db_path: Path) -> None:
    run(db_path, "true")
    folder = capture_dir(db_path)
    junk = folder / "01JUNK.capture"
    junk.write_bytes(b"\x00\x01 not a capture")
    listed = subprocess.run(
        [PY, "-m", "claudetrace", "sessions", "--json", "--db", str(db_path)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 1
    [warning] = listed.stderr.splitlines()
    assert "warning" in warning and "01JUNK.capture.damaged" in warning
    assert (folder / "01JUNK.capture.damaged").read_bytes() == b"\x00\x01 not a capture"
    again = subprocess.run(
        [PY, "-m", "claudetrace", "sessions", "--json", "--db", str(db_path)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert again.returncode == 0 and again.stderr == ""
    assert (folder / "01JUNK.capture.damaged").exists()


def test_secrets_in_argv_and_env_do_not_reach_the_database(db_path: Path) -> None:
    key = "sk-ant-api03-" + "Q" * 40
    token = "ghp_" + "Z" * 36
    env = {**os.environ, "ANTHROPIC_API_KEY": key, "MY_TOKEN": token, "LANG": f"C key={key}"}
    done = run(
        db_path, "sh", "-c", "exit 0", "--api-key", key, f"--token={token}", f"x{key}", env=env
    )
    assert done.returncode == 0
    settle(db_path)
    blob = db_path.read_bytes()
    wal = Path(f"{db_path}-wal")
    if wal.exists():
        blob += wal.read_bytes()
    assert key.encode() not in blob and token.encode() not in blob
    assert b"QQQQQQQQQQQQ" not in blob
    rec, _ = latest_events(db_path)
    assert "ANTHROPIC_API_KEY" in rec.env and "MY_TOKEN" in rec.env


def test_secrets_do_not_reach_the_capture_file_either(db_path: Path) -> None:
    key = "sk-ant-api03-" + "R" * 40
    env = {**os.environ, "ANTHROPIC_API_KEY": key}
    argv = proxy_argv(db_path, "sh", "-c", "echo ready; read x", "--api-key", key)
    with spawn(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        [capture] = capture_dir(db_path).glob("*" + cap.SUFFIX)
        header = capture.read_bytes().split(b"\n", 2)[1]
        proc.stdin.write(b"bye\n")
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    assert b"RRRRRRRRRRRR" not in header
    assert b"ANTHROPIC_API_KEY" in header and b"--api-key" in header


def test_output_and_exit_are_unaffected_when_stdout_reader_goes_away(db_path: Path) -> None:
    # The host closes its end early: the child still runs to completion and
    # everything it said is recorded.
    child = py_child(
        """
        import sys
        for i in range(2000):
            try:
                print(i, flush=True)
            except BrokenPipeError:
                sys.exit(0)
        """
    )
    with spawn(
        proxy_argv(db_path, *child), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None
        proc.stdout.readline()
        proc.stdout.close()
        assert proc.wait(timeout=30) == 0
    _rec, events = latest_events(db_path)
    assert [e.data for e in events] == [str(i).encode() for i in range(2000)]


# -- what the proxy's stdin and stdout are -------------------------------------------------
#
# Between pipes the bytes never enter Python (tee(2) into a scratch pipe, splice(2)
# into the capture file, splice on to the other side); a regular file, a file
# opened for appending or a terminal takes the ordinary read/write path instead.
# Either way: the same bytes out, the same lines stored.

LINES = b"".join(b'{"type":"stream_event","n":%d,"pad":"%s"}\n' % (i, b"x" * (i % 300))
                 for i in range(20_000))


def _stdin(kind: str, tmp_path: Path) -> object:
    if kind == "pipe":
        return subprocess.PIPE
    path = tmp_path / "input.ndjson"
    path.write_bytes(LINES)
    return open(path, "rb")  # closed by the test below


@pytest.mark.parametrize("stdin_kind", ["pipe", "file"])
@pytest.mark.parametrize("stdout_kind", ["pipe", "file", "append", "terminal"])
def test_any_stdin_and_stdout_forward_and_record_every_byte(
    db_path: Path, tmp_path: Path, stdin_kind: str, stdout_kind: str
) -> None:
    stdin = _stdin(stdin_kind, tmp_path)
    out_path = tmp_path / "output"
    terminal: tuple[int, int] | None = None
    if stdout_kind == "pipe":
        stdout: object = subprocess.PIPE
    elif stdout_kind == "terminal":
        import pty
        import tty

        terminal = pty.openpty()
        tty.setraw(terminal[1])  # bytes as they are: no newline translation
        stdout = terminal[1]
    else:
        out_path.write_bytes(b"kept\n" if stdout_kind == "append" else b"")
        stdout = open(out_path, "ab" if stdout_kind == "append" else "wb")  # noqa: SIM115
    received = bytearray()
    with spawn(proxy_argv(db_path, "cat"), stdin=stdin, stdout=stdout) as proc:
        if stdin_kind == "pipe":
            assert proc.stdin is not None
            threading.Thread(target=_feed_and_close, args=(proc.stdin,), daemon=True).start()
        if terminal is not None:
            os.close(terminal[1])
            while len(received) < len(LINES):
                ready, _, _ = select.select([terminal[0]], [], [], 60)
                assert ready, "no output on the terminal"
                received += os.read(terminal[0], 1 << 20)
        elif stdout_kind == "pipe":
            assert proc.stdout is not None
            received += proc.stdout.read()
        assert proc.wait(timeout=60) == 0
    for handle in (stdin, stdout):
        if hasattr(handle, "close"):
            handle.close()  # type: ignore[union-attr]
    if terminal is not None:
        os.close(terminal[0])
    elif stdout_kind != "pipe":
        received += out_path.read_bytes()
    expected = (b"kept\n" if stdout_kind == "append" else b"") + LINES
    assert bytes(received) == expected
    _rec, events = latest_events(db_path)
    assert by_direction(events, "in") == list(iter_lines(LINES))
    assert by_direction(events, "out") == list(iter_lines(LINES))


def _feed_and_close(pipe: object) -> None:
    pipe.write(LINES)  # type: ignore[attr-defined]
    pipe.close()  # type: ignore[attr-defined]


def test_a_non_blocking_stdout_is_waited_for_not_dropped(db_path: Path) -> None:
    # A host may hand us a pipe in non-blocking mode; when it is full the
    # proxy must wait for the host to read, not give the output up.
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    size = 4 * 1024 * 1024
    child = py_child(
        f"""
        import sys
        for i in range({size} // 64):
            sys.stdout.buffer.write(b"%063d\\n" % i)
        """
    )
    with spawn(proxy_argv(db_path, *child), stdin=subprocess.DEVNULL, stdout=write_end) as proc:
        os.close(write_end)
        time.sleep(1.0)  # the pipe fills up while we do not read
        received = bytearray()
        while chunk := os.read(read_end, 1 << 20):
            received += chunk
        assert proc.wait(timeout=60) == 0
    os.close(read_end)
    assert len(received) == size
    assert received.endswith(b"%063d\n" % (size // 64 - 1))
    _rec, events = latest_events(db_path)
    assert len(events) == size // 64
