"""The session browser in a real headless Chromium, against ``claudetrace ui``."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from claudetrace.cli import cli
from tests.browsing import launched, needs_chromium, ui_server

pytestmark = [
    pytest.mark.slow,
    needs_chromium,
]


@pytest.fixture(scope="module")
def server(ui_db: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``claudetrace ui`` on a free localhost port; yields its base URL."""
    with ui_server(ui_db["url"], tmp_path_factory.mktemp("ui-server")) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with launched() as chromium:
        yield chromium


def test_browse_list_session_tabs_and_diff(
    server: str, browser: object, ui_db: dict[str, str], tmp_path: Path
) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})  # type: ignore[attr-defined]
    timeout = 30_000

    page.goto(f"{server}/")
    page.get_by_text("Total cost").wait_for(timeout=timeout)
    page.get_by_text("p95 duration").wait_for(timeout=timeout)
    page.get_by_text("Select a row to open it").wait_for(timeout=timeout)
    page.locator("[data-testid='stDataFrame']").first.wait_for(timeout=timeout)
    page.screenshot(path=str(tmp_path / "1-sessions.png"), full_page=True)
    assert page.get_by_role("heading", name="Sessions").first.is_visible()

    page.goto(f"{server}/?session={ui_db['permission_deny']}")
    page.get_by_text("I was not allowed to.").first.wait_for(timeout=timeout)
    assert page.get_by_text("Create created.txt with touch.").first.is_visible()
    assert page.get_by_text("permission deny").first.is_visible()
    page.screenshot(path=str(tmp_path / "2-conversation.png"), full_page=True)

    page.get_by_text("Control plane", exact=True).click()
    page.get_by_text("Control requests").first.wait_for(timeout=timeout)
    page.screenshot(path=str(tmp_path / "3-control.png"), full_page=True)
    assert "tab=control" in page.url

    page.get_by_text("Trace", exact=True).click()
    page.locator("table.ct-trace tr[data-kind='tool'][data-status='error']").wait_for(
        timeout=timeout)
    page.screenshot(path=str(tmp_path / "4-trace.png"), full_page=True)
    assert "tab=trace" in page.url and not page.get_by_text("Timeline", exact=True).count()

    page.get_by_text("Raw", exact=True).click()
    page.get_by_text("lines match").wait_for(timeout=timeout)
    page.get_by_text("Download as cassette").wait_for(timeout=timeout)
    page.screenshot(path=str(tmp_path / "5-raw.png"), full_page=True)

    page.reload()  # the view survives a refresh: its state is in the URL
    page.get_by_text("lines match").wait_for(timeout=timeout)

    page.goto(f"{server}/?diff={ui_db['permission_allow']},{ui_db['permission_deny']}")
    page.get_by_text("The sessions differ from turn 1 on.").wait_for(timeout=timeout)
    page.screenshot(path=str(tmp_path / "6-diff.png"), full_page=True)

    page.goto(f"{server}/?session=01NOTHERE")
    page.get_by_text("no recording matches").wait_for(timeout=timeout)
    page.close()


def test_the_list_says_a_cost_that_is_not_an_amount(
    server: str, browser: object, ui_db: dict[str, str], tmp_path: Path
) -> None:
    # The cost cell of a session with no cost was drawn "None" (a number column).
    # Wide enough for the grid to lay out the cost columns (it writes the cells of
    # the columns in view into its hidden accessible table).
    page = browser.new_page(viewport={"width": 2400, "height": 1000})  # type: ignore[attr-defined]
    page.goto(f"{server}/")
    grid = page.locator("[data-testid='stDataFrame']").first
    grid.locator("[role='columnheader']").filter(has_text="cost source").wait_for(
        state="attached", timeout=60_000)
    heads = [h.strip() for h in grid.locator("[role='columnheader']").all_inner_texts()]
    rows = grid.locator("[role='row']").all()
    cells = [[c.strip() for c in r.locator("[role='gridcell']").all_inner_texts()] for r in rows]
    page.screenshot(path=str(tmp_path / "list-costs.png"))
    page.close()
    cost = heads.index("cost")
    costs = {row[0].removeprefix("?session="): row[cost] for row in cells if row}
    assert costs[ui_db["running"]] == "not yet"
    assert costs[ui_db["malformed"]] == "—"  # no model call
    assert costs[ui_db["plain"]] == "$0.00096"
    assert "None" not in costs.values() and "" not in costs.values()


