"""``claudetrace import``: cassettes, Claude Code transcripts and claude-trace logs,
told apart by content, one file's trouble never another's.

:meth:`Planner.plan` turns the paths named (files, folders such as ``~/.claude/projects``)
into what to import: each cassette and claude-trace log, and each Claude Code
session with all its files (:mod:`.layout`), and the files it skips, each with
what it seems to be.  :func:`import_unit` stores one (:func:`import_units`
several).  Sessions and logs are
imported idempotently: the recording of a session is found again by its CLI
session id, an unchanged one is skipped without being read, one that grew
updates the same recording (its id stays; the stored events that begin the new
ones are kept, in one transaction: :meth:`~claudetrace.store.Store.put_recording`),
and one whose files are now shorter than when imported is reported and left as
stored, never cut.  A new session's recording id is made from its session id and
start, so two importers of one session (two ``import --watch``, an import
during a watch) write the same recording.  A cassette's recording id is made
from its bytes (:func:`cassette_recording_id`): importing it again is
``unchanged``, and replaces a half import (one killed before its end) in place.
:class:`Watcher` imports what is new or has grown, again and again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..display import plural
from ..errors import ClaudeTraceError, StoreError
from ..ids import new_recording_id, recording_id_ns
from .layout import (
    ENTRY_TYPES,
    READING,
    SOURCE,
    SessionFiles,
    base_folder,
    file_names,
    fingerprint,
    is_side_chain,
    owner_folder,
    owner_name,
    peek,
    side_chains_of,
    stamp,
    walk,
)
from .layout import sessions as group_sessions
from .owner import importing_elsewhere, this_importer

if TYPE_CHECKING:
    import subprocess

    from ..model.events import Event
    from .claude_code import Transcript

# The readers and converters (and the event model under them) are imported where
# a file is read or converted: an unchanged tree is planned and found unchanged
# from its files' stat alone, and those imports were a third of that pass.

Kind = Literal["cassette", "transcript", "claude-trace"]
Action = Literal["imported", "updated", "unchanged", "skipped", "truncated"]
#: File names looked at in folders (cassettes are ``*.ndjson`` by custom).
_SUFFIXES = (".jsonl", ".ndjson")
#: The stored ``cli_session_id`` is cut to this; the whole id is in ``extra``.
_SESSION_ID_SIZE = 64


class ImportFormatError(ClaudeTraceError):
    """A file that is neither a cassette nor a Claude Code transcript; ``pending``
    when it is empty or its first line is still being written (nothing is wrong
    with it yet)."""

    def __init__(self, message: str, *, pending: bool = False) -> None:
        super().__init__(message)
        self.pending = pending


@dataclass(frozen=True)
class Imported:
    """What became of one session, log, cassette or skipped file."""

    path: Path
    kind: Kind | None
    action: Action
    recording_id: str | None
    session_id: str | None = None
    #: Why it was skipped, or what was wrong (damaged lines).
    note: str = ""
    damage: int = 0
    #: Earlier recordings of the session's resumed files, folded into this one.
    folded: tuple[str, ...] = ()


@dataclass
class Unit:
    """One thing to import: a cassette, a claude-trace log, or a session's files."""

    kind: Kind
    path: Path
    files: SessionFiles | None = None
    #: What the planner read of its files' first lines, by path (:data:`Peeked`).
    peeked: dict[Path, Peeked] = field(default_factory=dict)

    @property
    def paths(self) -> list[Path]:
        return self.files.files if self.files is not None else [self.path]


def detect(path: Path) -> Kind:
    """Whether ``path`` holds a cassette, a Claude Code transcript or a claude-trace log
    (its first line tells); else :class:`ImportFormatError` saying what it seems to be."""
    return probe(path)[0]


def probe(path: Path) -> tuple[Kind, dict[str, Any]]:
    """:func:`detect`, with the first line's object."""
    from .claude_code import is_transcript_line
    from .claude_trace import is_claude_trace_line
    from .jsonl import EMPTY, UNFINISHED, UnreadableFile, first_object, looks_like

    try:
        obj, why = first_object(path)
    except UnreadableFile as exc:
        raise ImportFormatError(str(exc)) from exc
    if obj is not None:
        if obj.get("claudetrace") == "cassette":
            return "cassette", obj
        if is_transcript_line(obj):
            return "transcript", obj
        if is_claude_trace_line(obj):
            return "claude-trace", obj
        why = looks_like(obj)
    if obj is None and why in (EMPTY, UNFINISHED):
        raise ImportFormatError(f"{path}: {why}", pending=True)
    raise ImportFormatError(
        f"{path}: not a claudetrace cassette, a Claude Code transcript or a claude-trace log"
        f" ({why})")


#: What planning reads of a file's first lines, kept with its recording
#: (``extra["peeked"]``, by name: :func:`stored_peeks`) so that the next plan
#: of an unchanged file reads it from there: the file's :func:`~.layout.stamp`
#: (size, modification and change times, inode) when read, then its kind, its
#: session id and its first entry's uuid; or, for a file under a session's
#: folder that is no transcript (a workflow's ``journal.jsonl``), ``"skipped"``
#: and what it seems to be.
Peeked = list[Any]


