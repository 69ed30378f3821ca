"""A session at a glance: what the session page and the HTML report show beside the
span tree and the conversation, from the same presentation model.

- :func:`trace_header`: the strip on top of a trace, as Phoenix draws one: status,
  start (wall clock), duration, models, tokens in / out / cache, cost and where it
  comes from, and how many model calls, tools and errors;
- :func:`prompt_figures`: per user prompt (a turn), what followed it, as
  claude-code-log counts it: model calls, tools (failed ones), tokens, cost,
  duration;
- :class:`Spans`: a span's input and output side by side (the prompt or tool
  input; the reply, the tool's result or the turn's result), from the
  conversation's items;
- the branch a rewind abandoned is listed at its marker
  (:attr:`claudetrace.ui.conversation.Item.branch`);
- :func:`link_rows`: the sessions this one continues (or was forked from), is
  continued in, or was resumed or forked as (:class:`claudetrace.store.links.Links`),
  each with the recording to open when it is stored.

Pure functions over :class:`~claudetrace.ui.present.TraceNode` trees, the session
model, conversation items and a recording's links; nothing here reads the store.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..model import Session, Usage
from .conversation import Item, walk
from .present import (
    NO_COST,
    NOT_YET,
    TraceNode,
    cost_cell,
    cost_text,
    duration,
    money,
    tokens_text,
)
from .present import walk as walk_tree

if TYPE_CHECKING:
    from ..store.links import Links

#: Longest text a span's input or output shows (the rest is in the conversation).
IO_LIMIT: Final = 4000


# -- the trace header -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TraceHeader:
    """The strip on top of a trace, each figure a text ready to show."""

    status: str
    started: str
    duration: str
    models: str
    tokens: str
    cost: str
    calls: int
    tools: int
    errors: int

    def cells(self) -> list[tuple[str, str, bool]]:
        """``(label, value, alarming)`` in the order the strip shows them (a failed
        status and a count of errors are drawn red)."""
        return [
            ("status", self.status, self.status in _FAILED), ("started", self.started, False),
            ("duration", self.duration, False), ("models", self.models, False),
            ("tokens", self.tokens, False), ("cost", self.cost, False),
            ("calls", f"{self.calls:,}", False), ("tools", f"{self.tools:,}", False),
            ("errors", f"{self.errors:,}", self.errors > 0),
        ]


_FAILED: Final = frozenset({"error", "incomplete", "killed"})


def _counts(node: TraceNode) -> tuple[int, int, int, set[str]]:
    """Model calls, tool calls and failed nodes (calls, tools, turns) under ``node``,
    and the models called."""
    calls = tools = errors = 0
    models: set[str] = set()
    for _, child in walk_tree(node):
        if child is node:
            continue
        if child.kind == "model":
            calls += 1
            models.add(child.label)
        elif child.kind == "tool":
            tools += 1
        if child.status == "error" and child.kind in ("model", "tool", "turn"):
            errors += 1
    return calls, tools, errors, models


def trace_header(tree: TraceNode, *, status: str, started: str,
                 cost_source: str, rec: Any = None) -> TraceHeader:
    """The header of the trace ``tree`` (:func:`~claudetrace.ui.present.trace_tree`) of a
    session whose status, start (a wall-clock text) and cost source are given.  The
    figures are the tree's: its root's tokens and cost, its nodes counted; with
    ``rec`` (a stored recording as :func:`claudetrace.usage.costed` gives it) the
    cost and its source are the recording's, the figure every other view says."""
    calls, tools, errors, models = _counts(tree)
    usd = tree.cost_usd
    if rec is not None:
        usd, cost_source = rec.cost, rec.cost_origin
    if usd is not None:
        cost = money(usd) + {"cli": " (the CLI's)", "estimate": " (estimate, price table)"
                             }.get(cost_source, "")
    elif rec is not None:  # as every view says it: not yet reported, unknown and why…
        cost = cost_text(rec)
    else:
        unpriced = sorted({n.label for _, n in walk_tree(tree)
                           if n.kind == "model" and n.cost_usd is None and n.counted})
        cost = f"unknown (no price for {', '.join(unpriced)})" if unpriced else (
            cost_cell(None, calls=calls > 0) if calls else
            NOT_YET if status == "running" else NO_COST)
    return TraceHeader(
        status=status, started=started, duration=duration(tree.duration_ns),
        models=", ".join(sorted(models)) or "—",
        tokens=tokens_text(tree.usage) if tree.usage is not None else "—",
        cost=cost, calls=calls, tools=tools, errors=errors,
    )


