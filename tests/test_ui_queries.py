"""The browser's bounded SQL, on a store seeded with real-CLI recordings."""

from __future__ import annotations

import datetime as dt

import pytest

from claudetrace.indexer import open_settled_store
from claudetrace.model import FAILED
from claudetrace.store import Store
from claudetrace.store import browse as queries
from claudetrace.store.usage import store_reader
from claudetrace.ui.sessions import Filters
from claudetrace.ui.stats import daily_usage, tool_rates
from claudetrace.usage import costed


@pytest.fixture
def store(ui_db: dict[str, str]) -> Store:
    return open_settled_store(ui_db["url"])


def names(recs: list) -> set[str]:
    return {r.name for r in recs}


def test_list_is_newest_first_and_reads_summary_columns(
    store: Store, ui_db: dict[str, str]
) -> None:
    recs = queries.list_sessions(store, Filters())
    assert len(recs) == len(ui_db) - 1
    assert [r.started_ns for r in recs] == sorted((r.started_ns for r in recs), reverse=True)
    assert len(queries.list_sessions(store, Filters(), limit=3)) == 3


def test_text_search_finds_messages_case_insensitively(store: Store) -> None:
    assert names(queries.list_sessions(store, Filters(text="very LONG story"))) == {"interrupt"}
    assert names(queries.list_sessions(store, Filters(text="hooked"))) == {"hooks"}
    assert queries.list_sessions(store, Filters(text="100% _nothing_ like this")) == []


def test_search_matches_what_people_read_not_ids_or_keys(store: Store) -> None:
    # Every message id is msg_fake_…: an id is not text anyone wrote; "fake" is
    # found only where a message says it.
    assert queries.list_sessions(store, Filters(text="msg_fake")) == []
    assert "plain" in names(queries.list_sessions(store, Filters(text="fake model")))
    assert queries.list_sessions(store, Filters(text="tool_use_id")) == []  # a JSON key
    # A tool's name and its arguments are found.
    assert names(queries.list_sessions(store, Filters(text="touch created.txt"))) >= {
        "permission_allow", "permission_deny"}
    assert "mcp_tool" in names(queries.list_sessions(store, Filters(text="mcp__calc__add")))


def test_search_matches_json_escaped_text(store: Store) -> None:
    # Hosts send JSON with ensure_ascii: quotes and non-ASCII arrive escaped.
    assert names(queries.list_sessions(store, Filters(text="Set model to `claude-sonnet-5`"))) == {
        "set_model_and_mode"
    }


def test_filters_model_cost_dates_errors(store: Store, ui_db: dict[str, str]) -> None:
    everything = queries.list_sessions(store, Filters())
    assert queries.models(store) == ["claude-opus-5-5", "claude-sonnet-5"]
    assert names(queries.list_sessions(store, Filters(models=("nope",)))) == set()
    assert len(queries.list_sessions(store, Filters(models=("claude-opus-5-5",)))) >= 8
    # The bounds are on the cost the list shows, ``usage``'s (each message counted
    # once: the fixture's sessions share the fake API's message ids).
    cheap = costed(store_reader(store), queries.list_sessions(store, Filters(max_cost=0.001)))
    assert cheap and all(r.cost <= 0.001 for r in cheap)
    dear = costed(store_reader(store), queries.list_sessions(store, Filters(min_cost=0.0015)))
    assert dear and all(r.cost >= 0.0015 for r in dear)
    tomorrow = dt.datetime.now(dt.timezone.utc).date() + dt.timedelta(days=1)
    assert queries.list_sessions(store, Filters(since=tomorrow)) == []
    assert len(queries.list_sessions(store, Filters(until=tomorrow))) == len(everything)
    errors = names(queries.list_sessions(store, Filters(errors_only=True)))
    assert "cli_dies" in errors and "permission_deny" in errors  # killed CLI; failed tool
    assert "plain" not in errors and "still-running" not in errors


