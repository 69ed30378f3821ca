"""The indexer's database writes, in a process of their own beside its parsing.

Under a burst the indexer's time goes about half to reading, parsing and folding
lines and half to the database's own work (``executemany``, ``commit``).  A
:class:`WriterProcess` is a child, ``python -m claudetrace.store.writer_child``, that
holds the database connection: the indexer (or ``claudetrace import``) builds
each batch's rows (:func:`~claudetrace.store.event_rows`), hands them over a pipe
and reads the next batch while the child writes this one, so the two halves run
on two cores.  It is a new interpreter, not a fork: SQLite's locks belong to a
process, and a forked child of one with a connection open cannot use the file.

What is stored does not change: the same rows in the same transactions (one a
batch, with the recording's figures), in the same order.  On a SQLite file at the
newest schema the child writes through :class:`~.sqlite.SqliteWrites`, and
neither it nor the indexer loads SQLAlchemy (:func:`_open_writes`).  A batch the child
could not write is kept and sent again, before anything newer, when the indexer
retries; the failure is raised by the call that finds it, so the indexer's
retry policy is the one it has with a plain :class:`~claudetrace.store.Store`.
:meth:`WriterProcess.wait_written` returns once every batch is committed (the
indexer deletes the capture file only after it).  When the child has gone
(killed), the writes go on in the calling process.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any, Final, NamedTuple, cast

from ..config import resolve_url, yield_cpu
from ..errors import ClaudeTraceError, SessionNotFound, StoreError
from ..recording import RecordingInfo
from .packing import PackAtIngest
from .plain import NotPlain, PlainWrites
from .postgres import PostgresWrites, plain_url
from .rows import DATA_AT, Flat, Rows, event_rows, first_seq, flat_rows
from .schema import make_if_new
from .sqlite import BUSY_TIMEOUT_S, SqliteWrites, first_line, is_busy, plain_file

if TYPE_CHECKING:
    from ..model.events import Event
    from .api import Store

    #: What carries out the requests: the child's plain writes, else a store.
    Writes = Store | SqliteWrites | PostgresWrites

#: A request's length, its number and how many lines follow it out of band
#: (:data:`OUT_OF_BAND_BYTES`), before the pickled request.
_REQUEST: Final = struct.Struct("<QQQ")
#: The length of a line that follows its request out of band, before its bytes.
_BUFFER: Final = struct.Struct("<Q")
#: A line from this many bytes on crosses to the child beside its batch's pickle
#: rather than in it (pickle protocol 5's out-of-band buffers): its bytes are
#: written to the pipe as they are and read into the very ``bytes`` the child
#: stores, where pickling copied them into the frame and unpickling out of it
#: again (a burst of files read whole, 196 MB of lines: two copies of each, a
#: fifth of the indexer's CPU time and a sixth of the writer's).
OUT_OF_BAND_BYTES: Final = 64 * 1024
#: A reply's length, before the pickled reply ``(number, done, reason, transient)``.
_REPLY: Final = struct.Struct("<Q")
#: Requests sent and not answered at most: the child always has the next batch
#: at hand, and the caller holds a few batches at most.
WINDOW: Final = 2
#: The write-ahead log's size (bytes) at which a write copies it into the
#: database itself (SQLite's ``wal_autocheckpoint``, in pages of the file's
#: size): the checkpoint thread keeps it smaller, and this bounds it.
LOG_BYTES: Final = 256 * 1024 * 1024
#: A lazy writer's checkpoint thread copies the log once the writes have paused
#: this long (seconds): longer than between a burst's batches, which the indexer
#: cuts every 0.2 s (:data:`claudetrace.indexer.MAX_LATENCY_S`), later still when
#: it waits for a core, and shorter than its heartbeat's 1 s, so that a quiet
#: session's log is copied between beats.  At 0.05 s a burst's log was copied
#: after nearly every batch (a sixth of the writer's CPU time before the burst
#: was listed, on the tool-heavy shape), its last pages again each time…
CHECKPOINT_PAUSE_S: Final = 0.5
#: …or once this many bytes of requests have been written since the last copy
#: began, well before the connection's own bound (:data:`LOG_BYTES`).
CHECKPOINT_BYTES: Final = LOG_BYTES // 2

#: What the child may be asked to do: the writing methods of the store.
_OPERATIONS: Final = frozenset({"create_recording", "write_rows", "update_recording"})


class WriteFailed(StoreError):
    """The writer process could not carry out a write; ``transient`` as for
    :func:`~claudetrace.store.engine.is_transient_error` on its own error."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


