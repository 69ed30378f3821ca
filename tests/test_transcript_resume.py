"""Resumed Claude Code sessions (``claude --resume`` / ``--continue``): CLI 1.0.x writes
a new file that begins with a copy of the earlier file's lines (their uuids, times,
API message ids and request ids kept) under the new session id, then goes on.

``fixtures/transcripts/resumed``: ``-home-dev-chain`` is a session resumed twice
(three files, each copying all before it, with a leading ``summary`` and a
``file-history-snapshot``); ``-home-dev-fork`` a file that repeats only the end of
an earlier one (its first entry is not the earlier file's first: it stays a
session of its own).  The usage of every API message counts once, as ccusage
counts it (``messageId:requestId`` over all files).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace.cli import cli
from claudetrace.formats.imports import Planner, import_unit
from claudetrace.store import Store
from tests.ccusage_runner import ccusage_or_skip, run_ccusage

pytestmark = pytest.mark.usefixtures("ct_env")
CORPUS = Path(__file__).parent / "fixtures" / "transcripts" / "resumed" / "projects"
CHAIN = CORPUS / "-home-dev-chain"
S1, S2, S3 = (f"5e550001-0000-4000-8000-00000000000{n}" for n in (1, 2, 3))
F1, F2 = "f0f00001-0000-4000-8000-000000000001", "f0f00001-0000-4000-8000-000000000002"
TOKENS = ("inputTokens", "outputTokens", "cacheCreationTokens", "cacheReadTokens",
          "totalTokens")


def run(*args: str, code: int = 0) -> Any:
    done = CliRunner().invoke(cli, list(args))
    assert done.exit_code == code, done.output
    return done


def usage(db_path: Path, report: str, projects: Path) -> Any:
    return json.loads(run("usage", report, "--json", "--timezone", "UTC", "--db",
                          str(db_path), "--import", str(projects)).stdout)


def test_a_resumed_session_is_one_recording_whatever_file_is_named() -> None:
    for named in (CHAIN, CHAIN / f"{S2}.jsonl", CHAIN / f"{S3}.jsonl"):
        units, skipped = Planner().plan([named])
        assert not skipped
        assert [u.files.session_id for u in units if u.files] == [S1], named
        assert sorted(p.name for p in units[0].paths) == [f"{s}.jsonl" for s in (S1, S2, S3)]
    # A file that repeats only the end of another is a session of its own.
    units, _ = Planner().plan([CORPUS / "-home-dev-fork"])
    assert sorted(u.files.session_id for u in units if u.files) == [F1, F2]


def test_the_conversation_is_shown_once_with_each_resume_marked(store: Store) -> None:
    (unit,) = Planner().plan([CHAIN])[0]
    rec = store.get(import_unit(store, unit).recording_id or "")
    assert rec.cli_session_id == S1
    assert rec.extra["resumed_as"] == [S2, S3]
    assert rec.turns == 4 and rec.model_calls == 4  # the copies once
    assert rec.started_ns == 1_795_165_200_000_000_000  # 2026-11-20T09:00:00Z, S1's start
    lines = [json.loads(e.data) for e in store.iter_events(rec.id)]
    prompts = [line["message"]["content"] for line in lines if line["type"] == "user"]
    assert prompts == ["Add a health check.", "And a test.", "Make the check async.",
                       "Ship it."]
    marks = [(line["subtype"], line.get("resumed_as"), line.get("copied_entries"),
              line.get("summary")) for line in lines
             if line["type"] == "system" and line["subtype"] in ("resume", "summary")]
    assert marks == [("resume", S2, 4, None), ("summary", None, None, "Health check endpoint"),
                     ("resume", S3, 6, None), ("summary", None, None, "Async health check")]
    # Each run's last turn ends with its answer, not at the next run's start.
    results = [line for line in lines if line["type"] == "result"]
    assert [r["duration_ms"] for r in results] == [4000, 5000, 6000, 3000]


def test_show_says_the_resume_and_summary_in_words(db_path: Path) -> None:
    run("import", str(CHAIN), "--db", str(db_path))
    shown = run("show", S1, "--db", str(db_path)).stdout
    assert f"resumed as  {S2}, {S3}" in shown
    assert f"resumed as session {S2}: the conversation goes on (its file repeats 4 " \
        "earlier entries, shown once above)" in shown
    assert "summary: Health check endpoint" in shown
    assert '"summary"' not in shown and "file-history-snapshot" not in shown
    assert shown.count("Add a health check.") == 1


def test_a_resume_under_the_same_session_id_is_said_without_it(db_path: Path) -> None:
    # -home-dev-res: the resumed file's lines all carry the earlier session id.
    res = Path(__file__).parent / "fixtures" / "transcripts" / "projects" / "-home-dev-res"
    run("import", str(res), "--db", str(db_path))
    shown = run("show", "11112222-3333-4444-8555-666677778888", "--db", str(db_path)).stdout
    assert "resumed: the conversation goes on (its file repeats 2 earlier entries" in shown


def test_the_ui_conversation_shows_no_raw_json_for_bookkeeping_lines(store: Store) -> None:
    from claudetrace.ui.conversation import build_conversation, walk

    (unit,) = Planner().plan([CHAIN])[0]
    rid = import_unit(store, unit).recording_id or ""
    items = build_conversation(store.iter_events(rid))
    texts = [item.text for _depth, item in walk(items) if item.kind == "system"]
    assert "summary: Async health check" in texts
    assert any(t.startswith(f"resumed as session {S3}") for t in texts)
    assert not any(t.lstrip().startswith(("summary: {", "resume: {")) for t in texts)


def test_resumed_later_updates_the_same_recording(tmp_path: Path, db_path: Path) -> None:
    projects = tmp_path / "projects"
    folder = projects / CHAIN.name
    folder.mkdir(parents=True)
    db = ["--db", str(db_path)]
    ids = []
    for sid in (S1, S2, S3):
        shutil.copy(CHAIN / f"{sid}.jsonl", folder)
        done = run("import", str(projects), *db)
        ids.append(done.stdout.split())
        assert done.stderr.splitlines()[-1].startswith(
            "import: 1 imported" if sid == S1 else "import: 0 imported, 1 updated")
    assert ids[0] == ids[1] == ids[2]
    again = run("import", str(projects), *db)
    assert again.stderr.splitlines()[-1] == (
        "import: 0 imported, 0 updated, 1 unchanged; 2 files joined to another file's session")
    # Imported one file at a time, then the folder: each message's usage still once.
    totals = usage(db_path, "daily", projects)["totals"]
    assert totals["outputTokens"] == 80 + 140 + 210 + 60
    assert totals["inputTokens"] == 12 + 9 + 15 + 7


def test_one_damaged_line_is_said_in_the_singular(tmp_path: Path, db_path: Path) -> None:
    folder = tmp_path / "projects" / CHAIN.name
    folder.mkdir(parents=True)
    lines = (CHAIN / f"{S1}.jsonl").read_text().splitlines()
    (folder / f"{S1}.jsonl").write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    done = run("import", str(folder), "--db", str(db_path), code=1)  # a line was skipped
    err = done.stderr.splitlines()
    assert err[-1] == "import: 1 imported, 0 updated, 0 unchanged; 1 damaged line skipped"
    assert err[0].endswith(f"imported session {S1} (1 damaged line skipped)")


@pytest.fixture(scope="module")
def ccusage() -> Path:
    return ccusage_or_skip()


@pytest.mark.slow
@pytest.mark.parametrize("report", ["daily", "session"])
def test_resumed_usage_matches_ccusage(ccusage: Path, tmp_path: Path, db_path: Path,
                                       report: str) -> None:
    config = tmp_path / "config"
    shutil.copytree(CORPUS, config / "projects")
    theirs = run_ccusage(ccusage, config, report)
    mine = usage(db_path, report, config / "projects")
    assert {k: mine["totals"][k] for k in TOKENS} == {k: theirs["totals"][k] for k in TOKENS}
    if report == "daily":
        assert [(d["date"], *(d[k] for k in TOKENS)) for d in mine["daily"]] == [
            (d["date"], *(d[k] for k in TOKENS)) for d in theirs["daily"]]
        return
    # ccusage 18 adds up a project folder's sessions under the folder's name.
    folders: dict[str, list[int]] = {}
    for s in mine["sessions"]:
        row = folders.setdefault(s["projectPath"].replace("/", "-"), [0] * len(TOKENS))
        for n, k in enumerate(TOKENS):
            row[n] += s[k]
    assert folders == {s["sessionId"]: [s[k] for k in TOKENS] for s in theirs["sessions"]}
    # The resumed chain is one session; the fork's repeated messages count in F1 only.
    by_id = {s["sessionId"]: s for s in mine["sessions"]}
    assert set(by_id) == {S1, F1, F2}
    assert by_id[F2]["outputTokens"] == 70


def _imported_the_old_way(db_path: Path | str, projects: Path) -> list[str]:
    """A store as an importer before resumed sessions were joined left it: each
    main file of ``projects`` a recording of its own (under the session id its
    lines carry), stored by the importer through the store's API.  Their ids."""
    from claudetrace.formats.imports import Unit
    from claudetrace.formats.layout import SessionFiles
    from claudetrace.indexer import open_settled_store

    planner = Planner()
    store = open_settled_store(str(db_path))
    try:
        ids = []
        for path in sorted(projects.rglob("*.jsonl")):
            sid = planner.session_id(path) or path.stem
            unit = Unit("transcript", path, SessionFiles(sid, mains=[path]))
            ids.append(import_unit(store, unit).recording_id or "")
        return ids
    finally:
        store.close()