def test_raw_page_count_and_types(store: Store, ui_db: dict[str, str]) -> None:
    rid = ui_db["mcp_tool"]
    total = queries.raw_count(store, rid)
    assert total == 18
    page = queries.raw_page(store, rid, offset=5, limit=4)
    assert [r.seq for r in page] == [5, 6, 7, 8]
    ins = queries.raw_page(store, rid, directions=["in"])
    assert ins and all(r.direction == "in" for r in ins)
    assert queries.raw_count(store, rid, types=["control_request"]) == 5
    assert "control_response" in queries.line_types(store, rid)
    malformed = ui_db["malformed"]
    assert "(not JSON)" in queries.line_types(store, malformed)
    assert queries.raw_count(store, malformed, types=["(not JSON)"]) == 2
    ev = queries.event_at(store, malformed, 4)
    assert ev is not None and ev.data == b"\xff\xfe binary"
    assert queries.event_at(store, malformed, 99) is None


def test_conversation_events_skip_deltas(store: Store, ui_db: dict[str, str]) -> None:
    evs = queries.conversation_events(store, ui_db["multi_turn"])
    assert evs and not any(e.type == "stream_event" for e in evs)
    assert [
        e.seq
        for e in queries.conversation_events(store, ui_db["multi_turn"], start_seq=10, limit=2)
    ] == [10, 11]
    assert {e.type for e in queries.control_events(store, ui_db["hooks"])} == {
        "control_request",
        "control_response",
    }


def test_tool_usage_and_failure_rates(store: Store) -> None:
    usage = queries.tool_usage(store)
    calls, failures = usage["Bash"]
    assert calls >= 4 and failures == 1  # permission_deny's refused Bash
    rates = {r["tool"]: r for r in tool_rates(usage)}
    assert rates["Bash"]["failure rate"] == pytest.approx(1 / calls)
    assert usage["mcp__calc__add"] == (1, 0)


def test_tool_usage_reads_stored_figures_as_the_events_say(
    ui_db: dict[str, str], tmp_path
) -> None:
    """Ended recordings' tool calls come from their stored figures; the counts are
    what their events say, and a recording without figures (stored before 0006)
    is counted from its events."""
    import shutil

    from claudetrace.model import summary

    copy = tmp_path / "ui.db"
    shutil.copy(ui_db["url"], copy)
    store = open_settled_store(str(copy))
    try:
        ids = [r.id for r in store.list_recordings()]
        from_events = queries._tool_usage_from_events(store, ids)
        assert queries.tool_usage(store) == from_events
        stored = [i for i in ids if store.get(i).figures is not None]
        assert stored and from_events["Bash"][1] == 1
        # Figures that say something else are what is counted (they are read)...
        store.update_recording(ui_db["permission_deny"], figures={"tools": [
            ["Bash", "error", None], ["Bash", "error", None]]})
        assert queries.tool_usage(store)["Bash"][1] == 2
        # ...summed (as stored since) as well as one record a call (as before)...
        assert not any(summary.is_records(store.get(i).figures) for i in stored
                       if i != ui_db["permission_deny"])
        store.update_recording(ui_db["permission_deny"], figures={"tool_calls": [
            ["Bash", "error", 3]]})
        assert queries.tool_usage(store)["Bash"][1] == 3
        # ...and a recording without them is counted from its events.
        store.update_recording(ui_db["permission_deny"], figures=None)
        assert queries.tool_usage(store) == from_events
    finally:
        store.close()


def test_daily_usage(store: Store, ui_db: dict[str, str]) -> None:
    days = daily_usage(queries.sessions_per_day(store))
    assert [d["day"] for d in days] == sorted(d["day"] for d in days)
    everyone = queries.list_sessions(store, Filters())
    assert sum(d["sessions"] for d in days) == len(ui_db) - 1 == len(everyone)
    # The database's counts per day are the Python ones over every recording.
    by_day: dict[dt.date, list[int]] = {}
    for rec in everyone:
        day = dt.datetime.fromtimestamp(rec.started_ns / 1e9, tz=dt.timezone.utc).date()
        by_day.setdefault(day, [0, 0])
        by_day[day][0] += 1
        by_day[day][1] += rec.status in FAILED
    assert {d["day"]: [d["sessions"], d["errors"]] for d in days} == by_day
    assert sum(d["errors"] for d in days) >= 1


