"""Live telemetry for the proxy: an :class:`~claudetrace.recording.EventSink`.

:func:`live_sink` returns ``None`` — without importing OpenTelemetry — when no
OTLP endpoint is configured, so a proxy with telemetry off costs nothing extra.
Otherwise the sink starts one worker process (:mod:`.worker`) and streams it the
recording's events as compact frames (:mod:`.frames`); span building, metrics
and OTLP export all run there, so they never compete with the proxy's
forwarding threads for its GIL.  The child gets ``TRACEPARENT`` (computed here
from the recording id, as the worker's span ids are) so the CLI's own telemetry
nests under our root span.

Events go to a bounded in-memory backlog that a writer thread pipes to the
worker.  When a burst fills the backlog (:data:`BACKLOG_LIMIT_BYTES`), the
recorder thread waits for the worker as long as it keeps reading, so telemetry
stays complete; that delays storing, never forwarding (the proxy spools).  A
worker that reads nothing for :data:`STALL_S` with the backlog full, dies or
cannot be started costs the rest of the session's telemetry and one warning
line — never recording data.  On close
the sink waits a bounded time for the worker to export, and relays the worker's
own warnings (an unreachable collector…) to stderr.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from ..errors import TelemetryError
from ..events import Event
from ..recording import EventSink, RecordingInfo
from .config import OtelSettings, resolve_settings
from .frames import encode_close, encode_start, event_head
from .records import traceparent

#: Seconds the worker may spend flushing spans and metrics at the end.
FLUSH_TIMEOUT_S: Final = 3.0
#: Beyond the flush, how long the worker may take to finish its last events and exit.
EXIT_GRACE_S: Final = 2.0
#: Bytes of events waiting for the worker past which the recorder thread waits
#: for it (see :data:`STALL_S`).
BACKLOG_LIMIT_BYTES: Final = 64 * 1024 * 1024
#: The writer waits this long after an event arrives, so a burst goes in one write.
COALESCE_S: Final = 0.005
#: A full backlog waits this long for the worker to read anything before
#: telemetry is given up for the session.
STALL_S: Final = 5.0
#: Pipe buffer asked for (Linux caps it at /proc/sys/fs/pipe-max-size, 1 MiB by default).
PIPE_SIZE: Final = 1024 * 1024
#: Worker exit status meaning "stopped after warning on stderr itself" (see .worker).
GAVE_UP: Final = 3
_IOV_MAX: Final = 1024


def _warn(message: str) -> None:
    print(f"claudetrace: warning: {message}", file=sys.stderr, flush=True)


def worker_command() -> list[str]:
    """How to start the worker: this interpreter, running :mod:`.worker`."""
    return [sys.executable, "-m", "claudetrace.telemetry.worker"]


def worker_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The worker's environment: ours (``OTEL_*`` included), importing this claudetrace."""
    env = dict(environ)
    root = str(Path(__file__).resolve().parent.parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def shortfall_message(events: int, delivered: int, returncode: int | None,
                      reason: str | None) -> str | None:
    """The one warning about telemetry that did not make it, or ``None`` when all did.

    ``delivered`` events reached the worker's pipe; ``reason`` is why this sink
    stopped feeding it (``None`` if it did not).  A worker that died may not have
    exported all it received, hence "at least".
    """
    if reason is None and returncode in (0, GAVE_UP) and (delivered == events or
                                                           returncode == GAVE_UP):
        return None  # all exported, or the worker explained itself
    lost = events - delivered
    if reason is None:
        if returncode is None:
            reason = "the telemetry worker did not exit"
        elif returncode < 0:
            reason = f"the telemetry worker was killed by signal {-returncode}"
        elif returncode != 0:
            reason = f"the telemetry worker exited with status {returncode}"
        else:
            reason = "the telemetry worker stopped early"
    if returncode == 0:
        count = f"{lost} of {events} events were not exported"
    elif lost:
        count = f"at least {lost} of {events} events were not exported"
    else:
        count = "spans it had not exported yet are lost"
    return f"live telemetry incomplete: {reason}; {count}"


class LiveTelemetry:
    """The proxy's telemetry sink: feeds a worker process that builds and exports spans.

    ``command`` replaces :func:`worker_command` (tests); raises ``OSError`` when
    the worker cannot be started.
    """

    def __init__(
        self,
        info: RecordingInfo,
        settings: OtelSettings,
        *,
        command: list[str] | None = None,
        backlog_limit: int = BACKLOG_LIMIT_BYTES,
        flush_timeout: float = FLUSH_TIMEOUT_S,
        stall_timeout: float = STALL_S,
    ) -> None:
        self.info = info
        self.settings = settings
        #: Events handed to the sink, and those written whole to the worker's pipe.
        self.events = 0
        self.delivered = 0
        self._limit = backlog_limit
        self._flush_timeout = flush_timeout
        self._stall_timeout = stall_timeout
        self._lock = threading.Lock()
        #: Signalled when the writer has finished a batch (backlog space freed).
        self._space = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._frames: list[bytes] = [encode_start(info, settings)]
        self._frame_events = 0
        self._queued = len(self._frames[0])  # bytes in _frames
        self._inflight = 0  # bytes the writer has taken and not finished writing
        self._written = 0  # bytes written so far (close watches it for progress)
        self._done = 0  # buffers of the current batch written whole
        self._closing = False
        #: False once nothing more is sent to the worker (dropped, or its pipe is gone).
        self._feeding = True
        self._pipe_gone = False
        #: Why this sink stopped feeding the worker (``None`` while it feeds it).
        self.stopped: str | None = None
        self._proc = subprocess.Popen(
            command or worker_command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=worker_env(),
        )
        assert self._proc.stdin is not None and self._proc.stderr is not None
        self._fd = self._proc.stdin.fileno()
        with contextlib.suppress(OSError, AttributeError):
            import fcntl

            fcntl.fcntl(self._fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        self._writer = threading.Thread(
            target=self._write_loop, name="claudetrace-otel-pipe", daemon=True
        )
        self._relay = threading.Thread(
            target=self._relay_stderr, name="claudetrace-otel-stderr", daemon=True
        )
        self._wake.set()
        self._writer.start()
        self._relay.start()

    @property
    def pid(self) -> int:
        """The worker's process id."""
        return self._proc.pid

    def child_env(self) -> dict[str, str]:
        """``TRACEPARENT`` of our root span, when traces are exported."""
        if not self.settings.traces_endpoint:
            return {}
        return {"TRACEPARENT": traceparent(self.info.id)}

    # -- the recorder thread -----------------------------------------------------------

    def on_event(self, event: Event) -> None:
        """Queue the event for the worker.

        When the backlog is full the recorder thread waits for the worker, as
        long as the worker keeps reading (a burst delays storing, never
        forwarding: the proxy spools); a worker that reads nothing for
        :data:`STALL_S` costs the rest of the session's telemetry.
        """
        self.events += 1
        if not self._feeding:
            return
        head = event_head(event)
        size = len(head) + len(event.data)
        with self._lock:
            progress = self._written
            while self._feeding and self._queued + self._inflight + size > self._limit:
                if self._queued and not self._wake.is_set():
                    self._wake.set()
                self._space.wait(self._stall_timeout)
                if self._queued + self._inflight + size <= self._limit:
                    break
                if self._written == progress:
                    self._stop_locked(
                        f"the telemetry worker fell {self._limit / 2**20:g} MiB behind "
                        f"and read nothing for {self._stall_timeout:g} s"
                    )
                    return
                progress = self._written
            if not self._feeding:
                return
            self._frames.append(head)
            self._frames.append(event.data)
            self._queued += size
            self._frame_events += 1
            if not self._wake.is_set():
                self._wake.set()

    def on_close(self, info: RecordingInfo) -> None:
        """Send the close info, wait (bounded) for the worker to export, report once."""
        frame = encode_close(info)
        with self._lock:
            self._closing = True
            if not self._pipe_gone:
                # Even after a drop: the worker ends its spans with the real exit.
                self._frames.append(frame)
                self._queued += len(frame)
            self._wake.set()
        # Deliver the backlog for as long as the worker keeps reading it.
        progress = -1
        while self._writer.is_alive() and self._written != progress:
            progress = self._written
            self._writer.join(self._flush_timeout)
        proc = self._proc
        if self._writer.is_alive():
            self._stop(f"the telemetry worker stopped reading for {self._flush_timeout:g} s")
            proc.kill()
        else:
            try:
                proc.wait(self._flush_timeout + EXIT_GRACE_S)
            except subprocess.TimeoutExpired:
                self._stop("the telemetry worker did not finish exporting within "
                           f"{self._flush_timeout + EXIT_GRACE_S:g} s")
                proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(1.0)
        self._writer.join(1.0)
        self._relay.join(1.0)
        with contextlib.suppress(OSError):
            proc.stderr.close()  # type: ignore[union-attr]
        message = shortfall_message(self.events, self.delivered, proc.returncode, self.stopped)
        if message:
            _warn(message)

    # -- dropping ------------------------------------------------------------------------

    def _stop(self, reason: str) -> None:
        with self._lock:
            self._stop_locked(reason)

    def _stop_locked(self, reason: str) -> None:
        # What is already queued still goes: the worker then has an unbroken
        # prefix of the stream, and the backlog is bounded all the same.
        if self.stopped is None and self._feeding:
            self.stopped = reason
        self._feeding = False

    # -- the writer and relay threads ------------------------------------------------------

    def _write_loop(self) -> None:
        start = 1  # the first batch begins with the start frame
        try:
            while True:
                self._wake.wait()
                if not self._closing:
                    time.sleep(COALESCE_S)  # let a burst gather into one write
                with self._lock:
                    frames, self._frames = self._frames, []
                    events, self._frame_events = self._frame_events, 0
                    size, self._queued = self._queued, 0
                    self._inflight = size
                    last = self._closing
                    self._wake.clear()
                self._done = 0
                try:
                    if frames:
                        self._write(frames)
                finally:
                    # Events are (head, data) pairs after the start frame; a
                    # close frame, last, never completes a pair.
                    done = min(events, max(0, self._done - start) // 2)
                    with self._lock:
                        self._inflight = 0
                        self.delivered += done
                        self._space.notify_all()
                if frames:
                    start = 0
                if last:
                    return
        except OSError:
            # The worker is gone (EPIPE): nothing more can reach it.
            with self._lock:
                self._pipe_gone = True
                self._feeding = False
                self._inflight = 0
                self._frames = []
                self._queued = 0
                self._frame_events = 0
                self._space.notify_all()
        finally:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()  # type: ignore[union-attr]

    def _write(self, frames: list[bytes]) -> None:
        """Write every buffer, in order, ``_IOV_MAX`` at a time (the GIL is released)."""
        buffers: list[bytes | memoryview] = list(frames)
        i = 0
        while i < len(buffers):
            batch = buffers[i : i + _IOV_MAX]
            written = os.writev(self._fd, batch)
            self._written += written
            for buf in batch:
                if written >= len(buf):
                    written -= len(buf)
                    i += 1
                    self._done = i
                else:
                    buffers[i] = memoryview(buf)[written:]
                    break

    def _relay_stderr(self) -> None:
        """Copy the worker's stderr (its warnings) to ours as it comes."""
        fd = self._proc.stderr.fileno()  # type: ignore[union-attr]
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(chunk.decode("utf-8", errors="replace"))
                sys.stderr.flush()


def live_sink(
    info: RecordingInfo,
    *,
    endpoint: str | None = None,
    protocol: str | None = None,
    capture_content: bool | None = None,
    environ: Mapping[str, str] = os.environ,
) -> EventSink | None:
    """The live telemetry sink for a recording, or ``None`` when telemetry is off.

    Configured by the flags given here (``None`` = not given) and the standard
    ``OTEL_*`` variables (see :mod:`claudetrace.telemetry.config`).  A bad
    setting, or a worker that cannot be started, is one warning, never a failed
    session.
    """
    try:
        settings = resolve_settings(
            endpoint=endpoint, protocol=protocol, capture_content=capture_content, environ=environ
        )
    except TelemetryError as exc:
        _warn(f"{exc}; telemetry is off")
        return None
    if not settings.enabled:
        return None
    try:
        return LiveTelemetry(info, settings)
    except OSError as exc:
        _warn(f"cannot start the telemetry worker ({exc}); telemetry is off")
        return None
