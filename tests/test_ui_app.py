"""Every page of the session browser through Streamlit's AppTest, on a seeded store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

import claudetrace.ui
from claudetrace.cassette import read_cassette
from claudetrace.indexer import open_settled_store
from tests.test_ui_queries import store_running

APP = str(Path(claudetrace.ui.__file__).with_name("app.py"))


@pytest.fixture
def app(ui_db: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("CLAUDETRACE_DB", ui_db["url"])
    return AppTest.from_file(APP, default_timeout=60)


def run(at: AppTest, **params: str) -> AppTest:
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def unescape(text: str) -> str:
    return text.replace("\\", "")


def all_text(at: AppTest) -> str:
    parts = [t.value for t in at.text] + [unescape(c.value) for c in at.caption]
    parts += [unescape(e.label) for e in at.expander] + [c.value for c in at.code]
    parts += [unescape(x.value) for x in (*at.error, *at.warning, *at.info, *at.success)]
    return "\n".join(parts)


def test_session_list_with_tiles(app: AppTest, ui_db: dict[str, str]) -> None:
    at = run(app)
    assert at.title[0].value == "Sessions"
    m = metrics(at)
    assert m["Sessions"] == str(len(ui_db) - 1) and m["Running"] == "1"
    assert m["Total cost"].startswith("$") and m["Error rate"].endswith("%")
    table = at.dataframe(key="sessions_table").value
    assert set(table["id"]) == {v for k, v in ui_db.items() if k != "url"}
    statuses = {status for cell in table["status"] for status in cell}
    assert "still-running" in set(table["name"]) and "running" in statuses
    # A failure's status and failed tools are red labels (no pandas Styler: its per-cell
    # CSS cost 0.29 s a page of 500 rows).
    columns = json.loads(at.dataframe(key="sessions_table").proto.columns)
    status = columns["status"]["type_config"]
    assert status["type"] == "multiselect"
    colours = {o["value"]: o.get("color") for o in status["options"]}
    assert colours["error"] == colours["killed"] == "#c62828" and colours["ok"] == "gray"
    assert columns["tool errors"]["type_config"]["type"] == "multiselect"


def test_the_list_pages_from_the_url_and_its_picker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from claudetrace.store import open_store
    from claudetrace.ui.bench import seed

    store = open_store(str(tmp_path / "many.db"))
    try:
        seed(store, sessions=520, lines=20)  # 521 recordings: two pages of 500
    finally:
        store.close()
    monkeypatch.setenv("CLAUDETRACE_DB", str(tmp_path / "many.db"))
    at = run(AppTest.from_file(APP, default_timeout=60), page="2")
    second = list(at.dataframe(key="sessions_table").value["id"])
    assert len(second) == 21 and at.number_input(key="list_page").value == 2
    at.number_input(key="list_page").set_value(1).run()
    assert not at.exception, at.exception
    first = list(at.dataframe(key="sessions_table").value["id"])
    assert "page" not in at.query_params and at.number_input(key="list_page").value == 1
    assert len(first) == 500 and not set(first) & set(second)


def test_filters_narrow_the_list_and_land_in_the_url(app: AppTest, ui_db: dict[str, str]) -> None:
    at = run(app)
    at.text_input(key="f_text").input("hooked").run()
    assert metrics(at)["Sessions"] == "1"
    assert at.query_params["q"] == "hooked"
    assert list(at.dataframe(key="sessions_table").value["name"]) == ["hooks"]
    at.text_input(key="f_text").input("").run()
    at.toggle(key="f_errors").set_value(True).run()
    names = set(at.dataframe(key="sessions_table").value["name"])
    assert "cli_dies" in names and "plain" not in names
    assert at.query_params["errors"] == "1"
    at.multiselect(key="f_model").set_value(["claude-sonnet-5"]).run()
    assert metrics(at)["Sessions"] == "0"
    assert any("No session matches" in i.value for i in at.info)


def test_filters_are_read_back_from_the_url(app: AppTest) -> None:
    at = run(app, q="very long story")
    assert list(at.dataframe(key="sessions_table").value["name"]) == ["interrupt"]
    assert at.text_input(key="f_text").value == "very long story"


def test_a_new_page_draws_the_list_before_its_filters_and_keeps_what_they_say(
    app: AppTest, ui_db: dict[str, str]
) -> None:
    """A new browser page draws the list first (its widgets after it); a URL's filter
    the widgets cannot show (a model no recording has) is dropped, as before."""
    at = run(app, model="no-such-model", q="hooked")
    assert metrics(at)["Sessions"] == "1"
    assert at.multiselect(key="f_model").value == []
    assert "model" not in at.query_params and at.query_params["q"] == "hooked"
    assert list(at.dataframe(key="sessions_table").value["name"]) == ["hooks"]
    at = run(AppTest.from_file(APP, default_timeout=60), model="no-such-model")
    assert metrics(at)["Sessions"] == str(len(ui_db) - 1)


def test_selecting_one_row_opens_it_two_rows_offer_a_diff(app: AppTest) -> None:
    at = run(app)
    table = at.dataframe(key="sessions_table").value
    at.session_state["sessions_table"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    at.button(key="open_selected").click().run()
    assert at.query_params["session"] == table["id"][0]
    assert "Status" in metrics(at)
    at = run(AppTest.from_file(APP, default_timeout=60))
    at.session_state["sessions_table"] = {"selection": {"rows": [1, 2], "columns": [], "cells": []}}
    at.run()
    at.button(key="diff_selected").click().run()
    assert at.query_params["diff"] == f"{table['id'][1]},{table['id'][2]}"
    assert at.title[0].value == "Diff"


def test_open_by_id_prefix(app: AppTest, ui_db: dict[str, str]) -> None:
    at = run(app)
    at.text_input(key="open_id").input(ui_db["hooks"][:20])
    at.button[-1].click().run()  # the form's submit button
    assert at.query_params["session"] == ui_db["hooks"]  # the prefix is pinned to the id
    assert at.title[0].value == "hooks"


def test_empty_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from claudetrace.indexer import open_settled_store

    monkeypatch.setenv("CLAUDETRACE_DB", str(tmp_path / "empty.db"))
    at = run(AppTest.from_file(APP, default_timeout=60))  # a page never makes a database
    assert "no database at" in unescape(at.error[0].value)
    assert not (tmp_path / "empty.db").exists()
    open_settled_store(str(tmp_path / "empty.db")).close()  # as `claudetrace ui` leaves it
    at = run(AppTest.from_file(APP, default_timeout=60))
    assert metrics(at)["Sessions"] == "0"
    assert any("No recordings yet" in i.value for i in at.info)
    at = run(AppTest.from_file(APP, default_timeout=60), session="latest")
    assert "no recordings yet" in unescape(at.error[0].value)


def test_missing_session_id_in_the_url(app: AppTest) -> None:
    at = run(app, session="01NOPE")
    assert "no recording matches" in unescape(at.error[0].value)
    at.button(key="back_missing").click().run()
    assert "session" not in at.query_params
    assert at.title[0].value == "Sessions"


def test_conversation_tab(app: AppTest, ui_db: dict[str, str]) -> None:
    at = run(app, session=ui_db["permission_deny"])
    m = metrics(at)
    assert m["Status"] == "ok" and m["Turns"] == "1" and m["Tool calls"] == "1"
    text = all_text(at)
    assert "Create created.txt with touch." in text and "I was not allowed to." in text
    (tool,) = [e for e in at.expander if "Bash" in e.label]
    assert "failed" in tool.label and "permission deny" in tool.label
    (detail,) = [t.value for t in tool.text]
    assert "permission Bash → deny" in detail and "Not in this test." in detail


def test_stored_warnings_are_shown_on_the_session_page(app: AppTest, ui_db: dict[str, str]) -> None:
    at = run(app, session=ui_db["warned"])
    warnings = [unescape(w.value) for w in at.warning]
    assert any("OTLP export to http://127.0.0.1:9/v1/traces failed" in w for w in warnings)
    at = run(AppTest.from_file(APP, default_timeout=60), session=ui_db["plain"])
    assert not any("OTLP export" in unescape(w.value) for w in at.warning)


def test_malformed_lines_are_shown_as_text(app: AppTest, ui_db: dict[str, str]) -> None:
    at = run(app, session=ui_db["malformed"])
    codes = [c.value for c in at.code]
    assert any("{not json <b>bold</b>" in c for c in codes)  # shown verbatim, not as HTML
    assert any("binary" in c for c in codes)
    at = run(AppTest.from_file(APP, default_timeout=60), session=ui_db["malformed"], tab="raw")
    raw = at.dataframe[0].value
    assert list(raw["type"])[-2:] == ["(not JSON)", "(not JSON)"]
    at.number_input(key="raw_line").set_value(3).run()
    assert any("{not json" in c.value for c in at.code)


def test_a_timeline_url_opens_the_trace_tab(app: AppTest, ui_db: dict[str, str]) -> None:
    """The Timeline tab (a waterfall of a second walk of the lines) is the Trace tab's
    span tree now: a link to it still opens the session's spans, and says trace."""
    at = run(app, session=ui_db["hooks"], tab="timeline")
    assert "Timeline" not in at.segmented_control(key="tab_picker").options
    assert at.query_params["tab"] == "trace"
    assert any("agent → turn → model call / tool" in c.value for c in at.caption)
    assert 'data-kind="tool"' in html_of(at) and not at.get("plotly_chart")


