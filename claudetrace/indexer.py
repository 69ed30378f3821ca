"""The indexer: from a capture file to stored events, in a process of its own.

The proxy starts ``python -m claudetrace.indexer`` next to the CLI and hands it
the capture file's lock and a wake-up pipe.  The indexer follows the file as the
proxy appends to it: it splits chunks into lines, parses each line once, feeds
the sinks (live telemetry) and writes batches to the store, committing at least
every :data:`MAX_LATENCY_S` while the session runs.  When the proxy has gone
(the wake-up pipe reaches end of file) it stores the rest, records the exit and
deletes the capture file.

The proxy does not wait for it: under a burst the index trails the session and
completes after the proxy has exited.  Readers never see a half-stored
recording of a finished session: :func:`settle`, run whenever a command opens
the store, waits for a running indexer, and stores itself any capture file
whose indexer is gone (killed, or gave up on a locked or unreachable store).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import functools
import gc
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from . import capture as cap
from .config import (
    DB_ENV,
    FLUSH_TIMEOUT_ENV,
    WORDS_QUIET_ENV,
    env_seconds,
    resolve_url,
    yield_cpu,
)
from .errors import ClaudeTraceError
from .model import Session
from .model.events import Direction, Event, forget_all_parsed
from .model.summary import figure_sums, outcome_columns, summary_columns, usage_warnings
from .recording import EventSink, RecordingInfo, kill_if_same
from .telemetry.latency import LatencyFold

if TYPE_CHECKING:
    from .store import Store

#: Longest time an event waits in memory before its batch is committed.
MAX_LATENCY_S: Final = 0.2
#: When input pauses, pending events are committed once the oldest is this old.
IDLE_FLUSH_S: Final = 0.05
#: Events (or bytes) per database transaction under sustained load.
BATCH_EVENTS: Final = 5000
BATCH_BYTES: Final = 8 * 1024 * 1024
#: How many objects more than it last found the indexer holds before its
#: collector runs (Python's default: 700); well above what a batch holds.
GC_OBJECTS: Final = 100_000
#: Quiet recordings still refresh their heartbeat this often.
HEARTBEAT_S: Final = 1.0
#: Once a running recording's input has paused this long, the search words its
#: writer left out of a burst's batches are added (:meth:`Indexer.add_words`),
#: until the input goes on: a search then finds them without adding them itself.
WORDS_QUIET_S: Final = 1.0
#: The most of its time the indexer spends on a live recording's summary
#: figures (tokens, cost, calls, tools, status): they add up every model call,
#: turn and tool so far, so a batch's summary grows with the session, and a
#: burst of 20k tool calls spent most of its time re-adding them after every
#: batch.  They are refreshed once this share of the time since their last
#: refresh covers what that one took, and always with the last batch; the
#: event and byte counts go with every batch.
SUMMARY_SHARE: Final = 0.1
#: The most of its time the indexer spends folding the Stats page's latency
#: samples from the lines as they arrive (past its first FOLD_FLOOR_S): a
#: session's lines arrive over minutes and cost the fold a sliver of that, but
#: a burst of tool calls took a third more CPU; past this share the fold is
#: dropped and the samples are folded later (``db pack``, the page's first look).
FOLD_SHARE: Final = 0.05
FOLD_FLOOR_S: Final = 0.02
#: Once the proxy has gone, how long a failing store is retried before the
#: capture file is left for the next command ($CLAUDETRACE_FLUSH_TIMEOUT).
GIVE_UP_S: Final = 30.0
#: How long a reader waits for another process storing a finished recording.
SETTLE_WAIT_S: Final = 300.0

_DIRECTIONS: Final[tuple[Direction, ...]] = cap.CHUNK_KINDS
T = TypeVar("T")


def seconds_from_env(name: str, default: float) -> float:
    """``$name`` in seconds (a number ≥ 0), else ``default``."""
    seconds = env_seconds(name)
    return default if seconds is None else seconds


def give_up_from_env() -> float:
    """``$CLAUDETRACE_FLUSH_TIMEOUT`` in seconds, else :data:`GIVE_UP_S`."""
    return seconds_from_env(FLUSH_TIMEOUT_ENV, GIVE_UP_S)


class GaveUp(Exception):
    """The store kept failing after the proxy had gone; the capture file stays.

    ``transient`` when the database refused for now (locked, full, unreachable)
    rather than refusing this recording's data.
    """

    def __init__(self, reason: str | None, *, transient: bool = True) -> None:
        super().__init__(reason)
        self.transient = transient


def is_transient(exc: BaseException) -> bool:
    """True for a failure that says nothing about the data: a lock, a full disk, a
    lost connection (see :func:`claudetrace.store.engine.is_transient_error`)."""
    from .store.engine import is_transient_error

    return is_transient_error(exc)


@dataclass
class IndexReport:
    recording_id: str | None = None
    events: int = 0
    stored: int = 0
    lost_bytes: int = 0
    store_error: str | None = None
    sink_errors: list[str] = field(default_factory=list)


class Indexer:
    """Capture records in, stored events out (one recording)."""

    def __init__(
        self,
        info: RecordingInfo,
        store: Any,
        *,
        sinks: Iterable[EventSink] = (),
        writer_gone: Callable[[], bool] = lambda: True,
        give_up_s: float = GIVE_UP_S,
    ) -> None:
        self.info = info
        self.store = store
        self.sinks = list(sinks)
        self._all_sinks = tuple(self.sinks)  # the disabled ones' warnings are kept too
        #: Each sink with its ``on_events`` bound once: they are called for every chunk
        #: (but for a sink that reads the capture itself: live telemetry's worker).
        self._feeds = tuple((sink, sink.on_events) for sink in self.sinks
                            if not getattr(sink, "reads_capture", False))
        self.report = IndexReport()
        self._writer_gone = writer_gone
        self._give_up_s = give_up_s
        self._lines = cap.RecordLines(info)
        self._pending: list[Event] = []
        self._pending_bytes = 0
        self._pending_since = 0.0
        #: The session model, folded as lines arrive (its figures are stored with each batch).
        self.session = Session(model=info.model, session_id=info.cli_session_id)
        #: The Stats page's latency samples, folded from the lines as they arrive
        #: and stored with the recording's end: the page reads them, and folds
        #: none on its first look.
        self._latency: LatencyFold | None = LatencyFold(info)
        self._fold_s = 0.0
        self._began = time.monotonic()
        self._meta_dirty = False
        self._created = False
        #: Results the session had when its usage rows were last written, and the
        #: first turn whose calls' rows may change still.
        self._usage_results = -1
        self._usage_turn = 1
        self._last_beat = 0.0
        #: When the summary figures were last refreshed, and how long that took.
        self._summary_at = 0.0
        self._summary_cost = 0.0
        #: Events stored when every line stored had its search words last.
        self._words_at = 0
        self._words_quiet = seconds_from_env(WORDS_QUIET_ENV, WORDS_QUIET_S)

    @property
    def ended(self) -> bool:
        """True once the capture's end record (the exit) was read."""
        return self._lines.ended

    # -- input ------------------------------------------------------------------------------

    def feed(self, record: cap.Record) -> None:
        """One capture record, in file order."""
        seq, lines = self._lines.feed(record)
        if record.kind == cap.LOST:
            self.report.lost_bytes = self._lines.lost_bytes
            self._meta_dirty = True
            return
        if lines:
            direction, t_ns, wall_ns = record.direction, record.t_ns, record.wall_ns
            self._add([Event(seq + i, direction, t_ns, line, True, wall_ns)
                       for i, line in enumerate(lines)], len(record.data))
        if record.kind < len(_DIRECTIONS):
            self.maybe_flush(busy=True)

    def _add(self, events: list[Event], size: int) -> None:
        """Parse and summarise a chunk's events (``size`` bytes), show them to the
        sinks, queue them to store."""
        feeds = self._feeds
        # The fold first: it parses whole, once, the lines it reads whole
        # (their fields taken from that), which the others then read as parsed.
        self.session.add_many(events)
        if events[0].direction == "out":  # a chunk's lines are of one direction
            observe = self.info.observe
            for event in events:
                if observe(event):
                    self._meta_dirty = True
        if self._latency is not None:
            self._fold(events)
        if feeds:
            # Each sink takes the chunk's events in one go rather than one between
            # the parsing of others, so its code and state stay in the CPU's caches
            # (cachegrind, telemetry on: about a tenth fewer L1 data misses).
            for sink, on_events in feeds:
                try:
                    on_events(events)
                except Exception as exc:  # a broken sink must not cost the recording
                    self._disable(sink, exc)
        # Parsed once (its fields stay for the store); nothing else reads the line.
        forget_all_parsed(events)
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending.extend(events)
        self._pending_bytes += size
        self.report.events += len(events)

    def _fold(self, events: list[Event]) -> None:
        """Feed the latency fold, and drop it once it took more than
        :data:`FOLD_SHARE` of the time since the indexer started (a burst: its
        samples are folded by ``db pack`` or the Stats page's first look).  The
        fold's time is its thread's CPU time: on a loaded machine the indexer
        (at idle priority) waits for a core in the middle of a fold, and that wait,
        counted, dropped the fold of a recording of a few lines."""
        assert self._latency is not None
        start = time.thread_time()
        self._latency.feed(events)
        self._fold_s += time.thread_time() - start
        if self._fold_s > FOLD_FLOOR_S and self._fold_s > FOLD_SHARE * (
            time.monotonic() - self._began
        ):
            self._latency = None

    def _disable(self, sink: EventSink, exc: Exception) -> None:
        """Stop calling a sink that raised, and report why."""
        self.sinks.remove(sink)
        self._feeds = tuple(feed for feed in self._feeds if feed[0] is not sink)
        self.report.sink_errors.append(
            f"{type(sink).__name__} disabled after error: "
            f"{type(exc).__name__}: {exc}"
        )

    # -- output -----------------------------------------------------------------------------

    def wait_timeout(self) -> float:
        """How long the caller may wait for input before :meth:`maybe_flush` is due."""
        if self._pending:
            return max(0.0, IDLE_FLUSH_S - (time.monotonic() - self._pending_since))
        return HEARTBEAT_S

    def maybe_flush(self, *, busy: bool) -> None:
        now = time.monotonic()
        if (
            self._pending
            and (
                len(self._pending) >= BATCH_EVENTS
                or self._pending_bytes >= BATCH_BYTES
                or now - self._pending_since >= (MAX_LATENCY_S if busy else IDLE_FLUSH_S)
            )
        ) or (not self._pending and now - self._last_beat >= HEARTBEAT_S):
            self.flush()

    def finish(self) -> None:
        """Store the last partial lines, the summary and the exit (if recorded)."""
        for rest in self._lines.rests():
            self._add([rest], len(rest.data))
        if self._pending:
            # The last lines go first, with their counts alone: a writer
            # process stores them while the figures the last batch carries are
            # added up over every call and tool of the session (a burst's end
            # waited for both in turn: 10k tool calls, 0.07 s of figures).
            self.flush(counts_only=True)
        self.flush(final=True)
        for sink in list(self.sinks):
            try:
                sink.on_close(self.info)
            except Exception as exc:  # a broken sink must not cost the recording
                self._disable(sink, exc)
        self._keep_warnings()

    def _keep_warnings(self) -> None:
        """Store what went wrong in the sinks with the recording (``extra["warnings"]``),
        and what a sink asks the recording to remember (its ``recording_extra``:
        where live telemetry delivered the metrics).

        They were printed as well, but the last ones — a collector that failed the
        final flush, say — come after the proxy has gone, when stderr reaches no one.
        Best effort: the events are stored already.
        """
        warnings = (list(self._lines.problems) + list(self.report.sink_errors)
                    + usage_warnings(self.session))
        kept: dict[str, object] = {}
        for sink in self._all_sinks:
            warnings += getattr(sink, "warnings", ())
            kept.update(getattr(sink, "recording_extra", None) or {})
        if not warnings and not kept:
            return
        self.info.extra.update(kept)
        if warnings:
            self.info.extra["warnings"] = warnings
        try:
            self.store.update_recording(self.info.id, extra=dict(self.info.extra))
        except ClaudeTraceError as exc:
            _say(f"cannot store the telemetry warnings ({exc})")

    def flush(self, *, final: bool = False, counts_only: bool = False) -> None:
        """Write pending events; while the store fails, retry with backoff.
        ``counts_only``: the batch carries the event and byte counts, not the
        summary figures, even when they are due.

        While the proxy runs there is no deadline (the capture file holds
        everything meanwhile); once it has gone, :class:`GaveUp` after
        ``give_up_s`` of failures.
        """
        def failed(exc: Exception) -> None:
            self.report.store_error = _one_line(exc)

        try:
            _retry(lambda: self._write(final=final, counts_only=counts_only), Exception, failed,
                   self._writer_gone, self._give_up_s)
        except Exception as exc:
            raise GaveUp(self.report.store_error, transient=is_transient(exc)) from None
        self.report.store_error = None

    def _summary(self, *, final: bool, priced: bool, rewrite: bool,
                 counts_only: bool = False) -> dict[str, object]:
        """The summary columns to store with a batch: all of them with the last
        batch, when a turn ended (``rewrite``: its calls' usage rows go with them)
        or when due (:data:`SUMMARY_SHARE`), else (and with ``counts_only``) the
        event and byte counts."""
        session = self.session
        start = time.monotonic()
        if counts_only or (not (final or rewrite) and (
                start - self._summary_at < self._summary_cost / SUMMARY_SHARE)):
            return {"event_count": session.event_count, "byte_count": session.byte_count}
        # A turn still under way waits for its result (its calls have no cost yet:
        # pricing them would load the table in every indexer).
        columns = summary_columns(
            session, estimate=priced, from_turn=self._usage_turn, ended_turns=not final,
            started_ns=self.info.started_ns if rewrite else None)
        self._summary_at = time.monotonic()
        self._summary_cost = self._summary_at - start
        return columns

    def _write(self, *, final: bool, counts_only: bool = False) -> None:
        store = self.store
        if not self._created:
            store.create_recording(self.info)
            self._created = True
        updates: dict[str, object] = {"last_seen_ns": time.time_ns()}
        rewrite, results = False, self.session.results
        if self._pending or self._meta_dirty or final:
            # A gap's cut line shows only now and then (its tail is in later chunks).
            self.report.lost_bytes = self.info.lost_bytes = self._lines.lost_bytes
            updates["lost_bytes"] = self.report.lost_bytes
            # The price table loads only where the CLI gave no cost once a turn
            # ended (or the session did), never for a first turn's lines.
            # The calls' usage rows are written again when a turn ended (or the
            # session did): not after every batch of a long turn's lines.
            priced = final or results > 0
            rewrite = priced and (final or results != self._usage_results) and not counts_only
            updates.update(self._summary(final=final, priced=priced, rewrite=rewrite,
                                         counts_only=counts_only))
            updates.update(
                cli_session_id=self.info.cli_session_id,
                claude_code_version=self.info.claude_code_version,
                model=self.info.model,
                permission_mode=self.info.permission_mode,
            )
        if final and self.ended:
            ended_ns = self.info.ended_ns or time.time_ns()
            updates.update(
                ended_ns=ended_ns,
                exit_code=self.info.exit_code,
                signal=self.info.signal,
                error=self.info.error,
            )
            updates.update(outcome_columns(self.session.outcome(
                ended=True, exit_code=self.info.exit_code, signal=self.info.signal,
                error=self.info.error, lost_bytes=self.report.lost_bytes)))
            updates["figures"] = figure_sums(self.session)
            if self._latency is not None:
                # The recording as stored once ended (its end is the root span's).
                updates["latencies"] = self._latency.column(
                    dataclasses.replace(self.info, ended_ns=ended_ns),
                    self.session.event_count)
        batch = self._pending
        self._note_words_later(batch, updates)
        store.write_batch(self.info.id, batch, updates)
        if rewrite:
            self._usage_results = results
            open_turn = self.session.open_turn
            self._usage_turn = open_turn.number if open_turn else len(self.session.turns) + 1
        self.report.stored += len(batch)
        self._pending = []
        self._pending_bytes = 0
        self._meta_dirty = False
        self._last_beat = time.monotonic()
        if final:
            # A store that writes beside us (:class:`~claudetrace.store.writer.WriterProcess`)
            # has everything committed before the capture file may go.
            store.wait_written()

    def words_wait(self, quiet_since: float) -> float | None:
        """Seconds until :meth:`add_words` is due, the input quiet since
        ``quiet_since`` (0: now); None when no line stored since it last ran
        lacks its words."""
        from .store.packing import WORDS_LATER

        if self._pending or WORDS_LATER not in self.info.extra \
                or self.report.stored <= self._words_at:
            return None
        return max(0.0, quiet_since + self._words_quiet - time.monotonic())

    def add_words(self, add: Callable[[str, Callable[[], bool]], bool],
                  stop: Callable[[], bool]) -> None:
        """Have the words a burst's batches were stored without added to the search
        index while the recording runs, once they are written: ``add(recording
        id, stop)`` (:func:`~claudetrace.store.backlog.add_running_words`), in
        short transactions until ``stop()`` says new input has come.  A failure
        leaves them to the next search (or the pass as the recording ends)."""
        try:
            self.store.wait_written()
        except ClaudeTraceError:
            return  # a batch failed: the next flush sends it again, and this waits
        stored = self.report.stored

        def stop_or_beat() -> bool:
            if stop():
                return True
            # The heartbeat goes on between transactions: a recording whose
            # heartbeat is stale is not running, and a search would take its mark
            # off (:func:`~claudetrace.recording.recorder_alive`).
            self.maybe_flush(busy=False)
            return False

        try:
            done = add(self.info.id, stop_or_beat)
        except Exception as exc:  # the lines are stored either way
            _say(f"a burst's words reach the search index with the next search "
                 f"({_one_line(exc)})")
            done = True  # not tried again before more lines are stored
        if done:
            self._words_at = stored

    def _note_words_later(self, batch: list[Event], updates: dict[str, object]) -> None:
        """With the first batch the writer stores without its search words (a
        burst's), say so on the recording (``extra``), in the batch's
        transaction: the pass after the recording ends, or the next search,
        adds them (:data:`~claudetrace.store.packing.WORDS_LATER`)."""
        if not getattr(self.store, "words_later", False):
            return
        from .store.packing import WORDS_LATER
        from .store.plain import defers_words

        if WORDS_LATER not in self.info.extra and defers_words(
                len(batch), sum(len(event.data) for event in batch)):
            self.info.extra[WORDS_LATER] = True
            updates["extra"] = dict(self.info.extra)


