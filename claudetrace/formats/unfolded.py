"""Claude Code sessions imported usage first, and folded after.

A folder import waits for what ``usage`` and ``sessions`` read, not for the
fold of every session into its events.  :func:`scan` reads a session's files
once, keeping each line's exact bytes and, of the lines that say it, the
session's times, project, version and model and each API message's tokens
(its largest figures, as the session model keeps them: subagents included);
:func:`put` stores those (:meth:`~claudetrace.store.api.Batch.put_unfolded`):
the lines as they are, the recording's row, its ``usage_calls`` rows priced by
the table, and its mark in ``unfolded`` (:mod:`claudetrace.store.unfolded`).

:func:`fold` does what an import did after converting, later: it claims the
recording's mark in a transaction of its own, writes its stored lines back
into files laid out as they were read, converts them as an import converts a
session's files, and stores the result over the lines (the recording's
events, summary, tool rows, search words and usage rows).  The pass
(:func:`start_pass`: ``python -m claudetrace.formats.unfolded``, detached,
at idle priority) folds every recording not folded yet, one at a time, and
exits when none is left.  ``CLAUDETRACE_FOLD=now`` (or ``import --wait``) folds
in the import's own process instead.

A session :func:`scan` cannot read as simply (a line over the reading's bound,
the CLI's own cost lines, no time at all) is converted at once, as before; so
is one whose status, end or warnings only its converted turns tell (an API
error, an interrupt, a damaged line or token count, a last turn that may not
have ended): what ``sessions``, the UI's list and ``/metrics`` say of a
session stored usage first is what they say once it is folded, but for what
only the fold knows (its turns, tool calls and converted lines: not known yet).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ..errors import StoreError
from ..model.protocol import INTERRUPTED_BY_USER
from ..model.usage import Usage
from ..recording import RecordingInfo
from .folding import FOLD_ENV, fold_later, fold_now, start_pass
from .jsonl import MAX_LINE
from .layout import SOURCE, SessionFiles
from .timeline import out_of_range, timestamp_ns

if TYPE_CHECKING:
    from ..model.parts import Cost
    from ..model.session import Session
    from .imports import Action, Imported, Unit, _Pending

_ENTRY_TYPES: Final = frozenset({"user", "assistant", "system", "summary", "attachment"})
_SYNTHETIC: Final = "<synthetic>"


class _Message(msgspec.Struct):
    id: Any = None
    model: Any = None
    usage: Any = None


class _Entry(msgspec.Struct):
    type: Any = None
    timestamp: Any = None


class _Line(_Entry):
    message: _Message | None = None
    cwd: Any = None
    version: Any = None
    permissionMode: Any = None
    subtype: Any = None
    isApiErrorMessage: Any = None
    error: Any = None


_DECODE: Final = msgspec.json.Decoder(_Line).decode


class _Link(_Entry):
    """What :func:`~.timeline.main_items` reads of a line to join resumed files."""

    uuid: Any = None
    sessionId: Any = None
    isSidechain: Any = None


_DECODE_LINK: Final = msgspec.json.Decoder(_Link).decode
_INTERRUPTED: Final = INTERRUPTED_BY_USER.encode()


@dataclass
class _Call:
    model: Any
    usage: Usage
    at: int


@dataclass
class Scanned:
    """What :func:`scan` read of a session's files."""

    lines: list[tuple[bytes, bool]] = field(default_factory=list)
    #: ``[role, path, lines]`` a file, in the order of :attr:`lines`.
    files: list[list[Any]] = field(default_factory=list)
    calls: dict[str, _Call] = field(default_factory=dict)
    first_ns: int | None = None
    last_ns: int | None = None
    cwd: str | None = None
    version: str | None = None
    model: str | None = None
    mode: str | None = None
    damage: int = 0
    #: The session ids a resumed session went on as (``extra["resumed_as"]``).
    resumed_as: list[str] = field(default_factory=list)
    #: API messages with a damaged token count (the fold's warnings say so).
    damaged_usage: int = 0


def _file_lines(path: Path) -> Iterator[tuple[bytes, bool]]:
    """Each line of ``path`` as it is, with whether a newline ended it."""
    with open(path, "rb") as f:
        while True:
            raw = f.readline(MAX_LINE + 1)
            if not raw:
                return
            if raw.endswith(b"\n"):
                yield raw[:-1], True
            elif len(raw) > MAX_LINE:
                raise _TooLong
            else:
                yield raw, False