class WriterProcess:
    """The writing half of a :class:`~claudetrace.store.Store`, run in a child.

    ``process`` is the child, ``python -m claudetrace.store.writer_child`` started for
    the database ``url`` (:func:`claudetrace.indexer.start_writer`, which needs
    no database module: the indexer starts it before importing them).  The child
    opens the database at once, so the connection is ready by the first batch,
    and again on each request while that fails.  When the child has gone (or
    ``process`` is None), this process writes to ``url`` itself.

    Requests are numbered.  Up to :data:`WINDOW` of them are in the pipe or
    being written at once, so the child never waits for the next batch.  The
    child carries out only the request it expects next: after a failure it
    skips the rest, and the caller's next call sends them all again, in order.
    """

    def __init__(self, url: str, process: subprocess.Popen[bytes] | None, *,
                 busy_timeout_s: float = BUSY_TIMEOUT_S, words_later: bool = False) -> None:
        self._url = url
        #: The child leaves a burst's search words for the pass after the
        #: recording ends (it was started so: :func:`_open_writes`).
        self.words_later = words_later and process is not None
        self._busy_timeout_s = busy_timeout_s
        self._local: Store | None = None
        #: Requests taken and not yet done, in order, with their numbers.
        self._pending: deque[tuple[int, _Frame]] = deque()
        self._next = 0
        #: Requests sent whose reply has not been read.
        self._unanswered = 0
        #: The child skipped what followed a failure: the pending go again.
        self._resend = False
        #: The child went without answering the first pending request: it may be done.
        self._maybe_written = False
        #: Whether a request may have been carried out since this was last set
        #: False (nothing was stored when it is False).
        self.stored_any = False
        self._process = process
        #: SQLite: the rows cross to the child as :class:`~.rows.Flat` rows.
        self._flat = url.startswith("sqlite")
        if process is not None:
            assert process.stdin is not None and process.stdout is not None
            self._requests, self._replies = process.stdin, process.stdout

    @property
    def pid(self) -> int | None:
        """The child's process id; None once it has gone."""
        return None if self._process is None else self._process.pid

    # -- the store's writing methods ---------------------------------------------------------

    def create_recording(self, info: RecordingInfo) -> None:
        """Taken like a batch: its failure is raised by a later call."""
        self._submit("create_recording", info)

    def write_batch(self, recording_id: str, events: Sequence[Event],
                    recording_updates: dict[str, Any] | None = None) -> None:
        """Hand a batch to the child and return while it is written.  A failure
        to write it is raised by a later call (the batch is kept and sent again);
        one raised here is an earlier batch's, and this one was not taken."""
        rows: Rows
        tools: Rows
        rows, tools = (flat_rows if self._flat else event_rows)(recording_id, events)
        self._submit("write_rows", recording_id, rows, tools, recording_updates)

    def update_recording(self, recording_id: str, **values: Any) -> None:
        self._submit("update_recording", recording_id, values)
        self.wait_written()

    def wait_written(self) -> None:
        """Return once every request so far is done; else raise the first failure
        (the request and those after it are kept, and sent again by the next call)."""
        self._send_again()
        while self._unanswered:
            self._read_reply()
        if self._pending:  # the child has gone: this process writes the rest
            self._write_here()

    def close(self) -> None:
        """Let the child finish and exit, and wait for it."""
        # What it has not answered yet it carries out before it ends.
        self.stored_any = self.stored_any or (self._unanswered > 0 and self.pid is not None)
        self._reap()
        if self._local is not None:
            self._local.close()
            self._local = None

    # -- requests ----------------------------------------------------------------------------

    def _submit(self, op: str, *args: Any) -> None:
        """Take a request (once it is taken, its failure is raised by a later call)."""
        self._send_again()
        while self._unanswered >= WINDOW:
            self._read_reply()
        if self.pid is None:  # written here, as a store would: nothing to pickle
            self._write_here()
            self._apply_noted(self._local_store(), op, args)
            return
        frame = _Frame.of(op, args)
        self._pending.append((self._next, frame))
        self._send(self._next, frame)
        self._next += 1

    def _send(self, number: int, frame: _Frame) -> None:
        # Counted first: a Ctrl-C while the frame is written may leave it in our
        # buffer, which closing the pipe flushes, and the child carries it out.
        self._unanswered += 1
        try:
            write = self._requests.write
            write(_REQUEST.pack(len(frame.body), number, len(frame.lines)))
            write(frame.body)
            for line in frame.lines:
                write(_BUFFER.pack(len(line)))
                write(line)
            self._requests.flush()
        except OSError:  # the child has gone: its reply will be missing
            pass

    def _send_again(self) -> None:
        if self._resend and self.pid is not None:
            self._resend = False
            for number, frame in self._pending:
                self._send(number, frame)

    def _read_reply(self) -> None:
        """Read one reply; on a failure, read the rest too (the child skipped them)
        and raise it."""
        reply = _read_reply(self._replies)
        if reply is None:  # the child has gone
            self._reap()
            self._unanswered = 0
            self._maybe_written = True
            self.stored_any = self.stored_any or bool(self._pending)
            self._write_here()
            return
        self._unanswered -= 1
        number, done, message, transient = reply
        if done:
            first, _ = self._pending.popleft()
            assert first == number, "the writer answered out of order"
            self.stored_any = True
            return
        if message is None:
            return  # skipped after an earlier failure
        while self._unanswered:
            if _read_reply(self._replies) is None:
                self._unanswered = 0
                break
            self._unanswered -= 1
        self._resend = True
        raise WriteFailed(message, transient=transient)

    def _write_here(self) -> None:
        """The child has gone: write what it left in this process, in order.
        The first may have been written by the child before it went: that is
        looked up (until it succeeds; a failure here is raised and retried)."""
        while self._pending:
            op, args = self._pending[0][1].request()
            store = self._local_store()
            if not (self._maybe_written and _written_already(store, op, args)):
                self._apply_noted(store, op, args)
            self._maybe_written = False
            self._pending.popleft()

    def _apply_noted(self, store: Store, op: str, args: tuple[Any, ...]) -> None:
        """:func:`_apply_here`, noted in :attr:`stored_any` before it is made (a
        Ctrl-C after its commit must not hide it) and taken back if it fails."""
        before, self.stored_any = self.stored_any, True
        try:
            _apply_here(store, op, args)
        except Exception:
            self.stored_any = before
            raise

    def _local_store(self) -> Store:
        if self._local is None:
            self._local = _open(self._url, self._busy_timeout_s)
        return self._local

    def _reap(self) -> None:
        """Close the pipes (the child ends with its requests) and wait for the child."""
        if self._process is not None:
            with contextlib.suppress(OSError):
                self._requests.close()
            self._process.wait()  # it answers what it has, then ends
            with contextlib.suppress(OSError):
                self._replies.close()
            self._process = None


