"""Importing Claude Code transcripts: format detection, conversion, idempotence, --watch,
and the comparison with the proxied recording of the same real-CLI session."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace.cli import cli
from claudetrace.formats.claude_code import read_transcript
from claudetrace.formats.imports import ImportFormatError, detect, expand, import_file
from claudetrace.indexer import open_settled_store
from claudetrace.model import Usage, fold
from claudetrace.store import Store
from claudetrace.telemetry import build_spans

SID = "5d0f3c1e-8a52-4a55-9c3e-0c2f4b7a9e11"
CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"


def stamp(ms: int) -> str:
    return f"2026-11-24T10:00:{ms // 1000:02d}.{ms % 1000:03d}Z"


def usage(inp: int, out: int) -> dict[str, int]:
    return {
        "input_tokens": inp,
        "cache_creation_input_tokens": 10,
        "cache_read_input_tokens": 50,
        "output_tokens": out,
    }


def user(text: Any, ms: int, **extra: Any) -> dict[str, Any]:
    return {
        "parentUuid": None,
        "isSidechain": False,
        "type": "user",
        "message": {"role": "user", "content": text},
        "uuid": f"u-{ms}",
        "timestamp": stamp(ms),
        "permissionMode": "default",
        "cwd": "/home/dev/project",
        "sessionId": SID,
        "version": "2.1.330",
        **extra,
    }


def assistant(msg_id: str, block: dict[str, Any], ms: int, **extra: Any) -> dict[str, Any]:
    return {
        "parentUuid": None,
        "isSidechain": False,
        "type": "assistant",
        "message": {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-5-5",
            "content": [block],
            "stop_reason": "tool_use" if block["type"] == "tool_use" else "end_turn",
            "usage": usage(100, 25),
        },
        "uuid": f"a-{ms}",
        "timestamp": stamp(ms),
        "cwd": "/home/dev/project",
        "sessionId": SID,
        "version": "2.1.330",
        **extra,
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(tid: str, name: str, **inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": inp}


def tool_result(tid: str, content: str, ms: int, **extra: Any) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": tid, "content": content}
    return user([block], ms, **extra)


def session_lines() -> list[dict[str, Any]]:
    """Two turns: a tool call (one API message written as two lines), then a plain answer."""
    return [
        {"type": "queue-operation", "operation": "enqueue", "sessionId": SID, "content": "x"},
        user("List the files.", 0),
        {"type": "attachment", "attachment": {"type": "date"}, "sessionId": SID},
        assistant("msg_1", text("Let me look."), 100),
        assistant("msg_1", tool_use("toolu_1", "Bash", command="ls"), 110),
        tool_result("toolu_1", "a.txt\nb.txt", 200),
        assistant("msg_2", text("Two files."), 300),
        user("Thanks!", 1000),
        assistant("msg_3", text("You're welcome."), 1100),
        {
            "type": "cost-state",
            "sessionId": SID,
            "totalCostUSD": 0.0042,
            "modelUsage": {"claude-opus-5-5": {"inputTokens": 300, "costUSD": 0.0042}},
        },
    ]


def write(path: Path, lines: list[dict[str, Any]], tail: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + tail)
    return path


def test_detects_the_format_by_content(tmp_path: Path) -> None:
    transcript = write(tmp_path / "renamed.ndjson", session_lines())
    assert detect(transcript) == "transcript"
    assert detect(CASSETTES / "plain.ndjson") == "cassette"
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": "world"}\n')
    with pytest.raises(
        ImportFormatError, match="not a claudetrace cassette, a Claude Code transcript"
    ):
        detect(other)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ImportFormatError, match="empty file"):
        detect(empty)


def test_a_transcript_becomes_the_stream_the_cli_would_have_written(tmp_path: Path) -> None:
    path = write(tmp_path / f"{SID}.jsonl", session_lines())
    got = read_transcript(path)
    kinds = [(e.direction, e.type, e.subtype) for e in got.events]
    assert kinds == [
        ("in", "user", None),
        ("out", "system", "init"),
        ("out", "assistant", None),
        ("out", "assistant", None),
        ("out", "user", None),
        ("out", "assistant", None),
        ("out", "result", "success"),
        ("in", "user", None),
        ("out", "system", "init"),
        ("out", "assistant", None),
        ("out", "result", "success"),
    ]
    first = got.events[6].message or {}
    # msg_1 is two lines but one API message: its usage counts once.
    assert first["usage"]["input_tokens"] == 200 and first["num_turns"] == 2
    assert first["result"] == "Two files." and "total_cost_usd" not in first
    last = got.events[-1].message or {}
    assert last["total_cost_usd"] == 0.0042  # the cost-state line came after turn 2
    assert [e.t_ns for e in got.events][:3] == [0, 100_000_000, 100_000_000]
    assert got.finished and got.cost_known
    assert got.info.source == "transcript" and got.info.cli_session_id == SID
    assert got.info.exit_code is None and got.info.argv == []


def test_an_interrupted_turn_and_a_turn_still_running(tmp_path: Path) -> None:
    lines = [
        user("Write a long story.", 0),
        user([text("[Request interrupted by user]")], 500),
        user("Shorter, please.", 900),
        assistant("msg_1", tool_use("toolu_1", "Bash", command="sleep 100"), 1000),
    ]
    got = read_transcript(write(tmp_path / f"{SID}.jsonl", lines))
    results = [e.message for e in got.events if e.type == "result"]
    assert len(results) == 1 and results[0] is not None
    assert results[0]["subtype"] == "error_during_execution" and results[0]["is_error"]
    assert not got.finished and got.info.ended_ns is None  # the tool is still running


def imported_status(folder: Path, db_path: Path) -> tuple[str, bool, str | None]:
    """``import FOLDER``, then the session's stored status, is_error and reason."""
    assert CliRunner().invoke(cli, ["import", str(folder), "--db", str(db_path)]).exit_code == 0
    store = open_settled_store(str(db_path))
    try:
        rec = store.resolve(SID)
        return rec.status, rec.is_error, rec.status_reason
    finally:
        store.close()


