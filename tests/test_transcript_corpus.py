"""Claude Code transcripts as found in the wild (``fixtures/transcripts``): every layout
the CLI has written, damaged files, files that are not transcripts; the figures held to
an independent count of the raw lines."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace.cli import cli
from claudetrace.formats import jsonl
from claudetrace.formats.claude_code import read_transcript
from claudetrace.formats.imports import Planner, Watcher, import_file, import_unit
from claudetrace.indexer import open_settled_store
from claudetrace.store import Store

CORPUS = Path(__file__).parent / "fixtures" / "transcripts" / "projects"
CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"
SHOP = "7c1e2a90-3b4d-4e5f-8a6b-1c2d3e4f5a60"  # 2.1.x: subagents/, workflows/, every line kind
OLD = "0a1b2c3d-1111-4222-8333-944455566677"  # 1.0.x: isSidechain lines in the main file
MID = "f0e1d2c3-2222-4333-8444-a55566677788"  # 2.0.x: a top-level agent-*.jsonl
RESUMED = "11112222-3333-4444-8555-666677778888"  # two files, one sessionId
DAMAGED = "deadbeef-4444-4555-8666-777788889999"
LONG = "long-" + "x" * 70
SESSIONS = (SHOP, OLD, MID, RESUMED, DAMAGED, LONG)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A copy of the corpus (tests change files in it)."""
    return Path(shutil.copytree(CORPUS, tmp_path / "projects"))


def independent_count(root: Path) -> dict[str, dict[str, dict[str, int]]]:
    """Per session id, per model, the tokens of each API message id, its last figure:
    how ccusage counts, from the raw lines (nothing of claudetrace's)."""
    last: dict[str, dict[str, tuple[str, dict[str, int]]]] = defaultdict(dict)
    for path in sorted(root.rglob("*.jsonl")):
        for raw in path.read_bytes().split(b"\n"):
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            msg = line.get("message") if isinstance(line, dict) else None
            if line.get("type") != "assistant" or not isinstance(msg, dict):
                continue
            if msg.get("model") == "<synthetic>" or "usage" not in msg:
                continue
            last[line["sessionId"]][msg["id"]] = (msg["model"], msg["usage"])
    out: dict[str, dict[str, dict[str, int]]] = {}
    for sid, calls in last.items():
        per: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for model, usage in calls.values():
            per[model]["input"] += usage["input_tokens"]
            per[model]["output"] += usage["output_tokens"]
            per[model]["cache_read"] += usage["cache_read_input_tokens"]
            per[model]["cache_creation"] += usage["cache_creation_input_tokens"]
        out[sid] = {m: dict(v) for m, v in per.items()}
    return out


def figures(rec: Any) -> dict[str, dict[str, int]]:
    kinds = ("input", "output", "cache_read", "cache_creation")
    return {m: {k: f[k] for k in kinds} for m, f in (rec.models or {}).items()
            if any(f[k] for k in kinds)}


def test_a_folder_imports_every_session_and_skips_what_is_not_one(
    corpus: Path, db_path: Path
) -> None:
    runner = CliRunner()
    db = ["--db", str(db_path)]
    done = runner.invoke(cli, ["import", str(corpus), *db])
    assert done.exit_code == 1, done.output  # something was skipped
    assert len(done.stdout.split()) == len(SESSIONS)
    err = done.stderr.splitlines()
    assert any(line.startswith(f"{corpus}/-home-dev-dmg/notes.jsonl: skipped: ")
               and "a JSON log with keys level, msg, ts" in line for line in err)
    assert any("journal.jsonl: skipped: " in line for line in err)
    # The resumed session's second file is said to be part of it, and counted.
    assert f"{corpus}/-home-dev-res/c0ffee00-3333-4444-8555-666677778888.jsonl: part of " \
        f"session {RESUMED}, with {corpus}/-home-dev-res/{RESUMED}.jsonl " in done.stderr
    assert err[-1] == ("import: 6 imported, 0 updated, 0 unchanged, 2 skipped; "
                       "2 damaged lines skipped; 1 file joined to another file's session")
    again = runner.invoke(cli, ["import", str(corpus), *db])
    assert again.stdout == ""
    assert again.stderr.splitlines()[-1] == (
        "import: 0 imported, 0 updated, 6 unchanged, 2 skipped; "
        "1 file joined to another file's session")
    store = open_settled_store(str(db_path))
    try:
        assert store.count_recordings() == len(SESSIONS)
        assert {store.resolve(sid[:64]).cli_session_id for sid in SESSIONS} == {
            sid[:64] for sid in SESSIONS}
    finally:
        store.close()