def test_control_plane_tab(app: AppTest, ui_db: dict[str, str]) -> None:
    at = run(app, session=ui_db["interrupt"], tab="control")
    m = metrics(at)
    assert m["Control requests"] == "2" and m["Unanswered"] == "0"
    table = at.dataframe[0].value
    assert list(table["subtype"]) == ["initialize", "interrupt"]


def test_raw_tab_filters_pages_and_download(app: AppTest, ui_db: dict[str, str]) -> None:
    at = run(app, session=ui_db["mcp_tool"], tab="raw")
    assert len(at.dataframe[0].value) == 18
    at.multiselect(key="raw_dir").set_value(["in"]).run()
    raw = at.dataframe[0].value
    assert set(raw["dir"]) == {"in"} and at.query_params["dir"] == "in"
    at.multiselect(key="raw_type").set_value(["control_response"]).run()
    assert set(at.dataframe[0].value["type"]) == {"control_response"}
    assert at.get("download_button")


def test_tab_switch_is_kept_in_the_url(app: AppTest, ui_db: dict[str, str]) -> None:
    at = run(app, session=ui_db["plain"])
    at.segmented_control(key="tab_picker").set_value("raw").run()
    assert at.query_params["tab"] == "raw"
    assert at.dataframe[0] is not None


def test_running_session_is_flagged_live(app: AppTest, ui_db: dict[str, str]) -> None:
    at = run(app, session=ui_db["running"], live="")
    m = metrics(at)
    assert m["Status"] == "running"
    # What it is doing and when it last said something, not None or $0.0000.
    said = " ".join(i.value for i in at.info).replace("\\", "")
    assert "thinking" in said and "last event" in said and "UTC (+" in said
    assert m["Cost"] == "not yet reported"
    facts = " ".join(c.value for c in at.caption)
    assert "CLI not yet" in facts and "exit not yet" in facts and "None" not in facts