def test_a_transcript_whose_last_prompt_got_no_answer_says_so_in_its_own_words(
    tmp_path: Path, db_path: Path
) -> None:
    # It read "the recording stopped before the CLI exited": no recording, no CLI exit.
    write(tmp_path / "p" / f"{SID}.jsonl", session_lines()[:2])  # a prompt, no answer
    reason = "the transcript ends before an answer to the last prompt"
    assert imported_status(tmp_path / "p", db_path) == ("incomplete", False, reason)
    shown = CliRunner().invoke(cli, ["show", SID, "--db", str(db_path)])
    assert reason in shown.stdout and "CLI exited" not in shown.stdout
    store = open_settled_store(str(db_path))
    try:
        rec = store.resolve(SID)
        session = fold(store.iter_events(rec.id))
        assert session.outcome_of(rec.info()).reason == reason
    finally:
        store.close()


@pytest.mark.parametrize("said", [
    "[Request interrupted by user for tool use]", "[Request interrupted by user]",
])
def test_a_tool_call_the_user_interrupted_makes_the_session_interrupted(
    tmp_path: Path, db_path: Path, said: str
) -> None:
    # What Claude Code writes when the user stops a Bash call: the tool's
    # result is an error, then the interrupt; the session is not an error.
    failed = tool_result("toolu_1", "Interrupted by user", 600, toolUseResult="x")
    failed["message"]["content"][0]["is_error"] = True
    lines = [
        user("Run the tests.", 0),
        assistant("msg_1", tool_use("toolu_1", "Bash", command="pytest"), 100),
        failed,
        user([text(said)], 700),
    ]
    write(tmp_path / "p" / f"{SID}.jsonl", lines)
    assert imported_status(tmp_path / "p", db_path) == (
        "interrupted", False, "turn 1 interrupted; the session went on")
    errors = CliRunner().invoke(cli, ["sessions", "--errors", "--json", "--db", str(db_path)])
    assert errors.exit_code == 0 and SID not in errors.output


def test_a_turn_that_ended_on_an_api_error_is_an_error(tmp_path: Path, db_path: Path) -> None:
    # Claude Code writes the API error it gave up on as a synthetic assistant
    # message marked isApiErrorMessage; a retried one that went through is not.
    failing = assistant("msg_e", text("API Error: 529 overloaded"), 100, isApiErrorMessage=True)
    failing["message"]["model"] = "<synthetic>"
    lines = [user("Hello?", 0), failing]
    got = read_transcript(write(tmp_path / "a" / f"{SID}.jsonl", lines))
    result = next(e.message for e in got.events if e.type == "result") or {}
    assert result["subtype"] == "success" and result["is_error"] is True
    assert imported_status(tmp_path / "a", db_path) == (
        "error", True, "turn 1 ended with an API error (api_error)")
    retried = [user("Hello?", 0), failing, assistant("msg_2", text("Hi."), 900)]
    ok = read_transcript(write(tmp_path / "b" / f"{SID}.jsonl", retried))
    assert not fold(ok.events).is_error