@dataclass
class Planner:
    """Turns paths into :class:`Unit` s, remembering what it learnt of each file (its
    kind and session id do not change) from one look to the next.

    ``stored`` (:func:`stored_peeks`): what an earlier import read of the first
    lines of files, by absolute path; a file whose stamp is still the one it had
    then is not opened again."""

    known: dict[Path, tuple[Kind, str | None]] = field(default_factory=dict)
    #: Each main transcript's first entry's uuid (a resumed session's files share it).
    starts: dict[Path, str | None] = field(default_factory=dict)
    stored: dict[str, Peeked] = field(default_factory=dict)
    #: The stamp of each file whose first lines were read (or found in ``stored``).
    stamps: dict[Path, tuple[int, ...]] = field(default_factory=dict)
    #: Why each file read (or found in ``stored``) is no transcript, cassette or log.
    skips: dict[Path, str] = field(default_factory=dict)

    def kind(self, path: Path) -> tuple[Kind, str | None]:
        found = self.known.get(path)
        if found is None and path.name.startswith("agent-") and owner_name(path):
            # A side chain filed under its session: its folder says whose it is.
            return "transcript", None
        if found is None and path in self.skips:
            self._skipped_again(path)
        if found is None and self.stored:
            found = self._stored(path)
        if found is None:
            with contextlib.suppress(OSError):  # the probe says what is wrong
                self.stamps[path] = stamp(os.stat(path))
            try:
                kind, obj = probe(path)
            except ImportFormatError as exc:
                said = str(exc).removeprefix(f"{path}: ")
                if not exc.pending and said != str(exc) and said.startswith("not a "):
                    self.skips[path] = said
                raise
            sid, uid = obj.get("sessionId"), obj.get("uuid")
            if obj.get("type") not in ENTRY_TYPES:
                uid = None
            if kind == "transcript" and not (isinstance(sid, str) and isinstance(uid, str)):
                peeked = peek(path)
                sid = sid if isinstance(sid, str) else peeked[0]
                uid = uid if isinstance(uid, str) else peeked[1]
            found = (kind, sid if isinstance(sid, str) and sid else None)
            self.known[path] = found
            if kind == "transcript":
                self.starts[path] = uid if isinstance(uid, str) and uid else None
        return found

    def _skipped_again(self, path: Path) -> None:
        """Skip again, unread, a file found no transcript before (a watch's next
        look), while it is the same file."""
        try:
            now = stamp(os.stat(path))
        except OSError:
            return
        if self.stamps.get(path) == now:
            raise ImportFormatError(f"{path}: {self.skips[path]}")

    def _stored(self, path: Path) -> tuple[Kind, str | None] | None:
        """What ``stored`` says of ``path``, when it is still the same file."""
        peeked = self.stored.get(os.path.abspath(path))
        if peeked is None or len(peeked) != 7:
            return None
        try:
            now = stamp(os.stat(path))
        except OSError:
            return None
        kind, sid, uid = peeked[4:]
        if tuple(peeked[:4]) != now or kind not in ("transcript", "claude-trace", "skipped"):
            return None
        self.stamps[path] = now
        if kind == "skipped":
            self.skips[path] = str(sid)
            raise ImportFormatError(f"{path}: {sid}")
        found: tuple[Kind, str | None] = (kind, sid if isinstance(sid, str) and sid else None)
        self.known[path] = found
        if kind == "transcript":
            self.starts[path] = uid if isinstance(uid, str) and uid else None
        return found

    def _peeked(self, paths: Iterable[Path]) -> dict[Path, Peeked]:
        return {path: [*self.stamps[path], *self.known[path], self.starts.get(path)]
                if path in self.known else [*self.stamps[path], "skipped", self.skips[path], None]
                for path in paths if path in self.stamps and (
                    path in self.known or path in self.skips)}

    def first_uuid(self, path: Path) -> str | None:
        """A main transcript's first entry's uuid (:func:`.layout.peek_first_uuid`)."""
        if path not in self.starts:
            self.starts[path] = peek(path)[1]
        return self.starts[path]

    def session_id(self, path: Path) -> str | None:
        """The session id in a transcript's first lines (None for other files)."""
        try:
            kind, sid = self.kind(path)
        except ImportFormatError:
            return None
        return sid if kind == "transcript" else None

    def plan(self, paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Unit], list[Imported]]:
        """What to import under ``paths``, and the files skipped (one line each)."""
        units: list[Unit] = []
        skipped: list[Imported] = []
        transcripts: list[Path] = []
        wanted: set[Path] = set()
        unreadable: list[Path] = []
        for path, named in self._files(paths, unreadable):
            try:
                kind, _sid = self.kind(path)
            except ImportFormatError as exc:
                if named is not False and not (exc.pending and named is None):
                    skipped.append(Imported(path, None, "skipped", None, note=str(exc)))
                continue
            if kind == "transcript":
                transcripts.append(path)
                if named is not False:
                    wanted.add(path)
            elif named is not False:
                units.append(Unit(kind, path, peeked=self._peeked([path])))
        owners: dict[str, Unit] = {}
        for group in group_sessions(dict.fromkeys(transcripts), self.session_id,
                                    self.first_uuid):
            if wanted.intersection(group.files):
                unit = Unit("transcript", group.path, group, self._peeked(group.files))
                units.append(unit)
                owners.update((str(p.with_suffix("")), unit) for p in group.mains)
                owners.update((owner, unit) for p in group.sides if (owner := owner_name(p)))
        # What is no transcript is remembered with a session, so that it is
        # skipped again without being read: a session's folder's with that
        # session, a project's (another tool's log, notes) with its first
        # session, anything else with the first session of all.
        sessions = [u for u in units if u.files is not None]
        beside: dict[Path, Unit] = {}
        for unit in reversed(sessions):
            beside[unit.path.parent] = unit
        for done in skipped:
            owner = owner_name(done.path)
            host = owners.get(owner) if owner is not None else None
            host = host or beside.get(done.path.parent) or (sessions[0] if sessions else None)
            if host is not None:
                host.peeked.update(self._peeked([done.path]))
        skipped += [Imported(folder, None, "skipped", None,
                             note=f"{folder}: cannot list this folder's files (permission denied)")
                    for folder in dict.fromkeys(unreadable)]
        return units, skipped

    @staticmethod
    def _files(paths: Iterable[str | os.PathLike[str]],
               unreadable: list[Path]) -> Iterable[tuple[Path, bool | None]]:
        """Each file to look at, with whether it was asked for (None: found in a
        folder named; False: only looked at as a named session's possible part);
        the folders that cannot be listed are added to ``unreadable``."""
        for given in paths:
            path = Path(given).expanduser()
            try:
                is_dir = stat.S_ISDIR(os.stat(path).st_mode)
            except (FileNotFoundError, NotADirectoryError):
                is_dir = False
            except OSError as exc:  # in a folder that cannot be read, say
                raise ImportFormatError(
                    f"cannot read cassette or transcript {path}: {exc.strerror}") from None
            if is_dir:
                for found in walk(path, _SUFFIXES, unreadable):
                    yield found, None
            elif path.exists():
                yield path, True
                # A session named by one of its files: its main file and side
                # chains, wherever filed.
                owner = owner_folder(path)
                main = owner.with_suffix(".jsonl") if owner is not None else path
                if main != path and main.is_file():
                    yield main, False
                for side in side_chains_of(main, unreadable):
                    if side != path:
                        yield side, False
                # Its other files beside it: old-style agent files, a resumed
                # session's other files (one session id; others are left out).
                for sibling in sorted(path.parent.glob("*.jsonl")):
                    if sibling != path:
                        yield sibling, False
            else:
                raise ImportFormatError(
                    f"cannot read cassette or transcript {path}: no such file or folder"
                )


