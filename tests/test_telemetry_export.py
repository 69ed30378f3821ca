"""OTLP over the wire: backfill and live export to a receiver on 127.0.0.1 (HTTP and gRPC)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace.cassette import read_cassette
from claudetrace.cli import cli
from claudetrace.recording import RecordingInfo
from claudetrace.store import open_store
from claudetrace.telemetry import build_spans
from claudetrace.telemetry import conventions as c
from claudetrace.telemetry.live import LiveTelemetry, live_sink
from tests.otlp_receiver import OtlpReceiver, attrs

FIXTURES = Path(__file__).parent / "fixtures" / "telemetry"
CONTRACT = {
    c.METRIC_TOKEN_USAGE, c.METRIC_OPERATION_DURATION, c.METRIC_SESSION_COST,
    c.METRIC_SESSION_COUNT, c.METRIC_TOOL_CALLS, c.METRIC_TOOL_DURATION,
    c.METRIC_CONTROL_DURATION, c.METRIC_PERMISSION_DECISIONS, c.METRIC_PERMISSION_WAIT,
}


def wire_spans(receiver: OtlpReceiver) -> dict[str, dict[str, Any]]:
    """Received spans by hex span id, as comparable dicts."""
    out = {}
    for span in receiver.spans():
        out[span.span_id.hex()] = {
            "name": span.name,
            "trace": span.trace_id.hex(),
            "parent": span.parent_span_id.hex(),
            "start": span.start_time_unix_nano,
            "end": span.end_time_unix_nano,
            "attributes": attrs(span.attributes),
            "status": span.status.code,
            "events": [e.name for e in span.events],
        }
    return out


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


def _fake_cli(tmp_path: Path, cassette: Path) -> Path:
    """A script that plays a recording's CLI side: waits for each host line, prints its own."""
    script = tmp_path / "fake_claude.py"
    script.write_text(
        "import json, sys\n"
        f"lines = [json.loads(l) for l in open({str(cassette)!r}, encoding='utf-8')][1:]\n"
        "for rec in lines:\n"
        "    if rec['dir'] == 'in':\n"
        "        sys.stdin.readline()\n"
        "    elif rec['dir'] == 'out':\n"
        "        sys.stdout.write(rec['line'] + '\\n'); sys.stdout.flush()\n",
        encoding="utf-8",
    )
    return script


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_live_proxy_export_equals_backfill(tmp_path: Path, db_path: Path, protocol: str) -> None:
    cassette = FIXTURES / "mcp_tool.cassette.ndjson"
    host_lines = "".join(
        json.loads(line)["line"] + "\n"
        for line in cassette.read_text(encoding="utf-8").splitlines()[1:]
        if json.loads(line)["dir"] == "in"
    )
    kind = "grpc" if protocol == "grpc" else "http"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    with OtlpReceiver(kind) as live:
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=live.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL=protocol)
        proc = subprocess.run(
            [sys.executable, "-m", "claudetrace", "proxy", "--db", str(db_path), "--",
             sys.executable, str(_fake_cli(tmp_path, cassette))],
            input=host_lines.encode(), capture_output=True, env=env, timeout=60,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        assert b"warning" not in proc.stderr
        live_spans = wire_spans(live)
    assert any(s["name"] == "tools/call calc" for s in live_spans.values())
    store = open_store(str(db_path))
    rid = store.resolve("latest").id
    with OtlpReceiver(kind) as again:
        result = CliRunner().invoke(cli, [
            "otel", rid, "--db", str(db_path), "--endpoint", again.endpoint, "--protocol", protocol,
        ])
        assert result.exit_code == 0, result.output
        assert wire_spans(again) == live_spans


def test_unreachable_collector_costs_one_warning(capsys: pytest.CaptureFixture[str]) -> None:
    cassette = read_cassette(FIXTURES / "plain.cassette.ndjson")
    info = RecordingInfo(id="01UNREACHABLE", argv=[], started_ns=time.time_ns())
    sink = live_sink(info, endpoint="http://127.0.0.1:9", environ={})
    assert isinstance(sink, LiveTelemetry)
    began = time.monotonic()
    for event in cassette.events:
        sink.on_event(event)
    fed = time.monotonic() - began
    info.ended_ns, info.exit_code = time.time_ns(), 0
    sink.on_close(info)
    assert fed < 1.0  # exporting never blocks the events
    assert time.monotonic() - began < 6.0  # bounded flush
    err = capsys.readouterr().err
    assert err.count("warning") == 1 and "127.0.0.1:9" in err