class _TooLong(Exception):
    """A line longer than the readers take: the session is converted at once."""


def scan(unit: Unit) -> Scanned | None:
    """A session's files read for :func:`put`, or None when the session is to be
    converted at once (see the module's text)."""
    files = unit.files
    if files is None:
        return None
    got = Scanned()
    last: int | None = None
    mains: list[tuple[int, int, int, int]] = []
    try:
        for role, paths in (("main", files.mains), ("side", files.sides)):
            for path in paths:
                count = 0
                begin, first, size = len(got.lines), None, 0
                for data, eol in _file_lines(path):
                    size += len(data) + eol
                    got.lines.append((data, eol))
                    count += 1
                    try:
                        line = _DECODE(data)
                    except (msgspec.DecodeError, RecursionError):
                        if eol and data.strip():
                            got.damage += 1
                        continue
                    if line.type == "cost-state" or _turn_may_fail(line, data):
                        # The CLI's own costs (the fold shares them out), or a
                        # status only the turns tell: converted at once.
                        return None
                    if out_of_range(line.timestamp):
                        got.damage += 1
                        continue
                    when = timestamp_ns(line.timestamp)
                    if first is None:
                        first = when
                    if when is None:
                        when = last
                    last = when
                    if line.type not in _ENTRY_TYPES or when is None:
                        continue
                    _take(got, line, when, role)
                got.files.append([role, str(path), count])
                if role == "main":
                    mains.append((1 << 62 if first is None else first, size, begin, len(got.lines)))
    except (_TooLong, RecursionError):
        return None
    if got.first_ns is None or got.damage or got.damaged_usage:
        # No time, or no conversation (the converter says which); damaged lines
        # or token counts (the fold's warnings name them).
        return None
    if not _last_turn(got, mains) or not _resumes(got, mains, files.session_id):
        return None  # a last turn that may not have ended: the fold says
    return got


def _turn_may_fail(line: _Line, data: bytes) -> bool:
    """Whether ``line`` may make a turn fail or be interrupted (an API error, an
    interrupt, a damaged token count): the status says which turn, which only
    the converted session knows, so such a session is converted at once."""
    if line.isApiErrorMessage is True or line.subtype == "api_error":
        return True
    if line.type == "user":
        return _INTERRUPTED in data
    msg = line.message
    if line.type != "assistant" or msg is None:
        return False
    return bool(line.error) or msg.model == _SYNTHETIC


def _last_turn(got: Scanned, mains: list[tuple[int, int, int, int]]) -> bool:
    """The recording's model, version and permission mode as the converted session's
    last ``system/init`` sets them (one per turn, from the turn's prompt and the
    model of its first main-thread answer): read back from the end, so only the
    last turn's lines are decoded in full.  Whether the session surely ended, as
    the converter decides it (:func:`_ended`)."""
    from .claude_code import opens_turn

    answer: Any = None  # the earliest main-thread answer after the line at hand
    command: tuple[Any, Any] | None = None
    tail: dict[str, Any] | None = None  # the main thread's last user or assistant line
    for _first, _size, begin, end in sorted(mains, reverse=True):  # the converter's order
        for data, _eol in reversed(got.lines[begin:end]):
            try:
                entry = msgspec.json.decode(data)
            except (msgspec.DecodeError, RecursionError):
                continue
            if not isinstance(entry, dict) or entry.get("isSidechain") is True:
                continue
            kind = entry.get("type")
            if tail is None and kind in ("user", "assistant"):
                tail = entry
            if kind == "assistant":
                msg = entry.get("message")
                answer = msg.get("model") if isinstance(msg, dict) else None
                answer = answer if isinstance(answer, str) else _SYNTHETIC
            elif kind == "user" and answer is not None:
                opens = opens_turn(entry)
                if opens == "prompt":
                    _init(got, entry, answer)
                    return _ended(tail)
                if opens == "command":
                    command = (entry, answer)  # a turn only when no prompt is before it
    if command is not None:
        _init(got, *command)
    return False  # no prompt: a turn a compaction kept, or commands only


