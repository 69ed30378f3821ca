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
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, NamedTuple

import msgspec

from .display import plural
from .model.content import message_blocks
from .model.events import Event, may_nest_too_deep

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


class _Float(Exception):
    """A float in a line :func:`_float_free_object` reads."""


def _refuse_float(text: str) -> float:
    raise _Float(text)


#: msgspec's parse of a JSON text, which stops at its first float (NaN and
#: Infinity are no JSON to it, and fail anyway).
_fast_decode: Final = msgspec.json.Decoder(float_hook=_refuse_float).decode
_fast_encode: Final = msgspec.json.Encoder().encode
_format: Final = msgspec.json.format


def _float_free_object(data: bytes) -> dict[str, Any] | None:
    """The line's JSON object, as :func:`~claudetrace.model.events.parse_json`
    reads it, when msgspec's parse (several times faster) is known to give the
    same; ``None`` when the line is not shown to be such an object.

    msgspec and ``json.loads`` take and refuse the same texts and read them to
    the same values (duplicate keys too: the last value, in the first key's
    place; escaped surrogate pairs as their character) but for what is left out
    here: a line that does not start with ``{`` (a byte order mark, white space,
    no object), holds a float (whose spelling the two encoders differ on), or
    may nest deeper than parse_json takes.  A lone surrogate, escaped or not,
    which parse_json reads and then writes as text, msgspec refuses.  Tests hold
    the two paths to the same output.
    """
    if not data.startswith(b"{"):
        return None
    if may_nest_too_deep(data):
        return None
    try:
        value = _fast_decode(data)
    except (ValueError, _Float):  # msgspec.DecodeError, UnicodeDecodeError
        return None
    return value if isinstance(value, dict) else None


