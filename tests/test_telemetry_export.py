"""OTLP over the wire to a receiver on 127.0.0.1 (HTTP and gRPC): backfill (``claudetrace
otel``) and the OpenTelemetry SDK pipelines under the standard ``OTEL_*`` matrix.

Live export from a proxied session is in ``test_telemetry_live.py``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from claudetrace.cassette import read_cassette
from claudetrace.cli import cli
from claudetrace.errors import TelemetryError
from claudetrace.indexer import open_settled_store
from claudetrace.telemetry import build_spans
from claudetrace.telemetry import conventions as c
from claudetrace.telemetry.config import resolve_settings
from claudetrace.telemetry.export import Telemetry
from claudetrace.telemetry.records import SpanRecord
from tests.otel_hook import HOOKED
from tests.otlp_receiver import OtlpReceiver, attrs, wire_spans

FIXTURES = Path(__file__).parent / "fixtures" / "telemetry"
CONTRACT = {
    c.METRIC_TOKEN_USAGE, c.METRIC_OPERATION_DURATION, c.METRIC_SESSION_COST,
    c.METRIC_SESSION_COUNT, c.METRIC_TOOL_CALLS, c.METRIC_TOOL_DURATION,
    c.METRIC_CONTROL_DURATION, c.METRIC_PERMISSION_DECISIONS, c.METRIC_PERMISSION_WAIT,
}


@pytest.fixture(autouse=True)
def clean_otel_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No ``OTEL_*`` from the outside: the SDK reads the process environment itself."""
    for name in list(os.environ):
        if name.startswith("OTEL_") or name.startswith("CLAUDETRACE_OTEL"):
            monkeypatch.delenv(name)
    yield