def _open(url: str | None, busy_timeout_s: float) -> Store:
    from .api import open_store

    return open_store(url, log_bytes=LOG_BYTES, busy_timeout_s=busy_timeout_s)


def _open_writes(busy_timeout_s: float, *, words_later: bool = False,
                 pack: bool = False) -> Writes:
    """The child's database (``$CLAUDETRACE_DB``): a SQLite file at the newest schema
    is written through :class:`~.sqlite.SqliteWrites` (a new one made first from the
    schema script, :mod:`.schema`), and a PostgreSQL database
    through :class:`~.postgres.PostgresWrites`, without loading SQLAlchemy;
    anything else is opened as a store (made or migrated as needed), as is a
    database psycopg cannot reach plainly: the store says why.  ``words_later``:
    a burst's batches go without their search words, which the pass after the
    recording ends adds (:func:`~.plain.defers_words`); a store writes them
    with every batch.  ``pack``: on PostgreSQL each batch's lines are stored
    packed, once the store has a line dictionary
    (:attr:`~.postgres.PostgresWrites.packing`); elsewhere, and through a store,
    they are stored as recorded and packed after the recording ends."""
    writes = _open_plain(busy_timeout_s)
    if words_later and isinstance(writes, PlainWrites):
        writes.words_later = True
    if pack and isinstance(writes, PostgresWrites):
        writes.packing = PackAtIngest()
    return writes


def _open_plain(busy_timeout_s: float) -> Writes:
    url = resolve_url(None)
    conninfo = plain_url(url)
    if conninfo is not None:
        try:
            return PostgresWrites(conninfo)
        except Exception:  # not at the head, no psycopg, unreachable: the store decides
            return _open(url, busy_timeout_s)
    make_if_new(url)  # a new file: made from the schema script, then written plainly
    path = plain_file(url)
    if path is not None:
        import sqlite3

        try:
            return SqliteWrites(path, busy_timeout_s=busy_timeout_s, log_bytes=LOG_BYTES)
        except NotPlain:
            pass
        except sqlite3.Error as exc:
            # Busy in a step that does not wait (the switch to the write-ahead
            # log while another process writes): the store's opening waits.
            if not is_busy(exc):
                raise StoreError(f"cannot open database {path}: {first_line(exc)}") from exc
    return _open(url, busy_timeout_s)