def test_a_failed_session_s_reason_shows_at_1280_px(
    server: str, browser: object, ui_db: dict[str, str], tmp_path: Path
) -> None:
    # The reason column was the 16th, past the grid's 820 px at a 1280 px window:
    # "killed" said nothing of why without scrolling the table sideways.
    page = browser.new_page(viewport={"width": 1280, "height": 1000})  # type: ignore[attr-defined]
    page.goto(f"{server}/?errors=1")  # the failed ones (the grid writes the rows in view)
    grid = page.locator("[data-testid='stDataFrame']").first
    heads = grid.locator("[role='columnheader']")
    heads.filter(has_text="first prompt").wait_for(state="attached", timeout=60_000)
    # The grid writes the columns in view, in order, into its hidden accessible table.
    names = [h.strip() for h in heads.all_inner_texts()]
    cells = [[c.strip() for c in r.locator("[role='gridcell']").all_inner_texts()]
             for r in grid.locator("[role='row']").all()]
    box = grid.bounding_box()
    page.screenshot(path=str(tmp_path / "sessions-1280-reason.png"))
    page.close()
    assert names[:4] == ["open", "status", "reason", "first prompt"]
    assert "failed tools" in names
    assert box is not None and box["x"] + box["width"] <= 1280
    reasons = {row[0].removeprefix("?session="): row[names.index("reason")]
               for row in cells if row}
    assert reasons[ui_db["cli_dies"]] == "killed by SIGKILL during turn 1"


def test_diff_takes_no_unknown_cost_for_zero(
    server: str, browser: object, ui_db: dict[str, str], tmp_path: Path
) -> None:
    # A session with a cost beside one with none yet (running) or none at all (no
    # model call): the difference was drawn as if the missing cost were $0.
    page = browser.new_page(viewport={"width": 1400, "height": 1000})  # type: ignore[attr-defined]
    for other, said in (("running", "not yet reported"), ("malformed", "— (no model calls)")):
        page.goto(f"{server}/?diff={ui_db['plain']},{ui_db[other]}")
        metric = page.locator("[data-testid='stMetric']").filter(has_text="Cost A → B")
        metric.wait_for(timeout=30_000)
        page.get_by_text(re.compile(r"^cost A \$0\.00096 · B ")).wait_for(timeout=30_000)
        assert said in metric.inner_text()
        assert metric.locator("[data-testid='stMetricDelta']").count() == 0
        page.screenshot(path=str(tmp_path / f"diff-{other}.png"), full_page=True)
    page.goto(f"{server}/?diff={ui_db['plain']},{ui_db['multi_turn']}")
    metric = page.locator("[data-testid='stMetric']").filter(has_text="Cost A → B")
    metric.locator("[data-testid='stMetricDelta']").wait_for(timeout=30_000)
    page.close()


def test_stats_token_chart_draws_over_dates(
    server: str, browser: object, tmp_path: Path, ui_db: dict[str, str]
) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 1000})  # type: ignore[attr-defined]
    timeout = 30_000
    page.goto(f"{server}/stats")
    page.get_by_text("Cost and tokens over time").wait_for(timeout=timeout)
    # The page's tokens and cost in all are usage daily --json's (the same query).
    out = CliRunner().invoke(cli, ["usage", "daily", "--json", "-z", "UTC", "--db", ui_db["url"]])
    assert out.exit_code == 0, out.output
    t = json.loads(out.stdout)["totals"]
    shown = page.get_by_text("In all:").first
    shown.wait_for(timeout=timeout)
    assert shown.inner_text().startswith(
        f"In all: {t['totalTokens']} tokens ({t['inputTokens']} input, {t['outputTokens']} "
        f"output, {t['cacheReadTokens']} cache read, {t['cacheCreationTokens']} cache write), "
        f"cost ${t['totalCost']:.6f}")
    charts = page.locator(".ct-bars")
    charts.nth(1).wait_for(timeout=timeout)
    page.screenshot(path=str(tmp_path / "stats.png"), full_page=True)
    # Drawn at once as boxes of HTML (no Vega): a bar a day, each part naming its
    # day, series and figure; the x axis labelled with dates, not an index.
    days = json.loads(out.stdout)["daily"]
    tokens = charts.nth(1)
    assert tokens.locator(".ct-bar").count() == len(days)
    tips = [t for t in tokens.locator(".ct-bar div").evaluate_all("els => els.map(e => e.title)")]
    first = days[0]
    assert f"{first['date']} · input tokens: {first['inputTokens']:,}" in tips
    assert "day index" not in tokens.inner_text() and first["date"] in tokens.inner_text()
    assert charts.nth(0).locator(".ct-bar").count() == len(days)
    # Each date under its own bar (they were spread over the chart's width, bars
    # being at most 48 px wide: with few days a label stood under another day).
    dates = [d["date"] for d in days]
    for chart in (charts.nth(0), tokens):
        bars = chart.locator(".ct-bar").evaluate_all(
            "els => els.map(e => { const r = e.getBoundingClientRect(); "
            "return [r.left, r.right]; })")
        ticks = chart.locator(".ct-tick").evaluate_all(
            "els => els.map(e => { const r = e.getBoundingClientRect(); "
            "return [(r.left + r.right) / 2, e.dataset.day]; })")
        assert ticks[0][1] == dates[0]
        for centre, day in ticks:
            left, right = bars[dates.index(day)]
            assert left - 1 <= centre <= right + 1, (day, centre, left, right)
    assert page.locator("[data-testid='stVegaLiteChart']").count() == 0
    # The sessions table at 1280 px (a canvas: looked at in the screenshot).
    page.goto(f"{server}/")
    page.locator("[data-testid='stDataFrame']").first.wait_for(timeout=timeout)
    page.wait_for_timeout(1000)
    page.screenshot(path=str(tmp_path / "sessions-1280.png"))
    page.close()


