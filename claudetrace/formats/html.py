"""The one-file HTML report of a recording (``claudetrace export --format html``).

:func:`report_data` shapes a recording into compact JSON: the summary
(:mod:`.facts`), the conversation (:func:`claudetrace.ui.conversation.build_conversation`),
the timeline waterfall (the telemetry spans, :func:`claudetrace.ui.timeline.timeline_rows`),
the control plane (:func:`claudetrace.ui.controlplane.control_rows`) and tokens and cost
per model (the session model, :mod:`claudetrace.model`).  :func:`render_report`
embeds that JSON in a page whose inline script draws it in the browser, so the
file holds each text once instead of markup per line, and stays about the size of
the recording's cassette.

The page makes no network request of any kind: no external script, style, font or
image, and a Content-Security-Policy that forbids them, so it works from
``file://`` and offline.  Every recorded text is inserted as text, never as HTML.
"""

from __future__ import annotations

import bisect
import datetime as dt
import json
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from importlib import resources
from itertools import islice
from typing import IO, TYPE_CHECKING, Any

from .._version import __version__
from ..display import visible_data, visible_text
from ..model import Cost, Session
from ..model.events import Event
from ..model.summary import model_figures
from ..pricing import dollars
from ..recording import RecordingInfo
from ..sanitize import Sanitizer
from ..store.links import NO_LINKS, Links
from ..telemetry import conventions as c
from ..telemetry.spans import SpanBuilder
from ..ui import outline, present
from ..ui.controlplane import session_control_rows
from ..ui.conversation import Conversation, Decision, Item
from ..ui.find import input_text, js_differs
from ..ui.markdown import markdown_tree
from ..ui.timeline import TimelineRow, timeline_rows
from .facts import NO_COST, has_process, money

if TYPE_CHECKING:
    from ..usage import Totals

#: Where the viewer's JSON goes in the template.
_DATA_MARK = "/*REPORT-DATA*/"
_TITLE_MARK = "<!--REPORT-TITLE-->"
_MISSING = object()
#: Events folded at a time (then let go).
_SLICE = 1024
#: Longest attribute value kept in a timeline bar's details.
_DETAIL_LIMIT = 300


def secret_redactor(environ: dict[str, str] | None = None) -> Sanitizer:
    """The record-time secret redaction (patterns and secret environment values), no paths."""
    return Sanitizer.for_recording(environ=dict(os.environ if environ is None else environ))


def _round(seconds: float) -> float:
    return round(seconds, 4)


def _decision(d: Decision) -> list[Any]:
    return [d.kind, d.name, d.outcome]


