"""The session model: one pure, incremental fold from a recording's events to a :class:`Session`.

This is the one place that knows what the protocol means.  Fed the events of one
recording in sequence order — live, a chunk at a time, or read back from the
store, with the same result — :class:`Session` keeps:

- **turns**: a user message to its ``result`` (queued messages wait their turn;
  output before any user message opens an implicit turn).  The CLI's own
  ``num_turns`` (API round trips) is kept apart, as :attr:`Session.cli_num_turns`;
- **model calls**, one per API message id, with usage from the most complete
  source: a ``message_delta`` when streamed, else the result's per-model usage
  (``model_usage_since_last_result`` / ``modelUsage``, the main agent's share from
  ``usage``) apportioned over the turn's calls, so that per model the calls add
  up to what the CLI reported.  Usage the CLI counted for calls the host never
  saw (a subagent's, by default) becomes an *unobserved* call;
- **tool calls**: ``tool_use`` → ``tool_result``, with their permission
  (``can_use_tool``) and hook round trips;
- **control round trips** in both directions (initialize, interrupt, set_model,
  ``mcp_message`` …), paired by request id even when the answer was recorded
  before the request;
- **subagents** (the tool use that runs them, their type and task status) and
  **system events** (counted by subtype);
- the **status** and its reason (:meth:`Session.outcome`), the one definition
  every view shows.

Only pure Python over :class:`~claudetrace.model.events.Event`; no I/O.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ..pricing import call_cost
from ..recording import unended_reason
from .content import Block, content_text, find_content_block
from .events import Event
from .parts import (
    COST_SOURCES,
    FAILED,
    STATUSES,
    ApiError,
    ControlRoundTrip,
    Cost,
    CostSource,
    Initiator,
    ModelCall,
    Outcome,
    Status,
    Subagent,
    ToolCall,
    Turn,
    signal_name,
)
from .protocol import (
    api_error_status,
    control_request,
    control_response,
    error_text,
    hook_event_name,
    hook_permission_decision,
    is_synthetic,
    message_error,
    opt_str,
    permission_behavior,
    request_tool_name,
    says_interrupted,
)
from .usage import TOKEN_TYPES, Usage, apportion, number

__all__ = [
    "COST_SOURCES", "FAILED", "STATUSES", "ApiError", "ControlRoundTrip", "Cost", "CostSource",
    "ModelCall", "Outcome", "Session", "Status", "Subagent", "ToolCall", "Turn", "fold",
]

#: ``stream_event`` chunks that change nothing in the model.
_CHUNKS: Final = frozenset({"content_block_delta", "content_block_start", "content_block_stop"})
#: The system lines about a task (a subagent's, or a long Bash command's …).
TASK_SUBTYPES: Final = frozenset({"task_started", "task_updated", "task_notification"})
#: The ``task_type``s of the tasks that are subagents (CLI 2.1.330's; a task line
#: without one is a subagent's, as older CLIs wrote only those).  The others
#: (``local_bash``: a Bash command still running, ``local_workflow``,
#: ``monitor_mcp``, ``mcp_task`` …) belong to their tool call and are no subagent.
AGENT_TASK_TYPES: Final = frozenset({"local_agent", "remote_agent", "in_process_teammate"})
#: The system subtypes the fold reads more of than the subtype.
_READ_SYSTEM: Final = frozenset({"init", "status", "api_error"}) | TASK_SUBTYPES
#: The statuses a task ends with.
TASK_DONE: Final = frozenset({"completed", "failed", "killed", "stopped", "cancelled"})
#: The tool whose ``tool_use`` runs a subagent (``Task`` in older CLIs).
SUBAGENT_TOOLS: Final = frozenset({"Agent", "Task"})
#: How the lines of the CLI's the fold reads whole begin, as the CLI writes
#: them (``type`` first): such a line is parsed whole at once and its fields
#: taken from that (:meth:`Event.whole_fields`), rather than its fields read
#: first and the line parsed after.  Only a shortcut: a line written otherwise
#: is read the same, in two steps.
_READ_WHOLE_OUT: Final = (
    b'{"type":"assistant"', b'{"type":"result"', b'{"type":"control_',
    *(b'{"type":"system","subtype":"%s"' % name.encode() for name in sorted(_READ_SYSTEM)),
)
#: The same for the host's lines: its control requests and answers.
_READ_WHOLE_IN: Final = (b'{"type":"control_',)


class Session:
    """The interpretation of one recording, built event by event (see the module doc)."""

    def __init__(self, *, model: str | None = None, session_id: str | None = None) -> None:
        self.session_id = session_id
        #: The model the CLI uses now (``system/init``, then ``set_model``).
        self.model = model
        self.claude_code_version: str | None = None
        self.permission_mode: str | None = None
        self.event_count = 0
        self.byte_count = 0
        self.stderr_lines = 0
        self.unparsed_lines = 0
        #: Lines whose usage had a damaged token count (read as 0: see
        #: :mod:`.usage`), by their sequence number.
        self.damaged_usage: set[int] = set()
        self.last_ns = 0
        self.saw_output = False
        self.turns: list[Turn] = []
        self.calls: dict[str, ModelCall] = {}
        self.tools: dict[str, ToolCall] = {}
        self.controls: list[ControlRoundTrip] = []
        #: The API errors Claude Code wrote as messages of its own (``<synthetic>``).
        self.api_errors: list[ApiError] = []
        self.subagents: dict[str, Subagent] = {}
        self.system: Counter[str] = Counter()
        self._open: deque[Turn] = deque()
        #: Turns that got their result (:attr:`results`), counted as they end.
        self._results = 0
        self._lane_call: dict[str | None, ModelCall] = {}
        self._pending: dict[str, ControlRoundTrip] = {}
        self._early: dict[str, tuple[Event, int]] = {}
        self._tasks: dict[str, str] = {}
        #: Tasks that are no subagent (:data:`AGENT_TASK_TYPES`), by task id.
        self._other_tasks: set[str] = set()
        #: Per model, the usage and cost the turns so far were charged.
        self._accounted: dict[str, tuple[Usage, float]] = {}
        self._cost_total = 0.0

    # -- feeding -----------------------------------------------------------------------

    def add(self, event: Event) -> None:
        """Account for one event (in sequence order)."""
        self.add_many((event,))

    def add_many(self, events: Iterable[Event]) -> None:
        """Account for each of ``events`` (in sequence order).

        The counters are kept in locals over the loop and stored once: the
        indexer folds every line it records through here, a chunk at a time.
        """
        count = size = stderr = unparsed = 0
        last = self.last_ns
        try:
            for event in events:
                count += 1
                data = event.data
                size += len(data) + 1 if event.eol else len(data)
                t = event.t_ns
                if t > last:
                    last = t
                direction = event.direction
                if direction == "err":
                    stderr += 1
                    continue
                fields = (event.whole_fields() if data.startswith(
                    _READ_WHOLE_OUT if direction == "out" else _READ_WHOLE_IN) else event.fields)
                if not fields.is_json:
                    unparsed += 1
                    continue
                kind = fields.type
                if direction == "out":
                    if kind == "stream_event":
                        self.saw_output = True
                        if fields.subtype not in _CHUNKS:
                            self._stream_event(event)
                        continue
                    self._out(event, kind, fields.session_id)
                elif kind == "user":
                    self._start_turn(event.seq, t)
                    continue
                if kind == "control_request":
                    self._control_request(event)
                elif kind == "control_response":
                    self._control_response(event)
                elif kind == "control_cancel_request":
                    self._cancel(event)
        finally:
            self.event_count += count
            self.byte_count += size
            self.stderr_lines += stderr
            self.unparsed_lines += unparsed
            self.last_ns = last

    def _out(self, event: Event, kind: str | None, session_id: str | None) -> None:
        """A line of the CLI's but a stream event."""
        self.saw_output = True
        if self.session_id is None and session_id and kind in ("system", "assistant", "result"):
            self.session_id = session_id
        if kind == "assistant":
            self._assistant(event)
        elif kind == "user":
            self._user_out(event)
        elif kind == "result":
            self._result(event)
        elif kind == "system":
            self._system(event)

    # -- turns -------------------------------------------------------------------------

    def _start_turn(self, seq: int, t_ns: int, *, implicit: bool = False) -> Turn:
        turn = Turn(len(self.turns) + 1, seq, t_ns, implicit=implicit)
        self.turns.append(turn)
        self._open.append(turn)
        return turn

    def current_turn(self, seq: int, t_ns: int) -> Turn:
        """The turn output at ``seq`` belongs to: the oldest open one, else a new implicit one."""
        if self._open:
            return self._open[0]
        return self._start_turn(seq, t_ns, implicit=True)

    @property
    def open_turn(self) -> Turn | None:
        return self._open[0] if self._open else None

    def _result(self, event: Event) -> None:
        msg = event.message or {}
        turn = self.current_turn(event.seq, event.t_ns)
        self._open.popleft()
        turn.end_seq, turn.end_ns = event.seq, event.t_ns
        self._results += 1
        subtype = opt_str(msg.get("subtype"))
        turn.result_subtype = subtype
        # The CLI's is_error decides (subtype success with is_error true happens);
        # only a result without one is judged by its subtype.
        flag = msg.get("is_error")
        turn.is_error = flag if isinstance(flag, bool) else bool(
            subtype and subtype.startswith("error"))
        turn.stop_reason = opt_str(msg.get("stop_reason"))
        num_turns = msg.get("num_turns")
        if isinstance(num_turns, int) and not isinstance(num_turns, bool):
            turn.num_turns = num_turns
        if isinstance(msg.get("usage"), dict):
            turn.result_usage = self._read_usage(event, Usage.from_api(msg["usage"]))
        total = number(msg.get("total_cost_usd"))
        turn.total_cost_usd = total
        for lane, call in list(self._lane_call.items()):  # the turn's calls end with it
            if call.turn == turn.number:
                del self._lane_call[lane]
        self._reconcile(turn, self._turn_deltas(event, turn, total))
        if total is not None:
            self._cost_total = total

    def _turn_deltas(
        self, event: Event, turn: Turn, total: float | None
    ) -> dict[str, tuple[Usage, float | None]]:
        """Per model, the usage and cost the CLI counted for this turn.

        ``modelUsage`` is the CLI process's running total per model: the turn's
        share is what it adds to what earlier turns accounted for (so a turn
        whose result lacked it is not counted twice).  Without it, the
        result's ``model_usage_since_last_result``; without both, its ``usage``
        and the growth of ``total_cost_usd``, charged to the turn's model.
        """
        msg = event.message or {}
        cumulative = msg.get("modelUsage")
        since = msg.get("model_usage_since_last_result")
        deltas: dict[str, tuple[Usage, float | None]] = {}
        if isinstance(cumulative, dict) and cumulative:
            for model, entry in cumulative.items():
                if not isinstance(entry, dict):
                    continue
                seen, spent = self._accounted.get(model, (Usage(), 0.0))
                grown = self._read_usage(event, Usage.from_model_usage(entry)).minus(seen)
                usage = Usage(max(0, grown.input), max(0, grown.output),
                              max(0, grown.cache_read), max(0, grown.cache_creation),
                              max(0, grown.cache_creation_1h))
                cost = number(entry.get("costUSD"))
                deltas[model] = (usage, None if cost is None else max(0.0, cost - spent))
        elif isinstance(since, dict) and since:
            for model, entry in since.items():
                if isinstance(entry, dict):
                    deltas[model] = (self._read_usage(event, Usage.from_model_usage(entry)),
                                     number(entry.get("costUSD")))
        elif turn.result_usage is not None:
            model = self._main_model(turn) or self.model or "unknown"
            cost = None if total is None else max(0.0, total - self._cost_total)
            deltas[model] = (turn.result_usage, cost)
        deltas = {m: d for m, d in deltas.items() if d[0] or d[1]}
        for model, (usage, cost) in deltas.items():
            seen, spent = self._accounted.get(model, (Usage(), 0.0))
            seen = seen.copy()
            seen.add(usage)
            self._accounted[model] = (seen, spent + (cost or 0.0))
        return deltas

    def _main_model(self, turn: Turn) -> str | None:
        models = {c.model for c in turn.calls if c.lane is None and c.model}
        return models.pop() if len(models) == 1 else None

    def _reconcile(self, turn: Turn, deltas: dict[str, tuple[Usage, float | None]]) -> None:
        """Make the turn's calls add up, per model, to what the CLI reported."""
        main_model = self._main_model(turn)
        for model, (want, cost) in deltas.items():
            if cost is not None:
                turn.cost_by_model[model] = round(cost, 9)
            calls = [c for c in turn.calls if self.model_of(c) == model]
            rest = want.minus(_sum(c.usage for c in calls if c.final))
            loose_main = [c for c in calls if not c.final and c.lane is None]
            loose_sub = [c for c in calls if not c.final and c.lane is not None]
            if loose_main and model == main_model and turn.result_usage is not None:
                fixed_main = _sum(c.usage for c in calls if c.final and c.lane is None)
                main = turn.result_usage.minus(fixed_main)
                share = Usage(*(max(0, min(main.get(k), rest.get(k))) for k in TOKEN_TYPES))
                _spread(share, loose_main)
                rest = rest.minus(share)
                loose = loose_sub
            else:
                loose = loose_main + loose_sub
            if loose:
                _spread(Usage(*(max(0, rest.get(k)) for k in TOKEN_TYPES)), loose)
            elif any(rest.get(k) > 0 for k in TOKEN_TYPES):
                lanes = {c.lane for c in turn.calls if c.lane is not None} or {
                    s.tool_use_id for s in self.subagents.values() if s.turn == turn.number
                }
                extra = ModelCall(
                    id=f"unobserved/{turn.number}/{model}",
                    model=model,
                    lane=lanes.pop() if len(lanes) == 1 else None,
                    turn=turn.number,
                    start_seq=turn.start_seq,
                    start_ns=turn.start_ns,
                    end_ns=turn.end_ns or turn.start_ns,
                    streamed=False,
                    usage=Usage(*(max(0, rest.get(k)) for k in TOKEN_TYPES)),
                    usage_source="unobserved",
                )
                turn.calls.append(extra)
                self.calls[extra.id] = extra
        for call in turn.calls:
            if not call.final:
                call.usage_source = "result"
        turn.usage_by_model = _by_model(turn.calls, self.model)

    def _read_usage(self, event: Event, usage: Usage) -> Usage:
        """``usage`` as read from ``event``'s line, noting the line when it had a
        damaged count (:attr:`damaged_usage`)."""
        if usage.damaged:
            self.damaged_usage.add(event.seq)
        return usage

    # -- model calls -------------------------------------------------------------------

    def _open_call(
        self, msg_id: str, model: Any, lane: str | None, event: Event, *, streamed: bool
    ) -> ModelCall:
        turn = self.current_turn(event.seq, event.t_ns)
        call = ModelCall(
            id=msg_id,
            model=model if isinstance(model, str) else self.model,
            lane=lane,
            turn=turn.number,
            start_seq=event.seq,
            start_ns=event.t_ns,
            end_ns=event.t_ns,
            streamed=streamed,
            wall_ns=event.wall_ns,
        )
        self.calls[msg_id] = call
        self._lane_call[lane] = call
        turn.calls.append(call)
        return call

    def _stream_event(self, event: Event) -> None:
        inner = (event.message or {}).get("event")
        if not isinstance(inner, dict):
            return
        sub = event.fields.subtype
        lane = event.fields.parent_tool_use_id
        if sub == "message_start":
            message = inner.get("message")
            message = message if isinstance(message, dict) else {}
            msg_id = opt_str(message.get("id")) or f"seq{event.seq}"
            started = self.calls.get(msg_id) or self._open_call(
                msg_id, message.get("model"), lane, event, streamed=True
            )
            started.streamed = True
            started.usage = self._read_usage(event, Usage.from_api(message.get("usage")))
            return
        call = self._lane_call.get(lane)
        if call is None:
            return
        call.end_ns = event.t_ns
        if sub == "message_delta":
            delta = inner.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                call.stop_reason = delta["stop_reason"]
            usage = inner.get("usage")
            if isinstance(usage, dict):
                call.usage.update_from_api(usage)
                self._read_usage(event, call.usage)
                call.usage_source = "stream"
        elif sub == "message_stop":
            call.stopped = True
            turn = self.open_turn
            abandoned = "abandoned_blocks" in (event.message or {})
            if abandoned or (turn is not None and turn.interrupted):
                call.interrupted = True
        elif sub == "error":
            error = inner.get("error")
            call.error = error_text(error) or "stream error"

    def _assistant(self, event: Event) -> None:
        obj = event.message or {}
        message = obj.get("message")
        message = message if isinstance(message, dict) else {}
        lane = event.fields.parent_tool_use_id
        if is_synthetic(message):
            self._synthetic(event, message, lane)
            return
        msg_id = opt_str(message.get("id")) or f"seq{event.seq}"
        call = self.calls.get(msg_id)
        if call is None:
            call = self._open_call(msg_id, message.get("model"), lane, event, streamed=False)
        call.end_ns = event.t_ns
        if not call.streamed and call.usage_source == "message":
            # Partial messages off: each assistant line of a message repeats its
            # usage as of message_start; keep the largest figure of each type.
            seen = self._read_usage(event, Usage.from_api(message.get("usage")))
            have = call.usage
            if (call.usage_ns is None or seen.input > have.input or seen.output > have.output
                    or seen.cache_read > have.cache_read
                    or seen.cache_creation > have.cache_creation):
                call.usage_ns = event.t_ns  # the line whose figure counts
                call.wall_ns = event.wall_ns
            have.input = max(have.input, seen.input)
            have.output = max(have.output, seen.output)
            have.cache_read = max(have.cache_read, seen.cache_read)
            have.cache_creation = max(have.cache_creation, seen.cache_creation)
            have.cache_creation_1h = max(have.cache_creation_1h, seen.cache_creation_1h)
            if isinstance(message.get("stop_reason"), str):
                call.stop_reason = message["stop_reason"]
        error = message_error(event)
        if error:
            call.error = error
        if lane is None:
            # The main agent's answer: an API error leaves the turn failed until
            # an answer that is not one follows (a retry that went through).
            self.current_turn(event.seq, event.t_ns).api_error = error
        for ref in event.fields.tools:
            if ref.kind == "use" and ref.tool_use_id not in self.tools:
                block = find_content_block(message.get("content"), "tool_use", ref.tool_use_id)
                self._open_tool(ref.tool_use_id, ref.name, block, lane, event)

    def _synthetic(self, event: Event, message: dict[str, Any], lane: str | None) -> None:
        """A message Claude Code wrote itself (:data:`~.protocol.SYNTHETIC_MODEL`):
        no model call; an API error it gave up on is one of :attr:`api_errors`
        and, in the main agent, leaves the turn failed as any API error does."""
        turn = self.current_turn(event.seq, event.t_ns)
        error = message_error(event)
        if lane is None:
            turn.api_error = error
        if error:
            self.api_errors.append(ApiError(
                event.seq, event.t_ns, turn.number, lane, error, api_error_status(event),
                content_text(message.get("content"))))

    # -- tools -------------------------------------------------------------------------

    def _open_tool(
        self, tool_use_id: str, name: str | None, block: Block | None,
        lane: str | None, event: Event,
    ) -> ToolCall:
        turn = self.current_turn(event.seq, event.t_ns)
        tool = ToolCall(
            id=tool_use_id,
            name=name or "unknown",
            lane=lane,
            turn=turn.number,
            start_seq=event.seq,
            start_ns=event.t_ns,
            input=block.input if block else None,
        )
        self.tools[tool_use_id] = tool
        if tool.subagent_type is not None or tool.name in SUBAGENT_TOOLS:
            self._subagent(tool_use_id, event.t_ns).subagent_type = tool.subagent_type
        return tool

    def _subagent(self, tool_use_id: str, t_ns: int) -> Subagent:
        agent = self.subagents.get(tool_use_id)
        if agent is None:
            tool = self.tools.get(tool_use_id)
            turn = tool.turn if tool else (self.open_turn.number if self.open_turn else 0)
            agent = self.subagents[tool_use_id] = Subagent(tool_use_id, turn, t_ns)
        return agent

    def _user_out(self, event: Event) -> None:
        lane = event.fields.parent_tool_use_id
        if lane is None and says_interrupted(event):
            # The user stopped the turn (Esc in Claude Code, written in its
            # transcript): its error result is explained, as by a host interrupt.
            turn = self.open_turn
            if turn is not None:
                turn.interrupted = True
                for cut in self.tools.values():
                    if cut.turn == turn.number and cut.is_error:
                        cut.interrupted = True
        if lane is not None and lane in self.subagents:
            self.subagents[lane]  # a subagent's prompt
        # How each tool ended is in the line's fields (its result block's
        # is_error): the line, a tool's output echoed twice, is not parsed.
        for ref in event.fields.tools:
            if ref.kind != "result":
                continue
            tool = self.tools.get(ref.tool_use_id)
            if tool is None or tool.end_ns is not None:
                continue
            tool.end_seq, tool.end_ns = event.seq, event.t_ns
            tool.is_error = ref.is_error
            agent = self.subagents.get(ref.tool_use_id)
            if agent is not None and agent.end_ns is None:
                agent.end_ns = event.t_ns
                agent.status = agent.status or ("failed" if tool.is_error else "completed")

    # -- system ------------------------------------------------------------------------

    def _system(self, event: Event) -> None:
        subtype = event.fields.subtype or "unknown"
        self.system[subtype] += 1
        if subtype not in _READ_SYSTEM:
            return  # counted, not parsed (a quarter of a streaming session's lines
            # are system/thinking_tokens)
        msg = event.message or {}
        if subtype == "init":
            for attr, key in (
                ("model", "model"),
                ("claude_code_version", "claude_code_version"),
                ("permission_mode", "permissionMode"),
            ):
                if isinstance(msg.get(key), str):
                    setattr(self, attr, msg[key])
        elif subtype == "api_error":
            if event.fields.parent_tool_use_id is None:
                turn = self.current_turn(event.seq, event.t_ns)
                turn.api_error = error_text(msg.get("error")) or "api_error"
        elif subtype == "status" and isinstance(msg.get("permissionMode"), str):
            self.permission_mode = msg["permissionMode"]
        elif subtype in TASK_SUBTYPES:
            task_id, tool_use_id, status = _task_line(msg)
            if not self._agent_task(msg, task_id):
                return
            if tool_use_id and task_id:
                self._tasks[task_id] = tool_use_id
            elif task_id:
                tool_use_id = self._tasks.get(task_id)
            if not tool_use_id:
                return
            agent = self._subagent(tool_use_id, event.t_ns)
            agent.task_id = agent.task_id or task_id
            agent.subagent_type = agent.subagent_type or opt_str(msg.get("subagent_type"))
            if status is not None:
                agent.status = status
                if status in TASK_DONE and agent.end_ns is None:
                    agent.end_ns = event.t_ns

    def task_of(self, event: Event) -> tuple[Subagent | None, str | None]:
        """The subagent a ``task_started`` / ``task_updated`` / ``task_notification``
        line (already added) is about, and the status the line gives it (if any)."""
        msg = event.message or {}
        task_id, tool_use_id, status = _task_line(msg)
        if not self._agent_task(msg, task_id):
            return None, status
        tool_use_id = tool_use_id or (self._tasks.get(task_id) if task_id else None)
        return (self.subagents.get(tool_use_id) if tool_use_id else None), status

    def _agent_task(self, msg: Mapping[str, Any], task_id: str | None) -> bool:
        """Whether a task line is about a subagent (not, say, a long Bash command)."""
        if task_id is not None and task_id in self._other_tasks:
            return False
        task_type = msg.get("task_type")
        if isinstance(task_type, str) and task_type not in AGENT_TASK_TYPES:
            if task_id is not None:
                self._other_tasks.add(task_id)
            return False
        return True

    # -- control -----------------------------------------------------------------------

    def _control_request(self, event: Event) -> None:
        request = control_request(event)
        request_id = event.fields.request_id or f"seq{event.seq}"
        subtype = event.fields.subtype or "unknown"
        initiator: Initiator = "host" if event.direction == "in" else "cli"
        turn = self.open_turn
        trip = ControlRoundTrip(
            request_id=request_id,
            subtype=subtype,
            initiator=initiator,
            request_seq=event.seq,
            request_ns=event.t_ns,
            turn=turn.number if turn else None,
            request=request,
        )
        if initiator == "cli" and subtype in ("can_use_tool", "hook_callback"):
            trip.tool_use_id = opt_str(request.get("tool_use_id"))
            trip.tool_name = request_tool_name(request)
            if subtype == "hook_callback":
                trip.hook_event = hook_event_name(request) or "unknown"
                trip.callback_id = opt_str(request.get("callback_id"))
            if trip.tool_use_id:
                tool = self.tools.get(trip.tool_use_id)
                if tool is None and subtype == "can_use_tool":
                    tool = self._open_tool(trip.tool_use_id, trip.tool_name, None, None, event)
                if tool is not None:
                    if subtype == "can_use_tool":
                        tool.permission = trip
                    else:
                        tool.hooks.append(trip)
        elif initiator == "cli" and subtype == "mcp_message":
            trip.mcp_server = opt_str(request.get("server_name")) or "unknown"
            message = request.get("message")
            if isinstance(message, dict):
                trip.mcp_method = opt_str(message.get("method")) or "unknown"
        elif subtype == "set_model":
            trip.model = opt_str(request.get("model"))
        elif subtype == "set_permission_mode":
            trip.mode = opt_str(request.get("mode"))
        elif subtype == "interrupt" and turn is not None:
            turn.interrupted = True
        self.controls.append(trip)
        early = self._early.pop(request_id, None)
        if early is None:
            self._pending[request_id] = trip
            return
        answer, answered_ns = early
        trip.reordered = True
        trip.request_ns = min(trip.request_ns, answered_ns)
        self._answer(trip, answer)

    def _control_response(self, event: Event) -> None:
        request_id = event.fields.request_id
        if not request_id:
            return
        trip = self._pending.get(request_id)
        if trip is not None:
            if (trip.initiator == "host") == (event.direction == "in"):
                return  # the request's own id echoed on its own stream answers nothing
            del self._pending[request_id]
            self._answer(trip, event)
        elif request_id not in self._early:
            self._early[request_id] = (event, event.t_ns)

    def _answer(self, trip: ControlRoundTrip, event: Event) -> None:
        response = control_response(event)
        body = response.get("response")
        body = body if isinstance(body, dict) else {}
        trip.response_seq, trip.response_ns = event.seq, event.t_ns
        trip.answer = body
        if event.fields.subtype == "error":
            trip.outcome = "error"
            trip.error = error_text(response.get("error")) or "control request failed"
        else:
            trip.outcome = "success"
        if trip.subtype == "can_use_tool":
            trip.decision = permission_behavior(body)
        elif trip.subtype == "hook_callback":
            trip.decision = hook_permission_decision(body)
        elif trip.subtype == "mcp_message":
            error = _mcp_error(body.get("mcp_response"))
            if error and trip.outcome == "success":
                trip.outcome, trip.error = "error", error
        elif trip.subtype == "set_model" and trip.outcome == "success" and trip.model:
            self.model = trip.model
        elif trip.subtype == "set_permission_mode" and trip.outcome == "success" and trip.mode:
            self.permission_mode = trip.mode

    def _cancel(self, event: Event) -> None:
        request_id = event.fields.request_id
        trip = self._pending.pop(request_id, None) if request_id else None
        if trip is not None:
            trip.outcome = "cancelled"
            trip.response_seq, trip.response_ns = event.seq, event.t_ns

    def holds_answer(self, event: Event) -> bool:
        """Whether ``event`` is a control answer kept for a request not seen yet."""
        held = self._early.get(event.fields.request_id or "")
        return held is not None and held[0] is event

    @property
    def orphan_answers(self) -> list[Event]:
        """Control answers whose request never came."""
        return [event for event, _ in self._early.values()]

    # -- figures -----------------------------------------------------------------------

    @property
    def results(self) -> int:
        """Turns that got their ``result`` (counted as they end: the live indexer
        asks after every batch, and a burst of tool results opens a turn per
        line it echoes, so counting the turns made a burst's cost grow with
        the square of its length)."""
        return self._results

    @property
    def cli_num_turns(self) -> int:
        """The CLI's ``num_turns`` summed over its results (API round trips, not turns)."""
        return sum(turn.num_turns or 0 for turn in self.turns)

    @property
    def usage_by_model(self) -> dict[str, Usage]:
        """Tokens per model: the sum of the model calls (which match the CLI's totals)."""
        return _by_model(self.calls.values(), self.model)

    @property
    def usage(self) -> Usage:
        return _sum(self.calls.values())

    @property
    def cost_by_model(self) -> dict[str, float]:
        costs: dict[str, float] = {}
        for turn in self.turns:
            for model, cost in turn.cost_by_model.items():
                costs[model] = costs.get(model, 0.0) + cost
        return {m: round(c, 9) for m, c in sorted(costs.items())}

    @property
    def cost_usd(self) -> float:
        """What the CLI charged: its last ``total_cost_usd`` (the per-model costs add up to it)."""
        return round(max(self._cost_total, sum(self.cost_by_model.values())), 9)

    @property
    def cli_cost_reported(self) -> bool:
        """Whether the CLI said what the session cost (a ``result``'s ``total_cost_usd``
        or per-model ``costUSD``); an imported transcript without ``cost-state``
        lines, or a session before its first result, did not."""
        return any(turn.total_cost_usd is not None or turn.cost_by_model
                   for turn in self.turns)

    def model_of(self, call: ModelCall) -> str:
        """The model a call's tokens and cost are counted under: its own, else the
        session's, else ``unknown``."""
        return call.model or self.model or "unknown"

    def call_price(self, call: ModelCall) -> float | None:
        """What ``call`` would cost by the price table (:mod:`claudetrace.pricing`);
        None for a model the table does not know (a call of no tokens costs 0)."""
        usage = call.usage
        return call_cost(call.model or self.model, usage.input, usage.output,
                         usage.cache_read, usage.cache_creation, usage.cache_creation_1h)

    def cost(self, *, estimate: bool = True) -> Cost:
        """What the session cost, and where that comes from (``cost_source``).

        The CLI's figures when it reported any (``cli``); else each call priced
        by the table and added up (``estimate``); ``unknown`` when a call's model
        has no price (never priced as 0), when there was no model call at all
        (nothing was charged nor priced), or when ``estimate`` is False (the
        live indexer leaves a first turn's pricing for its end: loading the
        table is not for the forwarding's first lines).
        """
        if self.cli_cost_reported:
            return Cost(self.cost_usd, "cli", dict(self.cost_by_model))
        if not estimate or not self.calls:
            # No call, no cost: an empty session is not a "$0 (estimate)".
            return Cost(None, "unknown")
        by_model: dict[str, float | None] = {}
        by_call: dict[str, float | None] = {}
        for call in self.calls.values():
            model = self.model_of(call)
            price = by_call[call.id] = self.call_price(call)
            before = by_model.get(model, 0.0)
            by_model[model] = None if price is None or before is None else before + price
        rounded = {m: None if c is None else round(c, 9) for m, c in sorted(by_model.items())}
        if any(c is None for c in rounded.values()):
            return Cost(None, "unknown", rounded, by_call)
        return Cost(round(sum(c or 0.0 for c in rounded.values()), 9), "estimate", rounded,
                    by_call)

    @property
    def models(self) -> list[str]:
        return sorted(self.usage_by_model)

    @property
    def tool_errors(self) -> int:
        return sum(1 for tool in self.tools.values()
                   if tool.outcome == "error" and not tool.interrupted)

    @property
    def last_result(self) -> Turn | None:
        for turn in reversed(self.turns):
            if turn.done:
                return turn
        return None

    @property
    def is_error(self) -> bool:
        """Whether a turn :attr:`~Turn.failed` (the ``is_error`` summary column):
        the status rule, which :meth:`outcome` applies with the process's end."""
        return any(turn.failed for turn in self.turns)

    @property
    def interrupted(self) -> bool:
        return any(turn.interrupted for turn in self.turns)

    def outcome(
        self,
        *,
        ended: bool,
        exit_code: int | None = None,
        signal: int | None = None,
        error: str | None = None,
        live: bool = False,
        lost_bytes: int = 0,
        source: str | None = None,
    ) -> Outcome:
        """The status of the session and why: the one definition every view shows.

        - ``running``: not ended and still being recorded;
        - ``incomplete``: the recording stopped without the CLI's exit, lost bytes
          of its capture, or the CLI exited with a turn still waiting for its result;
        - ``killed``: the CLI died of a signal;
        - ``error``: it could not start, exited non-zero, or a turn
          :attr:`~Turn.failed` (its result's ``is_error``, whatever the
          subtype, or an API error it ended on) with no interrupt to explain it;
        - ``interrupted``: the host interrupted a turn and the session went on to
          exit 0 (recovered; not a failure);
        - ``ok``: everything else.

        ``source`` is the recording's: an imported transcript that did not end
        says so in its own words (:func:`~claudetrace.recording.unended_reason`).
        """
        if not ended:
            if live:
                return Outcome("running")
            return Outcome("incomplete", unended_reason(source))
        if signal:
            turn = self.open_turn
            during = f" during turn {turn.number}" if turn else ""
            return Outcome("killed", f"killed by {signal_name(signal)}{during}")
        if error and not self.saw_output:
            return Outcome("error", f"the CLI did not start: {error}")
        if lost_bytes:
            return Outcome("incomplete", f"{lost_bytes} bytes of the capture were lost")
        if exit_code not in (0, None):
            last = self.last_result
            why = f" after turn {last.number} ended with {last.ended_with}" if (
                last is not None and last.failed) else ""
            return Outcome("error", f"exit code {exit_code}{why}")
        failed = [turn for turn in self.turns if turn.failed]
        if failed:
            first = failed[0]
            return Outcome("error", f"turn {first.number} ended with {first.ended_with}")
        if error:
            return Outcome("error", error)
        waiting = [turn for turn in self.turns if not turn.done and not turn.implicit]
        if waiting:
            return Outcome("incomplete", f"turn {waiting[0].number} got no result")
        interrupted = [turn.number for turn in self.turns if turn.interrupted]
        if interrupted:
            which = ", ".join(map(str, interrupted))
            return Outcome("interrupted", f"turn {which} interrupted; the session went on")
        return Outcome("ok")

    def outcome_of(self, info: Any, *, live: bool = False, lost_bytes: int = 0) -> Outcome:
        """:meth:`outcome` from a recording's metadata (``ended_ns``, ``exit_code`` …)."""
        return self.outcome(
            ended=info.ended_ns is not None,
            exit_code=info.exit_code,
            signal=info.signal,
            error=info.error,
            live=live,
            lost_bytes=lost_bytes or getattr(info, "lost_bytes", 0),
            source=getattr(info, "source", None),
        )


