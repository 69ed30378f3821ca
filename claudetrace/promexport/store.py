"""The figures of a store, asked of the store's API (:mod:`claudetrace.store.aggregate`).

:class:`StoreMetrics` answers a scrape with a few aggregate queries (statuses,
sources, totals), the per-model turns each recording stored, and tokens and cost
per model from the usage query layer (:mod:`claudetrace.store.usage`); the figures
derived from events (tool calls, control round trips, permission decisions) come
from the figures each recording stored as it ended, summed by label set and
bucket (its ``figures`` column; one record a call if stored before the sums), read
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
from ..model.summary import figure_records, is_records
from ..pauses import no_gc_pauses
from ..pricing import calls_cost
from ..store import Store, aggregate, unfolded
from ..store import usage as usage_query
from .exposition import Family, render
from .figures import (
    BYTES,
    COST,
    EVENTS,
    LAST_SESSION_START,
    METRICS,
    RUNNING_COST,
    RUNNING_TOKENS,
    SCRAPE_DURATION,
    SESSIONS,
    SESSIONS_STARTED,
    TOKENS,
    TURNS,
    UNKNOWN,
    EventFigures,
    add_records,
    add_sums,
    event_families,
)

#: Recordings read per query when computing event figures (bounded IN lists).
CHUNK: Final = aggregate.CHUNK
#: The lines the event figures need (tool uses and results, control, subagents).
FIGURE_TYPES: Final = (
    "assistant", "user", "system", "control_request", "control_response",
    "control_cancel_request",
)
_ZERO_MODEL: Final = {"turns": 0}


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
        self._usage_cost: dict[tuple[str, str], float] = {}
        self._usage_tokens: dict[tuple[str, str], int] = {}
        #: The models the running gauges have served (at 0 once their turns end).
        self._running_models: set[str] = set()

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
        for (model, source), value in sorted(self._usage_costs().items()):
            cost.add((model, source), value)
        for (model, kind), value in sorted(self._usage_tokens.items()):
            tokens.add((model, kind), value)
        for model, figures in sorted(models.items()):
            turns.add((model,), figures["turns"])
        # After the counters: a turn that ends between the two reads is in neither
        # then, never in both (see aggregate.running_unwritten).
        running_tokens, running_cost = self._running_families()
        n_events, n_bytes, newest = aggregate.totals(self.store)
        events, byte_count, last = Family(EVENTS), Family(BYTES), Family(LAST_SESSION_START)
        events.add((), n_events)
        byte_count.add((), n_bytes)
        if newest is not None:
            last.add((), newest / 1e9)
        return [sessions, started, last, cost, tokens, running_tokens, running_cost, turns,
                events, byte_count]

    def _running_families(self) -> tuple[Family, Family]:
        """What running sessions have used and the counters do not count yet: tokens
        by model and type, and their estimated cost by model (priced from each
        model's sum where the sum tells the price: :func:`~claudetrace.pricing.calls_cost`).
        Every model the counters have is served, at 0 while no running session has
        any (so ``tokens_total + running_tokens`` matches series), and so is one
        served once."""
        unwritten = aggregate.running_unwritten(self.store, self._clock())
        self._running_models.update(model or UNKNOWN for model, counts in unwritten.items()
                                    if any(counts))
        self._running_models.update(model for model, _kind in self._usage_tokens)
        tokens, cost = Family(RUNNING_TOKENS), Family(RUNNING_COST)
        for model in sorted(self._running_models):
            counts = unwritten.get(model, (0, 0, 0, 0, 0))
            # The tokens by type; the cost with the 1-hour cache writes at their rate.
            for kind, n in zip(TOKEN_TYPES, counts[:4], strict=True):
                tokens.add((model, kind), n)
            usd = calls_cost(model, *counts)
            if usd is not None:
                cost.add((model,), usd)
        return tokens, cost

    def _usage_costs(self) -> dict[tuple[str, str], float]:
        """Cost by model and source, and (in :attr:`_usage_tokens`) tokens by model
        and type: the totals of ``usage --json`` (one query on the store's usage
        calls, a message two recordings hold counted once), each series held at the
        highest value this server served so that a counter never goes down (a total
        the store lowers, recordings deleted, stays until the server restarts)."""
        cost: dict[tuple[str, str], float] = {}
        tokens: dict[tuple[str, str], int] = {}
        for model, source, f in usage_query.by_model(usage_query.store_reader(self.store),
                                                     usage_query.UsageFilter()):
            name = model or UNKNOWN
            if source in ("cli", "estimate"):
                cost[name, source] = cost.get((name, source), 0.0) + f.cost
            for kind, n in zip(TOKEN_TYPES, (f.input, f.output, f.cache_read,
                                             f.cache_creation), strict=True):
                tokens[name, kind] = tokens.get((name, kind), 0) + n
        for key, usd in cost.items():
            # To the nano-dollar, as costs are stored: a sum does not change in its
            # last bits when the store's rows come in another order (a fold rewrites them).
            usd = round(usd, 9)
            self._usage_cost[key] = max(self._usage_cost.get(key, 0.0), usd)
        for key, n in tokens.items():
            self._usage_tokens[key] = max(self._usage_tokens.get(key, 0), n)
        return self._usage_cost

    def _figures(
        self, states: list[tuple[str, bool, dict[str, Any], str]]
    ) -> tuple[EventFigures, dict[str, dict[str, Any]]]:
        """Event figures and per-model figures of every recording: the ended ones
        added to running totals once (from the figures they stored as they ended,
        else from their session folded again), the others folded afresh."""
        live_models: dict[str, dict[str, Any]] = {}
        # A recording an import stored usage first has no events to count until
        # its fold (its tokens and cost are the usage layer's already): counted
        # once folded, not remembered empty (claudetrace.store.unfolded).
        waiting = set(unfolded.pending(self.store))
        pending = {rid: (ended, models, source) for rid, ended, models, source in states
                   if rid not in self._folded and rid not in waiting}
        # A cold scrape decodes every ended recording's stored figures: without the
        # collector's passes over them.
        with no_gc_pauses():
            stored = aggregate.stored_figures(
                self.store, [rid for rid, (ended, _m, _s) in pending.items() if ended])
            for rid in [rid for rid in pending if rid in stored]:  # in order: the same sums
                # Stored as it ended, summed (or, stored before, its records): no
                # events read.
                figures = stored[rid]
                (add_records if is_records(figures) else add_sums)(self._folded_figures, figures)
                _ended, models, _source = pending.pop(rid)
                _add_models(self._folded_models, models)
                self._folded.add(rid)
            del stored
        live = EventFigures()
        for rid, events in aggregate.events_of(self.store, list(pending), FIGURE_TYPES):
            session = Session()
            session.add_many(events)
            ended, models, _source = pending[rid]
            add_records(self._folded_figures if ended else live, figure_records(session))
            if ended:
                _add_models(self._folded_models, models)
                self._folded.add(rid)
            else:
                _add_models(live_models, models)
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


def _add_models(into: dict[str, dict[str, Any]], models: dict[str, Any]) -> None:
    """Add one recording's per-model figures (its turns; tokens and cost are the
    usage query layer's)."""
    for model, figures in models.items():
        mine = into.setdefault(model or UNKNOWN, dict(_ZERO_MODEL))
        for key in _ZERO_MODEL:
            value = figures.get(key, 0) if isinstance(figures, dict) else 0
            mine[key] += value if isinstance(value, (int, float)) else 0
