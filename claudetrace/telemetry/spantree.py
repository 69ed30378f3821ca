"""The span tree under construction: open spans, turns, lanes and where new spans nest.

:class:`SpanTree` is the bookkeeping half of the span builder: it holds every
span that has not ended, knows which turn each belongs to and which lane (main
agent or a subagent's ``parent_tool_use_id``) it runs in, and opens and ends spans
with deterministic keys and ids.  :class:`~.spans.SpanBuilder` adds the other half,
the handlers that read each kind of protocol line and decide what to open or end.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model import ControlRoundTrip, ModelCall, Session, Turn, Usage
from ..model.events import Event
from ..recording import RecordingInfo
from . import conventions as c
from .content import ContentPolicy, finish_reason, jsonish, output_messages, scalar_fields
from .context import host_parent, trace_id_of
from .records import Attributes, SpanEvent, SpanKind, SpanRecord, span_id_for

Lane = str | None  # a parent_tool_use_id: None is the main agent, else a subagent


@dataclass(slots=True, eq=False)
class OpenSpan:
    """Bookkeeping for a span that has not ended yet."""

    span: SpanRecord
    turn: SpanRecord | None  # the turn it belongs to, closed with it
    lane: Lane = None
    deferred: bool = False  # a chat built from assistant lines: ends when its lane moves on
    last_ns: int = 0
    #: Thinking progress on a model call, written to its attributes when it ends.
    thinking_updates: int = 0
    thinking_tokens: int | None = None
    #: A model call's output as GenAI message parts (content capture on), written
    #: to its attributes when it ends, as one message.
    parts: list[dict[str, Any]] | None = None


@dataclass(slots=True, eq=False)
class PendingRequest:
    """An unanswered control request (either direction) and its span."""

    span: SpanRecord
    trip: ControlRoundTrip


def usage_of(usage: Usage) -> Attributes:
    """GenAI usage attributes (``input_tokens`` includes cache reads and writes)."""
    return {
        c.GEN_AI_USAGE_INPUT_TOKENS: usage.input_total,
        c.GEN_AI_USAGE_OUTPUT_TOKENS: usage.output,
        c.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: usage.cache_read,
        c.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: usage.cache_creation,
    }


def _start_ns(entry: OpenSpan) -> int:
    return entry.span.start_ns


class SpanTree:
    """The open spans of one recording's trace and the plumbing that opens and ends them.

    ``on_end`` receives each span when it ends; without it finished spans collect
    in :attr:`finished`.
    """

    def __init__(
        self,
        info: RecordingInfo,
        *,
        content: ContentPolicy | None = None,
        on_end: Callable[[SpanRecord], None] | None = None,
    ) -> None:
        self.info = info
        self.content = content or ContentPolicy()
        self.finished: list[SpanRecord] = []
        self._emit = on_end or self.finished.append
        self._rid = info.id
        # Within the host's trace when it started the CLI in one (TRACEPARENT).
        parent = host_parent(info.env)
        self.trace_id = trace_id_of(info.id, parent)
        self._keys: dict[str, int] = {}
        self._started_ns = info.started_ns  # event times are offsets from it
        self._last_ns = info.started_ns
        #: The session model, fed every event first: spans read what it means.
        self.session = Session(model=info.model, session_id=info.cli_session_id)
        self._session_id: str | None = info.cli_session_id
        self._turn_count = 0
        self._turns: deque[SpanRecord] = deque()
        self._open: dict[int, OpenSpan] = {}
        self._chats: dict[str, OpenSpan] = {}
        self._lane_chat: dict[Lane, OpenSpan] = {}
        self._tools: dict[str, SpanRecord] = {}
        self._subagent_types: dict[str, str] = {}
        self._agents: dict[str, SpanRecord] = {}
        self._requests: dict[str, PendingRequest] = {}
        #: Model calls ended whose usage waits for their turn's result.
        self._parked: list[tuple[OpenSpan, ModelCall, str | None]] = []
        self._marks: dict[Lane, int] = {}
        self._saw_output = False
        self._closed = False
        self.root = SpanRecord(
            key="root",
            name=f"{c.OP_INVOKE_AGENT} {c.AGENT_NAME}",
            trace_id=self.trace_id,
            span_id=span_id_for(info.id, "root"),
            parent_id=parent[1] if parent else None,
            start_ns=info.started_ns,
            attributes={
                c.GEN_AI_OPERATION_NAME: c.OP_INVOKE_AGENT,
                c.GEN_AI_PROVIDER_NAME: c.PROVIDER,
                c.GEN_AI_AGENT_NAME: c.AGENT_NAME,
                c.RECORDING_ID: info.id,
            },
        )
        if info.name:
            self.root.attributes[c.RECORDING_NAME] = info.name

    # -- span plumbing -----------------------------------------------------------

    def _new(
        self,
        key: str,
        name: str,
        parent: SpanRecord,
        start_ns: int,
        attributes: Attributes,
        *,
        kind: SpanKind = "internal",
        turn: SpanRecord | None = None,
        lane: Lane = None,
        deferred: bool = False,
    ) -> OpenSpan:
        # A key can legitimately repeat (a request id reused); number the repeats so
        # ids stay unique and stay the same on every run.
        seen = self._keys.get(key, 0)
        self._keys[key] = seen + 1
        if seen:
            key = f"{key}#{seen}"
        span = SpanRecord(
            key=key,
            name=name,
            trace_id=self.trace_id,
            span_id=span_id_for(self._rid, key),
            parent_id=parent.span_id,
            start_ns=start_ns,
            kind=kind,
            attributes=attributes,
        )
        entry = OpenSpan(span, turn, lane, deferred, start_ns)
        self._open[span.span_id] = entry
        return entry

    def _end(self, span: SpanRecord, end_ns: int, error: str | None = None) -> None:
        entry = self._open.pop(span.span_id, None)
        if entry is None:
            return
        if entry.thinking_updates:
            span.attributes[c.THINKING_UPDATES] = entry.thinking_updates
            if entry.thinking_tokens is not None:
                span.attributes[c.THINKING_ESTIMATED_TOKENS] = entry.thinking_tokens
        span.end_ns = max(end_ns, span.start_ns)
        if error:
            span.set_error(error)
        self._emit(span)

    def _turn(self, now: int, *, create: bool = True) -> SpanRecord | None:
        if self._turns:
            return self._turns[0]
        if not create:
            return None
        # Output with no user message before it (a prompt given in argv, a
        # recording that starts mid-session): an implicit turn keeps the tree whole.
        return self._start_turn(now, implicit=True)

    def _start_turn(self, now: int, *, implicit: bool = False) -> SpanRecord:
        self._turn_count += 1
        n = self._turn_count
        attrs: Attributes = {c.TURN_NUMBER: n}
        if implicit:
            attrs[c.TURN_IMPLICIT] = True
        if self._session_id:
            attrs[c.GEN_AI_CONVERSATION_ID] = self._session_id
        span = self._new(f"turn/{n}", f"turn {n}", self.root, now, attrs).span
        self._turns.append(span)
        self._marks[None] = now
        return span

    def _lane_parent(self, lane: Lane, now: int) -> tuple[SpanRecord, SpanRecord | None]:
        """The span new work in ``lane`` nests under, and the turn it belongs to."""
        turn = self._turn(now)
        if lane is None:
            assert turn is not None
            return turn, turn
        assert turn is not None
        agent = self._agents.get(lane)
        tool = self._tools.get(lane)
        tool_open = tool is not None and tool.span_id in self._open
        if agent is not None:
            # One subagent span per tool use: late messages nest under what is open.
            if agent.span_id in self._open:
                return agent, turn
            return (tool if tool is not None and tool_open else turn), turn
        if tool is None or not tool_open:
            return turn, turn
        name = self._subagent_types.get(lane, "subagent")
        agent = self._new(
            f"agent/{lane}",
            f"{c.OP_INVOKE_AGENT} {name}",
            tool,
            now,
            {
                c.GEN_AI_OPERATION_NAME: c.OP_INVOKE_AGENT,
                c.GEN_AI_PROVIDER_NAME: c.PROVIDER,
                c.GEN_AI_AGENT_NAME: name,
                c.GEN_AI_TOOL_CALL_ID: lane,
            },
            turn=turn,
            lane=lane,
        ).span
        self._agents[lane] = agent
        return agent, turn

    def _context_span(self, lane: Lane) -> SpanRecord:
        """Where a span event about ``lane`` goes: its subagent, the turn, or the root."""
        if lane is not None:
            agent = self._agents.get(lane)
            if agent is not None and agent.span_id in self._open:
                return agent
        return self._turns[0] if self._turns else self.root

    def _span_event(self, event: Event, now: int, lane: Lane = None) -> None:
        fields = event.fields
        lane = lane or fields.parent_tool_use_id
        attrs: Attributes = {c.EVENT_SEQ: event.seq, c.EVENT_DIRECTION: event.direction}
        if event.direction == "err" or not fields.is_json:
            name = "stderr" if event.direction == "err" else "unparsed line"
            attrs[c.EVENT_SIZE] = len(event.data)
            attrs[c.EVENT_LINE] = self.content.clip(event.text)
        else:
            name = fields.type or "json"
            if fields.subtype:
                name = f"{name}/{fields.subtype}"
                attrs[c.EVENT_SUBTYPE] = fields.subtype
            if fields.type:
                attrs[c.EVENT_TYPE] = fields.type
            msg = event.message
            if msg is not None:
                attrs.update(scalar_fields(msg))
        self._context_span(lane).events.append(SpanEvent(name, now, attrs))

    def _close_children(self, owner: SpanRecord, now: int, reason: str) -> None:
        # Deepest first (reverse creation order), so children end before parents.
        # Filter before sorting: spans left open elsewhere must not make this O(n log n).
        children = [e for e in self._open.values() if e.turn is owner and e.span is not owner]
        for entry in sorted(children, key=_start_ns, reverse=True):
            if entry.deferred:
                self._end_chat(entry)
            else:
                self._end(entry.span, now, reason)

    # -- model calls ---------------------------------------------------------------

    def _open_chat(
        self, msg_id: str, lane: Lane, now: int, model: Any, *, deferred: bool
    ) -> OpenSpan:
        parent, turn = self._lane_parent(lane, now)
        start = self._marks.pop(lane, None)
        if start is None or start > now:
            start = now
        response_model = model if isinstance(model, str) else None
        # The main agent asks for the session's model; a subagent for its own,
        # which the CLI reports on each of its messages.
        request_model = (
            response_model or self.session.model if lane is not None
            else self.session.model or response_model
        )
        attrs: Attributes = {
            c.GEN_AI_OPERATION_NAME: c.OP_CHAT,
            c.GEN_AI_PROVIDER_NAME: c.PROVIDER,
            c.GEN_AI_RESPONSE_ID: msg_id,
        }
        if request_model:
            attrs[c.GEN_AI_REQUEST_MODEL] = request_model
        if response_model:
            attrs[c.GEN_AI_RESPONSE_MODEL] = response_model
        if self._session_id:
            attrs[c.GEN_AI_CONVERSATION_ID] = self._session_id
        if not deferred:
            attrs[c.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = (now - start) / 1e9
        name = f"{c.OP_CHAT} {request_model or 'unknown'}"
        entry = self._new(
            f"chat/{msg_id}",
            name,
            parent,
            start,
            attrs,
            kind="client",
            turn=turn,
            lane=lane,
            deferred=deferred,
        )
        entry.last_ns = now
        call = self.session.calls.get(msg_id)
        if call is not None:  # provisional until the call (or its turn) ends
            entry.span.attributes.update(usage_of(call.usage))
        self._chats[msg_id] = entry
        self._lane_chat[lane] = entry
        return entry

    def _end_chat(self, entry: OpenSpan, error: str | None = None) -> None:
        msg_id = str(entry.span.attributes.get(c.GEN_AI_RESPONSE_ID))
        self._chats.pop(msg_id, None)
        if self._lane_chat.get(entry.lane) is entry:
            del self._lane_chat[entry.lane]
        call = self.session.calls.get(msg_id)
        if call is not None and not call.final:
            # Its usage is known once the turn's result apportions the CLI's count.
            self._open.pop(entry.span.span_id, None)
            self._parked.append((entry, call, error))
            return
        if call is not None:
            self._usage(entry.span, call)
        self._write_output(entry)
        self._end(entry.span, entry.last_ns, error)

    def _write_output(self, entry: OpenSpan) -> None:
        """The call's output messages, when content is captured: one message of all the
        call's parts, with its finish reason."""
        if entry.parts is None:
            return
        reasons = entry.span.attributes.get(c.GEN_AI_RESPONSE_FINISH_REASONS)
        stop_reason = reasons[0] if isinstance(reasons, tuple) and reasons else None
        reason = finish_reason(stop_reason, entry.parts)
        entry.span.attributes[c.GEN_AI_OUTPUT_MESSAGES] = output_messages(entry.parts, reason)

    def _usage(self, span: SpanRecord, call: ModelCall) -> None:
        span.attributes.update(usage_of(call.usage))
        span.attributes[c.USAGE_SOURCE] = call.usage_source

    def _release_chats(self, turn: int | None, turn_span: SpanRecord | None = None) -> None:
        """Emit the parked model calls of ``turn`` (all when None) with their final usage,
        and a span for each call the CLI counted but never showed (a subagent's), under
        ``turn_span``, the turn's own span."""
        keep = []
        for entry, call, error in self._parked:
            if turn is not None and call.turn != turn:
                keep.append((entry, call, error))
                continue
            self._usage(entry.span, call)
            self._open[entry.span.span_id] = entry
            self._write_output(entry)
            self._end(entry.span, entry.last_ns, error)
        self._parked = keep
        if turn is None:
            return
        model_turn = self._model_turn_number(turn)
        for call in model_turn.calls if model_turn else ():
            if not call.observed:
                self._unobserved_chat(call, turn_span)

    def _unobserved_chat(self, call: ModelCall, turn: SpanRecord | None) -> None:
        # Under the subagent that made it, else its tool call, else its own turn
        # (which has left the open turns by now: its result is being read).
        parent = self._agents.get(call.lane or "") or self._tools.get(call.lane or "") or turn
        attrs: Attributes = {
            c.GEN_AI_OPERATION_NAME: c.OP_CHAT,
            c.GEN_AI_PROVIDER_NAME: c.PROVIDER,
            c.GEN_AI_REQUEST_MODEL: call.model or "unknown",
        }
        if call.lane:
            attrs[c.GEN_AI_TOOL_CALL_ID] = call.lane
        start = self._started_ns + call.start_ns
        end = self._started_ns + call.end_ns
        if parent is not None and parent is not self.root:
            start, end = parent.start_ns, max(end, parent.start_ns)
        entry = self._new(f"chat/{call.id}", f"{c.OP_CHAT} {call.model or 'unknown'}",
                          parent or self.root, start, attrs, kind="client")
        self._usage(entry.span, call)
        self._end(entry.span, end)

    def _model_turn_number(self, number: int) -> Turn | None:
        turns = self.session.turns
        return turns[number - 1] if 0 < number <= len(turns) else None

    def _model_turn(self, span: SpanRecord) -> Turn:
        """The session model's turn of a turn span."""
        number = span.attributes.get(c.TURN_NUMBER)
        turn = self._model_turn_number(number) if isinstance(number, int) else None
        assert turn is not None, "the span tree and the session model count turns alike"
        return turn

    # -- tools -------------------------------------------------------------------

    def _open_tool(
        self, tool_use_id: str, name: str | None, lane: Lane, now: int
    ) -> SpanRecord:
        parent, turn = self._lane_parent(lane, now)
        tool_name = name or "unknown"
        attrs: Attributes = {
            c.GEN_AI_OPERATION_NAME: c.OP_EXECUTE_TOOL,
            c.GEN_AI_TOOL_NAME: tool_name,
            c.GEN_AI_TOOL_CALL_ID: tool_use_id,
            c.GEN_AI_TOOL_TYPE: "extension" if tool_name.startswith("mcp__") else "function",
        }
        call = self.session.tools.get(tool_use_id)
        tool_input = call.input if call is not None else None
        if call is not None and call.subagent_type is not None:
            self._subagent_types[tool_use_id] = call.subagent_type
        if self.content.enabled and tool_input is not None:
            attrs[c.GEN_AI_TOOL_CALL_ARGUMENTS] = self.content.clip(jsonish(tool_input))
        span = self._new(
            f"tool/{tool_use_id}",
            f"{c.OP_EXECUTE_TOOL} {tool_name}",
            parent,
            now,
            attrs,
            turn=turn,
            lane=lane,
        ).span
        self._tools[tool_use_id] = span
        return span

    def _end_subagent(self, tool_use_id: str, now: int) -> None:
        agent = self._agents.get(tool_use_id)
        if agent is None or agent.span_id not in self._open:
            return
        in_lane = [e for e in self._open.values() if e.lane == tool_use_id and e.span is not agent]
        for entry in sorted(in_lane, key=_start_ns, reverse=True):
            if entry.deferred:
                self._end_chat(entry)
            else:
                self._end(entry.span, now, "subagent ended before it finished")
        self._end(agent, now)

    def _open_turn_of(self, span: SpanRecord) -> SpanRecord | None:
        entry = self._open.get(span.span_id)
        return entry.turn if entry is not None else None