def test_diff_page(app: AppTest, ui_db: dict[str, str]) -> None:
    at = run(app, diff=f"{ui_db['permission_allow']},{ui_db['permission_deny']}")
    m = metrics(at)
    assert m["Turns A / B"] == "1 / 1" and m["First difference"] == "turn 1"
    row = at.dataframe[0].value.iloc[0]
    assert bool(row["same input"]) and not bool(row["same output"])
    texts = [t.value for t in at.text]
    assert "The file is created." in texts and "I was not allowed to." in texts
    at = run(AppTest.from_file(APP, default_timeout=60), diff=f"{ui_db['hooks']},{ui_db['hooks']}")
    assert any("two different" in i.value for i in at.info)


def usage_daily_json(url: str) -> dict[str, Any]:
    from click.testing import CliRunner

    from claudetrace.cli import cli

    out = CliRunner().invoke(cli, ["usage", "daily", "--json", "-z", "UTC", "--db", url])
    assert out.exit_code == 0, out.output
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def test_stats_page(app: AppTest, ui_db: dict[str, str]) -> None:
    at = run(app)
    at.switch_page("views/stats.py").run()
    assert at.title[0].value == "Stats"
    # Tokens and cost per day and per day and model: usage daily --json's.
    want = usage_daily_json(ui_db["url"])
    days = at.dataframe[0].value
    assert [list(r) for r in days[["day", "input tokens", "output tokens", "cache read tokens",
                                   "cache write tokens"]].itertuples(index=False)] == [
        [d["date"], d["inputTokens"], d["outputTokens"], d["cacheReadTokens"],
         d["cacheCreationTokens"]] for d in want["daily"]]
    assert list(days["cost ($)"]) == pytest.approx([round(d["totalCost"], 6)
                                                     for d in want["daily"]])
    models = at.dataframe[1].value
    assert sorted((r["day"], r["model"], r["input tokens"], r["output tokens"])
                  for r in models.to_dict("records")) == sorted(
        (d["date"], b["modelName"], b["inputTokens"], b["outputTokens"]) for d in want["daily"]
        for b in d["modelBreakdowns"])
    t = want["totals"]
    # The fake API's message ids repeat across these recordings: each counted once,
    # where the recordings' own summaries add them up again.
    from claudetrace.indexer import open_settled_store

    store = open_settled_store(ui_db["url"])
    try:
        summed = sum(r.output_tokens or 0 for r in store.list_recordings())
    finally:
        store.close()
    assert 0 < t["outputTokens"] < summed
    assert any(m.value.startswith(f"In all: {t['totalTokens']} tokens ({t['inputTokens']} input")
               for m in at.markdown)
    tools = at.dataframe[3].value
    assert "Bash" in set(tools["tool"])
    latency = at.dataframe[4].value
    assert {"model calls", "tools"} <= set(latency["what"])