def test_tokens_per_model_match_an_independent_count(corpus: Path, store: Store) -> None:
    units, _skipped = Planner().plan([corpus])
    for unit in units:
        import_unit(store, unit)
    want = independent_count(corpus)
    for sid in SESSIONS:
        rec = store.resolve(sid[:64])
        assert figures(rec) == want[sid], sid
        # Subagents included, and each on its own model.
    shop = figures(store.resolve(SHOP))
    assert set(shop) == {"claude-opus-4-5-20251101", "claude-haiku-4-5-20251001"}
    # msg_A1 is three lines with output 8, 40, 95: its last figure counts.
    assert shop["claude-opus-4-5-20251101"]["output"] == 95 + 20 + 30 + 12 + 55 + 25 + 18


def test_turns_are_prompts_and_other_user_lines_say_what_they_are(tmp_path: Path) -> None:
    got = read_transcript(CORPUS / "-home-dev-shop" / f"{SHOP}.jsonl")
    prompts = [e for e in got.events if e.direction == "in"]
    assert [json.loads(e.data)["message"]["content"] for e in prompts] == [
        "Refactor the checkout module.", "Now delete the tests.",
        "Actually, add a test for refunds.", "Run the full suite.", "Try again."]
    kinds = [json.loads(e.data).get("claudetrace_kind") for e in got.events
             if e.type == "user" and e.direction == "out"]
    assert [k for k in kinds if k] == ["steering", "command", "compact_summary", "command",
                                       "meta", "teammate", "interrupt"]
    systems = [(e.subtype, json.loads(e.data)) for e in got.events if e.type == "system"]
    rewind = next(line for sub, line in systems if sub == "rewind")
    assert rewind["abandoned_prompts"] == ["m-9a"] and rewind["branch_from"] == "m-8"
    assert any(sub == "compact_boundary" for sub, _ in systems)
    # The API error keeps its marks, and its turn's result is an error.
    error = next(json.loads(e.data) for e in got.events if b"isApiErrorMessage" in e.data)
    assert error["isApiErrorMessage"] is True and error["error"] == "overloaded"
    last = json.loads(got.events[-1].data)
    assert last["type"] == "result" and last["is_error"] is True
    # No cost in the transcript: none claimed (not 0.0).
    assert not any(b"total_cost_usd" in e.data for e in got.events)
    assert got.info.model == "claude-opus-4-5-20251101"  # not <synthetic>


def test_show_and_the_conversation_say_what_each_line_is(store: Store, db_path: Path) -> None:
    from claudetrace.ui.conversation import build_conversation

    got = read_transcript(CORPUS / "-home-dev-shop" / f"{SHOP}.jsonl")
    items = [(item.kind, item.label, item.text) for item in build_conversation(got.events)]
    assert ("user", "steering", "and keep it short") in items
    assert any(kind == "rewind" and text.startswith("rewound: the last prompt") and
               "abandoned branch" in text for kind, _label, text in items)
    assert ("compaction", None, "conversation compacted (manual, 4,100 tokens before)") in items
    assert any(label == "compaction summary" and
               text.startswith("This session is being continued") for _k, label, text in items)
    labels = {(kind, label) for kind, label, _t in items}
    assert ("user", "teammate message from reviewer") in labels
    import_file(store, CORPUS / "-home-dev-shop" / f"{SHOP}.jsonl")
    shown = CliRunner().invoke(cli, ["show", SHOP, "--db", str(db_path)]).stdout
    for label in ("user (steering) and keep it short", "user (teammate) <teammate-message",
                  "user (interrupt) [Request interrupted", "assistant (API error) API Error",
                  "user (meta) Caveat", "user (command) <command-name>/compact"):
        assert label in shown, label


