"""``claudetrace tail``: a running session, line by line, as it happens.

:class:`TailFold` is pure: events in, :class:`TailLine` s out.  It feeds the
telemetry span builder (the one reading of what the protocol means) and says
something when a prompt arrives, when a tool call starts, and whenever a span
ends: a model call with its usage, a tool call with its duration and outcome, a
permission wait, a hook or MCP round trip, a control request, a turn with the
running totals of tokens and cost.  :func:`follow` reads a recording's events
from the store as the indexer stores them (the proxy's capture reaches the
store within a fraction of a second) and hands each line to a callback.

Recorded text can hold terminal escape sequences (stderr of a tool, a model's
answer); :func:`printable` shows them as ``\\x1b`` so a tail never drives the
terminal it prints on.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .events import TOOL_USE_TYPES, Event
from .protocol import message_content
from .recording import RecordingInfo
from .telemetry import conventions as c
from .telemetry.records import SpanRecord
from .telemetry.spans import SpanBuilder

_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: How much of a prompt, answer or tool input a line shows.
WIDTH = 160


def printable(text: str, width: int | None = WIDTH) -> str:
    """``text`` on one line, control characters escaped, cut to ``width``."""
    text = _CONTROL_CHARS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    text = text.replace("\n", " ⏎ ").replace("\t", " ")
    if width is not None and len(text) > width:
        text = text[: width - 1] + "…"
    return text


@dataclass(frozen=True, slots=True)
class TailLine:
    """One line of the tail: when (seconds since start), what, and the text."""

    t: float
    kind: str  # turn, prompt, tool, model, permission, hook, mcp, control, subagent, session
    text: str
    status: str = ""  # "ok", "error" or "" (neither)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class TailFold:
    """What to say about a recording's events, one event at a time."""

    def __init__(self, info: RecordingInfo) -> None:
        self.info = info
        self._ended: list[SpanRecord] = []
        self._builder = SpanBuilder(info, on_end=self._ended.append)
        self.model_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost = 0.0
        self.cost_seen = False

    def feed(self, event: Event) -> list[TailLine]:
        """The lines ``event`` gives (often none)."""
        lines = self._started(event)
        self._builder.feed(event)
        lines += self._drain()
        return lines

    def close(self, info: RecordingInfo | None = None) -> list[TailLine]:
        """The lines of the session's end (open spans closed, the totals)."""
        self._builder.close(info or self.info)
        return self._drain()

    def totals(self) -> str:
        """Model calls, tokens and cost so far."""
        cost = f"${self.cost:.4f}" if self.cost_seen else "cost not reported"
        return (
            f"{self.model_calls} model calls, tokens {self.input_tokens:,} in / "
            f"{self.output_tokens:,} out, {cost}"
        )

    # -- what starts ---------------------------------------------------------------------

    def _started(self, event: Event) -> list[TailLine]:
        t = event.t
        kind = event.type
        if event.direction == "err":
            return [TailLine(t, "stderr", printable(event.text), "error")]
        if kind == "user" and event.direction == "in":
            content = message_content(event)
            if isinstance(content, list):
                content = " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
            return [TailLine(t, "prompt", printable(str(content or "")))]
        if kind == "assistant" and event.direction == "out":
            lines = []
            content = message_content(event)
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") in TOOL_USE_TYPES:
                    given = block.get("input")
                    detail = _tool_input(given)
                    name = str(block.get("name", "?"))
                    lines.append(TailLine(t, "tool", f"▶ {name} {detail}".rstrip()))
            return lines
        return []

    # -- what ended ----------------------------------------------------------------------

    def _drain(self) -> list[TailLine]:
        ended, self._ended[:] = list(self._ended), []
        out = []
        for span in ended:
            line = self._span_line(span)
            if line is not None:
                out.append(line)
        return out

    def _span_line(self, span: SpanRecord) -> TailLine | None:
        a = span.attributes
        t = (span.end_ns or span.start_ns) / 1e9 - self.info.started_ns / 1e9
        took = _ms(span.duration_s)
        bad = "error" if span.status == "error" else "ok"
        kind = span.key.split("/", 1)[0].split("#", 1)[0]
        if kind == "chat":
            self.model_calls += 1
            inp = _int(a.get(c.GEN_AI_USAGE_INPUT_TOKENS))
            reasons = a.get(c.GEN_AI_RESPONSE_FINISH_REASONS)
            reason = f" · {reasons[0]}" if isinstance(reasons, (list, tuple)) and reasons else ""
            model = a.get(c.GEN_AI_RESPONSE_MODEL) or a.get(c.GEN_AI_REQUEST_MODEL) or "?"
            # Output tokens are final only in the turn's result: the turn line has them.
            return TailLine(t, "model", f"{model} · {took} · {inp:,} input tokens{reason}", bad)
        if kind == "tool":
            outcome = a.get(c.TOOL_OUTCOME) or ("error" if bad == "error" else "ok")
            mark = "✓" if outcome == "ok" else "✗"
            status = "ok" if outcome == "ok" else "error"
            name = a.get(c.GEN_AI_TOOL_NAME, "?")
            return TailLine(t, "tool", f"{mark} {name} {outcome} after {took}", status)
        if kind == "agent":
            return TailLine(t, "subagent", f"{span.name} done after {took}", bad)
        if kind == "turn":
            # The CLI's own figures for the turn (input includes the cache).
            self.input_tokens += _int(a.get(c.GEN_AI_USAGE_INPUT_TOKENS))
            self.output_tokens += _int(a.get(c.GEN_AI_USAGE_OUTPUT_TOKENS))
            cost = a.get(c.COST_USD)
            if isinstance(cost, (int, float)):
                self.cost += float(cost)
                self.cost_seen = True
            result = a.get(c.RESULT_SUBTYPE, "no result")
            status = "error" if a.get(c.IS_ERROR) or bad == "error" else "ok"
            return TailLine(
                t, "turn", f"{span.name} {result} after {took} │ {self.totals()}", status
            )
        if kind == "root":
            outcome = a.get(c.SESSION_OUTCOME, "?")
            status = "ok" if outcome == "ok" else "error"
            return TailLine(t, "session", f"ended {outcome} after {took} │ {self.totals()}", status)
        subtype = a.get(c.CONTROL_SUBTYPE)
        outcome = str(a.get(c.CONTROL_OUTCOME, "?"))
        status = "ok" if outcome == "success" else "error"
        if subtype == "can_use_tool":
            name = a.get(c.GEN_AI_TOOL_NAME, "?")
            said = a.get(c.PERMISSION_DECISION, outcome)
            return TailLine(t, "permission", f"{name}: {said} after waiting {took}", status)
        if subtype == "hook_callback":
            hook = a.get(c.HOOK_EVENT, "?")
            verdict = a.get(c.HOOK_PERMISSION_DECISION)
            said = f" → {verdict}" if verdict else ""
            return TailLine(t, "hook", f"{hook}{said} round trip {took} ({outcome})", status)
        if subtype == "mcp_message":
            return TailLine(t, "mcp", f"{span.name} {took} ({outcome})", status)
        if subtype:
            return TailLine(t, "control", f"{subtype} {took} ({outcome})", status)
        return None


