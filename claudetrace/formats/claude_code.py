"""Claude Code's own session transcripts, read as recordings.

The CLI writes every session, interactive or driven by an SDK, as JSONL under
``~/.claude/projects/<project-slug>/``: the main thread in
``<session-id>.jsonl`` and each subagent's side chain beside it (every layout:
:mod:`.layout`).  A transcript line is close to a stream-json line (``user``
and ``assistant`` lines carry the same ``message``), so :func:`read_session`
turns a session's files into the events the CLI would have written on stdout:
the prompts (``in``), the assistant messages and tool results (``out``), the
subagents' lines nested under the tool use that ran them, system lines and
summaries, a ``system/init`` per turn (model, permission mode, version), and one
``result`` per finished turn.

A result's usage counts each API message once, with the last usage the
transcript gives for its id (the lines of one message repeat it, growing), the
main thread's in ``usage`` and every thread's per model in
``model_usage_since_last_result``; its cost is the CLI's own running total from
``cost-state`` lines when a turn has one, and otherwise not given: a transcript
that says nothing of cost is not free.

What is typed on a user line that is no prompt is kept as what it is, marked
``claudetrace_kind`` (see :data:`USER_KINDS`): slash commands, meta lines,
compaction summaries, teammate messages, steering (text typed while a turn ran),
interrupts.  An API error message keeps the transcript's ``isApiErrorMessage``
and ``error``, and its turn's result is an error.

Times come from the entries' timestamps only: a line without one takes the time
of the line before it (or, at the start of a file, of the first line that has
one); a session with no timestamp at all has no time and is not read.  What a
transcript cannot know stays unknown: there is no control plane, no stderr and
no exit status.  A turn still running when the transcript was read gets no
result, and the recording stays open.  Lines that describe the CLI's
bookkeeping rather than the session (queue operations, API request shapes,
file snapshots) are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec

from ..display import plural
from ..errors import ClaudeTraceError
from ..model.events import Event, is_tool_result_type, parsed_event
from ..model.protocol import INTERRUPTED_BY_USER
from ..model.usage import MAX_TOKENS, count
from ..recording import RecordingInfo, new_recording_id
from .jsonl import JsonlFile
from .layout import SOURCE, SessionFiles, peek_session_id, side_chains_of
from .timeline import (
    Item,
    agent_links,
    first_time,
    main_items,
    merged,
    out_of_range,
    timed,
    timestamp_ns,
)

#: Types only a Claude Code transcript line has (a stream-json line never does).
_TRANSCRIPT_ONLY: Final = frozenset(
    {
        "summary",
        "queue-operation",
        "attachment",
        "file-history-snapshot",
        "last-prompt",
        "cost-state",
        "api-request",
        "api-request-shape",
        "api-request-blob",
        "tools-used",
        "custom-title",
        "atis-latch",
    }
)
#: ``claudetrace_kind`` of the user lines that are not prompts (and not tool results).
USER_KINDS: Final = (
    "command", "meta", "compact_summary", "teammate", "steering", "interrupt",
)
#: Tools that run a subagent.
_AGENT_TOOLS: Final = frozenset({"Task", "Agent"})
#: The fields of a ``modelUsage`` entry that are running counts (the others, such
#: as ``contextWindow`` or ``canonicalModel``, are the model's constants).
_RUNNING_COUNTS: Final = frozenset({
    "inputTokens", "outputTokens", "cacheReadInputTokens", "cacheCreationInputTokens",
    "webSearchRequests", "costUSD", "thinkingTokens", "cacheCreationEphemeral5mInputTokens",
    "cacheCreationEphemeral1hInputTokens",
})
#: Usage fields counted, in the API's names and in ``modelUsage``'s.
_TOKENS: Final = (
    ("input_tokens", "inputTokens"),
    ("cache_creation_input_tokens", "cacheCreationInputTokens"),
    ("cache_read_input_tokens", "cacheReadInputTokens"),
    ("output_tokens", "outputTokens"),
)
_API_TOKENS: Final = tuple(api for api, _camel in _TOKENS)
_CAMEL_TOKENS: Final = tuple(camel for _api, camel in _TOKENS)
_SYNTHETIC: Final = "<synthetic>"
_dumps: Final = msgspec.json.encode  # compact, raw UTF-8, as the CLI writes JSON


def _count(value: Any) -> int:
    """A token count as the transcript gives it (a damaged one is 0, as the session
    model reads it: :func:`~claudetrace.model.usage.count`)."""
    return count(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class TranscriptError(ClaudeTraceError):
    """A transcript file that cannot be read."""


def is_transcript_line(obj: Any) -> bool:
    """Whether a parsed JSONL line looks like a Claude Code transcript line."""
    if not isinstance(obj, dict):
        return False
    if obj.get("type") in _TRANSCRIPT_ONLY:
        return True
    # ``mode`` (the permission mode) begins a forked or resumed session's file (CLI 2.1).
    return "sessionId" in obj and obj.get("type") in ("user", "assistant", "system", "mode")


@dataclass
class _Turn:
    start_ns: int
    end_ns: int
    #: API message id → its thread (side chain's tool use), model and last usage.
    calls: dict[str, tuple[str | None, Any, dict[str, Any]]] = field(default_factory=dict)
    last_text: str = ""
    interrupted: bool = False
    waiting_on_tools: bool = False
    #: The main agent's last answer was an API error (no answer went through after it).
    api_error: bool = False
    #: Answers a compaction kept, repeated at the start of a file that goes on from
    #: another session: the earlier session's calls, not counted again here.
    kept: bool = False


@dataclass
class Transcript:
    """A transcript turned into a recording's metadata and events."""

    info: RecordingInfo
    events: list[Event]
    finished: bool
    cost_known: bool
    #: Damaged lines skipped (the first few named) and other things said of the read.
    warnings: list[str] = field(default_factory=list)
    damage: int = 0
    #: When the session was last written (its last entry's time), in ns.
    last_entry_ns: int = 0


