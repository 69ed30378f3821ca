"""The telemetry worker: live span building and OTLP export, out of the proxy's process.

Started by :class:`~claudetrace.telemetry.live.LiveTelemetry` as
``python -m claudetrace.telemetry.worker`` with its frames (see :mod:`.frames`)
on stdin.  It runs the same span builder, exporter and metrics as a backfill, so
the collector receives exactly what it would from the proxy itself, while the
proxy's forwarding threads never wait for the GIL behind OpenTelemetry.

It exits once the close frame has been handled and the export flushed (bounded
by :data:`~.live.FLUSH_TIMEOUT_S`), or at end of input: a proxy that died
without closing still gets its spans exported, ended as "recording ended
without the process exit".  Terminal signals (Ctrl-C, hang-up) are meant for
the proxy, which forwards them to the CLI and keeps recording; the worker
ignores them so that it can export what the proxy goes on to record.  It runs
in the idle scheduling class, on CPU time nobody else wants (see :func:`_yield_cpu`).

Exit status: 0 when done, :data:`~.live.GAVE_UP` when it stopped after printing its own
warning (so the proxy does not add another), anything else is a crash.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import TYPE_CHECKING, Final

from ..events import Event
from ..recording import RecordingInfo
from .config import OtelSettings
from .frames import Close, FrameDecoder, Start
from .live import FLUSH_TIMEOUT_S, GAVE_UP
from .spans import SpanBuilder

if TYPE_CHECKING:
    from .export import OtlpExporter

_READ_SIZE: Final = 1 << 20


def warn(message: str) -> None:
    """One warning line on stderr (relayed to the proxy's stderr)."""
    print(f"claudetrace: warning: {message}; the session continues without telemetry",
          file=sys.stderr, flush=True)


class ExportPipeline:
    """Span builder → OTLP exporter for one recording (what the proxy ran in-process before)."""

    def __init__(self, info: RecordingInfo, settings: OtelSettings,
                 exporter: OtlpExporter | None = None) -> None:
        if exporter is None:
            from .export import OtlpExporter

            exporter = OtlpExporter(settings, instance_id=info.id, warn=warn)
        self.info = info
        self.exporter = exporter
        self.builder = SpanBuilder(info, content=settings.content, on_end=exporter.span_ended)

    def feed(self, event: Event) -> None:
        """One event, in sequence order; spans that end are queued for export."""
        # The proxy's recorder does this before calling its sinks: without a
        # close frame, the root span still gets the CLI's version and mode.
        self.info.observe(event)
        self.builder.feed(event)

    def close(self, info: RecordingInfo | None, timeout_s: float) -> None:
        """End every open span, then flush with a bounded timeout."""
        self.builder.close(info or self.info)
        self.exporter.shutdown(timeout_s)


def serve(fd: int, timeout_s: float) -> int:
    """Read frames from ``fd`` until close or end of input; the exit status."""
    decoder = FrameDecoder()
    pipeline: ExportPipeline | None = None
    while True:
        try:
            chunk = os.read(fd, _READ_SIZE)
        except InterruptedError:
            continue
        for frame in decoder.feed(chunk):
            if isinstance(frame, Event):
                if pipeline is not None:
                    pipeline.feed(frame)
            elif isinstance(frame, Start):
                try:
                    pipeline = ExportPipeline(frame.info, frame.settings)
                except Exception as exc:  # a missing or broken SDK must not cost the session
                    warn(f"cannot start OpenTelemetry export: {type(exc).__name__}: {exc}")
                    return GAVE_UP
            elif isinstance(frame, Close):
                if pipeline is not None:
                    pipeline.close(frame.info, timeout_s)
                return 0
        if not chunk:
            if pipeline is not None:
                pipeline.close(None, timeout_s)
            return 0


#: ``$CLAUDETRACE_OTEL_WORKER_PRIORITY``: ``idle`` (default), ``low`` (nice 10) or ``normal``.
PRIORITY_ENV = "CLAUDETRACE_OTEL_WORKER_PRIORITY"


def _yield_cpu(priority: str | None = None) -> None:
    """Run on otherwise idle CPU time only (``SCHED_IDLE``; threads started later inherit it).

    On a machine with few cores the worker would otherwise take a core from the
    host, the proxy or the CLI just when one of them wakes up to pass a line on:
    with plain scheduling (even at nice 19) that added about a millisecond to
    the proxy's 99th-percentile round trip; an idle-class task is preempted at
    once.  The price: on a machine with no idle CPU at all, export falls behind
    (and may be cut short at exit, with a warning) — there, set
    ``$CLAUDETRACE_OTEL_WORKER_PRIORITY`` to ``low`` or ``normal``.
    """
    choice = (priority or os.environ.get(PRIORITY_ENV) or "idle").strip().lower()
    if choice == "normal":
        return
    if choice == "idle":
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            return
        except (AttributeError, OSError):  # not Linux: the next best thing
            pass
    with contextlib.suppress(OSError):
        os.nice(19 if choice == "idle" else 10)


def main() -> int:
    """Entry point of ``python -m claudetrace.telemetry.worker``."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    _yield_cpu()
    try:
        return serve(sys.stdin.fileno(), FLUSH_TIMEOUT_S)
    except Exception as exc:  # one line, not a traceback in the user's terminal
        warn(f"live telemetry stopped: {type(exc).__name__}: {exc}")
        return GAVE_UP


if __name__ == "__main__":
    status = main()
    sys.stderr.flush()
    # Not sys.exit: the SDK's exit hooks would flush again, without our time limit.
    os._exit(status)
