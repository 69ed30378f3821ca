"""Span records and their metrics out through the OpenTelemetry SDK.

:class:`Telemetry` owns one ``TracerProvider`` and one ``MeterProvider`` for a
process (a live session's worker, or ``claudetrace otel``).  Each finished
:class:`~.records.SpanRecord` becomes an SDK span: started and ended at its
recorded times, with the deterministic trace and span ids the builder computed
(handed to the SDK through its ``IdGenerator`` seam, so a backfill of a session
that was exported live adds no duplicate), and goes through the provider's span
processors — a ``BatchSpanProcessor`` per exporter, plus whatever the user's hook
added.  Its measurements (:func:`~.metrics.measurements`) are recorded on the
GenAI instruments of the ``MeterProvider``.

Exporters are the SDK's: ``OTLPSpanExporter`` / ``OTLPMetricExporter`` for
``http/protobuf`` or ``grpc``, ``Console*Exporter`` for ``console``, and any other
exporter an installed package registers under the SDK's entry point groups
(``opentelemetry_traces_exporter`` / ``opentelemetry_metrics_exporter``).  They
read ``OTEL_EXPORTER_OTLP_*`` (headers, compression, timeouts, certificates,
insecure) and the processors ``OTEL_BSP_*`` / ``OTEL_METRIC_EXPORT_*`` themselves;
``OTEL_TRACES_SAMPLER``, span limits and ``OTEL_RESOURCE_ATTRIBUTES`` /
``OTEL_SERVICE_NAME`` are the SDK's too.  What claudetrace adds:

- metrics default to **delta** temporality (unless
  ``OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`` says otherwise) under a
  resource that names the service and host, not the session: a collector's
  ``deltatocumulative`` processor then keeps one long-lived series per
  host/service that every short session adds to, which ``rate()`` and
  ``increase()`` read right;
- every span carries OpenInference attributes beside the GenAI ones
  (:mod:`.openinference`), for Phoenix;
- a gRPC endpoint given without a scheme on a loopback address is plaintext
  (no TLS handshake with a local collector) unless ``…_INSECURE`` or a
  certificate says otherwise;
- delivery is watched per signal: the first failure of a signal is one warning
  line; a metrics endpoint that refuses (a traces-only backend such as Phoenix)
  never counts as a failed export of the session;
- :data:`~.config.HOOK_ENV` names a ``module:function`` called with the tracer
  provider and the list of metric readers before anything is exported: add span
  processors, exporters or readers there.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import re
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any, Final, TextIO
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    ConsoleMetricExporter,
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
)
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

from .._version import __version__
from ..errors import TelemetryError
from . import conventions as c
from .config import DEFAULT_SERVICE_NAME, OtelSettings, SignalSettings
from .metrics import INSTRUMENTS, measurements
from .openinference import attributes as openinference
from .records import SpanRecord

_PATHS: Final = {"traces": "/v1/traces", "metrics": "/v1/metrics"}
_KINDS: Final = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)
#: How many spans a backfill hands the processors before it waits for them to be
#: sent: at most half the batch processor's queue (``OTEL_BSP_MAX_QUEUE_SIZE``,
#: 2048 by default), so a backfill never drops one.
BACKFILL_FLUSH_EVERY: Final = 512
#: Where the SDK's exporters log why an export failed.
SDK_LOGGER: Final = "opentelemetry"


class RecordedIds(IdGenerator):
    """The SDK's id source, answering with the ids of the span being replayed.

    :meth:`Telemetry.span_ended` sets :attr:`next` just before it starts the SDK
    span; anything else that starts a span through the same provider (a user's
    processor, say) gets random ids as usual.
    """

    def __init__(self) -> None:
        self.next: tuple[int, int] | None = None
        self._random = RandomIdGenerator()

    def generate_span_id(self) -> int:
        ids, self.next = self.next, None
        return self._random.generate_span_id() if ids is None else ids[1]

    def generate_trace_id(self) -> int:
        # The SDK asks for the trace id first, for a root span only.
        if self.next is not None:
            return self.next[0]
        return self._random.generate_trace_id()


class SdkLog(logging.Handler):
    """The SDK's warnings: export failures kept to be said in one line, others said once.

    Installed on the ``opentelemetry`` logger by :func:`sdk_log`; it does not stop
    propagation, so an application that configured logging still sees everything.
    In a process that configured none (the telemetry worker, the CLI) its presence
    keeps the SDK's retry chatter off the terminal — each failing signal is
    reported once, by :class:`Telemetry` — while anything else the SDK warns about
    (an invalid ``OTEL_*`` value, say) is printed once on stderr.
    """

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None
        self._retry: str | None = None
        self._said: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record must not break the export
            message = str(record.msg)
        if message.startswith("Transient error"):
            self._retry = _short(message.split(" encountered while", 1)[0].removeprefix(
                "Transient error "))
        elif message.startswith(("Failed to export", "Exporter already shutdown")):
            self.last = message
        elif message not in self._said:
            self._said.add(message)
            with contextlib.suppress(OSError, ValueError):
                print(f"claudetrace: warning: OpenTelemetry: {message}", file=sys.stderr,
                      flush=True)

    def why(self) -> str:
        """The last failure, and what the last retry met (the SDK's last word after
        retries says only that it gave up)."""
        why = self.last or "export failed"
        if self._retry and "max retries" in why:
            why = f"{why} (last attempt: {self._retry})"
        return why


#: The heart of an HTTP library's error: ``[Errno 111] Connection refused``,
#: ``[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: …``.
_REASON: Final = re.compile(r"\[(?:Errno \d+|SSL: \w+)\][^\"')(]*")


def _short(reason: str) -> str:
    found = _REASON.search(reason)
    if found:
        return found[0].strip()
    return reason if len(reason) <= 200 else reason[:199] + "…"


_SDK_LOG: SdkLog | None = None
_SDK_LOG_LOCK = threading.Lock()


def sdk_log() -> SdkLog:
    """The process's :class:`SdkLog`, installed on first use."""
    global _SDK_LOG
    with _SDK_LOG_LOCK:
        if _SDK_LOG is None:
            _SDK_LOG = SdkLog()
            logging.getLogger(SDK_LOGGER).addHandler(_SDK_LOG)
        return _SDK_LOG


