"""What the endpoint measures: the metric families, and the figures derived from events.

:data:`METRICS` lists every family served (the dashboards test checks the PromQL
of every panel against it).  :func:`session_figures` computes the event-derived
figures of one recording from its session model (:mod:`claudetrace.model`); it is
pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..model import Session, summary
from ..model.summary import (
    SUM_COUNTERS,
    SUM_HISTOGRAMS,
    figure_records,
    sum_figure_records,
)
from .exposition import Family, Histogram, Labels, MetricSpec

#: The label value when a tool, model or source is not known.
UNKNOWN: Final = summary.UNKNOWN

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
    "Cost in USD by model and source, as claudetrace usage reports it: cli (the CLI's "
    "result.total_cost_usd shared among its calls) or estimate (priced by the "
    "genai-prices table where the session reported none).",
    ("model", "source"),
)
TOKENS = MetricSpec(
    "claudetrace_store_tokens_total",
    "counter",
    "Tokens by model and type, as claudetrace usage reports them (per API message, "
    "counted once; input, output, cache_read, cache_creation; input excludes the cache).",
    ("model", "type"),
)
RUNNING_TOKENS = MetricSpec(
    "claudetrace_store_running_tokens",
    "gauge",
    "Tokens by model and type that running sessions have used and tokens_total does not "
    "count yet (their turns under way); 0 once those turns end and the counter has them.",
    ("model", "type"),
)
RUNNING_COST = MetricSpec(
    "claudetrace_store_running_cost_usd",
    "gauge",
    "Estimated cost in USD of running_tokens by model (the genai-prices table; tokens "
    "whose price their sum cannot tell, or of a model with no price, are left out).",
    ("model",),
)
TURNS = MetricSpec(
    "claudetrace_store_turns_total", "counter",
    "Turns (a user message to its result, or to the end), by the model that answered.",
    ("model",)
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
    RUNNING_TOKENS,
    RUNNING_COST,
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


def session_figures(session: Session) -> EventFigures:
    """The event figures of one recording, read from its session model."""
    return record_figures(figure_records(session))


def record_figures(records: Mapping[str, Any]) -> EventFigures:
    """The event figures of one recording from its :func:`figure_records` (as the
    store keeps them, in its ``figures`` column)."""
    figures = EventFigures()
    add_records(figures, records)
    return figures


def add_records(figures: EventFigures, records: Mapping[str, Any]) -> None:
    """Add one recording's :func:`figure_records` to ``figures`` (summed first:
    :func:`~claudetrace.model.summary.sum_figure_records`)."""
    add_sums(figures, sum_figure_records(records))


def add_sums(figures: EventFigures, sums: Mapping[str, Any]) -> None:
    """Add one recording's figures summed by label set and bucket (the ``figures``
    column it stored as it ended: :func:`~claudetrace.model.summary.figure_sums`) to
    ``figures``: a scrape adds every recording's into one, a few rows each however
    many tool calls it made."""
    for name in SUM_COUNTERS:
        counter: Counter[Labels] = getattr(figures, name)
        for row in sums.get(name) or ():
            counter[tuple(row[:-1])] += row[-1]
    for name in SUM_HISTOGRAMS:
        hists: dict[Labels, Histogram] = getattr(figures, name)
        for row in sums.get(name) or ():
            labels = tuple(row[:-2])
            hist = hists.get(labels)
            if hist is None:
                hist = hists[labels] = Histogram()
            hist.add(row[-1], row[-2])


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
