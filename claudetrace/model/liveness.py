"""What a session is doing now: its liveness, with the time of its last event.

The mapping integrators of the CLI use on the host side, computed from the
session model so every view (the session browser's list and page, the HTML
report, ``tail``) says the same:

==================== =================================================================
state                when
==================== =================================================================
``starting``         the process started; the CLI said nothing yet
``ready``            ``system/init`` came, no turn is under way
``thinking``         a turn is under way and no message is streaming (the model is
                     asked, or a tool runs)
``streaming``        a model call of the turn is streaming (``message_start`` came,
                     ``message_stop`` not yet)
``awaiting approval`` a ``can_use_tool`` request waits for the host's answer
``idle``             the last turn got its ``result``
``error``            the last turn's ``result`` is an error (``is_error``)
``disconnected``     the CLI exited, was killed, or the recording stopped
==================== =================================================================

Pure: a function of a :class:`~claudetrace.model.session.Session` and what the
recording says about the process (ended or not, its error).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from .session import Session

LivenessState = Literal[
    "starting", "ready", "thinking", "streaming", "awaiting approval", "idle", "error",
    "disconnected",
]
#: Every state, in the order a session usually goes through them.
LIVENESS_STATES: Final[tuple[LivenessState, ...]] = (
    "starting", "ready", "thinking", "streaming", "awaiting approval", "idle", "error",
    "disconnected",
)
#: States in which the CLI is working on something (the host waits for it).
BUSY: Final = frozenset({"thinking", "streaming"})


@dataclass(frozen=True, slots=True)
class Liveness:
    """A session's state, what it is about, and when its last event was recorded."""

    state: LivenessState
    #: Offset of the last event (ns since the recording started); None before any.
    last_event_ns: int | None
    #: What the state is about: ``turn 2``, ``can_use_tool Bash``, ``exit code 1`` …
    detail: str = ""

    @property
    def label(self) -> str:
        """``awaiting approval · can_use_tool Bash``."""
        return f"{self.state} · {self.detail}" if self.detail else self.state


def liveness(
    session: Session,
    *,
    ended: bool,
    exit_code: int | None = None,
    signal: int | None = None,
    error: str | None = None,
) -> Liveness:
    """The liveness of ``session`` (see the module doc).

    ``ended`` says the CLI's process is gone (it exited or was killed, or the
    recording stopped without its exit); ``exit_code``, ``signal`` and ``error``
    (the proxy's: the CLI could not start) say how.
    """
    last = session.last_ns if session.event_count else None
    if ended or (error and not session.saw_output):
        if signal:
            why = f"signal {signal}"
        elif exit_code is not None:
            why = f"exit code {exit_code}"
        else:
            why = error or "the recording stopped"
        return Liveness("disconnected", last, why)
    for trip in reversed(session.controls):
        if trip.kind == "permission" and trip.outcome == "unanswered":
            return Liveness("awaiting approval", last, f"can_use_tool {trip.tool_name or '?'}")
    turn = session.open_turn
    if turn is not None:
        streaming = [c for c in turn.calls if c.streamed and not c.stopped and c.observed]
        if streaming:
            return Liveness("streaming", last, f"turn {turn.number}")
        running = [
            t for t in session.tools.values() if t.turn == turn.number and t.end_ns is None
        ]
        if running:
            return Liveness("thinking", last, f"turn {turn.number}, tool {running[-1].name}")
        return Liveness("thinking", last, f"turn {turn.number}")
    result = session.last_result
    if result is not None:
        if result.is_error:
            what = result.result_subtype or "error"
            return Liveness("error", last, f"turn {result.number}: {what}")
        return Liveness("idle", last, f"after turn {result.number}")
    if session.system.get("init") or session.claude_code_version:
        return Liveness("ready", last)
    return Liveness("starting", last)


__all__ = ["BUSY", "LIVENESS_STATES", "Liveness", "LivenessState", "liveness"]
