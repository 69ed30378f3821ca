"""Sessions that go on from each other, linked both ways wherever a session is shown.

``fixtures/transcripts/compacted`` (the real CLI 2.1.330 and the fake API): a
session compacted, then resumed with ``--fork-session``: the fork's file begins
with the compaction, so it is a recording of its own ``forked from`` the
earlier one (``continues``, with ``fork``); the earlier one is ``forked as`` it,
by a query over the later recordings' ``continues``
(:mod:`claudetrace.store.links`), whatever order the files were imported in,
and no longer once the later one is deleted.  ``fixtures/transcripts/forked``:
a session forked twice without a compaction, joined into one recording that
was ``forked as`` the forks' ids.  A CLI before 1.0.124 made a new id and file on
every ``--resume``: such files are ``resumed as`` and ``continues``.

Each side is checked in ``show``, ``sessions --json`` (``links``), the HTML
report (the other id in text) and the session browser in a real Chromium (a
link to the other recording's page), on SQLite and PostgreSQL.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace.cli import cli
from claudetrace.store import open_store
from claudetrace.store.links import links_of, listed_links, session_links
from tests.browsing import launched, needs_chromium, ui_server
from tests.test_store_postgres import fresh_database, pg_url  # noqa: F401  (the fixture)

pytestmark = pytest.mark.usefixtures("ct_env")
FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"
COMPACTED = FIXTURES / "compacted" / "projects" / "-home-dev-project"
FORKED = FIXTURES / "forked" / "projects"
EARLIER, LATER = ("9d626fe2-9b72-46f0-b3e5-a1152ca9325b",
                  "c5ed8d29-b1bb-4659-9aa4-538bd822c1a6")
FIRST = "56b80255-494f-4834-a4e3-37fa909556e5"
FORKS = ("4aeb6ed4-e4d7-48e4-87a6-9ab0cd97b949", "917b28e5-bb97-4fbd-bb4e-4d232e202e03")


def run(*args: str, code: int = 0) -> Any:
    """The command's result; on PostgreSQL in a process of its own (a command
    leaves its pool's connections to the process's exit)."""
    if not any(arg.startswith("postgresql") for arg in args):
        done = CliRunner().invoke(cli, list(args))
        assert done.exit_code == code, done.output
        return done
    ran = subprocess.run([sys.executable, "-m", "claudetrace", *args], capture_output=True,
                         text=True, timeout=120, check=False)
    assert ran.returncode == code, ran.stdout + ran.stderr
    return ran


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, db_path: Path) -> str:
    """A fresh store on each database (PostgreSQL: a database of its own on the
    module's server)."""
    if request.param == "sqlite":
        return str(db_path)
    pytest.importorskip("psycopg")
    server = request.getfixturevalue("pg_url")
    return fresh_database(server, f"links_{abs(hash(request.node.name)) % 10**9}",
                          template=request.getfixturevalue("migrated_pg"))


@pytest.fixture(scope="module")
def migrated_pg(pg_url: str) -> str:  # noqa: F811  (the fixture imported above)
    """The name of a database migrated to the head once, which each test's is a copy of:
    each test's first command migrated an empty one, most of a PostgreSQL test's time."""
    from claudetrace.indexer import open_settled_store

    name = "links_migrated"
    open_settled_store(fresh_database(pg_url, name)).close()
    return name


def imported(db: str, *paths: Path, name: str | None = None) -> list[str]:
    args = ["import", *map(str, paths), "--db", db] + (["--name", name] if name else [])
    return run(*args).stdout.split()


def listed(db: str) -> dict[str, dict[str, Any]]:
    return {r["session_id"]: r for r in json.loads(run("sessions", "--json", "--db", db).stdout)}


def report(db: str, session: str) -> str:
    return str(run("export", session, "--format", "html", "-o", "-", "--db", db).stdout)


def report_facts(html: str) -> dict[str, str]:
    """The summary rows the report's data holds (its script draws them as text)."""
    data = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html,
                     re.S)
    assert data is not None
    return dict(json.loads(data.group(1))["facts"])


