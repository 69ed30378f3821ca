"""The direct OTLP encoders produce what the SDK's encoders produce for the same spans and
measurements."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event as OtelEvent
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from claudetrace import __version__
from claudetrace.cassette import read_cassette
from claudetrace.recording import RecordingInfo
from claudetrace.telemetry import ContentPolicy, build_spans
from claudetrace.telemetry import conventions as c
from claudetrace.telemetry.config import OtelSettings
from claudetrace.telemetry.export import OtlpExporter
from claudetrace.telemetry.metrics import (
    INSTRUMENTS,
    Measurement,
    MetricAggregator,
    measurements,
)
from claudetrace.telemetry.otlp_wire import MetricsRequestEncoder, any_value
from claudetrace.telemetry.records import SpanEvent, SpanRecord

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "telemetry").glob("*.cassette.ndjson"))


_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}
_STATUS = {"unset": StatusCode.UNSET, "ok": StatusCode.OK, "error": StatusCode.ERROR}


def _context(trace_id: int, span_id: int) -> SpanContext:
    return SpanContext(trace_id, span_id, is_remote=False,
                       trace_flags=TraceFlags(TraceFlags.SAMPLED))


def to_readable_span(
    record: SpanRecord, resource: Resource, scope: InstrumentationScope
) -> ReadableSpan:
    """The SDK span with the record's ids, times, attributes, events and status."""
    parent = None if record.parent_id is None else _context(record.trace_id, record.parent_id)
    status = Status(_STATUS[record.status],
                    (record.status_message or None) if record.status == "error" else None)
    return ReadableSpan(
        name=record.name,
        context=_context(record.trace_id, record.span_id),
        parent=parent,
        resource=resource,
        attributes=record.attributes,
        events=[OtelEvent(e.name, e.attributes, e.time_ns) for e in record.events],
        kind=_KINDS[record.kind],
        status=status,
        start_time=record.start_ns,
        end_time=record.end_ns if record.end_ns is not None else record.start_ns,
        instrumentation_scope=scope,
    )


def _sdk_and_ours(records: list[SpanRecord]) -> tuple[ExportTraceServiceRequest, bytes]:
    probe = OtlpExporter(OtelSettings("http/protobuf", None, None, resource={"service.name": "t"}))
    resource = Resource(probe.resource_attributes, c.SCHEMA_URL)
    scope = InstrumentationScope(c.SCOPE_NAME, __version__, c.SCHEMA_URL)
    sdk = encode_spans([to_readable_span(r, resource, scope) for r in records])
    ours = probe.trace_encoder().encode(records)
    return sdk, ours


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name.split(".")[0])
@pytest.mark.parametrize("content", [False, True])
def test_fixture_spans_encode_like_the_sdk(path: Path, content: bool) -> None:
    cassette = read_cassette(path)
    info = RecordingInfo(id=f"01WIRE{path.name[:6]}", argv=cassette.argv,
                         started_ns=1_700_000_000_000_000_000, ended_ns=None)
    records = build_spans(info, cassette.events, content=ContentPolicy(enabled=content))
    sdk, ours = _sdk_and_ours(records)
    assert ExportTraceServiceRequest.FromString(ours) == sdk
    # Encoding again (now from the pair cache) gives the very same bytes.
    probe = OtlpExporter(OtelSettings("http/protobuf", None, None, resource={"service.name": "t"}))
    encoder = probe.trace_encoder()
    assert encoder.encode(records) == encoder.encode(records)


def test_edge_values_encode_like_the_sdk() -> None:
    record = SpanRecord(
        key="k", name="", trace_id=(1 << 128) - 1, span_id=1, parent_id=(1 << 64) - 1,
        start_ns=5, end_ns=None, kind="client",
        attributes={"neg": -3, "zero": 0, "false": False, "true": True, "one": 1, "onef": 1.0,
                    "empty": "", "uni": "é☃", "tuple": ("a", ""), "none_tuple": (),
                    "big": 1 << 70, "nan": float("inf")},
        events=[SpanEvent("e", 7, {"x": 1}), SpanEvent("", 0)],
        status="error",
    )
    ok = SpanRecord(key="o", name="ok", trace_id=2, span_id=3, parent_id=None, start_ns=0,
                    end_ns=9, status="ok")
    sdk, ours = _sdk_and_ours([record, ok])
    assert ExportTraceServiceRequest.FromString(ours) == sdk


def test_values_equal_in_python_but_not_on_the_wire_are_never_confused() -> None:
    # One encoder, one key: True == 1 == 1.0 and 0.0 == -0.0 to a dict, not to OTLP.
    values: list[object] = [0.0, -0.0, 1, True, 1.0, -0.0, True]
    records = [SpanRecord(key=f"k{i}", name="s", trace_id=1, span_id=i + 1, parent_id=None,
                          start_ns=1, end_ns=2, attributes={"v": v})
               for i, v in enumerate(values)]
    sdk, ours = _sdk_and_ours(records)
    decoded = ExportTraceServiceRequest.FromString(ours)
    assert decoded == sdk
    got = [span.attributes[0].value for span in
           decoded.resource_spans[0].scope_spans[0].spans]
    assert [v.WhichOneof("value") for v in got] == [
        "double_value", "double_value", "int_value", "bool_value", "double_value",
        "double_value", "bool_value"]
    signs = [math.copysign(1.0, v.double_value) for v in got if v.HasField("double_value")]
    assert signs == [1.0, -1.0, 1.0, -1.0]