def _ended(tail: dict[str, Any] | None) -> bool:
    """Whether a session whose last turn opens with a prompt surely ended as the
    converter says it (its last turn finished: an answer it counts, not waiting
    on a tool), from the main thread's last user or assistant line ``tail``."""
    from .claude_code import waits_on_tools

    if tail is None or tail.get("type") != "assistant":
        return False
    msg = tail.get("message")
    return (isinstance(msg, dict) and isinstance(msg.get("id"), str)
            and isinstance(msg.get("usage"), dict) and not waits_on_tools(tail))


def _resumes(got: Scanned, mains: list[tuple[int, int, int, int]], session_id: str) -> bool:
    """The session ids a session resumed across its main files went on as, read as
    the converter reads them (:func:`~.timeline.main_items`' resume markers);
    False when a later file holds nothing new (the fold says how it reads)."""
    if len(mains) < 2:
        return True
    from .timeline import main_items

    def entries(begin: int, end: int) -> Iterator[dict[str, Any]]:
        for data, _eol in got.lines[begin:end]:
            with contextlib.suppress(msgspec.DecodeError, RecursionError):
                entry = _DECODE_LINK(data)
                yield {"type": entry.type, "uuid": entry.uuid, "sessionId": entry.sessionId,
                       "timestamp": entry.timestamp, "isSidechain": entry.isSidechain}

    order = sorted(mains)
    markers = 0
    for _when, entry, _chain in main_items(entries(b, e) for _f, _s, b, e in order):
        if entry.get("subtype") != "resume":
            continue
        markers += 1
        sid = entry.get("resumed_as")
        if isinstance(sid, str) and sid != session_id and sid not in got.resumed_as:
            got.resumed_as.append(sid)
    return markers == len(order) - 1


def _init(got: Scanned, entry: dict[str, Any], model: Any) -> None:
    if model != _SYNTHETIC:
        got.model = model  # else the session's first model, as the converter says
    for attr, key in (("version", "version"), ("mode", "permissionMode")):
        if isinstance(entry.get(key), str):
            setattr(got, attr, entry[key])


def _take(got: Scanned, line: _Line, when: int, role: str) -> None:
    if got.first_ns is None or (role == "side" and when < got.first_ns):
        got.first_ns = when
    got.last_ns = when if got.last_ns is None else max(got.last_ns, when)
    if got.cwd is None and isinstance(line.cwd, str) and line.cwd:
        got.cwd = line.cwd
    if got.version is None and isinstance(line.version, str):
        got.version = line.version
    if got.mode is None and isinstance(line.permissionMode, str):
        got.mode = line.permissionMode
    msg = line.message
    if line.type != "assistant" or msg is None:
        return
    model = msg.model
    if got.model is None and isinstance(model, str) and model != _SYNTHETIC:
        got.model = model
    if not isinstance(msg.id, str) or not isinstance(msg.usage, dict):
        return
    seen = Usage.from_api(msg.usage)
    if seen.damaged:
        got.damaged_usage += 1
    call = got.calls.get(msg.id)
    if call is None:
        got.calls[msg.id] = _Call(model if isinstance(model, str) else None, seen, when)
        return
    have = call.usage
    if (seen.input > have.input or seen.output > have.output
            or seen.cache_read > have.cache_read or seen.cache_creation > have.cache_creation):
        call.at = when  # the line whose figure counts
    have.input = max(have.input, seen.input)
    have.output = max(have.output, seen.output)
    have.cache_read = max(have.cache_read, seen.cache_read)
    have.cache_creation = max(have.cache_creation, seen.cache_creation)
    have.cache_creation_1h = max(have.cache_creation_1h, seen.cache_creation_1h)


def summary_of(got: Scanned) -> dict[str, Any]:
    """The recording's columns (and ``usage_calls`` rows) from what :func:`scan` read."""
    from ..store.rows import USAGE_CALLS
    from .claude_code import result_subtype

    session = _session(got)
    cost = session.cost()  # each call priced once, for its row and its model's figures
    rows: list[tuple[Any, ...]] = []
    total = Usage()
    usd = 0.0
    priced = bool(got.calls)
    for call_id, call in got.calls.items():
        u = call.usage
        if not u:
            continue  # no tokens: no row (the session model's rule)
        model = call.model or got.model
        price = cost.by_call[call_id]
        priced = priced and price is not None
        usd += price or 0.0
        rows.append((call_id, call.at, model or "unknown", u.input, u.output, u.cache_read,
                     u.cache_creation, price, "unknown" if price is None else "estimate",
                     u.cache_creation_1h))
        total.input += u.input
        total.output += u.output
        total.cache_read += u.cache_read
        total.cache_creation += u.cache_creation
    return {
        "models": _model_figures(session, cost),
        # Of the last turn's result, which every session stored usage first has
        # (scan: an ended last turn that opened with a prompt, not interrupted).
        "result_subtype": result_subtype(interrupted=False),
        "event_count": len(got.lines),
        "byte_count": sum(len(data) for data, _eol in got.lines),
        "model_calls": len(got.calls),
        "input_tokens": total.input,
        "output_tokens": total.output,
        "cache_read_tokens": total.cache_read,
        "cache_creation_tokens": total.cache_creation,
        "cost_usd": round(usd, 9) if priced else 0.0,
        "cost_source": "estimate" if priced else "unknown",
        "ended_ns": got.last_ns,
        "last_seen_ns": got.last_ns,
        USAGE_CALLS: rows,
    }