@pytest.mark.parametrize("order", ["earlier first", "later first", "together"])
def test_both_sides_say_the_link_in_any_import_order(db: str, tmp_path: Path,
                                                     order: str) -> None:
    folder = tmp_path / "projects" / COMPACTED.name
    shutil.copytree(COMPACTED, folder)
    early, late = folder / f"{EARLIER}.jsonl", folder / f"{LATER}.jsonl"
    if order == "earlier first":
        imported(db, early)
        imported(db, late)
    elif order == "later first":
        imported(db, late)
        # Before the earlier one is stored, the later one says it is not here.
        assert (f"forked from  {EARLIER} (after its compaction), not in this store"
                in run("show", LATER, "--db", db).stdout)
        imported(db, early)
    else:
        imported(db, folder)
    rows = listed(db)
    early_id, late_id = rows[EARLIER]["id"], rows[LATER]["id"]
    assert rows[LATER]["links"] == {
        "continues": {"session_id": EARLIER, "recording_id": early_id, "certain": True,
                      "fork": True},
        "continued_in": [], "resumed_as": [], "forked_as": []}
    assert rows[EARLIER]["links"] == {
        "continues": None,
        "continued_in": [{"session_id": LATER, "recording_id": late_id, "certain": True,
                          "fork": True}],
        "resumed_as": [], "forked_as": []}
    assert f"forked from  {EARLIER} (after its compaction)\n" in run(
        "show", LATER, "--db", db).stdout
    shown = run("show", EARLIER, "--db", db).stdout
    assert f"forked as  {LATER} (after a compaction)\n" in shown
    assert "continues  " not in shown and "forked from  " not in shown
    assert report_facts(report(db, LATER))["forked from"] == f"{EARLIER} (after its compaction)"
    assert report_facts(report(db, EARLIER))["forked as"] == f"{LATER} (after a compaction)"
    # The session list's reading (no ``extra`` loaded) finds the same ids.
    store = open_store(db)
    try:
        listed_ids = listed_links(store, [early_id, late_id, "01NOTHERE"])
    finally:
        store.close()
    assert [link.recording_id for link in listed_ids[early_id].continued_in] == [late_id]
    assert listed_ids[late_id].continues is not None
    assert listed_ids[late_id].continues.session_id == EARLIER
        # Importing again changes nothing: one link, each way.
    imported(db, folder)
    assert listed(db)[EARLIER]["links"] == rows[EARLIER]["links"]


