"""Figures over many recordings, for the Prometheus exporter and the UI's statistics.

Every query a fleet view needs lives here, behind the store: statuses by
``GROUP BY`` (the status itself is the session model's, stored when a recording
ends), sources, totals, the per-model figures each recording stored, the
events of many recordings at once for the figures derived from their sessions,
and the Stats page's latency samples kept of ended recordings.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

from sqlalchemy import Connection, String, cast, func, or_, select, update

from ..model.events import Event
from ..model.usage import TOKEN_TYPES
from .api import Store, _store_errors
from .models import EventRow, Recording, UsageCall, numbers_of, status_expression, type_in

#: Recordings read per query (bounded IN lists).
CHUNK: Final = 500


def status_counts(store: Store, now_ns: int) -> Counter[str]:
    """Recordings by status (:attr:`Recording.status`)."""
    status = status_expression(now_ns)
    counts: Counter[str] = Counter()
    with _store_errors("read"), store.session() as s:
        for name, n in s.execute(select(status, func.count()).group_by(status)):
            counts[name] = n
        for _rec, actual in _heartbeat_running(s, status):
            if actual != "running":
                counts["running"] -= 1
                counts[actual] += 1
    return counts


def _heartbeat_running(s: Any, status: Any) -> Iterator[tuple[Recording, str]]:
    """The recordings the heartbeat calls running, each with its status: the pid
    check of :attr:`Recording.status` cannot run in SQL, so it is applied to those few."""
    for rec in s.scalars(select(Recording).where(status == "running")):
        yield rec, rec.status


def source_counts(store: Store) -> list[tuple[str | None, int]]:
    """Recordings by source (proxy, import, transcript …), sorted."""
    r = Recording
    with _store_errors("read"), store.session() as s:
        return [(source, int(n)) for source, n in s.execute(
            select(r.source, func.count()).group_by(r.source).order_by(r.source))]


def totals(store: Store) -> tuple[int, int, int | None]:
    """Lines and bytes recorded in all, and when the newest recording started.

    A recording stored usage first counts its lines once folded (then converted:
    other lines), as its tool calls do: a counter that never goes down."""
    r = Recording
    folded = Recording.indexing.expression
    with _store_errors("read"), store.session() as s:
        events, size, newest = s.execute(
            select(func.sum(r.event_count).filter(~folded),
                   func.sum(r.byte_count).filter(~folded), func.max(r.started_ns))
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


#: A model's tokens by type (input, output, cache read, cache creation), and the
#: part of its cache creation written to the 1-hour cache (priced at its rate).
Tokens = tuple[int, int, int, int, int]
#: The keys of :data:`Tokens` in a recording's ``models`` figures.
_TOKEN_KEYS: Final = (*TOKEN_TYPES, "cache_creation_1h")


def running_unwritten(store: Store, now_ns: int) -> dict[str, Tokens]:
    """Tokens by model that running recordings have used and not yet written as
    calls (``usage_calls``, what the usage reports and counters read): each
    running recording's live summary (its ``models`` column, every call so far,
    refreshed by the indexer while the session runs) less its calls' rows (those
    of the turns that ended), per model and type, never below zero.

    The summary is read first: rows written since only lower the difference, so
    what a turn's end moves into the rows is never counted twice."""
    status = status_expression(now_ns)
    summaries: dict[str, dict[str, Any]] = {}
    with _store_errors("read"), store.session() as s:
        for rec, actual in _heartbeat_running(s, status):
            if actual == "running":
                summaries[rec.id] = dict(rec.models or {})
    written: dict[tuple[str, str], Tokens] = {}
    ids = list(summaries)
    u = UsageCall
    for at in range(0, len(ids), CHUNK):
        with _store_errors("read"), store.session() as s:
            for rid, model, *sums in s.execute(
                    select(u.recording_id, u.model, func.sum(u.input_tokens),
                           func.sum(u.output_tokens), func.sum(u.cache_read_tokens),
                           func.sum(u.cache_creation_tokens),
                           func.sum(u.cache_creation_1h_tokens))
                    .where(u.recording_id.in_(ids[at:at + CHUNK]))
                    .group_by(u.recording_id, u.model)):
                written[rid, model] = tuple(int(n or 0) for n in sums)  # type: ignore[assignment]
    out: dict[str, Tokens] = {}
    for rid, models in summaries.items():
        for model, figures in models.items():
            if not isinstance(figures, dict):
                continue
            done = written.get((rid, model), (0, 0, 0, 0, 0))
            left = tuple(max(0, int(figures.get(key) or 0) - n)
                         for key, n in zip(_TOKEN_KEYS, done, strict=True))
            mine = out.get(model, (0, 0, 0, 0, 0))
            out[model] = tuple(a + b for a, b in zip(mine, left, strict=True))  # type: ignore[assignment]
    return out


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
        unpack = store.unpacker()
        with _store_errors("read"), store.engine.connect() as conn:
            for row in conn.execute(
                select(Recording.id.label("rid"), e.seq, e.direction, e.t_ns, e.wall_ns,
                       e.data, e.eol, e.codec)
                .join(Recording, Recording.num == e.rec)
                .where(e.rec.in_(numbers_of(chunk)), type_in(types))
                .order_by(e.rec, e.seq)
            ):
                found[row.rid].append(Event(
                    row.seq, row.direction, row.t_ns, unpack(row.data, row.codec), row.eol,
                    row.wall_ns))
        yield from found.items()


