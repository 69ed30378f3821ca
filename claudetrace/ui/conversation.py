"""The transcript as a chat: prompts, answers, thinking, tool calls and their outcomes.

:func:`build_conversation` folds a recording's events into :class:`Item` s.  Tool
calls carry their input, their result (errors flagged), the permission decisions
and hook outcomes about them, and — for a ``Task`` tool — the subagent's own
items nested under it (lines whose ``parent_tool_use_id`` names that call).
Streaming deltas are skipped (the ``assistant`` lines carry the final blocks);
lines nobody understands still appear, as ``system`` or ``error`` items.

Everything here is untrusted text from the recording: the view renders it as
plain text, never as HTML.
"""

from __future__ import annotations

import bisect
import json
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..model import ControlRoundTrip, Session, Turn
from ..model import ToolCall as ModelToolCall
from ..model.content import content_text, message_blocks
from ..model.events import Event
from ..model.protocol import api_error_status, is_synthetic, message_error, result_text
from ..transcript import line_label, marker_text

ItemKind = Literal[
    "user", "assistant", "thinking", "tool", "result", "system", "error", "stderr",
    "compaction", "rewind",
]
#: What a user line that is no prompt is (an imported transcript's ``claudetrace_kind``),
#: in words; steering and teammate messages are said to the model as prompts are.
USER_KINDS = {
    "steering": "steering", "teammate": "teammate message", "command": "command",
    "meta": "meta", "interrupt": "interrupt", "compact_summary": "compaction summary",
}

#: The parts of a slash command's lines in a transcript (``<command-name>/compact
#: </command-name> <command-message>compact</command-message> <command-args>…``,
#: then ``<local-command-stdout>Compacted</local-command-stdout>``).
_COMMAND_PART = re.compile(
    r"<(command-name|command-message|command-args|local-command-stdout|local-command-stderr)>"
    r"(.*?)</\1>", re.S)
#: A teammate's message in a transcript, and who sent it.
_TEAMMATE = re.compile(r"<teammate-message\b([^>]*)>(.*?)</teammate-message>", re.S)
_TEAMMATE_ID = re.compile(r"""teammate_id=["']([^"']*)["']""")


def user_line(kind: str, text: str) -> tuple[str, str]:
    """The text and label of a transcript's user line that is no plain prompt
    (``claudetrace_kind`` ``kind``), its markup read as claude-code-log reads it:
    a slash command says ``/compact ARGS`` (its output ``Compacted``, labelled
    ``command output``), a teammate's message its text, labelled with who sent it.
    Text in another shape is kept as it is."""
    label = USER_KINDS.get(kind, kind)
    if kind == "command":
        parts = {name: value.strip() for name, value in _COMMAND_PART.findall(text)}
        if parts.get("command-name"):
            said = " ".join(p for p in (parts["command-name"], parts.get("command-args")) if p)
            return said, label
        output = "\n".join(p for p in (parts.get("local-command-stdout"),
                                        parts.get("local-command-stderr")) if p)
        if output or any(name.startswith("local-command") for name in parts):
            return output or "(no output)", "command output"
    elif kind == "teammate":
        found = _TEAMMATE.fullmatch(text.strip())
        if found:
            who = _TEAMMATE_ID.search(found.group(1))
            return found.group(2).strip(), label + (f" from {who.group(1)}" if who else "")
    return text, label


#: Lines that are noise in a conversation (deltas, keep-alives).
_SKIPPED_TYPES = frozenset({"stream_event", "keep_alive"})
#: Control requests the conversation leaves to the control-plane tab.
_QUIET_CONTROL = frozenset({"initialize", "mcp_message"})
#: How far apart two texts' lengths may be and still be compared (surrounding
#: whitespace the CLI may trim from a result).
_SLACK = 64


@dataclass(slots=True)
class Decision:
    """A permission decision or hook outcome about a tool call (or the session)."""

    kind: Literal["permission", "hook"]
    seq: int
    t: float
    request_id: str | None
    name: str  # the tool name (permission) or hook event name (hook)
    request: dict[str, Any]
    outcome: str = "pending"  # allow / deny / approve / block / continue / error / pending
    detail: Any = None

    @classmethod
    def of(cls, trip: ControlRoundTrip) -> Decision:
        """The session model's round trip as a decision."""
        kind: Literal["permission", "hook"] = "permission" if trip.kind == "permission" else "hook"
        name = trip.tool_name if kind == "permission" else trip.hook_event
        detail: Any = trip.error if trip.outcome == "error" else (
            trip.answer if trip.answered else None)
        return cls(kind, trip.request_seq, trip.request_ns / 1e9, trip.request_id,
                   name or trip.subtype, trip.request, trip.verdict, detail)