@dataclass
class Delivery:
    """What became of one signal's OTLP exports in this process."""

    signal: str
    where: str
    sent: int = 0
    failed: int = 0
    first_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.failed == 0


class _Watch:
    """Counts one OTLP exporter's results into a :class:`Delivery`; the first failure
    is reported through ``report``."""

    def __init__(self, delivery: Delivery, report: Callable[[Delivery], None]) -> None:
        self.delivery = delivery
        self._report = report
        self._lock = threading.Lock()

    def __call__(self, result: Any) -> Any:
        delivery = self.delivery
        with self._lock:
            if getattr(result, "name", "") == "SUCCESS":
                delivery.sent += 1
                return result
            delivery.failed += 1
            first = delivery.first_error is None
            if first:
                delivery.first_error = sdk_log().why()
        if first:
            self._report(delivery)
        return result


def _watched(cls: type[Any], watch: _Watch) -> type[Any]:
    """``cls`` (an SDK exporter class) with its public ``export`` watched."""

    class Watched(cls):  # type: ignore[misc]
        def export(self, *args: Any, **kwargs: Any) -> Any:
            return watch(super().export(*args, **kwargs))

    Watched.__name__ = Watched.__qualname__ = cls.__name__
    return Watched


def _loopback(endpoint: str) -> bool:
    host = urlsplit(f"//{endpoint}").hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _otlp_kwargs(signal: str, settings: SignalSettings,
                 environ: Mapping[str, str]) -> dict[str, Any]:
    """Constructor arguments beyond what the SDK's exporter reads from the variables."""
    kwargs: dict[str, Any] = {}
    endpoint = settings.endpoint
    if endpoint:
        if settings.protocol == "http/protobuf":
            endpoint = endpoint.rstrip("/") + _PATHS[signal]
        kwargs["endpoint"] = endpoint
    if settings.protocol == "grpc":
        given = endpoint or settings.where(environ, signal)
        upper = signal.upper()
        told = any(environ.get(name, "").strip() for name in (
            "OTEL_EXPORTER_OTLP_INSECURE", f"OTEL_EXPORTER_OTLP_{upper}_INSECURE",
            "OTEL_EXPORTER_OTLP_CERTIFICATE", f"OTEL_EXPORTER_OTLP_{upper}_CERTIFICATE"))
        if "://" not in given and not told and _loopback(given):
            kwargs["insecure"] = True
    if signal == "metrics" and not environ.get(
            "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "").strip():
        kwargs["preferred_temporality"] = {Counter: AggregationTemporality.DELTA,
                                           Histogram: AggregationTemporality.DELTA}
    return kwargs


def _otlp_class(signal: str, protocol: str) -> type[Any]:
    module = {
        ("traces", "http/protobuf"): "opentelemetry.exporter.otlp.proto.http.trace_exporter",
        ("traces", "grpc"): "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
        ("metrics", "http/protobuf"): "opentelemetry.exporter.otlp.proto.http.metric_exporter",
        ("metrics", "grpc"): "opentelemetry.exporter.otlp.proto.grpc.metric_exporter",
    }[signal, protocol]
    name = "OTLPSpanExporter" if signal == "traces" else "OTLPMetricExporter"
    cls: type[Any] = getattr(import_module(module), name)
    return cls


def _registered(signal: str, name: str) -> Any:
    """An exporter (or metric reader) class an installed package registers as ``name``."""
    group = f"opentelemetry_{signal}_exporter"
    found = entry_points(group=group, name=name)
    if not found:
        raise TelemetryError(f"OTEL_{signal.upper()}_EXPORTER: no exporter named {name!r} "
                             f"is installed (entry point group {group})")
    return next(iter(found)).load()


def resource(environ: Mapping[str, str]) -> Resource:
    """The SDK's resource (``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_SERVICE_NAME``), with
    ``service.name`` ``claudetrace`` unless the user named one, and the host's name as
    ``service.instance.id`` unless the user gave one.

    The SDK would make up a new instance id for every process; every session's
    worker is a process, so its metrics would be a new short series each time,
    which ``rate()`` and ``increase()`` cannot read.  One instance per host keeps
    one long-lived series per host and service that each session adds to.
    """
    base = Resource.create({"service.version": __version__})
    ours: dict[str, str] = {}
    name = str(base.attributes.get("service.name", ""))
    if not name or name.startswith("unknown_service"):
        ours["service.name"] = DEFAULT_SERVICE_NAME
    if "service.instance.id" not in environ.get("OTEL_RESOURCE_ATTRIBUTES", ""):
        ours["service.instance.id"] = socket.gethostname()
        ours["host.name"] = socket.gethostname()
    return base.merge(Resource(ours)) if ours else base


def _hook(spec: str) -> Callable[..., Any]:
    module, sep, function = spec.partition(":")
    try:
        if not sep:
            raise ValueError("expected module:function")
        found = getattr(import_module(module), function)
    except (ImportError, AttributeError, ValueError) as exc:
        raise TelemetryError(f"CLAUDETRACE_OTEL_HOOK={spec!r}: {exc}") from exc
    if not callable(found):
        raise TelemetryError(f"CLAUDETRACE_OTEL_HOOK={spec!r} is not callable")
    return found  # type: ignore[no-any-return]


class Telemetry:
    """One process's OpenTelemetry pipelines for span records (live or backfill).

    ``warn`` gets one line and the signal (``traces``, ``metrics``, or None for
    both) the first time a signal's export fails.  The ``console`` exporters write to
    ``console`` (default: stdout).  With
    ``block`` (a backfill), spans are flushed every :data:`BACKFILL_FLUSH_EVERY`
    so that none is dropped from a full queue.  Raises
    :class:`~claudetrace.errors.TelemetryError` for a setting it cannot use.
    """

    def __init__(
        self,
        settings: OtelSettings,
        *,
        warn: Callable[[str, str | None], None] | None = None,
        block: bool = False,
        environ: Mapping[str, str] | None = None,
        console: TextIO | None = None,
    ) -> None:
        env: Mapping[str, str] = os.environ if environ is None else environ
        self._console = console or sys.stdout
        self.settings = settings
        self._warn = warn
        self._block = block
        self._pending = 0
        try:
            queue = int(env.get("OTEL_BSP_MAX_QUEUE_SIZE", "") or 2048)
        except ValueError:
            queue = 2048  # the SDK says so and uses its default
        self._flush_every = max(1, min(BACKFILL_FLUSH_EVERY, queue // 2))
        self.deliveries: dict[str, Delivery] = {}
        self.ids = RecordedIds()
        sdk_log()  # before the first export, to explain its failure
        res = resource(env)
        self.tracer_provider = TracerProvider(resource=res, id_generator=self.ids,
                                              shutdown_on_exit=False)
        readers: list[MetricReader] = []
        for name in settings.traces.exporters:
            exporter = self._span_exporter(name, env)
            self.tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
        for name in settings.metrics.exporters:
            readers.append(self._metric_reader(name, env))
        if settings.hook:
            _hook(settings.hook)(tracer_provider=self.tracer_provider, metric_readers=readers)
        self.tracer = self.tracer_provider.get_tracer(c.SCOPE_NAME, __version__, c.SCHEMA_URL)
        self.meter_provider: MeterProvider | None = None
        #: Each instrument's ``add`` or ``record``, by name.
        self._instruments: dict[str, Callable[..., None]] = {}
        if readers:
            self.meter_provider = MeterProvider(metric_readers=readers, resource=res,
                                                shutdown_on_exit=False)
            meter = self.meter_provider.get_meter(c.SCOPE_NAME, __version__, c.SCHEMA_URL)
            for inst in INSTRUMENTS:
                if inst.kind == "counter":
                    self._instruments[inst.name] = meter.create_counter(
                        inst.name, inst.unit, inst.description).add
                else:
                    self._instruments[inst.name] = meter.create_histogram(
                        inst.name, inst.unit, inst.description,
                        explicit_bucket_boundaries_advisory=inst.buckets).record

    # -- set-up ----------------------------------------------------------------------

    def _delivery(self, signal: str, environ: Mapping[str, str]) -> _Watch:
        settings = self.settings.signal(signal)
        delivery = Delivery(signal, settings.where(environ, signal))
        self.deliveries[signal] = delivery
        return _Watch(delivery, self._failed)

    def _span_exporter(self, name: str, environ: Mapping[str, str]) -> SpanExporter:
        if name == "otlp":
            settings = self.settings.traces
            cls = _watched(_otlp_class("traces", settings.protocol),
                           self._delivery("traces", environ))
            exporter: SpanExporter = cls(**_otlp_kwargs("traces", settings, environ))
            return exporter
        if name == "console":
            return ConsoleSpanExporter(out=self._console)
        made: SpanExporter = _registered("traces", name)()
        return made

    def _metric_reader(self, name: str, environ: Mapping[str, str]) -> MetricReader:
        exporter: MetricExporter
        if name == "otlp":
            settings = self.settings.metrics
            cls = _watched(_otlp_class("metrics", settings.protocol),
                           self._delivery("metrics", environ))
            exporter = cls(**_otlp_kwargs("metrics", settings, environ))
        elif name == "console":
            exporter = ConsoleMetricExporter(out=self._console)
        else:
            made = _registered("metrics", name)
            if isinstance(made, type) and issubclass(made, MetricReader):
                reader: MetricReader = made()
                return reader
            exporter = made()
        return PeriodicExportingMetricReader(exporter)

    def _failed(self, delivery: Delivery) -> None:
        if self._warn is None:
            return
        message = f"OTLP {delivery.signal} export to {delivery.where} failed: " \
                  f"{delivery.first_error}"
        if delivery.signal == "metrics":
            message += (" (traces are not affected; for a traces-only backend such as "
                        "Phoenix set OTEL_METRICS_EXPORTER=none)")
        self._warn(message, delivery.signal)

    # -- the caller's side ----------------------------------------------------------

    def span_ended(self, record: SpanRecord, *, measure: bool = True) -> None:
        """Hand one finished span to the SDK and record its measurements (unless
        ``measure`` is False: a backfill of metrics already exported live)."""
        if self.settings.traces.enabled:
            self._span(record)
        if self._instruments and measure:
            for m in measurements(record):
                self._instruments[m.instrument](m.value, m.attributes)

    def _span(self, record: SpanRecord) -> None:
        if record.parent_id is None:
            context = Context()
        else:
            parent = SpanContext(record.trace_id, record.parent_id, is_remote=False,
                                 trace_flags=_SAMPLED)
            context = trace.set_span_in_context(NonRecordingSpan(parent))
        self.ids.next = (record.trace_id, record.span_id)
        span = self.tracer.start_span(record.name, context=context, kind=_KINDS[record.kind],
                                      attributes={**record.attributes, **openinference(record)},
                                      start_time=record.start_ns)
        self.ids.next = None
        for event in record.events:
            span.add_event(event.name, event.attributes, event.time_ns)
        if record.status == "error":
            span.set_status(Status(StatusCode.ERROR, record.status_message or None))
        elif record.status == "ok":
            span.set_status(Status(StatusCode.OK))
        span.end(record.end_ns if record.end_ns is not None else record.start_ns)
        if self._block:
            self._pending += 1
            if self._pending >= self._flush_every:
                self._pending = 0
                self.tracer_provider.force_flush()

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Send everything recorded so far; False if it did not finish in time."""
        millis = int(timeout_s * 1000)
        done = self.tracer_provider.force_flush(millis)
        if self.meter_provider is not None:
            done = self.meter_provider.force_flush(millis) and done
        return done

    def shutdown(self, timeout_s: float = 5.0) -> bool:
        """Flush (waiting at most about ``timeout_s``) and stop; True if the traces were
        delivered (a metrics endpoint that refused does not count: see
        :attr:`deliveries`)."""
        flushed = self.flush(timeout_s)
        if not flushed and self._warn is not None:
            self._warn(f"OpenTelemetry flush did not finish within {timeout_s:g} s", None)
        self.tracer_provider.shutdown()
        if self.meter_provider is not None:
            self.meter_provider.shutdown(timeout_millis=max(1000.0, timeout_s * 1000))
        traces = self.deliveries.get("traces")
        return flushed and (traces is None or traces.ok)