#: How a slash command the user invoked begins (its output lines are ``<local-command-…``).
_INVOKED = ("<command-name>", "<command-message>")


def user_kind(entry: dict[str, Any], text: str) -> str | None:
    """What a user line that is no prompt is (:data:`USER_KINDS`), else None."""
    if entry.get("isCompactSummary"):
        return "compact_summary"
    if entry.get("isMeta"):
        return "meta"
    head = text.lstrip()
    if head.startswith(("<command-", "<local-command")):
        return "command"
    if head.startswith("<teammate-message"):
        return "teammate"
    if head.startswith(INTERRUPTED_BY_USER):
        return "interrupt"
    return None


def user_reading(entry: dict[str, Any]) -> tuple[str, bool, str | None]:
    """A user line's text, whether it holds a tool result, and what it is when it is
    no prompt (:func:`user_kind`; None for a prompt or a tool result)."""
    msg = entry.get("message")
    text, results, _uses = _scan(msg.get("content") if isinstance(msg, dict) else None)
    return text, results, None if results else user_kind(entry, text)


def waits_on_tools(entry: dict[str, Any]) -> bool:
    """Whether a main-thread answer leaves its turn waiting on the CLI: it holds a
    client tool use (server and MCP-connector tool uses run on the API's side)."""
    msg = entry.get("message")
    return bool(_scan(msg.get("content") if isinstance(msg, dict) else None)[2])


def result_subtype(interrupted: bool) -> str:
    """The subtype of a converted turn's ``result`` (an API error the turn ended on
    makes it an error by ``is_error``, as the CLI's own result then is)."""
    return "error_during_execution" if interrupted else "success"


def opens_turn(entry: dict[str, Any]) -> str | None:
    """Whether a main-thread user line starts a turn: ``"prompt"`` (always), ``"command"``
    (a slash command: when no turn is open, before any prompt), else None."""
    text, results, kind = user_reading(entry)
    if results:
        return None
    if kind is None:
        return "prompt"
    return "command" if kind == "command" and text.lstrip().startswith(_INVOKED) else None


