"""Claude Code's own session transcripts, read as recordings.

The CLI writes every session, interactive or driven by an SDK, as JSONL under
``~/.claude/projects/<project-slug>/<session-id>.jsonl``, and each subagent's
side chain beside it as ``<session-id>/subagents/agent-<id>.jsonl``.  A
transcript line is close to a stream-json line (``user`` and ``assistant``
lines carry the same ``message``), so :func:`transcript_events` turns a
transcript into the events the CLI would have written on stdout: the prompts
(``in``), the assistant messages and tool results (``out``), system lines and
summaries, a ``system/init`` per turn (model, permission mode, version), and one
``result`` per finished turn (usage added up over the turn's API messages,
cost from the CLI's ``cost-state`` lines when there are some).  Everything else
that reads a recording (``show``, spans, Prometheus, the UI, the HTML report)
then reads an imported transcript the way it reads a proxied session.

What a transcript cannot know stays unknown: there is no control plane, no
stderr and no exit status.  A turn still running when the transcript was read
gets no result, and the recording stays open (``running`` while the file keeps
growing, else ``incomplete``).  Lines that describe the CLI's bookkeeping rather
than the session (attachments, queue operations, API request shapes) are left
out.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..errors import ClaudeTraceError
from ..model.content import blocks
from ..model.events import Event
from ..recording import RecordingInfo, new_recording_id

#: ``source`` of recordings imported from transcripts.
SOURCE: Final = "transcript"
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
_INTERRUPTED: Final = "[Request interrupted by user"
#: The fields of a ``modelUsage`` entry that are running counts (the others, such
#: as ``contextWindow`` or ``canonicalModel``, are the model's constants).
_RUNNING_COUNTS: Final = frozenset({
    "inputTokens", "outputTokens", "cacheReadInputTokens", "cacheCreationInputTokens",
    "webSearchRequests", "costUSD", "thinkingTokens", "cacheCreationEphemeral5mInputTokens",
    "cacheCreationEphemeral1hInputTokens",
})


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
    return "sessionId" in obj and obj.get("type") in ("user", "assistant", "system")


def _dumps(obj: dict[str, Any]) -> bytes:
    # The CLI's own spelling (JSON.stringify: compact, raw UTF-8).
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def _timestamp_ns(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1_000_000) * 1000


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a transcript file.

    A last line without its newline is being written: it is left for the next
    read.  Any other line that is not a JSON object is an error naming the line.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TranscriptError(f"cannot read {path}: {exc.strerror or exc}") from exc
    lines = data.split(b"\n")
    if lines and lines[-1]:
        lines = lines[:-1]  # an unfinished last line
    out: list[dict[str, Any]] = []
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            raise TranscriptError(f"{path}:{number}: not a JSON line ({exc})") from exc
        except RecursionError:
            raise TranscriptError(f"{path}:{number}: a JSON line nested too deeply") from None
        if not isinstance(obj, dict):
            raise TranscriptError(f"{path}:{number}: not a JSON object")
        out.append(obj)
    return out


def sidechain_files(path: Path) -> list[Path]:
    """The subagent transcripts that belong to the session transcript ``path``."""
    folder = path.with_suffix("") / "subagents"
    return sorted(folder.glob("agent-*.jsonl")) if folder.is_dir() else []


def fingerprint(paths: Sequence[Path]) -> str:
    """A digest of the files' contents (an unchanged transcript is skipped on import)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(os.fsencode(path.name) + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


@dataclass
class _Turn:
    start_ns: int
    end_ns: int
    usage: dict[str, int] = field(default_factory=dict)
    messages: set[str] = field(default_factory=set)
    last_text: str = ""
    interrupted: bool = False
    waiting_on_tools: bool = False


@dataclass
class Transcript:
    """A transcript turned into a recording's metadata and events."""

    info: RecordingInfo
    events: list[Event]
    finished: bool
    cost_known: bool