def _read_reply(stream: IO[bytes]) -> Any:
    """The next reply on ``stream``; None at its end."""
    body = _read(stream, _REPLY)
    return None if body is None else pickle.loads(body[1])


def _read(stream: IO[bytes], header: struct.Struct) -> tuple[int, bytes] | None:
    """The next frame: the header's number (if any) and the body; None at the end."""
    try:
        head = stream.read(header.size)
        if len(head) < header.size:
            return None
        size, *number = header.unpack(head)
        body = stream.read(size)
    except OSError:
        return None
    return (number[0] if number else 0, body) if len(body) == size else None


def _read_request(stream: IO[bytes]) -> tuple[int, _Frame] | None:
    """The next request: its number and its frame (the pickle, then its lines
    out of band, each read into a ``bytes`` of its own); None at the end."""
    try:
        head = stream.read(_REQUEST.size)
        if len(head) < _REQUEST.size:
            return None
        size, number, count = _REQUEST.unpack(head)
        body = stream.read(size)
        lines: list[bytes] = []
        for _ in range(count):
            length = stream.read(_BUFFER.size)
            if len(length) < _BUFFER.size:
                return None
            (line_size,) = _BUFFER.unpack(length)
            line = stream.read(line_size)
            if len(line) != line_size:
                return None
            lines.append(line)
    except OSError:
        return None
    return (number, _Frame(body, tuple(lines))) if len(body) == size else None


class _Frame(NamedTuple):
    """A request as it crosses to the child: its pickle, and the lines it refers
    to out of band (:data:`OUT_OF_BAND_BYTES`), in its order."""

    body: bytes
    lines: tuple[bytes, ...] = ()

    @classmethod
    def of(cls, op: str, args: tuple[Any, ...]) -> _Frame:
        """``(op, args)`` pickled, but for a batch's long lines (:func:`_lines_out_of_band`),
        which go beside it."""
        if op == "write_rows":
            args = (args[0], _lines_out_of_band(args[1]), *args[2:])
        buffers: list[pickle.PickleBuffer] = []
        body = pickle.dumps((op, args), protocol=5, buffer_callback=buffers.append)
        # The bytes each wraps (a line of the rows), to be written as they are.
        return cls(body, tuple(cast("bytes", buffer.raw().obj) for buffer in buffers))

    @property
    def size(self) -> int:
        """Its bytes: the pickle's and its lines'."""
        return len(self.body) + sum(map(len, self.lines))

    def request(self) -> tuple[str, tuple[Any, ...]]:
        """``(op, args)`` again, each line out of band the ``bytes`` it was."""
        op, args = pickle.loads(self.body, buffers=self.lines)
        return op, args


def _lines_out_of_band(rows: Rows) -> Rows:
    """``rows`` (of ``events``) with each line of :data:`OUT_OF_BAND_BYTES` or more
    wrapped in a :class:`pickle.PickleBuffer`, for :meth:`_Frame.of` to leave out of
    the pickle (:class:`~.rows.Flat` rows in place: they are the request's own);
    ``rows`` as they are when none is that long."""
    if isinstance(rows, Flat):
        values, width = rows.values, rows.width
        if max(map(len, values[DATA_AT::width]), default=0) >= OUT_OF_BAND_BYTES:
            for at in range(DATA_AT, len(values), width):
                if len(values[at]) >= OUT_OF_BAND_BYTES:
                    values[at] = pickle.PickleBuffer(values[at])
        return rows
    if max((len(row[DATA_AT]) for row in rows), default=0) < OUT_OF_BAND_BYTES:
        return rows
    return [row if len(row[DATA_AT]) < OUT_OF_BAND_BYTES
            else (*row[:DATA_AT], pickle.PickleBuffer(row[DATA_AT]), *row[DATA_AT + 1:])
            for row in rows]


def _written_already(store: Store, op: str, args: tuple[Any, ...]) -> bool:
    """Whether a request was carried out (by a child that went before it replied).
    Its batch is one transaction: stored whole or not at all.  Doing an update
    twice changes nothing."""
    if op == "create_recording":
        try:
            store.get(args[0].id)
        except SessionNotFound:
            return False
        return True
    if op == "write_rows":
        recording_id, seq = args[0], first_seq(args[1])
        return seq is not None and store.has_event(recording_id, seq)
    return False