def expand(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The files to import under ``paths``: a session's by its first file."""
    units, _skipped = Planner().plan(paths)
    return [u.path for u in units]


def stable_recording_id(source: str, session_id: str, started_ns: int) -> str:
    """A new session's recording id: a ULID whose random part is the session id's
    digest, so every importer of it makes the same one."""
    digest = hashlib.sha256(f"{source}\0{session_id}".encode()).digest()
    return new_recording_id(started_ns, random=digest)


@dataclass(frozen=True)
class Known:
    """What an import needs of a stored recording of a session."""

    id: str
    cli_session_id: str | None
    name: str | None
    tags: dict[str, str]
    extra: dict[str, Any]


#: Stored sessions by source and (cut) CLI session id.
Index = dict[tuple[str, str], Known]


def index_of(rows: Iterable[tuple[Any, ...]]) -> Index:
    """An :data:`Index` of ``(id, source, cli_session_id, name, tags, extra)`` rows
    (JSON columns parsed or as text)."""
    index: Index = {}
    for rid, source, sid, name, tags, extra in rows:
        if isinstance(tags, str):
            tags = json.loads(tags)
        if isinstance(extra, str):
            extra = json.loads(extra)
        if sid is not None:
            index.setdefault((source, sid), Known(rid, sid, name, tags or {}, extra or {}))
    return index


#: The ``source`` of recordings converted from files, as :func:`stored_sessions` reads them.
_CONVERTED = (SOURCE, "claude-trace")


def stored_sessions(url: str, store: Callable[[], Any]) -> Index:
    """Every stored session converted from a transcript or log, read in one query:
    straight from a SQLite file (no SQLAlchemy to load when nothing changed), else
    through ``store()``."""
    found = stored_in_file(url)
    return found if found is not None else index_of(store().converted_sessions(_CONVERTED))


def stored_in_file(url: str) -> Index | None:
    """:func:`stored_sessions` read straight from a plain SQLite file (read-only,
    nothing written) or a PostgreSQL database through psycopg alone (no
    SQLAlchemy, no models), in one query; None when ``url`` names neither or
    it cannot be read so."""
    import sqlite3

    from ..config import plain_file

    if url.startswith("postgresql"):
        return _stored_in_server(url)
    path = plain_file(url)
    if path is None:
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro",
                                                uri=True)) as conn:
            return index_of(conn.execute(
                "SELECT id, source, cli_session_id, name, tags, extra FROM recordings"
                " WHERE source IN (?, ?)", _CONVERTED))
    except (sqlite3.Error, ValueError):
        return None  # not there yet, or not as expected: the store says


def _stored_in_server(url: str) -> Index | None:
    """:func:`stored_in_file` of a PostgreSQL URL libpq reads as SQLAlchemy does."""
    from ..store.postgres import plain_url

    conninfo = plain_url(url)
    if conninfo is None:
        return None
    import psycopg

    try:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            return index_of(conn.execute(
                "SELECT id, source, cli_session_id, name, tags, extra FROM recordings"
                " WHERE source IN (%s, %s)", _CONVERTED))
    except psycopg.Error:
        return None  # not there yet, or not as expected: the store says


def stored_peeks(index: Index | None) -> dict[str, Peeked]:
    """What earlier imports read of the first lines of the files of the recordings
    in ``index`` (:data:`Peeked`), by absolute path: for :class:`Planner`."""
    found: dict[str, Peeked] = {}
    reading = READING.decode()
    for known in (index or {}).values():
        folder, peeked = known.extra.get("folder"), known.extra.get("peeked")
        # Read as this reading reads a file's first lines, else read again.
        if isinstance(folder, str) and isinstance(peeked, dict) and (
                known.extra.get("peeked_reading") == reading):
            for name, value in peeked.items():
                if isinstance(value, list):
                    # A file outside the session's folder is named from it ("../").
                    path = os.path.join(folder, name)
                    found[os.path.normpath(path) if ".." in name else path] = value
    return found


def _recording_of(store: Any, source: str, session_id: str, index: Index | None) -> Any:
    """The stored recording of a session (its id may be longer than the column)."""
    key = session_id[:_SESSION_ID_SIZE]
    found = index.get((source, key)) if index is not None else (
        store().find_by_session(source, key))
    if found is not None and (found.extra or {}).get("session_id", session_id) != session_id:
        return None  # another session whose id begins the same
    return found


def _shrunk(known: Any, paths: list[Path]) -> str:
    """What of a stored recording's files is now shorter, or gone (empty: none)."""
    sizes = (known.extra or {}).get("files") or {}
    now = {name: p.stat().st_size for name, p in file_names(paths).items()}
    where = {os.path.abspath(p) for p in paths}
    for name, size in sizes.items():
        if name not in now and _stored_path(known, name) in where:
            continue  # among these files, named from another folder
        if now.get(name, -1) < size:
            left = "gone" if name not in now else f"{now[name]} bytes"
            return f"{name} is shorter than when imported ({size} bytes, now {left})"
    return ""


def _stored_path(known: Any, name: str) -> str | None:
    """Where a stored recording's file ``name`` was when it was imported (absolute)."""
    extra = known.extra or {}
    folder, source = extra.get("folder"), extra.get("source_path")
    if not isinstance(folder, str):
        if not isinstance(source, str):
            return None
        base = base_folder([Path(source)])
        folder = os.path.abspath(base) if base is not None else None
    return os.path.normpath(os.path.join(folder, name)) if folder else None


def _with_stored_files(unit: Unit, known: Any) -> Unit:
    """``unit`` with the files its session's recording was made of that are not among
    its own but are still where they were (a session's file imported alone, or a copy
    of one, from elsewhere): the recording is made of them all again."""
    files = unit.files
    if files is None:
        return unit
    have = {os.path.abspath(p) for p in files.files}
    #: A stored file named as one of the unit's is another copy of that file (a
    #: backup of the projects folder, the file before it grew): the unit's takes
    #: its place, as a fold of both would read the copy as a resume of itself.
    names = {p.name for p in files.files}
    #: The unit's own files by device and inode, once a stored path is not among
    #: their names: the same file reached another way (a symlinked folder, a
    #: folder imported then the file in it) is not another file of the session.
    same: set[tuple[int, int]] | None = None
    more: list[Path] = []
    for name, size in ((known.extra or {}).get("files") or {}).items():
        path = _stored_path(known, name)
        if path is None or path in have or Path(path).name in names or not isinstance(size, int):
            continue
        try:
            st = os.stat(path)
            if same is None:
                same = {(own.st_dev, own.st_ino) for own in map(os.stat, files.files)}
        except OSError:
            continue  # gone: _shrunk says so
        if (st.st_dev, st.st_ino) not in same and st.st_size >= size:
            more.append(Path(path))
    if not more:
        return unit
    mains = [p for p in more if not is_side_chain(p)]
    sides = [p for p in more if is_side_chain(p)]
    grown = SessionFiles(files.session_id, [*files.mains, *mains], [*files.sides, *sides])
    return Unit(unit.kind, unit.path, grown, unit.peeked)


def older_imports(store: Any) -> int:
    """How many recordings were converted from files (transcripts, claude-trace logs)
    by a claudetrace that read them otherwise (an earlier :data:`READING`): the
    store keeps the events it made of them, not the files, so their status, tokens
    and cost stay as it read them until the files are imported again."""
    current = READING.decode()
    return sum(1 for *_, extra in store.converted_sessions([SOURCE, "claude-trace"])
               if _reading_of(extra or {}) != current)


def _reading_of(extra: dict[str, Any]) -> object:
    """The :data:`READING` a converted recording was made with (kept since it is;
    before, where the files' first lines were kept, with them)."""
    return extra.get("reading") or extra.get("peeked_reading")


def _peeks_of(unit: Unit) -> dict[str, Any]:
    """What a unit's recording keeps (in ``extra``) of what planning read of
    its files' first lines (:func:`stored_peeks` reads it back)."""
    base = base_folder(unit.paths)
    if not unit.peeked or base is None:
        return {}
    names = file_names(list(unit.peeked), base)
    return {"folder": os.path.abspath(base), "peeked_reading": READING.decode(),
            "peeked": {name: unit.peeked[path] for name, path in names.items()}}


