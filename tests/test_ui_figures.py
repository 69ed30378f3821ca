"""The figures on top of the session browser's pages, in headless Chromium: shown
whole at 1400 and 1024 px, a cost that is not an amount said one way per meaning (as
``show`` and the HTML report say it), and a subagent's folder imported without its
main transcript placed in its working folder."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from playwright.sync_api import expect

from claudetrace.cassette import Cassette, read_cassette
from claudetrace.cli import cli
from claudetrace.formats.imports import import_file
from claudetrace.indexer import open_settled_store
from tests.browsing import launched, needs_chromium, ui_server
from tests.showcase import CASSETTES, SESSION_ID, _edit, changed, seed, transcript

pytestmark = [pytest.mark.slow, needs_chromium]
TIMEOUT = 60_000
#: A long session's tokens: input, output, cache read, cache write (16,574,321 in all).
BIG = {"input_tokens": 1_234_567, "output_tokens": 345_678,
       "cache_read_input_tokens": 14_000_000, "cache_creation_input_tokens": 994_076}
UNPRICED_ID = "5e55a0e0-0000-4000-8000-0000000000bb"
LONE_ID = "5e55a0e0-0000-4000-8000-0000000000cc"


def _big(obj: dict[str, Any]) -> None:
    if obj.get("type") == "assistant":
        obj["message"]["usage"].update(BIG)
        return
    obj["usage"].update(BIG)
    obj["total_cost_usd"] = 12345.678901
    for figures in obj.get("modelUsage", {}).values():
        figures.update({"inputTokens": BIG["input_tokens"], "outputTokens": BIG["output_tokens"],
                        "cacheReadInputTokens": BIG["cache_read_input_tokens"],
                        "cacheCreationInputTokens": BIG["cache_creation_input_tokens"]})


def _lone_side_chain(folder: Path) -> Path:
    """``<session>/subagents/agent-x.jsonl`` with no main transcript beside it."""
    def line(kind: str, uuid: str, at: int, message: dict[str, Any]) -> dict[str, Any]:
        return {"type": kind, "uuid": uuid, "parentUuid": None, "isSidechain": True,
                "agentId": "x", "sessionId": LONE_ID, "cwd": "/home/dev/lone",
                "version": "2.1.12", "timestamp": f"2026-11-21T10:00:0{at}.000Z",
                "message": message}
    path = folder / "lone" / LONE_ID / "subagents" / "agent-x.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(entry) + "\n" for entry in [
        line("user", "s1", 1, {"role": "user", "content": "Survey the cart."}),
        line("assistant", "s2", 2, {
            "id": "msg_lone", "type": "message", "role": "assistant",
            "model": "claude-opus-5-5", "content": [{"type": "text", "text": "Surveyed."}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 5, "output_tokens": 2}}),
    ]))
    return path


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("figures")
    store = open_settled_store(str(folder / "ui.db"))
    try:
        ids = seed(store, folder)
        big = changed("plain", "result", _big)
        ids["big"] = store.import_cassette(Cassette(big.header, [
            _edit(e, _big) if e.direction == "out" and e.fields.type == "assistant" else e
            for e in big.events]), name="bigtokens")
        # A prompt that no model call answered: there is nothing to price.
        plain = read_cassette(CASSETTES / "plain.ndjson")
        cut = next(i for i, e in enumerate(plain.events) if e.fields.type == "assistant")
        ids["nocalls"] = store.import_cassette(
            Cassette(dict(plain.header), plain.events[:cut]), name="nocalls")
        # The showcase's transcript, answered by a model the price table does not know
        # (API messages of its own: each is counted once, where first stored).
        other = folder / "unpriced" / f"{UNPRICED_ID}.jsonl"
        other.parent.mkdir()
        other.write_text(transcript(folder).read_text().replace(SESSION_ID, UNPRICED_ID)
                         .replace("claude-opus-5-5", "claude-mystery-1")
                         .replace('"msg_', '"msg_unpriced_'))
        ids["unpriced"] = import_file(store, other, name="unpriced").recording_id or ""
        ids["lone"] = import_file(store, _lone_side_chain(folder), name="lone").recording_id or ""
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


def metrics(page: Any, count: int) -> dict[str, tuple[str, bool]]:
    """Label → (figure, whether it is drawn whole) of the page's ``st.metric`` figures."""
    shown = page.locator("[data-testid='stMetric']")
    expect(shown).to_have_count(count, timeout=TIMEOUT)
    out = {}
    for metric in shown.all():
        label = metric.locator("[data-testid='stMetricLabel']").inner_text().strip()
        value = metric.locator("[data-testid='stMetricValue']")
        # A figure cut with an ellipsis is wider than the box that shows it.
        whole = value.evaluate("e => [e, ...e.querySelectorAll('*')].every("
                               "x => x.scrollWidth <= x.clientWidth + 1)")
        out[label] = (value.inner_text().strip(), whole)
    return out


