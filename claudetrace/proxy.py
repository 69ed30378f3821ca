"""The tee proxy: run the CLI as a child, forward every byte, record everything.

Three forwarding threads pass stdin → child stdin, child stdout → stdout and child
stderr → stderr chunk by chunk, unbuffered, so a line the child writes is on our
stdout at once; between pipes on Linux the bytes stay in the kernel
(``tee``/``splice``).  Each chunk goes to the
:class:`~claudetrace.capture.CaptureWriter`, which appends it to the session's
capture file before it is forwarded; an indexer process
(:mod:`claudetrace.indexer`) follows that file and stores the events.

Process semantics are those of a drop-in executable: stdin EOF closes the child's
stdin; SIGINT, SIGTERM and SIGHUP are forwarded to the child; the proxy exits when
the child exits (after draining its output and writing the capture file) with
the child's exit code, or 128+N when the child died of signal N; a child that
cannot be started gives one line on stderr and exit 127, and is recorded as a
failed session.  The proxy does not wait for the indexer: whatever it has not
stored yet is in the capture file, which every reader settles first.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import gc
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from . import capture as cap
from .config import DB_ENV
from .errors import ChildStartError
from .model.events import Direction
from .recording import RecordingInfo, start_time
from .redact import redact_argv, redact_env
from .spawn import FORWARDED_SIGNALS, Started, launch

READ_SIZE: Final = 1024 * 1024
#: Buffer size asked for the child's stdout pipe (Linux's default cap for users).
CHILD_PIPE_SIZE: Final = 1024 * 1024
#: After the child exits, how long its output pipes may stay open with nothing to
#: read before we stop waiting for EOF (a grandchild may hold them open).  Time
#: spent writing to a host that reads slowly does not count: that output is
#: forwarded and recorded however long it takes.
DRAIN_TIMEOUT_S: Final = 2.0
#: GIL switch interval in the proxy process (see run_proxy).
SWITCH_INTERVAL_S: Final = 0.0002


@dataclass
class ProxyOptions:
    """How to run one proxied session."""

    argv: list[str]
    db: str | None = None
    name: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    env: Mapping[str, str] | None = None
    #: Live telemetry flags (``endpoint``, ``protocol``, ``capture_content``); the
    #: ``OTEL_*`` variables apply as well.
    otel: dict[str, Any] | None = None
    stdin_fd: int = 0
    stdout_fd: int = 1
    stderr_fd: int = 2


@dataclass
class ProxyReport:
    """What the user must hear about at exit."""

    capture: cap.CaptureReport | None = None
    capture_path: Path | None = None
    problems_seen: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        lines = list(self.problems_seen)
        if self.capture is not None:
            lines.extend(self.capture.problems())
        return lines


class _Pump(threading.Thread):
    """Copies src → dst until EOF, recording every chunk.

    Where the kernel allows it (Linux, src a pipe) the bytes never enter
    Python: ``tee(2)`` duplicates each chunk from src into a scratch pipe,
    the capture writer splices it from there into the capture file, and only
    then ``splice(2)`` moves it on from src to dst, so recording still comes
    before forwarding.  Otherwise, or once dst refuses splicing, chunks are
    read into Python and written.

    If dst goes away (EPIPE), it keeps reading and recording: what the other
    side said is still worth having.  ``waiting_since`` is when the current
    wait for input started (None while writing), so the proxy can tell a pipe
    held open by a grandchild from a host that is slow to read.
    """

    def __init__(
        self,
        src: int,
        dst: int | None,
        direction: Direction,
        writer: cap.CaptureWriter | None,
        on_eof: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(name=f"claudetrace-{direction}", daemon=True)
        self.src, self.dst, self.direction = src, dst, direction
        self.writer, self.on_eof = writer, on_eof
        self.waiting_since: float | None = None

    def run(self) -> None:
        tee = _tee_call()
        if tee is None or self.writer is None or not self._run_spliced(tee, self.writer):
            self._run_copying()
        if self.on_eof is not None:
            self.on_eof()

    def _run_spliced(self, tee: Callable[[int, int, int, int], int],
                     writer: cap.CaptureWriter) -> bool:
        """Forward in the kernel; True at the end of src, False when the rest must be copied."""
        scratch_r, scratch_w = os.pipe()
        with contextlib.suppress(OSError):  # as big as src, so one tee takes all there is
            fcntl.fcntl(scratch_w, fcntl.F_SETPIPE_SZ, fcntl.fcntl(self.src, fcntl.F_GETPIPE_SZ))
        try:
            while True:
                self.waiting_since = time.monotonic()
                size = tee(self.src, scratch_w, READ_SIZE, 0)
                if size < 0:
                    error = _errno()
                    if error == errno.EINTR:
                        continue
                    if error == errno.EAGAIN:
                        select.select([self.src], [], [])
                        continue
                    # EINVAL: src is no pipe, or was never one: read it instead.
                    # Any other error ends the stream, as a failed read does.
                    return error != errno.EINVAL
                self.waiting_since = None
                if size == 0:
                    return True
                writer.feed_pipe(self.direction, scratch_r, size)
                if not self._splice_on(size):
                    return False
        finally:
            os.close(scratch_r)
            os.close(scratch_w)

    def _splice_on(self, size: int) -> bool:
        """Move the ``size`` recorded bytes from src to dst; False to copy from now on."""
        moved = 0
        while self.dst is not None and moved < size:
            try:
                moved += os.splice(self.src, self.dst, size - moved)
            except BlockingIOError:
                select.select([], [self.dst], [])
            except OSError as exc:
                rest = cap.read_exactly(self.src, size - moved)
                if exc.errno == errno.EINVAL:
                    # dst takes no splicing (a terminal, a file opened for
                    # appending): forward the ordinary way, from now on.
                    self._forward(rest)
                else:  # EPIPE and the like: dst has gone
                    self.dst = None
                return False
        if self.dst is None:  # nobody to forward to: consume what was recorded
            cap.read_exactly(self.src, size - moved)
            return False
        return True

    def _run_copying(self) -> None:
        """Read each chunk into Python, record it, write it on."""
        while True:
            self.waiting_since = time.monotonic()
            try:
                chunk = os.read(self.src, READ_SIZE)
            except InterruptedError:
                continue
            except BlockingIOError:
                select.select([self.src], [], [])
                continue
            except OSError:
                break
            self.waiting_since = None
            if not chunk:
                break
            # Record before forwarding: the other side cannot answer a line it has
            # not seen yet, so an answer is never recorded ahead of its request
            # (feed() is one writev into the page cache: a few µs).
            if self.writer is not None:
                self.writer.feed(self.direction, chunk)
            self._forward(chunk)

    def _forward(self, chunk: bytes) -> None:
        if self.dst is not None:
            try:
                cap.write_all(self.dst, chunk)
            except OSError:
                self.dst = None

    def idle_since(self, start: float) -> float:
        """Seconds this pump has waited for input since ``start`` (0 while forwarding)."""
        since = self.waiting_since
        return 0.0 if since is None else time.monotonic() - max(since, start)


def _errno() -> int:
    import ctypes

    return ctypes.get_errno()


@functools.cache
def _tee_call() -> Callable[[int, int, int, int], int] | None:
    """libc's ``tee(2)``, where the system has it and ``os.splice`` as well (Linux)."""
    if not hasattr(os, "splice"):
        return None
    import ctypes

    try:
        tee = ctypes.CDLL(None, use_errno=True).tee
    except (OSError, AttributeError):
        return None
    tee.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint)
    tee.restype = ctypes.c_ssize_t
    return tee


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


