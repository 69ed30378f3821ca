"""The recorder off the hot path (claudetrace.recorder), against fake stores."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from claudetrace.cassette import read_cassette
from claudetrace.errors import StoreError
from claudetrace.events import Event
from claudetrace.recorder import Recorder
from claudetrace.recording import RecordingInfo


class FakeStore:
    """Keeps batches in memory; can be slow, failing, or stuck."""

    def __init__(self, *, delay: float = 0.0, fail_times: int = 0, stuck_after: int | None = None):
        self.delay = delay
        self.fail_times = fail_times
        self.stuck_after = stuck_after
        self.unstick = threading.Event()
        self.created: list[str] = []
        self.events: list[Event] = []
        self.updates: list[dict[str, Any]] = []
        self.writes = 0

    def create_recording(self, info: RecordingInfo) -> None:
        self.created.append(info.id)

    def write_batch(
        self, recording_id: str, events: Sequence[Event], updates: dict[str, Any] | None = None
    ) -> None:
        if self.fail_times:
            self.fail_times -= 1
            raise StoreError("database is locked")
        if self.stuck_after is not None and self.writes >= self.stuck_after:
            self.unstick.wait()
            raise StoreError("gave up")
        time.sleep(self.delay)
        self.writes += 1
        self.events.extend(events)
        self.updates.append(dict(updates or {}))


def make(store: FakeStore, tmp_path: Path, **kw: Any) -> Recorder:
    info = RecordingInfo.start(["claude", "-p"])
    recorder = Recorder(
        info, lambda: store, spool_dir=tmp_path, unsaved_dir=tmp_path / "unsaved", **kw
    )
    recorder.start()
    return recorder


def lines(n: int, width: int = 100) -> list[bytes]:
    return [b'{"type":"stream_event","n":%d,"pad":"%s"}' % (i, b"p" * width) for i in range(n)]


def feed_in_chunks(recorder: Recorder, data: bytes, size: int = 4096) -> None:
    for i in range(0, len(data), size):
        recorder.feed("out", data[i : i + size])


def test_every_line_is_stored_in_order_with_the_end_status(tmp_path: Path) -> None:
    store = FakeStore()
    recorder = make(store, tmp_path)
    expected = lines(2000)
    feed_in_chunks(recorder, b"\n".join(expected) + b"\n" + b"partial", size=777)
    recorder.feed("err", b"oops\n")
    recorder.info.exit_code = 0
    recorder.info.ended_ns = time.time_ns()
    report = recorder.close(timeout=5)
    assert report.problems() == []
    outs = [e for e in store.events if e.direction == "out"]
    assert [e.data for e in outs] == [*expected, b"partial"]
    assert outs[-1].eol is False and all(e.eol for e in outs[:-1])
    assert [e.seq for e in store.events] == list(range(len(store.events)))
    assert store.updates[-1]["exit_code"] == 0 and store.updates[-1]["ended_ns"]
    assert store.updates[-1]["event_count"] == 2002
    assert report.stored == report.events == 2002


def test_the_partial_last_line_keeps_the_time_its_bytes_arrived(tmp_path: Path) -> None:
    store = FakeStore()
    recorder = make(store, tmp_path)
    recorder.feed("out", b"no newline")
    time.sleep(0.3)
    recorder.close(timeout=5)
    [event] = store.events
    assert event.eol is False and event.t_ns < 200_000_000


def test_a_slow_store_spools_and_loses_nothing(tmp_path: Path) -> None:
    store = FakeStore(delay=0.2)
    recorder = make(store, tmp_path, queue_limit=64 * 1024)
    expected = lines(20000)
    feed_in_chunks(recorder, b"\n".join(expected) + b"\n")
    # (The file itself may already be taken and unlinked by the recorder thread.)
    assert recorder.report.spooled_chunks > 0, "a slow store must spill to the spool file"
    report = recorder.close(timeout=30)
    assert report.problems() == []
    assert [e.data for e in store.events] == expected
    assert [e.seq for e in store.events] == list(range(20000))


def test_a_store_that_fails_then_recovers(tmp_path: Path) -> None:
    store = FakeStore(fail_times=2)
    recorder = make(store, tmp_path)
    recorder.feed("out", b"a\nb\n")
    report = recorder.close(timeout=10)
    assert [e.data for e in store.events] == [b"a", b"b"]
    assert report.unsaved == 0 and report.store_error is None


def test_a_store_that_never_works_saves_an_unsaved_cassette(tmp_path: Path) -> None:
    store = FakeStore(fail_times=10**9)
    recorder = make(store, tmp_path, queue_limit=1024)
    expected = lines(300)
    feed_in_chunks(recorder, b"\n".join(expected) + b"\ntail", size=500)
    report = recorder.close(timeout=0.5)
    assert report.unsaved == 301 and report.stored == 0
    [problem] = report.problems()
    assert "301 of 301 events could not be stored (database is locked)" in problem
    assert report.unsaved_path and f"claudetrace import {report.unsaved_path}" in problem
    saved = read_cassette(report.unsaved_path)
    assert [e.data for e in saved.events] == [*expected, b"tail"]
    assert [e.seq for e in saved.events] == list(range(301))
    assert saved.events[-1].eol is False
    assert saved.header["recording_id"] == recorder.info.id


def test_a_store_stuck_mid_stream_loses_nothing_between_db_and_file(tmp_path: Path) -> None:
    # One batch gets in, then the store hangs while chunks sit in the queue, in
    # the thread's hands and in the spool: close() must account for all of them.
    store = FakeStore(stuck_after=1)
    recorder = make(store, tmp_path, queue_limit=8 * 1024)
    expected = lines(3000)
    data = b"\n".join(expected) + b"\n"
    feed_in_chunks(recorder, data[: len(data) // 10], size=1000)
    time.sleep(0.5)  # the first batch is written, the thread now hangs on the second
    feed_in_chunks(recorder, data[len(data) // 10 :], size=1000)
    report = recorder.close(timeout=0.5)
    store.unstick.set()
    assert report.unsaved_path
    saved = read_cassette(report.unsaved_path)
    got = [e.data for e in store.events] + [e.data for e in saved.events]
    assert got == expected
    assert [e.seq for e in saved.events] == list(range(len(store.events), 3000))


def test_a_broken_sink_is_dropped_and_reported(tmp_path: Path) -> None:
    class Broken:
        def child_env(self) -> dict[str, str]:
            return {}

        def on_event(self, event: Event) -> None:
            raise ValueError("boom")

        def on_close(self, info: RecordingInfo) -> None:
            raise AssertionError("not called once disabled")

    store = FakeStore()
    recorder = make(store, tmp_path, sinks=[Broken()])
    recorder.feed("out", b"x\ny\n")
    report = recorder.close(timeout=5)
    assert [e.data for e in store.events] == [b"x", b"y"]
    assert report.sink_errors == ["Broken disabled after error: ValueError: boom"]


def test_sinks_see_every_event_with_fields_then_close(tmp_path: Path) -> None:
    seen: list[tuple[int, str | None]] = []
    closed: list[RecordingInfo] = []

    class Sink:
        def child_env(self) -> dict[str, str]:
            return {}

        def on_event(self, event: Event) -> None:
            seen.append((event.seq, event.fields.type))

        def on_close(self, info: RecordingInfo) -> None:
            closed.append(info)

    recorder = make(FakeStore(), tmp_path, sinks=[Sink()])
    recorder.feed("in", b'{"type":"user"}\n')
    recorder.feed("out", b'{"type":"result"}\nnot json\n')
    recorder.close(timeout=5)
    assert seen == [(0, "user"), (1, "result"), (2, None)]
    assert closed == [recorder.info]


def test_an_unwritable_spool_is_counted_not_silent(tmp_path: Path) -> None:
    store = FakeStore(stuck_after=0)
    info = RecordingInfo.start(["x"])
    recorder = Recorder(
        info,
        lambda: store,
        spool_dir=tmp_path / "missing-dir",
        unsaved_dir=tmp_path,
        queue_limit=10,
    )
    recorder.start()
    recorder.feed("out", b"0123456789\n")  # fits the queue
    time.sleep(0.2)
    recorder.feed("out", b"too much for the queue\n")
    report = recorder.close(timeout=0.3)
    store.unstick.set()
    assert report.lost_chunks >= 1
    assert any("forwarded but not recorded" in p for p in report.problems())


@pytest.mark.parametrize("direction", ["in", "out", "err"])
def test_directions_keep_their_own_framing(tmp_path: Path, direction: str) -> None:
    store = FakeStore()
    recorder = make(store, tmp_path)
    recorder.feed(direction, b"ab")  # type: ignore[arg-type]
    recorder.feed("out" if direction != "out" else "in", b"zz\n")
    recorder.feed(direction, b"c\n")  # type: ignore[arg-type]
    recorder.close(timeout=5)
    assert sorted((e.direction, e.data) for e in store.events) == sorted(
        [(direction, b"abc"), ("out" if direction != "out" else "in", b"zz")]
    )
