"""A finished, a failed, a running (awaiting approval) and an imported session, in
headless Chromium: the session browser's pages and the HTML report, each element
checked by its text and structure (tests/showcase.py makes the sessions)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from playwright.sync_api import expect

from claudetrace.cli import cli
from claudetrace.indexer import open_settled_store
from tests.browsing import launched, needs_chromium, ui_server
from tests.showcase import SUBAGENT_ANSWER, seed

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
    # The session's own node says why it failed (the root span's status does), not
    # only the turn under it.
    assert "error · turn 1 ended with an error (is_error with subtype success)" in rows[0][2]
    color = page.locator("tr[data-kind='tool'] td").first.evaluate(
        "e => getComputedStyle(e).color")
    assert color == "rgb(198, 40, 40)"
    page.screenshot(path=str(tmp_path / "failed-trace.png"), full_page=True)


def test_the_span_tree_stays_in_the_page_and_its_details_readable(
    server: str, page: Any, sessions: dict[str, str]
) -> None:
    # At 1400 px the table ran 28 px past the page's column (its right-hand cells
    # cut off) and squeezed each detail to a word a line (76 px).
    page.goto(f"{server}/?session={sessions['failed']}&tab=trace")
    page.locator("tr[data-kind='tool']").wait_for(timeout=TIMEOUT)
    table = page.locator("table.ct-trace")
    box = table.evaluate("t => { const r = t.getBoundingClientRect(), "
                         "c = t.closest('[data-testid=stHtml]').getBoundingClientRect(); "
                         "return [r.right, c.right, "
                         "getComputedStyle(t.parentElement).overflowX]; }")
    assert box[0] <= box[1] + 1 and box[2] == "auto", box
    widths = table.locator("td.detail").evaluate_all(
        "els => els.map(e => e.getBoundingClientRect().width)")
    assert min(widths) >= 150, widths


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
    expect(page.get_by_text(SUBAGENT_ANSWER)).to_be_visible()
    expect(page.get_by_text(re.compile(r"exit unknown"))).to_be_visible()
    # The transcript reported no cost: the price table's, said to be an estimate.
    expect(page.get_by_text("Cost (estimate)")).to_be_visible()
    page.get_by_text("Trace", exact=True).click()
    page.locator("tr[data-kind='tool']").first.wait_for(timeout=TIMEOUT)
    kinds = [k for k, _, _ in trace_rows(page)]
    assert kinds[:2] == ["agent", "turn"] and kinds.count("tool") == 2
    page.screenshot(path=str(tmp_path / "imported-trace.png"), full_page=True)


def report(sessions: dict[str, str], name: str, tmp_path: Path) -> Path:
    """The session's report as ``claudetrace export --format html`` writes it."""
    path = tmp_path / f"{name}.html"
    done = CliRunner().invoke(cli, ["export", sessions[name], "--format", "html", "-o",
                                    str(path), "--db", sessions["url"]])
    assert done.exit_code == 0, done.output
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
            expect(md.locator("strong")).to_have_text("Done.")  # once: not in the result
            expect(md.locator("td").nth(2)).to_have_text("<b>x</b>.py")
            expect(view.locator(".item .k.result")).to_be_visible()
            assert "**Done.**" not in view.locator("#conv").inner_text()
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
            expect(view.get_by_text(SUBAGENT_ANSWER)
                   ).to_be_visible()
        view.get_by_role("tab", name="Trace").click()
        rows = view.locator("#trace tr[data-kind]")
        expect(rows.first).to_be_visible()
        kinds = [r.get_attribute("data-kind") for r in rows.all()]
        assert kinds[0] == "agent"
        if name == "failed":  # why, on the session's own node
            expect(rows.first).to_contain_text(
                "error · turn 1 ended with an error (is_error with subtype success)")
        if name == "failed":
            tool = view.locator("#trace tr[data-kind='tool']")
            assert tool.get_attribute("data-status") == "error"
            assert tool.locator("td").first.evaluate(
                "e => getComputedStyle(e).color") == "rgb(198, 40, 40)"
        view.screenshot(path=str(tmp_path / f"report-{name}.png"), full_page=True)
        assert problems == []
    finally:
        view.context.close()


