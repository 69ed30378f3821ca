"""A finished, a failed, a running (awaiting approval) and an imported session, in
headless Chromium: the session browser's pages and the HTML report, each element
checked by its text and structure (tests/showcase.py makes the sessions)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from claudetrace.formats.html import write_report
from claudetrace.indexer import open_settled_store
from tests.browsing import launched, needs_chromium, ui_server
from tests.showcase import seed

pytestmark = [pytest.mark.slow, needs_chromium]
TIMEOUT = 30_000


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("showcase")
    store = open_settled_store(str(folder / "ui.db"))
    try:
        ids = seed(store, folder)
    finally:
        store.close()
    return {"url": str(folder / "ui.db"), "folder": str(folder), **ids}


@pytest.fixture(scope="module")
def server(sessions: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ui_server(sessions["url"], tmp_path_factory.mktemp("ui-server")) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched() as chromium:
        yield chromium


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    opened = browser.new_page(viewport={"width": 1400, "height": 1000})
    yield opened
    opened.close()


def trace_rows(page: Any) -> list[tuple[str, str, str]]:
    """``(kind, status, text)`` of each row of the span tree drawn."""
    rows = page.locator("tr[data-kind]")
    return [
        (r.get_attribute("data-kind"), r.get_attribute("data-status"), r.inner_text())
        for r in rows.all()
    ]


def test_finished_session_renders_markdown_safely_with_call_figures(
    server: str, page: Any, sessions: dict[str, str], tmp_path: Path
) -> None:
    page.goto(f"{server}/?session={sessions['finished']}")
    answer = page.locator(".ct-md")
    expect(answer.locator("strong")).to_have_text("Done.", timeout=TIMEOUT)
    expect(answer.locator("table th").first).to_have_text("file")
    expect(answer.locator("table td").nth(2)).to_have_text("<b>x</b>.py")  # text, not markup
    expect(answer.locator("li").first).to_contain_text("<script>document.title")
    expect(answer.locator("pre code")).to_contain_text("<img src=x onerror=alert(1)>")
    assert answer.locator("script, img, b").count() == 0
    assert page.title() != "pwned"
    expect(page.get_by_text(re.compile(r"claude-opus-5-5 · 100 in · 25 out · cache 50 read"))
           ).to_be_visible()
    expect(page.get_by_text(re.compile(r"^Result · success"))).to_be_visible()
    page.screenshot(path=str(tmp_path / "finished.png"), full_page=True)


def test_failed_session_reads_error_and_its_tool_is_red(
    server: str, page: Any, sessions: dict[str, str], tmp_path: Path
) -> None:
    page.goto(f"{server}/?session={sessions['failed']}")
    expect(page.get_by_text(re.compile(r"Result · error \(subtype success, is_error true\)"))
           ).to_be_visible(timeout=TIMEOUT)
    expect(page.get_by_text("Tool Bash · failed", exact=False)).to_be_visible()
    page.get_by_text("Trace", exact=True).click()
    page.locator("tr[data-kind='tool']").wait_for(timeout=TIMEOUT)
    rows = trace_rows(page)
    assert [(k, s) for k, s, _ in rows] == [
        ("agent", "error"), ("turn", "error"), ("model", "ok"), ("tool", "error"),
        ("model", "ok"),
    ]
    assert "permission deny" in rows[3][2]
    color = page.locator("tr[data-kind='tool'] td").first.evaluate(
        "e => getComputedStyle(e).color")
    assert color == "rgb(198, 40, 40)"
    page.screenshot(path=str(tmp_path / "failed-trace.png"), full_page=True)


def test_running_session_is_awaiting_approval_with_its_last_event(
    server: str, page: Any, sessions: dict[str, str], tmp_path: Path
) -> None:
    page.goto(f"{server}/?session={sessions['running']}&live=")
    expect(page.get_by_text(re.compile(r"awaiting approval · can_use_tool Bash · last event "
                                       r"\d\d:\d\d:\d\d\.\d{3} UTC \(\+\d"))
           ).to_be_visible(timeout=TIMEOUT)
    facts = page.get_by_text(re.compile(r"^id .* · CLI not yet · exit not yet"))
    expect(facts).to_be_visible()
    assert "None" not in facts.inner_text()
    expect(page.get_by_text("permission pending", exact=False)).to_be_visible()
    page.screenshot(path=str(tmp_path / "running.png"), full_page=True)


def test_imported_session_shows_todos_compaction_and_its_trace(
    server: str, page: Any, sessions: dict[str, str], tmp_path: Path
) -> None:
    page.goto(f"{server}/?session={sessions['imported']}")
    expect(page.get_by_text(re.compile(r"conversation compacted \(manual, 48,213 tokens"))
           ).to_be_visible(timeout=TIMEOUT)
    todo = page.get_by_text("Tool TodoWrite · ok · line 2 · todos 1/3 done")
    expect(todo).to_be_visible()
    todo.click()
    expect(page.get_by_text(re.compile(r"☑ read the cart code\s+◐ fix the rounding\s+☐ add a test"))
           ).to_be_visible()
    expect(page.locator(".ct-md strong")).to_have_text("round half up")
    task = page.get_by_text("Subagent Explore · find callers · ok · line 4")
    expect(task).to_be_visible()
    task.click()
    expect(page.get_by_text("Find who calls round_total.")).to_be_visible()
    expect(page.get_by_text("round_total is called from checkout.py only.")).to_be_visible()
    expect(page.get_by_text(re.compile(r"exit unknown"))).to_be_visible()
    # The transcript reported no cost: the price table's, said to be an estimate.
    expect(page.get_by_text("Cost (estimate)")).to_be_visible()
    page.get_by_text("Trace", exact=True).click()
    page.locator("tr[data-kind='tool']").first.wait_for(timeout=TIMEOUT)
    kinds = [k for k, _, _ in trace_rows(page)]
    assert kinds[:2] == ["agent", "turn"] and kinds.count("tool") == 2
    page.screenshot(path=str(tmp_path / "imported-trace.png"), full_page=True)


def report(sessions: dict[str, str], name: str, tmp_path: Path) -> Path:
    store = open_settled_store(sessions["url"])
    try:
        rec = store.get(sessions[name])
        path = tmp_path / f"{name}.html"
        with path.open("w") as out:
            write_report(out, rec, store.iter_events(rec.id))
    finally:
        store.close()
    return path


def offline(browser: Any, path: Path) -> tuple[Any, list[str]]:
    """The report from file:// with every other request refused; errors collected."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    url = path.as_uri()
    problems: list[str] = []
    context.route("**/*", lambda route: route.continue_() if route.request.url == url
                  else (problems.append(route.request.url), route.abort()))
    opened = context.new_page()
    opened.on("pageerror", lambda exc: problems.append(str(exc)))
    opened.goto(url)
    return opened, problems


