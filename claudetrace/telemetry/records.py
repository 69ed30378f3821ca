"""Finished spans as plain data, and the deterministic ids they carry.

A :class:`SpanRecord` is what the span builder produces and the exporter turns into
an OpenTelemetry span; keeping it free of OpenTelemetry types lets the builder be
tested (and benchmarked) without the SDK.  Trace and span ids (made in
:mod:`.context`, re-exported here) are hashes of the
recording id and a stable per-span key, so a live export and a later backfill of
the same recording produce the very same ids.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from .context import span_id_for as span_id_for  # re-exported
from .context import trace_id_for as trace_id_for
from .context import traceparent as traceparent

AttrValue = str | bool | int | float | tuple[str, ...]
Attributes = dict[str, AttrValue]
SpanKind = Literal["internal", "client"]
StatusCode = Literal["unset", "ok", "error"]


@dataclass(slots=True)
class SpanEvent:
    """A point in time on a span (a system message, a keep_alive, a stray line)."""

    name: str
    time_ns: int
    attributes: Attributes = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class SpanRecord:
    """One span: name, ids, recorded times, attributes, events and status.

    ``start_ns`` / ``end_ns`` are Unix epoch nanoseconds (recording start plus the
    event's offset).  ``costs`` is the per-model cost of the session on the root
    span only; it feeds the cost metric and is not exported as an attribute.
    """

    key: str
    name: str
    trace_id: int
    span_id: int
    parent_id: int | None
    start_ns: int
    end_ns: int | None = None
    kind: SpanKind = "internal"
    attributes: Attributes = field(default_factory=dict)
    events: list[SpanEvent] = field(default_factory=list)
    status: StatusCode = "unset"
    status_message: str = ""
    costs: dict[str, float] = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        """Seconds between start and end (0 while the span is open)."""
        if self.end_ns is None:
            return 0.0
        return max(0, self.end_ns - self.start_ns) / 1e9

    def set_error(self, message: str) -> None:
        """Mark the span failed, keeping the first reason given."""
        if self.status != "error":
            self.status = "error"
            self.status_message = message


def render_tree(spans: Iterable[SpanRecord]) -> str:
    """A readable indented tree of spans (for ``claudetrace otel --tree`` and tests)."""
    spans = list(spans)
    children: dict[int | None, list[SpanRecord]] = {}
    ids = {span.span_id for span in spans}
    for span in spans:
        parent = span.parent_id if span.parent_id in ids else None
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: (s.start_ns, s.key)):
            status = "" if span.status == "unset" else f" [{span.status}"
            if span.status_message:
                status += f": {span.status_message}"
            status += "]" if status else ""
            lines.append(f"{'  ' * depth}{span.name} ({span.duration_s * 1000:.1f} ms){status}")
            walk(span.span_id, depth + 1)

    walk(None, 0)
    return "\n".join(lines)
