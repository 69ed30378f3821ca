"""The presentation model: what the session browser and the HTML report both draw.

Built from the session model (:class:`~claudetrace.model.Session`) by pure
functions, with no second walk of the recording's events:

- :func:`call_figures`: per model call, its tokens (input, output, cache read,
  cache write), its share of the turn's cost, its latency (from the request the
  CLI sent, i.e. the prompt or the last tool result of its lane, to its last
  line), its time to first token (streamed calls: ``message_start`` after the
  request), its stop reason and error;
- :func:`trace_tree`: the span tree people know from Phoenix and Langfuse,
  agent → turn → model call / tool, a subagent's calls and tools nested under
  the Agent/Task tool call that ran it, each node with its duration, tokens,
  cost and status (errors marked);
- :func:`header`: the figures a session's page shows on top, with what is not
  known yet said so (``—``, ``not yet``) rather than ``None`` or ``$0.0000``,
  and the session's :func:`~claudetrace.model.liveness.liveness`;
- :func:`clock` and :func:`offset`: a wall-clock time beside a time since the start.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from ..model import Cost, ModelCall, Session, ToolCall, Turn, Usage
from ..model.liveness import Liveness, liveness
from ..model.summary import call_cost, cli_shares, summary_columns
from ..pricing import FILE_SOURCE_KINDS, dollars
from ..pricing import NO_COST as NO_COST  # the outline says it too
from ..pricing import NOT_YET as NOT_YET
from ..pricing import cost_text as priced_text


def clock(started_ns: int, at_ns: int | None) -> str:
    """The wall-clock time (UTC, to the millisecond) of offset ``at_ns`` in a recording."""
    if at_ns is None:
        return "—"
    moment = dt.datetime.fromtimestamp((started_ns + at_ns) / 1e9, tz=dt.timezone.utc)
    return moment.strftime("%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"


def offset(ns: int | None) -> str:
    """A time since the start, short and bounded in width: ``+0.532s``, ``+12m05s``, ``+3h02m``."""
    if ns is None:
        return "—"
    seconds = max(0, ns) / 1e9
    if seconds < 60:
        return f"+{seconds:.3f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"+{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 100:
        return f"+{hours}h{minutes:02d}m"
    return f"+{hours // 24}d"


def duration(ns: int | None) -> str:
    """How long, as every page, ``tail`` and the report say it: ``532 ms``,
    ``3.25 s``, ``66.2 s``, ``12.1 min``; ``—`` when unknown."""
    if ns is None:
        return "—"
    seconds = ns / 1e9
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min"


def duration_s(seconds: float | None) -> str:
    """A time in seconds as :func:`duration` says it."""
    return duration(None if seconds is None else round(seconds * 1e9))


def moment(ns: int | None) -> str:
    """A Unix time in nanoseconds as the pages give a start: ``2026-11-28 05:40:12 UTC``."""
    if ns is None:
        return "—"
    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC")


def signed(delta: float | None, shown: Callable[[float], str]) -> str:
    """A difference with its sign before the figure ``shown`` writes: ``+$0.0012``,
    ``-2.41 s``; ``unknown`` when either side is."""
    if delta is None:
        return "unknown"
    return ("-" if delta < 0 else "+") + shown(abs(delta))


def money(value: float | None) -> str:
    """``$0.0019``, ``$0.00012`` (:func:`claudetrace.pricing.dollars`), ``—`` for none."""
    return "—" if value is None else dollars(value)


def tokens_text(usage: Usage) -> str:
    """``1,200 in · 80 out · cache 900 read / 120 write`` (the cache part when there is one)."""
    text = f"{usage.input:,} in · {usage.output:,} out"
    if usage.cache_read or usage.cache_creation:
        text += f" · cache {usage.cache_read:,} read / {usage.cache_creation:,} write"
    return text


# -- model calls ------------------------------------------------------------------------


@dataclass(slots=True)
class CallFigures:
    """What a model call cost and how long it took (times are ns offsets)."""

    call: ModelCall
    #: When the CLI sent the request: the turn's prompt, or the last tool result
    #: (or model call) of its lane before it.
    request_ns: int
    #: What the call cost as ``claudetrace usage`` counts it
    #: (:func:`claudetrace.model.summary.call_cost`): its share of its turn's cost
    #: for its model, or its price by the table (None: unknown).
    cost_usd: float | None
    #: ``message_start`` after the request (streamed calls only).
    ttft_ns: int | None
    #: The call's last line (a call the host never saw: its subagent's end).
    end_ns: int
    #: ``cli`` (a share of the turn's cost the CLI reported), ``estimate`` or
    #: ``unknown``.
    cost_source: str = "cli"
    #: The call's stop reason: its own, else (the turn's last call) its result's.
    stop_reason: str | None = None
    #: Another recording holds the same API message and counts it (a resumed
    #: session's repeated history): its tokens and cost are not this session's.
    elsewhere: bool = False

    @property
    def latency_ns(self) -> int:
        return max(0, self.end_ns - self.request_ns)

    @property
    def usage(self) -> Usage:
        return self.call.usage

    def summary(self) -> str:
        """One line: model, tokens, cost, latency, time to first token, stop reason."""
        bits = [self.call.model or "model", tokens_text(self.usage)]
        if self.cost_usd is not None:
            bits.append(money(self.cost_usd) + (
                " (estimate)" if self.cost_source == "estimate" else ""))
        if self.elsewhere:
            bits.append(ELSEWHERE)
        bits.append(duration(self.latency_ns))
        if self.ttft_ns is not None:
            bits.append(f"first token {duration(self.ttft_ns)}")
        if self.stop_reason:
            bits.append(self.stop_reason)
        if self.call.error:
            bits.append(f"error: {self.call.error}")
        return " · ".join(bits)


#: What a call counted in another recording says.
ELSEWHERE: Final = "counted in another recording"


def call_figures(session: Session, *, estimate: bool = True,
                 turns: Collection[int] | None = None,
                 elsewhere: Collection[str] = (),
                 cost: Cost | None = None) -> dict[str, CallFigures]:
    """The figures of every model call of ``session``, by call id.

    A call's cost is what ``claudetrace usage`` counts for it
    (:func:`~claudetrace.model.summary.call_cost`): its share of what the CLI
    reported for its turn and model, else the price table's (an estimate)
    unless ``estimate`` is False; None for a model without a price.
    ``turns``: only the calls of the turns of these numbers.  ``elsewhere``: the
    ids of the calls another recording counts (the store's duplicates:
    :func:`claudetrace.usage.counted_elsewhere`).  ``cost``: the session's
    (:meth:`~claudetrace.model.Session.cost`), when the caller has it already.
    """
    cost = cost if cost is not None else session.cost()
    shares = cli_shares(session, cost)
    # Per lane, the times at which the CLI sent something to the model: the turn's
    # prompt (main lane), a subagent's start, each tool's result.
    marks: dict[str | None, list[int]] = {}
    for turn in session.turns:
        marks.setdefault(None, []).append(turn.start_ns)
    for agent in session.subagents.values():
        marks.setdefault(agent.tool_use_id, []).append(agent.start_ns)
    for tool in session.tools.values():
        if tool.end_ns is not None:
            marks.setdefault(tool.lane, []).append(tool.end_ns)
    for lane_marks in marks.values():
        lane_marks.sort()
    out: dict[str, CallFigures] = {}
    for turn in session.turns if turns is None else _picked(session, turns):
        previous_end: dict[str | None, int] = {}
        for call in sorted(turn.calls, key=lambda c: c.start_ns):
            lane_marks = marks.get(call.lane, [])
            at = bisect.bisect_right(lane_marks, call.start_ns)
            known = [lane_marks[at - 1]] if at else []
            if call.lane in previous_end:
                known.append(previous_end[call.lane])
            if call.lane is None:
                known.append(turn.start_ns)
            # A subagent's call with nothing of its lane before it (a lane no tool
            # call names, an agent whose start came later) is timed from its own
            # first line, never from its turn's prompt.
            request = max(known, default=call.start_ns)
            request = min(request, call.start_ns)  # never after its own first line
            previous_end[call.lane] = call.end_ns
            end = call.end_ns
            runner = session.subagents.get(call.lane) if call.lane else None
            if not call.observed and runner is not None:
                # Counted by the CLI for a subagent whose lines the host never saw:
                # it ran within the subagent.
                request, end = runner.start_ns, runner.end_ns or end
            ttft = call.start_ns - request if call.streamed and call.observed else None
            price, source = call_cost(session, call, cost, shares)
            if source == "estimate" and not estimate:
                price, source = None, "unknown"
            out[call.id] = CallFigures(call, request, price, ttft, end, source,
                                       call.stop_reason, call.id in elsewhere)
        last = [c for c in turn.calls if c.lane is None and c.observed]
        if last and turn.done and out[last[-1].id].stop_reason is None:
            out[last[-1].id].stop_reason = turn.stop_reason
    return out


# -- the span tree ----------------------------------------------------------------------


@dataclass(slots=True)
class TraceNode:
    """One node of the span tree (times are ns offsets from the recording's start)."""

    kind: str  # agent, turn, model, tool, subagent, error (an API error)
    label: str
    start_ns: int
    end_ns: int | None
    #: ``ok``, ``error`` or ``running`` (no end yet).
    status: str
    usage: Usage | None = None
    cost_usd: float | None = None
    #: What else a person reads about the node (stop reason, first token, outcome…).
    detail: str = ""
    children: list[TraceNode] = field(default_factory=list)
    #: What the node is of the session model: ``turn:<n>``, ``model:<call id>``,
    #: ``tool:<tool use id>`` (its input and output: :class:`~claudetrace.ui.outline.Spans`).
    ref: str = ""
    #: Whether its tokens and cost count in its parent's (a model call another
    #: recording counts does not: :data:`ELSEWHERE`).
    counted: bool = True

    @property
    def duration_ns(self) -> int | None:
        return None if self.end_ns is None else max(0, self.end_ns - self.start_ns)


@dataclass(slots=True)
class _Index:
    """What building the tree looks up: the calls' figures, the tools by lane and turn."""

    session: Session
    figures: dict[str, CallFigures]
    tools: dict[tuple[str | None, int], list[ToolCall]]


def _tool_node(index: _Index, tool: ToolCall) -> TraceNode:
    status = {"ok": "ok", "error": "error"}.get(tool.outcome, "running")
    bits = [tool.outcome if tool.outcome != "unfinished" else "no result yet"]
    if tool.interrupted:
        bits[0] = "interrupted by the user"
    if tool.permission is not None:
        bits.append(f"permission {tool.permission.verdict}")
    bits += [f"hook {h.hook_event or '?'} {h.verdict}" for h in tool.hooks]
    node = TraceNode("tool", tool.name, tool.start_ns, tool.end_ns, status,
                     detail=" · ".join(bits), ref=f"tool:{tool.id}")
    agent = index.session.subagents.get(tool.id)
    if agent is not None:
        sub = TraceNode(
            "subagent", agent.subagent_type or "subagent", agent.start_ns,
            agent.end_ns if agent.end_ns is not None else tool.end_ns,
            "error" if agent.status in ("failed", "killed") or tool.is_error else (
                "running" if agent.end_ns is None and tool.end_ns is None else "ok"),
            detail=agent.status or "",
        )
        sub.children = _lane_nodes(index, tool.id, tool.turn)
        _add_up(sub)
        node.children.append(sub)
        node.usage, node.cost_usd = sub.usage, sub.cost_usd
    return node


def _call_node(fig: CallFigures) -> TraceNode:
    call = fig.call
    bits = []
    if fig.ttft_ns is not None:
        bits.append(f"first token {duration(fig.ttft_ns)}")
    if fig.stop_reason:
        bits.append(fig.stop_reason)
    if not call.observed:
        bits.append("not seen on the wire (counted by the CLI)")
    if call.error:
        bits.append(f"error: {call.error}")
    if fig.elsewhere:
        bits.append(ELSEWHERE)
    return TraceNode(
        "model", call.model or "model", fig.request_ns, fig.end_ns,
        "error" if call.error else "ok", usage=call.usage, cost_usd=fig.cost_usd,
        detail=" · ".join(bits), ref=f"model:{call.id}", counted=not fig.elsewhere,
    )


def _lane_nodes(index: _Index, lane: str | None, turn: int) -> list[TraceNode]:
    """The model calls and tool calls of one lane of a turn, in the order they began."""
    timed: list[tuple[int, int, TraceNode]] = []
    turns = index.session.turns
    for call in turns[turn - 1].calls if 0 < turn <= len(turns) else ():
        if call.lane == lane and call.id in index.figures:
            timed.append((call.start_ns, 0, _call_node(index.figures[call.id])))
    for tool in index.tools.get((lane, turn), ()):
        timed.append((tool.start_ns, 1, _tool_node(index, tool)))
    for error in index.session.api_errors:
        if error.lane == lane and error.turn == turn:
            # Claude Code's own stand-in for an answer: an error, not a model call.
            timed.append((error.t_ns, 0, TraceNode("error", error.label, error.t_ns,
                                                   error.t_ns, "error", detail=error.text)))
    timed.sort(key=lambda entry: (entry[0], entry[1]))
    return [node for _, _, node in timed]


def _unnamed_lanes(index: _Index, turn: Turn) -> list[TraceNode]:
    """A subagent node for each lane of ``turn`` that no tool call names (a workflow's
    agent): its calls and tools, which would otherwise be in no node."""
    named = index.session.tools
    lanes = {c.lane for c in turn.calls if c.lane and c.lane not in named}
    lanes |= {lane for lane, number in index.tools
              if number == turn.number and lane and lane not in named}
    out = []
    for lane in sorted(lanes):
        children = _lane_nodes(index, lane, turn.number)
        if not children:
            continue
        end = [c.end_ns for c in children]
        node = TraceNode(
            "subagent", lane, min(c.start_ns for c in children),
            None if None in end else max(e for e in end if e is not None),
            "error" if any(c.status == "error" for c in children) else "ok",
            detail="no tool call names it", children=children)
        _add_up(node)
        out.append(node)
    return out


def _add_up(node: TraceNode) -> None:
    """A node's tokens and cost: what its children's add up to (the cost unknown
    when a model call's is, or when no child has one), those another recording
    counts left out."""
    usage = Usage()
    counted = [c for c in node.children if c.counted]
    costs = [c.cost_usd for c in counted if c.cost_usd is not None or c.kind == "model" or (
        c.kind == "turn" and any(m.kind == "model" and m.counted for m in c.children))]
    for child in counted:
        if child.usage is not None:
            usage.add(child.usage)
    node.usage = usage
    if not costs and len(counted) < len(node.children):
        node.cost_usd = 0.0  # every call of it counted in another recording
    else:
        node.cost_usd = None if not costs or None in costs else sum(
            c for c in costs if c is not None)


def trace_tree(
    session: Session,
    *,
    title: str = "claude-code",
    end_ns: int | None = None,
    status: str = "ok",
    estimate: bool = True,
    turns: Collection[int] | None = None,
    elsewhere: Collection[str] = (),
    reason: str = "",
) -> TraceNode:
    """The span tree of ``session``: agent → turn → model call / tool → subagent → …

    ``end_ns`` is the recording's end (None while it runs); ``status`` the
    session's (:meth:`~claudetrace.model.Session.outcome`) and ``reason`` why: a
    failure marks the root red and says why on it (the failed turn is red too),
    as the root span's status does.  Each model call's cost is what ``claudetrace
    usage`` counts for it (:func:`call_figures`: the CLI's where it reported them, else the price
    table's unless ``estimate`` is False, unknown (None) for a model without a
    price); a turn's and the session's are their calls' added up, leaving out
    the calls another recording counts (``elsewhere``), so the root says what
    ``usage session`` says.  ``turns``: only the turns of these numbers under
    the root (a page's prompts' figures, without the rest).
    """
    tools: dict[tuple[str | None, int], list[ToolCall]] = {}
    for tool in session.tools.values():
        tools.setdefault((tool.lane, tool.turn), []).append(tool)
    cost = session.cost(estimate=estimate)
    index = _Index(session, call_figures(session, estimate=estimate, turns=turns,
                                         elsewhere=elsewhere, cost=cost), tools)
    root = TraceNode(
        "agent", title, 0, end_ns,
        "running" if status == "running" else ("error" if status in _FAILED else "ok"),
        detail=" · ".join(bit for bit in (
            status, reason if status in _FAILED else "",
            "cost estimated" if cost.source == "estimate" else "") if bit),
    )
    for turn in session.turns if turns is None else _picked(session, turns):
        turn_end = turn.end_ns
        if turn.done:
            status_of, bits = ("error" if turn.is_error else "ok"), [result_word(turn)]
        elif status == "running":
            status_of, bits = "running", ["under way"]
        else:
            # The session ended (its CLI crashed, was killed…) before the turn's
            # result: cut short at the session's end, a failure unless interrupted.
            status_of = "ok" if turn.interrupted else "error"
            bits, turn_end = ["cut short", turn.ended_with], end_ns
        if turn.interrupted and "interrupted" not in bits:
            bits.append("interrupted")
        node = TraceNode("turn", f"turn {turn.number}", turn.start_ns, turn_end, status_of,
                         detail=" · ".join(b for b in bits if b), ref=f"turn:{turn.number}")
        node.children = _lane_nodes(index, None, turn.number) + _unnamed_lanes(index, turn)
        node.children.sort(key=lambda child: child.start_ns)
        _add_up(node)
        root.children.append(node)
    _add_up(root)
    return root


_FAILED: Final = frozenset({"error", "incomplete", "killed"})


def _picked(session: Session, numbers: Collection[int]) -> list[Turn]:
    """The turns of ``session`` numbered ``numbers``, in order."""
    turns = session.turns
    return [turns[n - 1] for n in sorted(set(numbers)) if 0 < n <= len(turns)]


def walk(node: TraceNode, depth: int = 0) -> Iterator[tuple[int, TraceNode]]:
    """Every node with its depth, parents before children."""
    yield depth, node
    for child in node.children:
        yield from walk(child, depth + 1)


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One node of the tree as the pages draw it: texts ready to show, times for the bar."""

    depth: int
    kind: str
    label: str
    status: str
    start_ns: int
    end_ns: int | None
    #: Wall-clock time (UTC) and time since the start of the node's start.
    clock: str
    offset: str
    duration: str
    tokens: str
    cost: str
    detail: str
    ref: str = ""

    def as_list(self) -> list[Any]:
        """Compact JSON for the HTML report (times in seconds)."""
        return [
            self.depth, self.kind, self.label, self.status, round(self.start_ns / 1e9, 4),
            None if self.end_ns is None else round(self.end_ns / 1e9, 4), self.clock,
            self.offset, self.duration, self.tokens, self.cost, self.detail, self.ref,
        ]


def trace_rows(tree: TraceNode, started_ns: int) -> list[TraceRow]:
    """The tree in drawing order (parents before children), each node a row."""
    rows = []
    for depth, node in walk(tree):
        rows.append(TraceRow(
            depth, node.kind, node.label, node.status, node.start_ns, node.end_ns,
            clock(started_ns, node.start_ns), offset(node.start_ns), duration(node.duration_ns),
            tokens_text(node.usage) if node.usage else "",
            "" if node.kind == "tool" and node.cost_usd is None
            else cost_cell(node.cost_usd, calls=bool(node.usage) or node.kind == "model"),
            node.detail, node.ref,
        ))
    return rows


def result_word(turn: Turn) -> str:
    """How a turn ended, in words: its result's subtype, or ``error`` when the result's
    ``is_error`` says so, whatever the subtype (``subtype: success`` with
    ``is_error: true`` happens)."""
    subtype = turn.result_subtype or "result"
    if not turn.is_error:
        return subtype
    if subtype == "success":
        return "error (subtype success, is_error true)"
    return "error" if subtype in ("error", "result") else f"error ({subtype})"


# -- transcript structures ------------------------------------------------------------

#: A TodoWrite item's mark per status.
TODO_MARKS: Final = {"completed": "☑", "in_progress": "◐", "pending": "☐"}


def todos(tool_name: str, given: Any) -> list[tuple[str, str]] | None:
    """A ``TodoWrite`` call's list as ``(status, text)`` pairs; None for any other call."""
    if tool_name != "TodoWrite" or not isinstance(given, dict):
        return None
    items = given.get("todos")
    if not isinstance(items, list):
        return None
    out = []
    for entry in items:
        if isinstance(entry, dict):
            status = entry.get("status")
            text = entry.get("content") or entry.get("activeForm") or ""
            out.append((status if isinstance(status, str) else "pending", str(text)))
    return out


#: The tools whose call runs a subagent (``Task`` in older CLIs).
SUBAGENT_TOOLS: Final = frozenset({"Agent", "Task"})


def subagent_task(tool_name: str, given: Any) -> tuple[str, str, str] | None:
    """An Agent/Task call's ``(subagent type, description, prompt)``; None for others."""
    if tool_name not in SUBAGENT_TOOLS or not isinstance(given, dict):
        return None

    def text(key: str) -> str:
        value = given.get(key)
        return value if isinstance(value, str) else ""

    return text("subagent_type") or "subagent", text("description"), text("prompt")


def todo_text(pairs: list[tuple[str, str]]) -> str:
    """``☑ write tests`` one a line."""
    return "\n".join(f"{TODO_MARKS.get(status, '☐')} {text}" for status, text in pairs)


def todo_summary(pairs: list[tuple[str, str]]) -> str:
    """``todos 2/5 done``."""
    done = sum(1 for status, _ in pairs if status == "completed")
    return f"todos {done}/{len(pairs)} done"


# -- the header -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Header:
    """The facts on top of a session's page, each already a text to show."""

    status: str
    liveness: Liveness | None
    #: ``2026-11-28 05:40:12 UTC`` and the time of the last event.
    started: str
    last_event: str
    duration: str
    cost: str
    cli: str
    exit: str
    model: str
    #: Turns, lines, tool calls, failed ones and tokens: a running session's from the
    #: session model as the page folds it (its summary columns are written at
    #: its end), an ended one's from its summary columns.
    turns: int = 0
    lines: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    usage: Usage = field(default_factory=Usage)
    model_calls: int = 0
    bytes: int = 0
    #: What :attr:`duration` says, in ns (None: not known).
    duration_ns: int | None = None


def cost_text(rec: Any, digits: int = 4, *, cell: bool = False) -> str:
    """A stored recording's cost as every view says it, to ``digits`` places
    (:func:`claudetrace.pricing.cost_text`; ``cell``: as a table cell says it)."""
    return priced_text(rec, digits, cell=cell)


def cost_cell(usd: float | None, *, calls: bool) -> str:
    """A cost where a table cell or a line has room for a word: the amount,
    ``unknown`` for calls with no price, ``—`` where no model call was made."""
    if usd is not None:
        return money(usd)
    return "unknown" if calls else "—"


def session_liveness(rec: Any, session: Session) -> Liveness:
    """The liveness of a stored recording: a proxied one is disconnected once it
    ended; a file's (a transcript, a claude-trace log) saw no process, so it is
    what its lines say (idle after a result; a transcript can grow again)."""
    if rec.source in FILE_SOURCE_KINDS:
        return liveness(session, ended=False)
    return liveness(session, ended=rec.status != "running", exit_code=rec.exit_code,
                    signal=rec.signal, error=rec.error)


def exit_text(rec: Any) -> str:
    """How a stored recording's CLI ended, as the pages say it (never ``None``):
    ``not yet`` while it runs, ``unknown`` for a file source (no process seen),
    ``signal 9``, the exit code, else ``—``."""
    if rec.status == "running":
        return "not yet"
    if rec.source in FILE_SOURCE_KINDS:
        return "unknown"
    if rec.signal:
        return f"signal {rec.signal}"
    return "—" if rec.exit_code is None else str(rec.exit_code)


class Live:
    """A running recording whose summary figures are its session model's as far as
    it is stored (:func:`live`); every other attribute is the recording's."""

    def __init__(self, rec: Any, session: Session) -> None:
        self._rec = rec
        self.session = session
        columns = summary_columns(session)
        columns["model"] = rec.model or session.model
        self.__dict__.update(columns)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rec, name)

    @property
    def cost_origin(self) -> str:
        """Where the fold's cost comes from: ``cli``, ``estimate`` or ``unknown``."""
        return str(self.__dict__["cost_source"])

    @property
    def cost(self) -> float | None:
        """What the calls so far cost (None when unknown, never 0 for unknown)."""
        return None if self.cost_origin == "unknown" else float(self.__dict__["cost_usd"])