#: Per session: the trace header's status and error count, the per-prompt figures of
#: its first prompt, and turn ``n``'s span picked: its prompt and its result.
GLANCE = {
    "finished": ("ok", "0", r"turn 1 · 1 call · 0 tools · 100 in · 25 out", 1,
                 "Say hello.", "Here is what I found"),
    # (its first call's message id is the finished session's, stored first: that
    # call is counted there, as ``usage`` counts it, and says so)
    "failed": ("error", "2", r"turn 1 · 2 calls · 1 tool \(1 failed\) · 101 in · 26 out", 1,
               "Create created.txt with touch.", "I was not allowed to."),
    "running": ("running", "0", r"turn 1 · 1 call · 1 tool · 100 in · 1 out · .* · under way",
                1, "Create created.txt with touch.", "(none yet)"),
    "imported": ("ok", "0", r"turn 1 · 3 calls · 2 tools · 30 in · 15 out", 2,
                 "Also round the tax.", "Tax rounded too."),
}


@pytest.mark.parametrize("name", list(GLANCE))
def test_trace_header_prompt_figures_and_span_input_output(
    server: str, page: Any, sessions: dict[str, str], tmp_path: Path, name: str
) -> None:
    status, errors, figures, turn, prompt, answer = GLANCE[name]
    page.goto(f"{server}/?session={sessions[name]}&live=")
    # claude-code-log's per-prompt counts, under the prompt.
    expect(page.get_by_text(re.compile("↳ " + figures)).first).to_be_visible(timeout=TIMEOUT)
    page.goto(f"{server}/?session={sessions[name]}&live=&tab=trace&span=turn:{turn}")
    head = page.locator(".ct-head")
    expect(head.locator("[data-label='status']")).to_have_text(f"status{status}",
                                                               timeout=TIMEOUT)
    expect(head.locator("[data-label='errors']")).to_have_text(f"errors{errors}")
    labels = [e.get_attribute("data-label") for e in head.locator(".f").all()]
    assert labels == ["status", "started", "duration", "models", "tokens", "cost", "calls",
                      "tools", "errors"]
    expect(head.locator("[data-label='models']")).to_contain_text("claude-opus-5-5")
    expect(head.locator("[data-label='cost']")).to_contain_text(
        "estimate" if name in ("running", "imported") else "the CLI's")
    bad = head.locator(".f.bad")
    assert [b.get_attribute("data-label") for b in bad.all()] == (
        ["status", "errors"] if name == "failed" else [])
    # Phoenix's input/output pane: the turn picked, its prompt beside its result.
    given, said = page.locator(".st-key-span_input"), page.locator(".st-key-span_output")
    expect(given).to_contain_text(prompt, timeout=TIMEOUT)
    expect(said).to_contain_text(answer)
    assert given.bounding_box()["x"] < said.bounding_box()["x"]  # side by side
    if name == "failed":
        expect(said).to_contain_text("result (error)")
    page.screenshot(path=str(tmp_path / f"glance-{name}.png"), full_page=True)


def test_the_rewind_lists_its_abandoned_branch(
    server: str, page: Any, sessions: dict[str, str], tmp_path: Path
) -> None:
    page.goto(f"{server}/?session={sessions['imported']}")
    branch = page.get_by_text("Abandoned branch · 1 prompt")
    expect(branch).to_be_visible(timeout=TIMEOUT)
    branch.click()
    listed = page.locator("[data-testid='stExpander']").filter(has_text="Abandoned branch")
    expect(listed).to_contain_text("Also round the tax.")
    expect(listed).to_contain_text("turn 2 · 1 call · 0 tools · 10 in · 5 out")
    # The branch is still in place, dimmed (marked), and the conversation goes on.
    expect(page.get_by_text("The tax is unchanged.")).to_be_visible()
    page.screenshot(path=str(tmp_path / "rewind-branch.png"), full_page=True)


@pytest.mark.parametrize("name", list(GLANCE))
def test_the_report_draws_the_trace_header_prompt_figures_and_span_input_output(
    browser: Any, sessions: dict[str, str], tmp_path: Path, name: str
) -> None:
    status, errors, figures, turn, prompt, answer = GLANCE[name]
    view, problems = offline(browser, report(sessions, name, tmp_path))
    try:
        expect(view.locator("#conv .pf").first).to_have_text(re.compile("↳ " + figures),
                                                             timeout=TIMEOUT)
        if name == "imported":
            branch = view.locator("details.branch")
            expect(branch.locator("summary")).to_have_text("abandoned branch · 1 prompt")
            branch.locator("summary").click()
            expect(branch.locator("li")).to_contain_text("Also round the tax.")
        view.get_by_role("tab", name="Trace").click()
        head = view.locator(".thead")
        expect(head.locator("[data-label='status']")).to_have_text(f"status{status}")
        expect(head.locator("[data-label='errors']")).to_have_text(f"errors{errors}")
        assert [b.get_attribute("data-label") for b in head.locator(".f.bad").all()] == (
            ["status", "errors"] if name == "failed" else [])
        view.locator(f"#trace tr[data-ref='turn:{turn}']").click()
        expect(view.locator(".iopane [data-side='input']")).to_contain_text(prompt)
        expect(view.locator(".iopane [data-side='output']")).to_contain_text(answer)
        if name == "failed":
            tool = view.locator("#trace tr[data-kind='tool']")
            tool.click()
            expect(view.locator(".iopane [data-side='input']")).to_contain_text(
                "touch created.txt")
            expect(view.locator(".iopane .bad [data-side], .iopane [data-side].bad")
                   ).to_contain_text("Not in this test.")
        if name == "finished":
            view.locator("#trace tr[data-kind='model']").click()
            out = view.locator(".iopane [data-side='output'] .md")
            expect(out.locator("strong")).to_have_text("Done.")
            assert out.locator("script, img, b").count() == 0
        view.screenshot(path=str(tmp_path / f"report-glance-{name}.png"), full_page=True)
        assert problems == []
    finally:
        view.context.close()


