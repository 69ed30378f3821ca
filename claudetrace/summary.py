"""Per-recording summary figures, accumulated event by event.

The proxy updates them while recording and ``import`` computes them once, so the
session list (10k rows) reads columns instead of scanning events.

``turns`` counts ``result`` messages (one per user turn).  Token figures add up the
``usage`` of each ``result`` (which covers that turn).  ``total_cost_usd`` in a
``result`` is the CLI process's running total, so ``cost_usd`` keeps the latest.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .events import Event
from .protocol import failed_tool_ids


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass
class Summary:
    """Figures for one recording (the summary columns of ``recordings``)."""

    event_count: int = 0
    byte_count: int = 0
    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    cost_usd: float = 0.0
    is_error: bool = False
    result_subtype: str | None = None

    def add(self, event: Event) -> None:
        """Account for one event."""
        self.event_count += 1
        self.byte_count += len(event.data) + (1 if event.eol else 0)
        if event.direction != "out":
            return
        kind = event.fields.type
        if kind == "assistant":
            self.tool_calls += sum(1 for ref in event.fields.tools if ref.kind == "use")
        elif kind == "user":
            self.tool_errors += len(failed_tool_ids(event))
        elif kind == "result":
            self._add_result(event.message or {})

    def _add_result(self, msg: dict[str, Any]) -> None:
        self.turns += 1
        usage = msg.get("usage")
        if isinstance(usage, dict):
            self.input_tokens += _int(usage.get("input_tokens"))
            self.output_tokens += _int(usage.get("output_tokens"))
            self.cache_read_tokens += _int(usage.get("cache_read_input_tokens"))
            self.cache_creation_tokens += _int(usage.get("cache_creation_input_tokens"))
        cost = msg.get("total_cost_usd")
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            self.cost_usd = max(self.cost_usd, float(cost))
        subtype = msg.get("subtype")
        self.result_subtype = subtype if isinstance(subtype, str) else self.result_subtype
        self.is_error = bool(msg.get("is_error")) or (
            isinstance(subtype, str) and subtype.startswith("error")
        )

    def as_columns(self) -> dict[str, Any]:
        """The summary as ``recordings`` column values."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

