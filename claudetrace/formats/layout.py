"""Which transcript files make up one Claude Code session, in every layout the CLI
has written.

- ``<project>/<session-id>.jsonl``: the session's main thread (CLI 1.0.x on:
  1.0.x also writes its subagents' lines in it, marked ``isSidechain``);
- ``<project>/agent-<id>.jsonl`` (CLI 1.0.x to 2.0.x): one subagent's side chain,
  its lines carrying the parent's ``sessionId``;
- ``<project>/<session-id>/subagents/agent-<id>.jsonl`` and
  ``…/subagents/workflows/<workflow>/agent-<id>.jsonl`` (2.1.x): the same,
  filed under the session;
- several main files with one ``sessionId`` (a resumed or split session): one
  session, read in the order of their first entries;
- a resumed session (``claude --resume``/``--continue``, CLI 2.x): a new main
  file that begins with a copy of the earlier file's entries (their uuids,
  times and API message ids kept, under the earlier or the new ``sessionId``),
  then goes on.  Main files whose first entry has the same uuid are one
  conversation: one session, under the id of the smallest file (the one
  resumed: each resume copies all of it), so it keeps its recording when it
  is resumed later.

:func:`sessions` groups files into :class:`SessionFiles` by the session id in
their lines (a side chain filed under a session belongs to it whatever its lines
say), so no file of a session replaces another, in whatever order they are found.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..recording import TRANSCRIPT_SOURCE

#: ``source`` of recordings imported from transcripts.
SOURCE: Final = TRANSCRIPT_SOURCE
#: Lines read to find a file's session id (a few bookkeeping lines may come first).
_PEEK_LINES: Final = 20


@dataclass
class SessionFiles:
    """The files of one session: main threads, then side chains."""

    session_id: str
    mains: list[Path] = field(default_factory=list)
    sides: list[Path] = field(default_factory=list)

    @property
    def files(self) -> list[Path]:
        return [*self.mains, *self.sides]

    @property
    def path(self) -> Path:
        """The file named for the session (its first main file, else its first side chain)."""
        return (self.mains or self.sides)[0]


def is_side_chain(path: Path) -> bool:
    """A subagent's transcript (``agent-*.jsonl``, top level or under ``subagents/``)."""
    return path.name.startswith("agent-") or owner_name(path) is not None


def owner_folder(path: Path) -> Path | None:
    """The session folder a ``…/<session>/subagents/…`` file is filed under."""
    name = owner_name(path)
    return Path(name) if name is not None else None


def owner_name(path: Path) -> str | None:
    """:func:`owner_folder`'s name (no :class:`~pathlib.Path` made: planning a tree
    asks it of every file)."""
    name = str(path)
    at = name.rfind(_SUBAGENTS)
    return name[:at] if at > 0 else None


_SUBAGENTS: Final = f"{os.sep}subagents{os.sep}"


def peek_session_id(path: Path) -> str | None:
    """The first ``sessionId`` in a file's first lines."""
    return peek(path)[0]


def peek_first_uuid(path: Path) -> str | None:
    """The uuid of the first conversation entry (user, assistant or system line) in a
    file's first lines: a resumed session's file repeats its earlier file's."""
    return peek(path)[1]


def peek(path: Path) -> tuple[str | None, str | None]:
    """A file's first ``sessionId`` and first conversation entry's uuid, from its
    first lines (one read for both)."""
    # Here, not above: planning an unchanged tree never opens a file, and the
    # reader's imports (the event model) are a third of that pass's time.
    from .jsonl import JsonlFile

    sid: str | None = None
    uid: str | None = None
    objects = JsonlFile(path).objects()
    for _number, obj in itertools.islice(objects, _PEEK_LINES):
        if sid is None:
            found = obj.get("sessionId")
            sid = found if isinstance(found, str) and found else None
        if uid is None:
            found = obj.get("uuid")
            if obj.get("type") in ENTRY_TYPES and isinstance(found, str) and found:
                uid = found
        if sid is not None and uid is not None:
            break
    return sid, uid


#: The lines of a conversation whose uuid starts it (not bookkeeping lines).
ENTRY_TYPES: Final = frozenset({"user", "assistant", "system"})


def sessions(paths: Iterable[Path], session_of: Any = peek_session_id,
             first_uuid: Any = peek_first_uuid) -> list[SessionFiles]:
    """The sessions ``paths`` (transcript files) make up, in the order first found.

    ``session_of`` reads a file's session id, ``first_uuid`` its first entry's
    uuid (a cache can stand in for each).
    """
    found: dict[str, SessionFiles] = {}
    owners: dict[str, str] = {}
    for path in paths:
        owner = owner_name(path)
        if owner is None:
            sid = session_of(path)
        elif owner in owners:
            sid = owners[owner]
        else:
            main = Path(owner).with_suffix(".jsonl")
            sid = owners[owner] = (session_of(main) if main.is_file() else None) or (
                os.path.basename(owner))
        if not sid:
            sid = path.stem
        group = found.get(sid)
        if group is None:
            group = found[sid] = SessionFiles(sid)
        if owner is not None or path.name.startswith("agent-"):  # is_side_chain
            group.sides.append(path)
        else:
            group.mains.append(path)
    return _join_resumed(list(found.values()), first_uuid)


