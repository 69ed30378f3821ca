"""What of a message's content may go on spans, and how it is shortened.

Prompts, model output and tool inputs/outputs can be sensitive, so they are put
on spans only when the user opts in (``--otel-content`` or
``CLAUDETRACE_OTEL_CAPTURE_CONTENT=true``), each value cut to
``CLAUDETRACE_OTEL_CONTENT_LIMIT`` characters (default 4096).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..model.events import TOOL_USE_TYPES
from .records import Attributes

CAPTURE_ENV: Final = "CLAUDETRACE_OTEL_CAPTURE_CONTENT"
LIMIT_ENV: Final = "CLAUDETRACE_OTEL_CONTENT_LIMIT"
DEFAULT_LIMIT: Final = 4096
#: Span events keep short scalar fields of system messages, never long ones.
EVENT_FIELD_LIMIT: Final = 256
_EVENT_FIELDS_MAX: Final = 24
_SKIP_FIELDS: Final = frozenset({"type", "subtype", "uuid", "session_id"})

_TRUE: Final = frozenset({"1", "true", "yes", "on"})


@dataclass(frozen=True, slots=True)
class ContentPolicy:
    """Whether content is captured, and the most characters kept per value."""

    enabled: bool = False
    limit: int = DEFAULT_LIMIT

    @classmethod
    def from_env(cls, environ: Mapping[str, str], enabled: bool | None = None) -> ContentPolicy:
        """The policy from ``CLAUDETRACE_OTEL_*`` variables; ``enabled`` overrides."""
        if enabled is None:
            enabled = environ.get(CAPTURE_ENV, "").strip().lower() in _TRUE
        try:
            limit = int(environ.get(LIMIT_ENV, "") or DEFAULT_LIMIT)
        except ValueError:
            limit = DEFAULT_LIMIT
        return cls(enabled=enabled, limit=max(16, limit))

    def clip(self, text: str) -> str:
        """``text`` cut to the limit, marked with an ellipsis when cut."""
        if len(text) <= self.limit:
            return text
        return text[: self.limit - 1] + "…"


def jsonish(value: Any) -> str:
    """Compact JSON of a value (strings stay as they are)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def block_text(content: Any) -> str:
    """The text of a tool_result's ``content`` (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            else:
                parts.append(jsonish(block))
        return "\n".join(parts)
    return "" if content is None else jsonish(content)


def _parts(content: Any, clip: Callable[[str], str]) -> list[dict[str, Any]]:
    """Content blocks as GenAI message parts (text, reasoning, tool_call,
    tool_call_response), each text cut by ``clip`` (the JSON stays whole)."""
    if isinstance(content, str):
        return [{"type": "text", "content": clip(content)}]
    parts: list[dict[str, Any]] = []
    if not isinstance(content, list):
        return parts
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "content": clip(str(block.get("text", "")))})
        elif kind == "thinking":
            parts.append({"type": "reasoning", "content": clip(str(block.get("thinking", "")))})
        elif kind in TOOL_USE_TYPES:
            part: dict[str, Any] = {"type": "tool_call", "id": block.get("id"),
                                    "name": str(block.get("name"))}
            arguments = block.get("input")
            if arguments is not None:
                text = jsonish(arguments)
                part["arguments"] = arguments if len(text) <= len(clip(text)) else clip(text)
            parts.append(part)
        elif kind == "tool_result":
            parts.append({"type": "tool_call_response", "id": block.get("tool_use_id"),
                          "response": clip(block_text(block.get("content")))})
        else:
            parts.append({"type": str(kind)})
    return parts


#: Anthropic's ``stop_reason`` as a GenAI ``finish_reason``.
FINISH_REASONS: Final = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                         "tool_use": "tool_call", "refusal": "content_filter"}


def finish_reason(stop_reason: str | None, parts: list[dict[str, Any]]) -> str:
    """The GenAI ``finish_reason`` of a model call: from its ``stop_reason``, else from its
    content (a call that ends in a tool call stopped for it), else ``stop``."""
    if stop_reason:
        return FINISH_REASONS.get(stop_reason, stop_reason)
    if parts and parts[-1].get("type") == "tool_call":
        return "tool_call"
    return "stop"


def user_input(line: Mapping[str, Any] | None, policy: ContentPolicy) -> str:
    """``gen_ai.input.messages`` JSON for a host's user line."""
    message = (line or {}).get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return jsonish([{"role": "user", "parts": _parts(content, policy.clip)}])


def message_parts(message: Mapping[str, Any], policy: ContentPolicy) -> list[dict[str, Any]]:
    """The GenAI parts of one assistant line's message."""
    return _parts(message.get("content"), policy.clip)


def output_messages(parts: list[dict[str, Any]], reason: str) -> str:
    """``gen_ai.output.messages`` JSON: one assistant message, every part of the call."""
    return jsonish([{"role": "assistant", "parts": parts, "finish_reason": reason}])


def scalar_fields(line: Mapping[str, Any]) -> Attributes:
    """Short top-level scalar fields of a line, as span event attributes."""
    attrs: Attributes = {}
    for key, value in line.items():
        if key in _SKIP_FIELDS or len(attrs) >= _EVENT_FIELDS_MAX:
            continue
        name = f"claudetrace.line.{key}"
        if isinstance(value, (bool, int, float)):
            attrs[name] = value
        elif isinstance(value, str):
            attrs[name] = value[:EVENT_FIELD_LIMIT]
    return attrs