def run_proxy(
    options: ProxyOptions,
    started: Started | None = None,
    recording_id: str | None = None,
) -> tuple[int, ProxyReport]:
    """Run one proxied session; returns the exit status and what went wrong recording it.

    ``started``: the child, already launched (:func:`claudetrace.spawn.launch`) by a
    caller that starts it before importing this module, with ``recording_id`` when
    the recording's id had to exist first (live traces put the recording's trace
    id in the child's environment, :func:`claudetrace.telemetry.context.child_env`).
    Without ``started``, the child is launched here.
    """
    environ = dict(os.environ if options.env is None else options.env)
    if started is None:
        from .ids import new_recording_id
        from .telemetry.context import child_env

        recording_id = new_recording_id()
        extra = child_env(recording_id, environ, options.otel)
        started = launch(options.argv, {**environ, **extra})
    info = _describe(options, environ, recording_id, started.wall_ns)
    otel = _telemetry(options.otel, environ, options.stderr_fd)
    # A forwarding thread woken by a read must get the GIL back quickly while
    # another one runs: hand it over every 0.2 ms instead of Python's default 5 ms.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    report = ProxyReport()
    child, forwarder = started.child, started.forwarder
    if child is None:
        error = started.error or "cannot start the command"
        writer = _open_capture(info, options, started.t0_ns, report)
        if writer is not None:
            _start_indexer(writer, options, otel)
        _finish_recording(writer, report, {"exit_code": 127, "error": error,
                                           "ended_ns": time.time_ns()})
        forwarder.restore()
        from .display import visible
        for line in report.problems():
            print(f"claudetrace: {visible(line)}", file=sys.stderr)
        raise ChildStartError(error, argv=options.argv)

    # A bigger pipe for the child's stdout, the heavy direction (the CLI's
    # stream): under a burst each tee and splice moves up to 1 MiB instead of
    # 64 KiB.  Only this one: enlarged pipes count against the user's pipe quota
    # (fs.pipe-user-pages-soft, 64 MiB by default), past which Linux gives
    # every new pipe of that user two pages, so concurrent sessions must not
    # use it up.  The host's pipes are not ours to change.  (Refused past the
    # quota: then the default size does.)
    with contextlib.suppress(OSError, AttributeError):
        fcntl.fcntl(child.stdout, fcntl.F_SETPIPE_SZ, CHILD_PIPE_SIZE)
    writer = _open_capture(info, options, started.t0_ns, report)
    stdin_closed = threading.Event()

    def close_child_stdin() -> None:
        stdin_closed.set()
        with contextlib.suppress(OSError):
            os.close(child.stdin)

    # Forwarding starts as soon as the capture file is there; the indexer, which
    # only reads that file, is started behind it.
    threads = [
        _Pump(options.stdin_fd, child.stdin, "in", writer, close_child_stdin),
        _Pump(child.stdout, options.stdout_fd, "out", writer),
        _Pump(child.stderr, options.stderr_fd, "err", writer),
    ]
    for thread in threads:
        _start_helper(thread)
    if writer is not None:
        _start_indexer(writer, options, otel, child.pid)
    # The modules loaded by now are many long-lived objects; freezing them keeps
    # full garbage collections from walking them all and stalling forwarding.
    gc.freeze()

    returncode = child.wait()
    _drain(threads[1:])
    status, signum = exit_status(returncode)
    # stdin may still be open (the host keeps it); its thread is a daemon.
    # The handlers stay until the capture file is complete: a late Ctrl-C must
    # not turn the child's exit status into ours or cut the recording short.
    _finish_recording(writer, report, {"exit_code": status, "signal": signum,
                                       "ended_ns": time.time_ns()})
    forwarder.restore()
    for fd in (child.stdout, child.stderr):
        with contextlib.suppress(OSError):
            os.close(fd)
    if not threads[0].is_alive() and not stdin_closed.is_set():
        # Its pump is done with it (the host went away); one still reading
        # keeps it, lest the number be reused under it.
        with contextlib.suppress(OSError):
            os.close(child.stdin)
    return status, report