def live(rec: Any, session: Session | None) -> Any:
    """``rec`` (a stored recording) as every view shows it: a running one's turns,
    calls, tools, tokens, lines and cost are those of ``session`` (its session
    model as far as it is stored, the fold the page draws its conversation from),
    not its summary columns, which are written at its end (they said 0 turns);
    an ended one, or one with no ``session``, is ``rec``.

    Its cost is what its calls so far cost, as its turns' lines say it: the
    CLI's where it reported one, else the price table's (an estimate);
    ``not yet reported`` before any call (:func:`claudetrace.pricing.cost_text`)."""
    if session is None or rec.status != "running":
        return rec
    return Live(rec, session)


def header(rec: Any, session: Session | None = None) -> Header:
    """The header of ``rec`` (a stored recording); ``session`` (its session model,
    as far as it is stored) gives a running session's liveness and figures
    (:func:`live`).

    A running session's CLI version and exit are not known yet: they say ``not
    yet``; its cost is what its calls so far cost (the CLI's where it reported
    one, else the price table's, an estimate), ``not yet reported`` before any.
    """
    running = rec.status == "running"
    live_state = None if session is None else session_liveness(rec, session)
    last_ns = live_state.last_event_ns if live_state is not None else None
    cli = rec.claude_code_version or ("not yet" if running else "—")
    shown = live(rec, session)
    took = rec.duration_ns if rec.duration_ns is not None else last_ns
    return Header(
        status=rec.status,
        liveness=live_state,
        started=moment(rec.started_ns),
        last_event=clock(rec.started_ns, last_ns) + f" UTC ({offset(last_ns)})"
        if last_ns is not None else "—",
        duration=duration(took) if took is not None else "—",
        cost=cost_text(shown),
        cli=cli,
        exit=exit_text(rec),
        model=shown.model or "—",
        turns=shown.turns or 0,
        lines=shown.event_count or 0,
        tool_calls=shown.tool_calls or 0,
        tool_errors=shown.tool_errors or 0,
        usage=Usage(shown.input_tokens or 0, shown.output_tokens or 0,
                    shown.cache_read_tokens or 0, shown.cache_creation_tokens or 0),
        model_calls=shown.model_calls or 0,
        bytes=shown.byte_count or 0,
        duration_ns=took,
    )


__all__ = [
    "CallFigures",
    "Header",
    "Live",
    "TraceNode",
    "TraceRow",
    "call_figures",
    "clock",
    "duration",
    "duration_s",
    "header",
    "live",
    "moment",
    "money",
    "offset",
    "signed",
    "tokens_text",
    "trace_rows",
    "trace_tree",
    "walk",
]