def test_a_store_with_resume_files_imported_apart_folds_them_in(
        tmp_path: Path, db_path: Path) -> None:
    projects = tmp_path / "projects"
    shutil.copytree(CORPUS, projects)
    old = _imported_the_old_way(db_path, projects)
    db = ["--db", str(db_path)]
    listed = json.loads(run("sessions", "--json", *db).stdout)
    assert len(listed) == len(old) == 5  # S1, S2, S3, F1, F2 apart
    done = run("import", str(projects), *db)
    err = done.stderr.splitlines()
    assert err[-1] == ("import: 0 imported, 1 updated, 2 unchanged; 2 files joined to another "
                       "file's session; 2 earlier recordings of resumed sessions folded in")
    (said,) = [line for line in err if "updated" in line and S1 in line]
    assert "2 earlier recordings of its resumed files folded in: " in said
    listed = json.loads(run("sessions", "--json", *db).stdout)
    assert sorted(r["session_id"] for r in listed) == [S1, F1, F2]
    (chain,) = [r["id"] for r in listed if r["session_id"] == S1]
    assert f"recording  {chain}" in run("show", S3, *db).stdout
    # Each message's usage once: what a store that never held the files apart says.
    fresh = tmp_path / "fresh.db"
    run("import", str(projects), "--db", str(fresh))
    for report in ("daily", "session"):
        assert usage(db_path, report, projects) == usage(fresh, report, projects), report
    sessions = {s["sessionId"]: s for s in usage(db_path, "session", projects)["sessions"]}
    assert sessions[S1]["outputTokens"] == 80 + 140 + 210 + 60
    assert sessions[F2]["outputTokens"] == 70
    again = run("import", str(projects), *db)
    assert again.stderr.splitlines()[-1] == (
        "import: 0 imported, 0 updated, 3 unchanged; 2 files joined to another file's session")


@pytest.mark.slow
def test_a_folded_store_counts_as_ccusage_does(ccusage: Path, tmp_path: Path,
                                               db_path: Path) -> None:
    config = tmp_path / "config"
    shutil.copytree(CORPUS, config / "projects")
    _imported_the_old_way(db_path, config / "projects")
    run("import", str(config / "projects"), "--db", str(db_path))
    for report in ("daily", "session"):
        theirs = run_ccusage(ccusage, config, report)
        mine = usage(db_path, report, config / "projects")
        assert {k: mine["totals"][k] for k in TOKENS} == {
            k: theirs["totals"][k] for k in TOKENS}, report
