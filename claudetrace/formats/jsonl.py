"""JSON Lines files read a line at a time, whatever is in them.

Files found in the wild (Claude Code transcripts, claude-trace logs, another
tool's logs) are read as a stream: memory holds one line, never the file, and a
line longer than :data:`MAX_LINE` is skipped without being held (a newline-free
file of gigabytes costs a block's memory).  A line that is not a JSON object
(junk, half a line written over, nesting deeper than anything reads) is skipped
and described in :attr:`JsonlFile.damaged`; a last line without its newline is
being written, and is left for the next read (:attr:`JsonlFile.torn`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final

import msgspec

from ..errors import ClaudeTraceError, not_regular
from ..model.events import MAX_DEPTH, may_nest_too_deep, parse_json

#: The longest line read (bytes).  Claude Code writes a pasted image or a large
#: tool result on one line; nothing it writes comes near this.
MAX_LINE: Final = 64 << 20
#: Damaged lines named one by one in :attr:`JsonlFile.damaged` (the rest counted).
_NAMED: Final = 5
#: Bytes read at a time: more than most lines (a few KB), little enough that a
#: look at a file's first lines (:func:`first_object`) reads little more.
_READ: Final = 64 << 10
_DECODE: Final = msgspec.json.Decoder()
#: What :func:`first_object` says of a file with no line yet.
EMPTY: Final = "an empty file"
UNFINISHED: Final = "its first line is not finished yet"


class UnreadableFile(ClaudeTraceError):
    """A file that cannot be opened or read (named, with the system's reason)."""


def parse_object(raw: bytes) -> dict[str, Any] | None:
    """One line as a JSON object, else None (not JSON, not an object, nested too
    deep, or text no database takes: :func:`~claudetrace.model.events.parse_json`
    decides every line msgspec does not take)."""
    value: Any
    try:
        if may_nest_too_deep(raw):
            raise ValueError
        value = _DECODE.decode(raw)
    except (msgspec.DecodeError, ValueError, RecursionError):
        value = parse_json(raw.strip())
    return value if isinstance(value, dict) else None


def why_not_read(raw: bytes) -> str:
    """Why :func:`parse_object` took no object from a line, said after "is": JSON
    nested deeper than :data:`~claudetrace.model.events.MAX_DEPTH` levels is said
    to be (the store, its views and exporters read no deeper), else "not a JSON
    object"."""
    if may_nest_too_deep(raw):
        try:
            deep = isinstance(_DECODE.decode(raw), dict)
        except RecursionError:
            deep = True
        except (msgspec.DecodeError, ValueError):
            deep = False
        if deep:
            return f"JSON nested deeper than {MAX_DEPTH} levels (the most claudetrace reads)"
    return "not a JSON object"


@dataclass
class JsonlFile:
    """A JSONL file read from ``start`` (a byte offset at a line's start)."""

    path: Path
    start: int = 0
    #: The longest line read (:data:`MAX_LINE` unless given).
    max_line: int = 0
    #: Damaged lines seen, as ``line N: why`` (the first few; :attr:`damage` counts all).
    damaged: list[str] = field(default_factory=list)
    damage: int = 0
    #: A last line without its newline was left unread.
    torn: bool = False
    #: The offset just past the last whole line read.
    end: int = 0

    def objects(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(line number, object)`` for each line that is a JSON object."""
        for number, raw in self.lines():
            obj = parse_object(raw)
            if obj is None:
                self.damaged_line(number, why_not_read(raw))
            else:
                yield number, obj

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """``(line number, bytes)`` of each whole, non-blank line of at most
        :attr:`max_line` bytes.

        The file is read a block (:data:`_READ`) at a time and cut at its
        newlines: a ``readline`` call a line cost a tenth of an import's
        reading.  A line that spans blocks is held as its parts until its
        newline, and one that grows past the cap is no longer held, only
        measured to its end."""
        handle = open_regular(self.path)
        if not self.max_line:
            self.max_line = MAX_LINE
        cap = self.max_line + 1  # the most bytes a line takes, its newline too
        with handle:
            handle.seek(self.start)
            self.end = self.start
            number = 0
            parts: list[bytes] = []  # the line begun in earlier blocks
            held = 0  # their bytes
            skipping = False  # that line is past the cap: measured, not held
            read = handle.read
            while block := read(_READ):
                at = 0
                find = block.find
                while (newline := find(b"\n", at)) >= 0:
                    number += 1
                    end = newline + 1
                    size = held + end - at
                    if skipping or size > cap:
                        self.damaged_line(
                            number, f"longer than {size_text(self.max_line)}, skipped")
                        raw = b""
                    elif parts:
                        parts.append(block[at:end])
                        raw = b"".join(parts)
                    else:
                        raw = block[at:end]
                    parts, held, skipping = [], 0, False
                    self.end += size
                    at = end
                    if raw.strip():
                        yield number, raw
                if at < len(block):
                    held += len(block) - at
                    if skipping or held > cap:
                        skipping, parts = True, []
                    else:
                        parts.append(block[at:] if at else block)
            if held:
                self.torn = True  # being written: the next read takes it

    def damaged_line(self, number: int, why: str) -> None:
        """Count line ``number`` as damaged (skipped) for ``why``."""
        self.damage += 1
        if len(self.damaged) < _NAMED:
            self.damaged.append(f"{self.path.name}:{number}: {why}")


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened to read, unbuffered, if it is a regular file (or a link to
    one): a FIFO or a device (``/dev/zero``) would block or never end, so it is an
    :class:`UnreadableFile` saying ``PATH: not a regular file (a FIFO)``.  Opened
    without blocking, then looked at, so a FIFO put in its place meanwhile is
    refused too."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise UnreadableFile(f"cannot read {path}: {exc.strerror or exc}") from exc
    odd = not_regular(os.fstat(fd).st_mode)
    if odd:
        os.close(fd)
        raise UnreadableFile(f"{path}: {odd}")
    os.set_blocking(fd, True)
    return open(fd, "rb", buffering=0)


def size_text(size: int) -> str:
    """A size in MiB when it is whole MiB, else in bytes."""
    return f"{size >> 20} MiB" if size and not size % (1 << 20) else f"{size} bytes"


def first_object(path: Path) -> tuple[dict[str, Any] | None, str]:
    """The first non-blank line of ``path`` as a JSON object, or None and what the
    file seems to be instead (for a one-line message)."""
    reader = JsonlFile(path)
    for _number, raw in reader.lines():
        obj = parse_object(raw)
        if obj is not None:
            return obj, ""
        return None, f"its first line is {why_not_read(raw)}"
    if reader.damage:
        return None, f"its first line is longer than {size_text(reader.max_line)}"
    if reader.torn:
        return None, UNFINISHED
    return None, EMPTY


def looks_like(obj: dict[str, Any]) -> str:
    """What a JSON object of an unknown log seems to be, in a few words."""
    kind = obj.get("type")
    keys = ", ".join(sorted(str(k) for k in obj)[:5])
    if isinstance(kind, str):
        return f"a JSON log of {kind!r} records (keys {keys})"
    return f"a JSON log with keys {keys}"


__all__ = ["EMPTY", "MAX_LINE", "UNFINISHED", "JsonlFile", "UnreadableFile", "first_object",
           "looks_like", "open_regular", "parse_object", "why_not_read"]