@dataclass(slots=True)
class ToolCall:
    """One ``tool_use`` and what became of it (the session model's tool call)."""

    tool_use_id: str
    name: str
    input: Any = None
    result: str | None = None
    result_seq: int | None = None
    is_error: bool = False
    decisions: list[Decision] = field(default_factory=list)
    children: list[Item] = field(default_factory=list)

    @property
    def answered(self) -> bool:
        return self.result_seq is not None

    @classmethod
    def of(cls, call: ModelToolCall) -> ToolCall:
        trips = ([call.permission] if call.permission is not None else []) + call.hooks
        return cls(call.id, call.name, call.input, result_seq=call.end_seq,
                   is_error=call.is_error,
                   decisions=[Decision.of(t) for t in sorted(trips, key=_request_seq)])


def _request_seq(trip: ControlRoundTrip) -> int:
    return trip.request_seq


@dataclass(slots=True)
class Item:
    """One entry of the conversation."""

    kind: ItemKind
    seq: int
    t: float
    text: str = ""
    is_error: bool = False
    tool: ToolCall | None = None
    decision: Decision | None = None
    data: dict[str, Any] = field(default_factory=dict)
    #: The turn a ``result`` item ends.
    turn: Turn | None = None
    #: The model call (API message id) an assistant, thinking or tool item is part of.
    call_id: str | None = None
    #: What a user item is when it is no plain prompt (``steering``, ``teammate message``…),
    #: an error item an API error Claude Code gave up on (:data:`API_ERROR`).
    label: str | None = None
    #: Part of a branch the user rewound (a later ``rewind`` item says so).
    abandoned: bool = False
    #: A ``rewind`` item's abandoned branch: the prompts it left, in order (their
    #: answers follow them in the conversation, marked :attr:`abandoned`).
    branch: list[Item] = field(default_factory=list)
    #: The answer a ``result`` item repeats (the CLI's result is its turn's last
    #: answer again): its text is then left out, so the page holds and draws it once.
    answers: list[Item] = field(default_factory=list)

    @property
    def markdown(self) -> bool:
        """Whether the pages draw its text as Markdown: an answer, or a result that
        says more than its answer (an error's text is shown as it is)."""
        return self.kind == "assistant" or (self.kind == "result" and not self.is_error)