@pytest.mark.parametrize("name", ["finished", "failed", "running", "imported"])
def test_the_report_draws_the_same_presentation_model(
    browser: Any, sessions: dict[str, str], tmp_path: Path, name: str
) -> None:
    view, problems = offline(browser, report(sessions, name, tmp_path))
    try:
        live = view.locator("#live")
        if name == "running":
            expect(live).to_contain_text("awaiting approval · can_use_tool Bash · last event")
        else:
            expect(live).to_contain_text("last event")
        if name == "finished":
            md = view.locator("#conv .md")
            expect(md.locator("strong")).to_have_text("Done.")
            expect(md.locator("td").nth(2)).to_have_text("<b>x</b>.py")
            assert md.locator("script, img, b").count() == 0
            expect(view.locator("#conv .fig").first).to_contain_text("100 in · 25 out")
        if name == "failed":
            expect(view.get_by_text("error (subtype success, is_error true)")).to_be_visible()
        if name == "imported":
            view.get_by_text("TodoWrite", exact=True).click()
            expect(view.locator("ul.todo li")).to_have_text(
                ["☑ read the cart code", "◐ fix the rounding", "☐ add a test"])
            expect(view.locator(".item .k.compaction").first).to_be_visible()
            view.get_by_text("subagent Explore").click()
            expect(view.get_by_text("Find who calls round_total.")).to_be_visible()
            expect(view.get_by_text("round_total is called from checkout.py only.")
                   ).to_be_visible()
        view.get_by_role("tab", name="Trace").click()
        rows = view.locator("#trace tr[data-kind]")
        expect(rows.first).to_be_visible()
        kinds = [r.get_attribute("data-kind") for r in rows.all()]
        assert kinds[0] == "agent"
        if name == "failed":
            tool = view.locator("#trace tr[data-kind='tool']")
            assert tool.get_attribute("data-status") == "error"
            assert tool.locator("td").first.evaluate(
                "e => getComputedStyle(e).color") == "rgb(198, 40, 40)"
        view.screenshot(path=str(tmp_path / f"report-{name}.png"), full_page=True)
        assert problems == []
    finally:
        view.context.close()
