"""Two recordings side by side, aligned turn by turn.

:func:`turn_summaries` cuts a recording into turns — what the host sent (the
prompt and any control requests), what came back (assistant text and the final
result), the tools used, the turn's cost and duration — and :func:`align`
pairs the turns of two recordings and says where they first differ.  This is
the view to open when a replay diverged from its recording.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..model import Session
from ..model.content import content_text, message_blocks, message_content
from ..model.events import Event
from ..model.protocol import message_id, result_text
from .present import cost_cell, duration_s, money, signed, trace_tree


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


def turn_summaries(events: Iterable[Event], session: Session | None = None, *,
                   status: str = "ok", end_ns: int | None = None,
                   elsewhere: Collection[str] = ()) -> list[TurnSummary]:
    """The turns of a recording, as the session model cuts them (a user message to
    its result), with what the host sent and what the main agent answered.

    What the host sent before its first prompt (``initialize``…) counts as sent
    in the first turn.  ``session`` is the recording's session model (as the
    session page folds it; else ``events`` are folded): each turn's cost and
    duration are its node's in the span tree (:func:`~.present.trace_tree`, with
    the recording's ``status``, ``end_ns`` and calls counted ``elsewhere``), the
    figures the session page says beside its prompt: a turn still under way, or
    one whose result named no cost, costs what its calls so far cost.
    """
    events = list(events)
    if session is None:
        session = Session()
        session.add_many(events)
    turns = [TurnSummary(t.number - 1, t.start_ns / 1e9) for t in session.turns]
    if not turns:
        return []
    starts = {t.start_seq: turns[t.number - 1] for t in session.turns if not t.implicit}
    ends = {t.end_seq: t for t in session.turns if t.end_seq is not None}
    host_controls = {c.request_seq: c for c in session.controls if c.initiator == "host"}
    for ev in events:
        if ev.direction == "in":
            if ev.seq in starts:
                text = content_text(message_content(ev))
                if text:
                    starts[ev.seq].sent.append(text)
            elif ev.seq in host_controls:
                trip = host_controls[ev.seq]
                turn = turns[trip.turn - 1] if trip.turn else next(
                    (t for t, m in zip(turns, session.turns, strict=True)
                     if m.start_seq > ev.seq), turns[-1])
                turn.sent.append(f"[control {trip.subtype}]")
        elif ev.direction == "out" and ev.fields.type == "assistant" and (
                ev.fields.parent_tool_use_id is None):
            call = session.calls.get(message_id(ev) or f"seq{ev.seq}")
            if call is not None:
                turns[call.turn - 1].received += [
                    b.text for b in message_blocks(ev) if b.kind == "text"]
        elif ev.seq in ends:
            turn, model_turn = turns[ends[ev.seq].number - 1], ends[ev.seq]
            turn.end_t = ev.t
            turn.result = result_text(ev) or None
            turn.result_subtype = model_turn.result_subtype
            turn.is_error = model_turn.is_error
    for tool in session.tools.values():
        if tool.lane is None and 0 < tool.turn <= len(turns):
            turns[tool.turn - 1].tools.append(tool.name)
    tree = trace_tree(session, end_ns=end_ns, status=status, elsewhere=elsewhere)
    for node in tree.children:
        if node.kind == "turn" and node.ref.startswith("turn:"):
            turn = turns[int(node.ref.removeprefix("turn:")) - 1]
            turn.cost_usd = node.cost_usd
            if (took := node.duration_ns) is not None:
                turn.duration_s = took / 1e9
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
            # As every view says a cost and a time (never None, an unknown cost
            # never $0): a difference only where both sides have an amount.
            "cost A": _cost(self.a),
            "cost B": _cost(self.b),
            "Δ cost": signed(self.cost_delta, money) if self.a and self.b else "—",
            "time A": duration_s(self.a.duration_s) if self.a else "—",
            "time B": duration_s(self.b.duration_s) if self.b else "—",
            "Δ time": signed(self.duration_delta, duration_s) if self.a and self.b else "—",
        }


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def _cost(turn: TurnSummary | None) -> str:
    """A turn's cost as a table cell says it: ``—`` for no turn, ``unknown`` for a
    turn whose result named no cost."""
    return "—" if turn is None else cost_cell(turn.cost_usd, calls=True)


def align(a: Sequence[TurnSummary], b: Sequence[TurnSummary]) -> list[TurnPair]:
    """Pair turns by position (a missing turn on one side is ``None``)."""
    return [
        TurnPair(i, a[i] if i < len(a) else None, b[i] if i < len(b) else None)
        for i in range(max(len(a), len(b)))
    ]


def first_divergence(pairs: Sequence[TurnPair]) -> int | None:
    """Index of the first turn that differs, or None when all are identical."""
    return next((p.index for p in pairs if not p.identical), None)