class _Builder:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.items: list[Item] = []
        self.tools: dict[str, ToolCall] = {}
        # The session may be folded as far as this builder has read, not further:
        # its control round trips are looked up as they come.
        self.controls: dict[int, ControlRoundTrip] = {}
        self._controls_seen = 0
        #: Prompt items by their line's uuid (a rewind names the prompts it abandons).
        self.prompts: dict[str, Item] = {}
        #: The model and CLI version the last ``system/init`` said (None before one).
        self.started: tuple[Any, Any] | None = None

    def trip(self, seq: int) -> ControlRoundTrip | None:
        """The session's control round trip whose request is line ``seq``."""
        controls = self.session.controls
        if seq not in self.controls and self._controls_seen < len(controls):
            for trip in controls[self._controls_seen :]:
                self.controls[trip.request_seq] = trip
            self._controls_seen = len(controls)
        return self.controls.get(seq)

    def turn_ended_at(self, seq: int) -> Turn | None:
        """The session's turn whose result is line ``seq`` (usually the latest)."""
        return next((t for t in reversed(self.session.turns) if t.end_seq == seq), None)

    def target(self, lane: str | None) -> list[Item]:
        # Subagent lines nest under the tool call that started the subagent.
        parent = self.tools.get(lane) if lane else None
        return parent.children if parent is not None else self.items

    def tool(self, tool_use_id: str, name: str | None) -> ToolCall:
        view = self.tools.get(tool_use_id)
        if view is None:
            call = self.session.tools.get(tool_use_id)
            view = ToolCall.of(call) if call is not None else ToolCall(tool_use_id, name or "?")
            self.tools[tool_use_id] = view
        return view

    def add(self, ev: Event, kind: ItemKind, text: str = "", **kw: Any) -> Item:
        item = Item(kind, ev.seq, ev.t, text, **kw)
        self.target(ev.fields.parent_tool_use_id).append(item)
        return item

    def feed(self, ev: Event) -> bool:
        """Take one line; False for a line the conversation skips (a delta)."""
        if ev.direction == "err":
            self.add(ev, "stderr", ev.text, is_error=True)
            return True
        msg = ev.message
        if msg is None:
            what = "empty line" if not ev.data else f"unparsable line ({len(ev.data)} bytes)"
            self.add(ev, "error", f"{what}: {ev.text[:2000]}" if ev.data else what, is_error=True)
            return True
        kind = ev.type
        if kind in _SKIPPED_TYPES:
            return False
        if kind == "user":
            self.user(ev)
        elif kind == "assistant":
            self.assistant(ev)
        elif kind == "result":
            self.result(ev)
        elif kind == "control_request":
            self.control_request(ev)
        elif kind == "system":
            self.system(ev, msg)
        elif kind not in ("control_response", "control_cancel_request"):
            self.add(ev, "system", f"{kind}: {_compact(msg)}", data=msg)
        return True

    def user(self, ev: Event) -> None:
        texts: list[str] = []
        for block in message_blocks(ev):
            if block.kind == "tool_result":
                if block.id:
                    unseen = block.id not in self.tools
                    call = self.tool(block.id, None)
                    call.result = block.text
                    call.result_seq = ev.seq
                    call.is_error = block.is_error
                    if unseen:
                        # A result whose tool_use is outside the window shown.
                        self.add(ev, "tool", call.name, tool=call)
                continue
            texts.append(content_text([block.raw]))  # text, or [image] …
        text = "\n".join(t for t in texts if t)
        if not text:
            return
        msg = ev.message or {}
        kind = msg.get("claudetrace_kind")
        if kind == "compact_summary" or msg.get("isCompactSummary") is True:
            self.add(ev, "compaction", text, label="compaction summary")
        elif isinstance(kind, str):
            said = kind in ("steering", "teammate")
            shown, named = user_line(kind, text)
            self.add(ev, "user" if said else "system", shown, label=named,
                     data={"role": "user"})
        elif ev.direction == "in" or ev.fields.parent_tool_use_id:
            # The host's prompt, or the prompt the CLI gives a subagent.
            running = self.queued_behind(ev.seq) if ev.direction == "in" else None
            item = self.add(ev, "user", text,
                            label=None if running is None
                            else f"steering (sent while turn {running.number} ran)")
            if ev.fields.uuid and not ev.fields.parent_tool_use_id:
                self.prompts[ev.fields.uuid] = item
        else:
            # The CLI's own user lines (command output after set_model, replays),
            # and an imported transcript's that are no prompt (steering …).
            label = line_label(ev.message or {})
            self.add(ev, "system", f"{label}: {text}" if label else text,
                     data={"role": "user", "kind": label} if label else {"role": "user"})

    def assistant(self, ev: Event) -> None:
        error = message_error(ev)
        message = (ev.message or {}).get("message")
        synthetic = is_synthetic(message)
        if synthetic and error:
            # The API error Claude Code gave up on, written as a message of its
            # own: an error, said once with its text, not a model's answer.
            said = content_text(message.get("content")) if isinstance(message, dict) else ""
            self.add(ev, "error", f"API error {api_error_status(ev) or error}: {said}",
                     is_error=True, label=API_ERROR)
            return
        if error:
            self.add(ev, "error", f"assistant error: {error}", is_error=True)
        call_id = message.get("id") if isinstance(message, dict) and not synthetic else None
        call_id = call_id if isinstance(call_id, str) else None
        for block in message_blocks(ev):
            if block.kind == "text":
                self.add(ev, "assistant", block.text, call_id=call_id)
            elif block.kind == "thinking":
                self.add(ev, "thinking", "[redacted]" if block.redacted else block.text,
                         call_id=call_id)
            elif block.kind == "tool_use":
                call = self.tool(block.id or f"seq{ev.seq}", block.name)
                if call.input is None:
                    call.input = block.input
                self.add(ev, "tool", call.name, tool=call, call_id=call_id)
            else:
                raw = block.raw if isinstance(block.raw, dict) else {}
                self.add(ev, "system", f"{block.label} {_compact(block.raw)}", data=raw)

    def queued_behind(self, seq: int) -> Turn | None:
        """The turn still under way when the prompt at line ``seq`` was sent, if any."""
        turns = self.session.turns
        for i in range(len(turns) - 1, -1, -1):
            if turns[i].start_seq == seq:
                before = turns[i - 1] if i else None
                if before is not None and (before.end_seq is None or before.end_seq > seq):
                    return before
                return None
        return None

    def abandon(self, prompt_uuids: list[str]) -> list[Item]:
        """Mark the items from the first of these prompts on as an abandoned branch;
        returns the branch's prompts."""
        firsts = [self.prompts[u].seq for u in prompt_uuids if u in self.prompts]
        if not firsts:
            return []
        start = min(firsts)
        branch = []
        for item in reversed(self.items):
            if item.seq < start:
                break
            item.abandoned = True
            if item.kind == "user":
                branch.append(item)
        return branch[::-1]

    def result(self, ev: Event) -> None:
        turn = self.turn_ended_at(ev.seq)
        is_error = turn.is_error if turn is not None else False
        text = result_text(ev)
        answers = self.answered(text)
        self.add(ev, "result", "" if answers else text, is_error=is_error, turn=turn,
                 answers=answers)

    def answered(self, text: str) -> list[Item]:
        """The answer of the turn a result with ``text`` ends, when the result repeats
        it: the last text of its last model call, or that call's texts together.
        Texts are compared only when their lengths are close (no copy of a long one)."""
        said = text.strip()
        if not said:
            return []
        texts: list[Item] = []
        for item in reversed(self.items):
            if item.kind in ("user", "result"):
                break
            if item.kind == "assistant":
                if texts and item.call_id != texts[-1].call_id:
                    break
                texts.append(item)
        texts.reverse()
        if not texts:
            return []
        if abs(len(texts[-1].text) - len(said)) <= _SLACK and texts[-1].text.strip() == said:
            return texts[-1:]
        parts = [t.text for t in texts]
        close = len(parts) > 1 and abs(sum(map(len, parts)) - len(said)) <= _SLACK * len(parts)
        if close and any(sep.join(parts).strip() == said for sep in ("", "\n", "\n\n")):
            return texts
        return []

    def control_request(self, ev: Event) -> None:
        trip = self.trip(ev.seq)
        if trip is None:
            return
        if trip.kind in ("permission", "hook"):
            if trip.tool_use_id and trip.tool_use_id in self.session.tools:
                return  # shown with its tool call
            decision = Decision.of(trip)
            self.add(ev, "system", f"{decision.kind} {decision.name}", decision=decision)
        elif trip.subtype not in _QUIET_CONTROL:
            who = "host" if trip.initiator == "host" else "CLI"
            detail = {k: v for k, v in trip.request.items() if k != "subtype"}
            self.add(
                ev,
                "system",
                f"{who} control request {trip.subtype} {_compact(detail)}".rstrip(),
                data=trip.request,
            )

    def system(self, ev: Event, msg: dict[str, Any]) -> None:
        subtype = ev.subtype or "?"
        rest = {k: v for k, v in msg.items() if k not in ("type", "subtype", "uuid", "session_id")}
        if subtype == "init":
            # The CLI says init at each turn's start (an imported transcript's
            # converter too): the session started once; a later one is shown only
            # where it says something new (another model, another CLI).
            model, cli = msg.get("model"), msg.get("claude_code_version")
            if (model, cli) == self.started:
                return
            what = "session started" if self.started is None else "now"
            self.started = (model, cli)
            self.add(ev, "system", f"{what} · model {model} · CLI {cli}", data=rest)
        elif subtype == "compact_boundary":
            meta = msg.get("compactMetadata") or msg.get("compact_metadata")
            meta = meta if isinstance(meta, dict) else {}
            bits = [str(meta["trigger"])] if isinstance(meta.get("trigger"), str) else []
            tokens = meta.get("preTokens", meta.get("pre_tokens"))
            if isinstance(tokens, int):
                bits.append(f"{tokens:,} tokens before")
            text = "conversation compacted" + (f" ({', '.join(bits)})" if bits else "")
            self.add(ev, "compaction", text, data=rest)
        elif subtype == "rewind":
            gone = msg.get("abandoned_prompts")
            gone = [g for g in gone if isinstance(g, str)] if isinstance(gone, list) else []
            branch = self.abandon(gone)
            count = len(gone)
            what = "the last prompt" if count == 1 else f"the last {count} prompts"
            self.add(ev, "rewind", f"rewound: {what} and their answers are an abandoned "
                     "branch; the conversation goes on from before them", data=rest,
                     branch=branch)
        elif subtype == "api_error" or "error" in subtype:
            self.add(ev, "error", f"{subtype}: {_compact(rest)}", is_error=True, data=rest)
        else:
            said = marker_text(msg)  # compaction, rewind
            self.add(ev, "system", said or f"{subtype}: {_compact(rest)}", data=rest)


