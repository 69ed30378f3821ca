"""The proxy as a drop-in executable: `python -m claudetrace proxy --db DB -- CHILD`.

The children are small Python or sh scripts; the real CLI is driven by the
end-to-end tests elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from claudetrace.events import Event, iter_lines
from claudetrace.store import open_store

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
    store = open_store(str(db))
    try:
        rec = store.resolve("latest")
        return rec, list(store.iter_events(rec.id))
    finally:
        store.close()


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
            "SELECT direction, is_json, type, subtype, session_id FROM events ORDER BY seq"
        ).fetchall()
    assert sorted(rows) == sorted(
        [("err", 0, None, None, None), ("out", 1, "system", "init", "sess-1")]
    )


def test_a_line_arrives_at_once_not_when_a_buffer_fills(db_path: Path) -> None:
    child = py_child(
        """
        import sys, time
        sys.stdout.write('{"type":"ping"}\\n'); sys.stdout.flush()
        time.sleep(4)
        """
    )
    argv = proxy_argv(db_path, *child)
    with spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE) as proc:
        start = time.monotonic()
        assert proc.stdout is not None
        line = proc.stdout.readline()
        elapsed = time.monotonic() - start
    assert line == b'{"type":"ping"}\n'
    # Python start-up of proxy and child fits well inside this; a buffered
    # proxy would hold the line until the child exits after 4 s.
    assert elapsed < 3.0


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
    store = open_store(str(db_path))
    try:
        recs = store.list_recordings()
        assert [r.status for r in recs] == ["failed", "failed"]
        assert all(r.exit_code == 127 and r.error for r in recs)
    finally:
        store.close()


def test_64_mib_line_is_forwarded_and_stored_exactly(db_path: Path) -> None:
    size = 64 * 1024 * 1024
    line = (b'{"type":"big","pad":"' + b"x" * (size - 40) + b'"}').ljust(size, b" ")
    done = run(db_path, "cat", data=line + b"\n" + b"tail", timeout=120)
    assert done.returncode == 0
    assert len(done.stdout) == size + 5 and done.stdout == line + b"\ntail"
    del done
    with sqlite3.connect(db_path) as conn:
        rows = conn.execute(
            "SELECT direction, size, eol, is_json, type, data = ? FROM events ORDER BY seq", (line,)
        ).fetchall()
    assert sorted(rows) == sorted(
        [
            ("in", size, 1, 1, "big", 1),
            ("out", size, 1, 1, "big", 1),
            ("in", 4, 0, 0, None, 0),
            ("out", 4, 0, 0, None, 0),
        ]
    )


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


def test_sigkill_of_the_proxy_loses_at_most_half_a_second(db_path: Path) -> None:
    child = py_child(
        """
        import sys, time
        i = 0
        while True:
            sys.stdout.write(f'{{"type":"tick","n":{i}}}\\n'); sys.stdout.flush()
            i += 1
            time.sleep(0.005)
        """
    )
    argv = proxy_argv(db_path, *child)
    received: list[tuple[float, int]] = []
    with spawn(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True) as proc:
        assert proc.stdout is not None
        deadline = time.monotonic() + 2.5
        fd = proc.stdout.fileno()
        buf = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                buf += os.read(fd, 65536)
                *lines, buf = buf.split(b"\n")
                now = time.monotonic()
                received += [(now, int(line.split(b":")[-1].rstrip(b"}"))) for line in lines]
        proc.kill()
        killed_at = time.monotonic()
        proc.wait()
        os.killpg(proc.pid, signal.SIGKILL)  # the orphaned child
    must_have = max(n for t, n in received if t <= killed_at - 0.5)
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        stored = conn.execute("SELECT count(*) FROM events WHERE direction = 'out'").fetchone()[0]
    assert stored >= must_have + 1
    rec, events = latest_events(db_path)
    assert [e.data for e in events] == [b'{"type":"tick","n":%d}' % i for i in range(len(events))]
    assert rec.status == "incomplete"


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
    open_store(str(db_path)).close()
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
    store = open_store(str(db_path))
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
    open_store(str(db_path)).close()
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
    # 120 MB went through while nothing could be stored: the in-memory queue is
    # bounded (16 MiB) and the rest went to the spool file.  The proxy itself
    # (Python, SQLAlchemy, Alembic) is about 65 MB.
    assert 0 < peak < 110 * 1024
    rec, events = latest_events(db_path)
    assert len(events) == lines + 1
    assert {len(e.data) for e in events} == {size - 1, 4}
    assert rec.status == "ok"


def test_store_that_cannot_be_written_saves_an_importable_cassette(
    db_path: Path, ct_env: Path
) -> None:
    open_store(str(db_path)).close()
    lock = ExclusiveLock(db_path)
    try:
        done = run(
            db_path,
            "sh",
            "-c",
            "printf 'a\\nb\\nc'",
            env={**os.environ, "CLAUDETRACE_FLUSH_TIMEOUT": "1"},
            timeout=60,
        )
    finally:
        lock.release()
    assert done.returncode == 0 and done.stdout == b"a\nb\nc"
    err = done.stderr.decode()
    assert "3 of 3 events could not be stored" in err
    saved = list(ct_env.glob("unsaved/*.unsaved.cassette.ndjson"))
    assert len(saved) == 1 and str(saved[0]) in err
    imported = subprocess.run(
        [PY, "-m", "claudetrace", "import", str(saved[0]), "--db", str(db_path)],
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert imported.returncode == 0, imported.stderr
    store = open_store(str(db_path))
    try:
        rec = store.resolve(imported.stdout.decode().strip())
        assert [(e.data, e.eol) for e in store.iter_events(rec.id)] == [
            (b"a", True),
            (b"b", True),
            (b"c", False),
        ]
    finally:
        store.close()


def test_secrets_in_argv_and_env_do_not_reach_the_database(db_path: Path) -> None:
    key = "sk-ant-api03-" + "Q" * 40
    token = "ghp_" + "Z" * 36
    env = {**os.environ, "ANTHROPIC_API_KEY": key, "MY_TOKEN": token, "LANG": f"C key={key}"}
    done = run(
        db_path, "sh", "-c", "exit 0", "--api-key", key, f"--token={token}", f"x{key}", env=env
    )
    assert done.returncode == 0
    blob = db_path.read_bytes()
    wal = Path(f"{db_path}-wal")
    if wal.exists():
        blob += wal.read_bytes()
    assert key.encode() not in blob and token.encode() not in blob
    assert b"QQQQQQQQQQQQ" not in blob
    rec, _ = latest_events(db_path)
    assert "ANTHROPIC_API_KEY" in rec.env and "MY_TOKEN" in rec.env


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
