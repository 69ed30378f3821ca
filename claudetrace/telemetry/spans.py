"""The span builder: a pure, deterministic state machine from events to spans.

Fed the :class:`~claudetrace.events.Event` stream of one recording (live from the
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

import copy
from collections.abc import Iterable
from itertools import islice
from operator import attrgetter
from typing import Any

from ..events import Event
from ..protocol import (
    control_request,
    control_response,
    hook_event_name,
    hook_permission_decision,
    json_number,
    opt_str,
    permission_behavior,
    request_tool_name,
    tool_result_failed,
    total_cost_usd,
)
from ..recording import RecordingInfo
from . import conventions as c
from .attributes import (
    error_text,
    exit_reason,
    find_block,
    mcp_error,
    mcp_request,
    usage_attributes,
)
from .content import ContentPolicy, assistant_output, block_text, user_input
from .records import Attributes, SpanKind, SpanRecord
from .spantree import Lane, PendingRequest, SpanTree

_TASK_SUBTYPES = frozenset({"task_started", "task_updated", "task_notification"})
_TASK_DONE = frozenset({"completed", "failed", "killed", "stopped", "cancelled"})
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
                elif subtype in _TASK_SUBTYPES:
                    self._task(event, now)
                elif subtype == "init":
                    model = event.obj.get("model")
                    if isinstance(model, str):
                        self._model = model
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
            turn.attributes[c.GEN_AI_INPUT_MESSAGES] = self.content.clip(user_input(event.message))

    def _result(self, event: Event, now: int) -> None:
        msg = event.message or {}
        turn = self._turn(now)
        assert turn is not None
        self._turns.popleft()
        attrs = turn.attributes
        subtype = msg.get("subtype")
        if isinstance(subtype, str):
            attrs[c.RESULT_SUBTYPE] = subtype
        is_error = msg.get("is_error") is True
        attrs[c.IS_ERROR] = is_error
        if self._session_id:
            attrs[c.GEN_AI_CONVERSATION_ID] = self._session_id
        attrs.update(usage_attributes(msg.get("usage")))
        turn_cost = self._add_costs(msg, total_cost_usd(event))
        if turn_cost is not None:
            attrs[c.COST_USD] = turn_cost
        num_turns = msg.get("num_turns")
        if isinstance(num_turns, int):
            attrs[c.NUM_TURNS] = num_turns
        if self.content.enabled and isinstance(msg.get("result"), str):
            output = assistant_output({"content": msg["result"]})
            attrs[c.GEN_AI_OUTPUT_MESSAGES] = self.content.clip(output)
        reason = "interrupted" if self._interrupt_pending else "turn ended before it finished"
        if self._interrupt_pending:
            attrs["claudetrace.interrupted"] = True
            self._interrupted = True
            self._interrupt_pending = False
        self._close_children(turn, now, reason)
        if is_error:
            self._any_error = True
            turn.set_error(f"result {subtype or 'error'}")
        self._end(turn, now)

    def _add_costs(self, msg: dict[str, Any], total: float | None) -> float | None:
        """Add a result's cost to the session's per-model costs; the turn's cost.

        ``total`` (``total_cost_usd``) is cumulative over the session;
        ``model_usage_since_last_result`` is the per-turn delta by model.
        """
        per_model = msg.get("model_usage_since_last_result")
        turn_cost: float | None = None
        if isinstance(per_model, dict) and per_model:
            for model, usage in per_model.items():
                cost = json_number(usage.get("costUSD")) if isinstance(usage, dict) else None
                if cost is not None:
                    self.root.costs[model] = self.root.costs.get(model, 0.0) + cost
                    turn_cost = (turn_cost or 0.0) + cost
        elif total is not None:
            turn_cost = max(0.0, total - self._cost_total)
            model = self._model or "unknown"
            self.root.costs[model] = self.root.costs.get(model, 0.0) + turn_cost
        if total is not None:
            self._cost_total = total
        return None if turn_cost is None else round(turn_cost, 9)

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
            entry = self._open_chat(msg_id, lane, now, message.get("model"), deferred=False)
            entry.span.attributes.update(usage_attributes(message.get("usage")))
            return
        current = self._lane_chat.get(lane)
        if current is None:
            return
        entry = current
        entry.last_ns = now
        if sub == "message_delta":
            delta = inner.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                entry.span.attributes[c.GEN_AI_RESPONSE_FINISH_REASONS] = (delta["stop_reason"],)
            usage = inner.get("usage")
            if isinstance(usage, dict):
                entry.span.attributes.update(usage_attributes(usage, partial=True))
        elif sub == "message_stop":
            abandoned = "abandoned_blocks" in msg or self._interrupt_pending
            self._end_chat(entry, "interrupted" if abandoned else None)
        elif sub == "error":
            self._end_chat(entry, error_text(inner.get("error")) or "stream error")

    def _assistant(self, event: Event, now: int) -> None:
        msg = event.message or {}
        message = msg.get("message")
        message = message if isinstance(message, dict) else {}
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
            attrs = entry.span.attributes
            usage = usage_attributes(message.get("usage"))
            for key, value in usage.items():
                old = attrs.get(key)
                if not isinstance(old, int) or (isinstance(value, int) and value > old):
                    attrs[key] = value
            if isinstance(message.get("stop_reason"), str):
                attrs[c.GEN_AI_RESPONSE_FINISH_REASONS] = (message["stop_reason"],)
        if self.content.enabled:
            key = c.GEN_AI_OUTPUT_MESSAGES
            previous_text = entry.span.attributes.get(key)
            text = assistant_output(message)
            if isinstance(previous_text, str):
                text = previous_text + "\n" + text
            entry.span.attributes[key] = self.content.clip(text)
        error = msg.get("error") or message.get("error")
        if error:
            entry.span.set_error(error_text(error) or "assistant error")
            entry.span.attributes[c.ERROR_TYPE] = error_text(error) or "error"
        for ref in event.fields.tools:
            if ref.kind == "use" and ref.tool_use_id not in self._tools:
                block = find_block(message, "id", ref.tool_use_id)
                self._open_tool(ref.tool_use_id, ref.name, block, lane, now)

    # -- tools -------------------------------------------------------------------

    def _user_out(self, event: Event, now: int) -> None:
        results = [ref for ref in event.fields.tools if ref.kind == "result"]
        lane = event.fields.parent_tool_use_id
        if not results:
            if lane is not None and lane in self._tools:
                self._lane_parent(lane, now)  # a subagent's prompt: its span starts here
            self._span_event(event, now)
            return
        message = (event.message or {}).get("message")
        message = message if isinstance(message, dict) else {}
        chat = self._lane_chat.get(lane)
        if chat is not None and chat.deferred:
            self._end_chat(chat)
        for ref in results:
            span = self._tools.get(ref.tool_use_id)
            if span is None or span.span_id not in self._open:
                continue
            block = find_block(message, "tool_use_id", ref.tool_use_id) or {}
            error = tool_result_failed(block)
            span.attributes[c.TOOL_OUTCOME] = "error" if error else "ok"
            if self.content.enabled:
                result = self.content.clip(block_text(block.get("content")))
                span.attributes[c.GEN_AI_TOOL_CALL_RESULT] = result
            self._end_subagent(ref.tool_use_id, now)
            self._end(span, now, "tool returned an error" if error else None)
        self._marks[lane] = now

    def _task(self, event: Event, now: int) -> None:
        """Subagent lifecycle messages: open its span early, end it when done."""
        msg = event.message or {}
        task_id = opt_str(msg.get("task_id"))
        tool_use_id = opt_str(msg.get("tool_use_id"))
        if tool_use_id and task_id:
            self._tasks[task_id] = tool_use_id
        elif task_id:
            tool_use_id = self._tasks.get(task_id)
        if tool_use_id:
            subagent_type = opt_str(msg.get("subagent_type"))
            if subagent_type and tool_use_id not in self._subagent_types:
                self._subagent_types[tool_use_id] = subagent_type
            if tool_use_id in self._tools:
                self._lane_parent(tool_use_id, now)
        # The message itself stays visible as an event on the subagent's span.
        self._span_event(event, now, lane=tool_use_id)
        status = msg.get("status")
        patch = msg.get("patch")
        if isinstance(patch, dict) and isinstance(patch.get("status"), str):
            status = patch["status"]
        if tool_use_id and status in _TASK_DONE:
            agent = self._agents.get(tool_use_id)
            if agent is not None and status != "completed":
                agent.set_error(f"subagent {status}")
            self._end_subagent(tool_use_id, now)

    # -- control requests ------------------------------------------------------------

    def _control_request(self, event: Event, now: int) -> None:
        request = control_request(event)
        request_id = event.fields.request_id or f"seq{event.seq}"
        subtype = event.fields.subtype or "unknown"
        initiator = "host" if event.direction == "in" else "cli"
        attrs: Attributes = {
            c.CONTROL_SUBTYPE: subtype,
            c.CONTROL_INITIATOR: initiator,
            c.CONTROL_REQUEST_ID: request_id,
        }
        tool_use_id = opt_str(request.get("tool_use_id"))
        key = f"request/{request_id}"
        if initiator == "cli" and subtype in ("can_use_tool", "hook_callback"):
            kind = "permission" if subtype == "can_use_tool" else "hook"
            tool_name = request_tool_name(request)
            tool = self._tools.get(tool_use_id) if tool_use_id else None
            if tool is None and tool_use_id and kind == "permission":
                tool = self._open_tool(tool_use_id, tool_name, None, None, now)
            parent = tool or self._turn(now, create=False) or self.root
            if tool_use_id:
                attrs[c.GEN_AI_TOOL_CALL_ID] = tool_use_id
            if tool_name is not None:
                attrs[c.GEN_AI_TOOL_NAME] = tool_name
            if kind == "permission":
                name = "can_use_tool"
            else:
                hook_event = hook_event_name(request) or "unknown"
                attrs[c.HOOK_EVENT] = hook_event
                if isinstance(request.get("callback_id"), str):
                    attrs[c.HOOK_CALLBACK_ID] = request["callback_id"]
                name = f"hook_callback {hook_event}"
            span_kind: SpanKind = "internal"
        elif initiator == "cli" and subtype == "mcp_message":
            kind = "mcp"
            parent = self._turn(now, create=False) or self.root
            name, mcp_attrs = mcp_request(request)
            attrs.update(mcp_attrs)
            span_kind = "client"
        else:
            kind = "control"
            name = f"control {subtype}"
            parent = self.root
            if initiator == "cli":
                parent = self._turn(now, create=False) or self.root
            if subtype == "set_model" and isinstance(request.get("model"), str):
                attrs["claudetrace.control.model"] = request["model"]
            if subtype == "set_permission_mode" and isinstance(request.get("mode"), str):
                attrs[c.PERMISSION_MODE] = request["mode"]
            if subtype == "interrupt":
                self._interrupt_pending = True
            span_kind = "client" if initiator == "host" else "internal"
        turn = parent if parent in self._turns else self._open_turn_of(parent)
        entry = self._new(key, name, parent, now, attrs, kind=span_kind, turn=turn)
        pending = PendingRequest(entry.span, kind, subtype)
        early = self._early.pop(request_id, None)
        if early is None:
            self._requests[request_id] = pending
            return
        # Answered before we saw it asked: the true request time lies between the
        # two records, so the round trip is reported as zero at the answer's time.
        answer, answered_ns = early
        entry.span.start_ns = min(answered_ns, now)
        entry.span.attributes["claudetrace.control.reordered"] = True
        self._answer(pending, answer, entry.span.start_ns)

    def _control_response(self, event: Event, now: int) -> None:
        request_id = event.fields.request_id
        pending = self._requests.pop(request_id, None) if request_id else None
        if pending is not None:
            self._answer(pending, event, now)
        elif request_id and request_id not in self._early:
            # The proxy reads the two directions on separate threads, so a fast
            # answer can be recorded just before the request it answers.  A shallow
            # copy keeps the parsed line, which the recorder drops after this call.
            self._early[request_id] = (copy.copy(event), now)
        else:
            self._span_event(event, now)

    def _answer(self, pending: PendingRequest, event: Event, now: int) -> None:
        span = pending.span
        response = control_response(event)
        body = response.get("response")
        body = body if isinstance(body, dict) else {}
        error: str | None = None
        if event.fields.subtype == "error":
            error = error_text(response.get("error")) or "control request failed"
        span.attributes[c.CONTROL_OUTCOME] = "error" if error else "success"
        if pending.kind == "permission":
            behavior = permission_behavior(body)
            if behavior is not None:
                span.attributes[c.PERMISSION_DECISION] = behavior
        elif pending.kind == "hook":
            decision = hook_permission_decision(body)
            if decision is not None:
                span.attributes[c.HOOK_PERMISSION_DECISION] = decision
        elif pending.kind == "mcp":
            error = error or mcp_error(body.get("mcp_response"), span.attributes)
        elif pending.subtype == "set_model" and not error:
            model = span.attributes.get("claudetrace.control.model")
            if isinstance(model, str):
                self._model = model
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

    def close(self, info: RecordingInfo | None = None) -> SpanRecord:
        """End everything still open (with an error saying why) and the root span."""
        if self._closed:
            return self.root
        self._closed = True
        info = info or self.info
        now = self._last_ns
        reason = exit_reason(info)
        if self._interrupt_pending:
            reason = f"interrupted; {reason}"
        for request in self._requests.values():
            request.span.attributes[c.CONTROL_OUTCOME] = "unanswered"
        for tool in self._tools.values():
            if tool.span_id in self._open:
                tool.attributes[c.TOOL_OUTCOME] = "unfinished"
        open_turns = bool(self._turns)
        for entry in sorted(self._open.values(), key=lambda e: e.span.start_ns, reverse=True):
            if entry.deferred:
                self._end_chat(entry, reason if open_turns else None)
            else:
                self._end(entry.span, now, reason)
        self._requests.clear()
        self._turns.clear()
        for answer, answered_ns in self._early.values():
            self._span_event(answer, answered_ns)
        self._early.clear()
        root = self.root
        attrs = root.attributes
        if self._session_id:
            attrs[c.GEN_AI_CONVERSATION_ID] = self._session_id
        if self._model:
            attrs[c.GEN_AI_REQUEST_MODEL] = self._model
        if info.claude_code_version:
            attrs[c.CLAUDE_CODE_VERSION] = info.claude_code_version
        if info.permission_mode:
            attrs[c.PERMISSION_MODE] = info.permission_mode
        if info.exit_code is not None:
            attrs[c.EXIT_CODE] = info.exit_code
        if info.signal is not None:
            attrs[c.SIGNAL] = info.signal
        outcome = self._outcome(info, open_turns)
        attrs[c.SESSION_OUTCOME] = outcome
        if self.root.costs or self._cost_total:
            attrs[c.COST_USD] = round(max(self._cost_total, sum(self.root.costs.values())), 9)
        if outcome != "ok":
            root.set_error(info.error or (reason if outcome == "incomplete" else outcome))
        end = now
        if info.ended_ns is not None:
            end = max(end, info.ended_ns)
        root.end_ns = max(end, root.start_ns)
        self._emit(root)
        return root

    def _outcome(self, info: RecordingInfo, open_turns: bool) -> str:
        if info.error and not self._saw_output:
            return "failed"
        if self._interrupted or self._interrupt_pending:
            return "interrupted"
        if info.ended_ns is None or open_turns:
            return "incomplete"
        if self._any_error or info.error or info.signal or (info.exit_code or 0) != 0:
            return "error"
        return "ok"


def build_spans(
    info: RecordingInfo, events: Iterable[Event], *, content: ContentPolicy | None = None
) -> list[SpanRecord]:
    """All spans of a recording, in the order they ended (the root last)."""
    builder = SpanBuilder(info, content=content)
    for event in events:
        builder.feed(event)
    builder.close(info)
    return builder.finished
