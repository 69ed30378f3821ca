"""``claudetrace tail``: a running session, line by line, as it happens.

:class:`TailFold` is pure: events in, :class:`TailLine` s out.  It feeds the
session model (the one reading of what the protocol means) and says something
when a prompt arrives, when a tool call starts, and whenever something ends: a
model call with its usage, a tool call with its duration and outcome, a
permission wait, a hook or MCP round trip, a control request, a subagent, a
turn with the running totals of tokens and cost.  :func:`follow` reads a recording's events
from the store as the indexer stores them (the proxy's capture reaches the
store within a fraction of a second) and hands each line to a callback.

Recorded text can hold terminal escape sequences (stderr of a tool, a model's
answer); :func:`printable` shows them as ``\\x1b`` (:func:`claudetrace.terminal.visible`)
so a tail never drives the terminal it prints on.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any, Final

from .display import visible
from .formats.facts import UNKNOWN, latency, money, plural
from .model import ControlRoundTrip, ModelCall, Session, ToolCall, Turn
from .model.content import content_text, message_content
from .model.events import Event
from .model.liveness import liveness
from .recording import RecordingInfo
from .transcript import line_label, marker_text

#: How much of a prompt, answer or tool input a line shows.
WIDTH = 160


def printable(text: str, width: int | None = WIDTH) -> str:
    """``text`` on one line, control characters escaped, cut to ``width``."""
    text = visible(text.replace("\n", " ⏎ ").replace("\t", " "))
    if width is not None and len(text) > width:
        text = text[: width - 1] + "…"
    return text


@dataclass(frozen=True, slots=True)
class TailLine:
    """One line of the tail: when (seconds since start), what, and the text."""

    t: float
    kind: str  # turn, prompt, tool, model, permission, hook, mcp, control, subagent, session,
    # note (an imported user line that is no prompt), marker (compaction, rewind)
    text: str
    status: str = ""  # "ok", "error" or "" (neither)


#: ``system`` lines that mark the conversation (said in words by :func:`marker_text`).
_MARKERS: Final = frozenset({"compact_boundary", "rewind", "resume", "summary"})


class TailFold:
    """What to say about a recording's events, one event at a time.

    It folds the events into the session model (:class:`claudetrace.model.Session`)
    and, after each, says what started or ended since the one before.
    """

    def __init__(self, info: RecordingInfo) -> None:
        self.info = info
        self.session = Session(model=info.model, session_id=info.cli_session_id)
        self._tools_seen = 0
        self._running_tools: dict[str, ToolCall] = {}
        self._calls_seen = 0
        self._open_calls: list[ModelCall] = []
        self._controls_seen = 0
        self._open_controls: list[ControlRoundTrip] = []
        self._turns_told = 0
        self._agents_told: set[str] = set()

    def feed(self, event: Event) -> list[TailLine]:
        """The lines ``event`` gives (often none)."""
        lines = self._said(event)
        self.session.add(event)
        lines += self._changes(event.t_ns, closing=False)
        if event.type == "control_request" and event.subtype == "can_use_tool":
            # The session now waits on the host: say so as the session browser does.
            now = liveness(self.session, ended=False)
            if now.state == "awaiting approval":
                lines.append(TailLine(event.t, "state", printable(now.label)))
        return lines

    def close(self, info: RecordingInfo | None = None) -> list[TailLine]:
        """The lines of the session's end: what never finished, the outcome, the totals."""
        info = info or self.info
        lines = self._changes(self.session.last_ns, closing=True)
        outcome = self.session.outcome_of(info)
        end = info.ended_ns - info.started_ns if info.ended_ns else self.session.last_ns
        why = f" ({outcome.reason})" if outcome.reason else ""
        status = "error" if outcome.failed else "ok"
        text = f"ended {outcome.status}{why} after {latency(end / 1e9)} │ {self.totals()}"
        return [*lines, TailLine(end / 1e9, "session", text, status)]

    def totals(self) -> str:
        """Model calls, tokens and cost so far: the CLI's cost where it gave one, else
        the price table's (``(estimate)``), as ``sessions`` and ``show`` say it."""
        usage = self.session.usage
        priced = self.session.cost()
        cost = ("cost unknown" if priced.source == UNKNOWN
                else money(priced.usd, priced.source))
        calls = sum(1 for call in self.session.calls.values() if call.observed)
        unseen = len(self.session.calls) - calls
        counted = plural(calls, "model call") + (
            f" (+{unseen} a subagent's, known from the result)" if unseen else ""
        )
        tokens_in = usage.input + usage.cache_read + usage.cache_creation
        return f"{counted}, tokens {tokens_in:,} in / {usage.output:,} out, {cost}"

    # -- lines read from the event itself --------------------------------------------------

    def _said(self, event: Event) -> list[TailLine]:
        if event.direction == "err":
            return [TailLine(event.t, "stderr", printable(event.text), "error")]
        if event.direction == "in" and event.type == "user":
            text = content_text(message_content(event), " ")
            return [TailLine(event.t, "prompt", printable(text))]
        if event.type == "user" and b'"claudetrace_kind"' in event.data:
            # An imported transcript's user line that is no prompt (steering …).
            label = line_label(event.message or {}) or "user"
            text = content_text(message_content(event), " ")
            return [TailLine(event.t, "note", printable(f"{label}: {text}"))]
        if event.type == "system" and event.subtype in _MARKERS:
            said = marker_text(event.message or {})
            return [TailLine(event.t, "marker", printable(said))] if said else []
        return []

    # -- what the session model says changed --------------------------------------------

    def _changes(self, now_ns: int, *, closing: bool) -> list[TailLine]:
        session = self.session
        out: list[TailLine] = []
        if len(session.tools) > self._tools_seen:
            for tool in islice(session.tools.values(), self._tools_seen, None):
                detail = _tool_input(tool.input)
                out.append(
                    TailLine(tool.start_ns / 1e9, "tool", f"▶ {tool.name} {detail}".rstrip())
                )
                self._running_tools[tool.id] = tool
            self._tools_seen = len(session.tools)
        if len(session.calls) > self._calls_seen:
            self._open_calls += list(islice(session.calls.values(), self._calls_seen, None))
            self._calls_seen = len(session.calls)
        if len(session.controls) > self._controls_seen:
            self._open_controls += session.controls[self._controls_seen :]
            self._controls_seen = len(session.controls)
        out += self._calls_done(closing)
        for trip in [t for t in self._open_controls if t.answered or closing]:
            self._open_controls.remove(trip)
            out.append(_control_line(trip))
        for tool in [t for t in self._running_tools.values() if t.end_ns is not None or closing]:
            del self._running_tools[tool.id]
            out.append(self._tool_line(tool, now_ns))
        for sub in session.subagents.values():
            if sub.end_ns is not None and sub.tool_use_id not in self._agents_told:
                self._agents_told.add(sub.tool_use_id)
                took = latency(max(0, sub.end_ns - sub.start_ns) / 1e9)
                name = sub.subagent_type or "subagent"
                out.append(TailLine(sub.end_ns / 1e9, "subagent", f"{name} done after {took}"))
        while self._turns_told < len(session.turns) and session.turns[self._turns_told].done:
            out.append(self._turn_line(session.turns[self._turns_told]))
            self._turns_told += 1
        return out

    def _calls_done(self, closing: bool) -> list[TailLine]:
        lines = []
        for call in list(self._open_calls):
            turn = (
                self.session.turns[call.turn - 1]
                if 0 < call.turn <= len(self.session.turns)
                else None
            )
            # Told once its usage is final (a message_delta, else its turn's
            # result): each call's tokens are told once, and add up to the totals.
            if not (call.final or closing or (turn and turn.done)):
                continue
            self._open_calls.remove(call)
            # Without streamed events the CLI shows a call only once it is over.
            took = (
                f" · {latency(max(0, call.end_ns - call.start_ns) / 1e9)}" if call.streamed else ""
            )
            tokens = call.usage.input + call.usage.cache_read + call.usage.cache_creation
            # A call cut off (the CLI died) has only the output counted so far.
            out = f", {call.usage.output:,} out" + ("" if call.final else " (not final)")
            reason = f" · {call.stop_reason}" if call.stop_reason else ""
            seen = "" if call.observed else " (a subagent's, known from the result)"
            status = "error" if call.error else "ok"
            model = call.model or self.session.model or "?"
            text = f"{model}{took} · {tokens:,} in{out}{reason}{seen}"
            lines.append(TailLine(call.end_ns / 1e9, "model", text, status))
        return lines

    @staticmethod
    def _tool_line(tool: ToolCall, now_ns: int) -> TailLine:
        outcome = tool.outcome
        end = tool.end_ns if tool.end_ns is not None else now_ns
        took = latency(max(0, end - tool.start_ns) / 1e9)
        mark = "✓" if outcome == "ok" else "✗"
        status = "ok" if outcome == "ok" else "error"
        return TailLine(end / 1e9, "tool", f"{mark} {tool.name} {outcome} after {took}", status)

    def _turn_line(self, turn: Turn) -> TailLine:
        took = latency(max(0, (turn.end_ns or turn.start_ns) - turn.start_ns) / 1e9)
        what = turn.ended_with
        status = "error" if turn.failed else "ok"
        text = f"turn {turn.number} {what} after {took} │ {self.totals()}"
        return TailLine((turn.end_ns or turn.start_ns) / 1e9, "turn", text, status)


