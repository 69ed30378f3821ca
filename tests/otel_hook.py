"""A user's ``CLAUDETRACE_OTEL_HOOK`` for the tests: it adds an in-memory span exporter."""

from __future__ import annotations

from typing import Any

#: (the in-memory exporter, how many metric readers there were) per call.
HOOKED: list[tuple[Any, int]] = []


def hook(*, tracer_provider: Any, metric_readers: list[Any]) -> None:
    """``CLAUDETRACE_OTEL_HOOK=tests.otel_hook:hook``."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    tracer_provider.add_span_processor(SimpleSpanProcessor(memory))
    HOOKED.append((memory, len(metric_readers)))