def _join_resumed(groups: list[SessionFiles], first_uuid: Any) -> list[SessionFiles]:
    """Groups whose main files begin with the same entry made one (a resumed
    session's file under a new session id), under the session id of the
    smallest main file."""
    starts: dict[str, list[SessionFiles]] = {}
    for group in groups:
        for path in group.mains:
            uid = first_uuid(path)
            if uid is not None:
                starts.setdefault(uid, []).append(group)
    joined: dict[int, SessionFiles] = {}
    for together in starts.values():
        distinct = list({id(g): g for g in together}.values())
        if len(distinct) < 2:
            continue
        # Already joined groups stand for their union.
        distinct = list({id(joined.get(id(g), g)): joined.get(id(g), g)
                         for g in distinct}.values())
        if len(distinct) < 2:
            continue
        keep = min(distinct, key=lambda g: min(_size_key(p) for p in g.mains))
        for group in distinct:
            if group is not keep:
                keep.mains += group.mains
                keep.sides += group.sides
                for gid, target in list(joined.items()):
                    if target is group:
                        joined[gid] = keep
                joined[id(group)] = keep
    return [g for g in groups if id(g) not in joined]


def _size_key(path: Path) -> tuple[int, str]:
    try:
        return path.stat().st_size, path.name
    except OSError:
        return 1 << 62, path.name


def walk(folder: Path, suffixes: tuple[str, ...],
         unreadable: list[Path] | None = None) -> list[Path]:
    """The files under ``folder`` whose name ends with one of ``suffixes``, sorted;
    each folder that cannot be listed (no permission) is added to ``unreadable``.

    A symlinked folder is followed (``projects/-p2 -> elsewhere/-p2`` is a
    project Claude Code writes through the link; so is a linked ``subagents``
    or workflow folder), each folder once by its device and inode: a link back
    up (a loop) or to a folder also reached directly adds nothing.  ccusage 20
    does not follow them.
    """
    found: list[str] = []
    visited: set[tuple[int, int]] = set()

    def cannot_list(exc: OSError) -> None:
        if unreadable is not None and not isinstance(exc, FileNotFoundError):
            unreadable.append(Path(exc.filename))  # (one removed while we looked is not)

    for top, dirs, names in os.walk(folder, onerror=cannot_list, followlinks=True):
        try:
            info = os.stat(top)
        except OSError:
            dirs.clear()  # removed while we looked
            continue
        if (info.st_dev, info.st_ino) in visited:
            dirs.clear()
            continue
        visited.add((info.st_dev, info.st_ino))
        dirs.sort()  # the first way to a folder reached twice is the same on every run
        found += [os.path.join(top, n) for n in names if n.endswith(suffixes)]
    found.sort()
    return [Path(name) for name in found]


def side_chains_of(path: Path, unreadable: list[Path] | None = None) -> list[Path]:
    """The side chains filed under the session ``path`` names (``<stem>/subagents/**``);
    folders that cannot be listed are added to ``unreadable``."""
    folder = path.with_suffix("") / "subagents"
    if not folder.is_dir():
        return []
    return [p for p in walk(folder, (".jsonl",), unreadable) if p.name.startswith("agent-")]


#: Changed whenever the conversion reads a file differently, so that each file
#: imported before is read again once (2: assistant lines keep ``error`` and
#: ``isApiErrorMessage``, and a turn left with an API error is an error; 3: a
#: file that begins with a compaction names the session it continues and does not
#: read the running totals its cost-state lines carry on from it; 4: where a
#: resumed session's file goes on, the CLI version that wrote it is kept, which
#: tells a fork from a resume; 5: a session whose main transcript is missing takes
#: its working folder and CLI version from its subagents' lines).
READING: Final = b"5"


def fingerprint(paths: Sequence[Path], base: Path | None = None) -> str:
    """A digest of the files' names (relative to ``base``, however the folder was
    named or wherever it moved), sizes, modification and change times and inode
    numbers, and of :data:`READING`: an unchanged session is skipped on import
    without reading it.  The change time and inode tell a file replaced by another
    of the same size whose modification time was kept (``cp -p``, ``rsync -t``,
    a rename over it), which the size and modification time alone would not."""
    digest = hashlib.sha256(b"reading " + READING + b"\0")
    for name, path in sorted(file_names(paths, base).items()):
        digest.update(os.fsencode(name) + b"\0" + stamp_bytes(os.stat(path)))
    return digest.hexdigest()


def stamp(st: os.stat_result) -> tuple[int, int, int, int]:
    """What a file's ``stat`` says of its content: size, modification and change
    times, inode number (the same four for the same file, unless rewritten
    within one tick of the file system's clock to the same size)."""
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


def stamp_bytes(st: os.stat_result) -> bytes:
    return f"{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\0".encode()


def base_folder(paths: Sequence[Path]) -> Path | None:
    """The folder a unit's file names are relative to: the project folder of the
    first file (a side chain filed under its session names the session's folder)."""
    if not paths:
        return None
    owner = owner_folder(paths[0])
    return owner.parent if owner is not None else paths[0].parent


def file_names(paths: Sequence[Path], base: Path | None = None) -> dict[str, Path]:
    """Each file by its name relative to ``base`` (else :func:`base_folder`)."""
    if base is None:
        base = base_folder(paths)
    top = str(base) if base is not None else ""
    # Files found under ``base`` (all of them, but for a file named beside its
    # session's) need no os.path.relpath, a tenth of an unchanged pass.
    prefix = top + os.sep if top and top != "." else ""
    return {(name[len(prefix):] if prefix and (name := str(path)).startswith(prefix)
             and ".." not in name else os.path.relpath(path, top)): path for path in paths}


__all__ = ["ENTRY_TYPES", "SOURCE", "SessionFiles", "base_folder", "file_names", "fingerprint",
           "is_side_chain", "owner_folder", "owner_name", "peek", "peek_first_uuid",
           "peek_session_id", "sessions", "side_chains_of", "stamp", "walk"]