def _describe(options: ProxyOptions, environ: Mapping[str, str],
              recording_id: str | None, started_ns: int) -> RecordingInfo:
    """The recording's metadata (argv and environment with secrets redacted).

    ``started_ns`` is when the child was started, not now: the modules loaded
    since took a good part of a second on a cold start, and the lines' times
    count from the spawn.
    """
    return RecordingInfo.start(
        redact_argv(options.argv),
        id=recording_id,
        started_ns=started_ns,
        name=options.name,
        tags=dict(options.tags),
        env=redact_env(dict(environ)),
    )


def _telemetry(
    otel: dict[str, Any] | None, environ: Mapping[str, str], stderr_fd: int,
) -> dict[str, Any] | None:
    """The indexer's telemetry flags; None when telemetry is off, so the indexer
    never looks at it.

    A bad setting is reported here, at once: the indexer may only get to it
    after a short session has ended and nobody relays its stderr any more.
    """
    if not otel and not any(k.startswith("OTEL_") for k in environ):
        return None
    from .errors import TelemetryError
    from .telemetry.config import resolve_settings

    try:
        settings = resolve_settings(environ=environ, **(otel or {}))
    except TelemetryError as exc:
        _say(f"warning: {exc}; the session continues without telemetry", stderr_fd)
        return None
    return dict(otel or {}) if settings.enabled else None