def test_a_file_imported_by_an_older_reading_is_read_again_once(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from claudetrace.formats import layout

    path = write(tmp_path / f"{SID}.jsonl", session_lines())
    monkeypatch.setattr(layout, "READING", b"older")
    first = import_file(store, path)
    monkeypatch.undo()
    again = import_file(store, path)
    assert (first.action, again.action) == ("imported", "updated")
    assert again.recording_id == first.recording_id
    assert import_file(store, path).action == "unchanged"


def test_a_partial_last_line_waits_and_a_bad_line_is_skipped_and_named(tmp_path: Path) -> None:
    path = write(tmp_path / f"{SID}.jsonl", session_lines(), tail='{"type": "user", "mess')
    assert len(read_transcript(path).events) == 11
    bad = write(tmp_path / "bad" / f"{SID}.jsonl", session_lines()[:3])
    with bad.open("a") as out:
        out.write("{not json\n")
    with bad.open("a") as out:
        out.write(json.dumps(session_lines()[3]) + "\n")
    # A damaged line is skipped and named; the lines after it are read.
    got = read_transcript(bad)
    assert got.damage == 1 and got.warnings == [f"{SID}.jsonl:4: not a JSON object"]
    assert [e.type for e in got.events] == ["user", "system", "assistant", "result"]


@pytest.mark.parametrize("when", ["9999-12-31T23:59:59Z", "1969-07-20T20:17:40Z"])
def test_a_timestamp_the_store_cannot_keep_is_a_damaged_line(
    tmp_path: Path, db_path: Path, when: str
) -> None:
    lines = session_lines()
    lines[6]["timestamp"] = when  # msg_2's answer: past 2262, or before 1970
    write(tmp_path / "projects" / "-home-dev-a" / f"{SID}.jsonl", lines)
    other = "6e1f4d2f-9b63-4b66-8d4f-1d3f5c8b0f22"
    good = [{**line, "sessionId": other, "uuid": f"b-{n}"}
            for n, line in enumerate(session_lines())]
    write(tmp_path / "projects" / "-home-dev-b" / f"{other}.jsonl", good)
    done = CliRunner().invoke(cli, ["import", str(tmp_path / "projects"), "--db", str(db_path)])
    # Both sessions are kept; the line is skipped and named, the run says so.
    assert done.exit_code == 1, done.output
    assert "Traceback" not in done.output
    assert "import: 2 imported" in done.stderr and "; 1 damaged line skipped" in done.stderr
    got = read_transcript(tmp_path / "projects" / "-home-dev-a" / f"{SID}.jsonl")
    assert got.warnings == [f"{SID}.jsonl:7: timestamp {when} out of range (1970 to 2262)"]


def test_a_fifo_or_a_device_is_skipped_not_read(tmp_path: Path, db_path: Path) -> None:
    write(tmp_path / "projects" / "-home-dev-a" / f"{SID}.jsonl", session_lines())
    odd = tmp_path / "projects" / "-home-dev-b"
    odd.mkdir()
    os.mkfifo(odd / "x.jsonl")  # opened to read, it waits for a writer forever
    (odd / "z.jsonl").symlink_to("/dev/zero")  # read, it never ends
    runner = CliRunner()
    done = runner.invoke(cli, ["import", str(tmp_path / "projects"), "--db", str(db_path)])
    assert done.exit_code == 1, done.output
    assert "x.jsonl: skipped: not a regular file (a FIFO)" in done.stderr
    assert "z.jsonl: skipped: not a regular file (a character device)" in done.stderr
    assert "import: 1 imported, 0 updated, 0 unchanged, 2 skipped" in done.stderr
    named = runner.invoke(cli, ["import", str(odd / "x.jsonl"), "--db", str(db_path)])
    assert named.exit_code == 1 and named.stderr.endswith("not a regular file (a FIFO)\n")


def test_an_unreadable_folder_is_named_and_skipped(
    tmp_path: Path, db_path: Path, obeys_chmod: list[str]
) -> None:
    # It was left out without a word: "1 imported, 0 skipped", exit 0.
    projects = tmp_path / "p"
    write(projects / "-a" / f"{SID}.jsonl", session_lines())
    other = "11111111-2222-3333-4444-555555555555"
    write(projects / "-b" / f"{other}.jsonl", [{**line, "sessionId": other}
                                               for line in session_lines()])
    subagents = projects / "-a" / SID / "subagents"
    write(subagents / "agent-x.jsonl", [])
    (projects / "-b").chmod(0)
    subagents.chmod(0)
    def run(named: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*obeys_chmod, sys.executable, "-m", "claudetrace", "import", str(named),
             "--db", str(db_path)], capture_output=True, text=True, timeout=120)

    try:
        done = run(projects)
        assert done.returncode == 1, done.stderr
        assert f"{projects / '-b'}: skipped: cannot list this folder's files" in done.stderr
        assert f"{subagents}: skipped: cannot list this folder's files" in done.stderr
        assert "import: 1 imported, 0 updated, 0 unchanged, 2 skipped" in done.stderr
        # A session named by its file: imported still, its unreadable part named.
        named = run(projects / "-a" / f"{SID}.jsonl")
        assert named.returncode == 1, named.stderr
        assert f"{subagents}: skipped: cannot list" in named.stderr
        assert "1 unchanged, 1 skipped" in named.stderr and "Traceback" not in named.stderr
    finally:
        (projects / "-b").chmod(0o755)
        subagents.chmod(0o755)


