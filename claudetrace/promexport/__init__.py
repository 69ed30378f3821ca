"""Fleet metrics computed from the store, served through ``prometheus_client``.

``claudetrace metrics serve`` answers ``GET /metrics`` with aggregates over every
recording in the store; Prometheus scrapes it next to the OpenTelemetry Collector
(see ``dashboards/``).  The live OTLP metrics describe what happens *now*, in the
processes that export them; these describe everything the store holds, including
sessions recorded with telemetry off and imported cassettes.

Figures come from three places, so that a scrape stays fast with 10k sessions:

- tokens and cost per model: the usage query layer (:mod:`claudetrace.store.usage`,
  what ``claudetrace usage --json`` reads), one query on the per-hour sums, a
  message two recordings hold counted once; each series is served at the highest
  value this server served, so a counter never goes down;
- the summary the session model stored with each recording (status, turns,
  events, bytes): a few ``GROUP BY`` queries per scrape;
- each recording's session model (tool calls and durations, control round trips,
  permission decisions and waits), folded from the lines that carry them.  A
  recording that has ended never changes, so its figures are folded into running
  totals once and later scrapes only read recordings that are new or still
  running.

Every other query is the store's (:mod:`claudetrace.store.aggregate`), every other
figure the session model's (:mod:`claudetrace.model`), as in ``show``, the UI and the
spans.

Every name is prefixed ``claudetrace_store_``; :data:`METRICS` lists them and the
dashboards test checks the PromQL of every panel against it.  Counters restart from
zero when the server restarts or recordings are deleted, which Prometheus'
``rate``/``increase`` treat as a counter reset.

The package's modules: :mod:`.exposition` (families, and the custom collector
that hands them to ``prometheus_client``, which writes the Prometheus text format
and OpenMetrics), :mod:`.figures` (the families served and the figures derived
from events), :mod:`.store` (the queries) and :mod:`.server` (``prometheus_client``'s
WSGI app).
"""

from __future__ import annotations

from .exposition import (
    BUCKETS,
    CONTENT_TYPE,
    Family,
    Histogram,
    Labels,
    MetricKind,
    MetricSpec,
    Sample,
    render,
)
from .figures import (
    BYTES,
    CONTROL_DURATION,
    CONTROL_REQUESTS,
    COST,
    EVENTS,
    LAST_SESSION_START,
    METRICS,
    PERMISSION_DECISIONS,
    PERMISSION_WAIT,
    RUNNING_COST,
    RUNNING_TOKENS,
    SCRAPE_DURATION,
    SESSIONS,
    SESSIONS_STARTED,
    TOKENS,
    TOOL_CALLS,
    TOOL_DURATION,
    TURNS,
    UNKNOWN,
    EventFigures,
    event_families,
    sample_names,
    session_figures,
)
from .server import DEFAULT_PORT, make_server
from .store import CHUNK, StoreMetrics

__all__ = [
    "BUCKETS",
    "BYTES",
    "CHUNK",
    "CONTENT_TYPE",
    "CONTROL_DURATION",
    "CONTROL_REQUESTS",
    "COST",
    "DEFAULT_PORT",
    "EVENTS",
    "LAST_SESSION_START",
    "METRICS",
    "PERMISSION_DECISIONS",
    "PERMISSION_WAIT",
    "RUNNING_COST",
    "RUNNING_TOKENS",
    "SCRAPE_DURATION",
    "SESSIONS",
    "SESSIONS_STARTED",
    "TOKENS",
    "TOOL_CALLS",
    "TOOL_DURATION",
    "TURNS",
    "UNKNOWN",
    "EventFigures",
    "Family",
    "Histogram",
    "Labels",
    "MetricKind",
    "MetricSpec",
    "Sample",
    "StoreMetrics",
    "event_families",
    "make_server",
    "render",
    "sample_names",
    "session_figures",
]
