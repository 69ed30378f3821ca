"""What the endpoint measures: the metric families, and the figures derived from events.

:data:`METRICS` lists every family served (the dashboards test checks the PromQL
of every panel against it).  :func:`recording_figures` computes the event-derived
figures of one recording from the indexed columns the store reads; it is pure, so
it is tested on rows made by hand.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from .exposition import Family, Histogram, Labels, MetricSpec

#: The label value when a tool, model or source is not known.
UNKNOWN: Final = "unknown"

SESSIONS = MetricSpec(
    "claudetrace_store_sessions", "gauge", "Recordings in the store by status.", ("status",)
)
SESSIONS_STARTED = MetricSpec(
    "claudetrace_store_sessions_started_total",
    "counter",
    "Recordings in the store by source (proxy, import, replay).",
    ("source",),
)
LAST_SESSION_START = MetricSpec(
    "claudetrace_store_last_session_start_timestamp_seconds",
    "gauge",
    "Unix time at which the newest recording started.",
)
COST = MetricSpec(
    "claudetrace_store_cost_usd_total",
    "counter",
    "Cost in USD reported by the CLI (result.total_cost_usd), by model.",
    ("model",),
)
TOKENS = MetricSpec(
    "claudetrace_store_tokens_total",
    "counter",
    "Tokens reported in result usage, by model and type "
    "(input, output, cache_read, cache_creation; input excludes the cache).",
    ("model", "type"),
)
TURNS = MetricSpec(
    "claudetrace_store_turns_total", "counter", "Turns (result messages), by model.", ("model",)
)
EVENTS = MetricSpec("claudetrace_store_events_total", "counter", "Lines recorded, all streams.")
BYTES = MetricSpec("claudetrace_store_bytes_total", "counter", "Bytes recorded, all streams.")
TOOL_CALLS = MetricSpec(
    "claudetrace_store_tool_calls_total",
    "counter",
    "Tool uses by tool and outcome (ok, error, unfinished).",
    ("tool", "outcome"),
)
TOOL_DURATION = MetricSpec(
    "claudetrace_store_tool_duration_seconds",
    "histogram",
    "Time from a tool_use to its tool_result, by tool.",
    ("tool",),
)
CONTROL_REQUESTS = MetricSpec(
    "claudetrace_store_control_requests_total",
    "counter",
    "Control requests by subtype, initiator (host, cli) and outcome (success, error, unanswered).",
    ("subtype", "initiator", "outcome"),
)
CONTROL_DURATION = MetricSpec(
    "claudetrace_store_control_duration_seconds",
    "histogram",
    "Round trip of answered control requests, by subtype, initiator and outcome.",
    ("subtype", "initiator", "outcome"),
)
PERMISSION_DECISIONS = MetricSpec(
    "claudetrace_store_permission_decisions_total",
    "counter",
    "Host answers to can_use_tool, by tool and decision (allow, deny).",
    ("tool", "decision"),
)
PERMISSION_WAIT = MetricSpec(
    "claudetrace_store_permission_wait_seconds",
    "histogram",
    "Time the CLI waited for the host to answer can_use_tool, by tool.",
    ("tool",),
)
SCRAPE_DURATION = MetricSpec(
    "claudetrace_store_scrape_duration_seconds",
    "gauge",
    "Time this scrape spent computing the figures.",
)

#: Every family the endpoint serves, in exposition order.
METRICS: Final[tuple[MetricSpec, ...]] = (
    SESSIONS,
    SESSIONS_STARTED,
    LAST_SESSION_START,
    COST,
    TOKENS,
    TURNS,
    EVENTS,
    BYTES,
    TOOL_CALLS,
    TOOL_DURATION,
    CONTROL_REQUESTS,
    CONTROL_DURATION,
    PERMISSION_DECISIONS,
    PERMISSION_WAIT,
    SCRAPE_DURATION,
)


def sample_names() -> frozenset[str]:
    """Every sample name the endpoint can emit (what PromQL may reference)."""
    return frozenset(name for spec in METRICS for name in spec.sample_names)


def _histograms() -> dict[Labels, Histogram]:
    return {}


@dataclass
class EventFigures:
    """Figures derived from events, mergeable across recordings."""

    tool_calls: Counter[Labels] = field(default_factory=Counter)
    tool_duration: dict[Labels, Histogram] = field(default_factory=_histograms)
    control_requests: Counter[Labels] = field(default_factory=Counter)
    control_duration: dict[Labels, Histogram] = field(default_factory=_histograms)
    permission_decisions: Counter[Labels] = field(default_factory=Counter)
    permission_wait: dict[Labels, Histogram] = field(default_factory=_histograms)

    def merge(self, other: EventFigures) -> None:
        self.tool_calls.update(other.tool_calls)
        self.control_requests.update(other.control_requests)
        self.permission_decisions.update(other.permission_decisions)
        for mine, theirs in (
            (self.tool_duration, other.tool_duration),
            (self.control_duration, other.control_duration),
            (self.permission_wait, other.permission_wait),
        ):
            for labels, hist in theirs.items():
                mine.setdefault(labels, Histogram()).merge(hist)


def _observe(hists: dict[Labels, Histogram], labels: Labels, t0_ns: int, t1_ns: int) -> None:
    hists.setdefault(labels, Histogram()).observe(max(0, t1_ns - t0_ns) / 1e9)


class ToolRow(NamedTuple):
    """One ``event_tools`` row with the time of its event."""

    seq: int
    tool_use_id: str
    tool_name: str | None
    kind: str
    t_ns: int


class ControlRow(NamedTuple):
    """The indexed columns of one ``control_request`` / ``control_response`` event."""

    seq: int
    direction: str
    type: str | None
    subtype: str | None
    request_id: str | None
    t_ns: int


def recording_figures(
    tools: Iterable[ToolRow],
    controls: Iterable[ControlRow],
    decisions: Mapping[str, str] | None = None,
    failed_tool_ids: frozenset[str] | set[str] = frozenset(),
) -> EventFigures:
    """The event figures of one recording.

    ``decisions`` maps the request id of a ``can_use_tool`` request to the host's
    ``allow``/``deny``; ``failed_tool_ids`` are the tool uses whose result had
    ``is_error``.  A tool use is timed from its first mention (the streamed
    ``content_block_start``, else the ``assistant`` message) to its first result.
    """
    figures = EventFigures()
    used: dict[str, int] = {}
    names: dict[str, str] = {}
    results: dict[str, int] = {}
    permission_tool: dict[int, str] = {}
    for row in sorted(tools, key=lambda r: r.seq):
        if row.tool_name and row.tool_use_id not in names:
            names[row.tool_use_id] = row.tool_name
        if row.kind == "use":
            used.setdefault(row.tool_use_id, row.t_ns)
        elif row.kind == "result":
            results.setdefault(row.tool_use_id, row.t_ns)
        elif row.kind == "permission":
            permission_tool[row.seq] = row.tool_name or ""
    for tool_id, t_use in used.items():
        name = names.get(tool_id, UNKNOWN)
        t_result = results.get(tool_id)
        if t_result is None:
            outcome = "unfinished"
        else:
            outcome = "error" if tool_id in failed_tool_ids else "ok"
            _observe(figures.tool_duration, (name,), t_use, t_result)
        figures.tool_calls[(name, outcome)] += 1

    requests: dict[str, ControlRow] = {}
    responses: dict[tuple[str, str], ControlRow] = {}
    for ctl in sorted(controls, key=lambda r: r.seq):
        if ctl.request_id is None:
            continue
        if ctl.type == "control_request":
            requests.setdefault(ctl.request_id, ctl)
        elif ctl.type == "control_response":
            # An answer travels the other way: key it by the stream it came on.
            responses.setdefault((ctl.request_id, ctl.direction), ctl)
    decisions = decisions or {}
    for request_id, req in requests.items():
        subtype = req.subtype or UNKNOWN
        initiator = "host" if req.direction == "in" else "cli"
        answer = responses.get((request_id, "out" if req.direction == "in" else "in"))
        if answer is None:
            figures.control_requests[(subtype, initiator, "unanswered")] += 1
            continue
        outcome = "success" if answer.subtype == "success" else "error"
        labels = (subtype, initiator, outcome)
        figures.control_requests[labels] += 1
        _observe(figures.control_duration, labels, req.t_ns, answer.t_ns)
        if subtype == "can_use_tool":
            tool = permission_tool.get(req.seq) or UNKNOWN
            _observe(figures.permission_wait, (tool,), req.t_ns, answer.t_ns)
            decision = decisions.get(request_id)
            if decision is not None:
                figures.permission_decisions[(tool, decision)] += 1
    return figures


def event_families(figures: EventFigures) -> list[Family]:
    """Families of the event-derived figures, samples sorted by labels."""
    out = []
    for spec, data in (
        (TOOL_CALLS, figures.tool_calls),
        (TOOL_DURATION, figures.tool_duration),
        (CONTROL_REQUESTS, figures.control_requests),
        (CONTROL_DURATION, figures.control_duration),
        (PERMISSION_DECISIONS, figures.permission_decisions),
        (PERMISSION_WAIT, figures.permission_wait),
    ):
        fam = Family(spec)
        for labels in sorted(data):
            value = data[labels]
            if isinstance(value, Histogram):
                fam.add_histogram(labels, value)
            else:
                fam.add(labels, value)
        out.append(fam)
    return out
