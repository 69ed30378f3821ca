"""The OpenTelemetry spans as timeline rows: the HTML report's waterfall.

The spans are the ones :func:`claudetrace.telemetry.build_spans` builds (never
rebuilt here); this module only orders them as a tree, each row with its
category (turn, model call, tool, permission, hook, subagent, MCP, control:
:func:`claudetrace.telemetry.latency.category`, as the Stats page's latencies
have it).  The session page
draws the presentation model's span tree instead (its Trace tab).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..telemetry import conventions as c
from ..telemetry.latency import category
from ..telemetry.records import SpanRecord


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