# -- per prompt -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PromptFigures:
    """What followed one user prompt, up to its result (its turn, subagents included)."""

    turn: int
    calls: int
    tools: int
    failed_tools: int
    usage: Usage
    cost: str
    duration: str

    def text(self) -> str:
        """``turn 2 · 3 calls · 4 tools (1 failed) · 1,200 in · 80 out · $0.0019 · 2.41 s``."""
        tools = f"{self.tools} tool{'s' if self.tools != 1 else ''}"
        if self.failed_tools:
            tools += f" ({self.failed_tools} failed)"
        return " · ".join([
            f"turn {self.turn}", f"{self.calls} call{'s' if self.calls != 1 else ''}", tools,
            tokens_text(self.usage), self.cost, self.duration,
        ])


def prompt_figures(session: Session, tree: TraceNode) -> dict[int, PromptFigures]:
    """The figures of each turn of ``tree``, by the line of the prompt that began it
    (its ``start_seq``: the conversation's user item at that line)."""
    turns = {t.number: t for t in session.turns}
    estimated = " (estimate)" if session.cost().source == "estimate" else ""
    out: dict[int, PromptFigures] = {}
    for node in tree.children:
        if node.kind != "turn" or not node.ref.startswith("turn:"):
            continue
        turn = turns.get(int(node.ref.removeprefix("turn:")))
        if turn is None:
            continue
        calls, tools, _, _ = _counts(node)
        failed = sum(1 for _, n in walk_tree(node) if n.kind == "tool" and n.status == "error")
        out[turn.start_seq] = PromptFigures(
            turn.number, calls, tools, failed, node.usage or Usage(),
            money(node.cost_usd) + estimated if node.cost_usd is not None
            else "cost unknown" if calls else "cost —",
            duration(node.duration_ns) if node.end_ns is not None
            else ("under way" if node.status == "running" else "cut short"),
        )
    return out


# -- a span's input and output --------------------------------------------------------

#: What of an item a span's pane shows: its text, a tool's input or result, or the
#: call it makes (``→ calls Bash``).
Part = str


@dataclass(frozen=True, slots=True)
class SpanIO:
    """A span's input and output: each a title and the conversation items (with the
    part of each) that hold it, so the pages draw them as the conversation does
    and the report names them rather than holding their texts twice."""

    input_title: str
    inputs: list[tuple[Item, Part]]
    output_title: str
    outputs: list[tuple[Item, Part]]
    is_error: bool = False

    def texts(self) -> tuple[str, str]:
        """The input and the output as text (each bounded by :data:`IO_LIMIT`)."""
        return (_bounded("\n\n".join(part_text(i, p) for i, p in self.inputs))
                or "(not among the lines read)",
                _bounded("\n\n".join(part_text(i, p) for i, p in self.outputs))
                or "(none yet)")


def part_text(item: Item, part: Part) -> str:
    """The text of ``part`` of ``item``."""
    tool = item.tool
    if part == "input" and tool is not None:
        return _json(tool.input)
    if part == "result" and tool is not None:
        return (tool.result or "") if tool.answered else "(no result yet)"
    if part == "call" and tool is not None:
        return f"→ calls {tool.name}"
    return item.text


def _bounded(text: str) -> str:
    return text if len(text) <= IO_LIMIT else text[: IO_LIMIT - 1] + "…"


def _json(value: Any) -> str:
    if value is None:
        return "(none recorded)"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                            indent=2, default=str)


