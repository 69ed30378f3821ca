"""The control plane: every control request paired with its response.

Control requests flow both ways: the host asks the CLI (``initialize``,
``interrupt``, ``set_model`` …) and the CLI asks the host (``can_use_tool``,
``hook_callback``, ``mcp_message``).  :func:`control_rows` pairs each request
with the response carrying its ``request_id`` (or a ``control_cancel_request``)
and reports latency and outcome; requests never answered are flagged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..events import Event
from ..protocol import control_request, control_response, hook_input
from .conversation import decision_outcome


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


def _request_detail(subtype: str, req: dict[str, Any]) -> str:
    if subtype == "can_use_tool":
        return str(req.get("tool_name", ""))
    if subtype == "hook_callback":
        given = hook_input(req)
        return " ".join(str(given.get(k, "")) for k in ("hook_event_name", "tool_name")).strip()
    if subtype == "mcp_message":
        message = req.get("message")
        method = message.get("method") if isinstance(message, dict) else None
        return f"{req.get('server_name', '')} {method or ''}".strip()
    if subtype == "set_model":
        return str(req.get("model", ""))
    if subtype == "set_permission_mode":
        return str(req.get("mode", ""))
    return ""


def _response_detail(subtype: str, resp: dict[str, Any]) -> str:
    if resp.get("subtype") == "error":
        return str(resp.get("error", ""))[:200]
    body = resp.get("response")
    if subtype == "can_use_tool":
        return decision_outcome("permission", body)
    if subtype == "hook_callback":
        return decision_outcome("hook", body)
    if subtype == "mcp_message" and isinstance(body, dict):
        mcp = body.get("mcp_response")
        if isinstance(mcp, dict) and "error" in mcp:
            return f"JSON-RPC error {mcp['error']}"[:200]
    return ""


def control_rows(events: Iterable[Event]) -> list[ControlRow]:
    """Control round trips in request order; orphan responses are listed too.

    The proxy reads stdin and stdout on separate threads, so an answer can be
    recorded just before its request; such a pair is matched with zero latency.
    """
    rows: list[ControlRow] = []
    open_: dict[str, ControlRow] = {}
    early: dict[str, tuple[Event, ControlRow]] = {}
    for ev in events:
        kind = ev.type
        if kind not in ("control_request", "control_response", "control_cancel_request"):
            continue
        rid = ev.request_id
        if kind == "control_request":
            req = control_request(ev)
            subtype = ev.subtype or "?"
            initiator = "host" if ev.direction == "in" else "cli"
            detail = _request_detail(subtype, req)
            answered = early.pop(rid, None) if rid else None
            if answered is not None:
                response, row = answered
                row.subtype, row.initiator, row.request_seq, row.detail = (
                    subtype,
                    initiator,
                    ev.seq,
                    detail,
                )
                _answer(row, response)
                row.latency_ms = 0.0
                continue
            row = ControlRow(rid, subtype, initiator, ev.seq, ev.t, detail=detail)
            rows.append(row)
            if rid:
                open_[rid] = row
            continue
        pending = open_.pop(rid, None) if rid else None
        if pending is not None:
            _answer(pending, ev)
        elif kind == "control_response":
            # A response to a request not (yet) seen: reordered, or truly orphan.
            orphan = ControlRow(
                rid,
                "?",
                "cli" if ev.direction == "in" else "host",
                None,
                ev.t,
                response_seq=ev.seq,
                outcome="orphan response",
            )
            rows.append(orphan)
            if rid:
                early[rid] = (ev, orphan)
    return rows


def _answer(row: ControlRow, ev: Event) -> None:
    row.response_seq = ev.seq
    row.latency_ms = (ev.t - (row.t or 0.0)) * 1000
    if ev.type == "control_cancel_request":
        row.outcome = "cancelled"
        return
    resp = control_response(ev)
    row.outcome = ev.subtype or "answered"
    answer = _response_detail(row.subtype, resp)
    row.detail = f"{row.detail} → {answer}" if row.detail and answer else row.detail or answer