def test_a_path_in_an_unreadable_folder_is_one_line_and_watch_goes_on(
    tmp_path: Path, db_path: Path, obeys_chmod: list[str]
) -> None:
    # Path.is_dir() raised PermissionError: a traceback, and --watch died of it.
    folder = tmp_path / "p" / "-b"
    inside = write(folder / f"{SID}.jsonl", session_lines())
    folder.chmod(0)
    cmd = [*obeys_chmod, sys.executable, "-m", "claudetrace", "import", "--db", str(db_path)]
    try:
        done = subprocess.run([*cmd, str(inside)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 1
        assert done.stderr == (f"claudetrace: cannot read cassette or transcript {inside}: "
                               "Permission denied\n")
        with subprocess.Popen([*cmd, "--watch", "--interval", "0.1", str(inside)],
                              stderr=subprocess.PIPE) as proc:
            err = Lines(proc.stderr)
            try:
                assert err.next(proc) == "import: 0 imported, 0 updated, 0 unchanged"
                assert "watching" in err.next(proc)
                assert "Permission denied" in err.next(proc)
                time.sleep(1)  # ten more looks: said once, and still watching
                assert proc.poll() is None
            finally:
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=60)
        rest = err.rest()
        assert rest.count("Permission denied") == 1 and "Traceback" not in rest, rest
    finally:
        folder.chmod(0o755)


def test_a_symlinked_project_folder_is_imported_once_and_a_loop_adds_nothing(
    tmp_path: Path, db_path: Path
) -> None:
    # projects/-p2 -> elsewhere/-p2 was skipped silently: not imported, not counted.
    projects = tmp_path / "projects"
    write(tmp_path / "elsewhere" / "-p2" / f"{SID}.jsonl", session_lines())
    projects.mkdir()
    (projects / "-p2").symlink_to(tmp_path / "elsewhere" / "-p2")
    (projects / "-p3").symlink_to(tmp_path / "elsewhere" / "-p2")  # a second way in
    (tmp_path / "elsewhere" / "-p2" / "loop").symlink_to(projects)  # back up: a loop
    done = CliRunner().invoke(cli, ["import", str(projects), "--db", str(db_path)])
    assert done.exit_code == 0, done.output
    assert done.stderr.splitlines() == [
        f"{projects}/-p2/{SID}.jsonl: imported session {SID}",
        "import: 1 imported, 0 updated, 0 unchanged",
    ]


@pytest.mark.parametrize("linked", [False, True], ids=["filed", "in-a-linked-workflow"])
def test_subagent_side_chains_nest_under_the_tool_call(tmp_path: Path, linked: bool) -> None:
    main = [
        user("Ask the counter.", 0),
        assistant("msg_1", tool_use("toolu_a", "Agent", prompt="Count", subagent_type="c"), 100),
        tool_result("toolu_a", "3 words", 400, toolUseResult={"agentId": "a1b2"}),
        assistant("msg_3", text("It says 3."), 500),
    ]
    path = write(tmp_path / f"{SID}.jsonl", main)
    side = [
        {**user("Count", 150), "isSidechain": True, "agentId": "a1b2"},
        {**assistant("msg_2", text("3 words"), 300), "isSidechain": True, "agentId": "a1b2"},
    ]
    if linked:
        # <session>/subagents/workflows/w1 -> elsewhere/w1 (and a second way in):
        # rglob did not follow the link, and the subagent's lines were left out.
        write(tmp_path / "elsewhere" / "w1" / "agent-a1b2.jsonl", side)
        workflows = tmp_path / SID / "subagents" / "workflows"
        workflows.mkdir(parents=True)
        (workflows / "w1").symlink_to(tmp_path / "elsewhere" / "w1")
        (workflows / "w2").symlink_to(tmp_path / "elsewhere" / "w1")
    else:
        write(tmp_path / SID / "subagents" / "agent-a1b2.jsonl", side)
    got = read_transcript(path)
    nested = [
        (e.type, e.fields.parent_tool_use_id) for e in got.events if e.fields.parent_tool_use_id
    ]
    assert nested == [("user", "toolu_a"), ("assistant", "toolu_a")]
    assert [e.t_ns for e in got.events] == sorted(e.t_ns for e in got.events)
    spans = build_spans(got.info, got.events)
    assert any(s.name == "invoke_agent c" for s in spans)


def test_a_subagent_folder_without_its_main_transcript_keeps_the_working_folder(
    tmp_path: Path, store: Store
) -> None:
    # <session>/subagents/agent-*.jsonl alone (the main file deleted or not copied):
    # the side chain's lines say where the session ran and which CLI wrote them.
    side = [
        {**user("Count", 150, cwd="/home/dev/lone", version="2.1.12"), "isSidechain": True,
         "agentId": "a1b2"},
        {**assistant("msg_2", text("3 words"), 300, cwd="/home/dev/lone", version="2.1.12"),
         "isSidechain": True, "agentId": "a1b2"},
    ]
    path = write(tmp_path / SID / "subagents" / "agent-a1b2.jsonl", side)
    done = import_file(store, path)
    rec = store.get(done.recording_id or "")
    assert (rec.cwd, rec.claude_code_version) == ("/home/dev/lone", "2.1.12")


def test_import_is_idempotent_and_follows_a_growing_transcript(
    tmp_path: Path, store: Store
) -> None:
    lines = session_lines()
    path = write(tmp_path / "projects" / "-home-dev-project" / f"{SID}.jsonl", lines[:7])
    first = import_file(store, path)
    assert first.action == "imported" and first.kind == "transcript"
    rec = store.get(first.recording_id or "")
    assert (rec.turns, rec.tool_calls, rec.source, rec.exit_code) == (1, 1, "transcript", None)
    again = import_file(store, path)
    assert again.action == "unchanged" and again.recording_id == first.recording_id
    write(path, lines)  # the session went on
    grown = import_file(store, path)
    assert grown.action == "updated" and grown.recording_id == first.recording_id
    rec = store.get(first.recording_id or "")
    assert rec.turns == 2 and rec.cost_usd == pytest.approx(0.0042)
    assert store.count_recordings() == 1
    assert store.resolve(SID).id == first.recording_id


@pytest.mark.parametrize("cut", [8, 4])  # a turn under way; a turn that looked finished
def test_a_grown_transcript_keeps_its_events_and_an_update_cut_short_changes_nothing(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch, cut: int
) -> None:
    lines = session_lines()
    path = write(tmp_path / "projects" / "-home-dev-project" / f"{SID}.jsonl", lines[:cut])
    rid = import_file(store, path).recording_id or ""
    before = [(e.seq, e.data) for e in store.iter_events(rid)]
    summary = (store.get(rid).event_count, store.get(rid).output_tokens)
    write(path, lines)

    def interrupted(*_args: Any) -> None:
        raise KeyboardInterrupt  # Ctrl-C to `import --watch` while it writes

    with monkeypatch.context() as patched:
        patched.setattr(Store, "_insert_rows", interrupted)
        with pytest.raises(KeyboardInterrupt):
            import_file(store, path)
    # The recording as it was: not deleted, not half written.
    assert [(e.seq, e.data) for e in store.iter_events(rid)] == before
    assert (store.get(rid).event_count, store.get(rid).output_tokens) == summary
    grown = import_file(store, path)
    assert grown.action == "updated" and grown.recording_id == rid
    assert [e.data for e in store.iter_events(rid)] == events_of(path)
    if cut == 8:  # what was stored began the grown transcript: it stayed
        assert [(e.seq, e.data) for e in store.iter_events(rid)][: len(before)] == before


def test_import_command_on_folders_and_files(tmp_path: Path, db_path: Path) -> None:
    projects = tmp_path / "projects"
    write(projects / "-home-dev-a" / f"{SID}.jsonl", session_lines())
    write(projects / "-home-dev-a" / SID / "subagents" / "agent-x.jsonl", [])
    runner = CliRunner()
    db = ["--db", str(db_path)]
    done = runner.invoke(cli, ["import", str(projects), str(CASSETTES / "plain.ndjson"), *db])
    assert done.exit_code == 0, done.output
    ids = done.stdout.split()
    assert len(ids) == 2
    assert f"imported session {SID}" in done.stderr
    again = runner.invoke(cli, ["import", str(projects), *db])
    assert again.exit_code == 0 and again.stdout == "" and "unchanged" in again.stderr
    shown = runner.invoke(cli, ["show", SID, *db])
    assert shown.exit_code == 0, shown.output
    assert "exit  unknown" in shown.stdout and "Claude Code transcript" in shown.stdout
    assert "cost  $0.004200" in shown.stdout
    assert "You're welcome." in shown.stdout
    listed = json.loads(runner.invoke(cli, ["sessions", "--json", *db]).stdout)
    assert {r["source"] for r in listed} == {"transcript", "import"}
    # The cost-state at the end covers both turns (its running total): usage
    # shares it among all three calls, it does not price the first turn's again.
    report = json.loads(runner.invoke(cli, ["usage", "session", "--json", *db]).stdout)
    (entry,) = [e for e in report["sessions"] if e["sessionId"] == SID]
    assert (entry["totalCost"], entry["costSource"], entry["estimatedCost"]) == (0.0042, "cli", 0)
    (listed_entry,) = [r for r in listed if r["source"] == "transcript"]
    assert (listed_entry["cost_usd"], listed_entry["cost_source"]) == (0.0042, "cli")
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    failed = runner.invoke(cli, ["import", str(bad), *db])
    assert failed.exit_code != 0
    assert (
        "not a claudetrace cassette, a Claude Code transcript or a claude-trace log"
        in failed.stderr
    )
    missing = runner.invoke(cli, ["import", str(tmp_path / "nope"), *db])
    assert missing.exit_code != 0 and "no such file or folder" in missing.stderr
    helped = runner.invoke(cli, ["import", "--help"])
    assert "~/.claude/projects" in helped.stdout


def test_expand_leaves_subagent_files_to_their_session(tmp_path: Path) -> None:
    write(tmp_path / "p" / f"{SID}.jsonl", session_lines())
    write(tmp_path / "p" / SID / "subagents" / "agent-x.jsonl", [])
    assert [p.name for p in expand([tmp_path])] == [f"{SID}.jsonl"]


def test_watch_imports_new_and_growing_sessions(tmp_path: Path, db_path: Path) -> None:
    projects = tmp_path / "projects"
    projects.mkdir()
    lines = session_lines()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [
        sys.executable,
        "-m",
        "claudetrace",
        "import",
        "--watch",
        "--interval",
        "0.2",
        "--db",
        str(db_path),
        str(projects),
    ]
    path = projects / "-home-dev-a" / f"{SID}.jsonl"
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as proc:
        out, err = Lines(proc.stdout), Lines(proc.stderr)
        try:
            assert err.next(proc) == "import: 0 imported, 0 updated, 0 unchanged"
            assert "watching" in err.next(proc)
            # Written as the CLI writes it, a line at a time: the watcher may look
            # at any moment, and imports what it finds (each report follows a commit).
            append(path, lines[:7])
            first = imported_until(proc, out, db_path, events_of(path))
            append(path, lines[7:])
            second = imported_until(proc, out, db_path, events_of(path))
            assert first == second  # the same recording, updated
        finally:
            proc.send_signal(signal.SIGINT)  # Ctrl-C (a run whose SIGINT is ignored fails here)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise
    assert proc.returncode == 0, err.rest()
    assert "updated session" in err.rest()
    check = open_settled_store(str(db_path))
    try:
        assert check.get(first).turns == 2
    finally:
        check.close()


def append(path: Path, lines: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        for line in lines:
            handle.write(json.dumps(line) + "\n")
            handle.flush()


def events_of(path: Path) -> list[bytes]:
    return [e.data for e in read_transcript(path).events]


def imported_until(proc: subprocess.Popen[bytes], out: Lines, db_path: Path,
                   events: list[bytes]) -> str:
    """The recording the watcher reports, once one of its reports is of ``events``."""
    while True:
        rid = out.next(proc)
        store = open_settled_store(str(db_path))
        try:
            if [e.data for e in store.iter_events(rid)] == events:
                return rid
        finally:
            store.close()


class Lines:
    """The lines a child writes on a pipe, read by a thread (a select() on a
    buffered pipe misses lines already in its buffer)."""

    def __init__(self, stream: Any) -> None:
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._seen: list[str] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: Any) -> None:
        for raw in stream:
            self._queue.put(raw.decode().rstrip("\n"))
        self._queue.put(None)

    def next(self, proc: subprocess.Popen[bytes], timeout: float = 120) -> str:
        """The next line (the bound is only for a watcher that hangs or dies)."""
        try:
            line = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"nothing printed in {timeout} s") from None
        assert line is not None, f"the watcher stopped ({proc.poll()}): {self.rest()}"
        self._seen.append(line)
        return line

    def rest(self) -> str:
        """Every line printed so far (all of them once the child has exited)."""
        while True:
            try:
                line = self._queue.get(timeout=5)
            except queue.Empty:
                break
            if line is None:
                break
            self._seen.append(line)
        return "\n".join(self._seen)