def test_a_long_list_s_links_read_at_once_are_the_same(db: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # A list of more than 5,000 sessions reads every continuing recording at once
    # instead of 500 ids a query: the same links.
    import claudetrace.store.links as links

    shutil.copytree(COMPACTED, tmp_path / "projects" / COMPACTED.name)
    shutil.copytree(FORKED, tmp_path / "forked")
    imported(db, tmp_path / "projects", tmp_path / "forked")
    store = open_store(db)
    try:
        recs = store.list_recordings()
        chunked = session_links(store, recs)
        monkeypatch.setattr(links, "_ALL_AT_ONCE", 0)
        assert session_links(store, recs) == chunked
    finally:
        store.close()
    assert any(link.continued_in for link in chunked.values())
    assert any(link.continues for link in chunked.values())


@pytest.mark.parametrize("gone", ["later", "earlier"])
def test_deleting_either_side_leaves_no_dangling_claim(db: str, gone: str) -> None:
    imported(db, COMPACTED / f"{EARLIER}.jsonl", name="early")
    imported(db, COMPACTED / f"{LATER}.jsonl", name="late")
    run("prune", "--name", "late" if gone == "later" else "early", "--yes", "--db", db)
    rows = listed(db)
    if gone == "later":
        assert set(rows) == {EARLIER}
        assert rows[EARLIER]["links"]["continued_in"] == []
        assert "forked as" not in run("show", EARLIER, "--db", db).stdout
    else:
        assert set(rows) == {LATER}
        assert rows[LATER]["links"]["continues"] == {
            "session_id": EARLIER, "recording_id": None, "certain": True, "fork": True}
        assert (f"forked from  {EARLIER} (after its compaction), not in this store"
                in run("show", LATER, "--db", db).stdout)


def test_the_forks_of_a_session_are_listed_as_forks(db: str) -> None:
    (rid,) = imported(db, FORKED)
    row = listed(db)[FIRST]
    assert row["links"] == {"continues": None, "continued_in": [], "resumed_as": [],
                            "forked_as": list(FORKS)}
    facts = report_facts(report(db, FORKS[1]))
    assert facts["forked as"] == ", ".join(FORKS)
    assert "resumed as" not in facts
    shown = run("show", FORKS[0], "--db", db).stdout
    assert f"recording  {rid}" in shown
    assert f"forked as  {FORKS[0]}, {FORKS[1]}\n" in shown
    assert f"forked as session {FORKS[0]}: the conversation goes on" in shown
    assert "resumed" not in shown


def test_a_session_resumed_by_a_cli_before_2_0_is_resumed_not_forked(
        db: str, tmp_path: Path) -> None:
    # Claude Code 1.0.x made a new id and file on every --resume: the same files,
    # written by 1.0.67, are a resume and a continuation, not forks.
    old = tmp_path / "old" / "projects"
    for folder, name in ((FORKED / "-home-dev-project", "-home-dev-forked"),
                         (COMPACTED, COMPACTED.name)):
        (old / name).mkdir(parents=True)
        for path in folder.glob("*.jsonl"):
            (old / name / path.name).write_text(
                path.read_text().replace('"version":"2.1.330"', '"version":"1.0.67"'))
    imported(db, old)
    rows = listed(db)
    assert rows[FIRST]["links"]["resumed_as"] == list(FORKS)
    assert rows[FIRST]["links"]["forked_as"] == []
    assert rows[LATER]["links"]["continues"]["fork"] is False
    assert rows[EARLIER]["links"]["continued_in"][0]["fork"] is False
    assert f"resumed as  {FORKS[0]}, {FORKS[1]}\n" in run("show", FIRST, "--db", db).stdout
    assert f"continues  {EARLIER}" in run("show", LATER, "--db", db).stdout
    assert f"continued in  {LATER}" in run("show", EARLIER, "--db", db).stdout


@pytest.mark.parametrize("one_by_one", [10, 0])
def test_a_compacted_fork_of_a_joined_session_finds_it_by_the_id_it_was_resumed_as(
        db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_by_one: int) -> None:
    # The later file says it goes on from a session that was itself a fork, joined
    # into the first session's recording: the link opens that recording (found
    # by a narrow text match, or, with more ids to find, one read of every
    # resumed session).
    monkeypatch.setattr("claudetrace.store.links._ONE_BY_ONE", one_by_one)
    folder = tmp_path / "projects" / "-home-dev-project"
    folder.mkdir(parents=True)
    text = (COMPACTED / f"{LATER}.jsonl").read_text()
    (folder / f"{LATER}.jsonl").write_text(text.replace(f"{EARLIER}.jsonl", f"{FORKS[1]}.jsonl"))
    (rid,) = imported(db, FORKED)
    imported(db, folder)
    store = open_store(db)
    try:
        first, later = store.resolve(FIRST), store.resolve(LATER)
        assert links_of(store, later).continues is not None
        assert links_of(store, later).continues.recording_id == rid  # type: ignore[union-attr]
        both = session_links(store, [first, later])
        assert [link.recording_id for link in both[rid].continued_in] == [later.id]
    finally:
        store.close()


def test_the_session_list_has_a_links_column(db_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    from tests.test_ui_app import APP

    imported(str(db_path), COMPACTED)
    imported(str(db_path), FORKED)
    monkeypatch.setenv("CLAUDETRACE_DB", str(db_path))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    table = at.dataframe(key="sessions_table").value
    links = dict(zip(table["session_id"], table["links"], strict=True))
    assert links == {EARLIER: f"forked as {LATER[:8]}", LATER: f"forked from {EARLIER[:8]}",
                     FIRST: f"forked as {FORKS[0][:8]}, {FORKS[1][:8]}"}


def test_the_continues_lookup_uses_its_index(db: str) -> None:
    from claudetrace.store.links import EXPRESSION, INDEX

    imported(db, COMPACTED)
    if db.startswith("postgresql"):
        import psycopg

        with psycopg.connect(db.replace("postgresql+psycopg://", "postgresql://")) as conn:
            conn.execute("SET enable_seqscan = off")  # two rows: a scan would be cheaper
            plan = conn.execute(f"EXPLAIN SELECT id FROM recordings "
                                f"WHERE {EXPRESSION['postgresql']} IN ('a', 'b')").fetchall()
    else:
        import sqlite3

        with contextlib.closing(sqlite3.connect(db)) as conn:
            plan = conn.execute(f"EXPLAIN QUERY PLAN SELECT id FROM recordings "
                                f"WHERE {EXPRESSION['sqlite']} IN ('a', 'b')").fetchall()
    assert INDEX in " ".join(str(step) for step in plan)


# -- in the session browser ---------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium for the module's browser tests (each opens pages of its own)."""
    with launched() as chromium:
        yield chromium


def link_on(page: Any, label: str, session_id: str, note: str, recording_id: str) -> Any:
    """The link a session page shows under ``label`` to ``session_id``, checked to
    open ``recording_id``'s page, with what it rests on beside it."""
    from playwright.sync_api import expect

    link = page.get_by_role("link", name=session_id)
    link.wait_for(timeout=60_000)
    assert link.get_attribute("href") == f"?session={recording_id}"
    expect(page.get_by_text(label, exact=True)).to_be_visible()
    expect(page.get_by_text(note).first).to_be_visible()
    return link


@pytest.mark.slow
@needs_chromium
def test_each_side_links_to_the_other_in_the_browser(db: str, tmp_path: Path,
                                                     browser: Any) -> None:
    from playwright.sync_api import expect

    # The later file first, and a summary that names a session id made of
    # Markdown and HTML: shown as its characters, never as a link or markup.
    folder = tmp_path / "projects" / COMPACTED.name
    shutil.copytree(COMPACTED, folder)
    odd = "[x](javascript:alert(1))<b>*odd*<i>_"
    crafted = tmp_path / "other" / "projects" / "-home-dev-odd"
    crafted.mkdir(parents=True)
    (crafted / "0dd00000-0000-4000-8000-000000000001.jsonl").write_text(
        (COMPACTED / f"{LATER}.jsonl").read_text()
        .replace(f"{EARLIER}.jsonl", f"{odd}.jsonl").replace(LATER,
                                                              "0dd00000-0000-4000-8000-000000000001"))
    imported(db, folder / f"{LATER}.jsonl")
    imported(db, folder / f"{EARLIER}.jsonl")
    imported(db, crafted)
    imported(db, FORKED)
    rows = listed(db)
    early_id, late_id = rows[EARLIER]["id"], rows[LATER]["id"]
    (tmp_path / "ui").mkdir()
    with ui_server(db, tmp_path / "ui") as base:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        timeout = 60_000
        page.goto(f"{base}/?session={early_id}")
        forward = link_on(page, "forked as", LATER, "(after a compaction)", late_id)
        page.screenshot(path=str(tmp_path / "earlier.png"), full_page=True)
        page.goto(f"{base}/{forward.get_attribute('href')}")
        back = link_on(page, "forked from", EARLIER, "(after its compaction)", early_id)
        expect(page.get_by_role("heading", name=f"Session {late_id}")).to_be_visible()
        # Followed, the link opens the other page (in a tab of its own, as every
        # Markdown link in Streamlit does).
        with page.context.expect_page(timeout=timeout) as opened:
            back.click()
        other = opened.value
        other.get_by_role("link", name=LATER).wait_for(timeout=timeout)
        assert f"session={early_id}" in other.url
        other.close()
        # The forks' ids a session was forked as, on its page (nothing to open:
        # they are this recording).
        page.goto(f"{base}/?session={FORKS[0]}")
        expect(page.get_by_text("forked as", exact=True)).to_be_visible(timeout=timeout)
        expect(page.get_by_text(FORKS[1]).first).to_be_visible()
        # The crafted id: its characters, no link, no markup, not in this store.
        page.goto(f"{base}/?session=0dd00000")
        shown = page.get_by_text(f"{odd} (as its compaction summary says; that file was not "
                                 "imported beside it) — not in this store")
        expect(shown).to_be_visible(timeout=timeout)
        assert page.locator("a[href^='javascript']").count() == 0
        assert page.locator("b", has_text="odd").count() == 0
        page.screenshot(path=str(tmp_path / "odd.png"), full_page=True)
        page.close()


@pytest.mark.slow
@needs_chromium
def test_the_report_names_the_other_session_in_text_in_chromium(
        db_path: Path, tmp_path: Path, browser: Any) -> None:
    from playwright.sync_api import expect

    db = str(db_path)
    imported(db, COMPACTED)
    for session, label, other in ((EARLIER, "forked as", f"{LATER} (after a compaction)"),
                                  (LATER, "forked from", f"{EARLIER} (after its compaction)")):
        path = tmp_path / f"{session}.html"
        run("export", session, "--format", "html", "-o", str(path), "--db", db)
        page = browser.new_page()
        page.goto(path.resolve().as_uri())
        row = page.locator("#facts tr", has=page.get_by_text(label, exact=True))
        expect(row.locator("td").nth(1)).to_have_text(other, timeout=10_000)
        assert page.locator("#facts a").count() == 0  # the other session is not in the file
        page.close()

