"""Live telemetry: an :class:`~claudetrace.recording.EventSink` of a session's events.

Its events come from the telemetry worker (:mod:`.worker`), a process the
indexer starts beside itself, which follows the proxy's capture file too.  The
sink runs the same span builder, metrics and OTLP exporter as a backfill — so
the collector receives exactly what ``claudetrace otel`` would send, while the
proxy's forwarding threads never share a process, let alone a GIL, with
OpenTelemetry, nor the indexer its memory.

:func:`live_sink` returns ``None`` — without importing OpenTelemetry — when no
OTLP endpoint is configured, so telemetry off costs nothing.  A bad setting or a
collector that cannot be reached is one warning line, never recording data.
The proxy gives the CLI ``TRACEPARENT`` (computed from the recording id, as the
span ids are) so the CLI's own telemetry nests under our root span.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from ..errors import TelemetryError
from ..model.events import Event
from ..recording import EventSink, RecordingInfo
from .config import OtelSettings, child_env, resolve_settings
from .spans import SpanBuilder

#: Seconds the exporter may spend flushing spans and metrics at the end.
FLUSH_TIMEOUT_S: Final = 3.0


def warn(message: str, *, continues: bool = True) -> None:
    """One warning line on stderr (the proxy relays it while it runs)."""
    tail = "; the session continues without telemetry" if continues else ""
    # Once the proxy has gone, so has the pipe it relayed our stderr through.
    with contextlib.suppress(OSError, ValueError):
        print(f"claudetrace: warning: {message}{tail}", file=sys.stderr, flush=True)


#: The key of a recording's ``extra`` that says where its metrics went live.
LIVE_METRICS: Final = "live_metrics"


class LiveTelemetry:
    """The indexer's telemetry sink: span builder → OTLP exporter for one recording.

    :attr:`on_events` is the span builder's ``feed_many`` itself, not a method
    calling it: the indexer calls it for every chunk of lines.  Spans that end
    are queued for export.
    """

    on_events: Callable[[Iterable[Event]], None]

    def __init__(self, info: RecordingInfo, settings: OtelSettings,
                 *, flush_timeout: float = FLUSH_TIMEOUT_S,
                 environ: Mapping[str, str] = os.environ) -> None:
        from .export import Telemetry

        self.info = info
        self.settings = settings
        self._flush_timeout = flush_timeout
        #: What went wrong exporting the traces, kept with the recording by the
        #: indexer (a metrics endpoint that refuses is only said on stderr: the
        #: session's traces are what a trace backend shows of it).
        self.warnings: list[str] = []
        #: Facts kept in the recording's ``extra`` once the sink has closed:
        #: ``live_metrics``, where the session's metrics were delivered (so a
        #: backfill does not count them again).
        self.recording_extra: dict[str, object] = {}
        # The worker's stdout carries its warnings to the indexer: the console
        # exporters write where the proxy relays the session's stderr.
        self.exporter = Telemetry(settings, warn=self._warn, environ=environ, console=sys.stderr)
        self.builder = SpanBuilder(info, content=settings.content,
                                   on_end=self.exporter.span_ended)
        self.on_events = self.builder.feed_many

    def _warn(self, message: str, signal: str | None = None) -> None:
        if signal != "metrics":
            self.warnings.append(message)
        warn(message, continues=signal != "metrics")

    def child_env(self) -> dict[str, str]:
        """``TRACEPARENT`` of our root span, when traces are exported."""
        return child_env(self.info, self.settings)

    def on_close(self, info: RecordingInfo) -> None:
        """End every open span, then flush with a bounded timeout (longer if one
        export request may take longer)."""
        self.builder.close(info)
        self.exporter.shutdown(self._flush_timeout)
        metrics = self.exporter.deliveries.get("metrics")
        # Every OTLP metrics export succeeded, the last (at shutdown) among them.
        if metrics is not None and metrics.sent and metrics.ok:
            self.recording_extra[LIVE_METRICS] = metrics.where


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
    setting, or an exporter that cannot be set up, is one warning, never a
    failed session.
    """
    try:
        settings = resolve_settings(
            endpoint=endpoint, protocol=protocol, capture_content=capture_content, environ=environ
        )
    except TelemetryError as exc:
        warn(str(exc))
        return None
    if not settings.enabled:
        return None
    try:
        return LiveTelemetry(info, settings, environ=environ)
    except Exception as exc:  # a missing or broken SDK must not cost the session
        warn(f"cannot start OpenTelemetry export: {type(exc).__name__}: {exc}")
        return None