def _remember_peeks(opened: Callable[[], Any], unit: Unit, known: Any) -> None:
    """Keep with an unchanged session's recording what planning read anew of the
    files it stands for (a file beside it that is no transcript, new or changed):
    the next plan reads it from there, not from the file.  Nothing is written
    when the recording keeps that already."""
    extra = known.extra or {}
    # Unchanged, so read as this version reads (the fingerprint holds READING):
    # one imported before the reading was kept says so from now on.
    peeks = {**_peeks_of(unit), "reading": READING.decode()}
    if all(extra.get(key) == value for key, value in peeks.items()):
        return
    opened().update_recording(known.id, extra={**extra, **peeks})


@dataclass
class _Pending:
    """A session or log to convert and store: what was known of it before."""

    unit: Unit
    digest: str
    sizes: dict[str, int]
    known: Any

    def stored_as(self, recording: Any) -> bool:
        """Whether ``recording`` (stored, or None) was made of these files as they are."""
        return recording is not None and (recording.extra or {}).get("fingerprint") == self.digest


def _look(opened: Callable[[], Any], unit: Unit, index: Index | None,
          *, first: bool = False, write: Callable[[], Any] | None = None) -> Imported | _Pending:
    """What to do with a unit: nothing (unchanged, truncated), or convert it
    (``first``: a look ahead, which writes nothing; ``write``: the store for a
    write, when not ``opened``)."""
    write = write or opened
    source = SOURCE if unit.kind == "transcript" else "claude-trace"
    sid = unit.files.session_id if unit.files is not None else unit.path.stem
    known = _recording_of(opened, source, sid, index)
    if known is not None:
        unit = _with_stored_files(unit, known)
    paths = unit.paths
    digest = fingerprint(paths)
    if known is not None and (known.extra or {}).get("fingerprint") == digest:
        if not first:
            _remember_peeks(write, unit, known)
        folded = _fold(opened, source, known.id, known.extra, index, write)
        return Imported(unit.path, unit.kind, "unchanged", known.id, known.cli_session_id,
                        note=_folded_note(folded), folded=folded)
    if known is not None and (shrunk := _shrunk(known, paths)):
        return Imported(unit.path, unit.kind, "truncated", known.id, sid,
                        note=f"{shrunk}: the stored recording is kept as it was")
    sizes = {name: p.stat().st_size for name, p in file_names(paths).items()}
    return _Pending(unit, digest, sizes, known)


@dataclass
class _Converted:
    """A unit converted: its recording's metadata, the row's figures (the session
    model's, folded as it was converted) and its events, in a spool file."""

    transcript: Transcript
    summary: dict[str, Any]
    spool: str


def _convert(unit: Unit) -> _Converted:
    """Convert a unit into a spool file."""
    from ..model.summary import usage_warnings
    from ..store.ingest import ended_columns
    from .spool import Spool

    spool = Spool()
    try:
        converted = _read(unit, spool.add)
        info = converted.info
        spool.seen.observe_into(info)
        summary = ended_columns(spool.session, info, info.started_ns + spool.session.last_ns)
        converted.warnings += usage_warnings(spool.session)
    except BaseException:
        spool.discard()
        raise
    spool.close()
    converted.events = []
    return _Converted(converted, summary, spool.name)


def import_unit(
    store: Any, unit: Unit, *, name: str | None = None, tags: dict[str, str] | None = None,
    index: Index | None = None, usage_first: bool = False,
) -> Imported:
    """Store (or bring up to date) the recording of a session or claude-trace log.

    ``store`` is the store, or a function that opens it when first needed (an
    unchanged session needs none when ``index`` says what is stored:
    :func:`stored_sessions`).  A unit that cannot be read raises
    :class:`~.claude_code.TranscriptError`.
    """
    opened: Callable[[], Any] = store if callable(store) else lambda: store
    what = _look(opened, unit, index)
    if isinstance(what, Imported):
        return what
    if usage_first and unit.kind == "transcript":
        from .unfolded import put, scan

        got = scan(what.unit)
        if got is not None:
            with _Batched(opened) as batch:
                done = put(opened, batch, what, got, name, tags)
                batch.commit()
            return done
    made = _convert(unit)
    try:
        return _store_converted(opened, what, made, index, name, tags)
    finally:
        os.unlink(made.spool)


#: Units converted ahead of the one being stored, at most (each a spool file on
#: disk until stored; the converting process holds one at a time).
CONVERT_AHEAD = 2
#: Units sent to the converting process before the store is made
#: (:meth:`Converting.start`): about what it converts while a new SQLite
#: file's migrations run.
CONVERT_BEFORE_STORE = 16


def in_parallel(units: Sequence[Unit]) -> bool:
    """Whether :func:`import_units` converts ``units`` in a second process by
    default: when the machine has more than one CPU and there is more than one."""
    return (os.cpu_count() or 1) > 1 and len(units) > 1


def import_units(
    store: Any, units: Sequence[Unit], *, name: str | None = None,
    tags: dict[str, str] | None = None, index: Index | None = None,
    parallel: bool | None = None, converting: Converting | None = None,
    usage_first: bool = False, plain: Path | None = None,
) -> Iterator[Imported]:
    """:func:`import_unit` of each of ``units``, in order; a unit that cannot be
    read yields an :class:`Imported` ``skipped`` saying why (a store that fails
    raises, what was stored before it committed and yielded first).

    The units' recordings are put a few at a time in one transaction
    (:class:`_Batched`), each in a savepoint of its own, and each unit is
    yielded once its transaction is committed: what a unit stores, and what
    becomes of the others when one fails, are as one at a time.

    With ``parallel`` (None: :func:`in_parallel`) a second process converts the
    units a few ahead (:data:`CONVERT_AHEAD`) while this one stores them: each
    unit is still looked at, stored and yielded in order, exactly as one at a
    time, so what is stored (ids, events, figures) is the same; only the
    reading of files overlaps the writing.  ``converting``: that process,
    started already on ``units`` (:meth:`Converting.start`); the caller closes it.

    With ``usage_first`` a session's transcript is stored usage first when it
    can be (:mod:`.unfolded`: no conversion here, and no second process); its
    fold is the caller's to run or start.  ``plain``: the plain SQLite file the
    store is, whose new sessions are then written without SQLAlchemy
    (:class:`_Batched`)."""
    from ..errors import StoreError

    opened: Callable[[], Any] = store if callable(store) else lambda: store
    if converting is not None:
        converting.opened, converting.index = opened, index
        parallel = True
    if parallel is None:
        parallel = in_parallel(units) and not usage_first
    held: list[Imported] = []
    with contextlib.nullcontext(converting) if converting is not None or not parallel else (
            Converting(opened, units, index)) as ahead, _Batched(opened, plain) as batch:
        for at, unit in enumerate(units):
            try:
                what = _look(opened, unit, index, write=batch.opened)
                if isinstance(what, Imported):
                    if ahead is not None:
                        ahead.drop(at)
                    held.append(what)
                    continue
                got = None
                if usage_first and unit.kind == "transcript":
                    from .unfolded import put as put_usage_first
                    from .unfolded import scan

                    got = scan(what.unit)
                if got is not None:
                    if ahead is not None:
                        ahead.drop(at)
                    held.append(put_usage_first(opened, batch, what, got, name, tags))
                    if batch.full():
                        yield from _committed(batch, held)
                    continue
                made = ahead.converted(at) if ahead is not None else _convert(unit)
                try:
                    done = _store_converted(opened, what, made, index, name, tags, batch)
                finally:
                    os.unlink(made.spool)
            except _unreadable() as exc:
                done = Imported(unit.path, unit.kind, "skipped", None, note=str(exc))
            except StoreError:
                # The units stored before it stay, as one at a time.
                yield from _committed(batch, held)
                raise
            held.append(done)
            if batch.full():
                yield from _committed(batch, held)
        yield from _committed(batch, held)