class _Converter:
    def __init__(
        self, session_id: str, source: str = SOURCE, *, sidechain_usage: bool = False,
        links: dict[str, str] | None = None, sink: Callable[[Event], None] | None = None,
    ) -> None:
        self.session_id = session_id
        #: Where each event goes as it is made (else :attr:`events` keeps them).
        self.sink = sink
        self.count = 0
        self.source = source
        #: Count subagents' API messages in the turn's ``usage`` too (for sources
        #: where the main thread's own figure means nothing more).
        self.sidechain_usage = sidechain_usage
        #: Subagent id → the tool use that ran it (from the tool results' metadata).
        self.links = links or {}
        self.events: list[Event] = []
        self.start_ns: int | None = None
        self.last_ns = 0
        self.turn: _Turn | None = None
        self.turn_count = 0
        self.pending_init: dict[str, Any] | None = None
        self.facts: dict[str, Any] = {}
        self.first_prompt: dict[str, Any] | None = None
        #: The first entry that names its working folder, on any thread: where
        #: the session ran when no prompt of the main thread says it (a subagent's
        #: file imported without its main transcript).
        self.first_placed: dict[str, Any] | None = None
        self.cost_total: float | None = None
        self.cost_models: dict[str, dict[str, Any]] = {}
        self.cost_reported: dict[str, dict[str, Any]] = {}
        self.cost_known = False
        #: A cost-state line came since the last result.
        self.cost_fresh = False
        #: A result went out without the running totals.
        self.cost_unreported = False
        #: Whether the main thread's first entry is read yet, and was a compaction
        #: that goes on from another session (:mod:`.continuation`): its
        #: cost-state lines carry that session's running totals on, so they are
        #: not this file's; its calls are counted as seen, its cost estimated.
        self.first_entry_seen = False
        self.carried_on = False
        #: Side chain → the tool use it nests under; agent tool uses not yet claimed.
        self.chain_parent: dict[str, str] = {}
        self.agent_uses: dict[str, str] = {}
        #: The main thread's entries in order (uuid → place) and its prompts' places,
        #: to see a rewind: a prompt that continues from before the last prompt.
        self.place: dict[str, int] = {}
        self.prompts: list[tuple[int, str]] = []
        #: The session ids a resumed session went on as (its later files'), in order.
        self.resumed_as: list[str] = []

    # -- output -------------------------------------------------------------------

    def emit(self, direction: str, obj: dict[str, Any], when: int) -> None:
        if self.start_ns is None:
            self.start_ns = when
        # Lines are written in order; a clock that steps back does not reorder
        # them, but each keeps its own time as its wall clock (what dates its usage).
        wall, when = when, max(when, self.last_ns)
        self.last_ns = when
        event = parsed_event(self.count, direction, when - self.start_ns,  # type: ignore[arg-type]
                             _dumps(obj), obj, wall_ns=wall)
        self.count += 1
        if self.sink is not None:
            self.sink(event)
        else:
            self.events.append(event)

    def init(self, model: Any, when: int) -> None:
        """A ``system/init`` for the turn starting (the CLI writes one per turn)."""
        entry, self.pending_init = self.pending_init, None
        if entry is None:
            return
        if not isinstance(model, str) or model == _SYNTHETIC:
            model = self.facts.get("model")  # an API error is no model's answer
        msg = {
            "type": "system",
            "subtype": "init",
            "cwd": entry.get("cwd"),
            "session_id": self.session_id,
            "model": model,
            "permissionMode": entry.get("permissionMode"),
            "claude_code_version": entry.get("version"),
            "claudetrace_source": self.source,
        }
        self.emit("out", {k: v for k, v in msg.items() if v is not None}, when)

    def close_turn(self) -> None:
        turn, self.turn = self.turn, None
        if turn is None:
            return
        self.turn_count += 1
        # A turn holds every call of its threads: summed with one pass over them and
        # no list or dict a call (the transcript's numbers are parsed JSON: an
        # ``int`` is a whole number, ``bool`` is not one; a count out of bounds is
        # damaged, 0, as :func:`_count` reads it).
        main = [0, 0, 0, 0]
        by_model: dict[str, list[int]] = {}
        own = 0
        every = self.sidechain_usage
        for lane, model, usage in turn.calls.values():
            get = usage.get
            tokens = (get("input_tokens"), get("cache_creation_input_tokens"),
                      get("cache_read_input_tokens"), get("output_tokens"))
            counts = [v if type(v) is int and 0 <= v <= MAX_TOKENS else 0 for v in tokens]
            if lane is None:
                own += 1
            if lane is None or every:
                for at, value in enumerate(counts):
                    main[at] += value
            if type(model) is str and model != _SYNTHETIC and any(counts):
                summed = by_model.get(model)
                if summed is None:
                    by_model[model] = counts
                else:
                    for at, value in enumerate(counts):
                        summed[at] += value
        is_error = turn.interrupted or turn.api_error
        result: dict[str, Any] = {
            "type": "result",
            "subtype": result_subtype(turn.interrupted),
            "is_error": is_error,
            "duration_ms": (turn.end_ns - turn.start_ns) // 1_000_000,
            "num_turns": own,
            "result": turn.last_text,
            "session_id": self.session_id,
            "usage": dict(zip(_API_TOKENS, main, strict=True)),
            "claudetrace_source": self.source,
        }
        if self.cost_fresh and self.cost_total is not None and self.cost_models:
            # cost-state figures are the session's running totals, as of the
            # last cost-state line: only a turn that one came after knows them.
            result["total_cost_usd"] = self.cost_total
            result["modelUsage"] = self.cost_models
            if not self.cost_unreported:
                result["model_usage_since_last_result"] = self._since_last_result()
            self.cost_reported = self.cost_models
            # The next result's growth is measured from this one's totals.
            self.cost_unreported = False
        else:
            # The transcript's own count of the turn, every thread, per model;
            # no cost (none is known: not zero).
            if by_model:
                result["model_usage_since_last_result"] = {
                    model: dict(zip(_CAMEL_TOKENS, counts, strict=True))
                    for model, counts in by_model.items()}
            self.cost_unreported = True
        self.cost_fresh = False
        self.emit("out", result, turn.end_ns)

    # -- input --------------------------------------------------------------------

    def feed(self, entry: dict[str, Any], when: int, chain: str | None) -> None:
        """One entry at ``when``; ``chain`` names the side chain it belongs to
        (None on the main thread)."""
        kind = entry.get("type")
        if self.first_placed is None and entry.get("cwd"):
            self.first_placed = entry
        if chain is None and not self.first_entry_seen and kind in (
                "user", "assistant", "system"):
            self.first_entry_seen = True
            self.carried_on = (kind == "system" and entry.get("subtype") == "compact_boundary"
                               and isinstance(entry.get("logicalParentUuid"), str))
        if kind == "cost-state":
            if not self.carried_on:
                self.cost_state(entry)
            return
        if kind not in ("user", "assistant", "system", "summary", "attachment"):
            return
        parent = None if chain is None else self.parent_of(chain, entry)
        uid = entry.get("uuid")
        if chain is None and isinstance(uid, str):
            self.place[uid] = len(self.place)
        if kind == "user":
            self.user(entry, when, parent)
        elif kind == "assistant":
            self.assistant(entry, when, parent)
        elif kind == "system":
            self.system(entry, when, parent)
        elif kind == "summary":
            msg = {"type": "system", "subtype": "summary", "summary": entry.get("summary"),
                   "session_id": self.session_id}
            leaf = entry.get("leafUuid")
            if isinstance(leaf, str):
                msg["leafUuid"] = leaf
            self.emit("out", msg, when)
        else:
            self.attachment(entry, when, parent)

    def parent_of(self, chain: str, entry: dict[str, Any]) -> str:
        """The tool use a side chain nests under: the one whose result names its
        agent, else the agent tool use it answers (its prompt), else the oldest
        one not claimed yet, else a name of its own."""
        found = self.chain_parent.get(chain)
        if found is not None:
            return found
        agent = entry.get("agentId")
        found = self.links.get(agent) if isinstance(agent, str) else None
        if found is None and self.agent_uses:
            text = _text_of(entry)
            found = next((t for t, p in self.agent_uses.items() if p and p == text), None)
            found = found or next(iter(self.agent_uses))
        if found is None:
            found = f"agent-{agent}" if isinstance(agent, str) and agent else chain
        self.agent_uses.pop(found, None)
        self.chain_parent[chain] = found
        return found

    def cost_state(self, entry: dict[str, Any]) -> None:
        total = entry.get("totalCostUSD")
        models = entry.get("modelUsage")
        if isinstance(total, (int, float)) and not isinstance(total, bool) and isinstance(
                models, dict):
            self.cost_total = float(total)
            self.cost_models = {str(k): v for k, v in models.items() if isinstance(v, dict)}
            self.cost_known = True
            self.cost_fresh = True

    def _since_last_result(self) -> dict[str, dict[str, Any]]:
        """``model_usage_since_last_result`` as the CLI writes it: per model used since
        the last result, its ``modelUsage`` entry with the running counts replaced by
        their growth (constants such as ``contextWindow`` and names kept)."""
        since: dict[str, dict[str, Any]] = {}
        for model, usage in self.cost_models.items():
            before = self.cost_reported.get(model, {})
            entry = dict(usage)
            for key in _RUNNING_COUNTS & usage.keys():
                value, was = usage[key], before.get(key, 0)
                if _is_number(value) and _is_number(was):
                    grown = value - was
                    entry[key] = round(grown, 9) if isinstance(grown, float) else grown
            if any(entry.get(key) for key in _RUNNING_COUNTS):
                since[model] = entry
        return since

    def _line(self, entry: dict[str, Any], parent: str | None) -> dict[str, Any]:
        line = {
            "type": entry["type"],
            "message": entry.get("message"),
            "parent_tool_use_id": parent,
            "session_id": self.session_id,
            "uuid": entry.get("uuid"),
        }
        if entry.get("isApiErrorMessage") is True:
            line["isApiErrorMessage"] = True
        if entry.get("error") is not None:
            line["error"] = entry["error"]
        return line

    def user(self, entry: dict[str, Any], when: int, parent: str | None) -> None:
        text, results, kind = user_reading(entry)
        if kind == "command" and parent is None and self.turn is None and not self.carried_on \
                and text.lstrip().startswith(_INVOKED):
            # A slash command (a skill, a custom command) before any prompt: the
            # model's work it starts is a turn, as the CLI's stream-json makes it one.
            self.start_turn(entry, when, kind)
            return
        if parent is not None or results or kind is not None:
            if self.turn is not None and parent is None:
                self.turn.end_ns = when
                self.turn.waiting_on_tools = False
                if kind == "interrupt":
                    self.turn.interrupted = True
            line = self._line(entry, parent)
            if kind is not None:
                line["claudetrace_kind"] = kind
            self.emit("out", line, when)
            return
        # A prompt: the previous turn is over, a new one starts.
        self.close_turn()
        self.rewind(entry, when)
        self.start_turn(entry, when)
        if self.first_prompt is None:
            self.first_prompt = entry

    def start_turn(self, entry: dict[str, Any], when: int, kind: str | None = None) -> None:
        """A turn that ``entry`` starts, the host's line (a prompt, or a command)."""
        self.turn = _Turn(when, when)
        line = self._line(entry, None)
        if kind is not None:
            line["claudetrace_kind"] = kind
        self.emit("in", line, when)
        self.pending_init = entry

    def rewind(self, entry: dict[str, Any], when: int) -> None:
        """A ``system/rewind`` line before a prompt that goes on from an entry before
        the last prompt (the user rewound the conversation): the prompts after that
        entry, and what answered them, are an abandoned branch."""
        up, uid = entry.get("parentUuid"), entry.get("uuid")
        at = self.place.get(up) if isinstance(up, str) else None
        if at is not None and self.prompts and at < self.prompts[-1][0]:
            gone = [p for place, p in self.prompts if place > at]
            self.emit("out", {
                "type": "system", "subtype": "rewind", "branch_from": up,
                "abandoned_prompts": gone, "session_id": self.session_id}, when)
        if isinstance(uid, str):
            self.prompts.append((self.place.get(uid, len(self.place)), uid))

    def attachment(self, entry: dict[str, Any], when: int, parent: str | None) -> None:
        """Text the user typed while a turn ran (a queued command) is steering; other
        attachments (dates, file contents, hooks' output) are the CLI's context."""
        found = entry.get("attachment")
        if not isinstance(found, dict) or found.get("type") != "queued_command":
            return
        prompt = found.get("prompt")
        if not isinstance(prompt, (str, list)):
            return
        line = self._line({**entry, "type": "user",
                           "message": {"role": "user", "content": prompt}}, parent)
        line["claudetrace_kind"] = "steering"
        self.emit("out", line, when)

    def assistant(self, entry: dict[str, Any], when: int, parent: str | None) -> None:
        msg = entry.get("message")
        if not isinstance(msg, dict):
            return
        model = msg.get("model")
        if isinstance(model, str) and model != _SYNTHETIC:
            self.facts.setdefault("model", model)
        turn = self.turn
        if turn is None and parent is None and self.carried_on and self.first_prompt is None:
            # What the compaction kept, before this file's first prompt: a turn of
            # its own that ends with it (not one that a later result would end).
            turn = self.turn = _Turn(when, when, kept=True)
        if parent is None:
            self.init(model, when)
        text, _results, uses = _scan(msg.get("content"))
        if turn is not None and not turn.kept:
            message_id = msg.get("id")
            usage = msg.get("usage")
            if isinstance(message_id, str) and isinstance(usage, dict):
                # The last figure given for a message id (its lines repeat it, growing).
                turn.calls[message_id] = (parent, model, usage)
        if turn is not None and parent is None:
            turn.end_ns = when
            if text:
                turn.last_text = text
            # Server and MCP-connector tool uses run on the API's side: only a
            # client tool use leaves the turn waiting on the CLI.
            turn.waiting_on_tools = bool(uses)
            turn.api_error = bool(entry.get("isApiErrorMessage") is True or entry.get("error"))
        if parent is None:
            for use in uses:
                tool_id, tool_input = use.get("id"), use.get("input")
                if use.get("name") in _AGENT_TOOLS and isinstance(tool_id, str):
                    prompt = tool_input.get("prompt") if isinstance(tool_input, dict) else None
                    self.agent_uses[tool_id] = prompt if isinstance(prompt, str) else ""
        # The line keeps what says the answer is an API error (see _line), which the
        # session model reads.
        self.emit("out", self._line(entry, parent), when)

    def system(self, entry: dict[str, Any], when: int, parent: str | None) -> None:
        skip = {
            "type", "parentUuid", "isSidechain", "userType", "cwd", "sessionId", "version",
            "gitBranch", "timestamp", "uuid", "entrypoint", "slug", "subtype",
        }
        msg: dict[str, Any] = {"type": "system", "subtype": entry.get("subtype") or "message"}
        msg.update({k: v for k, v in entry.items() if k not in skip})
        msg.update(
            {"parent_tool_use_id": parent, "session_id": self.session_id, "uuid": entry.get("uuid")}
        )
        turn = self.turn
        if msg["subtype"] == "resume":
            if isinstance(entry.get("version"), str):
                msg["version"] = entry["version"]  # a fork's or a resume's (our marker's)
            if turn is not None and turn.calls and not turn.waiting_on_tools:
                self.close_turn()  # the earlier run ended with its last answer
            sid = msg.get("resumed_as")
            if isinstance(sid, str) and sid != self.session_id and sid not in self.resumed_as:
                self.resumed_as.append(sid)
        if msg["subtype"] == "api_error" and parent is None and self.turn is not None:
            self.turn.api_error = True  # until an answer goes through (a retry)
        self.emit("out", msg, when)