def _control_line(trip: ControlRoundTrip) -> TailLine:
    took = "unanswered" if trip.duration_ns is None else latency(trip.duration_ns / 1e9)
    status = "ok" if trip.outcome == "success" else "error"
    t = (trip.response_ns if trip.response_ns is not None else trip.request_ns) / 1e9
    if trip.kind == "permission":
        said = trip.decision or trip.outcome
        return TailLine(
            t, "permission", f"{trip.tool_name or '?'}: {said} after waiting {took}", status
        )
    if trip.kind == "hook":
        verdict = f" → {trip.decision}" if trip.decision else ""
        text = f"{trip.hook_event or '?'}{verdict} round trip {took} ({trip.outcome})"
        return TailLine(t, "hook", text, status)
    if trip.kind == "mcp":
        text = f"{trip.mcp_method or '?'} {trip.mcp_server or ''} {took} ({trip.outcome})"
        return TailLine(t, "mcp", text, status)
    return TailLine(t, "control", f"{trip.subtype} {took} ({trip.outcome})", status)


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
    start_seq: int = 0,
) -> Any:
    """Hand every event of a recording from ``start_seq`` on to ``on_event`` until
    the recording ends.

    Returns the finished recording (its row as stored at the end).
    """
    next_seq = start_seq
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


def next_session(
    store: Any, *, started_after_ns: int | None, shown: Mapping[str, int] | None = None
) -> Any:
    """The session to tail next, or None.

    That is the oldest recording with events not ``shown`` yet (``shown`` maps a
    recording id to the events a tail has shown of it) that is running, or,
    when ``started_after_ns`` is given, that started or was last active since
    then: a short session can be over before its indexer has stored its first
    events, and a session imported from a transcript can grow again after it
    ended (``import --watch`` brings it up to date): it is shown all the same.
    """
    seen = shown or {}
    candidates = []
    for rec in store.list_recordings(limit=50):
        done = seen.get(rec.id)
        if done is not None and rec.event_count <= done:
            continue  # nothing new (or, running, nothing stored yet beyond it)
        active = rec.last_seen_ns or rec.started_ns
        if rec.status == "running" or (
            started_after_ns is not None
            and (rec.started_ns >= started_after_ns or active >= started_after_ns)
        ):
            candidates.append(rec)
    return min(candidates, key=lambda r: (r.started_ns, r.id)) if candidates else None


__all__ = ["TailFold", "TailLine", "follow", "next_session", "printable", "raw_line"]
