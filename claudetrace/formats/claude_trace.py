"""claude-trace logs, read as recordings of model calls.

claude-trace (``@mariozechner/claude-trace``, in badlogic/lemmy) patches the
CLI's HTTP client and appends one JSON object per API call to
``.claude-trace/log-<time>.jsonl``: ``{"request": {"timestamp", "method", "url",
"headers", "body"}, "response": {"timestamp", "status_code", "headers", "body" |
"body_raw"} | null, "logged_at", "note"?}``, with timestamps in seconds, the
request body parsed, and a streamed response kept as its raw server-sent
events (``body_raw``).

Each ``POST …/v1/messages`` call becomes what a transcript would have said of
it, then goes through the transcript reader (:func:`.claude_code.entries_recording`):
the request's newest user message (a prompt, or tool results), the answer
assembled from its events (model, content, stop reason, final usage), an API
error as a ``system/api_error`` line.  A request sent again unchanged (a retry)
adds no second prompt.  The session id is the one Claude Code puts in the
request's ``metadata.user_id``, else the file's name.  What an HTTP log cannot
know stays unknown: the control plane, stderr, exit status, and the cost.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any, Final

from ..model.content import blocks
from .claude_code import Transcript, entries_recording
from .jsonl import JsonlFile

#: ``source`` of recordings imported from claude-trace logs.
SOURCE: Final = "claude-trace"
#: Claude Code's session id in ``metadata.user_id``: ``…_session_<id>`` (older CLIs)
#: or a JSON object with ``"session_id"``.
_SESSION = re.compile(r'session(?:_id"?\s*:\s*"|_)([0-9a-fA-F-]{36})')
#: Context the CLI adds to a prompt before sending it (not what the user typed).
_REMINDER = "<system-reminder>"


def is_claude_trace_line(obj: Any) -> bool:
    """Whether a parsed JSONL line looks like a claude-trace request/response pair."""
    return isinstance(obj, dict) and isinstance(obj.get("request"), dict) and "logged_at" in obj


def _iso(seconds: Any) -> str | None:
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        return None
    try:
        return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return None  # no time at all (1e300): a damaged one, as a missing one


def assemble(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The message a stream of Messages API events describes (None without ``message_start``)."""
    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial_json: dict[int, str] = {}
    for event in events:
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = dict(event["message"])
            message["content"] = list(message.get("content") or [])
        elif message is None:
            continue
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            blocks[int(event.get("index", len(blocks)))] = dict(event["content_block"])
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            index = int(event.get("index", 0))
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            delta = event["delta"]
            for key, field in (
                ("text_delta", "text"),
                ("thinking_delta", "thinking"),
                ("signature_delta", "signature"),
            ):
                if delta.get("type") == key:
                    block[field] = str(block.get(field, "")) + str(delta.get(field, ""))
            if delta.get("type") == "input_json_delta":
                partial_json[index] = partial_json.get(index, "") + str(
                    delta.get("partial_json", "")
                )
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict):
                message.update({k: v for k, v in delta.items() if v is not None})
            usage = event.get("usage")
            if isinstance(usage, dict):
                message["usage"] = {**(message.get("usage") or {}), **usage}
    if message is None:
        return None
    for index, text in partial_json.items():
        try:
            blocks[index]["input"] = json.loads(text) if text else {}
        except ValueError:
            blocks[index]["input"] = text
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def _sse(body_raw: str) -> list[dict[str, Any]]:
    events = []
    for line in body_raw.splitlines():
        if line.startswith("data:"):
            try:
                data = json.loads(line[5:].strip())
            except (ValueError, RecursionError):  # as the API's own client skips it
                continue
            if isinstance(data, dict):
                events.append(data)
    return events


_AGENT_TOOLS = frozenset({"Task", "Agent"})


def _newest_user(messages: list[Any]) -> tuple[int, dict[str, Any] | None]:
    """The newest user message and its index (this CLI may append a system message)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, dict) and message.get("role") == "user":
            return index, message
    return -1, None


def _answer(pair: dict[str, Any], body: dict[str, Any], when: str | None) -> dict[str, Any]:
    """The entry for a call's response: the assembled assistant message, or an API error."""
    response = pair.get("response")
    if not isinstance(response, dict):
        return {
            "type": "system",
            "subtype": "api_error",
            "timestamp": when,
            "error": pair.get("note") or "no response",
        }
    status = response.get("status_code")
    message = response.get("body")
    if isinstance(response.get("body_raw"), str):
        message = assemble(_sse(response["body_raw"]))
    if status != 200 or not isinstance(message, dict) or message.get("type") == "error":
        return {
            "type": "system",
            "subtype": "api_error",
            "timestamp": when,
            "status": status,
            "error": message,
        }
    message.setdefault("model", body.get("model"))
    return {"type": "assistant", "timestamp": when, "message": message}


