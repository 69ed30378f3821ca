"""The recorder: from raw chunks seen by the proxy to stored events, off the hot path.

Forwarding threads hand every chunk they forward to :meth:`Recorder.feed`, which
never blocks on the database: chunks go to a bounded in-memory queue, and when
that is full (the store is slow or locked) to an append-only spool file on local
disk.  The recorder thread splits chunks into lines, parses each line once,
feeds the sinks (live telemetry) and writes batches to the store, committing at
least every :data:`MAX_LATENCY_S` so a SIGKILLed proxy loses at most that much.

When the store cannot be written (locked past the deadline at exit, disk full,
unreachable), whatever is left is saved as a cassette file under the data
directory and the proxy reports the count and the file on stderr: never silent
loss.
"""

from __future__ import annotations

import collections
import contextlib
import os
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

from .cassette import new_header, write_cassette
from .errors import ClaudeTraceError
from .events import Direction, Event, LineSplitter
from .recording import EventSink, RecordingInfo
from .summary import Summary

#: Longest time an event waits in memory before its batch is committed.
MAX_LATENCY_S: Final = 0.2
#: When input pauses, pending events are committed once the oldest is this old:
#: a trickle of lines makes a few commits a second, not one per line (each commit
#: is CPU the forwarding threads would wait on for the GIL).
IDLE_FLUSH_S: Final = 0.05
#: Bytes held in the in-memory queue before chunks spill to the spool file.
QUEUE_LIMIT_BYTES: Final = 16 * 1024 * 1024
#: Events (or bytes) per database transaction under sustained load.
BATCH_EVENTS: Final = 5000
BATCH_BYTES: Final = 8 * 1024 * 1024
#: Quiet recordings still refresh their heartbeat this often.
HEARTBEAT_S: Final = 1.0

_SPOOL_HEAD: Final = struct.Struct("<BqqQ")  # direction, t_ns, wall_ns, length
_DIR_CODE: Final[dict[str, int]] = {"in": 0, "out": 1, "err": 2}
_CODE_DIR: Final[tuple[Direction, ...]] = ("in", "out", "err")


@dataclass
class RecorderReport:
    """What happened to the recording, for the proxy's exit message."""

    events: int = 0
    stored: int = 0
    #: Chunks that went through the spool file because the store was behind.
    spooled_chunks: int = 0
    unsaved: int = 0
    unsaved_path: str | None = None
    lost_chunks: int = 0
    lost_bytes: int = 0
    store_error: str | None = None
    sink_errors: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        """One line per problem the user must hear about."""
        lines: list[str] = []
        if self.unsaved:
            where = (
                f"saved to {self.unsaved_path}" if self.unsaved_path else "and could not be saved"
            )
            lines.append(
                f"{self.unsaved} of {self.events} events could not be stored "
                f"({self.store_error or 'store unavailable'}); {where}"
                + (
                    f" — load them with `claudetrace import {self.unsaved_path}`"
                    if self.unsaved_path
                    else ""
                )
            )
        if self.lost_chunks:
            lines.append(
                f"{self.lost_chunks} chunks ({self.lost_bytes} bytes) were forwarded but "
                "not recorded (spool file unwritable)"
            )
        lines.extend(self.sink_errors)
        return lines


