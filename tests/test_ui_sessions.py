"""Session rows, tiles and filters (pure)."""

from __future__ import annotations

import datetime as dt

import pytest

from claudetrace.store.models import Recording
from claudetrace.ui.sessions import Filters, percentile, session_row, tiles_of


def rec(**kw: object) -> Recording:
    base = dict(
        id="01ABC",
        started_ns=1_700_000_000_000_000_000,
        ended_ns=1_700_000_002_000_000_000,
        exit_code=0,
        event_count=10,
        turns=1,
        tool_calls=2,
        tool_errors=0,
        input_tokens=10,
        output_tokens=5,
        cache_read_tokens=100,
        cache_creation_tokens=0,
        cost_usd=0.5,
        is_error=False,
        tags={"b": "2", "a": "1"},
        host="elsewhere",
        source="import",
    )
    base.update(kw)
    return Recording(**base)


def test_session_row_from_summary_columns() -> None:
    row = session_row(rec(model="claude-x", claude_code_version="2.1.330"))
    assert row["status"] == "ok" and row["error"] is False
    assert row["duration (s)"] == 2.0 and row["tokens"] == 115
    assert row["tags"] == "a=1, b=2"
    assert row["started"] == dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.timezone.utc)
    failed = session_row(rec(exit_code=1, outcome="error", outcome_reason="exit code 1"))
    assert failed["error"] is True and failed["reason"] == "exit code 1"
    assert list(row)[:3] == ["id", "status", "exit"]
    assert session_row(rec(signal=9, exit_code=None, source="proxy"))["exit"] == "signal 9"
    assert session_row(rec(exit_code=3, source="proxy"))["exit"] == "3"
    # A transcript saw no process: "unknown" as the CLI says, not None.
    assert session_row(rec(exit_code=None, source="transcript"))["exit"] == "unknown"
    # A running session (host and pid alive) has no cost yet rather than $0.
    import os
    running = rec(ended_ns=None, exit_code=None, cost_usd=0.0, host=os.uname().nodename,
                  pid=os.getpid(), source="proxy", last_seen_ns=4_000_000_000_000_000_000)
    assert session_row(running)["status"] == "running"
    assert session_row(running)["cost"] == "not yet"
    # An unknown cost is the word every view says, never None or $0.
    assert row["cost"] == "$0.5000"
    unpriced = rec(cost_usd=None, model_calls=2, models={"claude-new": {"cost_usd": None}})
    assert session_row(unpriced)["cost"] == "unknown"
    assert session_row(rec(cost_usd=None, model_calls=0))["cost"] == "—"
    assert (row["project"], row["source"]) == ("", "import")


def test_tiles() -> None:
    recs = [
        rec(cost_usd=c, ended_ns=1_700_000_000_000_000_000 + d * 10**9, exit_code=e,
            outcome="error" if e else "ok")
        for c, d, e in [(1.0, 1, 0), (2.0, 2, 0), (0.5, 10, 1), (0.0, 3, 0)]
    ]
    t = tiles_of(recs)
    assert t.count == 4 and t.total_cost == 3.5 and t.error_rate == 0.25 and t.running == 0
    assert t.p95_duration_s == pytest.approx(percentile([1, 2, 10, 3], 0.95))
    empty = tiles_of([])
    assert empty.count == 0 and empty.error_rate is None and empty.p95_duration_s is None


def test_percentile() -> None:
    assert percentile([], 0.5) is None
    assert percentile([5.0], 0.95) == 5.0
    assert percentile([1, 2, 3, 4], 0.5) == 2.5
    assert percentile(list(range(101)), 0.95) == 95


def test_filters_round_trip_through_query_params() -> None:
    f = Filters(
        since=dt.date(2026, 1, 1),
        until=dt.date(2026, 1, 31),
        models=("a", "b"),
        errors_only=True,
        min_cost=0.01,
        max_cost=2.0,
        text="hello world",
        tools=("Bash", "mcp__x__y"),
        tags=("team=a,b", "env=prod"),
        statuses=("error", "running"),
        projects=("/home/dev/app, with a comma",),
        sources=("transcript",),
    )
    assert Filters.from_params(f.to_params()) == f
    assert Filters().to_params() == {}
    assert f.until_ns - f.since_ns == 31 * 86_400 * 10**9


