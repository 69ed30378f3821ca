"""OTLP settings from flags and OTEL_* variables, and metrics derived from spans."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from claudetrace.cassette import read_cassette
from claudetrace.errors import TelemetryError
from claudetrace.recording import RecordingInfo
from claudetrace.telemetry import build_spans
from claudetrace.telemetry import conventions as c
from claudetrace.telemetry.config import resolve_settings
from claudetrace.telemetry.metrics import INSTRUMENTS, measurements

FIXTURES = Path(__file__).parent / "fixtures" / "telemetry"


def test_off_without_endpoint() -> None:
    assert not resolve_settings(environ={}).enabled
    # Only the OTLP exporter needs an endpoint: console alone is on.
    s = resolve_settings(environ={"OTEL_TRACES_EXPORTER": "console"})
    assert s.traces.exporters == ("console",) and not s.metrics.enabled


def test_an_endpoint_turns_otlp_on_for_both_signals() -> None:
    s = resolve_settings(environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"})
    assert s.traces.exporters == s.metrics.exporters == ("otlp",)
    assert s.traces.protocol == s.metrics.protocol == "http/protobuf"
    assert s.traces.endpoint is None  # the SDK reads the variable itself


def test_a_signals_own_endpoint_turns_on_that_signal_only() -> None:
    s = resolve_settings(environ={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1/custom"})
    assert s.traces.otlp and not s.metrics.enabled
    assert s.traces.where({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1/custom"},
                          "traces") == "http://t:1/custom"


def test_the_signals_own_protocol_wins_then_the_generic_one_then_the_flag_over_all() -> None:
    """The old code read OTEL_EXPORTER_OTLP_PROTOCOL before …_TRACES_PROTOCOL and never
    …_METRICS_PROTOCOL."""
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
           "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf"}
    s = resolve_settings(environ=env)
    assert (s.traces.protocol, s.metrics.protocol) == ("grpc", "http/protobuf")
    env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
    env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf"
    env["OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"] = "grpc"
    s = resolve_settings(environ=env)
    assert (s.traces.protocol, s.metrics.protocol) == ("http/protobuf", "grpc")
    s = resolve_settings(endpoint="http://flag:4317", protocol="grpc", environ=env)
    assert (s.traces.protocol, s.metrics.protocol) == ("grpc", "grpc")
    assert s.traces.endpoint == s.metrics.endpoint == "http://flag:4317"


@pytest.mark.parametrize(
    ("env", "traces", "metrics"),
    [
        ({"OTEL_TRACES_EXPORTER": "none"}, (), ("otlp",)),
        ({"OTEL_METRICS_EXPORTER": "none"}, ("otlp",), ()),
        ({"OTEL_TRACES_EXPORTER": "otlp, console"}, ("otlp", "console"), ("otlp",)),
        ({"OTEL_SDK_DISABLED": "true"}, (), ()),
    ],
)
def test_exporters_per_signal(env: dict[str, str], traces: tuple[str, ...],
                              metrics: tuple[str, ...]) -> None:
    s = resolve_settings(environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", **env})
    assert (s.traces.exporters, s.metrics.exporters) == (traces, metrics)


def test_content_policy_and_hook() -> None:
    s = resolve_settings(environ={
        "CLAUDETRACE_OTEL_CAPTURE_CONTENT": "true",
        "CLAUDETRACE_OTEL_CONTENT_LIMIT": "100",
        "CLAUDETRACE_OTEL_HOOK": "pkg.mod:configure",
    })
    assert s.content.enabled and s.content.limit == 100
    assert s.hook == "pkg.mod:configure"
    assert not resolve_settings(capture_content=False, environ={
        "CLAUDETRACE_OTEL_CAPTURE_CONTENT": "1"}).content.enabled


def test_bad_protocol_is_a_telemetry_error_naming_its_variable() -> None:
    with pytest.raises(TelemetryError, match="unsupported OTLP protocol"):
        resolve_settings(protocol="thrift", endpoint="http://c:1", environ={})
    with pytest.raises(TelemetryError, match="OTEL_EXPORTER_OTLP_METRICS_PROTOCOL='json'"):
        resolve_settings(environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:1",
                                  "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "json"})


def test_live_sink_off_does_not_import_opentelemetry() -> None:
    code = (
        "import sys\n"
        "from claudetrace.recording import RecordingInfo\n"
        "from claudetrace.telemetry.live import live_sink\n"
        "info = RecordingInfo(id='x', argv=[], started_ns=0)\n"
        "assert live_sink(info, environ={}) is None\n"
        "assert live_sink(info, environ={'OTEL_EXPORTER_OTLP_ENDPOINT': 'http://c:1',"
        " 'OTEL_SDK_DISABLED': 'true'}) is None\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def _spans(name: str) -> list:
    cassette = read_cassette(FIXTURES / f"{name}.cassette.ndjson")
    h = cassette.header
    info = RecordingInfo(id=h["recording_id"], argv=[], started_ns=h["started_ns"],
                         ended_ns=h["ended_ns"], exit_code=h["exit_code"], model=h["model"])
    return build_spans(info, cassette.events)


def test_metrics_follow_the_contract() -> None:
    assert {i.name for i in INSTRUMENTS} == {
        "gen_ai.client.token.usage", "gen_ai.client.operation.duration", "claudetrace.session.cost",
        "claudetrace.session.count", "claudetrace.tool.calls", "claudetrace.tool.duration",
        "claudetrace.control.duration", "claudetrace.permission.decisions",
        "claudetrace.permission.wait",
    }
    values = [m for span in _spans("permission_deny") for m in measurements(span)]
    by_name: dict[str, list] = {}
    for m in values:
        by_name.setdefault(m.instrument, []).append(m)
    assert [m.attributes for m in by_name["claudetrace.tool.calls"]] == [
        {c.GEN_AI_TOOL_NAME: "Bash", c.TOOL_OUTCOME: "error"}
    ]
    assert [m.attributes for m in by_name["claudetrace.permission.decisions"]] == [
        {c.GEN_AI_TOOL_NAME: "Bash", c.PERMISSION_DECISION: "deny"}
    ]
    tokens = by_name["gen_ai.client.token.usage"]
    assert {m.attributes[c.GEN_AI_TOKEN_TYPE] for m in tokens} == {"input", "output"}
    assert all(m.attributes[c.GEN_AI_PROVIDER_NAME] == "anthropic" for m in tokens)
    assert [m.attributes for m in by_name["claudetrace.session.count"]] == [
        {c.SESSION_OUTCOME: "ok"}
    ]
    controls = by_name["claudetrace.control.duration"]
    pairs = {(m.attributes[c.CONTROL_SUBTYPE], m.attributes[c.CONTROL_INITIATOR]) for m in controls}
    assert pairs == {("initialize", "host"), ("can_use_tool", "cli")}
    cost = by_name["claudetrace.session.cost"]
    assert cost[0].attributes == {
        c.GEN_AI_REQUEST_MODEL: "claude-opus-5-5", c.COST_SOURCE: "cli"
    } and cost[0].value > 0