def _committed(batch: _Batched, held: list[Imported]) -> Iterator[Imported]:
    """Commit ``batch`` and yield what it ``held`` (then forgotten), with Ctrl-C held
    until the caller has taken the last (raised then): a session committed is
    always said, as one at a time."""
    from ..interrupts import HeldInterrupts

    hold = HeldInterrupts()
    try:
        batch.commit()
        yield from held
        held.clear()
    finally:
        if hold.release():
            raise KeyboardInterrupt


#: Recordings a folder import puts in one transaction, at most (:class:`_Batched`):
#: on ``bench import``'s tree 32 a batch took the storing process's system time
#: from 1.2-1.3 s to 0.7-0.8 s (fewer commits; the pages of the indexes of random
#: ids written once a batch), 200 no further.
BATCH_UNITS = 32
#: Seconds a folder import's transaction stays open, at most, before it is
#: committed with the next recording put: other writers on SQLite (a proxy's
#: indexer, another import) wait for it, well within their busy timeout (30 s).
BATCH_SECONDS = 5.0


class _Batched:
    """The store's :class:`~claudetrace.store.api.Batch` of a folder import, begun
    when a recording is first put (an unchanged tree opens no store).

    :meth:`opened` gives the store for another write, after committing what
    the batch holds: a write of its own (a recording's files remembered,
    earlier recordings folded) would wait for the batch's lock on SQLite.
    Reads go to the store as they are (they see what is committed).

    ``plain``: a plain SQLite file, whose new sessions stored usage first go
    through :class:`~claudetrace.store.importing.ImportBatch` (:meth:`put_new`:
    no SQLAlchemy) while it is at the newest schema.  Of the two batches one
    holds SQLite's write lock at a time: the other's is committed first."""

    def __init__(self, opened: Callable[[], Any], plain: Path | None = None) -> None:
        self._opened = opened
        self.batch: Any = None
        self._plain_path = plain
        self._plain: Any = None

    def opened(self) -> Any:
        self.commit()
        return self._opened()

    def put_new(self, info: Any, lines: list[tuple[bytes, bool]], *,
                layout: dict[str, Any], summary: dict[str, Any]) -> bool:
        """Store a session not stored yet usage first through the plain batch; False
        when it is not written so (no plain file, or not at the newest schema, or
        stored meanwhile): :meth:`put_unfolded` then."""
        if self._plain_path is None:
            return False
        if self._plain is None:
            import sqlite3

            from ..store.importing import ImportBatch
            from ..store.plain import NotPlain

            try:
                self._plain = ImportBatch(self._plain_path)
            except (NotPlain, sqlite3.Error):
                self._plain_path = None  # the store's, which migrates it or says why
                return False
        if self.batch is not None:
            self.batch.commit()
        return bool(self._plain.put_new(info, lines, layout=layout, summary=summary))

    def _store_batch(self) -> Any:
        if self._plain is not None:
            self._plain.commit()
        if self.batch is None:
            self.batch = self._opened().batch()
        return self.batch

    def put_unfolded(self, info: Any, lines: Iterable[tuple[bytes, bool]], *,
                     layout: dict[str, Any], summary: dict[str, Any]) -> Any:
        return self._store_batch().put_unfolded(info, lines, layout=layout, summary=summary)

    def put(self, info: Any, events: Iterable[Event], *, open_seen_ns: int | None,
            summary: dict[str, Any]) -> Any:
        return self._store_batch().put(info, events, open_seen_ns=open_seen_ns, summary=summary)

    def full(self) -> bool:
        return any(batch is not None and (batch.count >= BATCH_UNITS
                                          or batch.age >= BATCH_SECONDS)
                   for batch in (self.batch, self._plain))

    def commit(self) -> None:
        for batch in (self._plain, self.batch):
            if batch is not None:
                batch.commit()

    def __enter__(self) -> _Batched:
        return self

    def __exit__(self, *exc: object) -> None:
        for batch in (self.batch, self._plain):
            if batch is not None:
                batch.close()