@pytest.mark.parametrize("count", [1, 3, 90])
@pytest.mark.parametrize("width", [330, 720])
def test_stats_dates_never_overlap(browser: object, tmp_path: Path, count: int,
                                   width: int) -> None:
    # Two or three days drew three full dates under bars 48 px wide, one over another.
    import datetime as dt

    from claudetrace.ui.stats import bars_html

    first = dt.date(2026, 9, 1)
    days = [(first + dt.timedelta(days=n)).isoformat() for n in range(count)]
    chart = bars_html(days, {"in": [n + 1 for n in range(count)]}, unit="tokens")
    page = browser.new_page(viewport={"width": 1000, "height": 400})  # type: ignore[attr-defined]
    page.set_content(f'<div style="width:{width}px;font-family:sans-serif">{chart}</div>')
    boxes = page.locator(".ct-tick").evaluate_all(
        "els => els.map(e => { const r = e.getBoundingClientRect(); "
        "return [r.left, r.right, e.dataset.day, e.textContent]; })")
    bars = page.locator(".ct-bar").evaluate_all(
        "els => els.map(e => { const r = e.getBoundingClientRect(); return [r.left, r.right]; })")
    page.screenshot(path=str(tmp_path / f"dates-{count}-{width}.png"))
    page.close()
    assert boxes[0][2:] == [days[0], "Sep 1"]
    assert 1 <= len(boxes) <= 6
    for (_, right, _, _), (left, _, _, _) in itertools.pairwise(boxes):
        assert right + 4 <= left, boxes  # a gap between two dates
    for left, right, day, _ in boxes:
        bar_left, bar_right = bars[days.index(day)]
        assert bar_left - 1 <= (left + right) / 2 <= bar_right + 1
    # The first and last days in full, in the heading.
    assert f"tokens per UTC day · {days[0]}" + (f" to {days[-1]}" if count > 1 else "") in chart