class _Converter:
    def __init__(
        self, session_id: str, source: str = SOURCE, *, sidechain_usage: bool = False
    ) -> None:
        self.session_id = session_id
        self.source = source
        #: Count subagents' API messages in the turn's usage (as the CLI's modelUsage
        #: does), for sources without the CLI's own per-model figures.
        self.sidechain_usage = sidechain_usage
        self.events: list[Event] = []
        self.start_ns: int | None = None
        self.last_ns = 0
        self.turn: _Turn | None = None
        self.turn_count = 0
        self.pending_init: dict[str, Any] | None = None
        self.facts: dict[str, Any] = {}
        self.cost_total: float | None = None
        self.cost_models: dict[str, dict[str, Any]] = {}
        self.cost_reported: dict[str, dict[str, Any]] = {}
        self.cost_known = False
        #: A cost-state line came since the last result.
        self.cost_fresh = False
        #: A result went out without the running totals.
        self.cost_unreported = False

    # -- output -------------------------------------------------------------------

    def emit(self, direction: str, obj: dict[str, Any], when: int) -> None:
        if self.start_ns is None:
            self.start_ns = when
        # Lines are written in order; a clock that steps back does not reorder them.
        when = max(when, self.last_ns)
        self.last_ns = when
        self.events.append(
            Event(len(self.events), direction, when - self.start_ns, _dumps(obj), wall_ns=when)  # type: ignore[arg-type]
        )

    def init(self, model: Any, when: int) -> None:
        """A ``system/init`` for the turn starting (the CLI writes one per turn)."""
        entry, self.pending_init = self.pending_init, None
        if entry is None:
            return
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
        result: dict[str, Any] = {
            "type": "result",
            "subtype": "error_during_execution" if turn.interrupted else "success",
            "is_error": turn.interrupted,
            "duration_ms": (turn.end_ns - turn.start_ns) // 1_000_000,
            "num_turns": len(turn.messages),
            "result": turn.last_text,
            "session_id": self.session_id,
            "usage": {
                "input_tokens": turn.usage.get("input_tokens", 0),
                "cache_creation_input_tokens": turn.usage.get("cache_creation_input_tokens", 0),
                "cache_read_input_tokens": turn.usage.get("cache_read_input_tokens", 0),
                "output_tokens": turn.usage.get("output_tokens", 0),
            },
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
            # What this turn added to the running totals is not known: a later
            # result cannot say what it added since this one.
            self.cost_unreported = True
        self.cost_fresh = False
        self.emit("out", result, turn.end_ns)

    # -- input --------------------------------------------------------------------

    def feed(self, entry: dict[str, Any], when: int, parent: str | None) -> None:
        kind = entry.get("type")
        if kind == "cost-state":
            self.cost_state(entry)
        elif kind == "user":
            self.user(entry, when, parent)
        elif kind == "assistant":
            self.assistant(entry, when, parent)
        elif kind == "system":
            self.system(entry, when, parent)
        elif kind == "summary":
            text = entry.get("summary")
            msg = {
                "type": "system",
                "subtype": "summary",
                "summary": text,
                "session_id": self.session_id,
            }
            self.emit("out", msg, when)

    def cost_state(self, entry: dict[str, Any]) -> None:
        total = entry.get("totalCostUSD")
        models = entry.get("modelUsage")
        if isinstance(total, (int, float)) and isinstance(models, dict):
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
        return {
            "type": entry["type"],
            "message": entry.get("message"),
            "parent_tool_use_id": parent,
            "session_id": self.session_id,
            "uuid": entry.get("uuid"),
        }

    def user(self, entry: dict[str, Any], when: int, parent: str | None) -> None:
        msg = entry.get("message")
        found = blocks(msg.get("content") if isinstance(msg, dict) else None)
        results = any(b.kind == "tool_result" for b in found)
        text = "\n".join(b.text for b in found if b.kind == "text")
        own = (
            entry.get("isMeta")
            or entry.get("isCompactSummary")
            or text.lstrip().startswith(("<local-command", "<command-"))
        )
        if parent is not None or results or own or text.startswith(_INTERRUPTED):
            if self.turn is not None and parent is None:
                self.turn.end_ns = when
                self.turn.waiting_on_tools = False
                if text.startswith(_INTERRUPTED):
                    self.turn.interrupted = True
            self.emit("out", self._line(entry, parent), when)
            return
        # A prompt: the previous turn is over, a new one starts.
        self.close_turn()
        self.turn = _Turn(when, when)
        self.emit("in", self._line(entry, None), when)
        self.pending_init = entry

    def assistant(self, entry: dict[str, Any], when: int, parent: str | None) -> None:
        msg = entry.get("message")
        if not isinstance(msg, dict):
            return
        model = msg.get("model")
        if isinstance(model, str) and model != "<synthetic>":
            self.facts.setdefault("model", model)
        turn = self.turn
        if parent is None:
            self.init(model, when)
        if turn is not None and (parent is None or self.sidechain_usage):
            self._count(turn, msg)
        if turn is not None and parent is None:
            turn.end_ns = when
            found = blocks(msg.get("content"))
            texts = [b.text for b in found if b.kind == "text"]
            if texts:
                turn.last_text = "".join(texts)
            # Server and MCP-connector tool uses run on the API's side: only a
            # client tool use leaves the turn waiting on the CLI.
            turn.waiting_on_tools = any(b.type == "tool_use" for b in found)
        self.emit("out", self._line(entry, parent), when)

    @staticmethod
    def _count(turn: _Turn, msg: dict[str, Any]) -> None:
        """Add an API message's usage to the turn (once: one line per content block)."""
        message_id = msg.get("id")
        usage = msg.get("usage")
        if not isinstance(message_id, str) or message_id in turn.messages:
            return
        turn.messages.add(message_id)
        if isinstance(usage, dict):
            for key in (
                "input_tokens",
                "cache_creation_input_tokens",
                "cache_read_input_tokens",
                "output_tokens",
            ):
                value = usage.get(key)
                if isinstance(value, int):
                    turn.usage[key] = turn.usage.get(key, 0) + value

    def system(self, entry: dict[str, Any], when: int, parent: str | None) -> None:
        skip = {
            "type",
            "parentUuid",
            "isSidechain",
            "userType",
            "cwd",
            "sessionId",
            "version",
            "gitBranch",
            "timestamp",
            "uuid",
            "entrypoint",
            "slug",
        }
        msg: dict[str, Any] = {"type": "system", "subtype": entry.get("subtype") or "message"}
        msg.update({k: v for k, v in entry.items() if k not in skip and k != "subtype"})
        msg.update(
            {"parent_tool_use_id": parent, "session_id": self.session_id, "uuid": entry.get("uuid")}
        )
        self.emit("out", msg, when)


def _agent_links(entries: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Subagent id → the tool use that started it (from the tool results' metadata)."""
    links: dict[str, str] = {}
    for entry in entries:
        extra = entry.get("toolUseResult")
        if entry.get("type") != "user" or not isinstance(extra, dict):
            continue
        agent = extra.get("agentId")
        msg = entry.get("message")
        if not isinstance(agent, str) or not isinstance(msg, dict):
            continue
        for block in blocks(msg.get("content")):
            if block.kind == "tool_result":
                links[agent] = str(block.id)
    return links


def _timeline(
    main: list[dict[str, Any]], sides: list[list[dict[str, Any]]], links: dict[str, str]
) -> Iterator[tuple[int, dict[str, Any], str | None]]:
    """Every entry with its time and parent tool use id, in time order.

    The main file's order is kept; side chains are merged in by time.  An entry
    without a timestamp (``cost-state``) takes the time of the one before it.
    """
    tagged: list[tuple[int, int, int, dict[str, Any], str | None]] = []
    for chain, entries in enumerate([main, *sides]):
        last = 0
        for index, entry in enumerate(entries):
            when = _timestamp_ns(entry.get("timestamp"))
            last = when if when is not None else last
            parent = None
            if chain or entry.get("isSidechain"):
                agent = entry.get("agentId")
                parent = links.get(agent) if isinstance(agent, str) else None
                parent = parent or (f"agent-{agent}" if agent else None)
            tagged.append((last, chain, index, entry, parent))
    # Main-file order wins within the main file (its clock can step back by a
    # few ms between an entry and its attachments).
    main_order = [t for t in tagged if t[1] == 0]
    side_order = sorted((t for t in tagged if t[1] != 0), key=lambda t: (t[0], t[1], t[2]))
    merged: list[tuple[int, int, int, dict[str, Any], str | None]] = []
    j = 0
    for item in main_order:
        while j < len(side_order) and side_order[j][0] < item[0]:
            merged.append(side_order[j])
            j += 1
        merged.append(item)
    merged += side_order[j:]
    for when, _chain, _index, entry, parent in merged:
        yield when, entry, parent


def read_transcript(path: Path, *, recording_id: str | None = None) -> Transcript:
    """Read the session transcript ``path`` (and its subagents) as a recording."""
    main = read_lines(path)
    sides = [read_lines(p) for p in sidechain_files(path)]
    return entries_recording(main, sides, path, source=SOURCE, recording_id=recording_id)


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
    convert = _Converter(session_id, source, sidechain_usage=sidechain_usage)
    first: dict[str, Any] = next((e for e in main if e.get("type") == "user"), {})
    for when, entry, parent in _timeline(main, sides, _agent_links(main)):
        convert.feed(entry, when, parent)
    turn = convert.turn
    finished = turn is None or (not turn.waiting_on_tools and bool(turn.messages))
    if turn is not None and finished:
        convert.close_turn()
    if not convert.events:
        raise TranscriptError(f"{path}: no conversation in this file")
    started = convert.start_ns or 0
    version = first.get("version")
    mode = first.get("permissionMode")
    info = RecordingInfo(
        id=recording_id or new_recording_id(started),
        argv=[],
        started_ns=started,
        cwd=str(first.get("cwd") or ""),
        source=source,
        ended_ns=convert.last_ns if finished else None,
        cli_session_id=session_id,
        claude_code_version=version if isinstance(version, str) else None,
        model=convert.facts.get("model"),
        permission_mode=mode if isinstance(mode, str) else None,
        extra={"source_path": str(path.resolve()), "cost_known": convert.cost_known},
    )
    from .._version import __version__

    info.claudetrace_version = __version__
    return Transcript(info, convert.events, finished, convert.cost_known)


__all__ = [
    "SOURCE",
    "Transcript",
    "TranscriptError",
    "entries_recording",
    "fingerprint",
    "is_transcript_line",
    "read_lines",
    "read_transcript",
    "sidechain_files",
]
