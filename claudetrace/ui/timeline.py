"""The OpenTelemetry spans as timeline rows: the HTML report's waterfall, and the
latencies of the Stats page.

The spans are the ones :func:`claudetrace.telemetry.build_spans` builds (never
rebuilt here); this module only orders them as a tree and classifies them (turn,
model call, tool, permission, hook, subagent, MCP, control).  The session page
draws the presentation model's span tree instead (its Trace tab).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..telemetry import conventions as c
from ..telemetry.records import SpanRecord


def category(span: SpanRecord) -> str:
    """The waterfall category of a span from the builder."""
    prefix = span.key.split("/", 1)[0].split("#", 1)[0]
    if prefix == "root":
        return "session"
    if prefix == "turn":
        return "turn"
    if prefix == "chat":
        return "model"
    if prefix == "tool":
        return "tool"
    if prefix == "agent":
        return "subagent"
    subtype = span.attributes.get(c.CONTROL_SUBTYPE)
    if subtype == "can_use_tool":
        return "permission"
    if subtype == "hook_callback":
        return "hook"
    if subtype == "mcp_message":
        return "mcp"
    return "control"


@dataclass(slots=True)
class TimelineRow:
    """One bar of the waterfall (times in seconds since the recording started)."""

    label: str
    category: str
    depth: int
    start_s: float
    end_s: float
    status: str
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_ms(self) -> float:
        return (self.end_s - self.start_s) * 1000


def timeline_rows(spans: Iterable[SpanRecord], started_ns: int) -> list[TimelineRow]:
    """Spans in tree order (parents before children, siblings by start time)."""
    spans = list(spans)
    ids = {s.span_id for s in spans}
    children: dict[int | None, list[SpanRecord]] = {}
    for span in spans:
        parent = span.parent_id if span.parent_id in ids else None
        children.setdefault(parent, []).append(span)
    last_end = max((s.end_ns or s.start_ns for s in spans), default=started_ns)
    rows: list[TimelineRow] = []

    def visit(parent: int | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: (s.start_ns, s.key)):
            end = span.end_ns if span.end_ns is not None else last_end
            details: dict[str, Any] = {
                k: v for k, v in span.attributes.items() if k != c.RECORDING_ID
            }
            if span.status_message:
                details["status"] = span.status_message
            if span.events:
                details["events"] = ", ".join(e.name for e in span.events[:8]) + (
                    " …" if len(span.events) > 8 else ""
                )
            rows.append(
                TimelineRow(
                    label=span.name,
                    category=category(span),
                    depth=depth,
                    start_s=(span.start_ns - started_ns) / 1e9,
                    end_s=(end - started_ns) / 1e9,
                    status=span.status,
                    details=details,
                )
            )
            visit(span.span_id, depth + 1)

    visit(None, 0)
    return rows


def latencies(spans: Iterable[SpanRecord]) -> dict[str, list[float]]:
    """Durations in ms of finished spans, by category (for latency percentiles)."""
    out: dict[str, list[float]] = {}
    for span in spans:
        if span.end_ns is None:
            continue
        out.setdefault(category(span), []).append((span.end_ns - span.start_ns) / 1e6)
    return out
