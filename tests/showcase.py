"""Four sessions the browser tests look at: finished, failed, running (awaiting approval)
and imported from a Claude Code transcript.

Each is made from a real-CLI fixture cassette, changed only where the test needs a
shape the fixtures lack (a Markdown answer, a result whose ``is_error`` is true
under ``subtype: success``); the imported one from a transcript written here with
a TodoWrite list, a subagent (Task), a compaction and a rewind.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from claudetrace.cassette import Cassette, read_cassette
from claudetrace.formats.imports import import_file
from claudetrace.model.events import Event
from claudetrace.recording import RecordingInfo
from claudetrace.store import Store

CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"

#: The finished session's answer: Markdown with a table, a list, code and hostile HTML.
ANSWER = (
    "**Done.** Here is what I found:\n\n"
    "| file | lines |\n|---|---|\n| app.py | 120 |\n| <b>x</b>.py | 7 |\n\n"
    "- first <script>document.title='pwned'</script>\n- second\n\n"
    "```python\nprint('<img src=x onerror=alert(1)>')\n```\n"
)


def _edit(event: Event, change: Any) -> Event:
    obj = json.loads(event.data)
    change(obj)
    return Event(event.seq, event.direction, event.t_ns, json.dumps(obj).encode())


def set_answer(obj: dict[str, Any]) -> None:
    if obj.get("type") == "result":
        obj["result"] = ANSWER  # the CLI's result repeats its turn's last answer
        return
    for block in obj["message"]["content"]:
        if block.get("type") == "text":
            block["text"] = ANSWER


def _fail_result(obj: dict[str, Any]) -> None:
    obj["is_error"] = True  # subtype stays "success": the CLI's is_error decides


def changed(name: str, kinds: str | tuple[str, ...], change: Any) -> Cassette:
    cassette = read_cassette(CASSETTES / f"{name}.ndjson")
    kinds = (kinds,) if isinstance(kinds, str) else kinds
    events = [
        _edit(e, change) if e.direction == "out" and e.fields.type in kinds else e
        for e in cassette.events
    ]
    return Cassette(dict(cassette.header), events)


#: The imported session's subagent answer, with letters whose case a regular
#: expression folds otherwise than a browser lowercases.
SUBAGENT_ANSWER = ("round_total is called from checkout.py only "
                   "(\u039f\u0394\u039f\u03a3, \u017ftop, \u0130stanbul, \u0131i).")
SESSION_ID = "5e55a0e0-0000-4000-8000-0000000000aa"


def _line(kind: str, uuid: str, at: int, **fields: Any) -> dict[str, Any]:
    return {
        "type": kind, "uuid": uuid, "parentUuid": None, "sessionId": SESSION_ID,
        "timestamp": f"2026-11-20T10:00:{at:02d}.000Z", "cwd": "/home/dev/shop",
        "version": "2.1.330", "isSidechain": False, "userType": "external", **fields,
    }


def transcript(folder: Path) -> Path:
    """A Claude Code transcript: a TodoWrite list, a Task subagent, a compaction, a
    rewind (the second of three prompts abandoned)."""
    todos = [
        {"content": "read the cart code", "status": "completed", "activeForm": "reading"},
        {"content": "fix the rounding", "status": "in_progress", "activeForm": "fixing"},
        {"content": "add a test", "status": "pending", "activeForm": "adding a test"},
    ]
    model = "claude-opus-5-5"
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 0,
             "cache_creation_input_tokens": 0}

    def assistant(uuid: str, at: int, msg_id: str, content: list[Any],
                  stop: str = "tool_use", **extra: Any) -> dict[str, Any]:
        return _line("assistant", uuid, at, message={
            "id": msg_id, "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "usage": usage}, **extra)

    def result(uuid: str, at: int, tool_id: str, text: str, **extra: Any) -> dict[str, Any]:
        return _line("user", uuid, at, message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tool_id, "content": text}]}, **extra)

    lines = [
        _line("user", "u1", 1, message={"role": "user", "content": "Fix the cart rounding."}),
        assistant("a1", 2, "msg_1", [{"type": "tool_use", "id": "toolu_todo", "name": "TodoWrite",
                                      "input": {"todos": todos}}]),
        result("r1", 3, "toolu_todo", "Todos have been modified successfully."),
        assistant("a2", 4, "msg_2", [{"type": "tool_use", "id": "toolu_task", "name": "Task",
                                      "input": {"description": "find callers",
                                                "prompt": "Find who calls round_total.",
                                                "subagent_type": "Explore"}}]),
        result("r2", 6, "toolu_task", SUBAGENT_ANSWER,
               toolUseResult={"agentId": "agent01", "status": "completed"}),
        _line("system", "s1", 7, subtype="compact_boundary", content="Conversation compacted",
              compactMetadata={"trigger": "manual", "preTokens": 48213}),
        _line("user", "c1", 8, isCompactSummary=True, message={
            "role": "user", "content": "This session is being continued: the cart rounding."}),
        _line("assistant", "a3", 9, message={
            "id": "msg_3", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": "Fixed: **round half up** in `cart.py`."}],
            "stop_reason": "end_turn", "usage": usage}),
        # A second prompt, then a rewind: the third goes on from the first's answer,
        # so the second and its answer are an abandoned branch.
        _line("user", "u2", 10, parentUuid="a3",
              message={"role": "user", "content": "Also round the tax."}),
        assistant("a4", 11, "msg_4", [{"type": "text", "text": "Tax rounded too."}],
                  "end_turn", parentUuid="u2"),
        _line("user", "u3", 12, parentUuid="a3",
              message={"role": "user", "content": "Leave the tax as it was."}),
        assistant("a5", 13, "msg_5", [{"type": "text", "text": "The tax is unchanged."}],
                  "end_turn", parentUuid="u3"),
    ]
    path = folder / f"{SESSION_ID}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def seed(store: Store, folder: Path) -> dict[str, str]:
    """Store the four sessions; returns their recording ids by kind."""
    ids = {
        "finished": store.import_cassette(changed("plain", ("assistant", "result"), set_answer),
                                          name="finished"),
        "failed": store.import_cassette(changed("permission_deny", "result", _fail_result),
                                        name="failed"),
    }
    allow = read_cassette(CASSETTES / "permission_allow.ndjson")
    upto = next(i for i, e in enumerate(allow.events)
                if e.fields.type == "control_request" and e.fields.subtype == "can_use_tool")
    info = RecordingInfo.start(["claude", "--output-format", "stream-json"], name="waiting")
    info.pid = os.getpid()  # a live pid on this host: the recording counts as running
    store.create_recording(info)
    store.write_batch(info.id, allow.events[: upto + 1],
                      {"last_seen_ns": time.time_ns() + 3_600_000_000_000})
    ids["running"] = info.id
    ids["imported"] = import_file(store, transcript(folder), name="imported").recording_id
    return ids