def _apply(store: Writes, op: str, args: tuple[Any, ...]) -> None:
    if op not in _OPERATIONS:
        raise StoreError(f"the writer cannot {op!r}")
    if op == "update_recording":
        recording_id, values = args
        store.update_recording(recording_id, **values)
    else:
        getattr(store, op)(*args)


def _apply_here(store: Writes, op: str, args: tuple[Any, ...]) -> None:
    """:func:`_apply` in the calling process: a database's failure is raised as
    the child's would be (:class:`WriteFailed`, in one line)."""
    try:
        _apply(store, op, args)
    except ClaudeTraceError:
        raise
    except Exception as exc:
        from .engine import error_line, is_transient_error

        raise WriteFailed(error_line(exc), transient=is_transient_error(exc)) from exc


def _serve(requests: IO[bytes], replies: IO[bytes], busy_timeout_s: float,
           kept_in: str | None, lock_fd: int | None = None, *,
           lazy_checkpoints: bool = False, words_later: bool = False,
           pack: bool = False) -> None:
    """The child: carry out each request in order and answer it, until the
    requests end.  After a failure, the requests that follow are skipped
    until the failed one comes again.  ``lock_fd`` (the capture file's lock,
    shared with the indexer) is closed once the requests have ended: nothing
    more will be committed then, whether the indexer is done or was killed.
    ``lazy_checkpoints``: see :class:`_Checkpoints`; ``words_later`` and ``pack``:
    see :func:`_open_writes`."""
    store: Writes | None = None
    told = False

    def open_store() -> Writes:
        nonlocal told
        try:
            return _open_writes(busy_timeout_s, words_later=words_later, pack=pack)
        except ClaudeTraceError as exc:
            # Said once (but a lock), for a recording nobody else speaks for; an
            # importer says its own errors.
            if kept_in is not None and not told and "locked" not in str(exc).lower():
                told = True
                _say(f"cannot open the store ({exc}); the recording is kept in {kept_in} "
                     "meanwhile")
            raise

    incoming = _Incoming(requests)
    with contextlib.suppress(ClaudeTraceError):
        store = open_store()
    expected = 0
    checkpoints = _Checkpoints(lazy=lazy_checkpoints)
    try:
        while (request := incoming.next()) is not None:
            number, frame = request
            reply: tuple[int, bool, str | None, bool] = (number, False, None, False)  # skipped
            if number == expected:
                try:
                    if store is None:
                        store = open_store()
                    op, args = frame.request()
                    _apply(store, op, args)
                    checkpoints.after_write(store, frame.size)
                    expected += 1
                    reply = (number, True, None, False)
                except Exception as exc:  # the parent decides what to do
                    from .engine import error_line, is_transient_error

                    reply = (number, False, error_line(exc), is_transient_error(exc))
            answer = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
            replies.write(_REPLY.pack(len(answer)) + answer)
            replies.flush()
    finally:
        if lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(lock_fd)
        checkpoints.stop()
        if store is not None:
            store.close()


class _Incoming:
    """The requests, read off their pipe by a thread of their own as they come.

    A batch is larger than the pipe holds: read only once the last one was
    written, the caller's write of the next stopped, half done, until then, and
    the two processes took turns rather than working side by side (under a
    burst each waited about a tenth of its time for the other).  The thread
    takes each request off the pipe at once (the read waits in the kernel,
    without the interpreter's lock), so the caller goes on to its next batch.
    What it holds is bounded by the caller, which has at most :data:`WINDOW`
    requests unanswered (and sends again only those).
    """

    def __init__(self, stream: IO[bytes]) -> None:
        import queue

        self._queue: queue.SimpleQueue[tuple[int, _Frame] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, args=(stream,),
                                        name="claudetrace-requests", daemon=True)
        self._thread.start()

    def _run(self, stream: IO[bytes]) -> None:
        try:
            while (request := _read_request(stream)) is not None:
                self._queue.put(request)
        finally:
            self._queue.put(None)

    def next(self) -> tuple[int, _Frame] | None:
        """The next request; None once the requests have ended."""
        return self._queue.get()


