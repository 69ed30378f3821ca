"""``claudetrace usage blocks --live`` on a pseudo-terminal: the table is drawn,
redrawn with what was stored meanwhile, and Ctrl-C ends it cleanly."""

from __future__ import annotations

import datetime as dt
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from claudetrace.formats.imports import import_file
from claudetrace.store import open_store
from claudetrace.testing.transcripts import Call, Transcript, write_transcript

SONNET = "claude-sonnet-4-5-20250929"
HAIKU = "claude-haiku-4-5-20251001"


def _read_until(leader: int, seen: bytearray, needle: bytes, proc: subprocess.Popen[bytes],
                timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while needle not in seen:
        assert proc.poll() is None, f"ended: {bytes(seen[-2000:])!r}"
        assert time.monotonic() < deadline, f"no {needle!r} in {bytes(seen[-2000:])!r}"
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            seen += os.read(leader, 1 << 16)


def test_blocks_live_redraws_what_is_stored_meanwhile(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    now = dt.datetime.now(dt.timezone.utc)
    store = open_store(f"sqlite:///{db}")
    try:
        first = Transcript("33333333-0000-4000-8000-000000000001", "-home-dev-live", [
            Call(SONNET, now - dt.timedelta(minutes=30), 1000, 200),
            Call(SONNET, now - dt.timedelta(minutes=20), 1000, 200)], cwd="/home/dev/live")
        import_file(store, write_transcript(tmp_path / "projects", first))
    finally:
        store.close()
    env = {k: v for k, v in os.environ.items() if k not in ("CLAUDETRACE_DB",)}
    env.update(PYTHONPATH=os.pathsep.join(sys.path), TERM="xterm-256color", COLUMNS="160",
               CLAUDETRACE_PROGRESS="0")
    leader, follower = os.openpty()
    seen = bytearray()
    try:
        with subprocess.Popen(
            [sys.executable, "-m", "claudetrace", "usage", "blocks", "--live", "--interval",
             "0.5", "--db", str(db)],
            stdin=follower, stdout=follower, stderr=follower, env=env,
        ) as proc:
            os.close(follower)
            follower = -1
            try:
                _read_until(leader, seen, b"ACTIVE", proc)
                assert b"haiku" not in seen
                store = open_store(f"sqlite:///{db}")
                try:  # a call stored while the table is shown
                    later = Transcript("33333333-0000-4000-8000-000000000002", "-home-dev-live", [
                        Call(HAIKU, now - dt.timedelta(minutes=10), 5, 5)], cwd="/home/dev/live")
                    import_file(store, write_transcript(tmp_path / "projects", later))
                finally:
                    store.close()
                _read_until(leader, seen, b"haiku", proc)
                proc.send_signal(signal.SIGINT)
                assert proc.wait(timeout=30) == 0
            finally:
                if proc.poll() is None:
                    proc.kill()
            while select.select([leader], [], [], 0.2)[0]:
                try:
                    seen += os.read(leader, 1 << 16)
                except OSError:
                    break
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert b"Traceback" not in seen
    assert b"burn rate" in seen  # the active block's rate, on the terminal