@pytest.mark.parametrize("width", [1400, 1024])
def test_every_figure_on_top_of_a_page_shows_whole(
    server: str, browser: Any, sessions: dict[str, str], width: int, tmp_path: Path
) -> None:
    page = browser.new_page(viewport={"width": width, "height": 1000})
    try:
        page.goto(f"{server}/?session={sessions['big']}")
        figures = metrics(page, 6)
        assert figures["Tokens"][0] == "16,574,321"
        assert figures["Cost"][0] == "$12,345.6789"
        page.screenshot(path=str(tmp_path / f"big-{width}.png"))
        page.goto(f"{server}/?session={sessions['running']}&live=")
        figures.update({f"running {k}": v for k, v in metrics(page, 6).items()})
        page.goto(f"{server}/")
        listed = metrics(page, 5)
        assert listed["Total cost"][0].startswith("$12,3")
        figures.update({f"list {k}": v for k, v in listed.items()})
        cut = [f"{label}: {text}" for label, (text, whole) in figures.items() if not whole]
        assert cut == []
    finally:
        page.close()


def test_a_cost_that_is_no_amount_reads_alike_everywhere(
    server: str, browser: Any, sessions: dict[str, str], tmp_path: Path
) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    unpriced = "unknown (no price for claude-mystery-1)"
    try:
        page.goto(f"{server}/?session={sessions['unpriced']}&tab=trace")
        assert metrics(page, 6)["Cost"][0] == unpriced
        head = page.locator(".ct-head")
        expect(head).to_contain_text(unpriced, timeout=TIMEOUT)
        model_cost = page.locator("tr[data-kind='model']").first.locator("td").nth(6)
        assert model_cost.inner_text().strip() == "unknown"
        page.goto(f"{server}/?session={sessions['nocalls']}")
        assert metrics(page, 6)["Cost"][0] == "— (no model calls)"
        page.goto(f"{server}/stats")
        total = page.get_by_text(re.compile(r"^In all: "))
        expect(total).to_contain_text("+ unknown (no price for claude-mystery-1)",
                                      timeout=TIMEOUT)
        assert "(estimate)" not in total.inner_text()
    finally:
        page.close()
    # show and the HTML report say it in the same words.
    for name, said in [("unpriced", unpriced), ("nocalls", "— (no model calls)")]:
        done = CliRunner().invoke(cli, ["show", sessions[name], "--db", sessions["url"]])
        assert re.search(rf"cost\s+{re.escape(said)}", done.output), done.output
        path = tmp_path / f"{name}.html"
        done = CliRunner().invoke(cli, ["export", sessions[name], "--format", "html", "-o",
                                        str(path), "--db", sessions["url"]])
        assert done.exit_code == 0, done.output
        report = browser.new_page()
        try:
            report.goto(path.as_uri())
            expect(report.locator("body")).to_contain_text(said, timeout=TIMEOUT)
        finally:
            report.close()


def test_a_subagent_folder_alone_is_placed_in_its_working_folder(
    server: str, browser: Any, sessions: dict[str, str]
) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(f"{server}/?session={sessions['lone']}")
        expect(page.get_by_text(re.compile(r"^id .* · cwd /home/dev/lone"))
               ).to_be_visible(timeout=TIMEOUT)
        # The list's Project (cwd) filter offers it, and picks the session out.
        page.goto(f"{server}/?cwd=/home/dev/lone")
        assert metrics(page, 5)["Sessions"][0] == "1"
    finally:
        page.close()