def test_filters_by_tool_status_source_project_and_tag(
    store: Store, ui_db: dict[str, str]
) -> None:
    bash = names(queries.list_sessions(store, Filters(tools=("Bash",))))
    assert {"permission_allow", "permission_deny", "streamed_tools"} <= bash
    assert "plain" not in bash
    assert names(queries.list_sessions(store, Filters(statuses=("running",)))) == {"still-running"}
    killed = names(queries.list_sessions(store, Filters(statuses=("killed",))))
    everyone = queries.list_sessions(store, Filters())
    assert killed == {r.name for r in everyone if r.status == "killed"}
    assert killed  # cli_dies
    assert names(queries.list_sessions(store, Filters(sources=("proxy",)))) == {"still-running"}
    cwd = next(r.cwd for r in everyone if r.name == "plain")
    assert "plain" in names(queries.list_sessions(store, Filters(projects=(cwd,))))
    assert queries.list_sessions(store, Filters(projects=("/nowhere",))) == []
    assert queries.list_sessions(store, Filters(tags=("team=none",))) == []
    choices = queries.choices(store)
    assert "Bash" in choices["tools"] and cwd in choices["projects"]
    assert set(choices["sources"]) == {r.source for r in everyone}


def test_first_prompts_of_a_page_of_sessions(store: Store, ui_db: dict[str, str]) -> None:
    prompts = queries.first_prompts(store, [ui_db["plain"], ui_db["permission_deny"],
                                            ui_db["running"]])
    assert prompts[ui_db["plain"]] == "Say hello."
    assert prompts[ui_db["permission_deny"]] == "Create created.txt with touch."
    assert queries.first_prompts(store, []) == {}


def test_summary_figures_and_pages_counted_in_sql_match_python(tmp_path) -> None:
    from claudetrace.store import open_store
    from tests.summaries import check_summaries, seed_statuses

    store = open_store(str(tmp_path / "summary.db"))
    try:
        seed_statuses(store, "sqlite")
        check_summaries(store, "sqlite")
    finally:
        store.close()


def test_the_cost_filter_and_tile_use_usage_s_cost(store: Store, ui_db: dict[str, str]) -> None:
    # A proxied session whose CLI reported 0.002952 $, of which usage counts
    # 0.000984 $ here (its other messages' ids are counted in another recording):
    # the list shows usage's figure, and the filter and the tile say the same.
    (rec,) = [r for r in queries.list_sessions(store, Filters()) if r.id == ui_db["subagent"]]
    (shown,) = costed(store_reader(store), [rec])
    assert rec.cost == pytest.approx(0.002952) and shown.cost == pytest.approx(0.000984)
    ids = {r.id for r in queries.list_sessions(store, Filters(max_cost=0.001))}
    assert ui_db["subagent"] in ids
    ids = {r.id for r in queries.list_sessions(store, Filters(min_cost=0.002))}
    assert ui_db["subagent"] not in ids
    every = costed(store_reader(store), queries.list_sessions(store, Filters()))
    tile = queries.summary(store, Filters())
    # (usage rounds each figure to 1e-9 $)
    assert tile.total_cost == pytest.approx(sum(r.cost or 0.0 for r in every), abs=1e-8)


