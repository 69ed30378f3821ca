"""OpenTelemetry traces and metrics for recordings (live from the proxy, or backfilled).

- :mod:`.spans` — the pure span builder (events → :class:`~.records.SpanRecord`)
- :mod:`.spantree` — the builder's bookkeeping of open spans, turns and lanes
- :mod:`.conventions` — attribute and metric names (semantic conventions v1.44.0)
- :mod:`.metrics` — metric measurements derived from finished spans
- :mod:`.config` — OTLP settings from flags and the standard ``OTEL_*`` variables
- :mod:`.export` — the OpenTelemetry SDK side (imported only when exporting)
- :mod:`.live` — the :class:`~claudetrace.recording.EventSink` the indexer process
  feeds while a proxied session runs (live export)
- :mod:`.backfill` — exporting stored recordings

Nothing here imports OpenTelemetry at import time except :mod:`.export`.
"""

from __future__ import annotations

from .content import ContentPolicy
from .records import SpanEvent, SpanRecord, render_tree, span_id_for, trace_id_for, traceparent
from .spans import SpanBuilder, build_spans

__all__ = [
    "ContentPolicy",
    "SpanBuilder",
    "SpanEvent",
    "SpanRecord",
    "build_spans",
    "render_tree",
    "span_id_for",
    "trace_id_for",
    "traceparent",
]