class _Checkpoints:
    """Copies SQLite's write-ahead log into the database file on a thread of its
    own, beside the writes: the copy waits on the disk (two ``fsync`` each
    time), which would otherwise stop the writes for about a fifth of their time
    under a burst.  The connection's own, at :data:`LOG_BYTES`, bounds the log.

    A copy runs after a write, once the last one is done; a ``lazy`` writer's
    (the indexer's, whose end nobody waits for) once the writes pause
    (:data:`CHECKPOINT_PAUSE_S`) or :data:`CHECKPOINT_BYTES` more were written.
    Under a burst the same pages (the B-trees' last leaves and their parents)
    change in every batch: copied after each batch they were written again and
    again, two ``fsync`` each time; lazily, a 200k-event burst is copied once,
    after it, and is queryable a tenth sooner for a tenth less CPU time
    (``bench ingest``).  An importer's writer copies eagerly: the importer waits
    for it to end, and the copy left for its close would be on that clock.
    """

    def __init__(self, *, lazy: bool = False) -> None:
        self._lazy = lazy
        self._wake = threading.Event()
        self._store: Writes | None = None
        self._stopping = False
        self._thread: threading.Thread | None = None
        #: Bytes of requests written since the last copy began (approximate: the
        #: thread resets it while the writes add to it).
        self._written = 0

    def after_write(self, store: Writes, size: int) -> None:
        """A write of a request of ``size`` bytes was committed."""
        if self._thread is None:
            self._store = store
            self._thread = threading.Thread(target=self._run, name="claudetrace-checkpoints",
                                            daemon=True)
            self._thread.start()
        self._written += size
        self._wake.set()

    def stop(self) -> None:
        if self._thread is not None:
            self._stopping = True
            self._wake.set()
            self._thread.join()

    def copy_now(self) -> bool:
        """Whether the log is to be copied without waiting for the writes to pause."""
        return not self._lazy or self._written >= CHECKPOINT_BYTES

    def _due(self) -> bool:
        """Wait until a copy is due (False: stopping instead)."""
        while True:
            self._wake.clear()
            if self._stopping:
                return False
            if self.copy_now() or not self._wake.wait(CHECKPOINT_PAUSE_S):
                return True

    def _run(self) -> None:
        assert self._store is not None
        while True:
            self._wake.wait()
            if not self._due():
                return
            self._written = 0
            with contextlib.suppress(Exception):  # the next one, or the connection's own
                self._store.checkpoint()


def _say(message: str) -> None:
    from ..display import visible
    with contextlib.suppress(OSError, ValueError):
        print(f"claudetrace: {visible(message)}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """The writer process (``python -m claudetrace.store.writer_child [--busy-timeout S]
    [--kept-in PATH] [--lock-fd N] [--idle] [--lazy-checkpoints] [--words-later] [--pack]``,
    which sets SQLite up first): serve the requests on stdin, in the database of
    ``$CLAUDETRACE_DB``; ``--kept-in`` names where the data waits while the
    database cannot be opened (said once); ``--words-later``: a burst's search
    words are left for the pass after the recording ends, ``--pack``: the lines are
    stored packed on PostgreSQL (:func:`_open_writes`)."""
    import argparse
    import gc
    import signal

    parser = argparse.ArgumentParser(prog="claudetrace.store.writer_child")
    parser.add_argument("--busy-timeout", type=float, default=BUSY_TIMEOUT_S)
    parser.add_argument("--kept-in")
    parser.add_argument("--lock-fd", type=int)
    parser.add_argument("--idle", action="store_true", help="run on idle CPU time")
    parser.add_argument("--lazy-checkpoints", action="store_true",
                        help="copy the log into the database when the writes pause")
    parser.add_argument("--words-later", action="store_true",
                        help="leave a burst's search words for the pass after the end")
    parser.add_argument("--pack", action="store_true",
                        help="store the lines packed (PostgreSQL, once it has a dictionary)")
    args = parser.parse_args(argv)
    if args.idle:
        yield_cpu()
    # Its parent decides when writing ends (by closing stdin): a Ctrl-C meant for
    # the CLI must not stop it halfway.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    # What start-up made (modules) lives as long as we do: the collector, which
    # each batch's rows set off, need not look through it again every time.
    gc.freeze()
    try:
        _serve(sys.stdin.buffer, sys.stdout.buffer, args.busy_timeout, args.kept_in,
               args.lock_fd, lazy_checkpoints=args.lazy_checkpoints,
               words_later=args.words_later, pack=args.pack)
    except BrokenPipeError:  # the parent has gone: nobody waits for the answers
        return 0
    except BaseException as exc:  # the parent writes the rest itself
        from .engine import error_line

        _say(f"the writer stopped ({error_line(exc)})")
        return 1
    return 0

