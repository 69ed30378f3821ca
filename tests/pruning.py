"""What the prune tests share on SQLite and PostgreSQL: old recordings to delete, and
a proxy that records while they are deleted."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

from claudetrace.model.events import Event
from claudetrace.recording import RecordingInfo
from claudetrace.store import Store

DAY_NS = 86_400 * 1_000_000_000


def old_recording(store: Store, *, days: float, events: int, name: str | None = None,
                  tags: dict[str, str] | None = None, ended: bool = True) -> str:
    """A recording started ``days`` ago holding ``events`` lines (a tool use every
    tenth), ended unless ``ended`` is False (then it is still running: this
    process is its proxy and its heartbeat is now)."""
    info = RecordingInfo.start(["claude", "-p"], started_ns=time.time_ns() - int(days * DAY_NS),
                               name=name, tags=tags or {})
    store.create_recording(info)
    lines = []
    for seq in range(events):
        if seq % 10 == 0:
            line = {"type": "assistant", "message": {"content": [
                {"type": "tool_use", "id": f"toolu_{seq}", "name": "Bash", "input": {}}]}}
        else:
            line = {"type": "stream_event", "event": {"delta": {"text": "word " * 40}}}
        lines.append(Event(seq, "out", seq * 1000, json.dumps(line).encode()))
    for start in range(0, events, 5000):
        store.write_batch(info.id, lines[start:start + 5000])
    if ended:
        store.update_recording(info.id, ended_ns=info.started_ns + events * 1000, exit_code=0,
                               event_count=events, byte_count=sum(len(e.data) for e in lines))
    else:
        store.update_recording(info.id, last_seen_ns=time.time_ns(), event_count=events)
    return info.id


def prune_while_a_proxy_records(
        db: str, lines: int = 300) -> tuple[subprocess.CompletedProcess[str],
                                            list[dict[str, object]]]:
    """Run ``prune --older-than 30d --yes`` while a proxy records ``lines`` lines
    (sent a few at a time over about a second); returns the prune's run and
    ``sessions --json`` afterwards."""
    proxy = subprocess.Popen(
        [sys.executable, "-m", "claudetrace", "proxy", "--db", db, "--name", "live", "--", "cat"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert proxy.stdin is not None

    def feed() -> None:
        assert proxy.stdin is not None
        for n in range(lines):
            proxy.stdin.write(b'{"type":"user","n":%d}\n' % n)
            proxy.stdin.flush()
            if n % 10 == 0:
                time.sleep(0.03)
        proxy.stdin.close()

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        pruned = subprocess.run(
            [sys.executable, "-m", "claudetrace", "prune", "--db", db, "--older-than", "30d",
             "--yes"], capture_output=True, text=True, timeout=120)
    finally:
        feeder.join()
        proxy.wait(timeout=60)
    listed = subprocess.run(
        [sys.executable, "-m", "claudetrace", "sessions", "--db", db, "--json", "-n", "0"],
        capture_output=True, text=True, timeout=60, check=True)
    return pruned, json.loads(listed.stdout)