def _session(got: Scanned) -> Session:
    """A session model of the calls :func:`scan` read (no turns: those come with
    the fold), which prices them as the fold's does."""
    from ..model.parts import ModelCall
    from ..model.session import Session

    session = Session(model=got.model)
    for call_id, call in got.calls.items():
        session.calls[call_id] = ModelCall(call_id, call.model, None, 0, 0, call.at, call.at,
                                           False, call.usage)
    return session


def _model_figures(session: Session, cost: Cost) -> dict[str, dict[str, Any]]:
    """The ``models`` column as the fold gives it
    (:func:`~claudetrace.model.summary.model_figures`), each model's ``turns`` not
    known yet (None: the turns come with the fold)."""
    from ..model.summary import model_figures

    figures = model_figures(session, cost)
    for figure in figures.values():
        figure["turns"] = None
    return figures


def put(opened: Callable[[], Any], batch: Any, pending: _Pending, got: Scanned,
        name: str | None, tags: dict[str, str] | None) -> Imported:
    """Store a session :func:`scan` read, usage first, in ``batch`` (the import's
    :class:`~.imports._Batched`); what became of it."""
    from .._version import __version__
    from .continuation import continues
    from .imports import _peeks_of, _recording_of, stable_recording_id
    from .layout import READING

    unit, known = pending.unit, pending.known
    files = unit.files
    assert files is not None and got.first_ns is not None
    sid = files.session_id
    layout = {"files": got.files}
    summary = summary_of(got)

    def recording(known: Any) -> RecordingInfo:
        assert files is not None and got.first_ns is not None
        info = RecordingInfo(
            id=known.id if known is not None else stable_recording_id(SOURCE, sid, got.first_ns),
            argv=[], started_ns=got.first_ns, cwd=got.cwd or "", source=SOURCE,
            ended_ns=got.last_ns, cli_session_id=sid, claude_code_version=got.version,
            model=got.model, permission_mode=got.mode, claudetrace_version=__version__,
            extra={"source_path": str(files.path.resolve()), "session_id": sid,
                   "fingerprint": pending.digest, "files": pending.sizes,
                   "reading": READING.decode(), **_peeks_of(unit)})
        if got.resumed_as:
            info.extra["resumed_as"] = got.resumed_as
        link = continues(files.path)
        if link is not None:
            info.extra["continues"] = link
        if known is not None:
            info.name, info.tags = known.name, dict(known.tags or {})
        if name:
            info.name = name
        if tags:
            info.tags = {**info.tags, **tags}
        return info

    if known is None:
        # A new session, written without the store where the batch can (the
        # batch's transaction looks whether another importer stored it meanwhile).
        info = recording(None)
        if batch.put_new(info, got.lines, layout=layout, summary=summary):
            return _imported(unit, info.id, sid, "imported", got.damage)
        known = _recording_of(opened, SOURCE, sid, None)
        if pending.stored_as(known):  # by another import, since it was looked at
            return _imported(unit, known.id, sid, "unchanged", 0)
    info = recording(known)
    try:
        done = batch.put_unfolded(info, got.lines, layout=layout, summary=summary)
    except StoreError:
        # Another importer stored this session meanwhile (the same id): nothing to
        # do when it stored these files, else once more, as an update of it.
        stored = _recording_of(opened, SOURCE, sid, None) if known is None else None
        if stored is None:
            raise
        if pending.stored_as(stored):
            return _imported(unit, stored.id, sid, "unchanged", 0)
        done = batch.put_unfolded(info, got.lines, layout=layout, summary=summary)
    action: Action = "imported" if not done.found else (
        "updated" if known is not None or done.changed else "unchanged")
    return _imported(unit, info.id, sid, action, got.damage)