class _Items:
    """Conversation items as ``[kind, t, text, is_error]`` plus an object of extras:
    a tool call's (``id``, ``in``, ``out``, ``err``, ``dec``, ``ch``, ``todo``, ``sub``), a
    decision's (``dec``), an answer's Markdown tree (``md``, the text then left out:
    the page reads it from the tree), the figures of the model call it starts
    (``fig``), what a user line is (``lbl``), an abandoned branch (``ab``), its turn
    (``tn``) where the page's reckoning by time (``turns``) would say another."""

    def __init__(self, figures: dict[str, present.CallFigures],
                 prompts: dict[int, outline.PromptFigures], session: Session) -> None:
        self.figures = figures
        self.prompts = prompts
        # An item's turn, as the session page's find box counts it: by line.
        self.turn_seqs = [turn.start_seq for turn in session.turns]
        self.turn_times = [_round(turn.start_ns / 1e9) for turn in session.turns]
        self.told: set[str] = set()
        #: Where each item is among the rows: its index, then its index among its
        #: tool call's children, and so on (by ``id()`` of the item).
        self.paths: dict[int, list[int]] = {}

    def rows(self, items: list[Item], path: list[int] | None = None) -> list[list[Any]]:
        """The rows of ``items`` (at ``path`` among the rows)."""
        return [self.row(item, [*(path or []), at]) for at, item in enumerate(items)]

    def refer(self, parts: list[tuple[Item, str]]) -> list[list[Any]]:
        """``[path, part]`` of each item shown (:class:`claudetrace.ui.outline.SpanIO`)."""
        return [[self.paths[id(item)], part] for item, part in parts if id(item) in self.paths]

    def row(self, item: Item, path: list[int]) -> list[Any]:
        self.paths[id(item)] = path
        row: list[Any] = [item.kind, _round(item.t), item.text, 1 if item.is_error else 0]
        extra: dict[str, Any] = {}
        turn = bisect.bisect_right(self.turn_seqs, item.seq)
        if turn != bisect.bisect_right(self.turn_times, row[1]):
            extra["tn"] = turn
        if item.tool is not None:
            tool = item.tool
            extra["id"] = tool.tool_use_id
            if tool.input is not None:
                extra["in"] = tool.input
                if js_differs(tool.input):  # the text find counts in and the page shows
                    extra["it"] = input_text(tool.input)
            if tool.answered:
                extra["out"] = tool.result or ""
                if tool.is_error:
                    extra["err"] = 1
            if tool.decisions:
                extra["dec"] = [_decision(d) for d in tool.decisions]
            if tool.children:
                extra["ch"] = self.rows(tool.children, path)
            todo = present.todos(tool.name, tool.input)
            if todo is not None:
                extra["todo"] = todo
            task = present.subagent_task(tool.name, tool.input)
            if task is not None:
                extra["sub"] = [task[0], task[1]]  # the prompt is in the input
        elif item.decision is not None:
            extra["dec"] = [_decision(item.decision)]
        if item.markdown:
            tree = markdown_tree(visible_text(item.text))  # as the session page draws it
            if tree is not None:
                extra["md"] = tree
                row[2] = ""
        if item.kind == "result" and item.turn is not None:
            extra["lbl"] = present.result_word(item.turn)
        elif item.label:
            extra["lbl"] = item.label
        if item.abandoned:
            extra["ab"] = 1
        if item.kind == "user" and item.seq in self.prompts:
            extra["pf"] = self.prompts[item.seq].text()
        if item.branch:  # a rewind's abandoned prompts, shown above it
            extra["br"] = [self.paths[id(p)] for p in item.branch if id(p) in self.paths]
        call_id = item.call_id
        if call_id and call_id not in self.told and call_id in self.figures:
            self.told.add(call_id)
            extra["fig"] = self.figures[call_id].summary()
        if extra:
            row.append(extra)
        return row


def _detail_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 1] + "…"