def test_tail_says_the_markers_and_the_lines_that_are_no_prompt() -> None:
    from claudetrace.tail import TailFold

    got = read_transcript(CORPUS / "-home-dev-shop" / f"{SHOP}.jsonl")
    fold = TailFold(got.info)
    said = [(line.kind, line.text) for ev in got.events for line in fold.feed(ev)]
    assert ("note", "steering: and keep it short") in said
    # The file's leading summary line is a marker in words, not JSON.
    markers = [text for kind, text in said if kind == "marker"]
    assert len(markers) == 3 and "summary: Checkout refactor" in markers
    assert sum(kind == "prompt" for kind, _ in said) == 5


def test_the_stored_recording_shows_subagents_nested_and_the_api_error(
    store: Store
) -> None:
    done = import_file(store, CORPUS / "-home-dev-shop" / f"{SHOP}.jsonl")
    rec = store.get(done.recording_id or "")
    assert rec.turns == 5 and rec.extra["cost_known"] is False
    lines = [json.loads(e.data) for e in store.iter_events(rec.id)]
    nested = {line.get("parent_tool_use_id") for line in lines} - {None}
    # The survey's agent under its Task; the workflow's agent (no tool use names it)
    # under a lane of its own, in the same recording.
    assert nested == {"toolu_T1", "agent-wf01"}
    stored = [line for line in lines if line.get("isApiErrorMessage")]
    assert stored and stored[0]["error"] == "overloaded"


def test_cli_1_0_sidechain_lines_are_subagent_work_not_turns(store: Store) -> None:
    done = import_file(store, CORPUS / "-home-dev-old" / f"{OLD}.jsonl")
    rec = store.get(done.recording_id or "")
    assert rec.turns == 1 and rec.tool_calls == 2
    lines = [json.loads(e.data) for e in store.iter_events(rec.id)]
    side = [line["uuid"] for line in lines if line.get("parent_tool_use_id") == "toolu_O1"]
    assert side == ["o-3", "o-4", "o-5", "o-6"]


@pytest.mark.parametrize("named", ["agent-9b8c7d6e.jsonl", f"{MID}.jsonl", "folder"])
def test_an_old_style_agent_file_attaches_to_its_parent_whatever_is_named(
    store: Store, named: str
) -> None:
    folder = CORPUS / "-home-dev-mid"
    if named == "folder":
        units, _ = Planner().plan([folder])
    else:
        units, _ = Planner().plan([folder / named])
    assert len(units) == 1
    done = import_unit(store, units[0])
    rec = store.get(done.recording_id or "")
    assert store.count_recordings() == 1 and rec.cli_session_id == MID
    assert rec.turns == 1 and rec.model_calls == 3  # two of the parent's, one of the agent's
    lines = [json.loads(e.data) for e in store.iter_events(rec.id)]
    assert [line["uuid"] for line in lines if line.get("parent_tool_use_id")] == ["q-1", "q-2"]
    assert {line.get("parent_tool_use_id") for line in lines} == {None, "toolu_P1"}


def test_files_of_one_session_are_one_recording(store: Store) -> None:
    units, _ = Planner().plan([CORPUS / "-home-dev-res"])
    assert len(units) == 1 and len(units[0].paths) == 2
    rec = store.get(import_unit(store, units[0]).recording_id or "")
    assert rec.turns == 2 and rec.model_calls == 2  # the repeated lines once


def test_times_come_from_the_entries(corpus: Path, store: Store) -> None:
    # The shop session begins with a summary line that has no timestamp.
    rec = store.get(import_file(store, corpus / "-home-dev-shop" / f"{SHOP}.jsonl")
                    .recording_id or "")
    assert rec.started_ns == 1_795_168_800_000_000_000  # 2026-11-20T10:00:00Z
    assert (rec.ended_ns - rec.started_ns) / 1e9 == pytest.approx(141)
    # A session whose last turn waits on a tool, its file touched just now: open,
    # last seen at its last entry, not at the file's time (so not running).
    path = corpus / "-home-dev-alone" / f"{RESUMED}.jsonl"
    path.parent.mkdir()
    lines = (corpus / "-home-dev-res" / f"{RESUMED}.jsonl").read_text().splitlines()
    waiting = json.loads(lines[1])
    waiting["message"]["content"] = [{"type": "tool_use", "id": "toolu_x", "name": "Bash",
                                      "input": {"command": "sleep 1"}}]
    path.write_text(lines[0] + "\n" + json.dumps(waiting) + "\n")
    os.utime(path)
    open_rec = store.get(import_file(store, path).recording_id or "")
    assert open_rec.ended_ns is None and open_rec.status == "incomplete"
    assert open_rec.last_seen_ns == 1_795_168_802_000_000_000