# -- following a live capture (the indexer process) -----------------------------------------


class _Wakeups:
    """The proxy's wake-up pipe: readable when there is news, EOF when it has gone."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd
        self.gone = fd is None
        if fd is not None:
            os.set_blocking(fd, False)

    def news(self) -> bool:
        """Whether the proxy has news, or has gone, since the pipe was last drained
        (it is left as it is)."""
        if self.fd is None or self.gone:
            return True
        try:
            readable, _, _ = select.select([self.fd], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def drain(self) -> None:
        while self.fd is not None and not self.gone:
            try:
                if not os.read(self.fd, 65536):
                    self.gone = True
            except BlockingIOError:
                return
            except OSError:
                self.gone = True

    def wait(self, timeout: float) -> None:
        if self.fd is None or self.gone:
            return
        with contextlib.suppress(InterruptedError, OSError, ValueError):
            select.select([self.fd], [], [], timeout)
        self.drain()

    def writer_gone(self) -> bool:
        self.drain()
        return self.gone


def follow(
    capture: Path,
    store: Any,
    *,
    wakeup_fd: int | None = None,
    sinks_for: Callable[[RecordingInfo], list[EventSink]] | None = None,
    give_up_s: float = GIVE_UP_S,
    replace: bool = False,
    add_words: Callable[[str, Callable[[], bool]], bool] | None = None,
    orphaned: Callable[[], object] | None = None,
) -> IndexReport:
    """Store everything in ``capture`` (following it while its proxy runs), then delete it.

    ``replace`` first deletes what an earlier, interrupted indexer stored of the
    same recording.  ``add_words``: adds the search words a burst's batches left
    out while the input pauses (:meth:`Indexer.add_words`).  ``orphaned``: called
    when the proxy has gone without recording its child's exit (it was killed,
    by SIGKILL say).  Raises :class:`GaveUp` (the file stays) when the store
    cannot be written.
    """
    reader = cap.CaptureReader(capture)
    wakeups = _Wakeups(wakeup_fd)
    try:
        info = reader.info
        if replace:
            _forget(store, info.id)
        sinks = sinks_for(info) if sinks_for else []
        indexer = Indexer(
            info, store, sinks=sinks, writer_gone=wakeups.writer_gone, give_up_s=give_up_s
        )
        quiet_since = time.monotonic()
        while True:
            records = reader.read()
            for record in records:
                indexer.feed(record)
            if records:
                wakeups.drain()
                quiet_since = time.monotonic()
                continue
            if wakeups.gone:
                if orphaned is not None and not indexer.ended:
                    orphaned()
                break
            indexer.maybe_flush(busy=False)
            timeout = indexer.wait_timeout()
            words = None if add_words is None else indexer.words_wait(quiet_since)
            if words == 0.0 and add_words is not None:
                indexer.add_words(add_words, wakeups.news)
                wakeups.drain()  # what stopped it: new lines, or the proxy gone
                continue
            wakeups.wait(timeout if words is None else min(timeout, words))
        indexer.finish()
    finally:
        reader.close()
    cap.remove(capture)
    indexer.report.recording_id = info.id
    return indexer.report


def _forget(store: Any, recording_id: str) -> None:
    with contextlib.suppress(ClaudeTraceError):
        store.delete_recording(recording_id)


# -- settling leftover captures (every reader) ------------------------------------------------


def open_settled_store(
    db: str | None = None, *, migrate: bool = True, create: bool = True,
) -> Store:
    """The store named by ``db`` with the finished recordings still waiting in
    capture files stored first (:func:`settle`), so what a command reads of a
    finished session is complete — but for those the database will not take
    now: storing them waits on another process's write lock a couple of seconds
    at most (:data:`~claudetrace.store.engine.SETTLE_BUSY_TIMEOUT_S`), then the
    command goes on with what is stored.  ``create`` as for
    :func:`~claudetrace.store.open_store` (read commands pass False)."""
    from .config import resolve_url
    from .store import open_store
    from .store.engine import SETTLE_BUSY_TIMEOUT_S

    # Recordings waiting for a database not made yet (its first proxy's indexer is
    # still starting): it is no mistyped path.
    create = create or bool(cap.capture_files(resolve_url(db)))
    store = open_store(db, migrate=migrate, create=create)
    try:
        settling = open_store(db, migrate=False, busy_timeout_s=SETTLE_BUSY_TIMEOUT_S)
        try:
            settle(settling)
        finally:
            settling.close()
    except BaseException:
        store.close()
        raise
    return store


def settle(store: Any, *, wait_s: float = SETTLE_WAIT_S, quiet: bool = False) -> int:
    """Store every finished recording still waiting in a capture file; returns how many.

    Captures of running proxies are left to their indexers.  A finished one
    whose indexer is still at work is waited for (up to ``wait_s``); one whose
    indexer is gone is stored here, once: when the database refuses its data
    the capture is set aside (``claudetrace doctor`` lists it) and the recording
    marked ``incomplete``; when the database refuses any write for now (locked,
    full, unreachable) it stays for a later command, and the rest are not tried.
    Either way the caller goes on with what is stored.
    """
    done = 0
    cap.remove_stale_new(store.capture_url)
    for capture in cap.capture_files(store.capture_url):
        if cap.writer_alive(capture):
            continue
        try:
            fd = cap.open_lock(capture)
        except OSError:
            continue
        try:
            if not _lock(fd, wait_s, capture, quiet, store):
                continue
            if not capture.exists():
                done += 1  # its indexer finished while we waited
                continue
            try:
                follow(capture, store, replace=True, give_up_s=0.0)
            except cap.CaptureError as exc:
                _set_aside(capture, ".damaged", str(exc), quiet)
                continue
            except GaveUp as exc:
                if exc.transient:
                    if not quiet:
                        _say(f"warning: some recordings are still waiting to be stored "
                             f"({exc}); showing what is stored")
                    return done
                _quarantine(store, capture, str(exc), quiet)
                continue
            done += 1
        finally:
            os.close(fd)
    return done


def _quarantine(store: Any, capture: Path, reason: str, quiet: bool) -> None:
    """Set aside a capture the database refused, and say so on its recording."""
    target = _set_aside(capture, ".failed", f"the database refused it: {reason}", quiet)
    with contextlib.suppress(ClaudeTraceError):
        store.update_recording(
            capture.name.split(".", 1)[0],
            ended_ns=time.time_ns(), outcome="incomplete",
            outcome_reason=f"not all of it could be stored ({reason}); the capture is kept "
                           f"as {target.name} (see `claudetrace doctor`)",
        )


def _lock(fd: int, wait_s: float, capture: Path, quiet: bool, store: Any = None) -> bool:
    """Wait for the indexer storing ``capture`` to finish (its lock), up to ``wait_s`` —
    but not while the database takes no writes at all (another process's lock):
    that indexer waits for it as well, and the reader goes on without it.  A
    write lock held while the database's files change is that indexer's own (a
    large batch being written): waited for."""
    deadline = time.monotonic() + wait_s
    told = False
    start = time.monotonic()
    next_probe = start + 2.0
    files = _files_state(store)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        now = time.monotonic()
        if store is not None and now >= next_probe:
            if not store.takes_writes():
                before, files = files, _files_state(store)
                if files == before:  # held, and nothing written: not our indexer
                    deadline = now
            next_probe = time.monotonic() + 2.0
        if now >= deadline:
            if not quiet:
                print(
                    f"claudetrace: warning: recording {capture.stem} is still being stored "
                    "by another process; its newest events may be missing",
                    file=sys.stderr,
                )
            return False
        if not told and not quiet and now - start > 2.0:
            told = True
            print(
                f"claudetrace: waiting for recording {capture.stem} to be stored…",
                file=sys.stderr,
            )
        time.sleep(LOCK_POLL_S)


def _files_state(store: Any) -> tuple[int, ...] | None:
    """The sizes and modification times of a SQLite store's file and write-ahead
    log (None for a server database): they change while a writer writes."""
    from .store.engine import sqlite_path

    path = None if store is None else sqlite_path(store.url)
    if path is None:
        return None
    state: list[int] = []
    for name in (path, Path(f"{path}-wal")):
        try:
            info = name.stat()
        except OSError:
            state += (-1, -1)
        else:
            state += (info.st_size, info.st_mtime_ns)
    return tuple(state)


#: How often a reader waiting for an indexer looks whether it is done (its lock
#: is free): a command run right after a session starts at most this much later
#: than the recording is stored (each look is one system call).
LOCK_POLL_S: Final = 0.005


def _set_aside(capture: Path, suffix: str, reason: str, quiet: bool) -> Path:
    """A capture that cannot be stored is renamed, never deleted, and reported once."""
    target = cap.set_aside(capture, suffix, reason)
    if not quiet:
        _say(f"warning: {reason}; set aside as {target} (see `claudetrace doctor`)")
    return target


# -- the process ----------------------------------------------------------------------------


def indexer_command(
    capture: Path, lock_fd: int, wakeup_fd: int, otel: dict[str, Any] | None,
    child: tuple[int, int] | None = None,
) -> list[str]:
    """The indexer's command line; the database comes in ``$CLAUDETRACE_DB`` (not argv,
    where other users could read a password).  ``child``: the proxy's child, its pid
    and start time (:func:`~claudetrace.recording.start_time`), which the indexer
    ends should the proxy die without recording the child's exit."""
    argv = [
        sys.executable, "-m", "claudetrace.indexer", str(capture),
        "--lock-fd", str(lock_fd), "--wakeup-fd", str(wakeup_fd),
    ]
    if child is not None:
        argv += ["--child", f"{child[0]}:{child[1]}"]
    if otel is not None:
        argv += ["--otel", json.dumps(otel)]
    return argv