#: A text to find in each session, what the find box says of it, and the kind and
#: anchor of each match (the UI's and the report's count the same).
FINDS = {
    "finished": ("OPUS", "2 matches · 1 item, 1 span · turn 1"),
    "failed": ("bash", "2 matches · 1 item, 1 span · turn 1"),
    "imported": ("Round", "8 matches · 7 items, 0 spans · turns 1, 2"),
}


def in_view(page: Any, selector: str) -> bool:
    """Whether the element is on the screen (scrolled to)."""
    return bool(page.evaluate(
        "s => { const r = document.querySelector(s).getBoundingClientRect();"
        " return r.bottom > 0 && r.top < window.innerHeight; }", selector))


@pytest.mark.parametrize("name", list(FINDS))
def test_find_counts_links_and_marks_matches_on_the_session_page(
    server: str, page: Any, sessions: dict[str, str], tmp_path: Path, name: str
) -> None:
    query, summary = FINDS[name]
    page.set_viewport_size({"width": 1400, "height": 700})
    page.goto(f"{server}/?session={sessions[name]}&live=&find={query}")
    expect(page.get_by_text(re.compile(rf"^Find “{query}”: {re.escape(summary)}$"))
           ).to_be_visible(timeout=TIMEOUT)
    links = page.locator(".ct-find-list li")
    links.first.wait_for(timeout=TIMEOUT)
    matches = [(li.get_attribute("data-kind"), li.get_attribute("data-anchor"),
                li.locator("a").get_attribute("href")) for li in links.all()]
    assert matches and all((anchor and href.endswith(f"#{anchor}")) or kind == "span"
                           for kind, anchor, href in matches)
    # Each listed excerpt marks the text, case as recorded.
    assert [m.lower() for m in links.locator("mark").all_inner_texts()] == [query.lower()] * len(
        matches)
    # The conversation shown: each item match under its anchor heading, its text marked.
    for kind, anchor, href in matches:
        if kind == "item":
            assert href == f"#{anchor}"  # on this page: an anchor, no reload
            expect(page.locator(f"h3#{anchor}")).to_contain_text(re.compile(r"^match \d+ of"))
    marks = page.locator("[data-testid=stMain] mark:not(.ct-find-list mark)")
    assert marks.count() >= 1
    assert {m.lower() for m in page.locator(".ct-found mark, .ct-md mark").all_inner_texts()
            } <= {query.lower()}
    last_item = [a for k, a, _ in matches if k == "item"][-1]
    links.locator(f"a[href='#{last_item}']").click()
    page.wait_for_function(f"location.hash === '#{last_item}'", timeout=TIMEOUT)
    page.wait_for_timeout(500)
    assert in_view(page, f"#{last_item}")
    spans = [(a, h) for k, a, h in matches if k == "span"]
    if spans:
        # Another tab: the link opens the trace (its span in the pane when it has one),
        # scrolled to the match, the row marked.
        anchor, href = spans[-1]
        page.locator(f".ct-find-list li[data-anchor='{anchor}'] a").click()
        target = href.rsplit("#", 1)[1]
        page.locator(f"#{target}").wait_for(timeout=TIMEOUT)
        assert "tab=trace" in page.url and f"find={query}" in page.url
        row = page.locator(f"tr#{anchor}")
        expect(row.locator("mark").first).to_have_text(re.compile(query, re.IGNORECASE),
                                                       timeout=TIMEOUT)
        assert "found" in (row.get_attribute("class") or "")
        if target.startswith("find-p"):
            page.wait_for_timeout(1000)
            assert in_view(page, f"#{target}")
    page.screenshot(path=str(tmp_path / f"find-{name}.png"))


