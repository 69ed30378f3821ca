"""``claudetrace demo``: a newcomer's first, fully offline, recording.

The package ships one small real session (recorded from Claude Code 2.1.330
through the proxy, with an SDK MCP tool call; ``demo_data/``).  The demo runs the
real ``claudetrace proxy`` with ``claudetrace replay <that session>`` as its
child, and plays the host: it sends the recorded host lines, each once the CLI
lines it answered have arrived.  So the proxy records a genuine session into the
database, which ``sessions``, ``show`` and ``ui`` can then display.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .cassette import Cassette, read_cassette
from .config import DB_ENV
from .errors import ClaudeTraceError

#: The session the demo replays (a real recording, sanitised).
DEMO_CASSETTE: Final = Path(__file__).parent / "demo_data" / "session.cassette.ndjson"
DEMO_NAME: Final = "demo"
#: The demo's replay is as fast as the host; this only stops a broken run.
TIMEOUT_S: Final = 30.0


class DemoError(ClaudeTraceError):
    """The demo session could not be run or recorded."""


@dataclass(frozen=True)
class HostStep:
    """Send ``data`` once ``after`` lines have arrived on the CLI's stdout."""

    after: int
    data: bytes
    eol: bool = True


@dataclass(frozen=True)
class DemoResult:
    """What the demo recorded."""

    recording_id: str
    exit_code: int
    sent: int
    received: int
    events: int


def host_steps(cassette: Cassette) -> list[HostStep]:
    """The recorded host lines, each with the stdout lines it must wait for.

    A host line waits for every CLI line recorded before it and, when it answers
    a CLI request, for that request too: the recorder's two threads may stamp an
    answer a hair before the question.
    """
    out_index: dict[str, int] = {}
    seen = 0
    for event in cassette.events:
        if event.direction != "out":
            continue
        seen += 1
        fields = event.fields
        if fields.type == "control_request" and fields.request_id:
            out_index.setdefault(fields.request_id, seen)
    steps: list[HostStep] = []
    received = 0
    for event in cassette.events:
        if event.direction == "out":
            received += 1
        elif event.direction == "in":
            after = received
            fields = event.fields
            if fields.type == "control_response" and fields.request_id in out_index:
                after = max(after, out_index[fields.request_id])
            steps.append(HostStep(after, event.data, event.eol))
    return steps


def demo_command(cassette_path: Path, cli_args: Sequence[str], *, tag: str) -> list[str]:
    """``claudetrace proxy … -- claudetrace replay CASSETTE -- ARGS``; the database
    goes in ``$CLAUDETRACE_DB`` (:func:`run_demo`), not argv, where other users
    could read a password."""
    from .replay import replay_command
    from .shim import self_command

    proxy = [*self_command(), "proxy", "--name", DEMO_NAME, "--tag", f"demo={tag}"]
    return [*proxy, "--", *replay_command(cassette_path), *cli_args]


class _Reader(threading.Thread):
    """Counts the lines the proxy forwards from the CLI, so steps can wait on them."""

    def __init__(self, stream: object) -> None:
        super().__init__(name="claudetrace-demo-reader", daemon=True)
        self.stream = stream
        self.lines = 0
        self.cond = threading.Condition()
        self.done = False

    def run(self) -> None:
        for _line in self.stream:  # type: ignore[attr-defined]
            with self.cond:
                self.lines += 1
                self.cond.notify_all()
        with self.cond:
            self.done = True
            self.cond.notify_all()

    def wait_for(self, count: int, deadline: float) -> bool:
        with self.cond:
            while self.lines < count and not self.done:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.cond.wait(remaining)
            return self.lines >= count


def run_demo(
    db: str | None = None, *, cassette_path: Path = DEMO_CASSETTE, timeout: float = TIMEOUT_S
) -> DemoResult:
    """Record the shipped session through the real proxy; returns the new recording."""
    from .indexer import open_settled_store

    cassette = read_cassette(cassette_path)
    steps = host_steps(cassette)
    tag = os.urandom(6).hex()
    argv = demo_command(cassette_path, cassette.argv[1:], tag=tag)
    env = {**os.environ, DB_ENV: db} if db else None
    started = time.time_ns()
    deadline = time.monotonic() + timeout
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
    except OSError as exc:
        raise DemoError(f"cannot start the proxy: {exc.strerror or exc}") from exc
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    reader = _Reader(proc.stdout)
    reader.start()
    errors: list[bytes] = []
    drain = threading.Thread(
        target=lambda: errors.append(proc.stderr.read()),  # type: ignore[union-attr]
        daemon=True,
    )
    drain.start()
    sent = 0
    try:
        for step in steps:
            if not reader.wait_for(step.after, deadline):
                raise DemoError(
                    f"the replayed CLI stopped answering after {reader.lines} lines "
                    f"(host line {sent + 1} of {len(steps)} never became due)"
                )
            proc.stdin.write(step.data + (b"\n" if step.eol else b""))
            proc.stdin.flush()
            sent += 1
        proc.stdin.close()
        code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except (BrokenPipeError, subprocess.TimeoutExpired, DemoError) as exc:
        proc.kill()
        proc.wait()
        if isinstance(exc, DemoError):
            raise
        raise DemoError(f"the demo session did not finish: {exc}") from exc
    finally:
        reader.join(timeout=2)
        drain.join(timeout=2)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
    if code != 0:
        detail = b"".join(errors).decode("utf-8", "replace").strip().splitlines()
        raise DemoError(
            f"the demo session exited with status {code}" + (f": {detail[-1]}" if detail else "")
        )
    store = open_settled_store(db)
    try:
        mine = [
            r
            for r in store.list_recordings(since_ns=started - 1_000_000_000)
            if (r.tags or {}).get("demo") == tag
        ]
        if not mine:
            raise DemoError(f"the proxy ran but no recording landed in {store.url}")
        recording = mine[0]
        events = store.count_events(recording.id)
    finally:
        store.close()
    return DemoResult(recording.id, code, sent, reader.lines, events)


def next_steps(recording_id: str, db: str | None = None) -> list[str]:
    """The commands to run next, with ``--db`` when the demo was given one (its
    password hidden: no command prints one)."""
    from .store.engine import hide_password

    opt = f" --db {hide_password(db)}" if db else ""
    return [
        f"claudetrace sessions{opt}",
        f"claudetrace show {recording_id}{opt}",
        f"claudetrace ui{opt}",
    ]


__all__ = [
    "DEMO_CASSETTE",
    "DemoError",
    "DemoResult",
    "HostStep",
    "host_steps",
    "next_steps",
    "run_demo",
]