#: The writer's pipes' capacity (Linux lets a user set up to 1 MiB): a batch
#: crosses in a few wake-ups of the writer rather than a hundred.
PIPE_BYTES: Final = 1 << 20


def start_writer(url: str, *, kept_in: str | None = None,
                 busy_timeout_s: float | None = None,
                 lock_fd: int | None = None, idle: bool = False,
                 lazy_checkpoints: bool = False,
                 words_later: bool = False, pack: bool = False) -> subprocess.Popen[bytes]:
    """Start ``python -m claudetrace.store.writer_child`` for the database ``url`` (its
    requests on its stdin, its replies on its stdout: see
    :class:`~claudetrace.store.writer.WriterProcess`).  The URL goes in
    ``$CLAUDETRACE_DB``, not argv, where other users could read a password.
    ``kept_in``: where the data waits while the database cannot be opened.

    ``lock_fd``: the capture file's lock, which the child holds too until its
    requests end.  A writer outlives an indexer that was killed (it finishes
    what it was sent): while it may still commit, no reader may take the
    capture over and store it again.  The child runs in a session of its own,
    so a Ctrl-C at the terminal (meant for ``claudetrace import``, say) does not
    stop it halfway: its parent ends it by closing its requests.  ``idle``: it
    runs on idle CPU time as the indexer does (:func:`~claudetrace.config.yield_cpu`),
    once started.  ``lazy_checkpoints``: it copies SQLite's log into the database
    when the writes pause, not after each (for a writer whose end nobody waits
    for: :class:`~claudetrace.store.writer._Checkpoints`).  ``words_later``: a
    burst's search words are left for the pass after the recording is listed
    complete (:func:`_pack_lines`; :func:`~claudetrace.store.plain.defers_words`).
    ``pack``: it stores the lines packed on PostgreSQL, so that no row is
    written twice (:class:`~claudetrace.store.packing.PackAtIngest`)."""
    argv = [sys.executable, "-m", "claudetrace.store.writer_child"]
    if kept_in is not None:
        argv += ["--kept-in", kept_in]
    if busy_timeout_s is not None:
        argv += ["--busy-timeout", str(busy_timeout_s)]
    if lock_fd is not None:
        argv += ["--lock-fd", str(lock_fd)]
    if idle:
        argv.append("--idle")
    if lazy_checkpoints:
        argv.append("--lazy-checkpoints")
    if words_later:
        argv.append("--words-later")
    if pack:
        argv.append("--pack")
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               env={**os.environ, DB_ENV: url}, start_new_session=True,
                               pass_fds=() if lock_fd is None else (lock_fd,))
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            with contextlib.suppress(AttributeError, OSError):
                fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    return process


