"""Live telemetry's worker process: it reads the capture beside the indexer."""

from __future__ import annotations

import dataclasses
import json
import random
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claudetrace import capture as cap
from claudetrace.bench.proxy import STREAMING_CASSETTE
from claudetrace.cassette import read_cassette
from claudetrace.indexer import Indexer
from claudetrace.model.events import Direction, Event
from claudetrace.recording import RecordingInfo
from claudetrace.telemetry.records import SpanRecord
from claudetrace.telemetry.spans import SpanBuilder
from claudetrace.telemetry.worker import (
    TelemetryWorker,
    _Follower,
    _run_fields,
    _thinking_fields,
    run,
)
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

    def wait_written(self) -> None:
        pass


def _as_dicts(spans: list[SpanRecord]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(span) for span in spans]


def _both_ways(path: Path) -> tuple[SpanBuilder, _Spans, int]:
    """The spans of the capture at ``path`` as the indexer built them in process (every
    line parsed and fed) and as the worker builds them; and how many lines there are."""
    # The worker's way: its own reading, chunks and thinking lines passed over.
    reader = cap.CaptureReader(path)
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
    reader = cap.CaptureReader(path)
    theirs = SpanBuilder(reader.info)

    class Feed:
        on_events = staticmethod(theirs.feed_many)

    indexer = Indexer(reader.info, _NoStore(), sinks=[Feed()])  # type: ignore[list-item]
    while records := reader.read():
        for record in records:
            indexer.feed(record)
    reader.close()
    theirs.close(indexer.info)
    return theirs, sink, indexer.report.events


def test_the_worker_builds_the_spans_the_indexer_built_reading_far_fewer_lines(
    tmp_path: Path,
) -> None:
    writer = _write_capture(tmp_path, repeat=3)
    theirs, sink, lines = _both_ways(writer.path)
    assert lines > 1000 and sink.fed < lines / 3  # most lines were never parsed
    assert sink.builder.finished and _as_dicts(sink.builder.finished) == _as_dicts(
        theirs.finished)
    thinking = [s for s in theirs.finished if "claudetrace.thinking.updates" in s.attributes]
    assert thinking  # the counted thinking lines are in the comparison


_THINKING_PREFIX = b'{"type":"system","subtype":"thinking_tokens",'
#: Thinking progress lines as the CLI might also write them: with a lane (none, a
#: subagent's, or a lane opened below), the estimate elsewhere or not an integer,
#: a lane key nested once more.
_THINKING_VARIANTS = (
    lambda rest: b'"parent_tool_use_id":null,' + rest,
    lambda rest: b'"parent_tool_use_id":"toolu_elsewhere",' + rest,
    lambda rest: b'"parent_tool_use_id":"toolu_sub",' + rest,
    lambda rest: rest.replace(b'"estimated_tokens":', b'"estimated_tokens":0.5,"was":', 1),
    lambda rest: rest.replace(b'"estimated_tokens":', b'"estimated_tokens":"7","was":', 1),
    lambda rest: b'"x":{"parent_tool_use_id":"toolu_sub"},' + rest,
    lambda rest: rest[:-1] + b',"parent_tool_use_id":"toolu_sub"}',
)


def _varied_session(rng: random.Random, odd: float) -> list[tuple[Direction, bytes]]:
    """The streaming session's lines, each thinking line turned into a variant with
    chance ``odd``, and one model call in two moved to a subagent's lane."""
    lines = []
    lane = False
    for event in read_cassette(STREAMING_CASSETTE).events:
        data = event.data
        if b'"type":"message_start"' in data:
            lane = rng.random() < 0.5
        if lane and data.startswith(b'{"type":"stream_event"'):
            data = data.replace(b'"parent_tool_use_id":null', b'"parent_tool_use_id":"toolu_sub"')
        if data.startswith(_THINKING_PREFIX):
            rest = data[len(_THINKING_PREFIX):]
            if lane:
                rest = b'"parent_tool_use_id":"toolu_sub",' + rest
            elif rng.random() < odd:
                rest = rng.choice(_THINKING_VARIANTS)(rest)
            data = _THINKING_PREFIX + rest
        lines.append((event.direction, data))
    return lines