def test_bad_query_params_are_ignored() -> None:
    f = Filters.from_params(
        {"since": "yesterday", "min_cost": "lots", "max_cost": "nan", "errors": "0"}
    )
    assert f == Filters()


def test_status_and_its_reason_come_first_in_the_table() -> None:
    from claudetrace.ui.sessions import TABLE_COLUMNS

    assert TABLE_COLUMNS[:3] == ("open", "status", "reason")
    row = session_row(rec())
    assert set(TABLE_COLUMNS) - {"open"} <= set(row)


def test_token_chart_has_a_time_axis_and_draws_a_single_day() -> None:
    import datetime as dt

    from claudetrace.ui.stats import token_chart

    one_day = [{"day": "2023-11-14", "input tokens": 5, "output tokens": 7,
                "cache read tokens": 0, "cache write tokens": 0}]
    data = token_chart(one_day)
    assert data["day"] == [dt.date(2023, 11, 14).isoformat()]
    assert data["input tokens"] == [5] and data["output tokens"] == [7]


def test_the_chart_has_a_bar_for_every_day_between_the_first_and_last() -> None:
    # Usage on a Monday and a Thursday drew the two bars side by side.
    from claudetrace.ui.stats import token_chart

    rows = [{"day": "2026-11-23", "input tokens": 5, "cost ($)": 0.5},
            {"day": "2026-11-26", "input tokens": 7, "cost ($)": None}]
    data = token_chart(rows)
    assert data["day"] == ["2026-11-23", "2026-11-24", "2026-11-25", "2026-11-26"]
    assert data["input tokens"] == [5, 0, 0, 7] and data["output tokens"] == [0, 0, 0, 0]
    assert data["cost ($)"] == [0.5, 0, 0, 0]
    # Across a month's end, and rows whose day is no date kept as they are.
    assert token_chart([{"day": "2026-11-30"}, {"day": "2026-12-02"}])["day"] == [
        "2026-11-30", "2026-12-01", "2026-12-02"]
    assert token_chart([{"day": "x"}, {"day": "2026-12-02"}])["day"] == ["x", "2026-12-02"]


def test_bars_stack_a_day_per_bar_and_escape_every_text() -> None:
    from claudetrace.ui.stats import bars_html

    html = bars_html(["2026-11-01", "<b>x</b>"], {"in": [30, 0], "out": [10, None]},
                     unit="tokens")
    assert html.count('class="ct-bar"') == 2
    # Parts sized against the tallest bar, each saying its day, series and figure.
    assert 'title="2026-11-01 · in: 30" style="height:75.000%' in html
    assert 'title="2026-11-01 · out: 10" style="height:25.000%' in html
    assert "<b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
    assert "<span>40</span><span>20</span><span>0</span>" in html  # the y axis
    # No day, or nothing but zeros: an empty frame, no division by zero.
    assert bars_html([], {"in": []}, unit="tokens").count('class="ct-bar"') == 0
    assert "height:" in bars_html(["2026-11-01"], {"in": [0]}, unit="tokens")


def test_amounts_sort_as_amounts_in_a_text_column() -> None:
    # The grid sorts a text column as text: "$10.0000" came before "$2.0000".
    from claudetrace.ui.sessions import FIGURE_SPACE, sortable_amounts

    cells = ["$2.0000", "unknown", "$10.0000", "—", "$1,234.5000", "$0.00096", "not yet"]
    padded = sortable_amounts(cells)
    assert [c.lstrip(FIGURE_SPACE) for c in padded] == cells  # they read the same
    # Every amount's whole part as wide as the widest's (the browser's collation,
    # which orders a figure space before "$" and digits, does the rest: Chromium's
    # sort is checked in tests/test_ui_browser.py).
    assert {len(c.split(".")[0]) for c in padded if "$" in c} == {len(" $1,234")}
    assert sortable_amounts(["unknown", "—"]) == ["unknown", "—"]
