"""The control plane: every control request paired with its response.

Control requests flow both ways: the host asks the CLI (``initialize``,
``interrupt``, ``set_model`` …) and the CLI asks the host (``can_use_tool``,
``hook_callback``, ``mcp_message``).  :func:`control_rows` lists the session
model's round trips (:mod:`claudetrace.model`) with latency and outcome;
requests never answered are flagged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..model import ControlRoundTrip, Session
from ..model.events import Event


@dataclass(slots=True)
class ControlRow:
    """One control round trip (or an unanswered / orphan half of one)."""

    request_id: str | None
    subtype: str
    initiator: str  # "host" or "cli"
    request_seq: int | None
    t: float | None
    response_seq: int | None = None
    latency_ms: float | None = None
    outcome: str = "unanswered"  # success / error / cancelled / unanswered / orphan response
    detail: str = ""

    @property
    def unanswered(self) -> bool:
        return self.outcome == "unanswered"

    def as_dict(self) -> dict[str, Any]:
        """A table row."""
        return {
            "seq": self.request_seq if self.request_seq is not None else self.response_seq,
            "t (s)": None if self.t is None else round(self.t, 3),
            "initiator": self.initiator,
            "subtype": self.subtype,
            "request_id": self.request_id,
            "latency (ms)": None if self.latency_ms is None else round(self.latency_ms, 1),
            "outcome": self.outcome,
            "detail": self.detail,
            "unanswered": self.unanswered,
        }


def _request_detail(trip: ControlRoundTrip) -> str:
    if trip.kind == "permission":
        return trip.tool_name or ""
    if trip.kind == "hook":
        return " ".join(x for x in (trip.hook_event, trip.tool_name) if x)
    if trip.kind == "mcp":
        return f"{trip.mcp_server or ''} {trip.mcp_method or ''}".strip()
    return trip.model or trip.mode or ""


def _response_detail(trip: ControlRoundTrip) -> str:
    if trip.outcome == "error" and trip.kind != "mcp":
        return (trip.error or "")[:200]
    if trip.kind in ("permission", "hook"):
        return trip.verdict
    if trip.kind == "mcp" and trip.error:
        return f"JSON-RPC error {trip.error}"[:200]
    return ""


def control_rows(events: Iterable[Event]) -> list[ControlRow]:
    """Control round trips in request order (the session model's pairing); answers
    to requests never seen are listed too, as orphan responses.

    The proxy reads stdin and stdout on separate threads, so an answer can be
    recorded just before its request; such a pair has zero latency.
    """
    session = Session()
    session.add_many(events)
    return session_control_rows(session)


def session_control_rows(session: Session) -> list[ControlRow]:
    """:func:`control_rows` of a session already folded."""
    rows: list[ControlRow] = []
    for trip in session.controls:
        row = ControlRow(trip.request_id, trip.subtype, trip.initiator, trip.request_seq,
                         trip.request_ns / 1e9, detail=_request_detail(trip))
        if trip.answered:
            row.response_seq = trip.response_seq
            duration = trip.duration_ns or 0
            row.latency_ms = duration / 1e6
            row.outcome = trip.outcome
            answer = _response_detail(trip)
            row.detail = f"{row.detail} → {answer}" if row.detail and answer else (
                row.detail or answer)
        rows.append(row)
    for orphan in session.orphan_answers:
        rows.append(ControlRow(orphan.request_id, "?",
                               "cli" if orphan.direction == "in" else "host", None, orphan.t,
                               response_seq=orphan.seq, outcome="orphan response"))
    return rows
