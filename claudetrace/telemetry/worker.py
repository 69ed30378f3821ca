"""Live telemetry in a process of its own, beside the indexer.

``python -m claudetrace.telemetry.worker CAPTURE --otel JSON``: the indexer
starts it (:class:`TelemetryWorker`) when the proxy exports telemetry.  It reads
the same capture file as the indexer, on its own, and feeds the same
:class:`~claudetrace.telemetry.live.LiveTelemetry` sink the indexer used to host.

Why a process: the span builder keeps objects alive from one line to the next
(open spans, their ids and attributes), and in the indexer's process those sat
among the JSON parser's short-lived objects and slowed the indexer's own work
by more than the builder itself cost (README, "Cost").  Here the builder's
memory is its own, and the lines that change no span once the session id is
known — a streaming session's ``content_block_delta`` chunks, most of its lines —
are passed over by their first bytes, never parsed; thinking progress lines are
counted from two fields read from their bytes.  What is sent is what the
in-process sink sent (the tests compare both with a backfill).

It follows the file until the capture's end record, or until the indexer
closes its stdin (the proxy died without one); then it closes the sink
(flushing the export) and prints, as one JSON object on stdout, the sink's
warnings and what the recording should remember of the export (where its
metrics were delivered), for the indexer to store with the recording.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import select
import signal
import sys
from collections.abc import Callable
from itertools import compress, count, repeat
from operator import not_
from pathlib import Path
from typing import IO, Any, Final

from .. import capture as cap
from ..model.events import Direction, Event
from ..recording import RecordingInfo

#: How long the worker sleeps when the capture has nothing new (no wakeups here;
#: the indexer's closing our stdin ends the wait).  Spans leave in batches every
#: few seconds (``OTEL_BSP_SCHEDULE_DELAY``, 5 s), so a shorter wait would only
#: wake the worker more often, each time taking the CPU, and its caches, from
#: the indexer beside it.
POLL_S: Final = 0.5
#: How much of the capture the worker reads at a time: small enough that a block
#: and its records stay in the core's cache through the worker's passes over
#: them, beside the indexer's own memory traffic (cachegrind counts half the
#: last-level misses with 256 KiB as with 4 MiB; bench proxy shows no change
#: beyond its spread: a proxy's records can be up to 1 MiB themselves).
READ_BYTES: Final = 256 * 1024
#: The lines of a content block's stream (start, deltas, stop), as the CLI writes
#: them: they change no span once the session id is known.
_CHUNKS: Final = tuple(
    b'{"type":"stream_event","event":{"type":"content_block_%s"' % kind
    for kind in (b"delta", b"start", b"stop"))
#: A thinking progress line, as the CLI writes it.
_THINKING: Final = b'{"type":"system","subtype":"thinking_tokens",'
_LANE_KEY: Final = b'"parent_tool_use_id":'
_LANE = re.compile(rb'"parent_tool_use_id":(?:null|"([A-Za-z0-9_.:-]*)")')
_ESTIMATE = re.compile(rb'"estimated_tokens":(\d{1,15})[,}]')


def _thinking_fields(line: bytes) -> tuple[str | None, int] | None:
    """(lane, estimated tokens) of a thinking progress line, read from its bytes, or
    None when they cannot be read for certain (then the line is parsed).

    The main agent's lines have no ``parent_tool_use_id``; a key can only appear
    unescaped as a key, so one occurrence of each, with a plain value, is certain.
    """
    estimate = _ESTIMATE.search(line)
    if estimate is None or line.count(b'"estimated_tokens":') != 1:
        return None
    if b'"parent_tool_use_id":' not in line:
        return None, int(estimate[1])
    lanes = _LANE.findall(line)
    if len(lanes) != 1 or line.count(b'"parent_tool_use_id":') != 1:
        return None
    return (lanes[0].decode() or None), int(estimate[1])


def _run_fields(run: list[bytes]) -> tuple[str | None, int] | None:
    """(lane, last estimate) of a run of thinking progress lines, or None unless
    every line is certainly on the last line's lane and the last line's estimate
    is certain; read at once, without a call per line.

    Counting a run only needs each line's lane and the last line's estimate (an
    earlier estimate is overwritten by the next).  No line has a lane key, or
    every line has exactly one, with the same value.
    """
    last = _thinking_fields(run[-1])
    if last is None:
        return None
    keys = b"".join(run).count(_LANE_KEY)
    if not keys:
        return last
    lane = _LANE.search(run[-1])  # the last line's one lane key, with its value
    if lane is None or keys != len(run) \
            or not all(map(bytes.__contains__, run, repeat(lane[0]))):
        return None
    return last


class _Follower:
    """The capture's lines, as the indexer makes events of them, into the sink."""

    def __init__(self, info: RecordingInfo, sink: Any) -> None:
        self.info = info
        self.sink = sink
        self.builder = sink.builder
        self._lines = cap.RecordLines(info)

    @property
    def ended(self) -> bool:
        return self._lines.ended

    def feed(self, record: cap.Record) -> None:
        seq, lines = self._lines.feed(record)
        if lines:
            self._feed(seq, lines, record.direction, record.t_ns, record.wall_ns)

    def _feed(self, seq: int, lines: list[bytes], direction: Direction, t_ns: int,
              wall_ns: int) -> None:
        builder, info = self.builder, self.info
        # What the indexer's info.observe would pick up from a passed line is known.
        if direction == "out" and builder.passes_over_chunks \
                and info.cli_session_id is not None:
            self._feed_passing(seq, lines, t_ns, wall_ns)
        else:
            self.sink.on_events([self._event(seq + i, line, t_ns, wall_ns, direction)
                                 for i, line in enumerate(lines)])
        builder.advance_to(t_ns)

    def _feed_passing(self, seq: int, lines: list[bytes], t_ns: int, wall_ns: int) -> None:
        """Feed the lines of an output chunk that change spans; count the thinking
        progress lines between them, a run at a time; pass over the rest unparsed.

        No Python step is taken per line passed over or counted: ``map`` s of
        ``startswith`` sort them (the content block lines first, two in three,
        then the thinking lines among the rest) and ``compress`` picks them.
        """
        rest = list(compress(range(len(lines)),
                             map(not_, map(bytes.startswith, lines, repeat(_CHUNKS)))))
        rest_lines = list(map(lines.__getitem__, rest))
        thinking = map(bytes.startswith, rest_lines, repeat(_THINKING))
        events: list[Event] = []
        done = 0
        for k in compress(count(), map(not_, thinking)):
            if k > done:
                events = self._thinking(seq, rest[done:k], rest_lines[done:k], t_ns,
                                        wall_ns, events)
            events.append(self._event(seq + rest[k], rest_lines[k], t_ns, wall_ns))
            done = k + 1
        if done < len(rest):
            events = self._thinking(seq, rest[done:], rest_lines[done:], t_ns, wall_ns,
                                    events)
        self._flushed(events)

    def _thinking(self, seq: int, numbers: list[int], run: list[bytes], t_ns: int,
                  wall_ns: int, events: list[Event]) -> list[Event]:
        """Count a run of thinking progress lines (``numbers``: their places in the
        chunk; only passed-over lines lie between them).  When :func:`_run_fields`
        reads them all, they are counted at once, the first fed before if its model
        call has no estimate yet; else line by line, feeding those that cannot be
        counted.  Returns the events still to feed."""
        builder, sink = self.builder, self.sink
        events = self._flushed(events)  # in order: a call may start or end before these
        fields = _run_fields(run)
        if fields is not None:
            if builder.count_thinking(*fields, lines=len(run)):
                return events
            sink.on_events([self._event(seq + numbers[0], run[0], t_ns, wall_ns)])
            # That line gave the call its estimate: the rest is one run.
            if len(run) == 1 or builder.count_thinking(*fields, lines=len(run) - 1):
                return events
            numbers, run = numbers[1:], run[1:]
        for i, line in zip(numbers, run, strict=True):
            line_fields = _thinking_fields(line)
            if line_fields is not None:
                events = self._flushed(events)
                if builder.count_thinking(*line_fields):
                    continue
            events.append(self._event(seq + i, line, t_ns, wall_ns))
        return events

    def _event(self, seq: int, line: bytes, t_ns: int, wall_ns: int,
               direction: Direction = "out") -> Event:
        """Line ``seq`` as an event, observed as the indexer would."""
        event = Event(seq, direction, t_ns, line, True, wall_ns)
        self.info.observe(event)
        return event

    def _flushed(self, events: list[Event]) -> list[Event]:
        """Feed ``events`` now, if any; an empty list for the next ones."""
        if events:
            self.sink.on_events(events)
        return []

    def finish(self) -> None:
        for rest in self._lines.rests():
            self.info.observe(rest)
            self.sink.on_events([rest])