def test_a_click_on_the_cost_header_sorts_by_amount(browser: object, tmp_path: Path) -> None:
    # The cost column is text (it says "unknown", "—", "not yet"): the grid sorted it
    # as text, "$10.0000" before "$2.0000" and "$1,234.5000" first.
    from claudetrace.indexer import open_settled_store
    from claudetrace.recording import RecordingInfo

    db = tmp_path / "costs.db"
    store = open_settled_store(str(db))
    try:
        for n, cost in enumerate([2.0, 10.0, 1.2, None, 0.00096, 1234.5, 0.0]):
            info = RecordingInfo.start(["claude"], name=f"cost-{n}")
            store.create_recording(info)
            store.update_recording(
                info.id, ended_ns=info.started_ns + 10**9, exit_code=0, outcome="ok",
                cost_usd=cost or 0.0, cost_source="unknown" if cost in (None, 0.0) else "cli",
                model_calls=0 if cost == 0.0 else 1,  # no call: "—"; None: "unknown"
                models={"claude-new": {"cost_usd": None}} if cost is None else {})
    finally:
        store.close()
    with ui_server(str(db), tmp_path) as base:
        page = browser.new_page(viewport={"width": 2400, "height": 1000})  # type: ignore[attr-defined]
        page.goto(f"{base}/")
        grid = page.locator("[data-testid='stDataFrame']").first
        heads = grid.locator("[role='columnheader']")
        heads.filter(has_text="cost source").wait_for(state="attached", timeout=60_000)

        def costs() -> list[str]:
            names = [h.strip("↑↓ \n") for h in heads.all_inner_texts()]
            at = names.index("cost")
            return [cells[at].strip() for r in grid.locator("[role='row']").all()
                    if (cells := r.locator("[role='gridcell']").all_inner_texts())]

        # The header is drawn on the grid's canvas: click on it where the cost
        # column should be, halving the span by the column each click sorted (a
        # sorted column's header reads "↑ cost", then "↓ cost").
        box = grid.locator("canvas").first.bounding_box()
        assert box is not None
        left, right = box["x"] + 40, box["x"] + box["width"]
        marked: list[str] = []
        nudge = 0.0
        for _ in range(20):
            page.mouse.click((left + right) / 2 + nudge, box["y"] + 17)
            for _ in range(40):  # until the grid marks the column it sorted
                names = [h.strip() for h in heads.all_inner_texts()]
                now = [h for h in names if h[:1] in "↑↓"]
                if now and now != marked:
                    break
                page.wait_for_timeout(50)
            if now == marked:
                # The click hit a header's menu button (it opened the column's
                # menu and sorted nothing): close the menu, click a little left.
                page.keyboard.press("Escape")
                nudge -= 15
                continue
            nudge = 0.0
            marked = now
            if marked == ["↑ cost"]:
                break
            order = [h.strip("↑↓ ") for h in names]
            if marked and order.index(marked[0].strip("↑↓ ")) < order.index("cost"):
                left = (left + right) / 2
            else:
                right = (left + right) / 2
        page.screenshot(path=str(tmp_path / "sorted-costs.png"))
        assert costs() == ["$0.00096", "$1.2000", "$2.0000", "$10.0000", "$1,234.5000",
                           "—", "unknown"]
        page.close()


def test_the_stats_chart_draws_the_days_without_usage(browser: object, tmp_path: Path) -> None:
    # Usage on a Monday and a Thursday: the two bars stood side by side, as if the
    # days were one after the other.
    import datetime as dt

    from claudetrace.cassette import Cassette, read_cassette
    from claudetrace.indexer import open_settled_store
    from claudetrace.model.events import Event

    plain = read_cassette(Path(__file__).parent / "fixtures" / "cassettes" / "plain.ndjson")
    monday = int(dt.datetime(2026, 11, 23, 12, tzinfo=dt.timezone.utc).timestamp()) * 10**9
    db = tmp_path / "days.db"
    store = open_settled_store(str(db))
    try:
        for n, day in enumerate((0, 3)):  # Monday, Thursday
            shift = monday + day * 86_400 * 10**9 - plain.header["started_ns"]
            header = {**plain.header, "recording_id": f"01DAY{n}", "session_id": f"day-{n}",
                      "started_ns": plain.header["started_ns"] + shift,
                      "ended_ns": plain.header["ended_ns"] + shift}
            # Message ids of its own: usage counts an API message once in a store.
            ids = (b"msg_fake_", b"msg_day%d_" % n)
            events = [Event(e.seq, e.direction, e.t_ns, e.data.replace(*ids))
                      for e in plain.events]
            store.import_cassette(Cassette(header, events), name=f"day-{n}")
    finally:
        store.close()
    with ui_server(str(db), tmp_path) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 1000})  # type: ignore[attr-defined]
        page.goto(f"{base}/stats")
        charts = page.locator(".ct-bars")
        charts.nth(1).wait_for(timeout=60_000)
        page.screenshot(path=str(tmp_path / "stats-gap.png"), full_page=True)
        for chart in (charts.nth(0), charts.nth(1)):  # cost, tokens
            parts = chart.locator(".ct-bar").evaluate_all("els => els.map(e => e.children.length)")
            assert [n > 0 for n in parts] == [True, False, False, True]
            assert "2026-11-23 to 2026-11-26" in chart.inner_text()
        page.close()
