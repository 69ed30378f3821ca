"""The timeline: a waterfall of the recording's spans on one time axis.

The spans are the OpenTelemetry ones, built by
:func:`claudetrace.telemetry.build_spans` (never rebuilt here); this module only
orders them as a tree, classifies them (turn, model call, tool, permission,
hook, subagent, MCP, control) and draws them with Plotly.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..model.events import Event
from ..recording import RecordingInfo
from ..telemetry import conventions as c
from ..telemetry.records import SpanRecord
from ..telemetry.spans import SpanBuilder

if TYPE_CHECKING:
    import plotly.graph_objects as go

#: Colour of each span category in the waterfall.
COLORS: dict[str, str] = {
    "session": "#7f7f7f",
    "turn": "#1f77b4",
    "model": "#9467bd",
    "tool": "#2ca02c",
    "permission": "#ff7f0e",
    "hook": "#bcbd22",
    "subagent": "#17becf",
    "mcp": "#8c564b",
    "control": "#e377c2",
}


#: Colour of a span that ended in error, whatever its category.
ERROR_COLOR = "#d62728"


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


class LazyTimeline:
    """The timeline of one recording, built as far as it is looked at.

    ``read(start_seq, limit)`` returns the recording's events from ``start_seq``.
    The span builder is fed ``step`` lines at a time until the rows asked for have
    ended, so the first part of a long recording shows without reading the rest;
    the builder keeps its place for the next part.  A span appears once it has
    ended: a turn's bar with the turn's end, the session's bar last.  Safe to share
    between the server's threads.
    """

    def __init__(
        self, info: RecordingInfo, read: Callable[[int, int], Sequence[Event]], *,
        step: int = 5000,
    ) -> None:
        self._info = info
        self._read = read
        self._step = step
        self._builder = SpanBuilder(info)
        self._next_seq = 0
        self._lock = threading.Lock()
        self._rows: list[TimelineRow] = []
        self._rows_of = -1
        #: True once every line has been read and the spans closed.
        self.complete = False
        self.lines_read = 0

    def rows(self, at_least: int) -> list[TimelineRow]:
        """The rows of the spans ended so far, reading on until there are ``at_least``
        (or the recording's end)."""
        with self._lock:
            finished = self._builder.finished
            while not self.complete and len(finished) < at_least:
                events = self._read(self._next_seq, self._step)
                self._builder.feed_many(events)
                if events:
                    self._next_seq = events[-1].seq + 1
                    self.lines_read += len(events)
                if len(events) < self._step:
                    self._builder.close(self._info)
                    self.complete = True
            if self._rows_of != len(finished):
                self._rows = timeline_rows(finished, self._info.started_ns)
                self._rows_of = len(finished)
            return self._rows


def _hover(row: TimelineRow) -> str:
    from html import escape

    # Plotly renders hover text as (limited) HTML: escape the recorded values.
    lines = [f"<b>{escape(row.label)}</b>", f"{row.duration_ms:.1f} ms from {row.start_s:.3f} s"]
    if row.status != "unset":
        lines.append(f"status: {escape(row.status)}")
    for key, value in list(row.details.items())[:12]:
        text = str(value)
        text = text if len(text) <= 120 else text[:119] + "…"
        lines.append(f"{escape(key)}: {escape(text)}")
    return "<br>".join(lines)


def waterfall_figure(rows: Sequence[TimelineRow]) -> go.Figure:
    """A Plotly waterfall of ``rows`` (top to bottom in tree order)."""
    import plotly.graph_objects as go

    labels = [f"{i:>4} {'  ' * r.depth}{r.label}" for i, r in enumerate(rows)]
    fig = go.Figure()
    for cat, color in COLORS.items():
        picked = [i for i, r in enumerate(rows) if r.category == cat]
        if not picked:
            continue
        fig.add_trace(
            go.Bar(
                name=cat,
                orientation="h",
                y=[labels[i] for i in picked],
                # A zero-length span still needs a visible sliver.
                x=[max(rows[i].end_s - rows[i].start_s, 1e-4) for i in picked],
                base=[rows[i].start_s for i in picked],
                # A failed span is red whatever its category (a failed tool was a
                # green bar with a red outline, which read as a success).
                marker={
                    "color": [ERROR_COLOR if rows[i].status == "error" else color
                              for i in picked],
                    "line": {
                        "color": [
                            ERROR_COLOR if rows[i].status == "error" else color for i in picked
                        ],
                        "width": 2,
                    },
                },
                hovertext=[_hover(rows[i]) for i in picked],
                hoverinfo="text",
            )
        )
    fig.update_layout(
        barmode="overlay",
        height=max(260, 22 * len(rows) + 80),
        margin={"l": 10, "r": 10, "t": 30, "b": 30},
        xaxis_title="seconds since start",
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom"},
    )
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(labels)), automargin=True)
    return fig


def latencies(spans: Iterable[SpanRecord]) -> dict[str, list[float]]:
    """Durations in ms of finished spans, by category (for latency percentiles)."""
    out: dict[str, list[float]] = {}
    for span in spans:
        if span.end_ns is None:
            continue
        out.setdefault(category(span), []).append((span.end_ns - span.start_ns) / 1e6)
    return out
