"""OpenTelemetry traces and metrics for recordings (live from the proxy, or backfilled).

- :mod:`.spans` — the pure span builder (events → :class:`~.records.SpanRecord`)
- :mod:`.spantree` — the builder's bookkeeping of open spans, turns and lanes
- :mod:`.conventions` — attribute and metric names (semantic conventions v1.44.0)
- :mod:`.metrics` — metric measurements derived from finished spans
- :mod:`.openinference` — OpenInference attributes beside the GenAI ones (Phoenix)
- :mod:`.config` — which exporters each signal gets, from flags and ``OTEL_*``
- :mod:`.export` — the OpenTelemetry SDK pipelines (imported only when exporting)
- :mod:`.live` — the :class:`~claudetrace.recording.EventSink` the indexer process
  feeds while a proxied session runs (live export)
- :mod:`.backfill` — exporting stored recordings

Nothing here imports OpenTelemetry at import time except :mod:`.export`.
"""

from __future__ import annotations

# Not typing.TYPE_CHECKING: the proxy imports .context before it starts the CLI,
# and typing alone costs more than the rest of that (type checkers know this too).
TYPE_CHECKING = False
if TYPE_CHECKING:  # the real names for type checkers; loaded lazily at run time
    from typing import Any

    from .content import ContentPolicy
    from .context import span_id_for, trace_id_for, traceparent
    from .records import SpanEvent, SpanRecord, render_tree
    from .spans import SpanBuilder, build_spans

#: Public names and the module that defines them: loaded on first use, so the
#: proxy can read the settings (``.config``) without loading the span builder.
_EXPORTS = {
    "ContentPolicy": ".content",
    "SpanBuilder": ".spans",
    "build_spans": ".spans",
    "SpanEvent": ".records",
    "SpanRecord": ".records",
    "render_tree": ".records",
    "span_id_for": ".context",
    "trace_id_for": ".context",
    "traceparent": ".context",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(module, __name__), name)


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