def _imported(unit: Unit, recording_id: str, sid: str, action: Action, damage: int
              ) -> Imported:
    from ..display import plural
    from .imports import Imported

    note = f"{plural(damage, 'damaged line')} skipped" if damage else ""
    return Imported(unit.path, unit.kind, action, recording_id, sid, note=note, damage=damage)


def _write_files(store: Any, recording_id: str, layout: dict[str, Any], folder: Path
                 ) -> tuple[SessionFiles, dict[str, str]]:
    """The recording's stored lines written back into files under ``folder``, laid
    out as ``layout`` says; the session's files there, and the real path of each."""
    lines = store.iter_line_pages(recording_id)
    pending: list[tuple[bytes, bool]] = []

    def take() -> tuple[bytes, bool]:
        while not pending:
            page = next(lines)
            pending.extend((bytes(row[3]), bool(row[4])) for row in page)
            pending.reverse()
        return pending.pop()

    mains: list[Path] = []
    sides: list[Path] = []
    real: dict[str, str] = {}
    for at, (role, path, count) in enumerate(layout["files"]):
        place = folder / str(at)
        place.mkdir()
        copy = place / Path(path).name
        with open(copy, "wb") as f:
            for _ in range(count):
                data, eol = take()
                f.write(data + b"\n" if eol else data)
        (mains if role == "main" else sides).append(copy)
        real[str(copy)] = path
    sid = store.get(recording_id).extra.get("session_id") or mains[0].stem
    return SessionFiles(str(sid), mains, sides), real


def _converted(store: Any, recording_id: str, layout: dict[str, Any]
               ) -> tuple[Any, dict[str, str]]:
    """The recording's stored lines converted as its import converts a session's
    files (None: they hold no session after all), and the real path of each copy."""
    from .claude_code import TranscriptError
    from .imports import Unit, _convert

    with tempfile.TemporaryDirectory(prefix="claudetrace-fold-") as folder:
        files, real = _write_files(store, recording_id, layout, Path(folder))
        try:
            return _convert(Unit("transcript", files.path, files)), real
        except TranscriptError:
            return None, real


def _put(batch: Any, rec: Any, made: Any, real: dict[str, str]) -> Any:
    """Store what :func:`_converted` made of ``rec`` in ``batch``, as ``rec`` (its id,
    name, tags and what it keeps of its files); the recording's info."""
    from .spool import Spool

    converted = made.transcript
    info = converted.info
    info.id, info.name, info.tags = rec.id, rec.name, dict(rec.tags or {})
    info.extra = {**info.extra, **(rec.extra or {})}
    if converted.warnings:
        info.extra["warnings"] = [_real(w, real) for w in converted.warnings]
        info.extra["damaged_lines"] = converted.damage
    seen = None if converted.finished else converted.last_entry_ns
    batch.put(info, Spool.read(made.spool), open_seen_ns=seen, summary=made.summary)
    return info


def fold(store: Any, recording_id: str) -> bool:
    """Fold ``recording_id`` if it is not folded yet (:mod:`claudetrace.store.unfolded`),
    in one transaction; whether this call folded it.  A recording whose lines
    hold no session after all (no conversation) is deleted, as its import would
    have skipped it."""
    from .imports import _fold

    with contextlib.closing(store.batch()) as batch:
        layout = batch.claim_unfolded(recording_id)
        if layout is None:
            return False
        rec = store.get(recording_id)
        made, real = _converted(store, recording_id, layout)
        if made is not None:
            try:
                info = _put(batch, rec, made, real)
                batch.commit()
            finally:
                os.unlink(made.spool)
    if made is None:
        store.delete_recordings([recording_id])
        return True
    _fold(lambda: store, SOURCE, recording_id, info.extra, None)
    return True


