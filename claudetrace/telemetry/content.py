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

from ..model.content import blocks, message_content
from ..model.events import Event
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


def _parts(content: Any, clip: Callable[[str], str]) -> list[dict[str, Any]]:
    """Content blocks (the session model's reading) as GenAI message parts: text,
    reasoning, tool_call, tool_call_response, else the block's type; each text cut by
    ``clip`` (the JSON stays whole)."""
    parts: list[dict[str, Any]] = []
    for block in blocks(content):
        if block.kind == "text":
            parts.append({"type": "text", "content": clip(block.text)})
        elif block.kind == "thinking":
            parts.append({"type": "reasoning", "content": clip(block.text)})
        elif block.kind == "tool_use":
            part: dict[str, Any] = {"type": "tool_call", "id": block.id, "name": str(block.name)}
            if block.input is not None:
                text = jsonish(block.input)
                part["arguments"] = block.input if len(text) <= len(clip(text)) else clip(text)
            parts.append(part)
        elif block.kind == "tool_result":
            parts.append({"type": "tool_call_response", "id": block.id,
                          "response": clip(block.text)})
        else:
            parts.append({"type": block.type})
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


def user_input(event: Event, policy: ContentPolicy) -> str:
    """``gen_ai.input.messages`` JSON for a host's user line."""
    return jsonish([{"role": "user", "parts": _parts(message_content(event), policy.clip)}])


def message_parts(content: Any, policy: ContentPolicy) -> list[dict[str, Any]]:
    """The GenAI parts of a message's ``content`` (a line's, or a result's text)."""
    return _parts(content, policy.clip)


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
