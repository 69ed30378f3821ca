"""What live span building costs per event (called by benchmarks, not by tests).

The proxy's recorder parses every line once anyway (for the store), so the cost
measured here is the builder's own work on parsed events, plus encoding finished
spans as OTLP protobuf when ``with_export`` is set (live export does that on the
exporter's thread, along with the network I/O).
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..events import Event
from ..recording import RecordingInfo
from .spans import SpanBuilder


def streaming_session(turns: int = 20, deltas: int = 200) -> list[Event]:
    """A synthetic streaming session: per turn a user line, one streamed message, a result."""
    events: list[Event] = []
    t = 0

    def add(direction: str, obj: dict[str, Any]) -> None:
        nonlocal t
        t += 50_000
        events.append(Event(len(events), direction, t, json.dumps(obj).encode()))  # type: ignore[arg-type]

    for n in range(turns):
        mid = f"msg_{n}"
        add("in", {"type": "user", "message": {"role": "user", "content": f"turn {n}"}})
        add("out", {"type": "system", "subtype": "status", "status": "requesting"})
        add("out", {"type": "stream_event", "event": {"type": "message_start", "message": {
            "id": mid, "model": "claude-x", "usage": {"input_tokens": 10}}}})
        add("out", {"type": "stream_event", "event": {"type": "content_block_start", "index": 0,
                                                      "content_block": {"type": "text"}}})
        for i in range(deltas):
            add("out", {"type": "stream_event", "event": {
                "type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": f"word{i} "}}})
        add("out", {"type": "assistant", "message": {"id": mid, "model": "claude-x",
                                                     "content": [{"type": "text", "text": "…"}]}})
        add("out", {"type": "stream_event", "event": {"type": "content_block_stop", "index": 0}})
        add("out", {"type": "stream_event", "event": {"type": "message_delta",
                                                      "delta": {"stop_reason": "end_turn"},
                                                      "usage": {"output_tokens": deltas}}})
        add("out", {"type": "stream_event", "event": {"type": "message_stop"}})
        add("out", {"type": "result", "subtype": "success", "is_error": False,
                    "total_cost_usd": 0.001 * (n + 1), "usage": {"input_tokens": 10}})
    return events


def span_building_cost(
    events: list[Event] | None = None, *, repeat: int = 5, with_export: bool = False
) -> dict[str, float]:
    """Best-of-``repeat`` nanoseconds per event of live span building.

    Events are parsed before timing starts, as the recorder does before any sink.
    """
    events = events if events is not None else streaming_session()
    for event in events:
        event.fields  # noqa: B018 - parse outside the timed loop, as the recorder does
    convert = None
    if with_export:
        from .config import OtelSettings
        from .export import OtlpExporter

        encoder = OtlpExporter(OtelSettings("http/protobuf", None, None)).trace_encoder()

        def convert(span: Any) -> None:
            encoder.span(span)  # what the export thread does with each span

    best = float("inf")
    spans = 0
    for _ in range(repeat):
        info = RecordingInfo(id="01BENCH", argv=[], started_ns=1, ended_ns=10**12, exit_code=0)
        ended: list[Any] = []
        sink = ended.append if convert is None else convert
        builder = SpanBuilder(info, on_end=sink)
        began = time.perf_counter_ns()
        for event in events:
            builder.feed(event)
        builder.close(info)
        best = min(best, time.perf_counter_ns() - began)
        spans = len(ended) if convert is None else spans
    return {"events": float(len(events)), "ns_per_event": best / len(events), "spans": float(spans)}


def line_parse_cost(events: list[Event] | None = None, *, repeat: int = 5) -> float:
    """Nanoseconds per event to parse the lines (the recorder's share, for scale)."""
    events = events if events is not None else streaming_session()
    best = float("inf")
    for _ in range(repeat):
        fresh = [Event(e.seq, e.direction, e.t_ns, e.data) for e in events]
        began = time.perf_counter_ns()
        for event in fresh:
            event.fields  # noqa: B018
        best = min(best, time.perf_counter_ns() - began)
    return best / len(events)
