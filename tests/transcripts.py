"""Claude Code transcripts written for tests: main-thread sessions with chosen
models, times and token counts, as Claude Code writes them (one JSON object a line,
compact: ccusage 20.x skips lines written with a space after ``:``).

An assistant message is written as Claude Code does, one line per content block
sharing the message id, the usage repeated on each (the last value counts).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Call:
    """One API message: its model, time and the four token counts."""

    model: str
    at: dt.datetime
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    #: Lines the message is written as (the usage is repeated on each).
    lines: int = 1


@dataclass
class Transcript:
    """One session: its id, project folder and calls, each answering one prompt."""

    session_id: str
    project: str
    calls: list[Call] = field(default_factory=list)
    cwd: str = "/home/dev/project"


def _stamp(at: dt.datetime) -> str:
    return at.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def transcript_lines(t: Transcript) -> list[dict[str, Any]]:
    """The lines of ``t``: per call a user prompt a second before, then the message."""
    lines: list[dict[str, Any]] = []
    parent: str | None = None
    for n, call in enumerate(t.calls):
        uuid = f"{t.session_id}-u{n}"
        lines.append({
            "parentUuid": parent, "isSidechain": False, "userType": "external",
            "cwd": t.cwd, "sessionId": t.session_id, "version": "2.1.330", "type": "user",
            "message": {"role": "user", "content": f"prompt {n}"}, "uuid": uuid,
            "timestamp": _stamp(call.at - dt.timedelta(seconds=1)),
        })
        parent = uuid
        usage = {"input_tokens": call.input, "cache_creation_input_tokens": call.cache_creation,
                 "cache_read_input_tokens": call.cache_read, "output_tokens": call.output}
        for part in range(call.lines):
            auuid = f"{t.session_id}-a{n}-{part}"
            lines.append({
                "parentUuid": parent, "isSidechain": False, "userType": "external",
                "cwd": t.cwd, "sessionId": t.session_id, "version": "2.1.330",
                "type": "assistant", "requestId": f"req_{t.session_id}_{n}",
                "message": {
                    "id": f"msg_{t.session_id}_{n}", "type": "message", "role": "assistant",
                    "model": call.model,
                    "content": [{"type": "text", "text": f"answer {n} part {part}"}],
                    "stop_reason": "end_turn" if part == call.lines - 1 else None,
                    "usage": usage,
                },
                "uuid": auuid, "timestamp": _stamp(call.at),
            })
            parent = auuid
    return lines


def write_transcript(root: Path, t: Transcript) -> Path:
    """Write ``t`` under ``root/<project>/<session id>.jsonl`` (compact JSON)."""
    path = root / t.project / f"{t.session_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n"
                            for line in transcript_lines(t)))
    return path