# -- the real CLI -------------------------------------------------------------------------

COMPARED = ["plain", "permission_allow", "hooks", "mcp_tool", "subagent", "multi_turn"]


@pytest.mark.slow
def test_transcripts_of_the_real_cli_match_its_proxied_recordings(
    tmp_path: Path, fake_api: Any, real_claude: Path
) -> None:
    from tests.comparing import FIGURES, proxied_sessions, same_figures, tool_names

    proxied_db, proxied = proxied_sessions(tmp_path, fake_api, real_claude, COMPARED)
    imported_db = tmp_path / "imported.db"
    runner = CliRunner()
    for name in COMPARED:
        projects = tmp_path / f"home-{name}" / ".claude" / "projects"
        done = runner.invoke(cli, ["import", str(projects), "--db", str(imported_db)])
        assert done.exit_code == 0, done.output
    a, b = open_settled_store(str(proxied_db)), open_settled_store(str(imported_db))
    try:
        for name in COMPARED:
            want = a.get(proxied[name])
            got = b.resolve(want.cli_session_id)
            assert got.source == "transcript"
            more = ("claude_code_version", "permission_mode", "is_error")
            same_figures(want, got, name, (*FIGURES, *more))
            assert got.cost_usd == pytest.approx(want.cost_usd), name
            assert tool_names(a, want.id) == tool_names(b, got.id), name
            assert got.exit_code is None and got.status == "ok"
            spans = build_spans(got.info(), list(b.iter_events(got.id)))
            assert sum(s.name.startswith("turn ") for s in spans) == want.turns
    finally:
        a.close()
        b.close()