def writer_for(db: str | None) -> subprocess.Popen[bytes] | None:
    """The writer process ``claudetrace import`` starts for the database ``db``
    (first, so its start-up runs beside the command's); None when it cannot."""
    try:
        return start_writer(resolve_url(db))
    except OSError:
        return None


def _telemetry_sinks(
    otel: dict[str, Any] | None, capture: Path,
) -> Callable[[RecordingInfo], list[EventSink]]:
    """Live telemetry when the proxy passed ``--otel`` (its flags; ``OTEL_*`` apply too):
    a worker process that reads ``capture`` beside us (:mod:`claudetrace.telemetry.worker`)."""

    def make(info: RecordingInfo) -> list[EventSink]:
        if otel is None:
            return []
        from .telemetry.worker import TelemetryWorker

        try:
            return [TelemetryWorker(capture, otel, TELEMETRY_WAIT_S)]
        except OSError as exc:
            _say(f"warning: cannot start live telemetry ({exc.strerror or exc}); "
                 "the session continues without telemetry")
            return []

    return make


def main(argv: list[str] | None = None) -> int:
    """``python -m claudetrace.indexer CAPTURE --db URL --lock-fd N --wakeup-fd N``."""
    parser = argparse.ArgumentParser(prog="claudetrace.indexer")
    parser.add_argument("capture", type=Path)
    parser.add_argument("--db", help="[default: $CLAUDETRACE_DB]")
    parser.add_argument("--lock-fd", type=int)
    parser.add_argument("--wakeup-fd", type=int)
    parser.add_argument("--otel")
    parser.add_argument("--child", help="the proxy's child: PID:START_TICKS")
    args = parser.parse_args(argv)
    # The session's end is the proxy's business: a Ctrl-C meant for the CLI must
    # not stop us storing what it said.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    lock_fd = args.lock_fd
    if lock_fd is None:
        try:
            lock_fd = cap.open_lock(args.capture)
        except FileNotFoundError:  # stored and deleted, and its folder with it
            return 0
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        if not args.capture.exists():
            # Stored (and deleted) by whoever held the lock before us.
            cap.lock_path(args.capture).unlink(missing_ok=True)
            return 0
    # The database's work runs in a child, beside the parsing; started first, so
    # its start-up runs beside ours, and before we yield the CPU (it yields its
    # own once started): under a burst the proxy's forwarding takes both cores,
    # and the writer is ready for the first batch when the forwarding ends.
    # Without one, the writes are made here.
    url = resolve_url(args.db)
    try:
        writer: subprocess.Popen[bytes] | None = start_writer(
            url, kept_in=str(args.capture), lock_fd=lock_fd, idle=True, lazy_checkpoints=True,
            words_later=True, pack=True)
    except OSError as exc:
        _say(f"cannot start the writer ({exc.strerror or exc}); storing without it")
        writer = None
    yield_cpu()
    otel = json.loads(args.otel) if args.otel else None
    give_up = give_up_from_env()
    sinks_for = _telemetry_sinks(otel, args.capture)
    from .store.writer import WriterProcess

    # What start-up made (modules) lives as long as we do: the collector need
    # not look through it again on every full collection.
    gc.freeze()
    # A batch's events and rows are freed by their counts once handed over; the
    # collector, run after every 700 objects more by default, looked through
    # the batch being read 440 times in a 200k-event burst, for nothing (a
    # twelfth of our CPU time).  It still runs should we hold this many more.
    gc.set_threshold(GC_OBJECTS)
    store = WriterProcess(url, writer, words_later=True)
    try:
        report = follow(
            args.capture, store, wakeup_fd=args.wakeup_fd, sinks_for=sinks_for, give_up_s=give_up,
            add_words=functools.partial(_add_running_words, url),
            orphaned=_orphan_ender(args.child),
        )
        # Stored, and the capture file is gone: a reader waiting on its lock goes
        # on now, not once the writer has tidied up (SQLite folds its log into the
        # database as the last connection closes).
        os.close(lock_fd)
    except (GaveUp, ClaudeTraceError, cap.CaptureError) as exc:
        _say(f"the recording is kept in {args.capture} and will be stored by the next "
             f"claudetrace command that opens this database ({exc})")
        return 3
    finally:
        store.close()
    for problem in report.sink_errors:
        _say(problem)
    _pack_lines(url, report.recording_id)
    return 0


