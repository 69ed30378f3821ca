"""Figures over many recordings, for the Prometheus exporter and the UI's statistics.

Every query a fleet view needs lives here, behind the store: statuses by
``GROUP BY`` (the status itself is the session model's, stored when a recording
ends), sources, totals, the per-model figures each recording stored, and the
events of many recordings at once for the figures derived from their sessions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any, Final

from sqlalchemy import func, select

from ..model.events import Event
from .api import Store, _store_errors
from .models import EventRow, Recording, status_expression, type_in

#: Recordings read per query (bounded IN lists).
CHUNK: Final = 500


def status_counts(store: Store, now_ns: int) -> Counter[str]:
    """Recordings by status (:attr:`Recording.status`)."""
    status = status_expression(now_ns)
    counts: Counter[str] = Counter()
    with _store_errors("read"), store.session() as s:
        for name, n in s.execute(select(status, func.count()).group_by(status)):
            counts[name] = n
        # The pid check of Recording.status cannot run in SQL; apply it to the few
        # recordings the heartbeat calls running.
        for rec in s.scalars(select(Recording).where(status == "running")):
            actual = rec.status
            if actual != "running":
                counts["running"] -= 1
                counts[actual] += 1
    return counts


def source_counts(store: Store) -> list[tuple[str | None, int]]:
    """Recordings by source (proxy, import, transcript …), sorted."""
    r = Recording
    with _store_errors("read"), store.session() as s:
        return [(source, int(n)) for source, n in s.execute(
            select(r.source, func.count()).group_by(r.source).order_by(r.source))]


def totals(store: Store) -> tuple[int, int, int | None]:
    """Lines and bytes recorded in all, and when the newest recording started."""
    r = Recording
    with _store_errors("read"), store.session() as s:
        events, size, newest = s.execute(
            select(func.sum(r.event_count), func.sum(r.byte_count), func.max(r.started_ns))
        ).one()
    return int(events or 0), int(size or 0), newest


def recording_states(store: Store) -> list[tuple[str, bool, dict[str, Any], str]]:
    """Every recording's id, whether it has ended, its per-model figures and where
    their cost comes from (``cli``, ``estimate``, ``unknown``)."""
    r = Recording
    with _store_errors("read"), store.session() as s:
        return [(rid, ended, dict(models or {}), source or "cli")
                for rid, ended, models, source in s.execute(
                    select(r.id, r.ended_ns.is_not(None), r.models, r.cost_source))]


def stored_figures(store: Store, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The records of their event figures that recordings ``ids`` stored as they
    ended (:func:`claudetrace.model.summary.figure_records`); those that stored
    none are left out."""
    r = Recording
    found: dict[str, dict[str, Any]] = {}
    for at in range(0, len(ids), CHUNK):
        with _store_errors("read"), store.session() as s:
            # None is stored as JSON's null (SQLAlchemy's JSON), so told here.
            for rid, figures in s.execute(select(r.id, r.figures).where(
                    r.id.in_(list(ids[at:at + CHUNK])))):
                if isinstance(figures, dict):
                    found[rid] = figures
    return found


def events_of(
    store: Store, ids: Sequence[str], types: Sequence[str]
) -> Iterator[tuple[str, list[Event]]]:
    """Each recording of ``ids`` with its events of ``types``, in sequence order."""
    e = EventRow
    for at in range(0, len(ids), CHUNK):
        chunk = list(ids[at:at + CHUNK])
        found: dict[str, list[Event]] = {rid: [] for rid in chunk}
        with _store_errors("read"), store.engine.connect() as conn:
            for row in conn.execute(
                select(e.recording_id, e.seq, e.direction, e.t_ns, e.wall_ns, e.data, e.eol)
                .where(e.recording_id.in_(chunk), type_in(types))
                .order_by(e.recording_id, e.seq)
            ):
                found[row.recording_id].append(Event(
                    row.seq, row.direction, row.t_ns, bytes(row.data), row.eol, row.wall_ns))
        yield from found.items()
