"""The Stats page's latencies: how long each finished span took, by category.

:func:`latencies` classifies the spans :func:`~.spans.build_spans` builds
(:func:`category`: turn, model call, tool, permission wait, hook, MCP request,
control request) and gives each finished one's duration in milliseconds.  The
page shows percentiles of them over the newest sessions
(:func:`recent_latencies`).

Folding a session's spans reads its lines (the first
:data:`LATENCY_MAX_EVENTS`), which was most of the page's time on a team's
store.  An ended recording's lines do not change, so its samples are folded
where the lines are in hand and kept in the store's ``latencies`` column with
the event count they were folded from (:class:`LatencyFold`): by the proxy's
indexer as it stores them, and by ``import`` of a cassette.  A recording
stored without them (by an earlier version, or cut short) is folded by
``db pack`` (:func:`catch_up`, in batches), or else the first time the page
asks for it (:func:`recent_latencies`), and kept; later looks read them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ..errors import StoreError
from . import conventions as c
from .records import SpanRecord

if TYPE_CHECKING:
    from ..model.events import Event
    from ..recording import RecordingInfo
    from ..store import Store

#: Lines read per recording for latency spans (bounds the cost of a huge session).
LATENCY_MAX_EVENTS: Final = 50_000
#: Recordings :func:`catch_up` folds in one go (one short write transaction).
CATCH_UP_BATCH: Final = 50

Samples = dict[str, list[float]]


#: The category of a span by its key's prefix (``chat#3/…`` → ``model``).
CATEGORY_OF_PREFIX: Final[Mapping[str, str]] = {
    "root": "session", "turn": "turn", "chat": "model", "tool": "tool", "agent": "subagent"}
#: The category of any other span (a control round trip) by its subtype.
CATEGORY_OF_SUBTYPE: Final[Mapping[Any, str]] = {
    "can_use_tool": "permission", "hook_callback": "hook", "mcp_message": "mcp"}


def category(span: SpanRecord) -> str:
    """The category of a span from the builder: ``session``, ``turn``, ``model``,
    ``tool``, ``subagent``, ``permission``, ``hook``, ``mcp`` or ``control``."""
    prefix = span.key.split("/", 1)[0].split("#", 1)[0]
    found = CATEGORY_OF_PREFIX.get(prefix)
    if found is not None:
        return found
    return CATEGORY_OF_SUBTYPE.get(span.attributes.get(c.CONTROL_SUBTYPE), "control")


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


#: The kinds of line into the CLI that start or end a span.
SPANNED_INPUT: Final = frozenset(
    {"user", "control_request", "control_response", "control_cancel_request"})


class LatencyFold:
    """A recording's samples folded as its lines are stored (the indexer, an
    import): fed each batch in order, it spans the first
    :data:`LATENCY_MAX_EVENTS` lines, as :func:`fold_latencies` reads them back,
    and gives the ``latencies`` column of the ended recording
    (:meth:`column`), so the Stats page reads them instead of folding them."""

    def __init__(self, info: RecordingInfo) -> None:
        from .spans import SpanBuilder

        # Each span's duration taken as it ends, the span let go: memory holds the
        # spans still open, not every span of the first lines.
        self._samples: Samples = {}
        self._builder = SpanBuilder(info, on_end=self._sample)
        self._left = LATENCY_MAX_EVENTS

    def _sample(self, span: SpanRecord) -> None:
        for key, values in latencies((span,)).items():
            self._samples.setdefault(key, []).extend(values)

    def feed(self, events: Sequence[Event]) -> None:
        """The next lines stored, in order."""
        if self._left <= 0 or not events:
            return
        part = events[:self._left] if len(events) > self._left else events
        self._left -= len(part)
        # Of the lines into the CLI (and its stderr) only a user message and a
        # control request, answer or cancel start or end a span; the others add a
        # span event (no duration): left out, but for their time.
        spanned = [e for e in part if e.direction == "out" or (
            e.direction == "in" and (e._fields or e.fields).type in SPANNED_INPUT)]
        if spanned:
            self._builder.feed_many(spanned)
        self._builder.advance_to(max(e.t_ns for e in part))

    def column(self, info: RecordingInfo, event_count: int) -> dict[str, Any]:
        """The ``latencies`` column of the recording ``info`` (as stored once it
        ended: its end is the root span's) of ``event_count`` lines in all."""
        self._builder.close(info)
        return {"events": event_count, "samples": self._samples}


def catch_up(store: Store, batch: int = CATCH_UP_BATCH,
             progress: Callable[[int], None] | None = None) -> int:
    """Fold and keep the samples of every ended recording stored without them
    (by an earlier version, or whose fold was cut short), ``batch`` recordings
    a transaction (a short write each), newest first; returns how many were
    kept.  ``db pack`` runs it.  ``progress``: told the count after each batch."""
    from ..store.aggregate import keep_latencies, unfolded_latencies

    kept, after = 0, None
    while todo := unfolded_latencies(store, batch, after):
        kept += keep_latencies(store, {rid: (events, fold_latencies(store, rid))
                                       for rid, events in todo})
        after = todo[-1][0]
        if progress is not None:
            progress(kept)
    return kept


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