def fold(events: Iterable[Event], *, model: str | None = None) -> Session:
    """The :class:`Session` of a recording's events."""
    session = Session(model=model)
    session.add_many(events)
    return session


# -- helpers ---------------------------------------------------------------------------


def _sum(calls: Iterable[Any]) -> Usage:
    total = Usage()
    for call in calls:
        total.add(call.usage if isinstance(call, ModelCall) else call)
    return total


def _by_model(calls: Iterable[ModelCall], default: str | None) -> dict[str, Usage]:
    out: dict[str, Usage] = {}
    for call in calls:
        model = call.model or default or "unknown"
        out.setdefault(model, Usage()).add(call.usage)
    return dict(sorted(out.items()))


def _spread(total: Usage, calls: list[ModelCall]) -> None:
    """Set the calls' usage to ``total``, split in proportion to what each had."""
    for kind in TOKEN_TYPES:
        parts = apportion(total.get(kind), [c.usage.get(kind) for c in calls])
        for call, part in zip(calls, parts, strict=True):
            setattr(call.usage, kind, part)
    for call in calls:
        call.usage_source = "result"


def _task_line(msg: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    """``(task_id, tool_use_id, status)`` of a task line (a ``patch``'s status wins)."""
    status = msg.get("status")
    patch = msg.get("patch")
    if isinstance(patch, dict) and isinstance(patch.get("status"), str):
        status = patch["status"]
    return opt_str(msg.get("task_id")), opt_str(msg.get("tool_use_id")), opt_str(status)


def _mcp_error(mcp_response: Any) -> str | None:
    if not isinstance(mcp_response, dict):
        return None
    error = mcp_response.get("error")
    if isinstance(error, dict):
        return opt_str(error.get("message")) or "JSON-RPC error"
    result = mcp_response.get("result")
    if isinstance(result, dict) and result.get("isError") is True:
        return "tool_error"
    return None