@pytest.fixture
def stored(db_path: Path) -> tuple[str, str]:
    """A store holding the permission_deny recording: (db path, recording id)."""
    store = open_settled_store(str(db_path))
    rid = store.import_cassette(read_cassette(FIXTURES / "permission_deny.cassette.ndjson"))
    store.close()
    return str(db_path), rid


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_backfill_sends_spans_and_metrics(stored: tuple[str, str], protocol: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    db, rid = stored
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
    store = open_settled_store(db)
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
    assert "no exporter: pass --endpoint" in result.output
    assert "Traceback" not in result.output


# -- the SDK pipelines: the OTEL_* matrix, failures, the hook

def _spans(n: int = 3) -> list[SpanRecord]:
    return [SpanRecord(key=f"tool/{i}", name=f"execute_tool T{i}", trace_id=7, span_id=i + 1,
                       parent_id=None, start_ns=1_000 + i, end_ns=2_000 + i,
                       attributes={c.GEN_AI_TOOL_NAME: f"T{i}"}) for i in range(n)]


def _export(spans: list[SpanRecord], monkeypatch: pytest.MonkeyPatch, endpoint: str | None = None,
            *, block: bool = False, **env: str) -> tuple[Telemetry, list[tuple[str, str | None]]]:
    """Spans through a :class:`Telemetry` set up by ``env`` (in the process environment,
    where the SDK reads it); (the pipelines, the warnings), after the shutdown."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    warnings: list[tuple[str, str | None]] = []
    telemetry = Telemetry(resolve_settings(endpoint=endpoint), block=block,
                          warn=lambda message, signal: warnings.append((message, signal)))
    for span in spans:
        telemetry.span_ended(span)
    telemetry.shutdown(10.0)
    return telemetry, warnings


def test_http_headers_and_compression_reach_the_collector(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for compression in ("gzip", "deflate", "none"):
        with OtlpReceiver("http") as receiver:
            telemetry, warnings = _export(
                _spans(), monkeypatch, receiver.endpoint,
                OTEL_EXPORTER_OTLP_HEADERS="api-key=s%20ecret,x=1",
                OTEL_EXPORTER_OTLP_METRICS_HEADERS="only=metrics",
                OTEL_EXPORTER_OTLP_COMPRESSION=compression)
            assert warnings == [] and telemetry.deliveries["traces"].sent == 1
            assert sorted(s["name"] for s in wire_spans(receiver).values()) == [
                "execute_tool T0", "execute_tool T1", "execute_tool T2"]
            by_path = dict(zip(receiver.paths, receiver.headers, strict=True))
            traces, metrics = by_path["/v1/traces"], by_path["/v1/metrics"]
            assert (traces["api-key"], traces["x"]) == ("s ecret", "1")
            assert metrics["only"] == "metrics" and "api-key" not in metrics  # its own wins
            assert traces["content-type"] == "application/x-protobuf"
            assert traces.get("content-encoding", "none") == compression


def test_metrics_are_delta_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    for preference, temporality in ((None, 1), ("cumulative", 2)):
        env = {} if preference is None else {
            "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": preference}
        with OtlpReceiver("http") as receiver:
            _export(_spans(), monkeypatch, receiver.endpoint, **env)
            calls = {m.name: m for m in receiver.metrics()}[c.METRIC_TOOL_CALLS]
            assert calls.sum.aggregation_temporality == temporality
            resource = attrs(receiver.metric_requests[0].resource_metrics[0].resource.attributes)
            # One series per host and service, not per session (process).
            assert resource["service.name"] == "claudetrace"
            assert resource["service.instance.id"] == socket.gethostname()


def test_spans_go_in_batches_of_the_batch_size(monkeypatch: pytest.MonkeyPatch) -> None:
    with OtlpReceiver("http") as receiver:
        _export(_spans(7), monkeypatch, receiver.endpoint, OTEL_BSP_MAX_EXPORT_BATCH_SIZE="3",
                OTEL_METRICS_EXPORTER="none")
        assert sorted(len(r.resource_spans[0].scope_spans[0].spans)
                      for r in receiver.trace_requests) == [1, 3, 3]


def test_a_backfill_never_drops_a_span_from_a_full_queue(
        monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"OTEL_BSP_MAX_QUEUE_SIZE": "4", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4",
           "OTEL_BSP_SCHEDULE_DELAY": "60000", "OTEL_METRICS_EXPORTER": "none"}
    with OtlpReceiver("http") as receiver:
        receiver.fail_with = [503]  # hold the first batch up (the SDK retries it)
        _telemetry, warnings = _export(_spans(40), monkeypatch, receiver.endpoint, block=True,
                                      **env)
        assert warnings == [] and len(wire_spans(receiver)) == 40


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_per_signal_endpoints_and_protocols(protocol: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Traces over one protocol to one receiver, metrics over the other to another, each
    from its own variables; a gRPC endpoint without a scheme on 127.0.0.1 is plaintext."""
    other = "http" if protocol == "grpc" else "grpc"
    wire = {"grpc": "grpc", "http": "http/protobuf"}
    with OtlpReceiver(protocol) as traces, OtlpReceiver(other) as metrics:
        def endpoint(receiver: OtlpReceiver, path: str) -> str:
            if receiver.protocol == "grpc":
                return f"127.0.0.1:{receiver.port}"  # no scheme: the bug was a TLS attempt
            return receiver.endpoint + path

        _telemetry, warnings = _export(
            _spans(), monkeypatch,
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=endpoint(traces, "/v1/traces"),
            OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=wire[protocol],
            OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=endpoint(metrics, "/v1/metrics"),
            OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=wire[other])
        assert warnings == []
        assert len(wire_spans(traces)) == 3 and not traces.metrics()
        assert metrics.metrics() and not metrics.spans()


def test_insecure_decides_for_an_endpoint_without_a_scheme(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with OtlpReceiver("grpc") as receiver:
        where = f"127.0.0.1:{receiver.port}"
        _, warnings = _export(_spans(), monkeypatch, OTEL_EXPORTER_OTLP_ENDPOINT=where,
                              OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
                              OTEL_EXPORTER_OTLP_INSECURE="true", OTEL_METRICS_EXPORTER="none")
        assert warnings == [] and len(wire_spans(receiver)) == 3
    with OtlpReceiver("grpc") as receiver:
        where = f"127.0.0.1:{receiver.port}"
        # Told to use TLS, against a plaintext server: one line, no retry chatter.
        _, warnings = _export(_spans(), monkeypatch, OTEL_EXPORTER_OTLP_ENDPOINT=where,
                              OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
                              OTEL_EXPORTER_OTLP_TRACES_INSECURE="false",
                              OTEL_EXPORTER_OTLP_TIMEOUT="1", OTEL_METRICS_EXPORTER="none")
        assert [signal for _, signal in warnings] == ["traces"]
        assert warnings[0][0].startswith(f"OTLP traces export to {where} failed")
        assert not receiver.spans()


def test_none_switches_a_signal_off(monkeypatch: pytest.MonkeyPatch) -> None:
    with OtlpReceiver("http") as receiver:
        telemetry, _ = _export(_spans(), monkeypatch, receiver.endpoint,
                               OTEL_TRACES_EXPORTER="none")
        assert receiver.metrics() and not receiver.spans()
        assert set(telemetry.deliveries) == {"metrics"}
    monkeypatch.delenv("OTEL_TRACES_EXPORTER")
    with OtlpReceiver("http") as receiver:
        _export(_spans(), monkeypatch, receiver.endpoint, OTEL_METRICS_EXPORTER="none")
        assert receiver.spans() and not receiver.metrics()


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_a_traces_only_backend_is_one_warning_and_exit_0(
        stored: tuple[str, str], protocol: str) -> None:
    """Phoenix answers OTLP metrics with 405 (HTTP) or UNIMPLEMENTED (gRPC)."""
    db, rid = stored
    with OtlpReceiver("grpc" if protocol == "grpc" else "http",
                      refuse={"/v1/metrics": 405}) as receiver:
        env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
               "OTEL_EXPORTER_OTLP_PROTOCOL": protocol}
        proc = subprocess.run([sys.executable, "-m", "claudetrace", "otel", rid, "--db", db],
                              env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert len(wire_spans(receiver)) == 7
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 2, proc.stderr  # the warning, then what was exported
        assert lines[0].startswith("claudetrace: warning: OTLP metrics export to ")
        assert "OTEL_METRICS_EXPORTER=none" in lines[0]
        assert lines[1].startswith("exported 7 spans from 1 recording(s)")


def test_undelivered_traces_exit_1_in_one_line(stored: tuple[str, str]) -> None:
    db, rid = stored
    with OtlpReceiver("http", refuse={"/v1/traces": 400}) as receiver:
        env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        proc = subprocess.run([sys.executable, "-m", "claudetrace", "otel", rid, "--db", db],
                              env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "claudetrace: traces were not delivered: ")


def test_metrics_alone_that_fail_exit_1(stored: tuple[str, str]) -> None:
    db, rid = stored
    with OtlpReceiver("http", refuse={"/v1/metrics": 405}) as receiver:
        env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
               "OTEL_TRACES_EXPORTER": "none"}
        proc = subprocess.run([sys.executable, "-m", "claudetrace", "otel", rid, "--db", db],
                              env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1
        assert proc.stderr.strip().splitlines()[-1].startswith(
            "claudetrace: metrics were not delivered: ")
        assert not receiver.spans()
    with OtlpReceiver("http") as receiver:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
        proc = subprocess.run([sys.executable, "-m", "claudetrace", "otel", rid, "--db", db],
                              env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.startswith("exported the metrics of 1 recording(s) to ")
        assert receiver.metrics()


def test_console_beside_otlp(stored: tuple[str, str]) -> None:
    db, rid = stored
    with OtlpReceiver("http") as receiver:
        env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
               "OTEL_TRACES_EXPORTER": "otlp,console", "OTEL_METRICS_EXPORTER": "none"}
        proc = subprocess.run([sys.executable, "-m", "claudetrace", "otel", rid, "--db", db],
                              env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert len(wire_spans(receiver)) == 7
    # The SDK's console exporter prints each span as JSON.
    assert proc.stdout.count('"name": "execute_tool Bash"') == 1
    # Console alone needs no endpoint.
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none"}
    proc = subprocess.run([sys.executable, "-m", "claudetrace", "otel", rid, "--db", db],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count('"trace_id"') == 7


def test_a_users_hook_adds_processors(monkeypatch: pytest.MonkeyPatch) -> None:
    HOOKED.clear()
    with OtlpReceiver("http") as receiver:
        _export(_spans(), monkeypatch, receiver.endpoint,
                CLAUDETRACE_OTEL_HOOK="tests.otel_hook:hook")
        assert len(wire_spans(receiver)) == 3
    ((memory, readers),) = HOOKED
    assert readers == 1
    assert sorted(s.name for s in memory.get_finished_spans()) == [
        "execute_tool T0", "execute_tool T1", "execute_tool T2"]
    assert [s.context.span_id for s in memory.get_finished_spans()] == [1, 2, 3]


def test_a_bad_hook_or_exporter_name_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDETRACE_OTEL_HOOK", "tests.nowhere:hook")
    with pytest.raises(TelemetryError, match="CLAUDETRACE_OTEL_HOOK"):
        Telemetry(resolve_settings(endpoint="http://127.0.0.1:1"))
    monkeypatch.delenv("CLAUDETRACE_OTEL_HOOK")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "nosuchexporter")
    with pytest.raises(TelemetryError, match="no exporter named 'nosuchexporter'"):
        Telemetry(resolve_settings(endpoint="http://127.0.0.1:1"))


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")
def test_https_with_the_configured_certificate(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    # requests lets these beat the exporter's own certificate setting.
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    receiver = OtlpReceiver("http")
    receiver.tls = (str(cert), str(key))
    with receiver:
        assert receiver.endpoint.startswith("https://")
        _, warnings = _export(_spans(), monkeypatch, receiver.endpoint,
                              OTEL_EXPORTER_OTLP_CERTIFICATE=str(cert))
        assert warnings == [] and len(wire_spans(receiver)) == 3
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_CERTIFICATE")
        # Without it, the self-signed certificate is refused: one warning, no data.
        # (The Python SDK reads the timeout in seconds; 3 leaves room for one retry.)
        _, warnings = _export(_spans(), monkeypatch, receiver.endpoint,
                              OTEL_METRICS_EXPORTER="none", OTEL_EXPORTER_OTLP_TIMEOUT="3")
        assert [signal for _, signal in warnings] == ["traces"]
        assert "CERTIFICATE_VERIFY_FAILED" in warnings[0][0]
        assert len(wire_spans(receiver)) == 3


def test_an_unreachable_endpoint_fails_fast_in_one_line(stored: tuple[str, str]) -> None:
    import socket
    import time

    db, rid = stored
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    start = time.monotonic()
    result = CliRunner().invoke(cli, ["otel", rid, "--db", db, "--endpoint",
                                      f"http://127.0.0.1:{port}"])
    # Generous for a loaded machine: the exporter's retries would take 30 s.
    assert time.monotonic() - start < 10
    assert result.exit_code == 1
    assert result.output == (f"claudetrace: cannot reach the OTLP endpoint http://127.0.0.1:{port}"
                             ": Connection refused\n")


def test_a_content_export_says_a_backend_may_keep_the_plain_copy(
        stored: tuple[str, str]) -> None:
    db, rid = stored
    with OtlpReceiver("http") as receiver:
        result = CliRunner().invoke(cli, ["otel", rid, "--db", db, "--content", "--endpoint",
                                          receiver.endpoint])
    assert result.exit_code == 0, result.output
    assert "content spans keep the ids of a plain export" in result.output
    assert "(Phoenix) shows no content" in result.output


def test_a_running_session_s_spans_are_in_progress_not_failed(tmp_path: Path) -> None:
    # A real proxy still recording: its open turn is running, as show and the UI say.
    import json
    import time

    db = str(tmp_path / "live.db")
    proxy = subprocess.Popen(
        [sys.executable, "-m", "claudetrace", "proxy", "--db", db, "--", "cat"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert proxy.stdin is not None
    try:
        proxy.stdin.write(b'{"type":"user","message":{"role":"user","content":"x"}}\n')
        proxy.stdin.flush()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            listed = CliRunner().invoke(cli, ["sessions", "--db", db, "--json"])
            rows = json.loads(listed.output) if listed.exit_code == 0 else []
            if rows and rows[0].get("events"):
                break
            time.sleep(0.2)
        assert rows and rows[0]["status"] == "running"
        tree = CliRunner().invoke(cli, ["otel", "latest", "--db", db, "--tree"])
        assert tree.exit_code == 0 and "turn 1" in tree.output
        assert "error" not in tree.output
        report = tmp_path / "r.html"
        html = CliRunner().invoke(cli, ["export", "latest", "--db", db, "--format", "html",
                                        "-o", str(report)])
        assert html.exit_code == 0, html.output
        assert "the recording stopped before the CLI exited" not in report.read_text()
    finally:
        proxy.stdin.close()
        proxy.wait(timeout=60)


def test_a_since_that_matches_nothing_says_so(stored: tuple[str, str]) -> None:
    db, _rid = stored
    tree = CliRunner().invoke(cli, ["otel", "--since", "9999-12-31", "--tree", "--db", db])
    assert tree.exit_code == 0 and tree.stdout == ""
    assert tree.stderr == "no recordings matched\n"
