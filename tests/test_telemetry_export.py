"""OTLP over the wire: backfill (``claudetrace otel``) to a receiver on 127.0.0.1 (HTTP and gRPC).

Live export from a proxied session is in ``test_telemetry_live.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from claudetrace.cassette import read_cassette
from claudetrace.cli import cli
from claudetrace.store import open_store
from claudetrace.telemetry import build_spans
from claudetrace.telemetry import conventions as c
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
