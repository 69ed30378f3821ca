"""The figures of a store, asked of the store's API (:mod:`claudetrace.store.aggregate`).

:class:`StoreMetrics` answers a scrape with a few aggregate queries (statuses,
sources, totals) and the per-model figures each recording stored; the figures
derived from events (tool calls, control round trips, permission decisions) come
from the records each recording stored as it ended (its ``figures`` column), read
once (they never change again); a recording that ended without them (stored
before migration 0006) and one still running have their session model folded
from their events, once and on every scrape respectively.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Final

from ..errors import StoreError
from ..model import STATUSES, TOKEN_TYPES, Session
from ..store import Store, aggregate
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
    EventFigures,
    event_families,
    record_figures,
    session_figures,
)

#: Recordings read per query when computing event figures (bounded IN lists).
CHUNK: Final = aggregate.CHUNK
#: The lines the event figures need (tool uses and results, control, subagents).
FIGURE_TYPES: Final = (
    "assistant", "user", "system", "control_request", "control_response",
    "control_cancel_request",
)
_ZERO_MODEL: Final = {**dict.fromkeys(TOKEN_TYPES, 0), "cli": 0.0, "estimate": 0.0,
                      "turns": 0}


class StoreMetrics:
    """Computes the families from a store, remembering the figures of ended recordings.

    Thread-safe: concurrent scrapes are serialised.
    """

    def __init__(self, store: Store, *, clock: Callable[[], int] = time.time_ns) -> None:
        self.store = store
        self._clock = clock
        self._lock = threading.Lock()
        self._folded: set[str] = set()
        self._folded_figures = EventFigures()
        self._folded_models: dict[str, dict[str, Any]] = {}

    def collect(self) -> list[Family]:
        """All families of :data:`METRICS`, freshly computed."""
        with self._lock:
            started = time.perf_counter()
            try:
                states = aggregate.recording_states(self.store)
                figures, models = self._figures(states)
                families = self._summary_families(models)
            except StoreError as exc:
                raise StoreError(f"cannot read the store: {exc}") from exc
            families += event_families(figures)
            scrape = Family(SCRAPE_DURATION)
            scrape.add((), time.perf_counter() - started)
            families.append(scrape)
        order = {spec.name: i for i, spec in enumerate(METRICS)}
        return sorted(families, key=lambda fam: order[fam.spec.name])

    def exposition(self, *, openmetrics: bool = False) -> str:
        """The text exposition (or OpenMetrics) of :meth:`collect`."""
        return render(self.collect(), openmetrics=openmetrics)

    def _summary_families(self, models: dict[str, dict[str, Any]]) -> list[Family]:
        counts = aggregate.status_counts(self.store, self._clock())
        sessions = Family(SESSIONS)
        for name in STATUSES:
            sessions.add((name,), counts.get(name, 0))
        started = Family(SESSIONS_STARTED)
        for source, n in aggregate.source_counts(self.store):
            started.add((source or UNKNOWN,), n)
        cost, tokens, turns = Family(COST), Family(TOKENS), Family(TURNS)
        for model, figures in sorted(models.items()):
            for source in ("cli", "estimate"):
                if figures[source] or source == "cli":
                    cost.add((model, source), figures[source])
            for kind in TOKEN_TYPES:
                tokens.add((model, kind), figures[kind])
            turns.add((model,), figures["turns"])
        n_events, n_bytes, newest = aggregate.totals(self.store)
        events, byte_count, last = Family(EVENTS), Family(BYTES), Family(LAST_SESSION_START)
        events.add((), n_events)
        byte_count.add((), n_bytes)
        if newest is not None:
            last.add((), newest / 1e9)
        return [sessions, started, last, cost, tokens, turns, events, byte_count]

    def _figures(
        self, states: list[tuple[str, bool, dict[str, Any], str]]
    ) -> tuple[EventFigures, dict[str, dict[str, Any]]]:
        """Event figures and per-model figures of every recording: the ended ones
        added to running totals once (from the figures they stored as they ended,
        else from their session folded again), the others folded afresh."""
        live_models: dict[str, dict[str, Any]] = {}
        pending = {rid: (ended, models, source) for rid, ended, models, source in states
                   if rid not in self._folded}
        stored = aggregate.stored_figures(
            self.store, [rid for rid, (ended, _m, _s) in pending.items() if ended])
        for rid in [rid for rid in pending if rid in stored]:  # in order: the same sums
            # Stored as it ended: no events read.
            self._folded_figures.merge(record_figures(stored[rid]))
            _ended, models, source = pending.pop(rid)
            _add_models(self._folded_models, models, source)
            self._folded.add(rid)
        live = EventFigures()
        for rid, events in aggregate.events_of(self.store, list(pending), FIGURE_TYPES):
            session = Session()
            session.add_many(events)
            figures = session_figures(session)
            ended, models, source = pending[rid]
            if ended:
                self._folded_figures.merge(figures)
                _add_models(self._folded_models, models, source)
                self._folded.add(rid)
            else:
                live.merge(figures)
                _add_models(live_models, models, source)
        total = EventFigures()
        total.merge(self._folded_figures)
        total.merge(live)
        every: dict[str, dict[str, Any]] = {}
        for added in (self._folded_models, live_models):
            for model, summed in added.items():
                mine = every.setdefault(model, dict(_ZERO_MODEL))
                for key in _ZERO_MODEL:
                    mine[key] += summed[key]
        return total, every


def _add_models(into: dict[str, dict[str, Any]], models: dict[str, Any], source: str) -> None:
    """Add one recording's per-model figures; its cost goes under its source
    (``cli`` or ``estimate``: an estimate is never counted as the CLI's)."""
    for model, figures in models.items():
        mine = into.setdefault(model or UNKNOWN, dict(_ZERO_MODEL))
        for key in _ZERO_MODEL:
            name = "cost_usd" if key == source else key
            if key in ("cli", "estimate") and key != source:
                continue
            value = figures.get(name, 0) if isinstance(figures, dict) else 0
            mine[key] += value if isinstance(value, (int, float)) else 0
