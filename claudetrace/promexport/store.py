"""The figures of a store: summary columns by ``GROUP BY``, event figures per recording.

:class:`StoreMetrics` answers a scrape with a few aggregate queries over
``recordings`` and, for the event-derived figures, reads only recordings it has
not folded into its running totals yet (an ended recording never changes).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Final

from sqlalchemy import Engine, and_, func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, aliased

from ..errors import StoreError
from ..events import Event
from ..model import STATUSES
from ..protocol import failed_tool_ids, permission_decision
from ..store.models import EventRow, EventTool, Recording, status_expression
from .exposition import Family, render
from .figures import (
    BYTES,
    COST,
    EVENTS,
    LAST_SESSION_START,
    METRICS,
    SCRAPE_DURATION,
    SESSIONS,
    SESSIONS_STARTED,
    TOKENS,
    TURNS,
    UNKNOWN,
    ControlRow,
    EventFigures,
    ToolRow,
    event_families,
    recording_figures,
)

#: Recordings read per query when computing event figures (bounded IN lists).
CHUNK: Final = 500


def _chunks(items: Sequence[str], size: int = CHUNK) -> Iterator[Sequence[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


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
        for name in STATUSES:
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