def _open_capture(
    info: RecordingInfo, options: ProxyOptions, t0: int, report: ProxyReport,
) -> cap.CaptureWriter | None:
    """Open the capture file (None: cannot record)."""
    url = cap.resolve_url(options.db)
    try:
        writer = cap.CaptureWriter.create(url, info, t0_ns=t0)
    except OSError as exc:
        _say(f"cannot record this session: cannot write a capture file ({exc.strerror or exc})",
             options.stderr_fd)
        report.problems_seen.append("the session was forwarded but not recorded")
        return None
    report.capture_path = writer.path
    missing = cap.missing_db_folder(url)
    if missing is not None:
        _say(f"the database's folder {missing} does not exist; the recording is kept in "
             f"{writer.path} meanwhile", options.stderr_fd)
    problem = cap.database_problem(url)
    if problem is not None:
        _say(f"{problem}; the session is forwarded and kept in {writer.path} until a "
             "database can take it", options.stderr_fd)
    return writer


def _start_indexer(
    writer: cap.CaptureWriter, options: ProxyOptions, otel: dict[str, Any] | None,
    child_pid: int | None = None,
) -> None:
    """Start the indexer process that stores the capture file behind us.

    ``child_pid``: our child, not reaped yet, so that its start time read here is
    its own; the indexer ends it should we die first (SIGKILL cannot be passed on).
    """
    import subprocess

    started = None if child_pid is None else start_time(child_pid)
    child = None if child_pid is None or started is None else (child_pid, started)

    try:
        lock_fd = cap.open_lock(writer.path)
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
    except OSError as exc:
        _say(f"cannot lock {cap.lock_path(writer.path)} ({exc.strerror or exc})",
             options.stderr_fd)
        return
    wake_r, wake_w = os.pipe()
    from .indexer import indexer_command

    env = dict(os.environ)
    env[DB_ENV] = cap.resolve_url(options.db)
    try:
        indexer = subprocess.Popen(
            indexer_command(writer.path, lock_fd, wake_r, otel, child),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(lock_fd, wake_r),
            start_new_session=True,
            env=env,
        )
    except OSError as exc:
        _say(f"cannot start the indexer ({exc.strerror or exc}); the recording is kept in "
             f"{writer.path} and stored by the next claudetrace command", options.stderr_fd)
        os.close(wake_w)
    else:
        writer.notify_to(wake_w)
        assert indexer.stderr is not None
        _start_helper(threading.Thread(
            target=_relay, args=(indexer.stderr.fileno(), options.stderr_fd),
            name="claudetrace-indexer-stderr", daemon=True,
        ))
    finally:
        os.close(lock_fd)
        os.close(wake_r)


def _finish_recording(
    writer: cap.CaptureWriter | None, report: ProxyReport, end: dict[str, Any]
) -> None:
    if writer is not None:
        report.capture = writer.close(end)


def _relay(src: int, dst: int) -> None:
    """Pass the indexer's messages on to our stderr while we run."""
    while True:
        try:
            chunk = os.read(src, 65536)
        except OSError:
            return
        if not chunk:
            return
        with contextlib.suppress(OSError):
            cap.write_all(dst, chunk)


def _say(message: str, fd: int) -> None:
    with contextlib.suppress(OSError):
        cap.write_all(fd, f"claudetrace: {message}\n".encode())


def _start_helper(thread: threading.Thread) -> None:
    """Start a helper thread that never takes the forwarded signals.

    The kernel hands a process's signal to any thread that does not block it.
    Python runs handlers only in the main thread, which waits for the child in
    ``waitpid``: a signal taken by a pump thread set the handler's flag without
    interrupting that wait, so it was forwarded only when the child exited on
    its own (one run in a few dozen of the signal test).  The thread starts with
    them blocked in the main thread, so it inherits the mask from its first
    instruction (blocked by the thread itself, one could land on it while it
    started); each goes to the main thread, whose wait it interrupts.
    """
    try:
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED_SIGNALS)
    except (AttributeError, OSError, ValueError):  # not on every system
        thread.start()
        return
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def report_problems(report: ProxyReport) -> None:
    """Tell the user, on stderr, about anything that was not recorded."""
    from .display import visible
    for line in report.problems():
        print(f"claudetrace: {visible(line)}", file=sys.stderr)