def test_damaged_lines_are_counted_and_a_torn_line_waits(corpus: Path, store: Store) -> None:
    path = corpus / "-home-dev-dmg" / f"{DAMAGED}.jsonl"
    first = import_file(store, path)
    assert first.action == "imported" and first.damage == 2
    rec = store.get(first.recording_id or "")
    assert rec.turns == 2 and rec.extra["damaged_lines"] == 2
    assert rec.warnings[0].endswith(":2: not a JSON object")
    # The torn last line is finished: the next import takes it.
    with path.open("a") as out:
        out.write('sage":{"role":"user","content":"One more."},"uuid":"d-5",'
                  f'"timestamp":"2026-11-20T10:00:20.000Z","sessionId":"{DAMAGED}"}}\n')
    grown = import_file(store, path)
    assert grown.action == "updated" and grown.recording_id == first.recording_id
    assert store.get(rec.id).event_count > rec.event_count


def test_a_truncated_file_never_deletes_stored_turns(corpus: Path, db_path: Path) -> None:
    path = corpus / "-home-dev-res" / f"{RESUMED}.jsonl"
    runner = CliRunner()
    db = ["--db", str(db_path)]
    assert runner.invoke(cli, ["import", str(path), *db]).exit_code == 0
    store = open_settled_store(str(db_path))
    try:
        rec = store.resolve(RESUMED)
        before = [e.data for e in store.iter_events(rec.id)]
        path.write_text(path.read_text().splitlines()[0] + "\n")
        done = runner.invoke(cli, ["import", str(path), *db])
        assert done.exit_code == 1
        assert "is shorter than when imported" in done.stderr
        assert "the stored recording is kept as it was" in done.stderr
        assert [e.data for e in store.iter_events(rec.id)] == before
        assert store.get(rec.id).turns == 2
    finally:
        store.close()


def test_the_same_tree_named_otherwise_is_unchanged(
    corpus: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    db = ["--db", str(db_path)]
    runner.invoke(cli, ["import", str(corpus), *db])
    monkeypatch.chdir(corpus.parent)
    again = runner.invoke(cli, ["import", "./projects/../projects", *db])
    assert again.stderr.splitlines()[-1] == (
        "import: 0 imported, 0 updated, 6 unchanged, 2 skipped; "
        "1 file joined to another file's session")
    moved = corpus.rename(corpus.parent / "elsewhere")
    # A project folder moved elsewhere: its sessions are the same, unchanged.
    assert runner.invoke(cli, ["import", str(moved), *db]).stderr.splitlines()[-1] == (
        "import: 0 imported, 0 updated, 6 unchanged, 2 skipped; "
        "1 file joined to another file's session")


def test_a_long_session_id_is_one_recording(corpus: Path, store: Store) -> None:
    path = corpus / "-home-dev-long" / "long.jsonl"
    first = import_file(store, path)
    with path.open("a") as out:
        out.write(json.dumps({
            "type": "user", "sessionId": LONG, "uuid": "l-3", "parentUuid": "l-2",
            "timestamp": "2026-11-20T10:00:05.000Z",
            "message": {"role": "user", "content": "Again."}}) + "\n")
    again = import_file(store, path)
    assert again.action == "updated" and again.recording_id == first.recording_id
    assert store.count_recordings() == 1


def test_bad_lines_of_every_kind_are_skipped_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = "abcdabcd-0000-4000-8000-000000000000"
    good = json.dumps({"type": "user", "sessionId": sid, "uuid": "g-1",
                       "timestamp": "2026-11-20T10:00:00Z",
                       "message": {"role": "user", "content": "hi"}})
    deep = "[" * 100_000 + "]" * 100_000
    path = tmp_path / f"{sid}.jsonl"
    # A tool result's JSON 300 levels deep: valid, but deeper than is read.
    deep_result = '{"toolUseResult": ' + "[" * 300 + "]" * 300 + "}"
    path.write_text(f"{good}\n{deep}\n{'x' * 400_000}\n{{\"a\": \"\\ud800\"}}\n[1, 2]\n"
                    f"{deep_result}\n")
    monkeypatch.setattr(jsonl, "MAX_LINE", 300_000)
    got = read_transcript(path)
    assert [e.type for e in got.events] == ["user"]
    too_deep = "JSON nested deeper than 200 levels (the most claudetrace reads)"
    assert got.damage == 4 and got.warnings == [
        f"{path.name}:2: {too_deep}",  # no RecursionError
        f"{path.name}:3: longer than 300000 bytes, skipped",
        f"{path.name}:5: not a JSON object",
        f"{path.name}:6: {too_deep}",
    ]


def test_a_huge_file_without_newlines_is_refused_in_bounded_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl, "MAX_LINE", 1 << 20)
    big = tmp_path / "blob.jsonl"
    with big.open("wb") as out:
        for _ in range(16):
            out.write(b"{" * (1 << 20))
        out.write(b"\n")
    units, skipped = Planner().plan([tmp_path])
    assert units == [] and "its first line is longer than 1 MiB" in skipped[0].note