def folded_apart(store: Any, rec: Any) -> tuple[Any, Any]:
    """``rec`` folded into a store in memory of its own, ``store`` left as it is (one
    that cannot be written: read-only, a full disk); that store and the recording
    in it, read as they would be after a stored fold (``store`` and ``rec`` when
    its lines hold no session)."""
    from ..store import open_store
    from ..store.unfolded import layout_of

    layout = layout_of(store, rec.id)
    if layout is None:
        return store, store.get(rec.id)  # folded meanwhile, by another
    made, real = _converted(store, rec.id, layout)
    if made is None:
        return store, rec
    apart = open_store("sqlite://")
    try:
        with contextlib.closing(apart.batch()) as batch:
            _put(batch, rec, made, real)
            batch.commit()
    finally:
        os.unlink(made.spool)
    return apart, apart.get(rec.id)


def _real(warning: str, real: dict[str, str]) -> str:
    for copy, path in real.items():
        warning = warning.replace(copy, path)
    return warning


def fold_all(store: Any, *, stop: Callable[[], bool] | None = None,
             tried: set[str] | None = None,
             failed: Callable[[str, Exception], None] | None = None) -> int:
    """Fold every recording not folded yet, one at a time; how many this call folded.
    ``tried``: the ids tried already (each is tried once), added to; ``failed``: told
    of a recording that could not be folded, and the next one is tried (else the
    error is raised)."""
    from ..store.unfolded import pending

    done = 0
    tried = set() if tried is None else tried
    while True:
        waiting = [rid for rid in pending(store) if rid not in tried]
        if not waiting or (stop is not None and stop()):
            return done
        for rid in waiting:
            tried.add(rid)
            try:
                done += fold(store, rid)
            except Exception as exc:
                if failed is None:
                    raise
                failed(rid, exc)
            if stop is not None and stop():
                return done


def whole(store: Any, rec: Any) -> tuple[Any, Any]:
    """``rec`` (a stored :class:`~claudetrace.store.models.Recording`) folded now if
    it is not folded yet, read again then: what a reader of one recording asks
    first (``show``, ``export``, ``replay``, ``otel``, ``tail``, the UI's page);
    the store to read it from, and the recording.  A store that cannot be written
    (read-only, a full disk) is read as it is: the fold is made in memory
    (:func:`folded_apart`)."""
    from ..store.unfolded import is_unfolded

    if not is_unfolded(store, rec.id):
        return store, rec
    try:
        fold(store, rec.id)
    except StoreError:
        return folded_apart(store, rec)
    return store, store.get(rec.id)


def _idle() -> None:
    """This process at the lowest priority the system gives (idle scheduling where
    there is one)."""
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    with contextlib.suppress(OSError):
        os.nice(19)


def _say(line: str) -> None:
    """A line of the pass's log (its stderr: :func:`~.folding.start_pass`)."""
    import time

    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} fold pass {os.getpid()}: {line}",
          file=sys.stderr, flush=True)


def _reason(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """The pass: ``python -m claudetrace.formats.unfolded [URL] [--lock-fd N]``
    (by default the database in ``$CLAUDETRACE_DB``, where :func:`start_pass` puts
    it; ``--lock-fd``: the store's pass lock, taken by whoever started it)."""
    import fcntl

    from ..config import DB_ENV
    from ..store import open_store
    from ..store.unfolded import pending
    from .folding import pass_files, take_lock

    args = sys.argv[1:] if argv is None else list(argv)
    lock: int | None = None
    if "--lock-fd" in args:
        at = args.index("--lock-fd")
        lock = int(args[at + 1])
        del args[at:at + 2]
    url = args[0] if args else os.environ[DB_ENV]
    _idle()
    if lock is None:
        with contextlib.suppress(OSError):
            lock = take_lock(pass_files(url)[0])
            if lock is None:
                return 0  # a pass is running: it folds them
    tried: set[str] = set()
    try:
        store = open_store(url)
        try:
            while True:
                fold_all(store, tried=tried,
                         failed=lambda rid, exc: _say(f"cannot fold {rid}: {_reason(exc)}"))
                if lock is None:
                    return 0
                # Let go, then look once more: an import that found the lock
                # taken had stored what it stored before it looked, so it is seen.
                fcntl.flock(lock, fcntl.LOCK_UN)
                if not [rid for rid in pending(store) if rid not in tried]:
                    return 0
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return 0  # another pass took over: it folds them
        finally:
            store.close()
    except Exception as exc:
        _say(f"stopped: {_reason(exc)}")
        return 1


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["FOLD_ENV", "Scanned", "fold", "fold_all", "fold_later", "fold_now", "folded_apart",
           "main",
           "put", "scan", "start_pass", "summary_of", "whole"]