def _fast_dumps(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False)`` of a part of a value
    :func:`_float_free_object` gave (no float, no lone surrogate): msgspec's
    compact JSON with ``json.dumps``'s separators (``, `` and ``: ``), the same
    escapes (``\\"``, ``\\\\``, ``\\n``… and ``\\u00XX`` for other control characters,
    nothing else) and integers of any size alike."""
    return _format(_fast_encode(value), indent=0).decode()


def _short(value: Any, limit: int, dumps: Callable[[Any], str] = _dumps) -> str:
    """``value`` on one line (runs of white space made one space), cut to ``limit``;
    ``dumps`` writes a value that is not a string as ``json.dumps`` does."""
    if isinstance(value, str):
        text = value
    else:
        text = dumps(value)
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
    for ev in events:
        seq, t, direction = ev.seq, ev.t_ns / 1e9, ev.direction
        if direction == "err":
            yield Entry(seq, t, direction, "stderr", _short(ev.text, width))
            continue
        msg = _float_free_object(ev.data)
        dumps: Callable[[Any], str] = _dumps
        if msg is None:
            msg = ev.message
        else:
            dumps = _fast_dumps
        if msg is None:
            label = "empty line" if not ev.data else f"unparsable line ({len(ev.data)} bytes)"
            text = f"{label}: {_short(ev.text, width)}" if ev.data else label
            yield Entry(seq, t, direction, "raw", text, True)
            continue
        # The line's own type (what ``ev.type`` says, without extracting every field).
        kind = msg.get("type")
        if not isinstance(kind, str):
            kind = None
        if kind in FOLDED and not include_deltas:
            continue
        if kind in ("user", "assistant"):
            for role, text, is_error in _message_entries(ev, msg, width):
                yield Entry(seq, t, direction, role, text, is_error)
        elif kind == "result":
            cost = msg.get("total_cost_usd")
            bits = [str(msg.get("subtype", ""))]
            if isinstance(msg.get("num_turns"), int):
                # The CLI's num_turns counts API round trips, not prompts (show's
                # header names them so): "1 turns" under "1 turn" read as a contradiction.
                trips = msg["num_turns"]
                bits.append(f"{trips} API round trip" + ("" if trips == 1 else "s"))
            if isinstance(msg.get("duration_ms"), (int, float)):
                bits.append(f"{msg['duration_ms'] / 1000:.2f}s")
            if isinstance(cost, (int, float)):
                bits.append(f"${cost:.6f}")
            result = msg.get("result")
            if isinstance(result, str) and result:
                bits.append(_short(result, width))
            yield Entry(seq, t, direction, "result", " · ".join(b for b in bits if b),
                        bool(msg.get("is_error")))
        elif kind == "control_request":
            req = msg.get("request") or {}
            detail = (
                {k: v for k, v in req.items() if k != "subtype"} if isinstance(req, dict) else req
            )
            who = "host → cli" if direction == "in" else "cli → host"
            yield Entry(seq, t, direction, "control",
                        f"{who} {ev.subtype} [{ev.request_id}] {_short(detail, width, dumps)}")
        elif kind == "control_response":
            resp = msg.get("response") or {}
            body = resp.get("response", resp.get("error")) if isinstance(resp, dict) else resp
            yield Entry(
                seq, t, direction, "control",
                f"↳ {ev.subtype} [{ev.request_id}] {_short(body, width, dumps)}",
                ev.subtype == "error",
            )
        elif kind == "control_cancel_request":
            yield Entry(seq, t, direction, "control", f"cancel [{ev.request_id}]")
        elif kind == "system":
            rest = {
                k: v for k, v in msg.items() if k not in ("type", "subtype", "uuid", "session_id")
            }
            sub = msg.get("subtype")
            said = marker_text(msg)
            yield Entry(seq, t, direction, "system", said if said is not None else
                        f"{sub if isinstance(sub, str) else None}: {_short(rest, width, dumps)}")
        else:
            yield Entry(seq, t, direction, "system", f"{kind}: {_short(msg, width, dumps)}")


def marker_text(msg: dict[str, Any]) -> str | None:
    """A conversation marker (a ``system`` line: compaction, rewind) said in words,
    else None."""
    sub = msg.get("subtype")
    if sub == "compact_boundary":
        meta = msg.get("compactMetadata")
        meta = meta if isinstance(meta, dict) else {}
        bits = [str(meta["trigger"])] if isinstance(meta.get("trigger"), str) else []
        if isinstance(meta.get("preTokens"), int):
            bits.append(f"{meta['preTokens']} tokens before")
        return "compaction" + (f" ({', '.join(bits)})" if bits else "") + (
            ": the conversation goes on from its summary")
    if sub == "rewind":
        gone = msg.get("abandoned_prompts")
        count = len(gone) if isinstance(gone, list) else 0
        what = "the last prompt" if count == 1 else f"the last {count} prompts"
        return (f"rewind: {what} and what answered are an abandoned branch; the "
                "conversation goes on from before")
    if sub == "resume":
        from .store.links import is_fork

        copied = msg.get("copied_entries")
        count = copied if isinstance(copied, int) else 0
        said = plural(count, "earlier entry", "earlier entries")
        sid = msg.get("resumed_as")
        same = sid == msg.get("session_id")  # resumed under its own id
        who = f" as session {sid}" if isinstance(sid, str) and not same else ""
        how = "forked" if who and is_fork(msg.get("version")) else "resumed"
        return (f"{how}{who}: the conversation goes on (its file repeats {said}, "
                "shown once above)")
    if sub == "summary":
        text = msg.get("summary")
        return f"summary: {text}" if isinstance(text, str) else "summary"
    return None


def line_label(msg: dict[str, Any]) -> str | None:
    """What an imported transcript's user or assistant line is, when it is no
    prompt or answer (``steering``, ``compact summary``, ``API error`` …)."""
    kind = msg.get("claudetrace_kind")
    if isinstance(kind, str):
        return kind.replace("_", " ")
    return "API error" if msg.get("isApiErrorMessage") is True else None


def _message_entries(
    ev: Event, msg: dict[str, Any], width: int
) -> Iterator[tuple[str, str, bool]]:
    """A user or assistant message's entries: role, text and whether it is an error."""
    role = str(msg.get("type"))
    sub = " (subagent)" if ev.fields.parent_tool_use_id else ""
    label = line_label(msg)
    if label:
        sub += f" ({label})"
    for block in message_blocks(ev):
        if block.kind == "text":
            yield role + sub, _short(block.text, width), False
        elif block.kind == "thinking":
            yield role + sub, f"(thinking) {_short(block.text, width)}", False
        elif block.kind == "tool_use":
            yield "tool" + sub, f"→ {block.name} {_short(block.input or {}, width)}", False
        elif block.kind == "tool_result":
            yield "tool" + sub, f"← {_short(block.text, width)}", block.is_error
        else:
            yield role + sub, f"{block.label} {_short(block.raw, width)}", False