def _stdin_closed(stdin: IO[bytes] | None, timeout: float) -> bool:
    """Wait up to ``timeout`` for the indexer; True once it has closed our stdin."""
    if stdin is None:
        select.select([], [], [], timeout)
        return False
    ready, _, _ = select.select([stdin], [], [], timeout)
    return bool(ready) and not os.read(stdin.fileno(), 4096)


def run(capture: Path, otel: dict[str, Any], stdin: IO[bytes] | None,
        *, set_up: Callable[[], object] | None = None) -> dict[str, Any]:
    """Follow ``capture`` into live telemetry; what to keep with the recording:
    ``{"warnings": [...], "extra": {...}}``.

    ``set_up`` is called once the sink is ready, before the first line is read.
    """
    from .live import live_sink

    reader = cap.CaptureReader(capture, READ_BYTES)
    try:
        info = reader.info
        sink = live_sink(info, **otel)
        if sink is None:  # telemetry off, or a bad setting (said on stderr)
            return {"warnings": [], "extra": {}}
        if set_up is not None:
            set_up()
        follower = _Follower(info, sink)
        closed = False
        while True:
            records = reader.read()
            for record in records:
                follower.feed(record)
            if records:
                continue
            if follower.ended or closed:
                break
            closed = _stdin_closed(stdin, POLL_S)  # then read once more, to the end
        follower.finish()
    finally:
        reader.close()
    sink.on_close(info)
    return {"warnings": list(getattr(sink, "warnings", ())),
            "extra": dict(getattr(sink, "recording_extra", {}))}


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="claudetrace.telemetry.worker")
    parser.add_argument("capture", type=Path)
    parser.add_argument("--otel", required=True)
    args = parser.parse_args(argv)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)  # the indexer decides when we stop
    try:
        # What is set up before the first line (modules, the exporter) lives as long
        # as the process: frozen, the garbage collector's full passes no longer walk
        # it (cachegrind, 100k lines: -1.3% instructions).
        kept = run(args.capture, json.loads(args.otel), sys.stdin.buffer, set_up=gc.freeze)
    except Exception as exc:  # one line for the recording, never a traceback
        kept = {"warnings": [f"live telemetry stopped: {type(exc).__name__}: {exc}"]}
    print(json.dumps(kept), flush=True)
    return 0