class Recorder:
    """Turns forwarded chunks into stored events on a thread of its own."""

    def __init__(
        self,
        info: RecordingInfo,
        open_store: Callable[[], object],
        *,
        sinks: list[EventSink] | None = None,
        t0_ns: int | None = None,
        spool_dir: str | os.PathLike[str] | None = None,
        unsaved_dir: str | os.PathLike[str] | None = None,
        queue_limit: int = QUEUE_LIMIT_BYTES,
    ) -> None:
        self.info = info
        self._open_store = open_store
        self._store: object | None = None
        self.sinks = list(sinks or [])
        self.t0_ns = time.monotonic_ns() if t0_ns is None else t0_ns
        self._spool_dir = spool_dir
        self._unsaved_dir = unsaved_dir
        self._queue_limit = queue_limit

        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue: collections.deque[tuple[int, int, int, bytes]] = collections.deque()
        self._queued_bytes = 0
        self._spool: IO[bytes] | None = None
        self._spool_path: str | None = None
        self._spooling = False
        self._closing = False
        # Chunks the recorder thread has taken but not yet split.  Queue chunks
        # stay counted in _queued_bytes until split, so memory is bounded even
        # while the thread is stuck on the store.  _consume_lock is held while
        # one chunk moves into _pending; close() takes it to stop the thread
        # consuming before it saves what is left.
        self._inflight: collections.deque[tuple[int, int, int, bytes]] = collections.deque()
        self._inflight_spool: IO[bytes] | None = None
        self._consume_lock = threading.Lock()

        self._splitters = {d: LineSplitter() for d in _CODE_DIR}
        #: Times of the last chunk per direction: a final partial line keeps them.
        self._last_times = {d: (0, 0) for d in _CODE_DIR}
        self._seq = 0
        self._pending: list[Event] = []
        self._pending_bytes = 0
        self._pending_since = 0.0
        self._summary = Summary()
        self._meta_dirty = False
        self._created = False
        self._last_beat = 0.0
        self._abandon = False
        self.report = RecorderReport()
        self._thread = threading.Thread(target=self._run, name="claudetrace-recorder", daemon=True)

    # -- the hot path (forwarding threads) -----------------------------------------

    def start(self) -> None:
        self._thread.start()

    def feed(self, direction: Direction, chunk: bytes) -> None:
        """Record a forwarded chunk; never blocks on the store."""
        code = _DIR_CODE[direction]
        with self._lock:
            t_ns = time.monotonic_ns() - self.t0_ns
            wall_ns = time.time_ns()
            if not self._spooling and self._queued_bytes + len(chunk) <= self._queue_limit:
                self._queue.append((code, t_ns, wall_ns, chunk))
                self._queued_bytes += len(chunk)
                self._wake.notify()
                return
            self._spill(code, t_ns, wall_ns, chunk)

    def _spill(self, code: int, t_ns: int, wall_ns: int, chunk: bytes) -> None:
        try:
            if self._spool is None:
                folder = self._spool_dir or tempfile.gettempdir()
                fd, self._spool_path = tempfile.mkstemp(
                    prefix=f"claudetrace-{self.info.id}-", suffix=".spool", dir=folder
                )
                self._spool = os.fdopen(fd, "w+b")
            self._spool.write(_SPOOL_HEAD.pack(code, t_ns, wall_ns, len(chunk)))
            self._spool.write(chunk)
            self._spooling = True
            self.report.spooled_chunks += 1
        except OSError:
            self.report.lost_chunks += 1
            self.report.lost_bytes += len(chunk)

    # -- the recorder thread ------------------------------------------------------------

    def _run(self) -> None:
        while not self._abandon:
            with self._lock:
                if not self._queue and not self._spooling and not self._closing:
                    self._wake.wait(timeout=self._wait_timeout())
                took = False
                if self._queue:
                    # Queue chunks come before spooled ones: forwarders only
                    # spool once the queue is full, and keep spooling until the
                    # spool file has been taken.
                    self._inflight, self._queue = self._queue, collections.deque()
                    took = True
                elif self._spooling:
                    self._inflight_spool = self._take_spool()
                    took = self._inflight_spool is not None
                closing = self._closing and not took
            if took and not self._consume():
                return
            if closing:
                with self._consume_lock:
                    if self._abandon:
                        return
                    self._finish_lines()
                self._flush(final=True)
                return
            self._maybe_flush(busy=took)

    def _consume(self) -> bool:
        """Split the in-flight chunks one by one, flushing as batches fill.

        Returns False when :meth:`close` has abandoned the thread.
        """
        while True:
            with self._consume_lock:
                if self._abandon:
                    return False
                item, queued = self._next_inflight()
                if item is None:
                    return True
                self._split(*item)
            if queued:
                with self._lock:
                    self._queued_bytes -= len(item[3])
            self._maybe_flush(busy=True)

    def _next_inflight(self) -> tuple[tuple[int, int, int, bytes] | None, bool]:
        """The next chunk taken by the thread, and whether it came from the queue."""
        if self._inflight:
            return self._inflight.popleft(), True
        spool = self._inflight_spool
        if spool is not None:
            item = _read_spool_item(spool)
            if item is not None:
                return item, False
            spool.close()
            self._inflight_spool = None
        return None, False

    def _wait_timeout(self) -> float:
        if self._pending:
            return max(0.0, IDLE_FLUSH_S - (time.monotonic() - self._pending_since))
        return HEARTBEAT_S

    def _take_spool(self) -> IO[bytes] | None:
        """Hand the spool file to the recorder thread; forwarders start a new one."""
        spool, path = self._spool, self._spool_path
        self._spool, self._spool_path, self._spooling = None, None, False
        if spool is None:
            return None
        with contextlib.suppress(OSError):
            spool.flush()
            spool.seek(0)
            if path:
                os.unlink(path)  # still open: the data lives until we close it
        return spool

    def _split(self, code: int, t_ns: int, wall_ns: int, chunk: bytes) -> None:
        direction = _CODE_DIR[code]
        self._last_times[direction] = (t_ns, wall_ns)
        for line in self._splitters[direction].feed(chunk):
            self._add(Event(self._seq, direction, t_ns, line, True, wall_ns))

    def _finish_lines(self) -> None:
        for direction in _CODE_DIR:
            rest = self._splitters[direction].finish()
            if rest is not None:
                # The partial line was complete when its last bytes were read.
                t_ns, wall_ns = self._last_times[direction]
                self._add(Event(self._seq, direction, t_ns, rest, False, wall_ns))

    def _add(self, event: Event) -> None:
        self._seq += 1
        self.report.events += 1
        event.fields  # parse once, here, off the forwarding threads  # noqa: B018
        if self.info.observe(event):
            self._meta_dirty = True
        self._summary.add(event)
        for sink in list(self.sinks):
            self._call_sink(sink, "on_event", event)
        event.forget_parsed()
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending.append(event)
        self._pending_bytes += len(event.data)

    def _call_sink(self, sink: EventSink, method: str, arg: object) -> None:
        try:
            getattr(sink, method)(arg)
        except Exception as exc:  # a broken sink must not cost the recording
            self.sinks.remove(sink)
            self.report.sink_errors.append(
                f"{type(sink).__name__} disabled after error: {type(exc).__name__}: {exc}"
            )

    def _maybe_flush(self, *, busy: bool) -> None:
        now = time.monotonic()
        if (
            self._pending
            and (
                len(self._pending) >= BATCH_EVENTS
                or self._pending_bytes >= BATCH_BYTES
                or now - self._pending_since >= (MAX_LATENCY_S if busy else IDLE_FLUSH_S)
            )
        ) or (not self._pending and now - self._last_beat >= HEARTBEAT_S):
            self._flush()

    def _flush(self, *, final: bool = False) -> None:
        """Write pending events; on failure keep them and retry with backoff.

        While a flush is failing the thread does not take more chunks, so memory
        stays bounded and new chunks accumulate in the spool file on disk.
        """
        delay = 0.1
        while True:
            try:
                self._write(final=final)
                return
            except ClaudeTraceError as exc:
                self.report.store_error = str(exc)
            except Exception as exc:
                self.report.store_error = f"{type(exc).__name__}: {exc}"
            with self._lock:
                if self._closing and self._abandon:
                    return
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def _write(self, *, final: bool) -> None:
        store = self._ensure_store()
        updates: dict[str, object] = {"last_seen_ns": time.time_ns()}
        if self._pending or self._meta_dirty:
            updates.update(self._summary.as_columns())
            updates.update(
                cli_session_id=self.info.cli_session_id,
                claude_code_version=self.info.claude_code_version,
                model=self.info.model,
                permission_mode=self.info.permission_mode,
            )
        if final:
            updates.update(
                ended_ns=self.info.ended_ns or time.time_ns(),
                exit_code=self.info.exit_code,
                signal=self.info.signal,
                error=self.info.error,
            )
        batch = self._pending
        store.write_batch(self.info.id, batch, updates)  # type: ignore[attr-defined]
        self.report.stored += len(batch)
        self.report.store_error = None
        self._pending = []
        self._pending_bytes = 0
        self._meta_dirty = False
        self._last_beat = time.monotonic()

    def _ensure_store(self) -> object:
        if self._store is None:
            self._store = self._open_store()
        if not self._created:
            self._store.create_recording(self.info)  # type: ignore[attr-defined]
            self._created = True
        return self._store

    # -- the end -------------------------------------------------------------------------

    def close(self, *, timeout: float = 5.0) -> RecorderReport:
        """Finish: store what is left (within ``timeout``), close sinks, report.

        What could not be stored by then is written to a cassette file so it can
        be imported later.
        """
        with self._lock:
            self._closing = True
            self._wake.notify()
        # Wait as long as the store keeps accepting batches (a backlog after a
        # burst is drained, not dumped); give up after ``timeout`` without progress.
        progress = -1
        while self._thread.is_alive() and self.report.stored != progress:
            progress = self.report.stored
            self._thread.join(timeout)
        if self._thread.is_alive():
            with self._lock:
                self._abandon = True
            self._save_unsaved()
        for sink in list(self.sinks):
            self._call_sink(sink, "on_close", self.info)
        return self.report

    def _save_unsaved(self) -> None:
        """Dump every event not known to be stored into a cassette file.

        The thread is stopped from consuming first (it may still be blocked in a
        store write; if that write succeeds after all, its events are both
        stored and in the file: duplicated, never lost).
        """
        with self._consume_lock:
            self._abandon = True
            with self._lock:
                inflight, inflight_spool = list(self._inflight), self._inflight_spool
                self._inflight.clear()
                self._inflight_spool = None
                items = list(self._queue)
                self._queue.clear()
                spool = self._take_spool()
            pending = list(self._pending)
        # What the thread had not split yet continues through its splitters, in
        # order, so sequence numbers continue where it stopped.
        seq = self._seq
        extra: list[Event] = []
        splitters = self._splitters
        last_times = dict(self._last_times)

        def chunks() -> Iterator[tuple[int, int, int, bytes]]:
            # Oldest first: what the thread had taken, then the queue, which
            # fills before forwarders spool.
            yield from inflight
            if inflight_spool is not None:
                yield from _read_spool(inflight_spool)
            yield from items
            if spool is not None:
                yield from _read_spool(spool)

        for code, t_ns, wall_ns, chunk in chunks():
            direction = _CODE_DIR[code]
            last_times[direction] = (t_ns, wall_ns)
            for line in splitters[direction].feed(chunk):
                extra.append(Event(seq, direction, t_ns, line, True, wall_ns))
                seq += 1
        for direction in _CODE_DIR:
            rest = splitters[direction].finish()
            if rest is not None:
                t_ns, wall_ns = last_times[direction]
                extra.append(Event(seq, direction, t_ns, rest, False, wall_ns))
                seq += 1
        events = pending + extra
        self.report.events += len(extra)
        self.report.unsaved = len(events)
        if not events:
            return
        folder = Path(self._unsaved_dir or tempfile.gettempdir())
        path = folder / f"{self.info.id}.unsaved.cassette.ndjson"
        header = new_header(
            argv=self.info.argv,
            exit_code=self.info.exit_code,
            recording_id=self.info.id,
            started_ns=self.info.started_ns,
            cwd=self.info.cwd,
            unsaved_from_seq=events[0].seq,
            store_error=self.report.store_error,
        )
        try:
            folder.mkdir(parents=True, exist_ok=True)
            write_cassette(path, header, events)
            self.report.unsaved_path = str(path)
        except (OSError, ClaudeTraceError) as exc:
            print(f"claudetrace: cannot save unsaved events: {exc}", file=sys.stderr)


def _read_spool_item(spool: IO[bytes]) -> tuple[int, int, int, bytes] | None:
    """The next chunk of a spool file, or None at its end."""
    head = spool.read(_SPOOL_HEAD.size)
    if len(head) < _SPOOL_HEAD.size:
        return None
    code, t_ns, wall_ns, length = _SPOOL_HEAD.unpack(head)
    return code, t_ns, wall_ns, spool.read(length)


def _read_spool(spool: IO[bytes]) -> Iterator[tuple[int, int, int, bytes]]:
    while (item := _read_spool_item(spool)) is not None:
        yield item
