"""Span records and their metrics out over OTLP, on one background thread.

:meth:`OtlpExporter.span_ended` only appends the record to a queue and adds
its measurements (:func:`~.metrics.measurements`) to a
:class:`~.metrics.MetricAggregator`: a few microseconds, never I/O.  The
exporter's thread encodes spans in batches (:mod:`.otlp_wire`) and the metrics
at each interval, and sends them with the protocol's
:mod:`~.transport` — the standard library for OTLP/HTTP, so live telemetry
over HTTP loads no OpenTelemetry package at all.  What arrives is what the
OpenTelemetry SDK would send for the same spans and measurements
(``tests/test_telemetry_otlp_wire.py`` compares both encodings).

The batching settings are the SDK's: ``OTEL_BSP_SCHEDULE_DELAY`` (ms, default
5000), ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` (512), ``OTEL_BSP_MAX_QUEUE_SIZE``
(65536 here: spans past it are dropped and reported), ``OTEL_METRIC_EXPORT_INTERVAL``
(ms, 60000) and ``OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE``
(``cumulative``, or ``delta`` / ``lowmemory``, which mean delta for our counters
and histograms).  A failing collector is reported once through ``warn``;
:meth:`OtlpExporter.shutdown` flushes with a bounded timeout.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping

from .. import __version__
from . import conventions as c
from .config import OtelSettings
from .metrics import MetricAggregator, measurements
from .otlp_wire import MetricsRequestEncoder, TraceRequestEncoder
from .records import SpanRecord
from .transport import Transport, transport_for


class OtlpExporter:
    """Exports span records and their metrics for one process (live or backfill).

    ``instance_id`` becomes the metrics' ``service.instance.id`` so cumulative
    series from concurrent proxies never collide.  ``warn`` gets one line the
    first time an export fails.  With ``block`` (a backfill), :meth:`span_ended`
    waits for room in a full queue instead of dropping the span.  ``environ``
    holds the transport settings (headers, certificates, compression); the
    batching ones come resolved in ``settings``.  Raises
    :class:`~claudetrace.errors.TelemetryError` for a setting it cannot use.
    """

    def __init__(
        self,
        settings: OtelSettings,
        *,
        instance_id: str | None = None,
        warn: Callable[[str], None] | None = None,
        block: bool = False,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        self.settings = settings
        self.failures = 0
        self.dropped_spans = 0
        self.first_error: str | None = None
        self._warn = warn
        self._block = block
        self.resource_attributes: dict[str, str] = {
            # The resource attributes the SDK would add; the SDK here is ours.
            "telemetry.sdk.name": "claudetrace", "telemetry.sdk.language": "python",
            "telemetry.sdk.version": __version__, "service.version": __version__,
            **settings.resource,
        }
        batching = settings.batching
        self._delay_s = batching.schedule_delay_s
        self._batch = batching.max_export_batch_size
        self._queue_size = batching.max_queue_size
        self._interval_s = batching.metric_interval_s
        self._spans: deque[SpanRecord] = deque()
        self._cond = threading.Condition()
        self._closing = False
        self._traces: Transport | None = None
        self._metrics: Transport | None = None
        self._aggregator: MetricAggregator | None = None
        if settings.traces_endpoint:
            self._traces = transport_for("traces", settings.protocol, settings.traces_endpoint,
                                         env, settings.traces_timeout_s)
        if settings.metrics_endpoint:
            self._metrics = transport_for("metrics", settings.protocol,
                                          settings.metrics_endpoint, env,
                                          settings.metrics_timeout_s)
            self._aggregator = MetricAggregator(batching.temporality)
            self._metric_encoder = MetricsRequestEncoder(
                {**self.resource_attributes,
                 "service.instance.id": instance_id or _new_instance_id()},
                c.SCHEMA_URL, c.SCOPE_NAME, __version__, c.SCHEMA_URL,
            )
        self._thread: threading.Thread | None = None
        if self._traces is not None or self._metrics is not None:
            self._thread = threading.Thread(target=self._run, name="claudetrace-otlp",
                                            daemon=True)
            self._thread.start()

    def trace_encoder(self) -> TraceRequestEncoder:
        """An encoder of this exporter's spans (its resource and scope) as OTLP requests."""
        return TraceRequestEncoder(self.resource_attributes, c.SCHEMA_URL,
                                   c.SCOPE_NAME, __version__, c.SCHEMA_URL)

    # -- the caller's side ---------------------------------------------------------------

    def span_ended(self, record: SpanRecord) -> None:
        """Queue one finished span and count its metrics (never waits on I/O)."""
        if self._traces is not None:
            spans = self._spans
            if len(spans) >= self._queue_size:
                self._queue_full()
            if len(spans) < self._queue_size:
                spans.append(record)
                if len(spans) == self._batch:
                    with self._cond:
                        self._cond.notify()
        if self._aggregator is not None:
            for m in measurements(record):
                self._aggregator.add(m)

    def _queue_full(self) -> None:
        if self._block:
            with self._cond:
                self._cond.notify()
                while len(self._spans) >= self._queue_size and not self._closing:
                    self._cond.wait(0.1)
            return
        self.dropped_spans += 1
        if self.dropped_spans == 1:
            self._failed(self.settings.traces_endpoint or "",
                         f"more than {self._queue_size} spans waiting, dropping spans")

    def shutdown(self, timeout_s: float = 5.0) -> bool:
        """Send what is left and stop, waiting at most about ``timeout_s`` — or as long as
        one export may take, if that is longer; True if all was sent."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread is not None:
            timeout_s = max(timeout_s, self.settings.traces_timeout_s if self._traces else 0.0,
                            self.settings.metrics_timeout_s if self._metrics else 0.0)
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                where = self.settings.traces_endpoint or self.settings.metrics_endpoint or ""
                self._failed(where, f"flush did not finish within {timeout_s:g} s")
        return self.failures == 0

    # -- the exporting thread -------------------------------------------------------------

    def _run(self) -> None:
        encoder = self.trace_encoder()
        next_metrics = time.monotonic() + self._interval_s
        while True:
            with self._cond:
                if not self._closing and len(self._spans) < self._batch:
                    now = time.monotonic()
                    self._cond.wait(max(0.0, min(self._delay_s, next_metrics - now)))
                closing = self._closing
            self._send_spans(encoder)
            if closing or time.monotonic() >= next_metrics:
                self._send_metrics()
                next_metrics = time.monotonic() + self._interval_s
            if closing and not self._spans:
                break
        for transport in (self._traces, self._metrics):
            if transport is not None:
                transport.close()

    def _send_spans(self, encoder: TraceRequestEncoder) -> None:
        """Every queued span, in batches of at most the batch size."""
        spans = self._spans
        while spans:
            batch = [spans.popleft() for _ in range(min(self._batch, len(spans)))]
            if self._block:
                with self._cond:
                    self._cond.notify_all()
            assert self._traces is not None
            self._sent(self._traces, encoder.encode(batch))

    def _send_metrics(self) -> None:
        if self._aggregator is None or self._metrics is None:
            return
        now, series = self._aggregator.collect()
        if series:
            payload = self._metric_encoder.encode(now, series, self._aggregator.temporality)
            self._sent(self._metrics, payload)

    def _sent(self, transport: Transport, payload: bytes) -> None:
        try:
            why = transport.send(payload)
        except Exception as exc:  # a transport bug must not end the thread silently
            why = f"{type(exc).__name__}: {exc}"
        if why is not None:
            self._failed(transport.endpoint, why)

    def _failed(self, endpoint: str, why: str) -> None:
        with self._cond:
            self.failures += 1
            first = self.first_error is None
            if first:
                self.first_error = f"OTLP export to {endpoint} failed: {why}"
        if first and self._warn is not None:
            self._warn(self.first_error or "")


def _new_instance_id() -> str:
    import uuid  # only a backfill needs one; live export names the recording

    return str(uuid.uuid4())
