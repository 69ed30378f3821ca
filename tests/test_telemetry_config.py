"""OTLP settings from flags and OTEL_* variables, and metrics derived from spans."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from claudetrace.cassette import read_cassette
from claudetrace.errors import TelemetryError
from claudetrace.recording import RecordingInfo
from claudetrace.telemetry import build_spans
from claudetrace.telemetry import conventions as c
from claudetrace.telemetry.config import (
    DEFAULT_EXPORT_TIMEOUT_S,
    export_timeout,
    parse_key_values,
    resolve_settings,
)
from claudetrace.telemetry.metrics import INSTRUMENTS, measurements

FIXTURES = Path(__file__).parent / "fixtures" / "telemetry"


def test_off_without_endpoint() -> None:
    assert not resolve_settings(environ={}).enabled


def test_generic_endpoint_gets_signal_paths_for_http() -> None:
    s = resolve_settings(environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"})
    assert s.protocol == "http/protobuf"
    assert s.traces_endpoint == "http://collector:4318/v1/traces"
    assert s.metrics_endpoint == "http://collector:4318/v1/metrics"


def test_flag_beats_environment_and_grpc_keeps_the_url() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    s = resolve_settings(endpoint="http://flag:4317", environ=env)
    assert (s.protocol, s.traces_endpoint, s.metrics_endpoint) == (
        "grpc", "http://flag:4317", "http://flag:4317",
    )


def test_signal_specific_endpoint_is_used_as_given() -> None:
    s = resolve_settings(environ={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1/custom"})
    assert s.traces_endpoint == "http://t:1/custom" and s.metrics_endpoint is None


@pytest.mark.parametrize(
    ("env", "traces", "metrics"),
    [
        ({"OTEL_TRACES_EXPORTER": "none"}, False, True),
        ({"OTEL_METRICS_EXPORTER": "none"}, True, False),
        ({"OTEL_SDK_DISABLED": "true"}, False, False),
    ],
)
def test_exporters_can_be_switched_off(env: dict[str, str], traces: bool, metrics: bool) -> None:
    s = resolve_settings(environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", **env})
    assert (bool(s.traces_endpoint), bool(s.metrics_endpoint)) == (traces, metrics)


def test_service_name_resource_and_content() -> None:
    s = resolve_settings(environ={
        "OTEL_SERVICE_NAME": "agents",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=ci,team=a%2Cb",
        "CLAUDETRACE_OTEL_CAPTURE_CONTENT": "true",
        "CLAUDETRACE_OTEL_CONTENT_LIMIT": "100",
    })
    assert s.resource == {"deployment.environment": "ci", "team": "a,b", "service.name": "agents"}
    assert s.content.enabled and s.content.limit == 100
    assert not resolve_settings(capture_content=False, environ={
        "CLAUDETRACE_OTEL_CAPTURE_CONTENT": "1"}).content.enabled
    assert parse_key_values("broken,k=v") == {"k": "v"}


def test_bad_protocol_is_a_telemetry_error() -> None:
    with pytest.raises(TelemetryError, match="unsupported OTLP protocol"):
        resolve_settings(protocol="thrift", environ={})


def test_the_export_timeout_is_read_in_milliseconds_the_signals_own_first() -> None:
    assert export_timeout({}, "traces") == DEFAULT_EXPORT_TIMEOUT_S == 5.0
    env = {"OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": " 750 "}
    assert export_timeout(env, "traces") == 2.5
    assert export_timeout(env, "metrics") == 0.75


@pytest.mark.parametrize("env, named", [
    ({"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, "OTEL_EXPORTER_OTLP_TIMEOUT='soon'"),
    ({"OTEL_EXPORTER_OTLP_TIMEOUT": "0"}, "OTEL_EXPORTER_OTLP_TIMEOUT='0'"),
    ({"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "-5"}, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT='-5'"),
    ({"OTEL_EXPORTER_OTLP_TIMEOUT": "1", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "inf"},
     "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT='inf'"),
    ({"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "nan"}, "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT='nan'"),
])
def test_a_bad_export_timeout_is_named_when_the_settings_are_resolved(
    env: dict[str, str], named: str
) -> None:
    with pytest.raises(TelemetryError, match=re.escape(named) + " is not a positive number"):
        resolve_settings(endpoint="http://127.0.0.1:4318", environ=env)
    # Unread while its signal is off.
    off = {**env, "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}
    assert not resolve_settings(endpoint="http://127.0.0.1:4318", environ=off).enabled


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
    assert cost[0].attributes == {c.GEN_AI_REQUEST_MODEL: "claude-opus-5-5"} and cost[0].value > 0