def test_unencodable_values_raise() -> None:
    with pytest.raises(ValueError):
        any_value(object())


# -- metrics ---------------------------------------------------------------------------------


def _normalized(request: ExportMetricsServiceRequest) -> ExportMetricsServiceRequest:
    """Times zeroed, sums rounded and series in a canonical order, to compare aggregates.

    (The SDK adds a cumulative histogram's sum per collection, we per value: the
    last bits of a float sum may differ.)
    """
    out = ExportMetricsServiceRequest()
    out.CopyFrom(request)
    for rm in out.resource_metrics:
        for sm in rm.scope_metrics:
            metrics = sorted(sm.metrics, key=lambda m: m.name)
            del sm.metrics[:]
            sm.metrics.extend(metrics)
            for metric in sm.metrics:
                points = getattr(metric, metric.WhichOneof("data")).data_points
                for point in points:
                    point.start_time_unix_nano = point.time_unix_nano = 0
                    if metric.HasField("histogram"):
                        point.sum = round(point.sum, 12)
                    elif point.HasField("as_double"):
                        point.as_double = round(point.as_double, 12)
                ordered = sorted(points, key=lambda p: p.SerializeToString(deterministic=True))
                del points[:]
                points.extend(ordered)
    return out


@pytest.mark.parametrize("temporality", ["cumulative", "delta"])
def test_metric_aggregates_encode_like_the_sdk(temporality: str) -> None:
    from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
    from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader

    records = [
        span
        for path in FIXTURES
        for span in build_spans(
            RecordingInfo(id=f"01MET{path.name[:6]}", argv=[], started_ns=1, ended_ns=None),
            read_cassette(path).events,
        )
    ]
    values = [m for r in records for m in measurements(r)]
    # Edge values: an int sum, a float sum, a value on a bound, one past the last bound.
    values += [Measurement(c.METRIC_TOOL_CALLS, 1, {c.GEN_AI_TOOL_NAME: "X", c.TOOL_OUTCOME: "ok"}),
               Measurement(c.METRIC_SESSION_COST, 0.25, {c.GEN_AI_REQUEST_MODEL: "m"}),
               Measurement(c.METRIC_TOOL_DURATION, c.DURATION_BUCKETS[3], {}),
               Measurement(c.METRIC_TOOL_DURATION, 1e9, {})]
    assert {m.instrument for m in values} >= {
        c.METRIC_TOKEN_USAGE, c.METRIC_TOOL_CALLS, c.METRIC_PERMISSION_WAIT, c.METRIC_SESSION_COST}
    resource_attrs = {"service.name": "t", "service.instance.id": "i"}

    kind = (AggregationTemporality.DELTA if temporality == "delta"
            else AggregationTemporality.CUMULATIVE)
    reader = InMemoryMetricReader(preferred_temporality={Counter: kind, Histogram: kind})
    provider = MeterProvider(resource=Resource(resource_attrs, c.SCHEMA_URL),
                             metric_readers=[reader])
    meter = provider.get_meter(c.SCOPE_NAME, __version__, c.SCHEMA_URL)
    instruments = {
        inst.name: meter.create_counter(inst.name, unit=inst.unit, description=inst.description)
        if inst.kind == "counter" else
        meter.create_histogram(inst.name, unit=inst.unit, description=inst.description,
                               explicit_bucket_boundaries_advisory=inst.buckets)
        for inst in INSTRUMENTS
    }
    aggregator = MetricAggregator(temporality)  # type: ignore[arg-type]
    encoder = MetricsRequestEncoder(resource_attrs, c.SCHEMA_URL, c.SCOPE_NAME, __version__,
                                    c.SCHEMA_URL)
    for round_ in range(2):  # a second collection: cumulative totals, or a fresh delta
        for m in values[round_::2]:
            inst = instruments[m.instrument]
            if isinstance(inst, Counter):
                inst.add(m.value, m.attributes)
            else:
                inst.record(m.value, m.attributes)
            aggregator.add(m)
        sdk = encode_metrics(reader.get_metrics_data())
        now, series = aggregator.collect()
        ours = ExportMetricsServiceRequest.FromString(encoder.encode(now, series, temporality))
        assert _normalized(ours) == _normalized(sdk)
        points = [p for _, ps in series for p in ps]
        assert all(0 < p.start_ns <= now for p in points)


def test_a_delta_collection_starts_over() -> None:
    clock = iter(range(100, 10_000, 100)).__next__
    aggregator = MetricAggregator("delta", clock=clock)
    m = Measurement(c.METRIC_TOOL_CALLS, 1, {c.GEN_AI_TOOL_NAME: "X", c.TOOL_OUTCOME: "ok"})
    aggregator.add(m)
    aggregator.add(m)
    first, series = aggregator.collect()
    assert [p.value for _, ps in series for p in ps] == [2]
    assert [p.start_ns for _, ps in series for p in ps] == [100]  # the aggregator's start
    empty, series = aggregator.collect()
    assert series == []  # nothing new: no series
    aggregator.add(m)
    last, series = aggregator.collect()
    (point,), = [ps for _, ps in series]
    assert (point.start_ns, point.value) == (empty, 1) and last > empty > first