def test_lost_bytes_are_shown_beside_the_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from claudetrace.cassette import read_cassette
    from claudetrace.indexer import open_settled_store

    store = open_settled_store(str(tmp_path / "ui.db"))
    plain = Path(__file__).parent / "fixtures" / "cassettes" / "plain.ndjson"
    rid = store.import_cassette(read_cassette(plain))
    # What the indexer stores of a capture that lost bytes on a full disk.
    store.update_recording(rid, lost_bytes=4096, outcome="incomplete",
                           outcome_reason="4096 bytes of the capture were lost")
    store.close()
    monkeypatch.setenv("CLAUDETRACE_DB", str(tmp_path / "ui.db"))
    at = run(AppTest.from_file(APP, default_timeout=60), session=rid)
    [status] = [m for m in at.metric if m.label == "Status"]
    assert status.value == "incomplete" and status.delta == "4,096 bytes lost"
    assert "4096 bytes of the capture were lost" in all_text(at)


def _head_start_script() -> None:
    import time

    import streamlit as st

    from claudetrace.ui.views import common

    if st.query_params.get("listed"):
        common.metrics_drawn()
    start = time.monotonic()
    with common.drawn_first(0.4):
        pass
    st.text(f"{time.monotonic() - start:.3f}")


def test_a_new_browser_page_gets_a_head_start_for_its_header_once() -> None:
    at = AppTest.from_function(_head_start_script, default_timeout=60).run()
    assert float(at.text[0].value) >= 0.4  # a new page: what follows the header waits
    at.run()
    assert float(at.text[0].value) < 0.4  # the page has drawn metrics: nothing waits
    at = AppTest.from_function(_head_start_script, default_timeout=60)
    at.query_params["listed"] = "1"
    at.run()
    assert float(at.text[0].value) < 0.4  # the session list drew metrics already


def test_the_session_list_notes_its_metrics_drawn(app: AppTest) -> None:
    from claudetrace.ui.views.common import METRICS_DRAWN

    at = run(app)
    assert at.metric and at.session_state[METRICS_DRAWN] is True


