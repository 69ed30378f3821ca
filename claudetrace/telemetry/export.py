"""The OpenTelemetry SDK side: span records and measurements out over OTLP.

Span records go straight to a ``BatchSpanProcessor`` (no tracer: the spans
already happened) and are encoded on its thread by
:class:`~.otlp_wire.TraceRequestEncoder`, which writes the same OTLP message the
SDK would write for the equivalent ``ReadableSpan`` (:func:`to_readable_span`)
at a small fraction of the cost.  Measurements go to SDK instruments read by a
``PeriodicExportingMetricReader``.  Both export on background threads, so
callers never wait on the network; :meth:`OtlpExporter.shutdown` flushes with
a bounded timeout.  A failing collector is reported once through ``warn``,
and the SDK's own retry logging is kept off the user's terminal.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event as OtelEvent
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from .. import __version__
from . import conventions as c
from .config import OtelSettings
from .metrics import INSTRUMENTS, measurements
from .otlp_wire import TraceRequestEncoder
from .records import SpanRecord

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}
_STATUS = {"unset": StatusCode.UNSET, "ok": StatusCode.OK, "error": StatusCode.ERROR}
#: Seconds one export request may take, retries included (the SDK default is 10).
EXPORT_TIMEOUT_S = 5.0
_SDK_LOGGERS = ("opentelemetry.exporter.otlp", "opentelemetry.sdk._shared_internal",
                "opentelemetry.sdk.metrics")


class _LastMessage(logging.Handler):
    """Keeps the SDK's last warning, to explain a failure in one line."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.last = record.getMessage()
        except Exception:  # a malformed log record must not break export
            self.last = str(record.msg)


_sdk_log = _LastMessage()


def _capture_sdk_logs() -> None:
    # The exporters log every retry; we report a failure once, ourselves.
    for name in _SDK_LOGGERS:
        logger = logging.getLogger(name)
        if _sdk_log not in logger.handlers:
            logger.addHandler(_sdk_log)
            logger.propagate = False


def _context(trace_id: int, span_id: int) -> SpanContext:
    return SpanContext(trace_id, span_id, is_remote=False, trace_flags=_SAMPLED)


def to_readable_span(
    record: SpanRecord, resource: Resource, scope: InstrumentationScope
) -> ReadableSpan:
    """An SDK span with the record's ids, times, attributes, events and status."""
    context = _context(record.trace_id, record.span_id)
    parent = None if record.parent_id is None else _context(record.trace_id, record.parent_id)
    events = [OtelEvent(e.name, e.attributes, e.time_ns) for e in record.events]
    if record.status == "error":
        status = Status(StatusCode.ERROR, record.status_message or None)
    else:
        status = Status(_STATUS[record.status])
    return ReadableSpan(
        name=record.name,
        context=context,
        parent=parent,
        resource=resource,
        attributes=record.attributes,
        events=events,
        kind=_KINDS[record.kind],
        status=status,
        start_time=record.start_ns,
        end_time=record.end_ns if record.end_ns is not None else record.start_ns,
        instrumentation_scope=scope,
    )


class _Queued:
    """A span record waiting in the SDK's batch processor.

    The processor reads nothing but the sampled flag of what it queues; the
    exporters below encode the records themselves, on the processor's thread.
    """

    __slots__ = ("record",)
    context = _context(1, 1)

    def __init__(self, record: SpanRecord) -> None:
        self.record = record


def _record_exporter(
    protocol: str, encoder: TraceRequestEncoder, to_sdk: Callable[[SpanRecord], ReadableSpan]
) -> type:
    """The span exporter class for ``protocol``, taking :class:`_Queued` records.

    It keeps the SDK exporter's transport, retries, headers and TLS settings and
    replaces only the encoding.  Should an SDK version lack the hook used for
    HTTP, it falls back to the SDK's own encoding of :func:`to_readable_span` spans.
    """
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.sdk.trace.export import SpanExportResult

    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        class GrpcRecordExporter(OTLPSpanExporter):  # type: ignore[misc,unused-ignore]
            def _translate_data(self, data: Any) -> ExportTraceServiceRequest:
                request: ExportTraceServiceRequest = ExportTraceServiceRequest.FromString(
                    encoder.encode(q.record for q in data)
                )
                return request

        return GrpcRecordExporter

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )

    class HttpRecordExporter(HttpSpanExporter):  # type: ignore[misc,unused-ignore]
        def export(self, spans: Any) -> SpanExportResult:
            client: Any = getattr(self, "_client", None)
            if not hasattr(client, "export"):
                fallback: SpanExportResult = super().export([to_sdk(q.record) for q in spans])
                return fallback
            if self._shutdown:
                return SpanExportResult.FAILURE
            result = client.export(encoder.encode(q.record for q in spans))
            return SpanExportResult.SUCCESS if result.success else SpanExportResult.FAILURE

    return HttpRecordExporter


def _make_exporters(
    settings: OtelSettings,
    encoder: TraceRequestEncoder,
    to_sdk: Callable[[SpanRecord], ReadableSpan],
) -> tuple[Any, Any]:
    """OTLP span and metric exporters for the settings (``None`` when off)."""
    timeout = EXPORT_TIMEOUT_S
    spans: Any = None
    metrics: Any = None
    if settings.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        if settings.traces_endpoint:
            insecure = settings.traces_endpoint.startswith("http://") or None
            spans = _record_exporter("grpc", encoder, to_sdk)(
                settings.traces_endpoint, insecure=insecure, timeout=timeout
            )
        if settings.metrics_endpoint:
            insecure = settings.metrics_endpoint.startswith("http://") or None
            metrics = OTLPMetricExporter(
                settings.metrics_endpoint, insecure=insecure, timeout=timeout
            )
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
            OTLPMetricExporter as HttpMetricExporter,
        )

        if settings.traces_endpoint:
            exporter_class = _record_exporter("http", encoder, to_sdk)
            spans = exporter_class(settings.traces_endpoint, timeout=timeout)
        if settings.metrics_endpoint:
            metrics = HttpMetricExporter(settings.metrics_endpoint, timeout=timeout)
    return spans, metrics


