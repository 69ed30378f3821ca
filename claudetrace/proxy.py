"""The tee proxy: run the CLI as a child, forward every byte, record everything.

Three forwarding threads copy stdin → child stdin, child stdout → stdout and child
stderr → stderr with unbuffered ``os.read``/``os.write``, so a line the child
writes is on our stdout at once.  Each chunk is also handed to the
:class:`~claudetrace.recorder.Recorder`, which never blocks them.

Process semantics are those of a drop-in executable: stdin EOF closes the child's
stdin; SIGINT, SIGTERM and SIGHUP are forwarded to the child; the proxy exits when
the child exits (after draining its output) with the child's exit code, or
128+N when the child died of signal N; a child that cannot be started gives one
line on stderr and exit 127, and is recorded as a failed session.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from .errors import ChildStartError
from .events import Direction
from .recorder import Recorder, RecorderReport
from .recording import EventSink, RecordingInfo
from .redact import redact_argv, redact_env

READ_SIZE: Final = 256 * 1024
FORWARDED_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: After the child exits, how long to wait for its output pipes to reach EOF
#: (a grandchild may hold them open).
DRAIN_TIMEOUT_S: Final = 2.0


@dataclass
class ProxyOptions:
    """How to run one proxied session."""

    argv: list[str]
    db: str | None = None
    name: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    env: Mapping[str, str] | None = None
    sinks: list[EventSink] = field(default_factory=list)
    sink_factories: list[Callable[[RecordingInfo], EventSink | None]] = field(default_factory=list)
    flush_timeout: float = 5.0
    stdin_fd: int = 0
    stdout_fd: int = 1
    stderr_fd: int = 2


def _open_store_factory(db: str | None) -> Callable[[], object]:
    def open_it() -> object:
        from .store import open_store

        return open_store(db)

    return open_it


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _pump(
    src: int,
    dst: int | None,
    direction: Direction,
    recorder: Recorder,
    on_eof: Callable[[], None] | None = None,
) -> None:
    """Copy src → dst until EOF, recording every chunk.

    If dst goes away (EPIPE), keep reading and recording: what the other side
    said is still worth having.
    """
    while True:
        try:
            chunk = os.read(src, READ_SIZE)
        except InterruptedError:
            continue
        except OSError:
            break
        if not chunk:
            break
        if dst is not None:
            try:
                _write_all(dst, chunk)
            except OSError:
                dst = None
        recorder.feed(direction, chunk)
    if on_eof is not None:
        on_eof()


def exit_status(returncode: int) -> tuple[int, int | None]:
    """Shell-style exit status and the signal number, from a Popen returncode."""
    if returncode < 0:
        return 128 - returncode, -returncode
    return returncode, None


def run_proxy(options: ProxyOptions) -> tuple[int, RecorderReport]:
    """Run one proxied session; returns the exit status and the recorder's report."""
    environ = dict(os.environ if options.env is None else options.env)
    info = RecordingInfo.start(
        redact_argv(options.argv),
        name=options.name,
        tags=dict(options.tags),
        env=redact_env(environ),
    )
    sinks = list(options.sinks)
    for factory in options.sink_factories:
        sink = factory(info)
        if sink is not None:
            sinks.append(sink)
    for sink in sinks:
        environ.update(sink.child_env())

    from .store.engine import data_dir

    t0 = time.monotonic_ns()
    recorder = Recorder(
        info,
        _open_store_factory(options.db),
        sinks=sinks,
        t0_ns=t0,
        unsaved_dir=data_dir() / "unsaved",
    )
    recorder.start()
    try:
        child = subprocess.Popen(
            options.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            env=environ,
        )
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        info.exit_code = 127
        info.error = f"cannot start {options.argv[0]!r}: {reason}"
        info.ended_ns = time.time_ns()
        report_problems(recorder.close(timeout=options.flush_timeout))
        raise ChildStartError(info.error, argv=options.argv) from exc

    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    child_stdin = child.stdin.fileno()

    def close_child_stdin() -> None:
        with contextlib.suppress(OSError):
            child.stdin.close()  # type: ignore[union-attr]

    threads = [
        threading.Thread(
            target=_pump,
            args=(options.stdin_fd, child_stdin, "in", recorder, close_child_stdin),
            name="claudetrace-stdin",
            daemon=True,
        ),
        threading.Thread(
            target=_pump,
            args=(child.stdout.fileno(), options.stdout_fd, "out", recorder),
            name="claudetrace-stdout",
            daemon=True,
        ),
        threading.Thread(
            target=_pump,
            args=(child.stderr.fileno(), options.stderr_fd, "err", recorder),
            name="claudetrace-stderr",
            daemon=True,
        ),
    ]
    for thread in threads:
        thread.start()

    previous = _forward_signals(child)
    try:
        returncode = child.wait()
    finally:
        _restore_signals(previous)
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    for thread in threads[1:]:
        thread.join(max(0.0, deadline - time.monotonic()))
    status, signum = exit_status(returncode)
    info.exit_code = status
    info.signal = signum
    info.ended_ns = time.time_ns()
    # stdin may still be open (the host keeps it); its thread is a daemon.
    report = recorder.close(timeout=options.flush_timeout)
    for handle in (child.stdout, child.stderr):
        with contextlib.suppress(OSError):
            handle.close()
    return status, report


def _forward_signals(child: subprocess.Popen[bytes]) -> dict[int, object]:
    """Forward SIGINT/SIGTERM/SIGHUP to the child while it runs."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    previous: dict[int, object] = {}
    for signum in FORWARDED_SIGNALS:
        previous[signum] = signal.signal(signum, forward)
    return previous


def _restore_signals(previous: dict[int, object]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)  # type: ignore[arg-type]


def report_problems(report: RecorderReport) -> None:
    """Tell the user, on stderr, about anything that was not recorded."""
    for line in report.problems():
        print(f"claudetrace: {line}", file=sys.stderr)
