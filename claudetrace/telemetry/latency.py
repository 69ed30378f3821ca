"""The Stats page's latencies: how long each finished span took, by category.

:func:`latencies` classifies the spans :func:`~.spans.build_spans` builds
(:func:`category`: turn, model call, tool, permission wait, hook, MCP request,
control request) and gives each finished one's duration in milliseconds.  The
page shows percentiles of them over the newest sessions
(:func:`recent_latencies`).

Folding a session's spans reads its lines (the first
:data:`LATENCY_MAX_EVENTS`), which was most of the page's time on a team's
store.  An ended recording's lines do not change, so its samples are folded
once, the first time the page asks for them, and kept in the store
(:func:`claudetrace.store.aggregate.keep_latencies`) with the event count they
were folded from; later looks read them.  Nothing is computed on the recording
path (the proxy's indexer, ``import``): a burst costs what it cost.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ..errors import StoreError
from . import conventions as c
from .records import SpanRecord

if TYPE_CHECKING:
    from ..store import Store

#: Lines read per recording for latency spans (bounds the cost of a huge session).
LATENCY_MAX_EVENTS: Final = 50_000

Samples = dict[str, list[float]]


def category(span: SpanRecord) -> str:
    """The category of a span from the builder: ``session``, ``turn``, ``model``,
    ``tool``, ``subagent``, ``permission``, ``hook``, ``mcp`` or ``control``."""
    prefix = span.key.split("/", 1)[0].split("#", 1)[0]
    if prefix == "root":
        return "session"
    if prefix == "turn":
        return "turn"
    if prefix == "chat":
        return "model"
    if prefix == "tool":
        return "tool"
    if prefix == "agent":
        return "subagent"
    subtype = span.attributes.get(c.CONTROL_SUBTYPE)
    if subtype == "can_use_tool":
        return "permission"
    if subtype == "hook_callback":
        return "hook"
    if subtype == "mcp_message":
        return "mcp"
    return "control"


def latencies(spans: Iterable[SpanRecord]) -> Samples:
    """Durations in ms of finished spans, by :func:`category`."""
    out: Samples = {}
    for span in spans:
        if span.end_ns is None:
            continue
        out.setdefault(category(span), []).append((span.end_ns - span.start_ns) / 1e6)
    return out


def fold_latencies(store: Store, recording_id: str) -> Samples:
    """A recording's samples folded from its first :data:`LATENCY_MAX_EVENTS` lines."""
    from .spans import build_spans

    rec = store.get(recording_id)
    return latencies(
        build_spans(rec.info(), store.iter_events(recording_id, limit=LATENCY_MAX_EVENTS)))


def merge_samples(parts: Iterable[Mapping[str, Sequence[float]]]) -> Samples:
    """Latency samples of several recordings put together."""
    out: Samples = {}
    for part in parts:
        for key, values in part.items():
            out.setdefault(key, []).extend(values)
    return out


def recent_latencies(
    store: Store, recordings: Iterable[Any],
    fold: Callable[[Any], Mapping[str, Sequence[float]]] | None = None,
) -> Samples:
    """The samples of the ended ones of ``recordings`` (rows with ``id``,
    ``ended_ns`` and ``event_count``) put together: those kept in the store, the
    others folded by ``fold`` (given a row; default :func:`fold_latencies`) and
    kept for next time.  Keeping is best effort: a database that is busy or
    takes no writes keeps nothing, and the samples are the same either way."""
    # Here, not at the top: the HTML report's waterfall uses :func:`category`
    # without the store's queries.
    from ..store.aggregate import keep_latencies, stored_latencies

    ended = [r for r in recordings if r.ended_ns is not None]
    kept = stored_latencies(store, {r.id: r.event_count for r in ended})
    folder = fold or (lambda r: fold_latencies(store, r.id))
    parts: list[Mapping[str, Sequence[float]]] = []
    new: dict[str, tuple[int, Mapping[str, Sequence[float]]]] = {}
    for r in ended:
        if r.id in kept:
            parts.append(kept[r.id])
            continue
        folded = folder(r)
        new[r.id] = (r.event_count, folded)
        parts.append(folded)
    with contextlib.suppress(StoreError):  # folded again next time
        keep_latencies(store, new)
    return merge_samples(parts)
