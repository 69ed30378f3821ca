"""Fleet metrics computed from the store, served in the Prometheus text format.

``claudetrace metrics serve`` answers ``GET /metrics`` with aggregates over every
recording in the store; Prometheus scrapes it next to the OpenTelemetry Collector
(see ``dashboards/``).  The live OTLP metrics describe what happens *now*, in the
processes that export them; these describe everything the store holds, including
sessions recorded with telemetry off and imported cassettes.

Figures come from two places, so that a scrape stays fast with 10k sessions:

- the summary columns of ``recordings`` (sessions by status, cost, tokens, turns,
  events, bytes): a few ``GROUP BY`` queries per scrape;
- the indexed columns of ``events`` and ``event_tools`` (tool calls and durations,
  control round trips, permission decisions and waits), read per recording.  A
  recording that has ended never changes, so its figures are folded into running
  totals once and later scrapes only read recordings that are new or still
  running.  Only two kinds of lines are ever loaded and parsed: the host's answers
  to ``can_use_tool`` (allow or deny) and, in recordings whose summary counts tool
  errors, the tool results (which tool failed).

Every name is prefixed ``claudetrace_store_``; :data:`METRICS` lists them and the
dashboards test checks the PromQL of every panel against it.  Counters restart from
zero when the server restarts or recordings are deleted, which Prometheus'
``rate``/``increase`` treat as a counter reset.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, Literal, NamedTuple

from sqlalchemy import Engine, and_, case, func, literal, or_, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, aliased

from .errors import ClaudeTraceError, StoreError
from .events import Event
from .store.models import STALE_AFTER_NS, EventRow, EventTool, Recording

MetricKind = Literal["counter", "gauge", "histogram"]

#: Content type of the text exposition format, version 0.0.4.
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

#: Histogram bucket upper bounds in seconds (tool runs and permission waits can
#: take minutes: a person answers those).
BUCKETS: Final[tuple[float, ...]] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip

UNKNOWN: Final = "unknown"

#: Port of ``claudetrace metrics serve`` (the one dashboards/prometheus.yml scrapes).
DEFAULT_PORT: Final = 9464


@dataclass(frozen=True)
class MetricSpec:
    """One metric family: its name, type, help text and label names."""

    name: str
    kind: MetricKind
    help: str
    labels: tuple[str, ...] = ()

    @property
    def sample_names(self) -> tuple[str, ...]:
        """The names its samples carry (``_bucket``/``_sum``/``_count`` for histograms)."""
        if self.kind == "histogram":
            return (f"{self.name}_bucket", f"{self.name}_sum", f"{self.name}_count")
        return (self.name,)


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


# --------------------------------------------------------------------------- figures


class Histogram:
    """A Prometheus histogram over :data:`BUCKETS` (counts per bucket, not cumulative)."""

    __slots__ = ("count", "counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.sum += seconds
        self.count += 1

    def merge(self, other: Histogram) -> None:
        for i, n in enumerate(other.counts):
            self.counts[i] += n
        self.sum += other.sum
        self.count += other.count

    def cumulative(self) -> Iterator[tuple[str, int]]:
        """``(le, cumulative count)`` pairs, ending with ``+Inf``."""
        total = 0
        for bound, n in zip((*BUCKETS, float("inf")), self.counts, strict=True):
            total += n
            yield _number(bound), total


Labels = tuple[str, ...]


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


def permission_decision(event: Event) -> str | None:
    """``allow`` or ``deny`` from the host's answer to ``can_use_tool``."""
    msg = event.message or {}
    response = msg.get("response")
    inner = response.get("response") if isinstance(response, dict) else None
    behavior = inner.get("behavior") if isinstance(inner, dict) else None
    return behavior if behavior in ("allow", "deny") else None


