"""The span builder: a pure, deterministic state machine from events to spans.

Fed the :class:`~claudetrace.model.events.Event` stream of one recording (live from the
proxy or read back from the store), it produces the span tree of the design::

    invoke_agent claude-code                 the recording
    ├─ turn N                                user message → its result
    │  ├─ chat {model}                       one API message
    │  ├─ execute_tool {name}                tool_use → tool_result
    │  │  ├─ can_use_tool                    permission round trip
    │  │  ├─ hook_callback {event}           hook round trip
    │  │  └─ invoke_agent {subagent_type}    subagent work (parent_tool_use_id)
    │  └─ {mcp.method.name} {server}         mcp_message round trip
    └─ control {subtype}                     host-initiated control request

Span times are the recorded ones (recording start + event offset) and ids are
derived from the recording id, so the same events always give the same spans.
Spans are handed to ``on_end`` as soon as they finish (children before parents;
the root last, from :meth:`SpanBuilder.close`).  Per-event work is kept small:
the builder sees every ``stream_event`` delta of a streaming session.

The handlers here read each kind of line; the bookkeeping of open spans, turns
and lanes they share lives in :mod:`.spantree`.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice
from operator import attrgetter
from typing import Any

from ..model import Usage
from ..model.content import find_block, message_blocks
from ..model.events import Event
from ..model.protocol import is_synthetic, message_error, opt_str
from ..model.session import TASK_DONE, TASK_SUBTYPES
from ..recording import RecordingInfo
from . import conventions as c
from .attributes import (
    error_text,
    exit_reason,
    mcp_error,
    mcp_request,
)
from .content import (
    ContentPolicy,
    finish_reason,
    message_parts,
    output_messages,
    user_input,
)
from .records import Attributes, SpanKind, SpanRecord
from .spantree import Lane, PendingRequest, SpanTree, usage_of

_CHUNKS = frozenset({"content_block_delta", "content_block_start", "content_block_stop"})
_T_NS = attrgetter("t_ns")


class SpanBuilder(SpanTree):
    """Turns one recording's events into finished :class:`SpanRecord` s.

    ``on_end`` receives each span when it ends; without it finished spans collect
    in :attr:`finished`.  Call :meth:`feed` for every event in sequence order,
    then :meth:`close` once.
    """

    # -- feeding -------------------------------------------------------------------

    def feed(self, event: Event) -> None:
        """Advance the state machine by one event."""
        now = self._started_ns + event.t_ns
        if now > self._last_ns:
            self._last_ns = now
        self.session.add(event)  # the protocol's meaning: read from it below
        fields = event.fields
        mtype = fields.type
        if event.direction == "out":
            self._saw_output = True
            if self._session_id is None and fields.session_id:
                self._session_id = fields.session_id
            # Most lines of a streaming session are stream_event chunks, most of the
            # rest thinking progress: both are decided here, before any other test.
            if mtype == "stream_event":
                if fields.subtype not in _CHUNKS:  # a chunk changes no span
                    self._stream_event(event, now)
                return
            if mtype == "system":
                subtype = fields.subtype
                if subtype == "thinking_tokens":
                    self._thinking_tokens(event, fields.parent_tool_use_id)
                    return
                if subtype == "status":
                    if event.obj.get("status") == "requesting":
                        self._marks[fields.parent_tool_use_id] = now
                elif subtype in TASK_SUBTYPES:
                    self._task(event, now)
            elif mtype == "assistant":
                self._assistant(event, now)
                return
            elif mtype == "user":
                self._user_out(event, now)
                return
            elif mtype == "result":
                self._result(event, now)
                return
        elif event.direction == "in" and mtype == "user":
            self._user_in(event, now)
            return
        if mtype == "control_request":
            self._control_request(event, now)
        elif mtype == "control_response":
            self._control_response(event, now)
        elif mtype == "control_cancel_request":
            self._cancel(event, now)
        else:
            self._span_event(event, now)

    def feed_many(self, events: Iterable[Event]) -> None:
        """:meth:`feed` each event in order, deciding the commonest lines inline.

        Once the session id is known, a ``stream_event`` chunk out of the CLI
        changes nothing but the latest time, and a thinking progress line on a
        model call that has counted one before only counts: most lines of a
        streaming session are one or the other, so they are handled here, with
        no call, and the latest time is taken once for the whole list.
        Anything else goes to :meth:`feed`.
        """
        if isinstance(events, list):
            self._feed_list(events)
            return
        source = iter(events)  # a backfill's stream from the store: in slices
        while batch := list(islice(source, 1024)):
            self._feed_list(batch)

    def _feed_list(self, events: list[Event]) -> None:
        feed = self.feed
        at = 0
        while not self.passes_over_chunks:
            if at == len(events):
                return
            feed(events[at])
            at += 1
        chunks, thinking, count = _CHUNKS, self._thinking_tokens, self.count_thinking
        for event in events[at:] if at else events:
            # The slot, not the property: the indexer has parsed every line, and
            # the property's call would be a fifth of this loop's cost.
            fields = event._fields or event.fields
            subtype = fields.subtype
            if subtype in chunks:
                if fields.type == "stream_event" and event.direction == "out":
                    continue
            elif subtype == "thinking_tokens" and fields.type == "system" \
                    and event.direction == "out":
                lane = fields.parent_tool_use_id
                if not count(lane, event.obj.get("estimated_tokens")):
                    thinking(event, lane)
                continue
            feed(event)
        self.advance_to(max(map(_T_NS, events), default=0))

    @property
    def passes_over_chunks(self) -> bool:
        """True once a ``content_block_*`` chunk out of the CLI changes no span (the
        session id is known): a reader may then leave such lines out."""
        return self._saw_output and self._session_id is not None

    def count_thinking(self, lane: Lane, estimate: Any, lines: int = 1) -> bool:
        """Count ``lines`` thinking progress lines on ``lane``'s model call, the last
        of them with ``estimate``, if that call has an estimate already (else False:
        the lines need :meth:`feed`)."""
        chat = self._lane_chat.get(lane)
        if chat is None or chat.thinking_tokens is None:
            return False
        # What _thinking_tokens does, line by line, once the call has an estimate.
        chat.thinking_updates += lines
        if isinstance(estimate, int):
            chat.thinking_tokens = estimate
        return True

    def advance_to(self, t_ns: int) -> None:
        """Lines up to ``t_ns`` (ns since the child started) were read, fed or not."""
        latest = self._started_ns + t_ns
        if latest > self._last_ns:
            self._last_ns = latest

    # -- turns ---------------------------------------------------------------------

    def _user_in(self, event: Event, now: int) -> None:
        turn = self._start_turn(now)
        if self.content.enabled:
            messages = user_input(event, self.content)
            turn.attributes[c.GEN_AI_INPUT_MESSAGES] = messages
            # The agent's input is the session's first prompt (what a trace list shows).
            self.root.attributes.setdefault(c.GEN_AI_INPUT_MESSAGES, messages)

    def _result(self, event: Event, now: int) -> None:
        msg = event.message or {}
        span = self._turn(now)
        assert span is not None
        self._turns.popleft()
        turn = self._model_turn(span)
        attrs = span.attributes
        if turn.result_subtype is not None:
            attrs[c.RESULT_SUBTYPE] = turn.result_subtype
        attrs[c.IS_ERROR] = turn.errored
        if self._session_id:
            attrs[c.GEN_AI_CONVERSATION_ID] = self._session_id
        usage = Usage()
        for model_usage in turn.usage_by_model.values():
            usage.add(model_usage)
        attrs.update(usage_of(usage))
        if turn.cost_by_model:
            attrs[c.COST_USD] = round(turn.cost_usd, 9)
        if turn.num_turns is not None:
            attrs[c.NUM_TURNS] = turn.num_turns
        if self.content.enabled and isinstance(msg.get("result"), str):
            parts = message_parts(msg["result"], self.content)
            reason = finish_reason(opt_str(msg.get("stop_reason")), parts)
            attrs[c.GEN_AI_OUTPUT_MESSAGES] = output_messages(
                parts, "error" if turn.errored else reason)
            # ...and its output the last turn's result.
            self.root.attributes[c.GEN_AI_OUTPUT_MESSAGES] = attrs[c.GEN_AI_OUTPUT_MESSAGES]
        reason = "interrupted" if turn.interrupted else "turn ended before it finished"
        if turn.interrupted:
            attrs[c.INTERRUPTED] = True
        self._close_children(span, now, reason)
        self._release_chats(turn.number, span)
        if turn.failed:
            span.set_error(f"ended with {turn.ended_with}")
        self._end(span, now)

    def _thinking_tokens(self, event: Event, lane: Lane) -> None:
        """A thinking progress line: one per thinking delta, so counted, not a span event each.

        On a model call (the common case) the count and the latest estimate are
        kept in plain ints until the span ends (:meth:`~.spantree.SpanTree._end`
        writes them); the first line sets each attribute, so it keeps its place.
        """
        estimate = event.obj.get("estimated_tokens")  # a "system" line is a JSON object
        chat = self._lane_chat.get(lane)
        if chat is not None:
            chat.thinking_updates += 1
            if chat.thinking_updates == 1:
                chat.span.attributes[c.THINKING_UPDATES] = 1
            if isinstance(estimate, int):
                if chat.thinking_tokens is None:
                    chat.span.attributes[c.THINKING_ESTIMATED_TOKENS] = estimate
                chat.thinking_tokens = estimate
            return
        attrs = self._context_span(lane).attributes
        count = attrs.get(c.THINKING_UPDATES, 0)
        attrs[c.THINKING_UPDATES] = (count if isinstance(count, int) else 0) + 1
        if isinstance(estimate, int):
            attrs[c.THINKING_ESTIMATED_TOKENS] = estimate

    def _stream_event(self, event: Event, now: int) -> None:
        sub = event.fields.subtype
        msg = event.message or {}
        inner = msg.get("event")
        if not isinstance(inner, dict):
            return
        lane = event.fields.parent_tool_use_id
        if sub == "message_start":
            message = inner.get("message")
            message = message if isinstance(message, dict) else {}
            msg_id = message.get("id")
            if not isinstance(msg_id, str):
                msg_id = f"seq{event.seq}"
            previous = self._lane_chat.get(lane)
            if previous is not None:
                self._end_chat(previous, "superseded by a new message before message_stop")
            self._open_chat(msg_id, lane, now, message.get("model"), deferred=False)
            return
        current = self._lane_chat.get(lane)
        if current is None:
            return
        entry = current
        entry.last_ns = now
        call = self.session.calls.get(str(entry.span.attributes.get(c.GEN_AI_RESPONSE_ID)))
        if sub == "message_delta":
            if call is not None and call.stop_reason is not None:
                entry.span.attributes[c.GEN_AI_RESPONSE_FINISH_REASONS] = (call.stop_reason,)
        elif sub == "message_stop":
            self._end_chat(entry, "interrupted" if call is not None and call.interrupted else None)
        elif sub == "error":
            self._end_chat(entry, error_text(inner.get("error")) or "stream error")

    def _assistant(self, event: Event, now: int) -> None:
        msg = event.message or {}
        message = msg.get("message")
        message = message if isinstance(message, dict) else {}
        if is_synthetic(message):
            # Claude Code's own stand-in for an answer (an API error it gave up
            # on): no API message, so no chat span; an event on the turn's span.
            self._span_event(event, now)
            return
        lane = event.fields.parent_tool_use_id
        msg_id = message.get("id")
        if not isinstance(msg_id, str):
            msg_id = f"seq{event.seq}"
        entry = self._chats.get(msg_id)
        if entry is None:
            # Partial messages off: assistant lines sharing a message id are one call.
            previous = self._lane_chat.get(lane)
            if previous is not None and previous.deferred:
                self._end_chat(previous)
            entry = self._open_chat(msg_id, lane, now, message.get("model"), deferred=True)
        if entry.deferred:
            entry.last_ns = now
            call = self.session.calls.get(msg_id)
            if call is not None and call.stop_reason is not None:
                entry.span.attributes[c.GEN_AI_RESPONSE_FINISH_REASONS] = (call.stop_reason,)
        if self.content.enabled:  # one message of all the call's lines, written at its end
            entry.parts = (entry.parts or []) + message_parts(message.get("content"), self.content)
        error = message_error(event)
        if error:
            entry.span.set_error(error)
            entry.span.attributes[c.ERROR_TYPE] = error
        for ref in event.fields.tools:
            if ref.kind == "use" and ref.tool_use_id not in self._tools:
                self._open_tool(ref.tool_use_id, ref.name, lane, now)

    # -- tools -------------------------------------------------------------------

    def _user_out(self, event: Event, now: int) -> None:
        results = [ref for ref in event.fields.tools if ref.kind == "result"]
        lane = event.fields.parent_tool_use_id
        if not results:
            if lane is not None and lane in self._tools:
                self._lane_parent(lane, now)  # a subagent's prompt: its span starts here
            self._span_event(event, now)
            return
        found = message_blocks(event) if self.content.enabled else []
        chat = self._lane_chat.get(lane)
        if chat is not None and chat.deferred:
            self._end_chat(chat)
        for ref in results:
            span = self._tools.get(ref.tool_use_id)
            if span is None or span.span_id not in self._open:
                continue
            error = self.session.tools[ref.tool_use_id].is_error
            span.attributes[c.TOOL_OUTCOME] = "error" if error else "ok"
            if self.content.enabled:
                block = find_block(found, "tool_result", ref.tool_use_id)
                result = self.content.clip(block.text if block is not None else "")
                span.attributes[c.GEN_AI_TOOL_CALL_RESULT] = result
            self._end_subagent(ref.tool_use_id, now)
            self._end(span, now, "tool returned an error" if error else None)
        self._marks[lane] = now

    def _task(self, event: Event, now: int) -> None:
        """Subagent lifecycle messages: open its span early, end it when done."""
        agent, status = self.session.task_of(event)
        tool_use_id = agent.tool_use_id if agent is not None else None
        if agent is not None:
            if agent.subagent_type and agent.tool_use_id not in self._subagent_types:
                self._subagent_types[agent.tool_use_id] = agent.subagent_type
            if agent.tool_use_id in self._tools:
                self._lane_parent(agent.tool_use_id, now)
        # The message itself stays visible as an event on the subagent's span.
        self._span_event(event, now, lane=tool_use_id)
        if tool_use_id is not None and status in TASK_DONE:
            span = self._agents.get(tool_use_id)
            if span is not None and status != "completed":
                span.set_error(f"subagent {status}")
            self._end_subagent(tool_use_id, now)

    # -- control requests ------------------------------------------------------------

    def _control_request(self, event: Event, now: int) -> None:
        controls = self.session.controls
        if not controls or controls[-1].request_seq != event.seq:
            return  # the model opened no round trip for it (no request in it, on stderr…)
        trip = controls[-1]  # the round trip this line opened
        attrs: Attributes = {
            c.CONTROL_SUBTYPE: trip.subtype,
            c.CONTROL_INITIATOR: trip.initiator,
            c.CONTROL_REQUEST_ID: trip.request_id,
        }
        kind = trip.kind
        if kind in ("permission", "hook"):
            tool_use_id = trip.tool_use_id
            tool = self._tools.get(tool_use_id) if tool_use_id else None
            if tool is None and tool_use_id and kind == "permission":
                tool = self._open_tool(tool_use_id, trip.tool_name, None, now)
            parent = tool or self._turn(now, create=False) or self.root
            if tool_use_id:
                attrs[c.GEN_AI_TOOL_CALL_ID] = tool_use_id
            if trip.tool_name is not None:
                attrs[c.GEN_AI_TOOL_NAME] = trip.tool_name
            if kind == "permission":
                name = "can_use_tool"
            else:
                attrs[c.HOOK_EVENT] = trip.hook_event or "unknown"
                if trip.callback_id is not None:
                    attrs[c.HOOK_CALLBACK_ID] = trip.callback_id
                name = f"hook_callback {trip.hook_event or 'unknown'}"
            span_kind: SpanKind = "internal"
        elif kind == "mcp":
            parent = self._turn(now, create=False) or self.root
            name, mcp_attrs = mcp_request(trip.request)
            attrs.update(mcp_attrs)
            span_kind = "client"
        else:
            name = f"control {trip.subtype}"
            parent = self.root
            if trip.initiator == "cli":
                parent = self._turn(now, create=False) or self.root
            if trip.model is not None:
                attrs["claudetrace.control.model"] = trip.model
            if trip.mode is not None:
                attrs[c.PERMISSION_MODE] = trip.mode
            span_kind = "client" if trip.initiator == "host" else "internal"
        turn = parent if parent in self._turns else self._open_turn_of(parent)
        entry = self._new(f"request/{trip.request_id}", name, parent, now, attrs,
                          kind=span_kind, turn=turn)
        pending = PendingRequest(entry.span, trip)
        if not trip.answered:
            self._requests[trip.request_id] = pending
            return
        # Answered before we saw it asked: the true request time lies between the
        # two records, so the round trip is reported as zero at the answer's time.
        entry.span.start_ns = self._started_ns + trip.request_ns
        entry.span.attributes["claudetrace.control.reordered"] = True
        self._answer(pending, entry.span.start_ns)

    def _control_response(self, event: Event, now: int) -> None:
        request_id = event.fields.request_id
        pending = self._requests.get(request_id) if request_id else None
        if pending is not None and pending.trip.response_seq == event.seq:
            del self._requests[pending.trip.request_id]
            self._answer(pending, now)
        elif not self.session.holds_answer(event):
            self._span_event(event, now)  # answers nothing asked (a repeat, a stray)

    def _answer(self, pending: PendingRequest, now: int) -> None:
        span, trip = pending.span, pending.trip
        error = trip.error
        span.attributes[c.CONTROL_OUTCOME] = trip.outcome
        if trip.kind == "permission" and trip.decision is not None:
            span.attributes[c.PERMISSION_DECISION] = trip.decision
        elif trip.kind == "hook" and trip.decision is not None:
            span.attributes[c.HOOK_PERMISSION_DECISION] = trip.decision
        elif trip.kind == "mcp":
            mcp_error(trip.answer.get("mcp_response"), span.attributes)  # its code
        self._end(span, now, error)

    def _cancel(self, event: Event, now: int) -> None:
        request_id = event.fields.request_id
        pending = self._requests.pop(request_id, None) if request_id else None
        if pending is None:
            self._span_event(event, now)
            return
        pending.span.attributes[c.CONTROL_OUTCOME] = "unanswered"
        self._end(pending.span, now, "cancelled")

    # -- the end ---------------------------------------------------------------------

    def close(self, info: RecordingInfo | None = None, *, live: bool = False) -> SpanRecord:
        """End everything still open (with an error saying why) and the root span.

        ``live``: the recording is still being made (its proxy runs), so what is
        open is in progress, not cut short: it ends as of the last event, unset.
        """
        if self._closed:
            return self.root
        self._closed = True
        info = info or self.info
        now = self._last_ns
        session = self.session
        outcome = session.outcome_of(info, live=live)
        reason = None if outcome.status == "running" else outcome.reason or exit_reason(info)
        for request in self._requests.values():
            request.span.attributes[c.CONTROL_OUTCOME] = "unanswered"
        for tool in self._tools.values():
            if tool.span_id in self._open:
                tool.attributes[c.TOOL_OUTCOME] = "unfinished"
        open_turns = bool(self._turns)
        for entry in sorted(self._open.values(), key=lambda e: e.span.start_ns, reverse=True):
            if entry.deferred:
                self._end_chat(entry, reason if open_turns else None)
            elif entry.span is not self.root:
                self._end(entry.span, now, reason)
        self._release_chats(None)
        self._requests.clear()
        self._turns.clear()
        for answer in session.orphan_answers:
            self._span_event(answer, self._started_ns + answer.t_ns)
        root = self.root
        attrs = root.attributes
        if self._session_id:
            attrs[c.GEN_AI_CONVERSATION_ID] = self._session_id
        if session.model:
            attrs[c.GEN_AI_REQUEST_MODEL] = session.model
        if info.claude_code_version:
            attrs[c.CLAUDE_CODE_VERSION] = info.claude_code_version
        if info.permission_mode:
            attrs[c.PERMISSION_MODE] = info.permission_mode
        if info.exit_code is not None:
            attrs[c.EXIT_CODE] = info.exit_code
        if info.signal is not None:
            attrs[c.SIGNAL] = info.signal
        attrs[c.SESSION_OUTCOME] = outcome.status
        if outcome.reason:
            attrs[c.SESSION_OUTCOME_REASON] = outcome.reason
        cost = session.cost()
        root.costs.update({m: v for m, v in cost.by_model.items() if v is not None})
        attrs[c.COST_SOURCE] = cost.source
        if cost.usd is not None and (cost.source != "cli" or session.cost_by_model):
            attrs[c.COST_USD] = cost.usd
        if outcome.failed:
            root.set_error(outcome.reason or outcome.status)
        end = now
        if info.ended_ns is not None:
            end = max(end, info.ended_ns)
        root.end_ns = max(end, root.start_ns)
        self._emit(root)
        return root


def build_spans(
    info: RecordingInfo, events: Iterable[Event], *, content: ContentPolicy | None = None
) -> list[SpanRecord]:
    """All spans of a recording, in the order they ended (the root last)."""
    builder = SpanBuilder(info, content=content)
    for event in events:
        builder.feed(event)
    builder.close(info)
    return builder.finished