def _scan(content: Any) -> tuple[str, bool, list[dict[str, Any]]]:
    """A message content's text (its text blocks, a line each), whether it holds a
    tool result, and its (client) tool uses: what :func:`~claudetrace.model.content.blocks`
    would say of them, without making a block of each."""
    if isinstance(content, str):
        return content, False, []
    if not isinstance(content, list):
        return "", False, []
    texts: list[str] = []
    results = False
    uses: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, str):
            texts.append(block)
            continue
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            value = block.get("text")
            texts.append(value if isinstance(value, str) else "")
        elif kind == "tool_use":
            uses.append(block)
        elif not results and is_tool_result_type(kind):
            results = True
    return "\n".join(texts), results, uses


def _text_of(entry: dict[str, Any]) -> str:
    msg = entry.get("message")
    return _scan(msg.get("content") if isinstance(msg, dict) else None)[0]


def read_session(
    files: SessionFiles, *, recording_id: str | None = None, source: str = SOURCE,
    sink: Callable[[Event], None] | None = None,
) -> Transcript:
    """Read a session's transcript files (:mod:`.layout`) as one recording.

    With ``sink``, each event goes there as it is made, and the transcript's
    :attr:`~Transcript.events` stays empty: a session of any size is read in a
    few lines' memory.
    """
    # A resumed session's files begin at one time: the one resumed (the smallest) first.
    mains = sorted(files.mains, key=lambda p: (first_time(p), p.stat().st_size)) if len(
        files.mains) > 1 else files.mains
    readers = [JsonlFile(p) for p in [*mains, *files.sides]]
    main_readers, side_readers = readers[: len(mains)], readers[len(mains):]
    links = agent_links(mains) if side_readers else {}
    got = _convert(
        files.session_id,
        main_items(_objects(r) for r in main_readers),
        [timed(_objects(r), f"file-{r.path.stem}") for r in side_readers],
        files.path,
        source=source,
        recording_id=recording_id,
        links=links,
        sink=sink,
    )
    for reader in readers:
        got.damage += reader.damage
        got.warnings += reader.damaged
    if got.damage > len(got.warnings):
        more = plural(got.damage - len(got.warnings), "more damaged line")
        got.warnings.append(f"{more} skipped")
    return got