class TelemetryWorker:
    """The indexer's side of the worker: an event sink that starts it and waits for it.

    The worker reads the capture itself: the sink says so (``reads_capture``), so
    the indexer does not call its ``on_events`` (which does nothing) for every
    chunk.  ``on_close``
    tells it the indexer has read everything (closing its stdin), waits for it
    to flush (its own timeout plus a margin) and keeps its warnings.  Raises
    ``OSError`` when the worker cannot be started.
    """

    def __init__(self, capture: Path, otel: dict[str, Any], flush_wait_s: float) -> None:
        import subprocess  # here: the worker process itself starts none

        self.warnings: list[str] = []
        #: What the worker said the recording should keep (see ``LiveTelemetry``).
        self.recording_extra: dict[str, Any] = {}
        self._wait_s = flush_wait_s
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "claudetrace.telemetry.worker", str(capture),
             "--otel", json.dumps(otel)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )

    #: The indexer need not show us its events (see :class:`~claudetrace.indexer.Indexer`).
    reads_capture = True

    def child_env(self) -> dict[str, str]:
        return {}  # the proxy gives the CLI its TRACEPARENT itself

    def on_events(self, events: Any) -> None:
        pass

    def on_close(self, info: RecordingInfo) -> None:
        import subprocess

        proc = self.proc
        try:
            out, _ = proc.communicate(timeout=self._wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            self.warnings.append(f"live telemetry did not finish within {self._wait_s:g} s")
        with contextlib.suppress(ValueError):
            kept = json.loads(out.decode("utf-8", "replace").strip().splitlines()[-1]) \
                if out.strip() else {}
            if isinstance(kept, dict):
                self.warnings += [str(w) for w in kept.get("warnings") or ()]
                extra = kept.get("extra")
                self.recording_extra.update(extra if isinstance(extra, dict) else {})
        if proc.returncode:
            self.warnings.append(f"live telemetry exited with status {proc.returncode}")


if __name__ == "__main__":
    sys.exit(main())
