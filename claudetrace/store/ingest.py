"""A cassette into the store through a writer, without SQLAlchemy.

:func:`import_cassette` reads a cassette's events and hands them to a writer
(a :class:`~.writer.WriterProcess`, whose child stores a SQLite file with
:mod:`.sqlite`) a batch at a time: ``claudetrace import`` of a cassette into
SQLite loads no database module in its own process unless something fails.
:meth:`~claudetrace.store.Store.import_cassette` is the same through a store.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from ..cassette import Cassette
from ..model import Session
from ..model.events import Event
from ..model.summary import figure_sums, outcome_columns, summary_columns, usage_warnings
from ..recording import RecordingInfo, new_recording_id
from .rows import stream_columns


class Writes(Protocol):
    """What :func:`import_cassette` writes through (a writer process, or a store's
    writes on a thread of its own)."""

    #: Whether anything may have been stored since it was last set False (else
    #: there is nothing to take back).
    stored_any: bool

    def create_recording(self, info: RecordingInfo) -> None: ...
    def write_batch(self, recording_id: str, events: list[Event],
                    recording_updates: dict[str, Any] | None = None) -> None: ...
    def wait_written(self) -> None: ...
    def close(self) -> None: ...


class Folds(Protocol):
    """A fold of a recording's lines as they are stored into a column of its row
    (the Stats page's latency samples:
    :class:`claudetrace.telemetry.latency.LatencyFold`)."""

    def feed(self, events: Sequence[Event]) -> None: ...
    def column(self, info: RecordingInfo, event_count: int) -> dict[str, Any]: ...


def import_cassette(
    writer: Writes,
    cassette: Cassette | tuple[dict[str, Any], Iterable[Event]],
    *,
    forget: Callable[[str], None],
    name: str | None = None,
    tags: dict[str, str] | None = None,
    batch: int = 2000,
    info: RecordingInfo | None = None,
    fold: Callable[[RecordingInfo], Folds] | None = None,
    created: bool = False,
) -> str:
    """Store a cassette as a new recording through ``writer``; returns its id.

    ``info`` describes the recording instead of the header (an importer that
    knows better: a Claude Code transcript, a recording id to keep).  ``fold``
    (given the recording): fed the lines as they are stored, its column is
    stored with the recording's end (the Stats page's latency samples).
    ``created``: the recording's row, without its end, is stored already (a half
    import replaced by ``info``'s, :meth:`~.api.Store.delete_half_import`).

    The events are read as they are stored, a batch at a time, so a cassette of
    any size takes a few batches' memory: the writer stores one while the next
    is read and folded.  If reading them fails half way (a malformed line,
    Ctrl-C), the writer is closed (what it holds is written or refused) and the
    half-stored recording is deleted again (``forget``).
    """
    if isinstance(cassette, Cassette):
        header, events = cassette.header, iter(cassette.events)
    else:
        header, events = cassette[0], iter(cassette[1])
    info = info_from_header(header) if info is None else info
    if name:
        info.name = name
    if tags:
        info.tags = {**info.tags, **tags}
    # What the writer did before (an earlier file of one import) is done: only
    # this recording may need taking back.
    writer.stored_any = False
    try:
        # Without its end until the last batch: an import killed half way (no
        # chance to take it back) leaves a recording that never claims to be
        # whole (``doctor`` lists it).
        if created:
            writer.stored_any = True  # this import's: taken back as its own rows are
        else:
            writer.create_recording(dataclasses.replace(info, ended_ns=None))
        _write_events(info, header, events, batch, writer,
                      None if fold is None else fold(info))
    except BaseException:
        _take_back(writer, forget, info.id)
        raise
    return info.id


def _take_back(writer: Writes, forget: Callable[[str], None], recording_id: str) -> None:
    """Close ``writer`` and delete what it stored of ``recording_id``, a Ctrl-C
    held meanwhile: a second one (pressed twice, or again while the store opens)
    stopped this half way and left half a recording in the store.  Should the
    delete fail (a full disk), that is said in one line; the first error is the
    one the caller raises.  Nothing is deleted when nothing was stored (the
    store could not be opened, say): the recording was never there."""
    from ..interrupts import HeldInterrupts

    held = HeldInterrupts()
    try:
        writer.close()
        if not writer.stored_any:
            return
        try:
            forget(recording_id)
        except Exception as exc:
            from .engine import error_line

            with contextlib.suppress(OSError, ValueError):
                print(f"claudetrace: the half-imported recording {recording_id} is still in "
                      f"the store: {error_line(exc)}", file=sys.stderr, flush=True)
    finally:
        held.release()


def _write_events(info: RecordingInfo, header: dict[str, Any], events: Iterator[Event],
                  batch: int, writer: Writes, fold: Folds | None = None) -> None:
    session = Session(model=info.model, session_id=info.cli_session_id)
    pending: list[Event] = []
    last_t = 0
    for ev in events:
        session.add(ev)
        info.observe(ev)
        last_t = ev.t_ns
        pending.append(ev)
        if len(pending) >= batch:
            if fold is not None:
                fold.feed(pending)
            writer.write_batch(info.id, pending)
            pending = []
    end = header.get("ended_ns")
    ended_ns = end if isinstance(end, int) else info.started_ns + last_t
    latencies = None
    if fold is not None:
        fold.feed(pending)
        latencies = fold.column(dataclasses.replace(info, ended_ns=ended_ns),
                                session.event_count)
    columns = ended_columns(session, info, ended_ns, latencies)
    damaged = usage_warnings(session)
    if damaged:
        info.extra["warnings"] = [*info.extra.get("warnings", ()), *damaged]
        columns["extra"] = dict(info.extra)
    writer.write_batch(info.id, pending, columns)
    writer.wait_written()


def ended_columns(session: Session, info: RecordingInfo, ended_ns: int,
                  latencies: dict[str, Any] | None = None) -> dict[str, Any]:
    """What an imported recording's row says once all its events are read
    (``latencies``: its latency samples folded as they were read, else None:
    folded later)."""
    return {
        **summary_columns(session, started_ns=info.started_ns),
        **outcome_columns(session.outcome(
            ended=True, exit_code=info.exit_code, signal=info.signal, error=info.error)),
        **stream_columns(info),
        "figures": figure_sums(session),
        # Lines stored anew: their latencies as folded now, else folded again later.
        "latencies": latencies,
        "ended_ns": ended_ns,
        "last_seen_ns": ended_ns,
    }


def info_from_header(header: dict[str, Any]) -> RecordingInfo:
    """A new recording's metadata from a cassette header (unknown fields kept)."""
    from .._version import __version__

    def get(key: str, kind: type, default: Any = None) -> Any:
        value = header.get(key)
        return value if isinstance(value, kind) and not isinstance(value, bool) else default

    started = get("started_ns", int) or time.time_ns()
    argv = header.get("argv")
    tags = header.get("tags")
    return RecordingInfo(
        id=new_recording_id(started),
        argv=[str(a) for a in argv] if isinstance(argv, list) else [],
        started_ns=started,
        cwd=get("cwd", str, ""),
        host=get("host", str, ""),
        name=get("name", str),
        tags={str(k): str(v) for k, v in tags.items()} if isinstance(tags, dict) else {},
        claudetrace_version=__version__,
        source="import",
        ended_ns=get("ended_ns", int),
        exit_code=get("exit_code", int),
        signal=get("signal", int),
        error=get("error", str),
        cli_session_id=get("session_id", str),
        claude_code_version=get("claude_code_version", str),
        model=get("model", str),
        permission_mode=get("permission_mode", str),
        extra={"cassette_header": header},
    )
