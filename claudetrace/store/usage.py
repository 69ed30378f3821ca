"""Usage over many recordings: the queries behind ``claudetrace usage``.

Every figure comes from ``usage_calls`` (a row per model call: its time, model,
tokens, cost and where the cost comes from), summed by the database: by time
bucket and model (:func:`buckets`, for days, weeks and months in any time
zone), by recording and model (:func:`by_recording`), or the calls themselves in
time order (:func:`calls`, for 5-hour blocks).  :class:`UsageFilter` narrows them
by time, model and the recordings' project (cwd), tags, name and source.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import func, select

from .api import Store, _store_errors
from .models import Recording, UsageCall

_U = UsageCall
_R = Recording


@dataclass(frozen=True)
class UsageFilter:
    """Which calls a report adds up (every condition must hold; empty: no condition)."""

    since_ns: int | None = None
    until_ns: int | None = None
    models: tuple[str, ...] = ()
    #: A part of the recording's working directory.
    project: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    name: str | None = None
    sources: tuple[str, ...] = ()

    @property
    def by_recording(self) -> bool:
        return bool(self.project or self.tags or self.name or self.sources)


class Figures(NamedTuple):
    """Tokens, cost and calls of one group (``cost`` adds the calls that have one)."""

    input: int
    output: int
    cache_read: int
    cache_creation: int
    cost: float
    calls: int


def _sums() -> tuple[Any, ...]:
    return (func.sum(_U.input_tokens), func.sum(_U.output_tokens),
            func.sum(_U.cache_read_tokens), func.sum(_U.cache_creation_tokens),
            func.sum(_U.cost_usd), func.count())


def _figures(row: Any, at: int) -> Figures:
    i, o, cr, cc, cost, n = row[at:at + 6]
    return Figures(int(i or 0), int(o or 0), int(cr or 0), int(cc or 0), float(cost or 0.0),
                   int(n))


def _where(stmt: Any, f: UsageFilter) -> Any:
    stmt = stmt.where(_U.duplicate.is_(False))  # a message two recordings hold, once
    if f.since_ns is not None:
        stmt = stmt.where(_U.t_ns >= f.since_ns)
    if f.until_ns is not None:
        stmt = stmt.where(_U.t_ns < f.until_ns)
    if f.models:
        stmt = stmt.where(_U.model.in_(list(f.models)))
    if f.by_recording:
        stmt = stmt.join(_R, _R.id == _U.recording_id)
        if f.project:
            stmt = stmt.where(_R.cwd.contains(f.project, autoescape=True))
        if f.name is not None:
            stmt = stmt.where(_R.name == f.name)
        if f.sources:
            stmt = stmt.where(_R.source.in_(list(f.sources)))
        for key, value in f.tags.items():
            stmt = stmt.where(_R.tags[key].as_string() == value)
    return stmt


def buckets(store: Store, f: UsageFilter, bucket_ns: int,
            ) -> list[tuple[int, str, str, Figures]]:
    """``(bucket start ns, model, cost source, figures)`` per time bucket of
    ``bucket_ns`` (Unix time, from 0) that has calls."""
    bucket = (_U.t_ns / bucket_ns).label("bucket")
    if store.engine.dialect.name == "postgresql":  # integer division, as on SQLite
        bucket = func.div(_U.t_ns, bucket_ns).label("bucket")
    stmt = _where(select(bucket, _U.model, _U.cost_source, *_sums()), f).group_by(
        bucket, _U.model, _U.cost_source)
    with _store_errors("read"), store.engine.connect() as conn:
        return [(int(row[0]) * bucket_ns, row[1], row[2], _figures(row, 3))
                for row in conn.execute(stmt)]


class RecordingUsage(NamedTuple):
    """A recording's figures per model and cost source, and what it is."""

    recording_id: str
    session_id: str | None
    name: str | None
    cwd: str
    source: str
    last_ns: int
    models: list[tuple[str, str, Figures]]


def by_recording(store: Store, f: UsageFilter) -> list[RecordingUsage]:
    """Each recording with calls: its figures per model and cost source, oldest
    last activity first."""
    stmt = _where(select(_U.recording_id, _U.model, _U.cost_source, *_sums(),
                         func.max(_U.t_ns)), f).group_by(
        _U.recording_id, _U.model, _U.cost_source)
    with _store_errors("read"), store.engine.connect() as conn:
        grouped: dict[str, tuple[int, list[tuple[str, str, Figures]]]] = {}
        for row in conn.execute(stmt):
            last, models = grouped.get(row[0], (0, []))
            models.append((row[1], row[2], _figures(row, 3)))
            grouped[row[0]] = (max(last, int(row[9])), models)
        info: dict[str, Any] = {}
        ids = list(grouped)
        for at in range(0, len(ids), 500):
            for row in conn.execute(select(_R.id, _R.cli_session_id, _R.name, _R.cwd, _R.source)
                                    .where(_R.id.in_(ids[at:at + 500]))):
                info[row[0]] = row
    out = [RecordingUsage(rid, info[rid][1], info[rid][2], info[rid][3] or "", info[rid][4],
                          last, models)
           for rid, (last, models) in grouped.items() if rid in info]
    return sorted(out, key=lambda r: (r.last_ns, r.recording_id))


class CallUsage(NamedTuple):
    """One call: its time, model, cost source and figures (``calls`` is 1)."""

    t_ns: int
    model: str
    cost_source: str
    figures: Figures


def calls(store: Store, f: UsageFilter) -> list[CallUsage]:
    """Every call that passes ``f``, in time order."""
    stmt = _where(select(_U.t_ns, _U.model, _U.cost_source, _U.input_tokens, _U.output_tokens,
                         _U.cache_read_tokens, _U.cache_creation_tokens, _U.cost_usd), f)
    with _store_errors("read"), store.engine.connect() as conn:
        return [CallUsage(int(t), model, source, Figures(int(i), int(o), int(cr), int(cc),
                                                         float(cost or 0.0), 1))
                for t, model, source, i, o, cr, cc, cost in conn.execute(
                    stmt.order_by(_U.t_ns))]