@pytest.mark.parametrize("name", list(FINDS))
def test_the_report_finds_the_same_matches(
    browser: Any, sessions: dict[str, str], tmp_path: Path, name: str
) -> None:
    query, summary = FINDS[name]
    path = report(sessions, name, tmp_path)
    view, problems = offline(browser, path)
    try:
        view.goto(path.as_uri() + f"#conversation&find={query}")
        view.reload()
        expect(view.locator("#findcount")).to_have_text(re.compile(rf"^{re.escape(summary)}$"),
                                                         timeout=TIMEOUT)
        items = view.locator("#findlist li")
        kinds = [li.get_attribute("data-kind") for li in items.all()]
        assert kinds.count("item") == int(summary.split(" · ")[1].split()[0])
        assert kinds.count("span") == int(summary.split(", ")[1].split()[0])
        for at in range(items.count()):
            items.nth(at).locator("button").click()
            anchor = items.nth(at).get_attribute("data-anchor")
            current = view.locator(".current")
            assert current.get_attribute("id") == anchor
            expect(current.locator("mark").first).to_have_text(
                re.compile(query, re.IGNORECASE), timeout=TIMEOUT)
            assert in_view(view, f"#{anchor}")
        assert f"find={query}" in view.url
        # Nothing recorded became markup; nothing was fetched.
        assert view.locator("#conv script, #conv img").count() == 0
        assert problems == []
        view.locator("#find").fill("")
        view.wait_for_timeout(400)
        assert view.locator("mark.fm").count() == 0 and "find=" not in view.url
    finally:
        view.context.close()


#: Texts whose counts the two pages once disagreed on: Markdown's syntax (counted in
#: the raw text, not in what is drawn), a text across two of the drawn nodes, the
#: span tree's root (the session page named it claude-code, the report by the
#: recording's name), letters a regular expression folds otherwise than a browser
#: lowercases (a final sigma, a long s, a dotless i, a dotted capital I), besides
#: plain words, case folded.
AGREE = ("**", "done", "DONE. HERE", "| file", "app.py", "finished", "failed", "claude",
         "imported", "waiting", "touch", "Round", "tool", "ok", "e",
         "\u03c3", "\u03c2", "S", "I", "i\u0307", "\u0130stanbul", "\ufeffonly ")


def page_find(sessions: dict[str, str], name: str, query: str) -> str:
    """What the session page's find box says of ``query``: claudetrace.ui.find over
    the items and span rows the page reads (the find box's own read)."""
    from claudetrace.ui import find
    from claudetrace.ui.conversation import Conversation
    from claudetrace.ui.views import trace

    store = open_settled_store(sessions["url"])
    try:
        rec = store.get(sessions[name])
        conv = Conversation()
        conv.feed_many(list(store.iter_events(rec.id)))
        conv.settle(conv.items)
        rows = trace.tree_rows(conv.session, rec.status, rec.started_ns, rec.duration_ns,
                               trace.elsewhere_of(store, rec), trace.title_of(rec),
                               rec.status_reason)[1]
        return find.find(query, conv.items, rows, conv.session).summary()
    finally:
        store.close()


@pytest.mark.parametrize("name", ["finished", "failed", "running", "imported"])
def test_the_page_and_the_report_count_every_text_alike(
    server: str, page: Any, browser: Any, sessions: dict[str, str], tmp_path: Path, name: str
) -> None:
    view, problems = offline(browser, report(sessions, name, tmp_path))
    try:
        differ = []
        for query in AGREE:
            said = page_find(sessions, name, query)
            count = view.locator("#findcount")
            view.locator("#find").fill("")
            expect(count).to_have_text("", timeout=TIMEOUT)
            view.locator("#find").fill(query)
            expect(count).to_have_text(re.compile(r"\S"), timeout=TIMEOUT)
            shown = count.inner_text().strip()
            if shown != said:
                differ.append((query, said, shown))
        assert differ == [], "\n".join(map(str, differ))
        if name == "imported":
            # After a letter that lowercases longer ("İ" is "i̇"), the report marks
            # the text itself, in the list and where it jumps to, not a letter aside.
            view.locator("#find").fill("stanbul")
            expect(view.locator("#findlist li .w mark")).to_have_text("stanbul", timeout=TIMEOUT)
            view.locator("#findlist li button").first.click()
            expect(view.locator(".current mark.fm")).to_have_text(["stanbul"], timeout=TIMEOUT)
        assert problems == []
    finally:
        view.context.close()
    # The session page itself says the same (one text with Markdown in its answer).
    query = "**" if name == "finished" else "claude"
    said = page_find(sessions, name, query)
    page.goto(f"{server}/?session={sessions[name]}&live=&find={query}")
    expect(page.get_by_text(f"Find “{query}”: {said}", exact=True)).to_be_visible(
        timeout=TIMEOUT)
