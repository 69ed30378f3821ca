"""Claude Code transcripts made up for tests and benchmarks: sessions with chosen
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
    #: With lines written this long one after another (``at`` is the first's), as
    #: the CLI writes a streamed message's blocks: the lines before the last carry
    #: the usage as of ``message_start`` (one output token), the last the final.
    line_gap: dt.timedelta | None = None
    #: Of ``cache_creation``, the tokens written for an hour: with any, the usage
    #: carries the API's split (``cache_creation.ephemeral_1h_input_tokens``).
    cache_creation_1h: int = 0


@dataclass
class Transcript:
    """One session: its id, project folder and calls, each answering one prompt."""

    session_id: str
    project: str
    calls: list[Call] = field(default_factory=list)
    cwd: str = "/home/dev/project"
    #: A subagent's transcript (``<session>/subagents/agent-<id>.jsonl``) when set.
    agent_id: str | None = None


def _stamp(at: dt.datetime) -> str:
    return at.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def transcript_lines(t: Transcript) -> list[dict[str, Any]]:
    """The lines of ``t``: per call a user prompt a second before, then the message."""
    lines: list[dict[str, Any]] = []
    parent: str | None = None
    side = {"isSidechain": True, "agentId": t.agent_id} if t.agent_id else {}
    tag = f"{t.session_id}{t.agent_id or ''}"
    for n, call in enumerate(t.calls):
        uuid = f"{t.session_id}-u{n}"
        lines.append({
            "parentUuid": parent, "isSidechain": False, "userType": "external",
            "cwd": t.cwd, "sessionId": t.session_id, "version": "2.1.330", "type": "user",
            "message": {"role": "user", "content": f"prompt {n}"}, "uuid": uuid,
            "timestamp": _stamp(call.at - dt.timedelta(seconds=1)), **side,
        })
        parent = uuid
        usage: dict[str, Any] = {
            "input_tokens": call.input, "cache_creation_input_tokens": call.cache_creation,
            "cache_read_input_tokens": call.cache_read, "output_tokens": call.output}
        if call.cache_creation_1h:
            usage["cache_creation"] = {
                "ephemeral_5m_input_tokens": call.cache_creation - call.cache_creation_1h,
                "ephemeral_1h_input_tokens": call.cache_creation_1h}
        for part in range(call.lines):
            auuid = f"{t.session_id}-a{n}-{part}"
            at, said = call.at, usage
            if call.line_gap is not None:
                at = call.at + part * call.line_gap
                if part < call.lines - 1:
                    said = {**usage, "output_tokens": min(1, call.output)}
            lines.append({
                "parentUuid": parent, "isSidechain": False, "userType": "external",
                "cwd": t.cwd, "sessionId": t.session_id, "version": "2.1.330",
                "type": "assistant", "requestId": f"req_{tag}_{n}",
                "message": {
                    "id": f"msg_{tag}_{n}", "type": "message", "role": "assistant",
                    "model": call.model,
                    "content": [{"type": "text", "text": f"answer {n} part {part}"}],
                    "stop_reason": "end_turn" if part == call.lines - 1 else None,
                    "usage": said,
                },
                "uuid": auuid, "timestamp": _stamp(at), **side,
            })
            parent = auuid
    return lines


def write_transcript(root: Path, t: Transcript) -> Path:
    """Write ``t`` under ``root/<project>/<session id>.jsonl`` (compact JSON; a
    subagent's under ``<session id>/subagents/agent-<id>.jsonl``)."""
    path = root / t.project / f"{t.session_id}.jsonl"
    if t.agent_id:
        path = root / t.project / t.session_id / "subagents" / f"agent-{t.agent_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n"
                            for line in transcript_lines(t)))
    return path


#: Models both price tables know (ccusage's LiteLLM table and genai-prices).
MODELS = ("claude-sonnet-4-5-20250929", "claude-opus-4-5-20251101", "claude-haiku-4-5-20251001",
          "claude-opus-4-1-20250805", "claude-sonnet-4-20250514", "claude-3-5-haiku-20241022",
          "claude-opus-4-20250514", "claude-3-7-sonnet-20250219")


def random_corpus(sessions: int = 16, *, seed: int = 7, calls: int = 12,
                  models: tuple[str, ...] = MODELS,
                  line_gap: dt.timedelta | None = None) -> list[Transcript]:
    """Main-thread sessions over about six weeks from 2026-08-28, in five projects:
    1 to ``calls`` calls each, of random models and token counts (every call under
    200k input tokens in all, where the tables' prices agree), each written as 1 to
    3 lines (``line_gap``: :attr:`Call.line_gap`)."""
    import random

    rnd = random.Random(seed)
    out = []
    for s in range(sessions):
        t = dt.datetime(2026, 8, 28, tzinfo=dt.timezone.utc) + dt.timedelta(
            hours=rnd.randint(0, 24 * 40))
        made = []
        for _ in range(rnd.randint(1, calls)):
            t += dt.timedelta(minutes=rnd.randint(1, 90))
            made.append(Call(rnd.choice(models), t, rnd.randint(0, 5000), rnd.randint(1, 8000),
                             rnd.randint(0, 150_000), rnd.randint(0, 30_000),
                             lines=rnd.randint(1, 3), line_gap=line_gap))
        out.append(Transcript(f"22222222-0000-4000-8000-{seed:04d}{s:08d}", f"-home-dev-p{s % 5}",
                              made, cwd=f"/home/dev/p{s % 5}"))
    return out
