"""Metric measurements derived from finished spans (pure; no OpenTelemetry import).

Every metric is a function of one finished span, so live export and backfill
record the same values.  Names and attributes follow the metric names contract
(see the README section "OpenTelemetry"); :data:`INSTRUMENTS` lists them with
their kind and unit; :mod:`.export` records them on the SDK's instruments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, NamedTuple

from . import conventions as c
from .records import Attributes, SpanRecord

InstrumentKind = Literal["counter", "histogram"]


@dataclass(frozen=True, slots=True)
class Instrument:
    """One OTLP instrument: name, kind, unit, description, bucket advice."""

    name: str
    kind: InstrumentKind
    unit: str
    description: str
    buckets: tuple[float, ...] | None = None


INSTRUMENTS: Final[tuple[Instrument, ...]] = (
    Instrument(c.METRIC_TOKEN_USAGE, "histogram", "{token}",
               "Tokens used per model call, by token type.", tuple(map(float, c.TOKEN_BUCKETS))),
    Instrument(c.METRIC_OPERATION_DURATION, "histogram", "s",
               "Duration of model calls.", c.DURATION_BUCKETS),
    Instrument(c.METRIC_SESSION_COST, "counter", "USD", "Cost of sessions as the CLI reports it."),
    Instrument(c.METRIC_SESSION_COUNT, "counter", "{session}", "Sessions by outcome."),
    Instrument(c.METRIC_TOOL_CALLS, "counter", "{call}", "Tool calls by tool and outcome."),
    Instrument(c.METRIC_TOOL_DURATION, "histogram", "s",
               "Tool call duration (tool_use to tool_result).", c.DURATION_BUCKETS),
    Instrument(c.METRIC_CONTROL_DURATION, "histogram", "s",
               "Control request round-trip time.", c.DURATION_BUCKETS),
    Instrument(c.METRIC_PERMISSION_DECISIONS, "counter", "{decision}",
               "can_use_tool answers by tool and decision."),
    Instrument(c.METRIC_PERMISSION_WAIT, "histogram", "s",
               "Time the CLI waited for the host's permission decision.", c.DURATION_BUCKETS),
)


class Measurement(NamedTuple):
    """One value to add to one instrument, with its attributes (a named tuple: a
    few are made for every span that ends, and a tuple is made fastest)."""

    instrument: str
    value: float
    attributes: Attributes


def _chat(span: SpanRecord) -> list[Measurement]:
    a = span.attributes
    base: Attributes = {c.GEN_AI_OPERATION_NAME: c.OP_CHAT, c.GEN_AI_PROVIDER_NAME: c.PROVIDER}
    for key in (c.GEN_AI_REQUEST_MODEL, c.GEN_AI_RESPONSE_MODEL):
        if isinstance(a.get(key), str):
            base[key] = a[key]
    out = []
    for token_type, key in (("input", c.GEN_AI_USAGE_INPUT_TOKENS),
                            ("output", c.GEN_AI_USAGE_OUTPUT_TOKENS)):
        value = a.get(key)
        if isinstance(value, int):
            out.append(Measurement(c.METRIC_TOKEN_USAGE, value,
                                   {**base, c.GEN_AI_TOKEN_TYPE: token_type}))
    duration = dict(base)
    if span.status == "error":
        error = a.get(c.ERROR_TYPE)
        duration[c.ERROR_TYPE] = error if isinstance(error, str) else "_OTHER"
    out.append(Measurement(c.METRIC_OPERATION_DURATION, span.duration_s, duration))
    return out


def _tool(span: SpanRecord) -> list[Measurement]:
    name = span.attributes.get(c.GEN_AI_TOOL_NAME, "unknown")
    outcome = span.attributes.get(c.TOOL_OUTCOME)
    if not isinstance(outcome, str):
        outcome = "error" if span.status == "error" else "ok"
    return [
        Measurement(c.METRIC_TOOL_CALLS, 1, {c.GEN_AI_TOOL_NAME: name, c.TOOL_OUTCOME: outcome}),
        Measurement(c.METRIC_TOOL_DURATION, span.duration_s, {c.GEN_AI_TOOL_NAME: name}),
    ]


def _request(span: SpanRecord) -> list[Measurement]:
    a = span.attributes
    outcome = a.get(c.CONTROL_OUTCOME, "unanswered")
    subtype = a.get(c.CONTROL_SUBTYPE, "unknown")
    out = [
        Measurement(c.METRIC_CONTROL_DURATION, span.duration_s, {
            c.CONTROL_SUBTYPE: subtype,
            c.CONTROL_INITIATOR: a.get(c.CONTROL_INITIATOR, "cli"),
            c.CONTROL_OUTCOME: outcome,
        })
    ]
    if subtype == "can_use_tool":
        name = a.get(c.GEN_AI_TOOL_NAME, "unknown")
        decision = a.get(c.PERMISSION_DECISION)
        if decision in ("allow", "deny"):
            out.append(Measurement(c.METRIC_PERMISSION_DECISIONS, 1,
                                   {c.GEN_AI_TOOL_NAME: name, c.PERMISSION_DECISION: decision}))
        if outcome == "success":
            out.append(Measurement(c.METRIC_PERMISSION_WAIT, span.duration_s,
                                   {c.GEN_AI_TOOL_NAME: name}))
    return out


def _root(span: SpanRecord) -> list[Measurement]:
    outcome = span.attributes.get(c.SESSION_OUTCOME, "ok")
    out = [Measurement(c.METRIC_SESSION_COUNT, 1, {c.SESSION_OUTCOME: outcome})]
    source = span.attributes.get(c.COST_SOURCE, "cli")
    for model, cost in sorted(span.costs.items()):
        if cost > 0:  # an estimate says so: never summed unmarked with the CLI's figures
            out.append(Measurement(c.METRIC_SESSION_COST, cost,
                                   {c.GEN_AI_REQUEST_MODEL: model, c.COST_SOURCE: source}))
    return out


def measurements(span: SpanRecord) -> list[Measurement]:
    """The metric values one finished span contributes (often none)."""
    kind = span.key.split("/", 1)[0].split("#", 1)[0]
    if kind == "chat":
        return _chat(span)
    if kind == "tool":
        return _tool(span)
    if kind == "request":
        return _request(span)
    if kind == "root":
        return _root(span)
    return []