class Converting:
    """Units converted a few ahead by a second process (:func:`import_units`):
    ``python -m claudetrace.formats.convert_child``, which takes each unit (pickled)
    on its stdin and answers, in order, on its stdout (:func:`convert_child`).

    A unit is sent there when a first look says it is to be converted; the look
    that decides is made again when its turn comes (a unit stored meanwhile may
    have changed the answer), and a conversion not wanted then is thrown away.
    The process starts with the first unit to convert (an unchanged tree starts
    none), or before the store is opened (:meth:`start`).  Whatever it cannot
    answer (it failed, or is gone) is converted here, where it does what it
    would have done one unit at a time."""

    def __init__(self, opened: Callable[[], Any], units: Sequence[Unit],
                 index: Index | None) -> None:
        self.opened, self.units, self.index = opened, units, index
        #: The units sent, in the order their answers come.
        self.sent: dict[int, None] = {}
        self.next = 0
        self.child: subprocess.Popen[bytes] | None = None
        self.gone = False

    def __enter__(self) -> Converting:
        return self

    @classmethod
    def start(cls, units: Sequence[Unit]) -> Converting:
        """The process started now on the first units (:data:`CONVERT_BEFORE_STORE`),
        sent without a look: for a store that does not exist yet, which holds
        none of them, so that they are converted while it is made (a new SQLite
        file's migrations take about as long as converting a dozen sessions).
        :func:`import_units` takes it, with the store and what it holds."""
        ahead = cls(lambda: None, units, None)
        while len(ahead.sent) < CONVERT_BEFORE_STORE and ahead.next < len(units):
            ahead.next += 1
            if not ahead._request(ahead.next - 1, units[ahead.next - 1]):
                break
        return ahead

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if kind is KeyboardInterrupt and self.child is not None:
            # Stopped: not a wait for the units sent to be converted, only to be
            # thrown away (their spool files go with the importer's folder).
            self.child.kill()
            self.sent.clear()
        for at in list(self.sent):
            self.drop(at)
        if self.child is not None:
            with contextlib.suppress(OSError):
                self.child.stdin.close()  # type: ignore[union-attr]
            self.child.wait()
            self.child.stdout.close()  # type: ignore[union-attr]

    def converted(self, at: int) -> _Converted:
        """Unit ``at`` converted (by the second process when it was sent there);
        the next few sent meanwhile."""
        self.next = max(self.next, at + 1)
        self._send()
        made = self._answer(at) if at in self.sent else None
        self._send()
        return _convert(self.units[at]) if made is None else made

    def drop(self, at: int) -> None:
        """Throw away unit ``at``'s conversion, if it was sent."""
        if at in self.sent:
            with contextlib.suppress(_unreadable()):
                made = self._answer(at)
                if made is not None:
                    os.unlink(made.spool)

    def _answer(self, at: int) -> _Converted | None:
        """The second process's answer for unit ``at`` (those before it, not
        wanted now, thrown away); None when it has none."""
        import pickle

        while self.sent and self.child is not None:
            first = next(iter(self.sent))
            del self.sent[first]
            try:
                said, value = pickle.load(self.child.stdout)  # type: ignore[arg-type]
            except (EOFError, OSError, pickle.UnpicklingError):
                self._lost()
                return None
            if first != at:
                if said == "converted":
                    os.unlink(value.spool)
                continue
            if said == "unreadable":
                raise value
            return value if said == "converted" else None
        return None

    def _send(self) -> None:
        while len(self.sent) < CONVERT_AHEAD and self.next < len(self.units):
            at = self.next
            self.next += 1
            try:
                first = _look(self.opened, self.units[at], self.index, first=True)
            except (ClaudeTraceError, OSError):
                continue  # its turn says what it is
            if isinstance(first, _Pending) and not self._request(at, first.unit):
                return

    def _request(self, at: int, unit: Unit) -> bool:
        import pickle
        import subprocess

        from .spool import spool_folder

        if self.child is None and not self.gone:
            self.child = subprocess.Popen(
                [sys.executable, "-m", "claudetrace.formats.convert_child", spool_folder()],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        if self.child is None or self.gone:
            return False
        try:
            pickle.dump(unit, self.child.stdin, protocol=pickle.HIGHEST_PROTOCOL)  # type: ignore[arg-type]
            self.child.stdin.flush()  # type: ignore[union-attr]
        except OSError:
            self._lost()
            return False
        self.sent[at] = None
        return True

    def _lost(self) -> None:
        """The second process is gone: what was sent is converted here."""
        self.gone = True
        self.sent.clear()


def convert_child(folder: str | None = None) -> int:
    """The second process of :class:`Converting`: each unit read (pickled) from stdin,
    converted into a spool file (in ``folder``, the importer's:
    :func:`~.spool.spool_folder`), answered (pickled) on stdout: ``("converted",
    made)``, ``("unreadable", error)`` (a
    :class:`~.claude_code.TranscriptError`), or ``("failed", None)`` for
    anything else (the importer converts that unit itself, to fail as it would).
    It ends when the importer does: at the end of its requests, when its answer
    cannot be written, or before the next unit once the importer is gone (killed:
    the units it sent are still in the pipe), leaving no spool file of its own."""
    import pickle
    import signal

    from .spool import use_folder

    # A Ctrl-C at a terminal reaches the importer too, which says so and removes
    # its spool folder (this one's files with it): this process just ends, with
    # no traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if folder is not None:
        use_folder(folder)
    importer = os.getppid()
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            unit = pickle.load(requests)
        except EOFError:
            return 0
        if os.getppid() != importer:
            return 0
        answer: tuple[str, Any]
        made: _Converted | None = None
        try:
            made = _convert(unit)
            answer = ("converted", made)
        except _unreadable() as exc:
            answer = ("unreadable", exc)
        except Exception:
            answer = ("failed", None)
        try:
            pickle.dump(answer, answers, protocol=pickle.HIGHEST_PROTOCOL)
            answers.flush()
        except OSError:  # the importer is gone: nobody will read or remove it
            if made is not None:
                with contextlib.suppress(OSError):
                    os.unlink(made.spool)
            return 0


def _store_converted(
    opened: Callable[[], Any], pending: _Pending, made: _Converted, index: Index | None,
    name: str | None, tags: dict[str, str] | None, batch: _Batched | None = None,
) -> Imported:
    from .continuation import continues
    from .spool import Spool

    unit, converted, known = pending.unit, made.transcript, pending.known
    info = converted.info
    source = info.source
    sid = info.cli_session_id or unit.path.stem
    # Looked up in the store, not ``index``: another import may have stored the
    # session since the index was read (two imports of one folder at once).
    stored = _recording_of(opened, source, sid, None)
    if pending.stored_as(stored):  # from these files: nothing to store again
        return Imported(unit.path, unit.kind, "unchanged", stored.id, sid)
    if known is None:
        known = stored
    info.extra.update(fingerprint=pending.digest, files=pending.sizes, session_id=sid,
                      reading=READING.decode())
    info.extra.update(_peeks_of(unit))
    link = continues(unit.files.path) if unit.files is not None else None
    if link is not None:
        info.extra["continues"] = link
    if converted.warnings:
        info.extra["warnings"] = converted.warnings
        info.extra["damaged_lines"] = converted.damage
    if known is not None:
        info.id = known.id
        info.name = known.name
        info.tags = dict(known.tags or {})
    else:
        info.id = stable_recording_id(source, sid, info.started_ns)
    if name:
        info.name = name
    if tags:
        info.tags = {**info.tags, **tags}
    # A turn still under way leaves the recording open, seen last at its last entry.
    seen = None if converted.finished else converted.last_entry_ns
    putting = batch.put if batch is not None else opened().put_recording
    try:
        put = putting(info, Spool.read(made.spool), open_seen_ns=seen, summary=made.summary)
    except StoreError:
        # Another importer stored this session meanwhile (the same id): once more,
        # as an update of what it stored.
        if known is not None or _recording_of(opened, source, sid, None) is None:
            raise
        put = putting(info, Spool.read(made.spool), open_seen_ns=seen, summary=made.summary)
    folded = _fold(opened, source, info.id, info.extra, index,
                   batch.opened if batch is not None else None)
    # Stored meanwhile by another importer (two imports of one folder at once): this
    # one imported nothing, or brought that recording up to date.
    action: Action = "imported" if not put.found else (
        "updated" if known is not None or put.changed else "unchanged")
    notes = [f"{plural(converted.damage, 'damaged line')} skipped"] if converted.damage else []
    notes += [_folded_note(folded)] if folded else []
    return Imported(unit.path, unit.kind, action, info.id, sid, note="; ".join(notes),
                    damage=converted.damage, folded=folded)


def _fold(opened: Callable[[], Any], source: str, recording_id: str,
          extra: dict[str, Any] | None, index: Index | None,
          write: Callable[[], Any] | None = None) -> tuple[str, ...]:
    """Fold into ``recording_id`` the recordings an earlier import made of the
    files of the sessions it was resumed as (``extra["resumed_as"]``: before
    resumed sessions were joined, each file was a recording of its own);
    their ids."""
    gone: list[str] = []
    for sid in (extra or {}).get("resumed_as") or ():
        if not isinstance(sid, str):
            continue
        old = _recording_of(opened, source, sid, index)
        if old is not None and old.id != recording_id:
            gone.append(old.id)
            if index is not None:
                index.pop((source, sid[:_SESSION_ID_SIZE]), None)
    if gone:
        (write or opened)().fold_recordings(recording_id, gone)
    return tuple(gone)


def _folded_note(folded: tuple[str, ...]) -> str:
    return (f"{plural(len(folded), 'earlier recording')} of its resumed files folded in: "
            f"{', '.join(folded)}") if folded else ""


def _unreadable() -> type[ClaudeTraceError]:
    """:class:`~.claude_code.TranscriptError` (with the converter, imported when a
    file is read: an ``except`` clause is evaluated only when something was raised)."""
    from .claude_code import TranscriptError

    return TranscriptError


def _read(unit: Unit, sink: Callable[[Event], None]) -> Transcript:
    from .claude_code import TranscriptError, read_session
    from .claude_trace import read_claude_trace
    from .jsonl import UnreadableFile

    try:
        if unit.files is not None:
            return read_session(unit.files, sink=sink)
        got = read_claude_trace(unit.path)
    except UnreadableFile as exc:
        raise TranscriptError(str(exc)) from exc
    for event in got.events:
        sink(event)
    return got


def cassette_recording_id(path: Path, header: dict[str, Any],
                          started_ns: int | None = None) -> str:
    """The recording id the cassette ``path`` imports into: a ULID whose time is the
    cassette's start (``started_ns``, else :func:`cassette_started_ns`) and whose
    random part is the digest of the file's bytes, so importing one cassette again
    finds its recording."""
    digest = hashlib.sha256(b"claudetrace cassette\0")
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    if started_ns is None:
        started_ns = cassette_started_ns(path, header)
    return new_recording_id(started_ns, random=digest.digest())


#: An ISO 8601 time with its zone, as the CLI's lines carry them ("timestamp").
_ISO_TIME = re.compile(
    rb"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d))")


def cassette_started_ns(path: Path, header: dict[str, Any]) -> int:
    """When the cassette ``path`` started (Unix ns): :func:`written_start`, else the
    file's modification time.  Recording ids are made of it (they sort by time: a
    cassette without ``started_ns`` had one of 1970, listed before every other)."""
    started = written_start(path, header)
    return _modified_ns(path) if started is None else started


def _modified_ns(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return time.time_ns()


def written_start(path: Path, header: dict[str, Any]) -> int | None:
    """When the cassette ``path`` started by what it says (Unix ns): the header's
    ``started_ns``; else the first time written anywhere in it (an ISO 8601 time
    with a zone, such as a line's ``timestamp``), less that line's ``t``; else None."""
    started = header.get("started_ns")
    if isinstance(started, int) and _usable_ns(started):
        return started
    with path.open("rb") as f:
        # A line at most a MiB at a time: a huge line is never held whole.
        for number, raw in enumerate(iter(lambda: f.readline(1 << 20), b"")):
            found = _ISO_TIME.search(raw)
            if found is None:
                continue
            try:
                at = dt.datetime.fromisoformat(found.group(1).decode().replace("Z", "+00:00"))
                t = 0.0 if number == 0 else json.loads(raw).get("t", 0.0)
                ns = int(at.timestamp() * 1e9) - int(float(t) * 1e9)
            except (ValueError, TypeError, AttributeError, OverflowError):
                continue
            if _usable_ns(ns):
                return ns
    return None


def _usable_ns(value: object) -> bool:
    """A Unix time in ns that a recording id can hold (48 bits of milliseconds)."""
    return isinstance(value, int) and not isinstance(value, bool) and (
        0 < value < (1 << 48) * 1_000_000)


def _stored_state(
    url: str | None, store: Callable[[], Any], recording_id: str
) -> tuple[str | None, Any, str]:
    """``(state, importer, seen)`` of ``recording_id``: ``whole``, ``half`` (no
    end written: an import killed half way, or one still running) or None (not
    stored), who imports it (``extra["importer"]``, :mod:`.owner`), and its
    ``extra`` as stored (what replacing a dead half compares): straight from a
    SQLite file (no SQLAlchemy to load), else through ``store()``."""
    import sqlite3

    from ..config import plain_file

    path = plain_file(url) if url else None
    row: tuple[int | None, str] | None = None
    try:
        if path is None:
            raise ValueError("not a plain SQLite file")
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro",
                                                uri=True)) as conn:
            row = conn.execute("SELECT ended_ns, extra FROM recordings WHERE id = ?",
                               (recording_id,)).fetchone()
    except (sqlite3.Error, ValueError):
        # Not there yet, or not as expected: the store says.
        row = store().import_state(recording_id)
    if row is None:
        return None, None, ""
    seen = row[1] if isinstance(row[1], str) else ""
    try:
        extra = json.loads(seen)
    except ValueError:
        extra = None
    importer = extra.get("importer") if isinstance(extra, dict) else None
    return ("half" if row[0] is None else "whole"), importer, seen


