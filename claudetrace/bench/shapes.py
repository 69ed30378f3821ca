"""The shapes of input the ingest benchmark measures, generated deterministically.

A recording's cost to store depends on its shape as much as on its size: the
bench's own sample (a session with partial messages, cycled) is one shape; a
session that streams long answers is mostly ``stream_event`` text deltas; an
agent that runs tools is mostly ``tool_use``/``tool_result`` pairs with outputs
of a few kilobytes; a session that reads big files has a few lines of
megabytes.  Each generator writes the lines the CLI writes for that shape
(compact JSON, its field order, its envelope of ``session_id``, ``uuid`` and
``parent_tool_use_id``), from a fixed seed, so that every run and every
machine measures the same bytes.

- ``sample``: the streaming sample cycled (``--from`` another recording).
- ``deltas``: text-delta-heavy, as issue 37 measured it: per API message, 49
  ``content_block_delta`` text deltas of about 30 words, then the assistant
  line with a tool call.  127,500 lines (about 58 MB), 255k events stored.
- ``tools``: tool-heavy: an assistant ``tool_use`` (Bash, Read, Grep, Edit)
  then the user line with its ``tool_result`` of 0.3 to 2.5 KB, echoed in
  ``tool_use_result`` as the CLI does.
- ``huge``: few huge lines: Read results of 1 to 5 MB each (the file's text
  twice, in the content and in ``tool_use_result``), between small lines.
"""

from __future__ import annotations

import itertools
import json
import random
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

SESSION = "5f0c2d1e-9b7a-4c3e-8f21-6d4a0b9e7c15"

#: The words the generated texts are drawn from.
_VOCABULARY = (
    "the a of to and in that is for it with as on was by be this are from or at an "
    "file function value line test error change return output input store event "
    "session model tool result message stream delta index query table column row "
    "release checklist export import replay proxy writer reader capture record "
    "because which when then while where should would could might must does "
    "parse write read open close count order first last next every each other "
    "timezone bug report report's user's CLI SDK JSON SQLite PostgreSQL byte "
    "exactly quickly carefully already instead rather however therefore also"
)
_WORDS = _VOCABULARY.split()


def _dumps(obj: object) -> bytes:
    """JSON as the CLI writes it: compact, non-ASCII kept."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _ids(rng: random.Random) -> Callable[[], str]:
    return lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(count))


def sample(lines: Iterable[bytes], count: int) -> Iterator[bytes]:
    """``count`` lines cycled from a recording's ``lines``."""
    return itertools.islice(itertools.cycle(lines), count)


def deltas(count: int) -> Iterator[bytes]:
    """Text-delta-heavy: 49 text deltas of ~30 words, then an assistant tool call."""
    rng = random.Random(37)
    new_id = _ids(rng)
    for n in range(count):
        message = f"msg_01{n // 50:020d}"
        if n % 50 < 49:
            yield _dumps({
                "type": "stream_event",
                "event": {"type": "content_block_delta", "index": 0,
                          "delta": {"type": "text_delta", "text": _words(rng, 30) + " "}},
                "session_id": SESSION, "parent_tool_use_id": None, "uuid": new_id(),
                "api_message_id": message})
        else:
            yield _dumps({
                "type": "assistant",
                "message": {"id": message, "type": "message", "role": "assistant",
                            "model": "claude-opus-5-5",
                            "content": [{"type": "tool_use", "id": f"toolu_{n:024d}",
                                         "name": "Bash",
                                         "input": {"command": f"echo step {n}",
                                                   "description": _words(rng, 6)}}],
                            "stop_reason": None, "stop_sequence": None,
                            "usage": {"input_tokens": 12, "output_tokens": 1500,
                                      "cache_read_input_tokens": 30000,
                                      "cache_creation_input_tokens": 400}},
                "parent_tool_use_id": None, "session_id": SESSION, "uuid": new_id()})


_TOOLS = ("Bash", "Read", "Grep", "Edit")


def _tool_input(rng: random.Random, name: str, n: int) -> dict[str, object]:
    if name == "Bash":
        return {"command": f"pytest -q tests/test_{rng.choice(_WORDS)}.py -k case_{n}",
                "description": _words(rng, 5)}
    if name == "Read":
        return {"file_path": f"/home/dev/project/src/{rng.choice(_WORDS)}_{n % 97}.py"}
    if name == "Grep":
        return {"pattern": rng.choice(_WORDS), "path": "/home/dev/project", "-n": True}
    return {"file_path": f"/home/dev/project/src/{rng.choice(_WORDS)}.py",
            "old_string": _words(rng, 8), "new_string": _words(rng, 9)}