def pair_entries(
    pairs: list[dict[str, Any]], session_id: str
) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """Transcript entries for claude-trace pairs: the session's, and each subagent's.

    The session's calls all start with its first message; a call that starts
    otherwise while an Agent/Task tool call is waiting for its result is that
    subagent's.  Other calls (a title, a quota check) are not the session's
    conversation and are left out.
    """
    main: list[dict[str, Any]] = []
    sides: dict[str, list[dict[str, Any]]] = {}
    first: str | None = None
    last_input: dict[str, Any] = {}
    waiting: list[str] = []  # agent tool use ids without their result yet, newest last
    results: dict[str, dict[str, Any]] = {}  # tool use id -> the main entry with its result
    for number, pair in enumerate(pairs):
        request = pair["request"]
        body = request.get("body")
        url = str(request.get("url", ""))
        if request.get("method") != "POST" or not url.split("?")[0].endswith("/v1/messages"):
            continue
        if not isinstance(body, dict) or not body.get("messages"):
            continue
        messages = body["messages"]
        opening = json.dumps(messages[0], sort_keys=True)
        first = opening if first is None else first
        if opening == first:
            thread, into, extra = "main", main, {}
        elif waiting:
            thread = waiting[-1]
            into = sides.setdefault(thread, [])
            extra = {"isSidechain": True, "agentId": f"call-{thread}"}
        else:
            continue
        base = {"sessionId": session_id, **extra, **_client_version(request)}
        sent = _iso(request.get("timestamp"))
        index, newest = _newest_user(messages)
        if newest is not None:
            key = (index, json.dumps(newest, sort_keys=True))
            if key != last_input.get(thread):  # not a retry of the same request
                entry = {
                    **base,
                    "type": "user",
                    "uuid": f"pair-{number}-in",
                    "timestamp": sent,
                    "message": _without_reminders(newest),
                }
                into.append(entry)
                if thread == "main":
                    for block in blocks(newest.get("content")):
                        if block.kind == "tool_result":
                            done_id = str(block.id)
                            results[done_id] = entry
                            if done_id in waiting:
                                waiting.remove(done_id)
                                entry["toolUseResult"] = {"agentId": f"call-{done_id}"}
            last_input[thread] = key
        answer = _answer(pair, body, _iso(_logged(pair)) or sent)
        into.append({**base, **answer, "uuid": f"pair-{number}-out"})
        if thread == "main" and answer["type"] == "assistant":
            for block in blocks(answer["message"].get("content")):
                if block.type == "tool_use" and block.name in _AGENT_TOOLS:
                    waiting.append(str(block.id))
    return main, list(sides.values())


_USER_AGENT = re.compile(r"claude-cli/([0-9][\w.+-]*)")


def _client_version(request: dict[str, Any]) -> dict[str, str]:
    """``{"version": …}`` from the CLI's ``User-Agent`` (``claude-cli/2.1.330 (…)``)."""
    headers = request.get("headers")
    agent = headers.get("user-agent") if isinstance(headers, dict) else None
    found = _USER_AGENT.match(agent) if isinstance(agent, str) else None
    return {"version": found.group(1)} if found else {}


def _without_reminders(message: dict[str, Any]) -> dict[str, Any]:
    """A user message without the context blocks the CLI prepends to a prompt."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    kept = [
        block.raw
        for block in blocks(content)
        if not (block.kind == "text" and block.text.lstrip().startswith(_REMINDER))
    ]
    return {**message, "content": kept or content}


def _logged(pair: dict[str, Any]) -> float | None:
    try:
        when = dt.datetime.fromisoformat(str(pair.get("logged_at")).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.timestamp()


def _session_id(pairs: list[dict[str, Any]], path: Path) -> str:
    for pair in pairs:
        headers = pair["request"].get("headers")
        given = headers.get("x-claude-code-session-id") if isinstance(headers, dict) else None
        if isinstance(given, str) and given:
            return given
        body = pair["request"].get("body")
        meta = body.get("metadata") if isinstance(body, dict) else None
        user = meta.get("user_id") if isinstance(meta, dict) else None
        if isinstance(user, str):
            found = _SESSION.search(user)
            if found:
                return found.group(1)
    return path.stem


def read_claude_trace(path: Path, *, recording_id: str | None = None) -> Transcript:
    """Read the claude-trace log ``path`` as a recording of its model calls."""
    reader = JsonlFile(path)  # a damaged line is skipped and counted, as in a transcript
    pairs = [p for _number, p in reader.objects() if is_claude_trace_line(p)]
    session_id = _session_id(pairs, path)
    main, sides = pair_entries(pairs, session_id)
    # No cost-state here: the subagents' calls count in the turns' usage, as in
    # the CLI's own per-model figures.
    got = entries_recording(
        main, sides, path, source=SOURCE, recording_id=recording_id, sidechain_usage=True
    )
    got.info.extra["cost_known"] = False
    got.damage, got.warnings = reader.damage, reader.damaged
    return got


__all__ = ["SOURCE", "assemble", "is_claude_trace_line", "pair_entries", "read_claude_trace"]
