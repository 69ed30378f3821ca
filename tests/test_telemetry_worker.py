"""Live telemetry's worker process: it reads the capture beside the indexer."""

from __future__ import annotations

import dataclasses
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from claudetrace import capture as cap
from claudetrace.bench.proxy import STREAMING_CASSETTE
from claudetrace.cassette import read_cassette
from claudetrace.events import Event
from claudetrace.indexer import Indexer
from claudetrace.recording import RecordingInfo
from claudetrace.telemetry.records import SpanRecord
from claudetrace.telemetry.spans import SpanBuilder
from claudetrace.telemetry.worker import TelemetryWorker, _Follower, _thinking_fields
from tests.otlp_receiver import OtlpReceiver, wire_spans

WAIT_S = 60.0


def _write_capture(tmp_path: Path, *, end: bool = True, repeat: int = 1) -> cap.CaptureWriter:
    """The streaming session (deltas, thinking, tools) as a proxy would have captured it."""
    info = RecordingInfo.start(["claude", "--output-format", "stream-json"])
    writer = cap.CaptureWriter.create(cap.resolve_url(str(tmp_path / "w.db")), info)
    recorded = read_cassette(STREAMING_CASSETTE)
    for _ in range(repeat):
        for n, event in enumerate(recorded.events):
            if event.direction != "err":
                writer.feed(event.direction, event.data + b"\n")
            if n == 5:  # the CLI's stderr: lines of the recording too, numbered in order
                writer.feed("err", b"[warn] a line on stderr\n")
    if end:
        writer.close({"exit_code": 0, "ended_ns": time.time_ns()})
    return writer


class _Spans:
    """A sink as the worker sees it: a span builder, counting what it is fed."""

    def __init__(self, info: RecordingInfo) -> None:
        self.builder = SpanBuilder(info)
        self.fed = 0

    def on_events(self, events: list[Event]) -> None:
        self.fed += len(events)
        self.builder.feed_many(events)


class _NoStore:
    def create_recording(self, info: RecordingInfo) -> None:
        pass

    def write_batch(self, recording_id: str, batch: list[Event], updates: Any) -> None:
        pass


def _as_dicts(spans: list[SpanRecord]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(span) for span in spans]


def test_the_worker_builds_the_spans_the_indexer_built_reading_far_fewer_lines(
    tmp_path: Path,
) -> None:
    writer = _write_capture(tmp_path, repeat=3)
    # The worker's way: its own reading, chunks and thinking lines passed over.
    reader = cap.CaptureReader(writer.path)
    info = reader.info
    sink = _Spans(info)
    follower = _Follower(info, sink)
    while records := reader.read():
        for record in records:
            follower.feed(record)
    follower.finish()
    reader.close()
    assert follower.ended and info.exit_code == 0
    sink.builder.close(info)
    # The indexer's way: every line parsed and fed, as the in-process sink was.
    reader = cap.CaptureReader(writer.path)
    theirs = SpanBuilder(reader.info)

    class Feed:
        on_events = staticmethod(theirs.feed_many)

    indexer = Indexer(reader.info, _NoStore(), sinks=[Feed()])  # type: ignore[list-item]
    while records := reader.read():
        for record in records:
            indexer.feed(record)
    reader.close()
    theirs.close(indexer.info)
    lines = indexer.report.events
    assert lines > 1000 and sink.fed < lines / 3  # most lines were never parsed
    assert sink.builder.finished and _as_dicts(sink.builder.finished) == _as_dicts(
        theirs.finished)
    thinking = [s for s in theirs.finished if "claudetrace.thinking.updates" in s.attributes]
    assert thinking  # the counted thinking lines are in the comparison


def test_thinking_fields_are_read_only_when_certain() -> None:
    line = (b'{"type":"system","subtype":"thinking_tokens","estimated_tokens":42,'
            b'"parent_tool_use_id":null,"session_id":"s"}')
    assert _thinking_fields(line) == (None, 42)
    line = (b'{"type":"system","subtype":"thinking_tokens","parent_tool_use_id":"toolu_01A",'
            b'"estimated_tokens":7}')
    assert _thinking_fields(line) == ("toolu_01A", 7)
    for unsure in (
        b'{"type":"system","subtype":"thinking_tokens","estimated_tokens":4.5,'
        b'"parent_tool_use_id":null}',  # not an integer
        b'{"type":"system","subtype":"thinking_tokens","estimated_tokens":1,'
        b'"parent_tool_use_id":"a\\"b"}',  # an escaped quote in the id
        b'{"type":"system","subtype":"thinking_tokens","estimated_tokens":1,'
        b'"x":{"estimated_tokens":2},"parent_tool_use_id":null}',  # twice
        b'{"type":"system","subtype":"thinking_tokens","estimated_tokens":1,'
        b'"parent_tool_use_id":null,"x":{"parent_tool_use_id":"t"}}',  # twice
    ):
        assert _thinking_fields(unsure) is None, unsure
    # The main agent's lines have no lane at all.
    line = b'{"type":"system","subtype":"thinking_tokens","estimated_tokens":6,"uuid":"u"}'
    assert _thinking_fields(line) == (None, 6)


@pytest.fixture
def refusing_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_a_capture_without_an_end_is_exported_once_the_indexer_lets_go(tmp_path: Path) -> None:
    # The proxy died: no end record.  The worker follows until the indexer closes it.
    writer = _write_capture(tmp_path, end=False)
    with OtlpReceiver("http") as receiver:
        worker = TelemetryWorker(writer.path, {"endpoint": receiver.endpoint}, WAIT_S)
        time.sleep(0.3)  # it is following, and has found no end
        assert worker.proc.poll() is None
        worker.on_close(RecordingInfo(id="ignored", argv=[], started_ns=0))
        assert worker.proc.returncode == 0 and worker.warnings == []
        names = {s["name"] for s in wire_spans(receiver).values()}
    assert "invoke_agent claude-code" in names
    assert any(name.startswith("chat ") for name in names)


def test_the_workers_warnings_reach_the_indexer(tmp_path: Path, refusing_port: int) -> None:
    writer = _write_capture(tmp_path)
    worker = TelemetryWorker(writer.path, {"endpoint": f"http://127.0.0.1:{refusing_port}"},
                             WAIT_S)
    worker.on_close(RecordingInfo(id="ignored", argv=[], started_ns=0))
    assert len(worker.warnings) == 1 and "OTLP export to" in worker.warnings[0]


def test_a_worker_that_cannot_read_the_capture_is_one_warning(tmp_path: Path) -> None:
    worker = TelemetryWorker(tmp_path / "gone.capture", {"endpoint": "http://127.0.0.1:9"},
                             WAIT_S)
    worker.on_close(RecordingInfo(id="ignored", argv=[], started_ns=0))
    assert worker.proc.returncode == 0
    assert len(worker.warnings) == 1
    assert worker.warnings[0].startswith("live telemetry stopped: "), worker.warnings
    assert json.dumps(worker.warnings)  # storable as they are
