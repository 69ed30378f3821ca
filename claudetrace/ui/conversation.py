"""The transcript as a chat: prompts, answers, thinking, tool calls and their outcomes.

:func:`build_conversation` folds a recording's events into :class:`Item` s.  Tool
calls carry their input, their result (errors flagged), the permission decisions
and hook outcomes about them, and — for a ``Task`` tool — the subagent's own
items nested under it (lines whose ``parent_tool_use_id`` names that call).
Streaming deltas are skipped (the ``assistant`` lines carry the final blocks);
lines nobody understands still appear, as ``system`` or ``error`` items.

Everything here is untrusted text from the recording: the view renders it as
plain text, never as HTML.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..model.events import TOOL_USE_TYPES, Event
from ..model.protocol import (
    control_request,
    control_response,
    hook_event_name,
    hook_permission_decision,
    message_content,
    opt_str,
    permission_behavior,
    request_tool_name,
    tool_result_failed,
)

ItemKind = Literal["user", "assistant", "thinking", "tool", "result", "system", "error", "stderr"]

#: Lines that are noise in a conversation (deltas, keep-alives).
_SKIPPED_TYPES = frozenset({"stream_event", "keep_alive"})
#: Control requests the conversation leaves to the control-plane tab.
_QUIET_CONTROL = frozenset({"initialize", "mcp_message"})


@dataclass(slots=True)
class Decision:
    """A permission decision or hook outcome about a tool call (or the session)."""

    kind: Literal["permission", "hook"]
    seq: int
    t: float
    request_id: str | None
    name: str  # the tool name (permission) or hook event name (hook)
    request: dict[str, Any]
    outcome: str = "pending"  # allow / deny / approve / block / continue / error / pending
    detail: Any = None


@dataclass(slots=True)
class ToolCall:
    """One ``tool_use`` and what became of it."""

    tool_use_id: str
    name: str
    input: Any = None
    result: str | None = None
    result_seq: int | None = None
    is_error: bool = False
    decisions: list[Decision] = field(default_factory=list)
    children: list[Item] = field(default_factory=list)

    @property
    def answered(self) -> bool:
        return self.result_seq is not None


@dataclass(slots=True)
class Item:
    """One entry of the conversation."""

    kind: ItemKind
    seq: int
    t: float
    text: str = ""
    is_error: bool = False
    tool: ToolCall | None = None
    decision: Decision | None = None
    data: dict[str, Any] = field(default_factory=dict)


def block_text(content: Any) -> str:
    """The text of a message or tool result ``content`` (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else json.dumps(content, ensure_ascii=False)
    parts: list[str] = []
    for block in content:
        if isinstance(block, dict):
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            else:
                parts.append(f"[{block.get('type', 'block')}]")
        else:
            parts.append(str(block))
    return "\n".join(parts)


def decision_outcome(kind: str, response: Any) -> str:
    """What a permission / hook response decided, in one word."""
    if not isinstance(response, dict):
        return "error"
    if kind == "permission":
        return permission_behavior(response) or "answered"
    decision = hook_permission_decision(response)
    if decision is not None:
        return decision
    if isinstance(response.get("decision"), str):
        return str(response["decision"])
    if response.get("continue") is False:
        return "stop"
    return "continue"


class _Builder:
    def __init__(self) -> None:
        self.items: list[Item] = []
        self.tools: dict[str, ToolCall] = {}
        self.pending: dict[str, Decision] = {}
        # Answers recorded before their request (stdin and stdout are read by
        # separate threads, so a fast answer can win the race to the recorder).
        self.early: dict[str, Event] = {}

    def target(self, lane: str | None) -> list[Item]:
        # Subagent lines nest under the tool call that started the subagent.
        parent = self.tools.get(lane) if lane else None
        return parent.children if parent is not None else self.items

    def tool(self, tool_use_id: str, name: str | None) -> ToolCall:
        call = self.tools.get(tool_use_id)
        if call is None:
            call = self.tools[tool_use_id] = ToolCall(tool_use_id, name or "?")
        elif name and call.name == "?":
            call.name = name
        return call

    def add(self, ev: Event, kind: ItemKind, text: str = "", **kw: Any) -> Item:
        item = Item(kind, ev.seq, ev.t, text, **kw)
        self.target(ev.fields.parent_tool_use_id).append(item)
        return item

    def feed(self, ev: Event) -> None:
        if ev.direction == "err":
            self.add(ev, "stderr", ev.text, is_error=True)
            return
        msg = ev.message
        if msg is None:
            what = "empty line" if not ev.data else f"unparsable line ({len(ev.data)} bytes)"
            self.add(ev, "error", f"{what}: {ev.text[:2000]}" if ev.data else what, is_error=True)
            return
        kind = ev.type
        if kind in _SKIPPED_TYPES:
            return
        if kind == "user":
            self.user(ev, msg)
        elif kind == "assistant":
            self.assistant(ev, msg)
        elif kind == "result":
            self.result(ev, msg)
        elif kind == "control_request":
            self.control_request(ev, msg)
        elif kind == "control_response":
            self.control_response(ev, msg)
        elif kind == "system":
            self.system(ev, msg)
        elif kind != "control_cancel_request":
            self.add(ev, "system", f"{kind}: {_compact(msg)}", data=msg)

    def user(self, ev: Event, msg: dict[str, Any]) -> None:
        content = message_content(ev)
        blocks = (
            content
            if isinstance(content, list)
            else [{"type": "text", "text": block_text(content)}]
        )
        texts: list[str] = []
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                tid = opt_str(block.get("tool_use_id"))
                if tid:
                    unseen = tid not in self.tools
                    call = self.tool(tid, None)
                    call.result = block_text(block.get("content"))
                    call.result_seq = ev.seq
                    call.is_error = tool_result_failed(block)
                    if unseen:
                        # A result whose tool_use is outside the window shown.
                        self.add(ev, "tool", call.name, tool=call)
                continue
            texts.append(block_text([block]))
        text = "\n".join(t for t in texts if t)
        if not text:
            return
        if ev.direction == "in" or ev.fields.parent_tool_use_id:
            # The host's prompt, or the prompt the CLI gives a subagent.
            self.add(ev, "user", text)
        else:
            # The CLI's own user lines (command output after set_model, replays).
            self.add(ev, "system", text, data={"role": "user"})

    def assistant(self, ev: Event, msg: dict[str, Any]) -> None:
        content = message_content(ev)
        if isinstance(msg.get("error"), str):
            self.add(ev, "error", f"assistant error: {msg['error']}", is_error=True)
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text":
                self.add(ev, "assistant", str(block.get("text", "")))
            elif btype in ("thinking", "redacted_thinking"):
                self.add(ev, "thinking", str(block.get("thinking", "[redacted]")))
            elif btype in TOOL_USE_TYPES:
                tid = opt_str(block.get("id")) or f"seq{ev.seq}"
                call = self.tool(tid, opt_str(block.get("name")))
                call.input = block.get("input")
                self.add(ev, "tool", call.name, tool=call)
            else:
                self.add(ev, "system", f"[{btype}] {_compact(block)}", data=block)

    def result(self, ev: Event, msg: dict[str, Any]) -> None:
        is_error = bool(msg.get("is_error")) or str(msg.get("subtype", "")).startswith("error")
        text = opt_str(msg.get("result")) or ""
        errors = msg.get("errors")
        if not text and isinstance(errors, list):
            text = "\n".join(str(e) for e in errors)
        data = {
            k: msg[k]
            for k in (
                "subtype",
                "num_turns",
                "duration_ms",
                "duration_api_ms",
                "total_cost_usd",
                "usage",
            )
            if k in msg
        }
        self.add(ev, "result", text, is_error=is_error, data=data)

    def control_request(self, ev: Event, msg: dict[str, Any]) -> None:
        req = control_request(ev)
        subtype = ev.subtype or "?"
        rid = ev.request_id
        if subtype in ("can_use_tool", "hook_callback"):
            kind: Literal["permission", "hook"] = (
                "permission" if subtype == "can_use_tool" else "hook"
            )
            name = opt_str(req.get("tool_name")) if kind == "permission" else hook_event_name(req)
            decision = Decision(kind, ev.seq, ev.t, rid, name or subtype, req)
            if rid:
                self.pending[rid] = decision
                answer = self.early.pop(rid, None)
                if answer is not None:
                    self.control_response(answer, answer.message or {})
            tid = opt_str(req.get("tool_use_id"))
            if tid:
                self.tool(tid, request_tool_name(req)).decisions.append(decision)
            else:
                self.add(ev, "system", f"{kind} {decision.name}", decision=decision)
        elif subtype not in _QUIET_CONTROL:
            who = "host" if ev.direction == "in" else "CLI"
            detail = {k: v for k, v in req.items() if k != "subtype"}
            self.add(
                ev,
                "system",
                f"{who} control request {subtype} {_compact(detail)}".rstrip(),
                data=req,
            )

    def control_response(self, ev: Event, msg: dict[str, Any]) -> None:
        rid = ev.request_id
        decision = self.pending.pop(rid, None) if rid else None
        if decision is None:
            if rid:
                self.early[rid] = ev
            return
        resp = control_response(ev)
        if ev.subtype == "error":
            decision.outcome = "error"
            decision.detail = resp.get("error")
        else:
            body = resp.get("response")
            decision.outcome = decision_outcome(decision.kind, body)
            decision.detail = body

    def system(self, ev: Event, msg: dict[str, Any]) -> None:
        subtype = ev.subtype or "?"
        rest = {k: v for k, v in msg.items() if k not in ("type", "subtype", "uuid", "session_id")}
        if subtype == "init":
            text = (
                f"session started · model {msg.get('model')} · CLI {msg.get('claude_code_version')}"
            )
            self.add(ev, "system", text, data=rest)
        elif subtype == "api_error" or "error" in subtype:
            self.add(ev, "error", f"{subtype}: {_compact(rest)}", is_error=True, data=rest)
        else:
            self.add(ev, "system", f"{subtype}: {_compact(rest)}", data=rest)


def _compact(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def build_conversation(events: Iterable[Event]) -> list[Item]:
    """The conversation of an event stream (subagent items nested under their tool call)."""
    builder = _Builder()
    for ev in events:
        builder.feed(ev)
    return builder.items


def walk(items: Iterable[Item], depth: int = 0) -> Iterable[tuple[int, Item]]:
    """Every item with its nesting depth (subagent items follow their tool call)."""
    for item in items:
        yield depth, item
        if item.tool is not None:
            yield from walk(item.tool.children, depth + 1)