#: How long keeping latency samples waits for another writer's lock (seconds):
#: they are kept on the way, by a page that reads, and are folded again next
#: time when the database is busy.
KEEP_WAIT_S: Final = 0.5


def stored_latencies(
    store: Store, recordings: Mapping[str, int]
) -> dict[str, dict[str, list[float]]]:
    """The latency samples kept of ``recordings`` (recording id → its event
    count now) by :func:`keep_latencies`: those folded from that many events
    of an ended recording (one whose lines changed since is left out, as are
    those with none kept), by recording id."""
    r = Recording
    ids = list(recordings)
    found: dict[str, dict[str, list[float]]] = {}
    for at in range(0, len(ids), CHUNK):
        with _store_errors("read"), store.session() as s:
            for rid, kept in s.execute(select(r.id, r.latencies).where(
                    r.id.in_(ids[at:at + CHUNK]), r.ended_ns.is_not(None))):
                if (isinstance(kept, dict) and kept.get("events") == recordings[rid]
                        and isinstance(kept.get("samples"), dict)):
                    found[rid] = kept["samples"]
    return found


def unfolded_latencies(store: Store, limit: int,
                       before: str | None = None) -> list[tuple[str, int]]:
    """Up to ``limit`` ended recordings with no latency samples kept, ``(id,
    event count)``, by id from the newest down (``before``: of ids below it)."""
    r = Recording
    # None is kept as SQL NULL or as JSON null, as the statement wrote it.
    query = select(r.id, r.event_count).where(r.ended_ns.is_not(None), or_(
        r.latencies.is_(None), cast(r.latencies, String) == "null"))
    if before is not None:
        query = query.where(r.id < before)
    with _store_errors("read"), store.session() as s:
        return [(rid, int(n or 0)) for rid, n in
                s.execute(query.order_by(r.id.desc()).limit(limit))]


def forget_latencies(store: Store, ids: Sequence[str]) -> None:
    """Drop the latency samples kept of ``ids`` (``bench store``: a store of an
    earlier version, which stored none; the page folds them again)."""
    r = Recording
    with _store_errors("write"), store.session() as s:
        for at in range(0, len(ids), CHUNK):
            s.execute(update(Recording).where(r.id.in_(ids[at:at + CHUNK]))
                      .values(latencies=None))
        s.commit()


def keep_latencies(
    store: Store, folded: Mapping[str, tuple[int, Mapping[str, Sequence[float]]]]
) -> int:
    """Keep the latency samples of ended recordings (recording id → the event
    count they were folded from and the samples), in one short transaction that
    waits at most :data:`KEEP_WAIT_S` for another writer; a recording not ended,
    deleted or of another event count by now is left as it is.  Returns how many
    were kept.  Raises :class:`~claudetrace.errors.StoreError` when the database
    refuses (busy): nothing is kept then."""
    if not folded:
        return 0
    r = Recording
    kept = 0
    with _store_errors("keep latency samples"), store.engine.begin() as conn:
        restore = _short_lock_wait(conn)
        try:
            for rid, (events, samples) in folded.items():
                kept += conn.execute(
                    update(Recording).where(r.id == rid, r.ended_ns.is_not(None),
                                            r.event_count == events)
                    .values(latencies={"events": events, "samples": dict(samples)})).rowcount
        finally:
            restore()
    return kept


def _short_lock_wait(conn: Connection) -> Callable[[], None]:
    """Make ``conn`` wait at most :data:`KEEP_WAIT_S` for a lock; what sets it back."""
    if conn.dialect.name == "sqlite":
        before = conn.exec_driver_sql("PRAGMA busy_timeout").scalar()
        conn.exec_driver_sql(f"PRAGMA busy_timeout = {int(KEEP_WAIT_S * 1000)}")

        def restore() -> None:
            conn.exec_driver_sql(f"PRAGMA busy_timeout = {int(before or 0)}")
        return restore
    # PostgreSQL: for this transaction only.
    conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{int(KEEP_WAIT_S * 1000)}ms'")
    return lambda: None