def _orphan_ender(child: str | None) -> Callable[[], object] | None:
    """What ends the proxy's child (``PID:START_TICKS``) when the proxy died first.

    A host that SIGKILLs the process it started (Go's ``exec.CommandContext`` on a
    timeout) would have killed the CLI itself without claudetrace; the proxy
    cannot catch SIGKILL to pass it on, so the child would run on, orphaned.
    It gets the same SIGKILL here, unless its pid now names another process.
    """
    if child is None:
        return None
    pid, _, ticks = child.partition(":")
    try:
        target, started = int(pid), int(ticks)
    except ValueError:
        return None
    return functools.partial(kill_if_same, target, started, signal.SIGKILL)


def _add_running_words(url: str, recording_id: str, stop: Callable[[], bool]) -> bool:
    """:func:`~claudetrace.store.backlog.add_running_words` (imported when first due)."""
    from .store.backlog import add_running_words

    return add_running_words(url, recording_id, stop=stop)


def _pack_lines(url: str, recording_id: str | None) -> None:
    """Pack the stored recording's lines (:mod:`claudetrace.store.packing`), and add
    the search words its writer left out of a burst's batches, off the burst's
    path: it is listed complete already.  A failure leaves them as they were
    recorded, for ``claudetrace db pack`` or the next search (which catches up)."""
    if recording_id is None:
        return
    from .store.packing import pack_url

    try:
        pack_url(url, recording_id)
    except Exception as exc:  # the lines are stored either way
        _say(f"the recording's lines are stored as recorded, not packed, and a burst's words "
             f"reach the search index with the next search ({_one_line(exc)}); "
             "`claudetrace db pack` packs them")


