"""Importing claude-trace logs (one request/response pair of the Messages API a line)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from claudetrace.formats.claude_trace import assemble, read_claude_trace
from claudetrace.formats.imports import detect, import_file
from claudetrace.indexer import open_settled_store
from claudetrace.store import Store

SID = "0b7c3c52-1d0e-4c4f-9d61-5c2a0e6b1f33"


def sse(*events: dict[str, Any]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def stream(msg_id: str, blocks: list[dict[str, Any]], stop: str, out: int) -> str:
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": "claude-opus-5-5",
                "content": [],
                "usage": {
                    "input_tokens": 100,
                    "cache_read_input_tokens": 50,
                    "cache_creation_input_tokens": 10,
                    "output_tokens": 1,
                },
            },
        }
    ]
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            events += [
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": {"type": "text", "text": ""},
                },
                {
                    "type": "content_block_delta",
                    "index": i,
                    "delta": {"type": "text_delta", "text": block["text"][:3]},
                },
                {
                    "type": "content_block_delta",
                    "index": i,
                    "delta": {"type": "text_delta", "text": block["text"][3:]},
                },
            ]
        else:
            raw = json.dumps(block["input"])
            events += [
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": {
                        "type": "tool_use",
                        "id": block["id"],
                        "name": block["name"],
                        "input": {},
                    },
                },
                {
                    "type": "content_block_delta",
                    "index": i,
                    "delta": {"type": "input_json_delta", "partial_json": raw[:5]},
                },
                {
                    "type": "content_block_delta",
                    "index": i,
                    "delta": {"type": "input_json_delta", "partial_json": raw[5:]},
                },
            ]
        events.append({"type": "content_block_stop", "index": i})
    events += [
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": out}},
        {"type": "message_stop"},
    ]
    return sse(*events)


def pair(
    t: float,
    messages: list[dict[str, Any]],
    response: dict[str, Any] | None,
    url: str = "https://api.anthropic.com/v1/messages?beta=true",
) -> dict[str, Any]:
    return {
        "request": {
            "timestamp": t,
            "method": "POST",
            "url": url,
            "headers": {
                "x-api-key": "sk-ant-api...abcd",
                "user-agent": "claude-cli/2.1.330 (external, cli)",
            },
            "body": {
                "model": "claude-opus-5-5",
                "messages": messages,
                "stream": True,
                "metadata": {"user_id": f"user_abc_account__session_{SID}"},
            },
        },
        "response": response,
        "logged_at": f"2026-11-24T10:00:{int(t) % 60:02d}.500Z",
    }


def ok(body_raw: str, t: float) -> dict[str, Any]:
    return {
        "timestamp": t,
        "status_code": 200,
        "headers": {"content-type": "text/event-stream"},
        "body_raw": body_raw,
    }


PROMPT = {
    "role": "user",
    "content": [
        {"type": "text", "text": "<system-reminder>\nToday is a day.\n</system-reminder>"},
        {"type": "text", "text": "List the files."},
    ],
}
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
RESULT = {
    "role": "user",
    "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"},
    ],
}


def log_lines() -> list[dict[str, Any]]:
    first = stream("msg_1", [{"type": "text", "text": "Let me look."}, TOOL_USE], "tool_use", 20)
    answer = {"role": "assistant", "content": [{"type": "text", "text": "Let me look."}, TOOL_USE]}
    base = 1795550400.0
    return [
        # Not a Messages call: left out.
        {
            **pair(base, [], None, url="https://api.anthropic.com/api/oauth/usage"),
            "request": {
                "timestamp": base,
                "method": "GET",
                "url": "https://api.anthropic.com/api/oauth/usage",
                "headers": {},
                "body": None,
            },
        },
        pair(
            base + 1,
            [PROMPT],
            {
                "timestamp": base + 1.1,
                "status_code": 529,
                "headers": {"content-type": "application/json"},
                "body": {"type": "error", "error": {"type": "overloaded_error"}},
            },
        ),
        pair(base + 2, [PROMPT], ok(first, base + 2.1)),  # the retry: no second prompt
        pair(
            base + 3,
            [PROMPT, answer, RESULT],
            ok(stream("msg_2", [{"type": "text", "text": "One file."}], "end_turn", 5), base + 3.1),
        ),
    ]


def write_log(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_assemble_a_streamed_message() -> None:
    text = stream("msg_9", [{"type": "text", "text": "Hello there"}, TOOL_USE], "tool_use", 42)
    events = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
    message = assemble(events)
    assert message is not None
    assert message["content"] == [{"type": "text", "text": "Hello there"}, TOOL_USE]
    assert message["stop_reason"] == "tool_use" and message["usage"]["output_tokens"] == 42
    assert message["usage"]["input_tokens"] == 100


def test_a_log_becomes_a_session_of_model_calls(tmp_path: Path, store: Store) -> None:
    path = write_log(tmp_path / "log-2026-11-24-10-00-00.jsonl", log_lines())
    assert detect(path) == "claude-trace"
    got = read_claude_trace(path)
    kinds = [(e.direction, e.type, e.subtype) for e in got.events]
    assert kinds == [
        ("in", "user", None),
        ("out", "system", "api_error"),
        ("out", "system", "init"),
        ("out", "assistant", None),
        ("out", "user", None),
        ("out", "assistant", None),
        ("out", "result", "success"),
    ]
    prompt = got.events[0].message or {}
    assert prompt["message"]["content"] == [{"type": "text", "text": "List the files."}]
    result = got.events[-1].message or {}
    assert result["usage"]["output_tokens"] == 25 and result["usage"]["input_tokens"] == 200
    assert got.info.cli_session_id == SID and got.info.source == "claude-trace"
    assert got.info.claude_code_version == "2.1.330"
    assert not got.cost_known

    done = import_file(store, path)
    rec = store.get(done.recording_id or "")
    assert (rec.turns, rec.tool_calls, rec.model_calls, rec.output_tokens) == (1, 1, 2, 25)
    assert rec.exit_code is None and rec.source == "claude-trace"
    assert import_file(store, path).action == "unchanged"
    # The 529 was retried and went through: not an error.
    assert (rec.status, rec.is_error, result["is_error"]) == ("ok", False, False)


def test_a_session_whose_last_call_failed_is_an_error(tmp_path: Path, store: Store) -> None:
    # The log ends on a failed call: the CLI may have given up or be retrying
    # (the log cannot say), so the turn has no result, and its error is counted.
    path = write_log(tmp_path / "log-2026-11-24-10-00-00.jsonl", log_lines()[:2])
    rec = store.get(import_file(store, path).recording_id or "")
    assert rec.is_error and rec.status != "ok"


# -- against the real CLI -----------------------------------------------------------------

COMPARED = ["permission_allow", "mcp_tool", "multi_turn", "subagent"]


@pytest.mark.slow
def test_logs_of_real_sessions_match_their_proxied_recordings(
    tmp_path: Path, fake_api: Any, real_claude: Path
) -> None:
    from tests.claude_trace_log import ClaudeTraceRecorder
    from tests.comparing import FIGURES, proxied_sessions, same_figures, tool_names
    from tests.record_fixtures import claudetrace

    logs = tmp_path / "logs"
    logs.mkdir()

    @contextmanager
    def logged(name: str) -> Iterator[dict[str, str]]:
        with ClaudeTraceRecorder(fake_api.url, logs / f"log-{name}.jsonl") as recorder:
            yield {"ANTHROPIC_BASE_URL": recorder.base_url}

    proxied_db, proxied = proxied_sessions(tmp_path, fake_api, real_claude, COMPARED, around=logged)
    imported_db = tmp_path / "imported.db"
    claudetrace("import", str(logs), "--db", str(imported_db))
    a, b = open_settled_store(str(proxied_db)), open_settled_store(str(imported_db))
    try:
        for name in COMPARED:
            want = a.get(proxied[name])
            got = b.resolve(want.cli_session_id)
            assert got.source == "claude-trace"
            same_figures(want, got, name, (*FIGURES, "claude_code_version"))
            assert tool_names(a, want.id) == tool_names(b, got.id), name
            # The log sees every API call; the CLI's stdout does not show a subagent's.
            assert got.model_calls >= want.model_calls
    finally:
        a.close()
        b.close()