def _output(rng: random.Random, size: int) -> str:
    out: list[str] = []
    length = 0
    while length < size:
        row = f"{len(out) + 1:>5}\t{_words(rng, rng.randint(3, 14))}"
        out.append(row)
        length += len(row) + 1
    return "\n".join(out)


def tools(count: int) -> Iterator[bytes]:
    """Tool-heavy: assistant tool_use, then its tool_result of 0.5-4 KB."""
    rng = random.Random(38)
    new_id = _ids(rng)
    for n in range(count):
        pair = n // 2
        name = _TOOLS[pair % len(_TOOLS)]
        tool_id = f"toolu_{pair:024d}"
        if n % 2 == 0:
            yield _dumps({
                "type": "assistant",
                "message": {"id": f"msg_01{pair:020d}", "type": "message", "role": "assistant",
                            "model": "claude-opus-5-5",
                            "content": [{"type": "tool_use", "id": tool_id, "name": name,
                                         "input": _tool_input(rng, name, pair)}],
                            "stop_reason": None, "stop_sequence": None,
                            "usage": {"input_tokens": 3, "output_tokens": 120,
                                      "cache_read_input_tokens": 40000,
                                      "cache_creation_input_tokens": 300}},
                "parent_tool_use_id": None, "session_id": SESSION, "uuid": new_id()})
        else:
            text = _output(rng, rng.randint(300, 2500))
            yield _dumps({
                "type": "user",
                "message": {"role": "user", "content": [
                    {"tool_use_id": tool_id, "type": "tool_result", "content": text,
                     "is_error": pair % 23 == 0}]},
                "parent_tool_use_id": None, "session_id": SESSION, "uuid": new_id(),
                "timestamp": f"2026-11-22T05:{pair // 60 % 60:02d}:{pair % 60:02d}.000Z",
                "tool_use_result": {"stdout": text, "stderr": "", "interrupted": False,
                                    "isImage": False}})


def huge(count: int) -> Iterator[bytes]:
    """Few huge lines: every fourth a Read result of 1-5 MB, between small lines."""
    rng = random.Random(39)
    new_id = _ids(rng)
    pool = _output(rng, 1 << 16)  # the file's text: slices of one pseudo-random text
    for n in range(count):
        tool_id = f"toolu_{n // 4:024d}"
        if n % 4 == 3:
            size = rng.randint(1 << 20, 5 << 20) // 2
            start = rng.randrange(len(pool))
            text = (pool[start:] + pool * (size // len(pool) + 1))[:size]
            path = f"/home/dev/project/data/{rng.choice(_WORDS)}_{n}.csv"
            yield _dumps({
                "type": "user",
                "message": {"role": "user", "content": [
                    {"tool_use_id": tool_id, "type": "tool_result", "content": text}]},
                "parent_tool_use_id": None, "session_id": SESSION, "uuid": new_id(),
                "tool_use_result": {"type": "text", "file": {
                    "filePath": path, "content": text, "numLines": text.count("\n") + 1,
                    "startLine": 1, "totalLines": text.count("\n") + 1}}})
        else:
            yield _dumps({
                "type": "assistant",
                "message": {"id": f"msg_01{n:020d}", "type": "message", "role": "assistant",
                            "model": "claude-opus-5-5",
                            "content": [{"type": "tool_use", "id": tool_id, "name": "Read",
                                         "input": {"file_path": f"/data/{n}.csv"}}]},
                "parent_tool_use_id": None, "session_id": SESSION, "uuid": new_id()})


@dataclass(frozen=True)
class Shape:
    """One shape: its name, what it is, and its line count at scale 1."""

    name: str
    about: str
    lines: int


SHAPES: dict[str, Shape] = {s.name: s for s in (
    Shape("sample", "the streaming sample cycled", 100_000),
    Shape("deltas", "text deltas of ~30 words, a tool call every 50 lines", 127_500),
    Shape("tools", "tool_use/tool_result pairs, outputs of 0.3-2.5 KB", 40_000),
    Shape("huge", "Read results of 1-5 MB, every fourth of the lines", 400),
)}


def shape_lines(name: str, count: int, sample_source: Iterable[bytes] = ()) -> Iterator[bytes]:
    """``count`` lines of the shape ``name`` (``sample`` cycles ``sample_source``)."""
    if name == "sample":
        return sample(sample_source, count)
    generators = {"deltas": deltas, "tools": tools, "huge": huge}
    if name not in generators:
        raise ValueError(f"no shape {name!r} (shapes: {', '.join(SHAPES)})")
    return generators[name](count)


def write_input(path: Path, lines: Iterable[bytes]) -> int:
    """Write ``lines``, each ending with a newline, to ``path`` (as they are made:
    the huge shape never sits in memory whole); the number of bytes written."""
    written = 0
    with path.open("wb") as out:
        for line in lines:
            out.write(line + b"\n")
            written += len(line) + 1
    return written
