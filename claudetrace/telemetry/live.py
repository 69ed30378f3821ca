"""Live telemetry for the proxy: an :class:`~claudetrace.recording.EventSink`.

:func:`live_sink` returns ``None`` — without importing OpenTelemetry — when no
OTLP endpoint is configured, so a proxy with telemetry off costs nothing extra.
Otherwise the sink builds spans as events arrive and hands each finished span to
a batch exporter; the child gets ``TRACEPARENT`` so the CLI's own telemetry nests
under our root span.  An unreachable collector costs one warning on stderr.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..errors import TelemetryError
from ..events import Event
from ..recording import EventSink, RecordingInfo
from .config import OtelSettings, resolve_settings
from .records import traceparent
from .spans import SpanBuilder

if TYPE_CHECKING:
    from .export import OtlpExporter

#: Seconds ``on_close`` may spend flushing spans and metrics.
FLUSH_TIMEOUT_S = 3.0


def _warn(message: str) -> None:
    print(f"claudetrace: warning: {message}; the session continues without telemetry",
          file=sys.stderr, flush=True)


class LiveTelemetry:
    """Builds a recording's spans as it runs and exports them over OTLP."""

    def __init__(self, info: RecordingInfo, settings: OtelSettings,
                 exporter: OtlpExporter | None = None) -> None:
        if exporter is None:
            from .export import OtlpExporter

            exporter = OtlpExporter(settings, instance_id=info.id, warn=_warn)
        self.info = info
        self.settings = settings
        self.exporter = exporter
        self.builder = SpanBuilder(info, content=settings.content, on_end=exporter.span_ended)

    def child_env(self) -> dict[str, str]:
        """``TRACEPARENT`` of our root span, when traces are exported."""
        if not self.exporter.traces:
            return {}
        return {"TRACEPARENT": traceparent(self.info.id)}

    def on_event(self, event: Event) -> None:
        """Advance the span builder (spans that end are queued for export)."""
        self.builder.feed(event)

    def on_close(self, info: RecordingInfo) -> None:
        """End every open span, then flush with a bounded timeout."""
        self.builder.close(info)
        self.exporter.shutdown(FLUSH_TIMEOUT_S)


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
    setting is one warning, never a failed session.
    """
    try:
        settings = resolve_settings(
            endpoint=endpoint, protocol=protocol, capture_content=capture_content, environ=environ
        )
    except TelemetryError as exc:
        print(f"claudetrace: warning: {exc}; telemetry is off", file=sys.stderr, flush=True)
        return None
    if not settings.enabled:
        return None
    return LiveTelemetry(info, settings)
