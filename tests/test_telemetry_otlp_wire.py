"""The direct OTLP span encoder produces what the SDK's encoder produces for the same spans."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from claudetrace.cassette import read_cassette
from claudetrace.recording import RecordingInfo
from claudetrace.telemetry import ContentPolicy, build_spans
from claudetrace.telemetry.config import OtelSettings
from claudetrace.telemetry.export import OtlpExporter, to_readable_span
from claudetrace.telemetry.otlp_wire import any_value
from claudetrace.telemetry.records import SpanEvent, SpanRecord

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "telemetry").glob("*.cassette.ndjson"))


def _sdk_and_ours(records: list[SpanRecord]) -> tuple[ExportTraceServiceRequest, bytes]:
    probe = OtlpExporter(OtelSettings("http/protobuf", None, None, resource={"service.name": "t"}))
    sdk = encode_spans([to_readable_span(r, probe.resource, probe.scope) for r in records])
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


def test_unencodable_values_raise() -> None:
    with pytest.raises(ValueError):
        any_value(object())