def failed_tool_ids(event: Event) -> set[str]:
    """Ids of the tool uses whose ``tool_result`` in this ``user`` line has ``is_error``."""
    msg = event.message or {}
    message = msg.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return set()
    return {
        block["tool_use_id"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "tool_result"
        and block.get("is_error")
        and isinstance(block.get("tool_use_id"), str)
    }


# --------------------------------------------------------------------------- exposition


Sample = tuple[str, Mapping[str, str], float]


@dataclass
class Family:
    """A metric family with its samples, ready to render."""

    spec: MetricSpec
    samples: list[Sample] = field(default_factory=list)

    def add(self, labels: Labels, value: float) -> None:
        self.samples.append(
            (self.spec.name, dict(zip(self.spec.labels, labels, strict=True)), value)
        )

    def add_histogram(self, labels: Labels, hist: Histogram) -> None:
        base = dict(zip(self.spec.labels, labels, strict=True))
        name = self.spec.name
        for le, total in hist.cumulative():
            self.samples.append((f"{name}_bucket", {**base, "le": le}, total))
        self.samples.append((f"{name}_sum", base, hist.sum))
        self.samples.append((f"{name}_count", base, hist.count))


def _number(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(families: Iterable[Family]) -> str:
    """The text exposition format (version 0.0.4) of ``families``."""
    lines: list[str] = []
    for fam in families:
        help_text = fam.spec.help.replace("\\", "\\\\").replace("\n", "\\n")
        lines.append(f"# HELP {fam.spec.name} {help_text}")
        lines.append(f"# TYPE {fam.spec.name} {fam.spec.kind}")
        for name, labels, value in fam.samples:
            if labels:
                inner = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels.items())
                lines.append(f"{name}{{{inner}}} {_number(value)}")
            else:
                lines.append(f"{name} {_number(value)}")
    return "\n".join(lines) + "\n"


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


# --------------------------------------------------------------------------- store


#: Recordings read per query when computing event figures (bounded IN lists).
CHUNK: Final = 500


def _chunks(items: Sequence[str], size: int = CHUNK) -> Iterator[Sequence[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def status_expression(now_ns: int) -> Any:
    """SQL mirror of :attr:`Recording.status`, minus its same-host pid check."""
    r = Recording
    heartbeat = func.coalesce(r.last_seen_ns, r.started_ns)
    return case(
        (
            and_(r.error.is_not(None), r.error != "", r.exit_code == 127, r.event_count == 0),
            literal("failed"),
        ),
        (and_(r.ended_ns.is_(None), heartbeat > now_ns - STALE_AFTER_NS), literal("running")),
        (r.ended_ns.is_(None), literal("incomplete")),
        (
            or_(r.signal.is_not(None), func.coalesce(r.exit_code, 0) != 0, r.is_error),
            literal("error"),
        ),
        else_=literal("ok"),
    )


class StoreMetrics:
    """Computes the families from a store, remembering the figures of ended recordings.

    Thread-safe: concurrent scrapes are serialised.
    """

    def __init__(self, engine: Engine, *, clock: Callable[[], int] = time.time_ns) -> None:
        self.engine = engine
        self._clock = clock
        self._lock = threading.Lock()
        self._folded: set[str] = set()
        self._folded_figures = EventFigures()

    def collect(self) -> list[Family]:
        """All families of :data:`METRICS`, freshly computed."""
        with self._lock:
            started = time.perf_counter()
            try:
                with self.engine.connect() as conn, Session(bind=conn) as session:
                    families = self._summary_families(session)
                    families += event_families(self._event_figures(session))
            except SQLAlchemyError as exc:
                reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()
                raise StoreError(f"cannot read the store: {reason[0] if reason else exc}") from exc
            scrape = Family(SCRAPE_DURATION)
            scrape.add((), time.perf_counter() - started)
            families.append(scrape)
        order = {spec.name: i for i, spec in enumerate(METRICS)}
        return sorted(families, key=lambda fam: order[fam.spec.name])

    def exposition(self) -> str:
        """The text exposition of :meth:`collect`."""
        return render(self.collect())

    def _summary_families(self, session: Session) -> list[Family]:
        now = self._clock()
        status = status_expression(now)
        counts: Counter[str] = Counter()
        for name, n in session.execute(select(status, func.count()).group_by(status)):
            counts[name] = n
        # The pid check of Recording.status cannot run in SQL; apply it to the few
        # recordings the heartbeat calls running.
        running = session.scalars(select(Recording).where(status == "running")).all()
        for rec in running:
            actual = rec.status
            if actual != "running":
                counts["running"] -= 1
                counts[actual] += 1
        sessions = Family(SESSIONS)
        for name in ("running", "ok", "error", "failed", "incomplete"):
            sessions.add((name,), counts.get(name, 0))

        started = Family(SESSIONS_STARTED)
        for source, n in session.execute(
            select(Recording.source, func.count())
            .group_by(Recording.source)
            .order_by(Recording.source)
        ):
            started.add((source or UNKNOWN,), n)

        r = Recording
        cost, tokens, turns = Family(COST), Family(TOKENS), Family(TURNS)
        per_model = session.execute(
            select(
                r.model,
                func.sum(r.cost_usd),
                func.sum(r.input_tokens),
                func.sum(r.output_tokens),
                func.sum(r.cache_read_tokens),
                func.sum(r.cache_creation_tokens),
                func.sum(r.turns),
            ).group_by(r.model)
        ).all()
        for model, usd, t_in, t_out, t_read, t_create, n_turns in sorted(
            per_model, key=lambda row: row[0] or ""
        ):
            label = model or UNKNOWN
            cost.add((label,), usd or 0.0)
            for kind, n in (
                ("input", t_in),
                ("output", t_out),
                ("cache_read", t_read),
                ("cache_creation", t_create),
            ):
                tokens.add((label, kind), n or 0)
            turns.add((label,), n_turns or 0)

        n_events, n_bytes, newest = session.execute(
            select(func.sum(r.event_count), func.sum(r.byte_count), func.max(r.started_ns))
        ).one()
        events, byte_count, last = Family(EVENTS), Family(BYTES), Family(LAST_SESSION_START)
        events.add((), n_events or 0)
        byte_count.add((), n_bytes or 0)
        if newest is not None:
            last.add((), newest / 1e9)
        return [sessions, started, last, cost, tokens, turns, events, byte_count]

    def _event_figures(self, session: Session) -> EventFigures:
        rows = session.execute(
            select(Recording.id, Recording.ended_ns.is_not(None), Recording.tool_errors > 0)
        ).all()
        pending = [row for row in rows if row[0] not in self._folded]
        ended = {rid for rid, is_ended, _ in pending if is_ended}
        with_errors = {rid for rid, _, has_errors in pending if has_errors}
        live = EventFigures()
        for chunk in _chunks([rid for rid, _, _ in pending]):
            for rid, figures in self._read_chunk(session, chunk, with_errors).items():
                # An ended recording never changes: fold it in once and never read it again.
                if rid in ended:
                    self._folded_figures.merge(figures)
                    self._folded.add(rid)
                else:
                    live.merge(figures)
        total = EventFigures()
        total.merge(self._folded_figures)
        total.merge(live)
        return total

    def _read_chunk(
        self, session: Session, ids: Sequence[str], with_errors: set[str]
    ) -> dict[str, EventFigures]:
        tools: dict[str, list[ToolRow]] = {rid: [] for rid in ids}
        controls: dict[str, list[ControlRow]] = {rid: [] for rid in ids}
        et, ev = EventTool, EventRow
        for rid, seq, tool_use_id, name, kind, t_ns in session.execute(
            select(et.recording_id, et.seq, et.tool_use_id, et.tool_name, et.kind, ev.t_ns)
            .join(ev, and_(ev.recording_id == et.recording_id, ev.seq == et.seq))
            .where(et.recording_id.in_(ids), et.kind.in_(("use", "result", "permission")))
        ):
            tools[rid].append(ToolRow(seq, tool_use_id, name, kind, t_ns))
        for rid, seq, direction, line_type, subtype, request_id, t_ns in session.execute(
            select(
                ev.recording_id, ev.seq, ev.direction, ev.type, ev.subtype, ev.request_id, ev.t_ns
            ).where(ev.recording_id.in_(ids), ev.type.in_(("control_request", "control_response")))
        ):
            controls[rid].append(ControlRow(seq, direction, line_type, subtype, request_id, t_ns))

        decisions: dict[str, dict[str, str]] = {rid: {} for rid in ids}
        req, resp = aliased(EventRow), aliased(EventRow)
        for rid, request_id, seq, data in session.execute(
            select(resp.recording_id, resp.request_id, resp.seq, resp.data)
            .join(
                req,
                and_(req.recording_id == resp.recording_id, req.request_id == resp.request_id),
            )
            .where(
                req.recording_id.in_(ids),
                req.type == "control_request",
                req.subtype == "can_use_tool",
                req.direction == "out",
                resp.type == "control_response",
                resp.direction == "in",
            )
        ):
            decision = permission_decision(Event(seq, "in", 0, data))
            if decision is not None and request_id is not None:
                decisions[rid].setdefault(request_id, decision)

        failed: dict[str, set[str]] = {rid: set() for rid in ids}
        error_ids = [rid for rid in ids if rid in with_errors]
        if error_ids:
            for rid, seq, data in session.execute(
                select(ev.recording_id, ev.seq, ev.data).where(
                    ev.recording_id.in_(error_ids),
                    ev.type == "user",
                    ev.direction == "out",
                    select(et.id)
                    .where(
                        et.recording_id == ev.recording_id,
                        et.seq == ev.seq,
                        et.kind == "result",
                    )
                    .exists(),
                )
            ):
                failed[rid] |= failed_tool_ids(Event(seq, "out", 0, data))
        return {
            rid: recording_figures(tools[rid], controls[rid], decisions[rid], failed[rid])
            for rid in ids
        }


# --------------------------------------------------------------------------- server


class _Handler(BaseHTTPRequestHandler):
    metrics: StoreMetrics  # set on the subclass made by make_server

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            try:
                body = self.metrics.exposition().encode("utf-8")
            except ClaudeTraceError as exc:
                # Prometheus records a failed scrape (up == 0); the server goes on.
                self._reply(500, "text/plain; charset=utf-8", f"{exc}\n".encode())
                return
            self._reply(200, CONTENT_TYPE, body)
        elif path == "/":
            body = b'claudetrace store metrics: <a href="/metrics">/metrics</a>\n'
            self._reply(200, "text/html; charset=utf-8", body)
        else:
            self._reply(404, "text/plain; charset=utf-8", b"not found\n")

    def _reply(self, code: int, content_type: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        # Prometheus scrapes every few seconds: one access line each would drown
        # the terminal, so requests are not logged.
        return


def make_server(
    metrics: StoreMetrics, host: str = "127.0.0.1", port: int = DEFAULT_PORT
) -> ThreadingHTTPServer:
    """An HTTP server answering ``/metrics`` (port 0 picks a free port)."""
    handler = type("MetricsHandler", (_Handler,), {"metrics": metrics})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server
