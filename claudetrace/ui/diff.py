"""Two recordings side by side, aligned turn by turn.

:func:`turn_summaries` cuts a recording into turns — what the host sent (the
prompt and any control requests), what came back (assistant text and the final
result), the tools used, the turn's cost and duration — and :func:`align`
pairs the turns of two recordings and says where they first differ.  This is
the view to open when a replay diverged from its recording.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..model.events import TOOL_USE_TYPES, Event
from ..model.protocol import message_content, total_cost_usd
from .conversation import block_text


@dataclass(slots=True)
class TurnSummary:
    """One turn of one recording."""

    index: int
    start_t: float
    sent: list[str] = field(default_factory=list)
    received: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    result: str | None = None
    result_subtype: str | None = None
    is_error: bool = False
    cost_usd: float | None = None
    duration_s: float | None = None
    end_t: float | None = None


def turn_summaries(events: Iterable[Event]) -> list[TurnSummary]:
    """The turns of a recording (a turn starts at a host ``user`` line, ends at ``result``).

    The CLI answers prompts in order, so output and results belong to the oldest
    turn still waiting for its result (a prompt can be queued behind another).
    """
    turns: list[TurnSummary] = []
    waiting: deque[TurnSummary] = deque()
    early: list[str] = []  # what the host sent before its first prompt (initialize…)
    last_total = 0.0

    def new_turn(t: float) -> TurnSummary:
        turn = TurnSummary(len(turns), t, sent=list(early))
        early.clear()
        turns.append(turn)
        waiting.append(turn)
        return turn

    def oldest(t: float) -> TurnSummary:
        return waiting[0] if waiting else new_turn(t)

    for ev in events:
        msg = ev.message
        if msg is None:
            continue
        kind = ev.type
        if ev.direction == "in":
            if kind == "user":
                turn = new_turn(ev.t)
                text = block_text(message_content(ev))
                if text:
                    turn.sent.append(text)
            elif kind == "control_request":
                note = f"[control {ev.subtype}]"
                (waiting[-1].sent if waiting else early).append(note)
            continue
        if ev.direction != "out" or msg.get("parent_tool_use_id"):
            continue
        if kind == "assistant":
            turn = oldest(ev.t)
            content = message_content(ev)
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    turn.received.append(block["text"])
                elif block.get("type") in TOOL_USE_TYPES:
                    turn.tools.append(str(block.get("name")))
        elif kind == "result":
            turn = oldest(ev.t)
            waiting.popleft()
            turn.end_t = ev.t
            turn.result = msg.get("result") if isinstance(msg.get("result"), str) else None
            turn.result_subtype = ev.subtype
            turn.is_error = bool(msg.get("is_error"))
            total = total_cost_usd(ev)
            if total is not None:
                turn.cost_usd = max(0.0, total - last_total)
                last_total = total
            duration = msg.get("duration_ms")
            turn.duration_s = (
                duration / 1000 if isinstance(duration, (int, float)) else ev.t - turn.start_t
            )
    return turns


@dataclass(slots=True)
class TurnPair:
    """Turn ``index`` of both recordings and how they compare."""

    index: int
    a: TurnSummary | None
    b: TurnSummary | None

    @property
    def same_sent(self) -> bool:
        return self.a is not None and self.b is not None and self.a.sent == self.b.sent

    @property
    def same_received(self) -> bool:
        return (
            self.a is not None
            and self.b is not None
            and self.a.received == self.b.received
            and self.a.result == self.b.result
        )

    @property
    def same_tools(self) -> bool:
        return self.a is not None and self.b is not None and self.a.tools == self.b.tools

    @property
    def identical(self) -> bool:
        return self.same_sent and self.same_received and self.same_tools

    @property
    def cost_delta(self) -> float | None:
        return _delta(self.a.cost_usd if self.a else None, self.b.cost_usd if self.b else None)

    @property
    def duration_delta(self) -> float | None:
        return _delta(self.a.duration_s if self.a else None, self.b.duration_s if self.b else None)

    def as_dict(self) -> dict[str, Any]:
        """A row of the diff overview table."""
        return {
            "turn": self.index + 1,
            "same input": self.same_sent,
            "same output": self.same_received,
            "same tools": self.same_tools,
            "tools A": ", ".join(self.a.tools) if self.a else "—",
            "tools B": ", ".join(self.b.tools) if self.b else "—",
            "cost A ($)": self.a.cost_usd if self.a else None,
            "cost B ($)": self.b.cost_usd if self.b else None,
            "Δ cost ($)": self.cost_delta,
            "time A (s)": self.a.duration_s if self.a else None,
            "time B (s)": self.b.duration_s if self.b else None,
            "Δ time (s)": self.duration_delta,
        }


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def align(a: Sequence[TurnSummary], b: Sequence[TurnSummary]) -> list[TurnPair]:
    """Pair turns by position (a missing turn on one side is ``None``)."""
    return [
        TurnPair(i, a[i] if i < len(a) else None, b[i] if i < len(b) else None)
        for i in range(max(len(a), len(b)))
    ]


def first_divergence(pairs: Sequence[TurnPair]) -> int | None:
    """Index of the first turn that differs, or None when all are identical."""
    return next((p.index for p in pairs if not p.identical), None)