def _cost_state(total: float, turns: int) -> dict[str, Any]:
    """The running totals after ``turns`` turns of one message each (``usage(100, 25)``)."""
    return {
        "type": "cost-state", "sessionId": SID, "totalCostUSD": total,
        "modelUsage": {"claude-opus-5-5": {
            "inputTokens": 100 * turns, "outputTokens": 25 * turns,
            "cacheReadInputTokens": 50 * turns, "cacheCreationInputTokens": 10 * turns,
            "costUSD": total, "contextWindow": 200000, "canonicalModel": "claude-opus-5-5",
        }},
    }


def test_each_result_says_what_its_turn_added_to_the_running_totals(tmp_path: Path) -> None:
    lines = [
        user("one", 0), assistant("msg_1", text("a"), 100), _cost_state(0.001, 1),
        user("two", 1000), assistant("msg_2", text("b"), 1100), _cost_state(0.002, 2),
        # No cost-state after turn 3: its result cannot know the totals.
        user("three", 2000), assistant("msg_3", text("c"), 2100),
        user("four", 3000), assistant("msg_4", text("d"), 3100), _cost_state(0.004, 4),
        user("five", 4000), assistant("msg_5", text("e"), 4100), _cost_state(0.005, 5),
        user("six", 5000), assistant("msg_6", text("f"), 5100), _cost_state(0.006, 6),
    ]
    got = read_transcript(write(tmp_path / "costs.jsonl", lines))
    results = [e.message or {} for e in got.events if e.type == "result"]
    since = [r.get("model_usage_since_last_result") for r in results]
    # As the CLI writes it: the growth of the running counts, the constants kept.
    assert since[1] == {"claude-opus-5-5": {
        "inputTokens": 100, "outputTokens": 25, "cacheReadInputTokens": 50,
        "cacheCreationInputTokens": 10, "costUSD": 0.001, "contextWindow": 200000,
        "canonicalModel": "claude-opus-5-5"}}
    assert since[0] is not None and since[0]["claude-opus-5-5"]["inputTokens"] == 100
    # Turn 3's cost is unknown: no running totals (stale); its usage is the
    # transcript's own count of its messages, without a cost.  Turn 4's result
    # has the totals but not its growth since turn 3's (not known either).
    assert "modelUsage" not in results[2] and "total_cost_usd" not in results[2]
    assert since[2] == {"claude-opus-5-5": {
        "inputTokens": 100, "cacheCreationInputTokens": 10, "cacheReadInputTokens": 50,
        "outputTokens": 25}}
    assert since[3] is None
    assert results[3]["total_cost_usd"] == 0.004
    # Turn 4's result carried the totals again: the turns after it say their growth.
    assert since[4] == since[5] == since[1]
    # So the session model adds up to the CLI's totals.
    session = fold(got.events)
    assert session.usage_by_model["claude-opus-5-5"] == Usage(600, 150, 300, 60)
    assert session.cost_usd == pytest.approx(0.006)