#: The label of an API error Claude Code gave up on and wrote as its own message.
API_ERROR = "API error"


def _compact(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Conversation:
    """A recording's conversation, built line by line beside the session model's fold.

    Each line is folded into :attr:`session` and then shown, so a tool call takes
    its name, input, permission and hooks from the model and its result from its
    ``tool_result`` line wherever that falls, and subagent lines nest under the
    call that started them however far apart they are.  :meth:`part` cuts the
    result into parts of a few hundred lines without changing any item: a part is
    the top-level items of its lines, each whole.
    """

    def __init__(self) -> None:
        self.session = Session()
        self._builder = _Builder(self.session)
        #: The lines the conversation shows (deltas skipped), in order.
        self.seqs: list[int] = []

    @property
    def items(self) -> list[Item]:
        """The top-level items so far (subagent items nested under their tool call)."""
        return self._builder.items

    def feed(self, ev: Event) -> None:
        """Fold one line (in sequence order) and show it."""
        self.session.add(ev)
        if self._builder.feed(ev):
            self.seqs.append(ev.seq)

    def feed_many(self, events: Iterable[Event]) -> None:
        for ev in events:
            self.feed(ev)

    def settle(self, items: Iterable[Item]) -> bool:
        """Bring the tool calls among ``items`` up to date with the session (permission
        and hook decisions answered since); True when every one has its result."""
        done = True
        for _, item in walk(items):
            view = item.tool
            if view is None:
                continue
            call = self.session.tools.get(view.tool_use_id)
            if call is not None:
                view.decisions = ToolCall.of(call).decisions
            done = done and view.answered
        return done

    def part(self, start: int, size: int) -> tuple[list[Item], int | None]:
        """The top-level items of the ``size`` lines shown from line ``start`` on, and
        the line the next part starts at (None if none has been read)."""
        first = bisect.bisect_left(self.seqs, start)
        following = self.seqs[first + size] if first + size < len(self.seqs) else None
        items = self.items
        lo = bisect.bisect_left(items, start, key=_seq)
        hi = len(items) if following is None else bisect.bisect_left(items, following, key=_seq)
        return items[lo:hi], following


class LazyConversation:
    """The conversation of one recording, built as far as it is looked at.

    ``read(start_seq, limit)`` returns the recording's events from ``start_seq``
    (deltas too: the session model needs them).  A part is read until its lines
    are in and every tool call in it has its result (a subagent's work ends with
    it), or to the recording's end, so the first part of a long recording shows
    without reading the rest and no part shows a call without the result that a
    later line brings.  Safe to share between the server's threads.
    """

    def __init__(self, read: Callable[[int, int], Sequence[Event]], *, step: int = 5000) -> None:
        self._read = read
        self._step = step
        self._conversation = Conversation()
        self._next_seq = 0
        self._lock = threading.Lock()
        #: True once every line has been read.
        self.complete = False

    @property
    def session(self) -> Session:
        """The session model as far as the conversation has read."""
        return self._conversation.session

    def part(self, start: int, size: int) -> tuple[list[Item], int | None]:
        """As :meth:`Conversation.part`, reading on as far as that part needs."""
        conv = self._conversation
        with self._lock:
            while not self.complete:
                first = bisect.bisect_left(conv.seqs, start)
                if first + size < len(conv.seqs) and conv.settle(conv.part(start, size)[0]):
                    break
                events = self._read(self._next_seq, self._step)
                conv.feed_many(events)
                if events:
                    self._next_seq = events[-1].seq + 1
                if len(events) < self._step:
                    self.complete = True
            items, following = conv.part(start, size)
            conv.settle(items)
            return items, following


    def through(self, seq: int) -> list[Item]:
        """Every top-level item so far, read on as far as line ``seq`` and the part
        that holds it need (a span's input and output: its answer's lines and its
        tools' results)."""
        self.part(seq, 50)
        with self._lock:
            return list(self._conversation.items)


def _seq(item: Item) -> int:
    return item.seq


def build_conversation(events: Iterable[Event], session: Session | None = None) -> list[Item]:
    """The conversation of an event stream (subagent items nested under their tool call).

    ``session`` is the recording's :class:`~claudetrace.model.Session` folded whole
    when ``events`` are a window of it (the tool calls' names, inputs, permissions
    and hooks, and the turns' results are the session model's); without it,
    ``events`` are folded here, line by line as they are shown
    (:class:`Conversation`).
    """
    if session is None:
        conversation = Conversation()
        conversation.feed_many(events)
        conversation.settle(conversation.items)
        return conversation.items
    builder = _Builder(session)
    for ev in events:
        builder.feed(ev)
    return builder.items


def walk(items: Iterable[Item], depth: int = 0) -> Iterable[tuple[int, Item]]:
    """Every item with its nesting depth (subagent items follow their tool call)."""
    for item in items:
        yield depth, item
        if item.tool is not None:
            yield from walk(item.tool.children, depth + 1)
