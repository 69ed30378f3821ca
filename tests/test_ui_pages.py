"""The session browser's pages in headless Chromium on a store of their own: an
API error the CLI gave up on, an imported transcript's conversation, a diff with a
running session (each checked by its text and structure, a screenshot taken)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from claudetrace.cassette import read_cassette
from claudetrace.formats.imports import import_file
from claudetrace.indexer import open_settled_store
from tests.browsing import launched, needs_chromium, ui_server
from tests.test_ui_app import PLAIN_ANSWERED
from tests.test_ui_queries import store_running

pytestmark = [pytest.mark.slow, needs_chromium]
TIMEOUT = 30_000
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("pages")
    store = open_settled_store(str(folder / "ui.db"))
    try:
        ids = {
            # The real CLI against an API answering 529, retries off.
            "overloaded": store.import_cassette(
                read_cassette(FIXTURES / "api_error" / "overloaded.ndjson"), name="overloaded"),
            "done": store.import_cassette(
                read_cassette(FIXTURES / "cassettes" / "plain.ndjson"), name="done"),
            "running": store_running(store, "running", PLAIN_ANSWERED),
            "imported": import_file(store, FIXTURES / "transcripts" / "projects" / "-home-dev-dmg"
                                    / "deadbeef-4444-4555-8666-777788889999.jsonl",
                                    name="imported").recording_id,
        }
    finally:
        store.close()
    return {"url": str(folder / "ui.db"), **ids}


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


def test_an_api_error_is_an_error_in_red_not_a_model_call(
    server: str, page: Any, sessions: dict[str, str], tmp_path: Path
) -> None:
    page.goto(f"{server}/?session={sessions['overloaded']}")
    # In the conversation: an error alert (red) with the CLI's text, no answer.
    alert = page.locator("[data-testid='stAlertContentError']",
                         has_text=re.compile(r"API error 529 overloaded_error: API Error: 529 "
                                             r"Overloaded\."))
    expect(alert).to_be_visible(timeout=TIMEOUT)
    page.screenshot(path=str(tmp_path / "api-error-conversation.png"), full_page=True)
    page.get_by_text("Trace", exact=True).click()
    rows = page.locator("tr[data-kind]")
    rows.nth(2).wait_for(timeout=TIMEOUT)
    assert [(r.get_attribute("data-kind"), r.get_attribute("data-status"))
            for r in rows.all()] == [("agent", "error"), ("turn", "error"), ("error", "error")]
    error = rows.nth(2)
    expect(error).to_contain_text("API error 529 overloaded_error")
    expect(error).to_contain_text("API Error: 529 Overloaded.")
    assert error.locator("td").first.evaluate("e => getComputedStyle(e).color") == (
        "rgb(198, 40, 40)")  # red, as every failed span
    expect(page.get_by_text(re.compile(r"\b1 model call"))).to_have_count(0)
    page.screenshot(path=str(tmp_path / "api-error-trace.png"), full_page=True)


def test_an_imported_transcript_says_its_session_started_once(
    server: str, page: Any, sessions: dict[str, str], tmp_path: Path
) -> None:
    page.goto(f"{server}/?session={sessions['imported']}")
    expect(page.get_by_text("Bye.", exact=True).first).to_be_visible(timeout=TIMEOUT)
    expect(page.get_by_text(re.compile(r"session started · model claude-opus-4-5-20251101"))
           ).to_have_count(1)
    page.screenshot(path=str(tmp_path / "imported-conversation.png"), full_page=True)


def test_the_diff_says_a_running_sessions_cost_so_far(
    server: str, page: Any, sessions: dict[str, str], tmp_path: Path
) -> None:
    page.goto(f"{server}/?diff={sessions['done']},{sessions['running']}")
    cost = page.locator("[data-testid='stMetric']", has_text="Cost A → B")
    expect(cost).to_contain_text("$0.00048 (estimate)", timeout=TIMEOUT)
    expect(cost).to_contain_text("-$0.00048")
    expect(page.get_by_text("not yet reported")).to_have_count(0)
    page.screenshot(path=str(tmp_path / "diff-running.png"), full_page=True)