def test_a_folder_of_cassettes_imports_them(tmp_path: Path, db_path: Path) -> None:
    folder = tmp_path / "cassettes"
    folder.mkdir()
    for name in ("plain.ndjson", "hooks.ndjson"):
        shutil.copy(CASSETTES / name, folder / name)
    done = CliRunner().invoke(cli, ["import", str(folder), "--db", str(db_path)])
    assert done.exit_code == 0, done.output
    assert len(done.stdout.split()) == 2
    # A malformed one among them is skipped, saying where; the others are imported.
    (folder / "bad.ndjson").write_text('{"claudetrace": "cassette", "version": 1}\n'
                                       '{"seq": 0, "t": 0, "dir": "sideways", "line": "x"}\n')
    again = CliRunner().invoke(cli, ["import", str(folder), "--db", str(db_path)])
    assert again.exit_code == 1 and len(again.stdout.split()) == 2
    assert f"{folder / 'bad.ndjson'}: skipped: " in again.stderr and "bad.ndjson:2" in again.stderr


def test_a_side_chain_named_imports_its_whole_session(store: Store) -> None:
    side = CORPUS / "-home-dev-shop" / SHOP / "subagents" / "agent-a1f3.jsonl"
    units, skipped = Planner().plan([side])
    assert len(units) == 1 and len(units[0].paths) == 3 and skipped == []
    rec = store.get(import_unit(store, units[0]).recording_id or "")
    assert rec.cli_session_id == SHOP and rec.turns == 5


def test_watch_skips_what_is_no_transcript_once_and_keeps_watching(
    corpus: Path, store: Store
) -> None:
    watcher = Watcher(store, [corpus])
    said: list[Any] = []
    watcher.poll(said.append, lambda path, exc: said.append(exc))
    assert sorted(d.action for d in said) == ["imported"] * 6 + ["skipped"] * 2
    said.clear()
    watcher.poll(said.append, lambda path, exc: said.append(exc))
    assert said == []
    bad = corpus / "-home-dev-dmg" / "deep.jsonl"
    bad.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    watcher.poll(said.append, lambda path, exc: said.append(exc))
    assert [(d.path, d.action) for d in said] == [(bad, "skipped")]


def test_watch_keeps_the_name_and_tags(corpus: Path, store: Store) -> None:
    watcher = Watcher(store, [corpus / "-home-dev-mid"], name="nightly", tags={"k": "v"})
    said: list[Any] = []
    watcher.poll(said.append, lambda path, exc: said.append(exc))
    rec = store.resolve(MID)
    assert [d.action for d in said] == ["imported"]
    assert rec.name == "nightly" and rec.tags == {"k": "v"}


def test_two_importers_at_once_store_each_session_once(corpus: Path, db_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-m", "claudetrace", "import", str(corpus), "--db", str(db_path)]
    # The database exists first, so both start importing at once.
    open_settled_store(str(db_path), create=True).close()
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
             for _ in range(2)]
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, err  # the skipped files
    store = open_settled_store(str(db_path))
    try:
        assert store.count_recordings() == len(SESSIONS)
    finally:
        store.close()