class OtlpExporter:
    """Exports span records and their metrics for one process (live or backfill).

    ``instance_id`` becomes the metrics' ``service.instance.id`` so cumulative
    series from concurrent proxies never collide.  ``warn`` gets one line the
    first time an export fails.
    """

    def __init__(
        self,
        settings: OtelSettings,
        *,
        instance_id: str | None = None,
        warn: Callable[[str], None] | None = None,
        metric_interval_ms: int | None = None,
    ) -> None:
        _capture_sdk_logs()
        self.settings = settings
        self.failures = 0
        self.exported_spans = 0
        self.first_error: str | None = None
        self._warn = warn
        self._lock = threading.Lock()
        base = {"telemetry.sdk.name": "opentelemetry", "telemetry.sdk.language": "python",
                "service.version": __version__, **settings.resource}
        self.resource = Resource(base, c.SCHEMA_URL)
        self.scope = InstrumentationScope(c.SCOPE_NAME, __version__, c.SCHEMA_URL)
        span_exporter, metric_exporter = _make_exporters(
            settings, self.trace_encoder(),
            lambda record: to_readable_span(record, self.resource, self.scope),
        )
        self._processor: BatchSpanProcessor | None = None
        if span_exporter is not None:
            self._watch(span_exporter, settings.traces_endpoint or "")
            self._processor = BatchSpanProcessor(span_exporter, max_queue_size=65536)
        self._meter_provider: MeterProvider | None = None
        self._instruments: dict[str, Any] = {}
        if metric_exporter is not None:
            self._watch(metric_exporter, settings.metrics_endpoint or "")
            reader = PeriodicExportingMetricReader(
                metric_exporter, export_interval_millis=metric_interval_ms
            )
            resource = Resource(
                {**base, "service.instance.id": instance_id or str(uuid.uuid4())}, c.SCHEMA_URL
            )
            self._meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
            meter = self._meter_provider.get_meter(c.SCOPE_NAME, __version__, c.SCHEMA_URL)
            for inst in INSTRUMENTS:
                if inst.kind == "counter":
                    self._instruments[inst.name] = meter.create_counter(
                        inst.name, unit=inst.unit, description=inst.description
                    )
                else:
                    self._instruments[inst.name] = meter.create_histogram(
                        inst.name, unit=inst.unit, description=inst.description,
                        explicit_bucket_boundaries_advisory=inst.buckets,
                    )

    def trace_encoder(self) -> TraceRequestEncoder:
        """An encoder of this exporter's spans (its resource and scope) as OTLP requests."""
        return TraceRequestEncoder(
            dict(self.resource.attributes), self.resource.schema_url,
            self.scope.name, self.scope.version, self.scope.schema_url or "",
        )

    def _watch(self, exporter: Any, endpoint: str) -> None:
        """Count failed exports of ``exporter`` and warn about the first one."""
        original = exporter.export

        def export(*args: Any, **kwargs: Any) -> Any:
            try:
                result = original(*args, **kwargs)
            except Exception as exc:
                self._failed(endpoint, f"{type(exc).__name__}: {exc}")
                raise
            if getattr(result, "name", "") == "FAILURE":
                self._failed(endpoint, _sdk_log.last or "export failed")
            return result

        exporter.export = export

    def _failed(self, endpoint: str, why: str) -> None:
        with self._lock:
            self.failures += 1
            first = self.first_error is None
            if first:
                self.first_error = f"OTLP export to {endpoint} failed: {why}"
        if first and self._warn is not None:
            self._warn(self.first_error or "")

    @property
    def traces(self) -> bool:
        return self._processor is not None

    @property
    def metrics(self) -> bool:
        return self._meter_provider is not None

    def span_ended(self, record: SpanRecord) -> None:
        """Queue one finished span and record its metrics (never blocks on I/O)."""
        if self._processor is not None:
            self._processor.on_end(_Queued(record))  # type: ignore[arg-type]
            self.exported_spans += 1
        if self._meter_provider is not None:
            for m in measurements(record):
                instrument = self._instruments[m.instrument]
                if hasattr(instrument, "add"):
                    instrument.add(m.value, m.attributes)
                else:
                    instrument.record(m.value, m.attributes)

    def shutdown(self, timeout_s: float = 5.0) -> bool:
        """Flush and stop, waiting at most about ``timeout_s``; True if all was sent.

        The SDK's span processor has no shutdown timeout of its own, so the flush
        runs on a daemon thread that we stop waiting for after ``timeout_s``.
        """
        def flush() -> None:
            if self._processor is not None:
                self._processor.shutdown()  # type: ignore[no-untyped-call]
            if self._meter_provider is not None:
                self._meter_provider.shutdown(timeout_millis=int(timeout_s * 1000))

        worker = threading.Thread(target=flush, name="claudetrace-otlp-flush", daemon=True)
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive():
            where = self.settings.traces_endpoint or self.settings.metrics_endpoint or ""
            self._failed(where, f"flush did not finish within {timeout_s:g} s")
        return self.failures == 0