class Spans:
    """The input and output of each span of a session, from the conversation ``items``
    that hold them (of ``session``'s recording), looked up by :attr:`TraceNode.ref`.

    A tool: its input and its result.  A turn: its prompt and its result.  A model
    call: what the CLI sent it (the prompt, or the last tool result, before its
    first line) and what it answered (its texts, and the tools it called)."""

    def __init__(self, items: Sequence[Item], session: Session) -> None:
        self.session = session
        self.tools: dict[str, Item] = {}
        self.said: dict[str, list[Item]] = {}
        self.prompts: dict[int, Item] = {}
        self.results: dict[int, Item] = {}
        # What was sent to a model, by the line it was sent at: prompts and results.
        sent: list[tuple[int, Item, Part]] = []
        for _, item in walk(items):
            tool = item.tool
            if tool is not None:
                self.tools.setdefault(tool.tool_use_id, item)
                if tool.result_seq is not None:
                    sent.append((tool.result_seq, item, "result"))
            if item.call_id:
                self.said.setdefault(item.call_id, []).append(item)
            if item.kind == "user":
                self.prompts[item.seq] = item
                sent.append((item.seq, item, "text"))
            elif item.kind == "result" and item.turn is not None:
                self.results[item.turn.number] = item
        sent.sort(key=lambda entry: entry[0])
        self._sent = sent
        self._sent_seqs = [entry[0] for entry in sent]

    def io(self, ref: str) -> SpanIO | None:
        """The span ``ref``'s input and output; None for a span with none (the agent,
        a subagent) or whose lines are not among the items."""
        kind, _, key = ref.partition(":")
        if kind == "tool":
            item = self.tools.get(key)
            if item is None or item.tool is None:
                return None
            tool = item.tool
            return SpanIO(f"input · {tool.name}", [(item, "input")],
                          "result (error)" if tool.is_error else "result",
                          [(item, "result")], is_error=tool.is_error)
        if kind == "turn":
            turns = self.session.turns
            number = int(key) if key.isdigit() else 0
            if not 0 < number <= len(turns):
                return None
            prompt = self.prompts.get(turns[number - 1].start_seq)
            result = self.results.get(number)
            if prompt is None and result is None:
                return None
            failed = result is not None and result.is_error
            # A result that repeats its turn's answer is shown by that answer.
            ended = [] if result is None else (result.answers or [result])
            return SpanIO("prompt", [] if prompt is None else [(prompt, "text")],
                          "result (error)" if failed else "result",
                          [(item, "text") for item in ended], is_error=failed)
        if kind == "model":
            said = self.said.get(key)
            if not said:
                return None
            at = bisect.bisect_left(self._sent_seqs, said[0].seq)
            title, inputs = "request", []
            if at:
                _, item, part = self._sent[at - 1]
                inputs = [(item, part)]
                source = item.tool
                title = "prompt" if source is None or part == "text" else (
                    f"result of {source.name}")
            answer = [(i, "call" if i.kind == "tool" else "text") for i in said
                      if i.kind in ("assistant", "tool")]
            return SpanIO(title, inputs, "answer", answer,
                          is_error=any(i.is_error for i in said))
        return None


# -- links to other sessions -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LinkItem:
    """One other session a link names."""

    #: The CLI session id of the other session (recorded text: escape it).
    session_id: str
    #: Its recording, to open (None: not stored, or joined into this recording).
    recording_id: str | None
    #: What the link rests on, in a few words (empty: nothing to add).
    note: str = ""
    #: Whether the other session is missing from the store.
    missing: bool = False

    @property
    def text(self) -> str:
        """``<id> (<note>)``, with ``, not in this store`` when it is not stored."""
        return (self.session_id + (f" ({self.note})" if self.note else "")
                + (", not in this store" if self.missing else ""))


@dataclass(frozen=True, slots=True)
class LinkRow:
    """A kind of link (``continues``, ``forked from``, ``continued in``, ``resumed
    as``, ``forked as``) and the sessions it names."""

    label: str
    items: tuple[LinkItem, ...]

    @property
    def text(self) -> str:
        """The sessions named, as one line of text."""
        return ", ".join(item.text for item in self.items)


#: What a ``continues`` link rests on: the same compaction in both files, or
#: only the word of the compaction's summary.
_CERTAIN: Final = {True: "after its compaction",
                   False: "as its compaction summary says; that file was not imported "
                          "beside it"}


def link_rows(links: Links) -> list[LinkRow]:
    """The rows a session's links make, in the order the page and ``show`` list them:
    the session it continues (or was forked from), the ids it was resumed or
    forked as (joined into it), the sessions that continue it, and its forks."""
    rows = []
    if links.continues is not None:
        link = links.continues
        rows.append(LinkRow("forked from" if link.fork else "continues", (LinkItem(
            link.session_id, link.recording_id, _CERTAIN[link.certain],
            missing=link.recording_id is None),)))
    for label, sids in (("resumed as", links.resumed_as), ("forked as", links.forked_as)):
        if sids:
            rows.append(LinkRow(label, tuple(LinkItem(sid, None) for sid in sids)))
    for label, fork in (("continued in", False), ("forked as", True)):
        later = tuple(LinkItem(link.session_id, link.recording_id,
                               "after a compaction" if link.certain else
                               "as its compaction summary says")
                      for link in links.continued_in if link.fork is fork)
        if later:
            rows.append(LinkRow(label, later))
    return rows


def link_summary(links: Links) -> str:
    """A session's links in a few words for the session list: ``continues
    9d626fe2 · continued in c5ed8d29`` (each id's first 8 characters)."""
    return " · ".join(f"{row.label} {', '.join(item.session_id[:8] for item in row.items)}"
                      for row in link_rows(links))


__all__ = [
    "LinkItem",
    "LinkRow",
    "PromptFigures",
    "SpanIO",
    "Spans",
    "TraceHeader",
    "link_rows",
    "link_summary",
    "part_text",
    "prompt_figures",
    "trace_header",
]