def test_a_session_begun_by_a_slash_command_counts_its_first_turn(
    tmp_path: Path, store: Store
) -> None:
    """A skill or custom command invoked before any prompt starts the model's work: its
    calls are a turn of the session's (they were counted in no turn: their tokens lost,
    the next turn's result spread over every call, the session \"incomplete\")."""
    sid = "5a5a5a5a-1111-4222-8333-944455566677"
    project = tmp_path / "projects" / "-home-dev-skills"
    project.mkdir(parents=True)

    def entry(n: int, kind: str, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "sessionId": sid, "uuid": f"s-{n}",
                "parentUuid": f"s-{n - 1}" if n else None, "cwd": "/home/dev/skills",
                "version": "2.1.30", "timestamp": f"2026-02-10T10:00:{n:02d}.000Z", **fields}

    def answer(n: int, mid: str, text: str, tokens: tuple[int, int, int, int]) -> dict[str, Any]:
        usage = dict(zip(("input_tokens", "output_tokens", "cache_creation_input_tokens",
                          "cache_read_input_tokens"), tokens, strict=True))
        return entry(n, "assistant", message={
            "id": mid, "type": "message", "role": "assistant", "model": "claude-opus-4-6",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "usage": usage})

    lines = [
        entry(0, "user", message={"role": "user", "content": (
            "<command-message>review</command-message>\n<command-name>/review</command-name>\n"
            "<command-args>the parser</command-args>")}),
        entry(1, "user", isMeta=True, message={"role": "user", "content": [
            {"type": "text", "text": "Base directory for this skill: /skills/review\n# Review"}]}),
        answer(2, "msg_s1", "Reviewing.", (1562, 8, 1427, 28160)),
        answer(3, "msg_s2", "The parser is fine.", (6, 451, 119, 11288)),
        entry(4, "user", message={"role": "user", "content": "<command-name>/cost</command-name>"}),
        entry(5, "user", message={"role": "user", "content": (
            "<local-command-stdout>Total cost: $0.10</local-command-stdout>")}),
        entry(6, "user", message={"role": "user", "content": "Now fix the lexer."}),
        answer(7, "msg_s3", "Fixed.", (10, 20, 0, 40000)),
        entry(8, "system", subtype="turn_duration", durationMs=1000),
    ]
    (project / f"{sid}.jsonl").write_text(
        "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    got = read_transcript(project / f"{sid}.jsonl")
    turns = [json.loads(e.data) for e in got.events if e.direction == "in"]
    assert [t.get("claudetrace_kind") for t in turns] == ["command", None]
    results = [json.loads(e.data) for e in got.events if e.type == "result"]
    assert [r["usage"]["input_tokens"] for r in results] == [1562 + 6, 10]

    units, _skipped = Planner().plan([tmp_path / "projects"])
    for unit in units:
        import_unit(store, unit)
    rec = store.resolve(sid)
    assert figures(rec) == independent_count(tmp_path / "projects")[sid]
    assert rec.turns == 2 and rec.status == "ok"


def test_a_file_joined_to_another_files_session_says_so(tmp_path: Path, db_path: Path) -> None:
    """A copy of a session's file in another project folder, or a resumed session's
    other file, is one recording with it: each such file gets a line and a count (it
    was left out silently), and the copy named alone later is an update of that
    recording, not \"shorter than when imported … now gone\" of the first file."""
    first = tmp_path / "projects" / "-home-dev-a" / f"{RESUMED}.jsonl"
    copy = tmp_path / "projects" / "-home-dev-b" / "copy.jsonl"
    for path in (first, copy):
        path.parent.mkdir(parents=True)
        shutil.copyfile(CORPUS / "-home-dev-shop" / f"{SHOP}.jsonl", path)
    result = CliRunner().invoke(cli, ["import", "--db", str(db_path), str(first)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(cli, ["import", "--db", str(db_path), str(copy)])
    assert result.exit_code == 0, result.output
    assert f"{copy}: updated session {SHOP}" in result.stderr
    assert "import: 0 imported, 1 updated, 0 unchanged\n" in result.stderr
    for _ in range(2):  # the files named from their common folder: an update, then none
        again = CliRunner().invoke(
            cli, ["import", "--db", str(db_path), str(tmp_path / "projects")])
        assert again.exit_code == 0, again.output
        assert f"{copy}: part of session {SHOP}, with {first}" in again.stderr
    assert again.stderr.endswith(
        "import: 0 imported, 0 updated, 1 unchanged; 1 file joined to another file's session\n")