def import_cassette_file(
    store: Callable[[], Any], path: Path, *, name: str | None = None,
    tags: dict[str, str] | None = None, writer: Any = None, url: str | None = None,
) -> Imported:
    """Store the cassette ``path`` as a recording (through ``writer`` when given: a
    :class:`~claudetrace.store.writer.WriterProcess`), once.

    The recording's id comes from the cassette's bytes (:func:`cassette_recording_id`):
    a cassette imported whole before is ``unchanged`` (never a second recording);
    one whose import was killed half way (``doctor`` lists it: its end is written
    last) is replaced by the whole import, under the same id, by one import
    only: another that tries at the same moment finds it gone or taken and says
    ``unchanged`` or who imports it.  ``url``, the store's, lets a SQLite file
    be looked at without loading SQLAlchemy.
    """
    from contextlib import closing

    from ..cassette import iter_cassette
    from ..progress import count_lines, enabled, track
    from ..store.ingest import import_cassette, info_from_header

    header, events = iter_cassette(path)
    session_id = header.get("session_id")
    sid = session_id if isinstance(session_id, str) else None
    me = this_importer()
    with closing(events):
        info = info_from_header(header)
        # The time the id is made of (a header without one: the first time in the
        # file, else its modification time), not the time of this import.
        written = written_start(path, header)
        info.started_ns = _modified_ns(path) if written is None else written
        info.id = cassette_recording_id(path, header, info.started_ns)
        if written is None:
            # Dated by the file's modification time, which a copy or a checkout
            # changes: the same bytes imported before keep their recording.
            earlier = store().recording_with_tail(info.id[10:])
            if earlier is not None:
                info.id, info.started_ns = earlier, recording_id_ns(earlier)
        info.extra["importer"] = me
        known, importer, seen = _stored_state(url, store, info.id)
        replaced = False
        while known == "half":
            busy = importing_elsewhere(importer)
            if busy:
                raise ImportFormatError(_busy_note(path, info.id, busy))
            # What it holds is in the cassette, whole; another import replacing
            # the same half at this moment deletes it first: look again.
            # Replaced by this import's row in one transaction: never absent, so
            # another import looking meanwhile finds this one importing it.
            if store().delete_half_import(info.id, seen,
                                          dataclasses.replace(info, ended_ns=None)):
                replaced = True
                break
            known, importer, seen = _stored_state(url, store, info.id)
        if known == "whole":
            return Imported(path, "cassette", "unchanged", info.id, sid)

        def forget(rid: str) -> None:
            # Only this import's own half: another process's (one that stored the
            # recording first, making this one's insert fail) is left to it.
            state, owner, _ = _stored_state(url, store, rid)
            if state == "half" and owner == me:
                store().delete_recording(rid)

        total = count_lines(path) - 1 if enabled() else None
        try:
            with track(events, f"importing {path.name}", total=total, unit="events") as shown:
                # The Stats page's latency samples are left to `db pack` (or the
                # page's first visit): folding them here held the session of up to
                # 50,000 lines in memory, not a batch's lines.
                if writer is None:
                    rid = store().import_cassette((header, shown), name=name, tags=tags,
                                                  info=info, created=replaced)
                else:
                    rid = import_cassette(writer, (header, shown), name=name, tags=tags,
                                          info=info, forget=forget, created=replaced)
        except ClaudeTraceError:
            state, owner, _ = _stored_state(url, store, info.id)
            if state == "whole" and owner != me:  # another import stored it first
                return Imported(path, "cassette", "unchanged", info.id, sid)
            if state == "half" and owner != me:  # another import is storing it
                busy = importing_elsewhere(owner) or "another process"
                raise ImportFormatError(_busy_note(path, info.id, busy)) from None
            raise
    action: Action = "updated" if replaced else "imported"
    note = "a half import replaced" if replaced else ""
    return Imported(path, "cassette", action, rid, sid, note=note)