def _objects(reader: JsonlFile) -> Iterator[dict[str, Any]]:
    for number, obj in reader.objects():
        stamp = obj.get("timestamp")
        if out_of_range(stamp):
            # A time the store cannot keep (year 9999): the line is damaged.
            reader.damaged_line(number, f"timestamp {stamp} out of range (1970 to 2262)")
        else:
            yield obj


def read_transcript(path: Path, *, recording_id: str | None = None) -> Transcript:
    """Read the session transcript ``path`` and the side chains filed under it."""
    sid = peek_session_id(path) or path.stem
    return read_session(SessionFiles(sid, [path], side_chains_of(path)),
                        recording_id=recording_id)


def entries_recording(
    main: list[dict[str, Any]],
    sides: list[list[dict[str, Any]]],
    path: Path,
    *,
    source: str,
    recording_id: str | None = None,
    sidechain_usage: bool = False,
) -> Transcript:
    """The recording of transcript entries (a session's, then its subagents').

    ``sidechain_usage`` counts the subagents' API messages in each turn's usage.
    """
    session_id = next(
        (e["sessionId"] for e in main if isinstance(e.get("sessionId"), str)), path.stem
    )
    return _convert(
        session_id, main_items([main]),
        [timed(entries, f"side-{n}") for n, entries in enumerate(sides)],
        path, source=source, recording_id=recording_id, sidechain_usage=sidechain_usage,
    )