def _tool_input(given: Any) -> str:
    if isinstance(given, dict):
        for key in ("command", "file_path", "path", "pattern", "url", "description", "prompt"):
            if isinstance(given.get(key), str):
                return printable(given[key], 100)
        import json

        return printable(json.dumps(given, ensure_ascii=False), 100)
    return ""


def raw_line(event: Event, started_ns: int) -> str:
    """One recorded line with its wall-clock time, offset and direction."""
    wall = event.wall_ns or (started_ns + event.t_ns)
    stamp = dt.datetime.fromtimestamp(wall / 1e9).strftime("%H:%M:%S.%f")[:-3]
    return f"{stamp} {event.t:9.3f} {event.direction:>3} {printable(event.text, None)}"


def follow(
    store: Any,
    recording_id: str,
    on_event: Callable[[Event], None],
    *,
    poll_s: float = 0.2,
    should_stop: Callable[[], bool] = lambda: False,
) -> Any:
    """Hand every event of a recording to ``on_event`` until the recording ends.

    Returns the finished recording (its row as stored at the end).
    """
    next_seq = 0
    while True:
        batch: Iterable[Event] = store.iter_events(recording_id, start_seq=next_seq)
        got = False
        for event in batch:
            on_event(event)
            next_seq = event.seq + 1
            got = True
        if got:
            continue
        rec = store.get(recording_id)
        if rec.ended_ns is not None or not rec.is_live():
            # What was stored between the last read and the end.
            for event in store.iter_events(recording_id, start_seq=next_seq):
                on_event(event)
            return rec
        if should_stop():
            return rec
        time.sleep(poll_s)


def next_session(store: Any, *, started_after_ns: int | None, skip: Iterable[str] = ()) -> Any:
    """The session to tail next, or None.

    That is the oldest recording not in ``skip`` that is running or started after
    ``started_after_ns`` (a short session can be over before its indexer has
    stored its first events: it is shown all the same).
    """
    skipped = set(skip)
    candidates = [
        rec
        for rec in store.list_recordings(limit=50)
        if rec.id not in skipped
        and (
            rec.status == "running"
            or (started_after_ns is not None and rec.started_ns >= started_after_ns)
        )
    ]
    return min(candidates, key=lambda r: (r.started_ns, r.id)) if candidates else None


__all__ = ["TailFold", "TailLine", "follow", "next_session", "printable", "raw_line"]