def _detail_value(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return _detail_text(value)


def _timeline(rows: Sequence[TimelineRow], end: float) -> dict[str, Any]:
    """The waterfall rows, their details coded compactly.

    Details name their attribute by its index in ``keys``; attributes the whole
    session shares with the root bar (conversation id, provider) and the
    operation name (the bar's label says it) are left out.
    """
    keys: dict[str, int] = {}
    shared = dict(rows[0].details) if rows else {}
    out = []
    for i, r in enumerate(rows):
        details: list[Any] = []
        for key, value in r.details.items():
            if key == c.GEN_AI_OPERATION_NAME or (i and shared.get(key, _MISSING) == value):
                continue
            details += [keys.setdefault(key, len(keys)), _detail_value(value)]
        out.append(
            [r.label, r.category, r.depth, _round(r.start_s), _round(r.end_s), r.status, details]
        )
    return {"end": _round(end), "keys": list(keys), "rows": out}


def model_usage(session: Session, cost: Cost | None = None) -> list[list[Any]]:
    """``[model, calls, input, output, cache read, cache write, cost, cost text]`` per
    model (the text as every view prints an amount, :func:`claudetrace.pricing.dollars`).

    The session model's figures (what the CLI reported; input excludes the
    cache); the cost is the CLI's, else the price table's (``cost``, as
    :meth:`Session.cost` gives it), ``None`` for a model without a price.
    """
    rows = [
        [
            model,
            f["calls"],
            f["input"],
            f["output"],
            f["cache_read"],
            f["cache_creation"],
            None if f["cost_usd"] is None else round(f["cost_usd"], 6),
            "unknown" if f["cost_usd"] is None else dollars(f["cost_usd"], digits=6),
        ]
        for model, f in model_figures(session, cost).items()
    ]
    return sorted(rows, key=lambda r: (-(r[6] or 0), -r[1], r[0]))


def usage_rows(totals: Totals) -> list[list[Any]]:
    """:func:`model_usage`'s rows from the usage query layer's figures of a
    recording (``claudetrace usage session``'s: a message another recording
    stored first is not counted again)."""
    rows = [[model, t.calls, t.input, t.output, t.cache_read, t.cache_creation,
             None if (cost := t.cost_or_none()) is None else round(cost, 6)]
            for model, t in totals.models.items()]
    return sorted(rows, key=lambda r: (-(r[6] or 0), -r[1], r[0]))


def report_data(
    rec: Any, events: Iterable[Event], *, generated: str | None = None,
    usage: Totals | None = None, links: Links = NO_LINKS, elsewhere: Collection[str] = (),
) -> dict[str, Any]:
    """The report of ``rec`` (a stored recording) and its ``events`` as JSON-ready data.

    ``events`` are read once, in order, and none is kept: a stream from the store
    costs the memory of the texts the report shows, not of every line as well.

    ``usage``: the recording's figures from the store's usage query layer
    (:func:`claudetrace.usage.recording_totals`), shown as its tokens and cost;
    without it, the session model's.  ``links``: the sessions it continues, is
    continued in or was resumed as (:func:`claudetrace.store.links.links_of`),
    named by their ids in text (the other sessions are not in the file).
    ``elsewhere``: the ids of its calls another recording counts
    (:func:`claudetrace.usage.counted_elsewhere`), left out of the span tree's sums."""
    from ..usage import with_usage
    from .facts import facts

    info: RecordingInfo = rec.info()
    # One pass over the events, a slice at a time, feeds the spans' fold (which
    # serves the spans, the control plane and the figures) and the conversation's;
    # a slice is let go once folded, so a line's bytes are not held beside the
    # texts the conversation keeps of it.
    builder = SpanBuilder(info)
    conversation_fold = Conversation()
    last_t: float | None = None
    unread = iter(events)
    while batch := list(islice(unread, _SLICE)):
        builder.feed_many(batch)
        conversation_fold.feed_many(batch)
        last_t = batch[-1].t
        del batch  # before the next slice is read
    builder.close(info, live=info.ended_ns is None and rec.is_live())
    conversation_fold.settle(conversation_fold.items)
    spans, session = builder.finished, builder.session
    cost = session.cost()
    rows = timeline_rows(spans, info.started_ns)
    process = has_process(rec)
    end = max((r.end_s for r in rows), default=0.0)
    if last_t is not None:
        end = max(end, last_t)
    tree = present.trace_tree(
        session, title=str(rec.name or "claude-code"), end_ns=rec.duration_ns,
        status=rec.status, elsewhere=elsewhere, reason=rec.status_reason,
    )
    now = present.session_liveness(rec, session)
    conversation = _Items(present.call_figures(session, elsewhere=elsewhere, cost=cost),
                          outline.prompt_figures(session, tree), session)
    items = conversation_fold.items
    conv = conversation.rows(items)
    trace = present.trace_rows(tree, rec.started_ns)
    inputs = outline.Spans(items, session)
    io: dict[str, list[Any]] = {}
    for row in trace:
        found = inputs.io(row.ref) if row.ref else None
        if found is not None:
            io[row.ref] = [found.input_title, conversation.refer(found.inputs),
                           found.output_title, conversation.refer(found.outputs),
                           1 if found.is_error else 0]
    source: str
    running = rec.status == "running"
    if usage is None or (running and not usage.calls):
        # A running session's turn in flight is not in the usage layer yet: its
        # figures are the fold's, as its summary's are.
        models, usd, source = model_usage(session, cost), cost.usd, cost.source
        no_calls = usd is None and not session.calls
    else:
        models, usd, source = usage_rows(usage), usage.cost_or_none(), usage.cost_source
        no_calls = not usage.calls
    # The cost every other view says (the facts' and the trace header's); a running
    # session's figures are those of the fold drawn here, not its summary columns
    # (written at its end), as its page's header says them.
    priced = None if usage is None or not usage.calls else with_usage(rec, usage)
    shown = present.live(priced or rec, session)
    return {
        "v": 1,
        "title": rec.name or rec.cli_session_id or rec.id,
        "generated": generated or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "tool": f"claudetrace {__version__}",
        "status": rec.status,
        "started_ms": rec.started_ns // 1_000_000,
        "live": [now.state, now.detail, present.clock(rec.started_ns, now.last_event_ns),
                 present.offset(now.last_event_ns)],
        "facts": [list(pair) for pair in facts(shown, links)],
        "process": process,
        "conv": conv,
        "trace": [row.as_list() for row in trace],
        "th": [[label, value, 1 if bad else 0] for label, value, bad in outline.trace_header(
            tree, status=rec.status,
            started=present.moment(rec.started_ns), cost_source=cost.source,
            rec=shown if running else priced).cells()],
        "io": io,
        # Where each turn starts (seconds since the start, as an item's), for the
        # find box to say which turns hold its matches.
        "turns": conversation.turn_times,
        "tl": _timeline(rows, end),
        "cp": [
            [
                None if row.t is None else _round(row.t),
                row.initiator,
                row.subtype,
                row.request_id,
                None if row.latency_ms is None else round(row.latency_ms, 2),
                row.outcome,
                row.detail,
            ]
            for row in session_control_rows(session)
        ]
        if process
        else None,
        "models": models,
        "cost_source": source,
        "cost_text": NO_COST if no_calls else money(usd, source, digits=6),
    }


def _script_json(data: Any) -> str:
    # Inside <script> only "</" (and "<!--") could end or confuse the element;
    # escaping every "<" keeps the JSON valid and the page inert.
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def template() -> str:
    """The viewer page (inline CSS and script, no external resource)."""
    return resources.files(__package__).joinpath("report.html").read_text(encoding="utf-8")


def _same(value: Any) -> Any:
    return value


def report_chunks(data: dict[str, Any], clean: Callable[[Any], Any] = _same) -> Iterator[str]:
    """The page of :func:`render_report` in pieces, to be written as they come:
    ``data``'s values one at a time, a list's (the conversation's) one row at a
    time, each through ``clean`` (a redaction such as :meth:`Sanitizer.value`,
    applied to ``{key: value}`` as it applies to the whole of ``data``) and
    :func:`claudetrace.display.visible_data`.  No piece holds more than one of
    ``data``'s values or rows, so a page of a session with huge lines is never
    held whole, nor its JSON."""
    from html import escape

    head, rest = template().split(_TITLE_MARK, 1)
    middle, tail = rest.split(_DATA_MARK, 1)
    title = visible_data(clean({"title": data["title"]}))["title"]
    yield head + escape(f"{title} — claudetrace report") + middle + "{"
    for at, (key, value) in enumerate(data.items()):
        comma = "," if at else ""
        if not isinstance(value, list):
            pair = _script_json(visible_data(clean({key: value})))
            yield comma + pair[1:-1]  # "key":value, from {"key":value}
            continue
        # A list's redaction is its items' (Sanitizer.value), a row at a time.
        name = next(iter(visible_data(clean({key: None}))))
        yield f"{comma}{_script_json(name)}:["
        for row_at, row in enumerate(value):
            yield ("," if row_at else "") + _script_json(visible_data(clean(row)))
        yield "]"
    yield "}" + tail


def render_report(data: dict[str, Any]) -> str:
    """The complete HTML page for ``data`` from :func:`report_data`: every string
    in it through :func:`claudetrace.display.visible_text` (a bidi control or an
    escape sequence is shown as ``\\u202e`` / ``\\x1b``, as on a terminal)."""
    return "".join(report_chunks(data))


def write_report(
    out: IO[str],
    rec: Any,
    events: Iterable[Event],
    *,
    redactor: Sanitizer | None = None,
    usage: Totals | None = None,
    links: Links = NO_LINKS,
    elsewhere: Collection[str] = (),
) -> int:
    """Write the report of ``rec`` to ``out``; returns the number of events shown.

    ``redactor`` (default :func:`secret_redactor`) is applied to every string the
    page holds (texts, tool inputs and results, details, the summary): what the
    report shows of the events, rather than every event, so a session's
    streaming deltas are not redacted one by one.  Pass
    ``Sanitizer(secrets=False)`` for the texts as recorded.

    ``events`` are read once and not kept, and the page is written a piece at a
    time (:func:`report_chunks`).
    """
    clean = secret_redactor() if redactor is None else redactor
    counted = _Counted(events)
    data = report_data(rec, counted, usage=usage, links=links, elsewhere=elsewhere)
    for chunk in report_chunks(data, clean.value):
        out.write(chunk)
    return counted.count


class _Counted:
    """An iterable of events that counts them as they are read."""

    def __init__(self, events: Iterable[Event]) -> None:
        self.events = events
        self.count = 0

    def __iter__(self) -> Iterator[Event]:
        for event in self.events:
            self.count += 1
            yield event


__all__ = ["model_usage", "render_report", "report_chunks", "report_data", "secret_redactor",
           "usage_rows", "write_report"]