def _busy_note(path: Path, recording_id: str, who: str) -> str:
    return (f"{path}: being imported by {who} into recording {recording_id}; "
            "import it again once that has ended")


def import_file(
    store: Any, path: Path, *, name: str | None = None, tags: dict[str, str] | None = None,
    writer: Any = None,
) -> Imported:
    """Store the cassette, transcript (with the rest of its session) or claude-trace
    log ``path``.

    ``store`` is the store, or a function that opens it when first needed.
    """
    opened: Callable[[], Any] = store if callable(store) else lambda: store
    units, skipped = Planner().plan([path])
    if skipped:
        raise ImportFormatError(skipped[0].note)
    unit = units[0]
    if unit.kind == "cassette":
        return import_cassette_file(opened, path, name=name, tags=tags, writer=writer)
    return import_unit(opened(), unit, name=name, tags=tags)


def there(paths: Iterable[str | os.PathLike[str]]) -> list[str | os.PathLike[str]]:
    """The ``paths`` that are there now (``~`` expanded, as :class:`Planner` reads
    them): what a watch imports, the others waited for."""
    return [p for p in paths if _there(Path(p).expanduser())]


def _there(path: Path) -> bool:
    """Whether ``path`` is there: a path that cannot be looked at (in a folder that
    cannot be read) is, and the planner says why it cannot be read."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
    return True


class Watcher:
    """Imports the sessions and claude-trace logs under some paths that are new or
    changed since the last look (cassettes are imported once, before watching)."""

    def __init__(self, store: Any, paths: Iterable[str | os.PathLike[str]], *,
                 name: str | None = None, tags: dict[str, str] | None = None) -> None:
        self.store = store
        self.paths = list(paths)
        self.name = name
        self.tags = tags
        self.planner = Planner()
        self.seen: dict[Path, tuple[tuple[int, ...], ...]] = {}
        self.said: set[tuple[Path, str]] = set()
        #: The paths the last look did not find (each said once, until back).
        self.missing: set[str] = set()
        #: Why the last look could not list the paths found, or None.
        self.failing: str | None = None
        #: Store sessions usage first, and start the pass that folds them after
        #: each look that stored any (:mod:`.unfolded`).
        self.usage_first = False

    def poll(
        self,
        report: Callable[[Imported], None],
        errors: Callable[[Path, Exception], None],
        back: Callable[[Path], None] | None = None,
    ) -> None:
        """Look once; ``report`` each session imported, updated, truncated or file
        skipped (once), ``errors`` each failure.  A path not there (a folder
        removed) is an error once, not at every look, the others imported
        meanwhile, and ``back`` is called with it when it is there again."""
        present = there(self.paths)
        gone = {str(p) for p in self.paths} - {str(p) for p in present}
        for given in map(str, self.paths):
            if given in gone and given not in self.missing:
                errors(Path(given), ImportFormatError("no such file or folder"))
            elif given not in gone and given in self.missing and back is not None:
                back(Path(given))
        self.missing = gone
        if not present:
            return
        try:
            units, skipped = self.planner.plan(present)
        except ClaudeTraceError as exc:  # removed as we looked, unreadable
            if str(exc) != self.failing:
                self.failing = str(exc)
                errors(Path(str(present[0])), exc)
            return
        self.failing = None
        for done in skipped:
            if (done.path, done.note) not in self.said:
                self.said.add((done.path, done.note))
                report(done)
        for unit in units:
            if unit.kind == "cassette":
                continue
            try:
                # As the fingerprint sees them: a file rewritten to its size and
                # modification time is another.
                stamps = tuple(stamp(os.stat(p)) for p in unit.paths)
            except OSError:
                continue  # removed while we looked
            if self.seen.get(unit.path) == stamps:
                continue
            try:
                done = import_unit(self.store, unit, name=self.name, tags=self.tags,
                                   usage_first=self.usage_first)
            except ClaudeTraceError as exc:
                errors(unit.path, exc)
            else:
                if done.action != "unchanged" and (done.action != "truncated" or (
                        (unit.path, done.note) not in self.said)):
                    self.said.add((unit.path, done.note))
                    report(done)
            self.seen[unit.path] = stamps
        if self.usage_first and not self.store.in_memory:
            from .folding import start_pass

            # After each look: one pass at a time, started when none is running.
            start_pass(self.store.capture_url, lambda: self.store)


__all__ = [
    "Converting",
    "ImportFormatError",
    "Imported",
    "Index",
    "Known",
    "Planner",
    "Unit",
    "Watcher",
    "detect",
    "expand",
    "import_cassette_file",
    "import_file",
    "import_unit",
    "import_units",
    "in_parallel",
    "index_of",
    "older_imports",
    "probe",
    "stable_recording_id",
    "stored_in_file",
    "stored_peeks",
    "stored_sessions",
    "there",
]
