"""A session as the summary columns of ``recordings``, so lists never read events.

The recorder (live, after every batch) and ``import`` (once) store what
:func:`summary_columns` computes from the :class:`~.session.Session` they fold;
:func:`outcome_columns` adds the status once the recording has ended, and
:func:`figure_records` the records the Prometheus figures are made of, and
:func:`figure_sums` those records summed by label set and histogram bucket (what
an ended recording stores, so a scrape's work grows with sessions, not tool calls).
:func:`usage_warnings` says what a recording keeps among its warnings of the
damaged token counts it read.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from typing import Any, Final

from .parts import ModelCall
from .session import Cost, Outcome, Session, Turn
from .usage import Usage


def usage_warnings(session: Session) -> list[str]:
    """The warning a recording keeps when lines of it had damaged token counts
    (:mod:`.usage`: each counted 0; the lines are stored as they were), else none."""
    n = len(session.damaged_usage)
    if not n:
        return []
    lines = "1 line" if n == 1 else f"{n:,} lines"
    first = min(session.damaged_usage)
    return [f"{lines} with a damaged token count (negative, not a whole number, or "
            f"over 2^40; the first at event {first}): counted as 0"]


def model_figures(session: Session, cost: Cost | None = None) -> dict[str, dict[str, Any]]:
    """Per model: tokens by type, cost, calls and turns answered (the ``models`` column;
    ``cache_creation_1h``, the 1-hour part of ``cache_creation``, where there is one).

    Tokens include what the CLI counted for calls the host never saw (a
    subagent's); ``calls`` counts the calls the host saw, as ``model_calls`` does.
    ``cost_usd`` is the CLI's, else the price table's (``cost``, as
    :meth:`Session.cost` gives it), None for a model without a price.
    """
    cost = cost or session.cost()
    costs = cost.by_model
    unpriced = 0.0 if cost.source == "cli" else None  # the CLI's silence is 0; the table's is not
    calls: dict[str, int] = {}
    for call in session.calls.values():
        if call.observed:  # as model_calls counts them: the calls the host saw
            model = session.model_of(call)
            calls[model] = calls.get(model, 0) + 1
    turns: dict[str, int] = {}
    for turn in session.turns:
        model = turn_model(turn) or session.model or "unknown"
        turns[model] = turns.get(model, 0) + 1
    figures: dict[str, dict[str, Any]] = {}
    by_model = session.usage_by_model  # a sum over every call: once
    for model in sorted({*by_model, *costs, *turns}):
        usage = by_model.get(model) or Usage()
        figures[model] = {**usage.as_dict(), "cost_usd": costs.get(model, unpriced),
                          "calls": calls.get(model, 0), "turns": turns.get(model, 0)}
        if usage.cache_creation_1h:  # the part of cache_creation priced at the 1-hour rate
            figures[model]["cache_creation_1h"] = usage.cache_creation_1h
    return figures


def turn_model(turn: Turn) -> str | None:
    """The model that answered a turn: its first call's in the main agent."""
    for call in turn.calls:
        if call.lane is None and call.observed and call.model:
            return call.model
    return next((call.model for call in turn.calls if call.model), None)


def cli_shares(session: Session, cost: Cost, from_turn: int = 1) -> dict[str, float]:
    """Each call's share of the CLI's reported cost, by call id (none where the CLI
    reported no cost): a turn's cost for a model is shared among the turn's calls
    of that model in proportion to their tokens, so the calls add up to the CLI's
    figure.  A turn's cost is what the CLI's running total grew by since the last
    it reported, so it also covers the calls of the turns before it that reported
    none (a transcript's ``cost-state`` written at its end): those share it too.
    ``from_turn``: of the turns of that number on only."""
    shares: dict[str, float] = {}
    if cost.source != "cli":
        return shares
    uncosted: list[ModelCall] = []  # calls of turns the CLI's total had not covered yet
    for turn in session.turns[from_turn - 1:]:
        if not turn.cost_by_model:
            uncosted.extend(turn.calls)
            continue
        for model, spent in turn.cost_by_model.items():
            calls = [c for c in (*uncosted, *turn.calls) if session.model_of(c) == model]
            weights = [float(c.usage.total) for c in calls]
            whole = sum(weights) or 1.0
            for call, weight in zip(calls, weights, strict=True):
                shares[call.id] = spent * weight / whole
        uncosted = [c for c in uncosted if session.model_of(c) not in turn.cost_by_model]
    return shares


def call_cost(session: Session, call: ModelCall, cost: Cost,
              shares: Mapping[str, float]) -> tuple[float | None, str]:
    """What ``call`` cost and where that comes from (``cli``, ``estimate`` or
    ``unknown``), as ``usage_calls`` holds it: its share of the CLI's cost
    (``shares``: :func:`cli_shares`), else its price by the table (None: a model
    without a price)."""
    if call.id in shares:
        return shares[call.id], "cli"
    priced = cost.by_call
    # Priced once: by Session.cost where it priced this very call.
    price = (priced[call.id] if call.id in priced and session.calls.get(call.id) is call
             else session.call_price(call))
    return price, "unknown" if price is None else "estimate"


def usage_rows(session: Session, started_ns: int, cost: Cost | None = None, *,
               from_turn: int = 1, ended_turns: bool = False) -> list[tuple[Any, ...]]:
    """Per model call with tokens: ``(call id, Unix time ns (of the line whose usage
    counts), model, input, output,
    cache read, cache creation, cost or None, cost source, 1-hour cache creation)``
    (``usage_calls``),
    of the calls of turn ``from_turn`` on (``ended_turns``: of the turns that
    ended only; a call's figures change only until its turn's result, and the
    live indexer writes each turn's once it ended).  Each call's cost is
    :func:`call_cost`'s (the price table is not loaded where the CLI reported
    the cost: the live indexer writes these).
    """
    cost = cost or session.cost()
    shares = cli_shares(session, cost, from_turn)
    rows = []
    chosen = (list(session.calls.values()) if from_turn <= 1 and not ended_turns else
              [c for turn in session.turns[from_turn - 1:] if turn.done or not ended_turns
               for c in turn.calls])
    for call in chosen:
        usage = call.usage
        if not usage:
            continue
        price, source = call_cost(session, call, cost, shares)
        at = call.start_ns if call.usage_ns is None else call.usage_ns
        rows.append((call.id, call.wall_ns or started_ns + at, session.model_of(call),
                     usage.input, usage.output, usage.cache_read, usage.cache_creation,
                     price, source, usage.cache_creation_1h))
    return rows


def summary_columns(session: Session, *, estimate: bool = True, started_ns: int | None = None,
                    from_turn: int = 1, ended_turns: bool = False) -> dict[str, Any]:
    """The summary columns of ``recordings`` for ``session`` as it stands.

    ``cost_usd`` is 0 where ``cost_source`` is ``unknown`` (the column holds a
    number; views show no figure).  ``estimate``: see :meth:`Session.cost`.
    With the recording's start (``started_ns``), also its calls' rows of
    ``usage_calls`` (:func:`usage_rows`, from turn ``from_turn`` on, of the turns
    that ended only if ``ended_turns``), under that key: they replace the
    recording's rows of the same calls.
    """
    usage = session.usage
    last = session.last_result
    cost = session.cost(estimate=estimate)
    columns: dict[str, Any] = {
        "event_count": session.event_count,
        "byte_count": session.byte_count,
        "turns": len(session.turns),
        "num_turns": session.cli_num_turns,
        "model_calls": sum(1 for call in session.calls.values() if call.observed),
        "tool_calls": len(session.tools),
        "tool_errors": session.tool_errors,
        "input_tokens": usage.input,
        "output_tokens": usage.output,
        "cache_read_tokens": usage.cache_read,
        "cache_creation_tokens": usage.cache_creation,
        "cost_usd": cost.usd or 0.0,
        "cost_source": cost.source,
        "is_error": session.is_error,
        "result_subtype": None if last is None else last.result_subtype,
        "models": model_figures(session, cost),
    }
    if started_ns is not None:
        columns["usage_calls"] = usage_rows(session, started_ns, cost, from_turn=from_turn,
                                            ended_turns=ended_turns)
    return columns


def figure_records(session: Session) -> dict[str, list[list[Any]]]:
    """What the store's Prometheus figures are made of, one record a tool call and
    one a control round trip (the ``figures`` column, stored when a recording
    ends, so a scrape reads it instead of folding the recording's events again):
    ``tools``: ``[name, outcome, duration_ns]``; ``controls``: ``[subtype,
    initiator, outcome, duration_ns, kind, tool_name, decision]`` (durations
    None when not known)."""
    return {
        "tools": [[tool.name, tool.outcome, tool.duration_ns] for tool in session.tools.values()],
        "controls": [[trip.subtype, trip.initiator, trip.outcome, trip.duration_ns, trip.kind,
                      trip.tool_name, trip.decision] for trip in session.controls],
    }


#: Histogram bucket upper bounds in seconds of the Prometheus figures (tool runs
#: and permission waits can take minutes: a person answers those).
BUCKETS: Final[tuple[float, ...]] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip
#: The label value when a tool is not known.
UNKNOWN: Final = "unknown"
#: The counters of :func:`figure_sums` (rows ``[*labels, n]``).
SUM_COUNTERS: Final = ("tool_calls", "control_requests", "permission_decisions")
#: Its histograms (rows ``[*labels, sum_ns, [bucket, count, bucket, count…]]``: the
#: buckets observed, by index in :data:`BUCKETS`, ``len(BUCKETS)`` for ``+Inf``).
SUM_HISTOGRAMS: Final = ("tool_duration", "control_duration", "permission_wait")


def figure_sums(session: Session) -> dict[str, list[list[Any]]]:
    """The ``figures`` column of an ended recording: :func:`sum_figure_records` of its
    :func:`figure_records`."""
    return sum_figure_records(figure_records(session))


def sum_figure_records(records: Mapping[str, Any]) -> dict[str, list[list[Any]]]:
    """One recording's :func:`figure_records` summed by label set: tool calls by
    name and outcome, control requests by subtype, initiator and outcome
    (``cancelled`` counted as ``unanswered``), permission decisions by tool; and
    histograms over :data:`BUCKETS` of the tool, control round-trip and permission
    wait durations (whole nanoseconds summed, so sums add up alike in any order).

    A tool call is timed from its ``tool_use`` to its ``tool_result``; a control
    round trip from request to answer (zero when the answer was recorded first).
    """
    counters: dict[str, dict[tuple[Any, ...], int]] = {name: {} for name in SUM_COUNTERS}
    hists: dict[str, dict[tuple[Any, ...], list[Any]]] = {name: {} for name in SUM_HISTOGRAMS}
    tool_calls, tool_duration = counters["tool_calls"], hists["tool_duration"]
    for name, tool_outcome, duration_ns in records.get("tools") or ():  # most records
        key = (name, tool_outcome)
        tool_calls[key] = tool_calls.get(key, 0) + 1
        if duration_ns is not None:
            _observe(tool_duration, (name,), duration_ns)
    requests, decisions = counters["control_requests"], counters["permission_decisions"]
    for subtype, initiator, trip_outcome, duration_ns, kind, tool_name, decision in (
            records.get("controls") or ()):
        outcome = "unanswered" if trip_outcome in ("unanswered", "cancelled") else trip_outcome
        labels = (subtype, initiator, outcome)
        requests[labels] = requests.get(labels, 0) + 1
        if duration_ns is None or outcome == "unanswered":
            continue
        _observe(hists["control_duration"], labels, duration_ns)
        if kind == "permission":
            name = tool_name or UNKNOWN
            _observe(hists["permission_wait"], (name,), duration_ns)
            if decision in ("allow", "deny"):
                decisions[name, decision] = decisions.get((name, decision), 0) + 1
    out: dict[str, list[list[Any]]] = {}
    for field, counted in counters.items():
        out[field] = [[*labels, n] for labels, n in counted.items()]
    for field, observed in hists.items():
        out[field] = [[*labels, summed[0], [x for i in sorted(summed[1])
                                             for x in (i, summed[1][i])]]
                      for labels, summed in observed.items()]
    return out


def is_records(figures: Mapping[str, Any]) -> bool:
    """Whether a stored ``figures`` column holds :func:`figure_records` (as stored
    before the sums were: one row a tool call), not :func:`figure_sums`."""
    return "tools" in figures or "controls" in figures


def tool_call_counts(figures: Mapping[str, Any]) -> Iterator[tuple[Any, Any, int]]:
    """``(tool name, outcome, calls)`` of a stored ``figures`` column, records or sums."""
    if is_records(figures):
        for name, outcome, _duration in figures.get("tools") or ():
            yield name, outcome, 1
    else:
        for name, outcome, n in figures.get("tool_calls") or ():
            yield name, outcome, n


def _observe(hists: dict[tuple[Any, ...], list[Any]], labels: tuple[Any, ...],
             duration_ns: int) -> None:
    summed = hists.get(labels)
    if summed is None:
        summed = hists[labels] = [0, {}]
    summed[0] += duration_ns
    bucket = bisect.bisect_left(BUCKETS, duration_ns / 1e9)
    summed[1][bucket] = summed[1].get(bucket, 0) + 1


def outcome_columns(outcome: Outcome) -> dict[str, Any]:
    """The status columns of an ended recording."""
    return {"outcome": outcome.status, "outcome_reason": outcome.reason or None}