def _convert(
    session_id: str,
    main: Iterable[Item],
    sides: Sequence[Iterable[Item]],
    path: Path,
    *,
    source: str,
    recording_id: str | None = None,
    sidechain_usage: bool = False,
    links: dict[str, str] | None = None,
    sink: Callable[[Event], None] | None = None,
) -> Transcript:
    convert = _Converter(session_id, source, sidechain_usage=sidechain_usage, links=links,
                         sink=sink)
    timeless = 0
    for when, entry, chain in merged(main, sides):
        if when is None:
            if convert.start_ns is None:
                timeless += 1
                continue
            when = convert.last_ns
        convert.feed(entry, when, chain)
    turn = convert.turn
    finished = turn is None or (not turn.waiting_on_tools and bool(turn.calls))
    if turn is not None and finished:
        convert.close_turn()
    if not convert.count or convert.start_ns is None:
        what = "no timestamp in this file" if timeless else "no conversation in this file"
        raise TranscriptError(f"{path}: {what}")
    started = convert.start_ns
    first = convert.first_prompt or {}
    placed = convert.first_placed or {}
    cwd = first.get("cwd") or placed.get("cwd")
    version = first.get("version") or placed.get("version")
    mode = first.get("permissionMode")
    info = RecordingInfo(
        id=recording_id or new_recording_id(started),
        argv=[],
        started_ns=started,
        cwd=cwd if isinstance(cwd, str) else "",
        source=source,
        ended_ns=convert.last_ns if finished else None,
        cli_session_id=session_id,
        claude_code_version=version if isinstance(version, str) else None,
        model=convert.facts.get("model"),
        permission_mode=mode if isinstance(mode, str) else None,
        extra={"source_path": str(path.resolve()), "cost_known": convert.cost_known,
               "session_id": session_id},
    )
    if convert.resumed_as:
        info.extra["resumed_as"] = convert.resumed_as
    from .._version import __version__

    info.claudetrace_version = __version__
    got = Transcript(info, convert.events, finished, convert.cost_known,
                     last_entry_ns=convert.last_ns)
    if timeless:
        got.warnings.append(f"{plural(timeless, 'line')} without a time skipped")
    return got


__all__ = [
    "SOURCE",
    "USER_KINDS",
    "Transcript",
    "TranscriptError",
    "entries_recording",
    "is_transcript_line",
    "opens_turn",
    "read_session",
    "read_transcript",
    "result_subtype",
    "side_chains_of",
    "timestamp_ns",
    "user_kind",
    "user_reading",
    "waits_on_tools",
]
