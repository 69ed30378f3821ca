"""OTLP over the wire to a receiver on 127.0.0.1 (HTTP and gRPC): backfill (``claudetrace
otel``) and the exporter's batching, settings, retries and failures.

Live export from a proxied session is in ``test_telemetry_live.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from claudetrace.cassette import read_cassette
from claudetrace.cli import cli
from claudetrace.errors import TelemetryError
from claudetrace.store import open_store
from claudetrace.telemetry import build_spans
from claudetrace.telemetry import conventions as c
from claudetrace.telemetry.config import OtelSettings, resolve_settings
from claudetrace.telemetry.export import OtlpExporter
from claudetrace.telemetry.records import SpanRecord
from tests.otlp_receiver import OtlpReceiver, attrs, wire_spans

FIXTURES = Path(__file__).parent / "fixtures" / "telemetry"
CONTRACT = {
    c.METRIC_TOKEN_USAGE, c.METRIC_OPERATION_DURATION, c.METRIC_SESSION_COST,
    c.METRIC_SESSION_COUNT, c.METRIC_TOOL_CALLS, c.METRIC_TOOL_DURATION,
    c.METRIC_CONTROL_DURATION, c.METRIC_PERMISSION_DECISIONS, c.METRIC_PERMISSION_WAIT,
}


@pytest.fixture
def stored(db_path: Path) -> tuple[str, str]:
    """A store holding the permission_deny recording: (db path, recording id)."""
    store = open_store(str(db_path))
    rid = store.import_cassette(read_cassette(FIXTURES / "permission_deny.cassette.ndjson"))
    store.close()
    return str(db_path), rid


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_backfill_sends_spans_and_metrics(stored: tuple[str, str], protocol: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    db, rid = stored
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    with OtlpReceiver("grpc" if protocol == "grpc" else "http") as receiver:
        result = CliRunner().invoke(
            cli, ["otel", rid, "--db", db, "--endpoint", receiver.endpoint, "--protocol", protocol]
        )
        assert result.exit_code == 0, result.output
        assert "exported 7 spans from 1 recording" in result.output
        spans = wire_spans(receiver)
        assert sorted(s["name"] for s in spans.values()) == [
            "can_use_tool", "chat claude-opus-5-5", "chat claude-opus-5-5", "control initialize",
            "execute_tool Bash", "invoke_agent claude-code", "turn 1",
        ]
        assert len(spans) == 7
        by_name = {s["name"]: (sid, s) for sid, s in spans.items()}
        tool_id, tool = by_name["execute_tool Bash"]
        assert by_name["can_use_tool"][1]["parent"] == tool_id
        assert tool["status"] == 2  # STATUS_CODE_ERROR
        assert tool["attributes"][c.GEN_AI_TOOL_NAME] == "Bash"
        root = by_name["invoke_agent claude-code"][1]
        assert root["parent"] == ""
        assert root["attributes"][c.RECORDING_ID] == rid
        assert receiver.wait_for(lambda: bool(receiver.metrics()))
        metric_names = {m.name for m in receiver.metrics()}
        assert metric_names <= CONTRACT
        assert {c.METRIC_TOOL_CALLS, c.METRIC_PERMISSION_DECISIONS, c.METRIC_PERMISSION_WAIT,
                c.METRIC_TOKEN_USAGE, c.METRIC_SESSION_COUNT} <= metric_names
        decisions = next(m for m in receiver.metrics() if m.name == c.METRIC_PERMISSION_DECISIONS)
        point = decisions.sum.data_points[0]
        expected = {c.GEN_AI_TOOL_NAME: "Bash", c.PERMISSION_DECISION: "deny"}
        assert attrs(point.attributes) == expected
        assert point.as_double == 1 or point.as_int == 1


def test_backfill_times_are_the_recorded_ones(stored: tuple[str, str]) -> None:
    db, rid = stored
    store = open_store(db)
    info = store.recording_info(rid)
    events = list(store.iter_events(rid))
    expected = {s.span_id: s for s in build_spans(info, events)}
    with OtlpReceiver("http") as receiver:
        result = CliRunner().invoke(cli, ["otel", rid, "--db", db, "--endpoint", receiver.endpoint])
        assert result.exit_code == 0, result.output
        for sid, span in wire_spans(receiver).items():
            record = expected[int(sid, 16)]
            assert (span["start"], span["end"]) == (record.start_ns, record.end_ns)
            assert span["start"] >= info.started_ns


def test_no_endpoint_is_one_clear_error(stored: tuple[str, str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", raising=False)
    db, rid = stored
    result = CliRunner().invoke(cli, ["otel", rid, "--db", db])
    assert result.exit_code == 1
    assert "no OTLP endpoint" in result.output
    assert "Traceback" not in result.output


# -- the exporter: batching, HTTP settings, retries, failures -----------------------------------


def _spans(n: int = 3) -> list[SpanRecord]:
    return [SpanRecord(key=f"tool/{i}", name=f"execute_tool T{i}", trace_id=7, span_id=i + 1,
                       parent_id=None, start_ns=1_000 + i, end_ns=2_000 + i,
                       attributes={c.GEN_AI_TOOL_NAME: f"T{i}"}) for i in range(n)]


def _settings(endpoint: str, env: dict[str, str] | None = None) -> OtelSettings:
    return resolve_settings(endpoint=endpoint, environ=env or {})


def _export(receiver: OtlpReceiver, spans: list[SpanRecord], **env: str) -> OtlpExporter:
    exporter = OtlpExporter(_settings(receiver.endpoint, env), environ=env)
    for span in spans:
        exporter.span_ended(span)
    exporter.shutdown(10.0)
    return exporter


def test_http_headers_and_compression_reach_the_collector() -> None:
    for compression in ("gzip", "deflate", "none"):
        with OtlpReceiver("http") as receiver:
            exporter = _export(receiver, _spans(),
                               OTEL_EXPORTER_OTLP_HEADERS="api-key=s%20ecret,x=1",
                               OTEL_EXPORTER_OTLP_METRICS_HEADERS="only=metrics",
                               OTEL_EXPORTER_OTLP_COMPRESSION=compression)
            assert exporter.failures == 0
            assert sorted(s["name"] for s in wire_spans(receiver).values()) == [
                "execute_tool T0", "execute_tool T1", "execute_tool T2"]
            by_path = dict(zip(receiver.paths, receiver.headers, strict=True))
            traces, metrics = by_path["/v1/traces"], by_path["/v1/metrics"]
            assert (traces["api-key"], traces["x"]) == ("s ecret", "1")
            assert metrics["only"] == "metrics" and "api-key" not in metrics  # its own wins
            assert traces["content-type"] == "application/x-protobuf"
            assert traces.get("content-encoding", "none") == compression
            calls = {m.name: m for m in receiver.metrics()}[c.METRIC_TOOL_CALLS]
            assert calls.sum.aggregation_temporality == 2  # cumulative by default


def test_spans_go_in_batches_of_the_batch_size() -> None:
    with OtlpReceiver("http") as receiver:
        _export(receiver, _spans(7), OTEL_BSP_MAX_EXPORT_BATCH_SIZE="3",
                OTEL_METRICS_EXPORTER="none")
        assert [len(r.resource_spans[0].scope_spans[0].spans)
                for r in receiver.trace_requests] == [3, 3, 1]


def test_delta_temporality_and_the_metric_interval() -> None:
    with OtlpReceiver("http") as receiver:
        env = {"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "delta",
               "OTEL_METRIC_EXPORT_INTERVAL": "100"}
        exporter = OtlpExporter(_settings(receiver.endpoint, env), environ=env)
        exporter.span_ended(_spans(1)[0])
        # Sent at the interval, while the exporter runs:
        assert receiver.wait_for(lambda: bool(receiver.metrics()))
        exporter.span_ended(_spans(1)[0])
        exporter.shutdown(10.0)
        calls = [m for m in receiver.metrics() if m.name == c.METRIC_TOOL_CALLS]
        assert [m.sum.aggregation_temporality for m in calls] == [1, 1]  # delta
        assert [p.as_int for m in calls for p in m.sum.data_points] == [1, 1]


def test_a_busy_collector_is_retried() -> None:
    with OtlpReceiver("http") as receiver:
        receiver.fail_with = [503, 429]
        receiver.retry_after = "0"
        exporter = _export(receiver, _spans(), OTEL_METRICS_EXPORTER="none")
        assert exporter.failures == 0
        assert len(receiver.paths) == 3 and len(wire_spans(receiver)) == 3


@pytest.mark.parametrize("env, requests", [
    ({}, 5),  # 5 s by default: at 0, 1, 2, 3 and 4 s
    ({"OTEL_EXPORTER_OTLP_TIMEOUT": "2500"}, 3),  # at 0, 1 and 2 s
    ({"OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "500"}, 1),
])
def test_the_export_timeout_bounds_the_retries(env: dict[str, str], requests: int) -> None:
    with OtlpReceiver("http") as receiver:
        receiver.fail_with = [503] * 10  # busy for good, asking for a second's pause each time
        receiver.retry_after = "1"
        exporter = _export(receiver, _spans(), OTEL_METRICS_EXPORTER="none", **env)
        assert exporter.failures == 1 and "HTTP 503" in (exporter.first_error or "")
        assert receiver.paths == ["/v1/traces"] * requests


def test_a_rejected_export_is_one_failure_not_retried() -> None:
    warnings: list[str] = []
    with OtlpReceiver("http") as receiver:
        receiver.fail_with = [400]
        env = {"OTEL_METRICS_EXPORTER": "none"}
        exporter = OtlpExporter(_settings(receiver.endpoint, env), warn=warnings.append,
                                environ=env)
        for span in _spans():
            exporter.span_ended(span)
        assert not exporter.shutdown(10.0)
        assert receiver.paths == ["/v1/traces"]
    where = f"{receiver.endpoint}/v1/traces"
    assert warnings == [f"OTLP export to {where} failed: HTTP 400 Bad Request"]


def test_a_full_queue_drops_live_and_waits_in_a_backfill() -> None:
    env = {"OTEL_BSP_MAX_QUEUE_SIZE": "4", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4",
           "OTEL_BSP_SCHEDULE_DELAY": "60000", "OTEL_METRICS_EXPORTER": "none"}
    with OtlpReceiver("http") as receiver:
        receiver.fail_with = [503]  # hold the first batch up for a second
        warnings: list[str] = []
        live = OtlpExporter(_settings(receiver.endpoint, env), warn=warnings.append, environ=env)
        for span in _spans(40):
            live.span_ended(span)
        assert live.dropped_spans > 0
        live.shutdown(10.0)
        assert len(warnings) == 1 and "dropping spans" in warnings[0]
        assert len(wire_spans(receiver)) == 40 - live.dropped_spans
    with OtlpReceiver("http") as receiver:
        receiver.fail_with = [503]
        backfill = OtlpExporter(_settings(receiver.endpoint, env), block=True, environ=env)
        for span in _spans(40):
            backfill.span_ended(span)
        assert backfill.shutdown(10.0) and backfill.dropped_spans == 0
        assert len(wire_spans(receiver)) == 40


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")
def test_https_with_the_configured_certificate(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    receiver = OtlpReceiver("http")
    receiver.tls = (str(cert), str(key))
    with receiver:
        assert receiver.endpoint.startswith("https://")
        exporter = _export(receiver, _spans(), OTEL_EXPORTER_OTLP_CERTIFICATE=str(cert))
        assert exporter.failures == 0 and len(wire_spans(receiver)) == 3
        # Without it, the self-signed certificate is refused: one failure, no data.
        refused = _export(receiver, _spans(), OTEL_METRICS_EXPORTER="none")
        assert refused.failures == 1 and "CERTIFICATE_VERIFY_FAILED" in (refused.first_error or "")


@pytest.mark.parametrize("env, wrong", [
    ({"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, "zstd"),
    ({"OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"}, "TLS"),
    ({"OTEL_BSP_SCHEDULE_DELAY": "soon"}, "OTEL_BSP_SCHEDULE_DELAY"),
    ({"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "sideways"}, "sideways"),
])
def test_a_setting_it_cannot_use_is_a_clear_error(env: dict[str, str], wrong: str) -> None:
    endpoint = "https://127.0.0.1:1" if "CERTIFICATE" in str(env) else "http://127.0.0.1:1"
    with pytest.raises(TelemetryError, match=wrong):
        OtlpExporter(_settings(endpoint, env), environ=env)
    if "CERTIFICATE" not in str(env):  # found when the settings are resolved, by the proxy
        with pytest.raises(TelemetryError, match=wrong):
            _settings(endpoint, env)
    assert not _settings(endpoint, {**env, "OTEL_SDK_DISABLED": "true"}).enabled  # off: unread
