"""``claudetrace import``: cassettes and Claude Code transcripts, told apart by content.

:func:`detect` reads a file's first line: a cassette header, a Claude Code
transcript line, or neither (a clear error).  :func:`import_file` stores one
file; transcripts are imported idempotently: the recording of a session is found
again by its CLI session id, an unchanged transcript is skipped, and one that
grew updates the same recording (its id stays).  :func:`expand`
turns folders into the transcript files under them, and :class:`Watcher`
imports what is new or has grown, again and again.  A recording brought up to
date is never deleted first: it keeps its stored events and gains the new ones
in one transaction (:meth:`~claudetrace.store.Store.put_recording`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import ClaudeTraceError
from .claude_code import (
    Transcript,
    fingerprint,
    is_transcript_line,
    read_transcript,
    sidechain_files,
)
from .claude_trace import is_claude_trace_line, read_claude_trace

#: How each converted format is read: its recordings' ``source``, the reader, and
#: the files that belong to one (a session transcript has its subagents' too).
_CONVERTED: dict[str, tuple[str, Callable[[Path], Transcript], Callable[[Path], list[Path]]]] = {
    "transcript": ("transcript", read_transcript, lambda path: [path, *sidechain_files(path)]),
    "claude-trace": ("claude-trace", read_claude_trace, lambda path: [path]),
}

Kind = Literal["cassette", "transcript", "claude-trace"]
Action = Literal["imported", "updated", "unchanged"]


class ImportFormatError(ClaudeTraceError):
    """A file that is neither a cassette nor a Claude Code transcript."""


@dataclass(frozen=True)
class Imported:
    """What became of one file."""

    path: Path
    kind: Kind
    action: Action
    recording_id: str | None
    session_id: str | None = None


def detect(path: Path) -> Kind:
    """Whether ``path`` holds a cassette, a Claude Code transcript or a claude-trace log.

    The first line tells.
    """
    try:
        with path.open("rb") as handle:
            first = b""
            for raw in handle:
                if raw.strip():
                    first = raw
                    break
    except OSError as exc:
        raise ImportFormatError(
            f"cannot read cassette or transcript {path}: {exc.strerror or exc}"
        ) from exc
    try:
        obj: Any = json.loads(first) if first else None
    except RecursionError:
        raise ImportFormatError(
            f"{path}: its first line nests too deeply to be a cassette, transcript or log"
        ) from None
    except ValueError:
        obj = None
    if isinstance(obj, dict) and obj.get("claudetrace") == "cassette":
        return "cassette"
    if is_transcript_line(obj):
        return "transcript"
    if is_claude_trace_line(obj):
        return "claude-trace"
    what = (
        "an empty file"
        if not first
        else "not a claudetrace cassette, a Claude Code transcript or a claude-trace log"
    )
    raise ImportFormatError(f"{path}: {what}")


def expand(paths: Iterable[str | os.PathLike[str]]) -> Iterator[Path]:
    """Files named, and the session transcripts (``*.jsonl``) under folders named.

    Subagent transcripts (``…/subagents/agent-*.jsonl``) are read with their
    session, not on their own.
    """
    for given in paths:
        path = Path(given).expanduser()
        if path.is_dir():
            for found in sorted(path.rglob("*.jsonl")):
                if found.parent.name != "subagents" and found.is_file():
                    yield found
        elif path.exists():
            yield path
        else:
            raise ImportFormatError(
                f"cannot read cassette or transcript {path}: no such file or folder"
            )


def _converted_recording(store: Any, source: str, session_id: str) -> Any:
    return store.find_by_session(source, session_id)


def import_converted(
    store: Any,
    path: Path,
    kind: Kind = "transcript",
    *,
    name: str | None = None,
    tags: dict[str, str] | None = None,
) -> Imported:
    """Store (or bring up to date) the recording of a transcript or claude-trace log."""
    source, read, files_of = _CONVERTED[kind]
    digest = fingerprint(files_of(path))
    known = _converted_recording(store, source, path.stem)
    if known is not None and (known.extra or {}).get("fingerprint") == digest:
        return Imported(path, kind, "unchanged", known.id, known.cli_session_id)
    converted = read(path)
    sid = converted.info.cli_session_id
    if known is None or known.cli_session_id != sid:
        known = _converted_recording(store, source, sid) if sid else None
    info = converted.info
    info.extra["fingerprint"] = digest
    if known is not None:
        if (known.extra or {}).get("fingerprint") == digest:
            return Imported(path, kind, "unchanged", known.id, sid)
        info.id = known.id
        info.name = known.name
        info.tags = dict(known.tags or {})
    if name:
        info.name = name
    if tags:
        info.tags = {**info.tags, **tags}
    # A turn still under way leaves the recording open, seen last when the file
    # was last written.  One that grew keeps its id and the events it had.
    seen = None if converted.finished else max(path.stat().st_mtime_ns, info.started_ns)
    store.put_recording(info, converted.events, open_seen_ns=seen)
    action: Action = "updated" if known is not None else "imported"
    return Imported(path, kind, action, info.id, sid)


def import_file(
    store: Any, path: Path, *, name: str | None = None, tags: dict[str, str] | None = None,
    writer: Any = None,
) -> Imported:
    """Store the cassette, transcript or claude-trace log ``path``.

    ``store`` is the store, or a function that opens it when first needed: a
    cassette's events go through ``writer`` when given (a
    :class:`~claudetrace.store.writer.WriterProcess`), which needs the store only
    to take a half-stored recording back out (:func:`~claudetrace.store.ingest.import_cassette`).
    """
    opened: Callable[[], Any] = store if callable(store) else lambda: store
    kind = detect(path)
    if kind != "cassette":
        return import_converted(opened(), path, kind, name=name, tags=tags)
    from contextlib import closing

    from ..cassette import iter_cassette
    from ..progress import count_lines, enabled, track
    from ..store.ingest import import_cassette

    header, events = iter_cassette(path)
    with closing(events):
        total = count_lines(path) - 1 if enabled() else None
        with track(events, f"importing {path.name}", total=total, unit="events") as shown:
            if writer is None:
                rid = opened().import_cassette((header, shown), name=name, tags=tags)
            else:
                rid = import_cassette(writer, (header, shown), name=name, tags=tags,
                                      forget=lambda rid: opened().delete_recording(rid))
    session_id = header.get("session_id")
    return Imported(
        path, "cassette", "imported", rid, session_id if isinstance(session_id, str) else None
    )


class Watcher:
    """Imports the transcripts and claude-trace logs under some paths that are new or
    changed since the last look."""

    def __init__(self, store: Any, paths: Iterable[str | os.PathLike[str]]) -> None:
        self.store = store
        self.paths = list(paths)
        self.seen: dict[Path, tuple[int, int]] = {}

    def _stamp(self, path: Path) -> tuple[int, int]:
        stamps = [(p.stat().st_size, p.stat().st_mtime_ns) for p in [path, *sidechain_files(path)]]
        return sum(s for s, _ in stamps), max(m for _, m in stamps)

    def poll(
        self, report: Callable[[Imported], None], errors: Callable[[Path, Exception], None]
    ) -> None:
        """Look once; ``report`` each file imported or updated, ``errors`` each failure."""
        for path in expand(self.paths):
            try:
                stamp = self._stamp(path)
            except OSError:
                continue  # removed while we looked
            if self.seen.get(path) == stamp:
                continue
            try:
                kind = detect(path)
                if kind == "cassette":
                    self.seen[path] = stamp
                    continue
                done = import_converted(self.store, path, kind)
            except ClaudeTraceError as exc:
                errors(path, exc)
            else:
                if done.action != "unchanged":
                    report(done)
            self.seen[path] = stamp


__all__ = [
    "ImportFormatError",
    "Imported",
    "Watcher",
    "detect",
    "expand",
    "import_converted",
    "import_file",
]