def test_ids_longer_than_their_columns_stay_apart(tmp_path: Path, db_path: Path) -> None:
    """A session id of 200 characters makes message ids past the 128 a call id's
    column holds: cut plain, two calls were one row and the import failed on it
    ("UNIQUE constraint failed: usage_calls…").  Each keeps a digest of the whole."""
    import datetime as dt

    from claudetrace.testing.transcripts import Call, Transcript, transcript_lines

    at = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    t = Transcript(session_id="s" * 200, project="-home-dev-p", calls=[
        Call("claude-sonnet-4-5", at, input=10, output=5),
        Call("claude-sonnet-4-5", at + dt.timedelta(seconds=5), input=20, output=7)])
    path = tmp_path / "projects" / t.project / "long.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n"
                            for line in transcript_lines(t)))
    for _ in range(2):  # the same cut again: unchanged
        done = CliRunner().invoke(cli, ["import", str(path.parent.parent), "--db", str(db_path)])
        assert done.exit_code == 0, done.output
    report = CliRunner().invoke(cli, ["usage", "session", "--json", "--db", str(db_path)])
    [session] = json.loads(report.stdout)["sessions"]
    assert (session["inputTokens"], session["outputTokens"]) == (30, 12)
    # Another session holding the same messages (a copy, a resume) counts none of
    # them again: the ids it asks about are cut as the stored ones are.
    copy = path.with_name("copy.jsonl")
    copy.write_text(path.read_text().replace('"sessionId":"' + "s" * 200 + '"',
                                             '"sessionId":"copy-of-long"'))
    done = CliRunner().invoke(cli, ["import", str(path.parent.parent), "--db", str(db_path)])
    assert done.exit_code == 0, done.output
    report = CliRunner().invoke(cli, ["usage", "session", "--json", "--db", str(db_path)])
    totals = json.loads(report.stdout)["totals"]
    assert (totals["inputTokens"], totals["outputTokens"]) == (30, 12)