def html_of(at: AppTest) -> str:
    return "\n".join(str(e.proto.body) for e in at.get("html"))


def test_trace_tab_draws_the_span_tree_with_a_subagent_nested(
    app: AppTest, ui_db: dict[str, str]
) -> None:
    at = run(app, session=ui_db["subagent"], tab="trace")
    page = html_of(at)
    rows = page.split("<tr ")[1:]
    kinds = [r.split('data-kind="')[1].split('"')[0] for r in rows]
    assert kinds == ["agent", "turn", "model", "tool", "subagent", "model", "model"]
    assert "counter" in rows[4] and "padding-left:56px" in rows[4]  # depth 3
    assert "padding-left:72px" in rows[5] and "not seen on the wire" in rows[5]
    assert "first token" not in page and "$0.00" in page


def test_a_denied_tool_is_red_in_the_trace(
    app: AppTest, ui_db: dict[str, str]
) -> None:
    at = run(app, session=ui_db["permission_deny"], tab="trace")
    bash = next(r for r in html_of(at).split("<tr ")[1:] if 'data-kind="tool"' in r)
    assert 'data-status="error"' in bash and "permission deny" in bash


def test_each_model_call_has_its_figures_in_the_conversation(
    app: AppTest, ui_db: dict[str, str]
) -> None:
    at = run(app, session=ui_db["streamed_tools"])
    text = all_text(at)
    # Each model call's figures under its first item; wall-clock beside relative times.
    assert "first token" in text and "tool_use" in text and "end_turn" in text
    assert " UTC · +2.219s" in text


def test_the_list_previews_first_prompts_and_filters_by_tool_and_status(
    app: AppTest, ui_db: dict[str, str]
) -> None:
    at = run(app)
    table = at.dataframe(key="sessions_table").value
    prompts = dict(zip(table["name"], table["first prompt"], strict=True))
    assert prompts["plain"] == "Say hello."
    assert prompts["permission_deny"] == "Create created.txt with touch."
    now = dict(zip(table["name"], table["now"], strict=True))
    assert now["still-running"].startswith("thinking · last event ")
    at.multiselect(key="f_tool").set_value(["Bash"]).run()
    assert at.query_params["tool"] == "Bash"
    names = set(at.dataframe(key="sessions_table").value["name"])
    assert "permission_deny" in names and "plain" not in names


def test_a_status_filter_from_a_link(app: AppTest) -> None:
    at = run(app, status="killed")
    assert {s for cell in at.dataframe(key="sessions_table").value["status"] for s in cell
            } == {"killed"}
    assert at.multiselect(key="f_status").value == ["killed"]


BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def test_bidi_controls_are_shown_escaped_on_every_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from claudetrace.cassette import Cassette, read_cassette
    from claudetrace.indexer import open_settled_store
    from claudetrace.model.events import Event

    store = open_settled_store(str(tmp_path / "ui.db"))
    plain = read_cassette(Path(__file__).parent / "fixtures" / "cassettes" / "plain.ndjson")
    said = json.dumps({"type": "assistant", "message": {
        "role": "assistant", "content": [{"type": "text", "text": "pay \u202eeulav\u202c now"}]},
        "session_id": "s"}).encode()
    events = [*plain.events, Event(len(plain.events), "out", plain.events[-1].t_ns + 1, said)]
    rid = store.import_cassette(Cassette(header=plain.header, events=events),
                                name="n\u202eeman")
    store.close()
    monkeypatch.setenv("CLAUDETRACE_DB", str(tmp_path / "ui.db"))
    listing = run(AppTest.from_file(APP, default_timeout=60))
    (table,) = listing.dataframe
    names = list(table.value["name"])
    assert names == ["n\\u202eeman"]
    page = run(AppTest.from_file(APP, default_timeout=60), session=rid)
    shown = all_text(page) + "\n".join(m.value for m in page.markdown)
    assert "u202eeulav" in shown
    assert not set(shown) & set(BIDI)
    raw = run(AppTest.from_file(APP, default_timeout=60), session=rid, tab="raw")
    assert not set(all_text(raw)) & set(BIDI)