def _write_chunked(tmp_path: Path, lines: list[tuple[Direction, bytes]],
                   rng: random.Random) -> Path:
    """A capture of ``lines`` in chunks as a proxy reads them: runs of one direction
    cut at random places, mid-line too, up to a few kilobytes."""
    info = RecordingInfo.start(["claude", "--output-format", "stream-json"])
    writer = cap.CaptureWriter.create(cap.resolve_url(str(tmp_path / "w.db")), info)
    at = 0
    while at < len(lines):
        direction = lines[at][0]
        run = []
        while at < len(lines) and lines[at][0] == direction:
            run.append(lines[at][1] + b"\n")
            at += 1
        data = b"".join(run)
        while data:
            cut = rng.randint(1, 4096)
            writer.feed(direction, data[:cut])
            data = data[cut:]
    writer.close({"exit_code": 0, "ended_ns": time.time_ns()})
    return writer.path


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), odd=st.sampled_from([0.0, 0.02, 0.3, 1.0]))
def test_the_worker_builds_the_indexers_spans_whatever_the_chunks_and_thinking_lines(
    tmp_path_factory: pytest.TempPathFactory, seed: int, odd: float,
) -> None:
    # Runs of thinking lines counted at once, line by line, or fed; subagent lanes;
    # chunks that end anywhere: the spans must not tell.
    rng = random.Random(seed)
    path = _write_chunked(tmp_path_factory.mktemp("chunked"), _varied_session(rng, odd), rng)
    theirs, sink, lines = _both_ways(path)
    assert _as_dicts(sink.builder.finished) == _as_dicts(theirs.finished)
    assert sink.fed < lines / 2


def test_a_run_of_thinking_lines_is_read_at_once_only_when_every_line_is_certain() -> None:
    def line(middle: bytes) -> bytes:
        return _THINKING_PREFIX + middle + b'"session_id":"s"}'

    plain = [line(b'"estimated_tokens":%d,' % n) for n in (1, 5, 9)]
    assert _run_fields(plain) == (None, 9)
    nulls = [line(b'"estimated_tokens":%d,"parent_tool_use_id":null,' % n) for n in (1, 2)]
    assert _run_fields(nulls) == (None, 2)
    sub = [line(b'"parent_tool_use_id":"toolu_1","estimated_tokens":%d,' % n) for n in (3, 4)]
    assert _run_fields(sub) == ("toolu_1", 4)
    # Only the last line's estimate counts; an earlier one may be anything.
    assert _run_fields([line(b'"estimated_tokens":"x",'), *plain]) == (None, 9)
    other = line(b'"parent_tool_use_id":"toolu_2","estimated_tokens":1,')
    twice = line(b'"parent_tool_use_id":"toolu_1","x":{"parent_tool_use_id":"toolu_1"},'
                 b'"estimated_tokens":1,')
    for unsure in (
        [*plain[:2], other, plain[2]],  # another lane among them
        [other, *plain],  # the same, first
        [*sub, plain[0]],  # the last has no lane, the others have one
        [plain[0], *sub],  # the last has a lane, another has none
        [twice, plain[0], sub[1]],  # as many lane keys as lines, not one per line
        [*plain, line(b'"estimated_tokens":2.5,')],  # the last estimate is no integer
    ):
        assert _run_fields(unsure) is None, unsure


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
    assert len(worker.warnings) == 1 and "OTLP traces export to" in worker.warnings[0]


def test_a_worker_that_cannot_read_the_capture_is_one_warning(tmp_path: Path) -> None:
    worker = TelemetryWorker(tmp_path / "gone.capture", {"endpoint": "http://127.0.0.1:9"},
                             WAIT_S)
    worker.on_close(RecordingInfo(id="ignored", argv=[], started_ns=0))
    assert worker.proc.returncode == 0
    assert len(worker.warnings) == 1
    assert worker.warnings[0].startswith("live telemetry stopped: "), worker.warnings
    assert json.dumps(worker.warnings)  # storable as they are


def test_set_up_runs_once_the_sink_is_ready_and_before_any_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The worker's main freezes what is set up by then (gc.freeze): the modules and
    # the exporter, not the lines' objects.
    writer = _write_capture(tmp_path)
    fed: list[int] = []
    feed = _Follower.feed
    monkeypatch.setattr(_Follower, "feed", lambda self, record: (fed.append(1),
                                                                 feed(self, record))[1])
    calls: list[int] = []
    with OtlpReceiver("http") as receiver:
        kept = run(writer.path, {"endpoint": receiver.endpoint}, None,
                   set_up=lambda: calls.append(len(fed)))
        assert kept["warnings"] == [] and calls == [0] and fed and receiver.trace_requests
        # The metrics went out: the recording will say where (a backfill skips them).
        assert kept["extra"] == {"live_metrics": receiver.endpoint}, kept
    off = run(writer.path, {"environ": {}}, None, set_up=lambda: calls.append(-1))
    assert off == {"warnings": [], "extra": {}}
    assert calls == [0]  # telemetry off: no sink, nothing set up


def test_the_console_exporter_writes_where_the_session_stderr_goes(tmp_path: Path) -> None:
    """The worker's stdout carries its warnings to the indexer; console output goes to
    stderr, which the proxy relays."""
    import os
    import subprocess
    import sys

    writer = _write_capture(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(OTEL_TRACES_EXPORTER="console", OTEL_METRICS_EXPORTER="none")
    proc = subprocess.run([sys.executable, "-m", "claudetrace.telemetry.worker",
                           str(writer.path), "--otel", "{}"], env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=WAIT_S)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"warnings": [], "extra": {}}  # no OTLP metrics
    assert proc.stderr.count('"name": "invoke_agent claude-code"') == 1
