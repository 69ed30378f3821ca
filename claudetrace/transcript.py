"""A readable transcript of a recording: who said what, in order.

Pure functions from events to :class:`Entry` items, used by ``claudetrace show``
(and reusable by any other view).  Streaming deltas are folded away (the final
``assistant`` message carries the text), control requests are paired with their
responses, and anything unknown is still listed, never dropped.

:func:`iter_entries` reads the events as it goes: a view of a recording of any
size starts at once and holds one event at a time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, Final, NamedTuple

from .model.content import message_blocks
from .model.events import Event

#: Types whose lines are summarised elsewhere (deltas) or pure noise in a transcript.
FOLDED: Final = frozenset({"stream_event", "keep_alive"})


class Entry(NamedTuple):
    """One transcript line: ``role`` is user/assistant/tool/result/control/system/stderr/raw."""

    seq: int
    t: float
    direction: str
    role: str
    text: str
    is_error: bool = False


#: ``json.dumps(value, ensure_ascii=False)``, with one encoder for every call.  The
#: values are parsed JSON, which cannot refer to itself: no check for cycles.
_dumps: Final = json.JSONEncoder(ensure_ascii=False, check_circular=False).encode


def _short(value: Any, limit: int) -> str:
    """``value`` on one line (runs of white space made one space), cut to ``limit``."""
    if isinstance(value, str):
        text = value
    else:
        text = _dumps(value)
        # The encoder escapes every control character and puts one space after
        # a separator: ASCII output without two spaces in a row has no white
        # space to collapse (the common case, e.g. every streaming delta).
        if text.isascii() and "  " not in text:
            return _cut(text, limit)
    if len(text) > 4 * limit + 8:
        # Collapsing a prefix gives a prefix of the whole collapsed text; when it
        # is already too long, the rest of a long text need not be looked at.
        head = " ".join(text[: 4 * limit].split())
        if len(head) > limit:
            return _cut(head, limit)
    return _cut(" ".join(text.split()), limit)


def _cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the last an ellipsis when it was longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def entries(
    events: Iterable[Event], *, width: int = 300, include_deltas: bool = False
) -> list[Entry]:
    """The transcript of an event stream."""
    return list(iter_entries(events, width=width, include_deltas=include_deltas))


def iter_entries(
    events: Iterable[Event], *, width: int = 300, include_deltas: bool = False
) -> Iterator[Entry]:
    """The transcript of an event stream, entry by entry as the events are read."""
    out: list[Entry] = []

    def add(ev: Event, role: str, text: str, is_error: bool = False) -> None:
        out.append(Entry(ev.seq, ev.t_ns / 1e9, ev.direction, role, text, is_error))

    for ev in events:
        if out:
            yield from out
            out.clear()
        if ev.direction == "err":
            add(ev, "stderr", _short(ev.text, width))
            continue
        msg = ev.message
        if msg is None:
            label = "empty line" if not ev.data else f"unparsable line ({len(ev.data)} bytes)"
            add(ev, "raw", f"{label}: {_short(ev.text, width)}" if ev.data else label, True)
            continue
        # The line's own type (what ``ev.type`` says, without extracting every field).
        kind = msg.get("type")
        if not isinstance(kind, str):
            kind = None
        if kind in FOLDED and not include_deltas:
            continue
        if kind in ("user", "assistant"):
            _message_entries(ev, msg, add, width)
        elif kind == "result":
            cost = msg.get("total_cost_usd")
            bits = [str(msg.get("subtype", ""))]
            if isinstance(msg.get("num_turns"), int):
                bits.append(f"{msg['num_turns']} turns")
            if isinstance(msg.get("duration_ms"), (int, float)):
                bits.append(f"{msg['duration_ms'] / 1000:.2f}s")
            if isinstance(cost, (int, float)):
                bits.append(f"${cost:.6f}")
            text = msg.get("result")
            if isinstance(text, str) and text:
                bits.append(_short(text, width))
            add(ev, "result", " · ".join(b for b in bits if b), bool(msg.get("is_error")))
        elif kind == "control_request":
            req = msg.get("request") or {}
            detail = (
                {k: v for k, v in req.items() if k != "subtype"} if isinstance(req, dict) else req
            )
            who = "host → cli" if ev.direction == "in" else "cli → host"
            add(ev, "control", f"{who} {ev.subtype} [{ev.request_id}] {_short(detail, width)}")
        elif kind == "control_response":
            resp = msg.get("response") or {}
            body = resp.get("response", resp.get("error")) if isinstance(resp, dict) else resp
            add(
                ev,
                "control",
                f"↳ {ev.subtype} [{ev.request_id}] {_short(body, width)}",
                ev.subtype == "error",
            )
        elif kind == "control_cancel_request":
            add(ev, "control", f"cancel [{ev.request_id}]")
        elif kind == "system":
            rest = {
                k: v for k, v in msg.items() if k not in ("type", "subtype", "uuid", "session_id")
            }
            sub = msg.get("subtype")
            add(ev, "system", f"{sub if isinstance(sub, str) else None}: {_short(rest, width)}")
        else:
            add(ev, "system", f"{kind}: {_short(msg, width)}")
    yield from out


def _message_entries(ev: Event, msg: dict[str, Any], add: Any, width: int) -> None:
    role = str(msg.get("type"))
    sub = " (subagent)" if ev.fields.parent_tool_use_id else ""
    for block in message_blocks(ev):
        if block.kind == "text":
            add(ev, role + sub, _short(block.text, width))
        elif block.kind == "thinking":
            add(ev, role + sub, f"(thinking) {_short(block.text, width)}")
        elif block.kind == "tool_use":
            add(ev, "tool" + sub, f"→ {block.name} {_short(block.input or {}, width)}")
        elif block.kind == "tool_result":
            add(ev, "tool" + sub, f"← {_short(block.text, width)}", block.is_error)
        else:
            add(ev, role + sub, f"{block.label} {_short(block.raw, width)}")
