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
import gc
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
#: After the child exits, how long its output pipes may stay open with nothing to
#: read before we stop waiting for EOF (a grandchild may hold them open).  Time
#: spent writing to a host that reads slowly does not count: that output is
#: forwarded and recorded however long it takes.
DRAIN_TIMEOUT_S: Final = 2.0
#: GIL switch interval in the proxy process (see run_proxy).
SWITCH_INTERVAL_S: Final = 0.0002
#: How long, at exit, the recorder may keep trying to store what is left before
#: it saves it to an unsaved-events cassette instead ($CLAUDETRACE_FLUSH_TIMEOUT).
FLUSH_TIMEOUT_S: Final = 5.0


def flush_timeout_from_env() -> float:
    """``$CLAUDETRACE_FLUSH_TIMEOUT`` in seconds, else :data:`FLUSH_TIMEOUT_S`."""
    value = os.environ.get("CLAUDETRACE_FLUSH_TIMEOUT", "").strip()
    try:
        seconds = float(value) if value else FLUSH_TIMEOUT_S
    except ValueError:
        return FLUSH_TIMEOUT_S
    return seconds if seconds >= 0 else FLUSH_TIMEOUT_S


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
    flush_timeout: float = field(default_factory=flush_timeout_from_env)
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


class _Pump(threading.Thread):
    """Copies src → dst until EOF, recording every chunk.

    If dst goes away (EPIPE), it keeps reading and recording: what the other
    side said is still worth having.  ``waiting_since`` is when the current
    ``read`` started (None while writing), so the proxy can tell a pipe held
    open by a grandchild from a host that is slow to read.
    """

    def __init__(
        self,
        src: int,
        dst: int | None,
        direction: Direction,
        recorder: Recorder,
        on_eof: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(name=f"claudetrace-{direction}", daemon=True)
        self.src, self.dst, self.direction = src, dst, direction
        self.recorder, self.on_eof = recorder, on_eof
        self.waiting_since: float | None = None

    def run(self) -> None:
        dst = self.dst
        while True:
            self.waiting_since = time.monotonic()
            try:
                chunk = os.read(self.src, READ_SIZE)
            except InterruptedError:
                continue
            except OSError:
                break
            self.waiting_since = None
            if not chunk:
                break
            # Record before forwarding: the other side cannot answer a line it has
            # not seen yet, so an answer is never recorded ahead of its request
            # (feed() only appends to a queue, so this costs the line nothing).
            self.recorder.feed(self.direction, chunk)
            if dst is not None:
                try:
                    _write_all(dst, chunk)
                except OSError:
                    dst = None
        if self.on_eof is not None:
            self.on_eof()

    def idle_since(self, start: float) -> float:
        """Seconds this pump has waited for input since ``start`` (0 while forwarding)."""
        since = self.waiting_since
        return 0.0 if since is None else time.monotonic() - max(since, start)


def _drain(pumps: list[_Pump]) -> None:
    """Wait for the output pumps to reach EOF, or to sit idle too long."""
    start = time.monotonic()
    for pump in pumps:
        while pump.is_alive() and pump.idle_since(start) < DRAIN_TIMEOUT_S:
            pump.join(0.05)


def exit_status(returncode: int) -> tuple[int, int | None]:
    """Shell-style exit status and the signal number, from a Popen returncode."""
    if returncode < 0:
        return 128 - returncode, -returncode
    return returncode, None


def run_proxy(options: ProxyOptions) -> tuple[int, RecorderReport]:
    """Run one proxied session; returns the exit status and the recorder's report."""
    # A forwarding thread woken by a read must get the GIL back quickly while the
    # recorder thread is busy parsing and storing: hand it over every 0.2 ms
    # instead of Python's default 5 ms.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
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
    # The modules loaded by now (SQLAlchemy, OpenTelemetry…) are hundreds of
    # thousands of long-lived objects; freezing them keeps full garbage
    # collections from walking them all and stalling forwarding for milliseconds.
    gc.freeze()
    recorder = Recorder(
        info,
        _open_store_factory(options.db),
        sinks=sinks,
        t0_ns=t0,
        unsaved_dir=data_dir() / "unsaved",
    )
    recorder.start()
    # Installed before the child starts: a signal that arrives while it starts
    # is delivered to it once it runs, instead of killing the proxy.
    forwarder = _SignalForwarder()
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
        forwarder.restore()
        raise ChildStartError(info.error, argv=options.argv) from exc

    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    child_stdin = child.stdin.fileno()

    def close_child_stdin() -> None:
        with contextlib.suppress(OSError):
            child.stdin.close()  # type: ignore[union-attr]

    threads = [
        _Pump(options.stdin_fd, child_stdin, "in", recorder, close_child_stdin),
        _Pump(child.stdout.fileno(), options.stdout_fd, "out", recorder),
        _Pump(child.stderr.fileno(), options.stderr_fd, "err", recorder),
    ]
    for thread in threads:
        thread.start()

    forwarder.attach(child)
    returncode = child.wait()
    _drain(threads[1:])
    status, signum = exit_status(returncode)
    info.exit_code = status
    info.signal = signum
    info.ended_ns = time.time_ns()
    # stdin may still be open (the host keeps it); its thread is a daemon.
    # The handlers stay until the recording is flushed: a late Ctrl-C must not
    # turn the child's exit status into ours or cut the flush short.
    report = recorder.close(timeout=options.flush_timeout)
    forwarder.restore()
    for handle in (child.stdout, child.stderr):
        with contextlib.suppress(OSError):
            handle.close()
    return status, report


class _SignalForwarder:
    """Forwards SIGINT/SIGTERM/SIGHUP to the child (from the main thread only).

    Signals that arrive before the child exists are held and sent as soon as it
    is attached; once it has been reaped they are ignored.
    """

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None
        self.early: list[int] = []
        self.previous: dict[int, object] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in FORWARDED_SIGNALS:
                self.previous[signum] = signal.signal(signum, self._handle)

    def _handle(self, signum: int, _frame: object) -> None:
        if self.child is None:
            self.early.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            self.child.send_signal(signum)  # a no-op once the child is reaped

    def attach(self, child: subprocess.Popen[bytes]) -> None:
        """The child now runs: deliver what arrived while it was starting."""
        self.child = child
        early, self.early = self.early, []
        for signum in early:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signum)

    def restore(self) -> None:
        """Put the previous handlers back."""
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        self.previous = {}


def report_problems(report: RecorderReport) -> None:
    """Tell the user, on stderr, about anything that was not recorded."""
    for line in report.problems():
        print(f"claudetrace: {line}", file=sys.stderr)