def test_find_in_a_session_counts_marks_and_keeps_the_text_in_the_url(
    app: AppTest, ui_db: dict[str, str]
) -> None:
    at = run(app, session=ui_db["permission_deny"], find="TOUCH")
    assert any(c.value == "Find “TOUCH”: 2 matches · 2 items, 0 spans · turn 1"
               for c in at.caption)
    headings = [h.value for h in at.subheader]
    assert headings[:2] == ["match 1 of 2 · user · text", "match 2 of 2 · tool Bash · input"]
    assert at.query_params["find"] == "TOUCH"
    # The text as typed: a pattern's characters are themselves, shown escaped.
    at.text_input(key="find_box").input("t*").run()
    assert any(c.value == "Find “t\\*”: no match" for c in at.caption)
    assert at.query_params["find"] == "t*"


CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"
_PLAIN = read_cassette(CASSETTES / "plain.ndjson").events
#: ``plain``'s lines up to its answer: a session whose turn is under way.
PLAIN_ANSWERED = _PLAIN[: next(i for i, e in enumerate(_PLAIN) if b'"type":"assistant"' in e.data)
                        + 1]


def test_every_running_row_of_the_list_says_its_state_and_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_settled_store(str(tmp_path / "running.db"))
    for n in range(30):  # more than a list used to work out (the first 20)
        store_running(store, f"running-{n}", PLAIN_ANSWERED)
    store.close()
    monkeypatch.setenv("CLAUDETRACE_DB", str(tmp_path / "running.db"))
    at = run(AppTest.from_file(APP, default_timeout=60))
    table = at.dataframe(key="sessions_table").value
    assert len(table) == 30
    for now, cost, turns, tokens in zip(table["now"], table["cost"], table["turns"],
                                        table["tokens"], strict=True):
        assert now.startswith("thinking · last event ")
        assert cost.strip() == "$0.00048" and turns == 1 and tokens == 161


def test_the_diff_page_says_a_running_sessions_figures_as_its_page_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_settled_store(str(tmp_path / "diff.db"))
    done = store.import_cassette(read_cassette(CASSETTES / "plain.ndjson"), name="done")
    running = store_running(store, "running", PLAIN_ANSWERED)
    store.close()
    monkeypatch.setenv("CLAUDETRACE_DB", str(tmp_path / "diff.db"))
    page = run(AppTest.from_file(APP, default_timeout=60), session=running, live="")
    assert metrics(page)["Cost (estimate)"] == "$0.00048"
    at = run(AppTest.from_file(APP, default_timeout=60), diff=f"{done},{running}")
    cost = next(m for m in at.metric if m.label == "Cost A → B")
    # Its calls so far, as its page says them (was "not yet reported", no difference).
    assert (cost.value, cost.delta) == ("$0.00048 (estimate)", "-$0.00048")
    row = at.dataframe[0].value.iloc[0]
    assert (row["cost A"], row["cost B"], row["Δ cost"]) == ("$0.00096", "$0.00048", "-$0.00048")
    assert "no result · $0.00048 · —" in all_text(at)


def test_the_tiles_are_counted_again_only_when_the_store_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from claudetrace.store import browse

    store = open_settled_store(str(tmp_path / "tiles.db"))
    store.import_cassette(read_cassette(CASSETTES / "plain.ndjson"), name="one")
    counted: list[int] = []
    summary = browse.summary

    def counting(*args: Any, **kwargs: Any) -> Any:
        counted.append(1)
        return summary(*args, **kwargs)

    monkeypatch.setattr(browse, "summary", counting)
    monkeypatch.setenv("CLAUDETRACE_DB", str(tmp_path / "tiles.db"))
    at = AppTest.from_file(APP, default_timeout=60)
    assert metrics(run(at))["Sessions"] == "1"
    # Again on the same store (a refresh, a new page): the figures as they were.
    assert metrics(run(at))["Sessions"] == "1"
    assert len(counted) == 1
    store.import_cassette(read_cassette(CASSETTES / "hooks.ndjson"), name="two")
    store.close()
    assert metrics(run(at))["Sessions"] == "2"
    assert len(counted) == 2
