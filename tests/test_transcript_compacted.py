"""A session resumed (here forked) after a compaction: its file begins with the
compaction, not a copy of the whole conversation, so it stays a recording of its
own, linked to the session it goes on from (``extra.continues``).

``fixtures/transcripts/compacted`` was written by the real CLI (2.1.330, the fake
API): ``claude -p`` twice in one session, ``/compact``, then ``--resume <it>
--fork-session``; its ``api-request-blob`` and ``api-request-shape`` lines are
left out.  The fork's file begins with a ``mode`` line, the compaction's
``system/compact_boundary`` (the same entry, by uuid, as in the earlier file;
``logicalParentUuid`` its last entry before) and the summary, which names the
earlier transcript's path.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace.cli import cli
from claudetrace.formats.continuation import continues
from tests.ccusage_runner import ccusage_or_skip, run_ccusage

pytestmark = pytest.mark.usefixtures("ct_env")
PROJECTS = Path(__file__).parent / "fixtures" / "transcripts" / "compacted" / "projects"
FOLDER = PROJECTS / "-home-dev-project"
EARLIER, LATER = ("9d626fe2-9b72-46f0-b3e5-a1152ca9325b",
                  "c5ed8d29-b1bb-4659-9aa4-538bd822c1a6")
TOKENS = ("inputTokens", "outputTokens", "cacheCreationTokens", "cacheReadTokens")


def run(*args: str, code: int = 0) -> Any:
    done = CliRunner().invoke(cli, list(args))
    assert done.exit_code == code, done.output
    return done


def test_the_compacted_resume_stays_apart_and_names_what_it_continues(db_path: Path) -> None:
    db = ("--db", str(db_path))
    assert len(run("import", str(PROJECTS), *db).stdout.split()) == 2
    listed = {r["session_id"]: r for r in json.loads(run("sessions", "--json", *db).stdout)}
    assert set(listed) == {EARLIER, LATER}
    # The answer the compaction kept ends a turn of its own: the new prompt's
    # result is the new prompt's, and the session is whole.
    assert listed[LATER]["status"] == "ok", listed[LATER]["status_reason"]
    shown = run("show", LATER, *db).stdout
    assert f"forked from  {EARLIER} (after its compaction)" in shown
    assert "continues" not in run("show", EARLIER, *db).stdout
    html = run("export", LATER, "--format", "html", "-o", "-", *db).stdout
    assert EARLIER in html and "after its compaction" in html


def test_without_the_earlier_file_the_link_is_the_summarys_word(tmp_path: Path,
                                                                db_path: Path) -> None:
    alone = tmp_path / "projects" / FOLDER.name
    alone.mkdir(parents=True)
    shutil.copy(FOLDER / f"{LATER}.jsonl", alone)
    assert continues(alone / f"{LATER}.jsonl") == {"session_id": EARLIER, "certain": False}
    # An earlier file beside it that does not hold the compaction: not that session's.
    (alone / f"{EARLIER}.jsonl").write_text(
        "\n".join(line for line in (FOLDER / f"{EARLIER}.jsonl").read_text().splitlines()
                  if "compact_boundary" not in line) + "\n")
    assert continues(alone / f"{LATER}.jsonl") == {"session_id": EARLIER, "certain": False}
    (alone / f"{EARLIER}.jsonl").unlink()
    run("import", str(alone), "--db", str(db_path))
    shown = run("show", LATER, "--db", str(db_path)).stdout
    assert f"forked from  {EARLIER} (as its compaction summary says; that file was not " \
        "imported beside it)" in shown


def test_only_a_file_that_begins_with_a_compaction_continues_one() -> None:
    assert continues(FOLDER / f"{LATER}.jsonl") == {"session_id": EARLIER, "certain": True}
    # The earlier file compacts in its middle: it goes on from nothing.
    assert continues(FOLDER / f"{EARLIER}.jsonl") is None
    chain = Path(__file__).parent / "fixtures" / "transcripts" / "resumed" / "projects"
    assert all(continues(p) is None for p in chain.rglob("*.jsonl"))


def test_the_compacted_resume_counts_its_own_calls_only(db_path: Path) -> None:
    # Its cost-state lines carry the earlier session's running totals on (78
    # output tokens when it starts): they are not its own.  The earlier session
    # counts its two answers (25, 26) and the compaction's call (27: in its
    # cost-state, not in its lines); the later one its one new answer (28), the
    # preserved answer it repeats (msg_fake_00001) once, in the earlier.
    run("import", str(PROJECTS), "--db", str(db_path))
    report = json.loads(run("usage", "session", "--json", "--db", str(db_path)).stdout)
    out = {s["sessionId"]: s["outputTokens"] for s in report["sessions"]}
    assert out == {EARLIER: 25 + 26 + 27, LATER: 28}
    later = run("sessions", "--json", "--db", str(db_path)).stdout
    (row,) = [r for r in json.loads(later) if r["session_id"] == LATER]
    assert row["cost_source"] == "estimate"  # not the earlier session's running cost


@pytest.mark.slow
def test_the_compacted_resume_counts_as_ccusage_does(tmp_path: Path, db_path: Path) -> None:
    ccusage = ccusage_or_skip()
    config = tmp_path / "config"
    shutil.copytree(PROJECTS, config / "projects")
    run("import", str(config / "projects"), "--db", str(db_path))
    for report in ("daily", "session"):
        theirs = run_ccusage(ccusage, config, report)
        mine = json.loads(run("usage", report, "--json", "--timezone", "UTC", "--db",
                              str(db_path)).stdout)
        # ccusage does not count the compaction's call (no line of its own).
        compaction = {"inputTokens": 102, "outputTokens": 27, "cacheCreationTokens": 10,
                      "cacheReadTokens": 50}
        assert {k: mine["totals"][k] for k in TOKENS} == {
            k: theirs["totals"][k] + compaction[k] for k in TOKENS}, report