#: How long the indexer waits at the end for live telemetry's worker to catch up
#: and flush its export (it has its own, shorter, timeouts for the flush).
TELEMETRY_WAIT_S: Final = 60.0
def _retry(
    attempt: Callable[[], T],
    errors: type[Exception],
    failed: Callable[[Exception], None],
    writer_gone: Callable[[], bool],
    give_up_s: float,
) -> T:
    """``attempt()`` until it succeeds, with backoff, telling ``failed`` of each error.

    While the proxy runs there is no deadline (the capture file holds everything
    meanwhile); once it has gone, the last error is raised after ``give_up_s``
    more seconds of failures, or at once when the write found no room (a full
    disk or a file size limit does not pass in seconds, and the next command,
    which waits for this one, stores the capture file where it has room).
    """
    delay = 0.1
    failing_since: float | None = None
    while True:
        try:
            return attempt()
        except errors as exc:
            failed(exc)
            now = time.monotonic()
            if writer_gone():
                failing_since = failing_since or now
                if now - failing_since >= give_up_s or _no_room(exc):
                    raise
        time.sleep(delay)
        delay = min(delay * 2, 2.0)


def _no_room(exc: BaseException) -> bool:
    from .store.engine import is_out_of_room

    return is_out_of_room(exc)


def _one_line(exc: BaseException) -> str:
    from .store.engine import error_line

    return error_line(exc)


def _say(message: str) -> None:
    from .display import visible
    with contextlib.suppress(OSError, ValueError):
        print(f"claudetrace: {visible(message)}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    status = main()
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(status)