def test_the_stats_pages_cost_in_all_says_which_part_is_estimated() -> None:
    from claudetrace.store.usage import Figures
    from claudetrace.ui.stats import usage_total
    from claudetrace.usage import Totals

    cli = Totals()
    cli.add("m", "cli", Figures(10, 5, 0, 0, 0.25, 1))
    assert usage_total({"d": cli}).endswith("cost $0.250000")
    estimate = Totals()
    estimate.add("m", "estimate", Figures(10, 5, 0, 0, 0.5, 1))
    assert usage_total({"d": estimate}).endswith("cost $0.500000 (estimate)")
    # A mix was all called an estimate: the CLI's part is its own.
    assert usage_total({"a": cli, "b": estimate}).endswith(
        "cost $0.750000 ($0.250000 the CLI's + ~$0.500000 estimated)")


def test_a_page_of_the_list_asks_the_search_index_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    saying = queries.recordings_saying

    def counted(s: Store, text: str) -> list[str]:
        asked.append(text)
        return saying(s, text)

    monkeypatch.setattr(queries, "recordings_saying", counted)
    # Each query asks it once (the tiles' and the page's asked it twice each).
    assert queries.summary(store, Filters(text="hooked")).count == 1
    assert names(queries.list_sessions(store, Filters(text="hooked"))) == {"hooks"}
    assert asked == ["hooked", "hooked"]
    # The page asks once for both; the filters stay the same filters.
    asked.clear()
    filters = queries.searched(store, Filters(text="hooked"))
    assert filters == Filters(text="hooked")
    assert filters.to_params() == {"q": "hooked"}
    assert queries.summary(store, filters).count == 1
    assert names(queries.list_sessions(store, filters, limit=50)) == {"hooks"}
    assert asked == ["hooked"]


def test_the_total_cost_tile_is_the_sum_of_the_costs_shown(tmp_path) -> None:
    from claudetrace.store import open_store
    from tests.summaries import check_tile_cost

    store = open_store(str(tmp_path / "tiles.db"))
    try:
        check_tile_cost(store)
    finally:
        store.close()


def store_running(store: Store, name: str, events: list) -> str:
    """A recording of ``events`` that counts as running (its proxy's pid is ours,
    its heartbeat an hour ahead); its id."""
    import os
    import time

    from claudetrace.recording import RecordingInfo

    info = RecordingInfo.start(["claude", "--output-format", "stream-json"], name=name)
    info.pid = os.getpid()  # a live pid on this host: the recording counts as running
    store.create_recording(info)
    store.write_batch(info.id, events, {"last_seen_ns": time.time_ns() + 3_600_000_000_000})
    return info.id


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_the_new_lines_of_many_running_sessions_are_read_in_one_statement(
    engine: str, tmp_path, request: pytest.FixtureRequest,
) -> None:
    from pathlib import Path

    from sqlalchemy import event

    from claudetrace.cassette import read_cassette

    if engine == "sqlite":
        url = str(tmp_path / "many.db")
    else:
        from tests.test_store_postgres import fresh_database

        url = fresh_database(request.getfixturevalue("pg_server"), "m_ui_running_lines")
    store = open_settled_store(url)
    plain = read_cassette(Path(__file__).parent / "fixtures" / "cassettes" / "plain.ndjson")
    ids = [store_running(store, f"r{n}", plain.events[: 2 + n % 5]) for n in range(30)]
    statements: list[str] = []
    event.listen(store.engine, "before_cursor_execute",
                 lambda *args: statements.append(args[2]))
    starts = {rid: n % 3 for n, rid in enumerate(ids)}
    got = queries.events_since(store, starts)
    assert len(statements) == 1
    for n, rid in enumerate(ids):
        assert [e.seq for e in got[rid]] == list(range(n % 3, 2 + n % 5))
        assert [e.data for e in got[rid]] == [e.data for e in plain.events[n % 3: 2 + n % 5]]
    # Pages of a few lines: every line once, in order, whatever the page's cut.
    paged = queries.events_since(store, starts, chunk=7)
    assert {rid: [e.seq for e in evs] for rid, evs in paged.items()} == {
        rid: [e.seq for e in evs] for rid, evs in got.items()}
    store.close()
