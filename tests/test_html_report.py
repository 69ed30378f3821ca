"""The one-file HTML report: its data, its size, the command, and the page in Chromium."""

from __future__ import annotations

import io
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from playwright.sync_api import expect

from claudetrace.cassette import read_cassette, write_cassette
from claudetrace.cli import cli
from claudetrace.formats.html import render_report, report_data, write_report
from claudetrace.indexer import open_settled_store
from claudetrace.model.events import Event
from claudetrace.sanitize import Sanitizer
from claudetrace.store import Store
from tests.browsing import launched, needs_chromium
from tests.showcase import changed, set_answer

CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"
#: What the viewer (CSS and script) may add to the size of the session's cassette.
VIEWER_OVERHEAD = 24_000


def embedded(page: str) -> dict[str, Any]:
    match = re.search(
        r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S
    )
    assert match is not None
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def stored(store: Store, name: str) -> tuple[Any, list[Event]]:
    rid = store.import_cassette(read_cassette(CASSETTES / f"{name}.ndjson"), name=name)
    return store.get(rid), list(store.iter_events(rid))


def test_report_data_of_a_permission_denial(store: Store) -> None:
    rec, events = stored(store, "permission_deny")
    data = report_data(rec, events)
    texts = [item[2] for item in data["conv"]]
    assert "Create created.txt with touch." in texts
    assert "I was not allowed to." in texts
    tools = [item for item in data["conv"] if item[0] == "tool"]
    assert tools and tools[0][2] == "Bash"
    assert tools[0][4]["dec"] == [["permission", "Bash", "deny"]]
    assert tools[0][4]["err"] == 1  # the denial comes back as an error result
    assert any(row[2] == "can_use_tool" and row[4] is not None for row in data["cp"])
    model, calls = data["models"][0][:2]
    assert model.startswith("claude-") and calls == 2
    assert data["models"][0][6] == pytest.approx(rec.cost_usd, abs=1e-6)
    categories = {row[1] for row in data["tl"]["rows"]}
    assert {"session", "turn", "model", "tool", "permission"} <= categories
    assert ["exit", "0"] in data["facts"]


def test_a_result_that_repeats_the_answer_is_not_held_again(store: Store) -> None:
    # The CLI's result repeats the turn's last answer: the report holds and draws
    # it once (the answer, its Markdown drawn), and the turn's output is that answer.
    rid = store.import_cassette(changed("plain", ("assistant", "result"), set_answer))
    rec = store.get(rid)
    data = report_data(rec, list(store.iter_events(rid)))
    answer = next(i for i in data["conv"] if i[0] == "assistant")
    result = next(i for i in data["conv"] if i[0] == "result")
    assert answer[4]["md"] and result[2] == "" and "md" not in result[4]
    assert result[4]["lbl"] == "success"
    assert json.dumps(data).count("Here is what I found") == 1
    _, outputs = data["io"]["turn:1"][2:4]
    assert outputs == [[[data["conv"].index(answer)], "text"]]


def test_a_result_that_says_more_than_the_answer_is_drawn_as_markdown(store: Store) -> None:
    said = "**Summary**: the answer above, shortened.\n\n- one\n- two"

    def other_result(obj: dict[str, Any]) -> None:
        obj["result"] = said

    rid = store.import_cassette(changed("plain", "result", other_result))
    data = report_data(store.get(rid), list(store.iter_events(rid)))
    result = next(i for i in data["conv"] if i[0] == "result")
    assert result[2] == "" and result[4]["md"][0] == ["p", ["strong", "Summary"],
                                                      ": the answer above, shortened."]


def test_subagent_items_nest_under_their_tool_call(store: Store) -> None:
    rec, events = stored(store, "subagent")
    data = report_data(rec, events)
    nested = [item for item in data["conv"] if item[0] == "tool" and item[4].get("ch")]
    assert nested, "the Task/Agent call carries the subagent's items"


def test_a_subagent_call_is_timed_from_its_own_first_line(store: Store) -> None:
    """The workflow agent of the shop transcript (a lane no tool call names) answers
    40 s into a turn that began at 0 s: its call took no time of the turn before it."""
    from claudetrace.formats.imports import import_file

    shop = Path(__file__).parent / "fixtures" / "transcripts" / "projects" / "-home-dev-shop"
    done = import_file(store, shop / "7c1e2a90-3b4d-4e5f-8a6b-1c2d3e4f5a60.jsonl")
    rec = store.get(done.recording_id or "")
    data = report_data(rec, list(store.iter_events(rec.id)))

    def figures(items: list[Any]) -> Iterator[str]:
        for item in items:
            extra = item[4] if len(item) > 4 else {}
            if "fig" in extra:
                yield extra["fig"]
            yield from figures(extra.get("ch", []))

    haiku = [fig for fig in figures(data["conv"]) if fig.startswith("claude-haiku")]
    assert len(haiku) == 3, haiku  # the Task agent's two calls and the workflow's one
    assert [fig.split(" · ")[-2] for fig in haiku] == ["4.00 s", "11.0 s", "0 ms"], haiku
    trace = [row for row in data["trace"] if "claude-haiku" in json.dumps(row)]
    assert trace, data["trace"]


def test_recorded_markup_and_secrets_do_not_reach_the_page(store: Store) -> None:
    rec, events = stored(store, "plain")
    hostile = json.dumps(
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "type": "text",
                        "text": "</script><script>alert(1)</script> key "
                        "sk-ant-api03-abcdefghijklmnop",
                    }
                ],
            },
            "session_id": rec.cli_session_id,
        }
    ).encode()
    events.append(Event(len(events), "out", events[-1].t_ns + 1, hostile))
    out = io.StringIO()
    write_report(out, rec, events)
    page = out.getvalue()
    assert "sk-ant-api03" not in page
    assert "<script>alert" not in page
    assert page.count("</script>") == 2  # the data block and the viewer, nothing recorded
    texts = [item[2] for item in embedded(page)["conv"]]
    assert "</script><script>alert(1)</script> key [REDACTED]" in texts
    raw = io.StringIO()
    write_report(raw, rec, events, redactor=Sanitizer(secrets=False))
    assert "sk-ant-api03-abcdefghijklmnop" in raw.getvalue()


@pytest.mark.parametrize("name", sorted(p.stem for p in CASSETTES.glob("*.ndjson")))
def test_report_is_at_most_the_cassette_plus_the_viewer(store: Store, name: str) -> None:
    rec, events = stored(store, name)
    cassette = io.StringIO()
    write_cassette(cassette, store.cassette_header(rec), events)
    page = render_report(report_data(rec, events))
    assert len(page.encode()) <= len(cassette.getvalue().encode()) + VIEWER_OVERHEAD


@pytest.mark.parametrize("name", ["plain", "set_model_and_mode", "subagent", "multi_turn"])
def test_tokens_and_cost_per_model_are_the_clis_own(store: Store, name: str) -> None:
    rec, events = stored(store, name)
    models = report_data(rec, events)["models"]
    assert sum(m[2] for m in models) == rec.input_tokens
    assert sum(m[3] for m in models) == rec.output_tokens
    assert sum(m[4] for m in models) == rec.cache_read_tokens
    assert sum(m[5] for m in models) == rec.cache_creation_tokens
    assert sum(m[6] for m in models) == pytest.approx(rec.cost_usd, abs=1e-6)
    if name == "set_model_and_mode":
        assert len(models) == 2  # the model changed mid-session


def big_session(store: Store, lines: int) -> str:
    from claudetrace.ui.bench import seed

    return seed(store, sessions=0, lines=lines)


def test_big_report_stays_within_the_size_budget(store: Store) -> None:
    rid = big_session(store, 20_000)
    rec = store.get(rid)
    events = list(store.iter_events(rid))
    cassette = io.StringIO()
    write_cassette(cassette, store.cassette_header(rec), events)
    page = render_report(report_data(rec, events))
    assert len(page.encode()) <= len(cassette.getvalue().encode()) + VIEWER_OVERHEAD


def test_export_html_command(tmp_path: Path, db_path: Path) -> None:
    runner = CliRunner()
    db = str(db_path)
    imported = runner.invoke(
        cli, ["import", str(CASSETTES / "hooks.ndjson"), "--db", db, "--name", "hooks"]
    )
    assert imported.exit_code == 0, imported.output
    rid = imported.stdout.strip()
    target = tmp_path / "report.html"
    done = runner.invoke(cli, ["export", rid, "--db", db, "--format", "html", "-o", str(target)])
    assert done.exit_code == 0, done.output
    assert f"wrote the report of {rid}" in done.stderr
    page = target.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)
    assert embedded(page)["facts"][0] == ["recording", f"{rid}  (hooks)"]
    to_stdout = runner.invoke(cli, ["export", rid, "--db", db, "--format", "html"])
    assert to_stdout.exit_code == 0
    assert to_stdout.stdout.startswith("<!DOCTYPE html>")
    bad = runner.invoke(cli, ["export", "01NOTHERE", "--db", db, "--format", "html"])
    assert bad.exit_code != 0 and "Traceback" not in bad.output


def test_exported_tokens_and_cost_are_usage_session_json(db_path: Path, tmp_path: Path) -> None:
    """The report's tokens and cost per model are ``usage session --json``'s for its
    recording: a second recording of the same messages (a copy of the cassette
    with another start, so another recording) shows none (they are counted once,
    in the first), where its own events show them."""
    runner = CliRunner()
    db = str(db_path)
    head, rest = (CASSETTES / "hooks.ndjson").read_bytes().split(b"\n", 1)
    header = json.loads(head)
    header["started_ns"] = header.get("started_ns", 0) + 1
    copy = tmp_path / "hooks-copy.ndjson"
    copy.write_bytes(json.dumps(header).encode() + b"\n" + rest)
    ids = []
    for cassette in (CASSETTES / "hooks.ndjson", copy):
        imported = runner.invoke(cli, ["import", str(cassette), "--db", db])
        assert imported.exit_code == 0, imported.output
        ids.append(imported.stdout.strip())
    out = runner.invoke(cli, ["usage", "session", "--json", "-z", "UTC", "--db", db])
    assert out.exit_code == 0, out.output
    sessions = {s["recordingId"]: s for s in json.loads(out.stdout)["sessions"]}
    assert set(sessions) == {ids[0]}  # the copy's messages are the first one's
    for rid in ids:
        page = runner.invoke(cli, ["export", rid, "--db", db, "--format", "html"])
        assert page.exit_code == 0, page.output
        rows = embedded(page.stdout)["models"]
        want = sessions[rid]["modelBreakdowns"] if rid in sessions else []
        assert [[r[0], *r[2:6], r[6]] for r in rows] == [
            [b["modelName"], b["inputTokens"], b["outputTokens"], b["cacheReadTokens"],
             b["cacheCreationTokens"], None if b["cost"] is None else round(b["cost"], 6)]
            for b in want]
    assert want == [] and report_data(*stored_again(db_path, ids[1]))["models"]


def stored_again(db_path: Path, rid: str) -> tuple[Any, list[Event]]:
    store = open_settled_store(str(db_path))
    try:
        return store.get(rid), list(store.iter_events(rid))
    finally:
        store.close()


# -- in a browser ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched() as chromium:
        yield chromium


class Offline:
    """A page that refuses every request but its own file, and keeps what went wrong."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.url = path.resolve().as_uri()
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("request", lambda req: self.requests.append(req.url))
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.page.on(
            "console",
            lambda msg: self.errors.append(msg.text) if msg.type == "error" else None,
        )

    def _route(self, route: Any) -> None:
        if route.request.url == self.url:
            route.continue_()
        else:
            route.abort()

    def open(self) -> Any:
        self.page.goto(self.url)
        return self.page

    def check(self) -> None:
        assert [u for u in self.requests if u != self.url] == []
        assert self.errors == []

    def close(self) -> None:
        self.context.close()


def offline_report(browser: Any, tmp_path: Path, rec: Any, events: list[Event]) -> Offline:
    """The report of ``rec`` written to a file and ready to open offline."""
    path = tmp_path / "report.html"
    with path.open("w") as out:
        write_report(out, rec, events)
    return Offline(browser, path)


@pytest.mark.slow
@needs_chromium
def test_report_in_chromium_offline(browser: Any, store: Store, tmp_path: Path) -> None:
    rec, events = stored(store, "permission_deny")
    view = offline_report(browser, tmp_path, rec, events)
    try:
        page = view.open()
        # expect() waits for what a click or a keystroke changes (a loaded machine
        # may draw it a frame later), and fails if it never shows.
        expect(page.get_by_text("I was not allowed to.").first).to_be_visible(timeout=10_000)
        expect(page.get_by_text("Create created.txt with touch.").first).to_be_visible()
        expect(page.get_by_text("permission Bash: deny").first).to_be_visible()
        page.get_by_text("Bash", exact=True).first.click()  # opens the tool call
        expect(page.get_by_text("touch created.txt").first).to_be_visible()
        page.get_by_role("tab", name="Timeline").click()
        expect(page.locator("#timeline").get_by_text("invoke_agent claude-code").first
               ).to_be_visible()
        page.get_by_role("tab", name="Control plane").click()
        expect(page.locator("#control").get_by_text("can_use_tool").first).to_be_visible()
        page.get_by_role("tab", name="Tokens & cost").click()
        expect(page.locator("#tokens").get_by_text(f"${rec.cost_usd:.6f}").first).to_be_visible()
        page.get_by_role("tab", name="Conversation").click()
        page.get_by_label("Filter the conversation").fill("not allowed")
        expect(page.locator("#convcount")).to_have_text(re.compile(r"\d+ of \d+ items"))
        expect(page.get_by_text("I was not allowed to.").first).to_be_visible()
        expect(page.get_by_text("Create created.txt with touch.").first).to_be_hidden()
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        view.check()
    finally:
        view.close()


#: Records, when the page marks its first screenful drawn (``data-shown``), how many
#: conversation rows and how many nodes the page held then, before its next task runs.
FIRST_SCREENFUL = """
new MutationObserver(function (changes, observer) {
  observer.disconnect();
  window.firstScreenful = {
    rows: document.querySelectorAll("#conv > .item").length,
    nodes: document.getElementsByTagName("*").length,
    timeline: document.querySelectorAll("#wf *").length,
  };
}).observe(document, {subtree: true, attributes: true, attributeFilter: ["data-shown"]});
"""


@pytest.mark.slow
@needs_chromium
def test_a_long_report_draws_a_bounded_first_screenful(
    browser: Any, store: Store, tmp_path: Path
) -> None:
    # What keeps a 50k-line report quick to open (3 s to the first screenful, see
    # docs/views.md) is how much it draws before then: the first 300 rows of the
    # conversation, no other tab, the rest in later slices. Counted here, not timed:
    # a loaded machine misses any wall-clock bound. Counted, 10,000 lines (2,778
    # rows) show it as 50,000 do, in a fifth of the time.
    rid = big_session(store, 10_000)
    rec = store.get(rid)
    path = tmp_path / "big.html"
    with path.open("w") as out:
        write_report(out, rec, store.iter_events(rid))
    view = Offline(browser, path)
    try:
        view.page.add_init_script(FIRST_SCREENFUL)
        page = view.open()
        page.locator("html[data-shown]").wait_for(state="attached", timeout=60_000)
        first = page.wait_for_function("window.firstScreenful", timeout=60_000).json_value()
        assert first["rows"] == 300, first
        assert first["timeline"] == 0, first
        assert first["nodes"] < 20 * first["rows"], first
        assert page.get_by_text("big turn 0", exact=True).first.is_visible()
        # Then the rest of the conversation, in slices, every row in the end.
        total = len(embedded(path.read_text())["conv"])
        assert total > 5 * first["rows"]
        page.wait_for_function(
            f"document.querySelectorAll('#conv > .item').length === {total}", timeout=120_000
        )
        page.get_by_role("tab", name="Timeline").click()
        page.locator("#timeline").get_by_text("invoke_agent claude-code").wait_for(timeout=30_000)
        view.check()
    finally:
        view.close()


def test_an_imported_cassettes_facts_leave_out_what_it_does_not_say(store: Store) -> None:
    from claudetrace.formats.facts import facts

    rec, _ = stored(store, "permission_deny")
    assert rec.pid is None
    where = dict(facts(rec))["cwd / host"]
    assert "None" not in where and where.startswith(rec.cwd)


#: Bidi controls, the line separator and an escape sequence, as recorded text may hold them.
HOSTILE_TEXT = "pay \u202eeulav\u202c \u2066x\u2069 \u200e\u200f\u061c \u2028 \x1b[2J done"


def _with_hostile_text(store: Store) -> tuple[Any, list[Event]]:
    rec, events = stored(store, "plain")
    hostile = json.dumps({
        "type": "assistant",
        "message": {"role": "assistant", "model": "claude-\u202efake",
                    "content": [{"type": "text", "text": HOSTILE_TEXT + "\nsecond\tline"}]},
        "session_id": rec.cli_session_id,
    }).encode()
    events.append(Event(len(events), "out", events[-1].t_ns + 1, hostile))
    return rec, events


def test_bidi_controls_and_escapes_are_shown_escaped_in_the_report(store: Store) -> None:
    rec, events = _with_hostile_text(store)
    out = io.StringIO()
    write_report(out, rec, events)
    page = out.getvalue()
    for raw in "\u202e\u202c\u2066\u2069\u200e\u200f\u061c\u2028\x1b":
        assert raw not in page and json.dumps(raw)[1:-1] not in page.replace("\\\\", ""), raw
    texts = [item[2] for item in embedded(page)["conv"]]
    assert ("pay \\u202eeulav\\u202c \\u2066x\\u2069 \\u200e\\u200f\\u061c \\u2028 "
            "\\x1b[2J done\nsecond\tline") in texts


@pytest.mark.slow
@needs_chromium
def test_bidi_controls_are_drawn_escaped_in_chromium(
    browser: Any, store: Store, tmp_path: Path
) -> None:
    rec, events = _with_hostile_text(store)
    view = offline_report(browser, tmp_path, rec, events)
    try:
        page = view.open()
        expect(page.get_by_text("done", exact=False).first).to_be_visible(timeout=10_000)
        shown = page.locator("body").inner_text()
        assert "pay \\u202eeulav\\u202c \\u2066x\\u2069" in shown
        assert not set(shown) & set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
                                    "\u200e\u200f\u061c\x1b")
        view.check()
    finally:
        view.close()


class _Sink(io.TextIOBase):
    """A text stream that keeps only how much was written to it."""

    def __init__(self) -> None:
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.size += len(text)
        return len(text)


def test_a_report_of_huge_lines_is_written_without_holding_them_twice(store: Store) -> None:
    # Two 4 MB texts (a tool's result and an answer) from a store stream: the
    # events are let go once folded and the page goes out a row at a time, so
    # the peak is about the texts once and one row's JSON, not the lines, their
    # parsed copies, the whole JSON and the whole page on top (8x before).
    import tracemalloc

    cassette = read_cassette(Path(__file__).parent.parent / "claudetrace" / "demo_data"
                             / "session.cassette.ndjson")
    big = ("alpha **beta** `gamma`\n\n- delta " * 130_000)[:4_000_000]
    for event in cassette.events:
        obj = event.obj
        if event.seq == 14:
            obj["message"]["content"][0]["content"][0]["text"] = big
        elif event.seq == 15:
            obj["message"]["content"][0]["text"] = big + " "
        else:
            continue
        event.data = json.dumps(obj).encode()
        event._obj = obj = None
    rid = store.import_cassette(cassette, name="huge")
    rec = store.get(rid)
    del cassette, obj
    sink = _Sink()
    tracemalloc.start()
    try:
        write_report(sink, rec, store.iter_events(rid))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sink.size > 8_000_000
    assert peak < 4 * 8_000_000, f"peak {peak / 1e6:.1f} MB for 8 MB of text"


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory, migrated_sqlite: Path) -> tuple[Path, str]:
    """A store file holding one session of 200,000 lines, and its id: made once for the
    tests that only export it (each from a copy), as seeding it took longer than any
    of them."""
    path = tmp_path_factory.mktemp("big-store") / "big.db"
    shutil.copyfile(migrated_sqlite, path)
    store = open_settled_store(str(path))
    try:
        rid = big_session(store, 200_000)
    finally:
        store.close()
    return path, rid


@pytest.mark.slow
@pytest.mark.parametrize(("fmt", "signum"), [
    ("html", "SIGTERM"), ("html", "SIGINT"), ("cassette", "SIGTERM"), ("html", "SIGHUP"),
])
def test_a_signal_during_export_leaves_the_old_file_and_no_temporary(
    big_store: tuple[Path, str], db_path: Path, tmp_path: Path, fmt: str, signum: str,
) -> None:
    # A real `claudetrace export -o FILE`, stopped once its temporary file beside
    # FILE exists (the report is being made into it): FILE keeps what it held,
    # the temporary file is gone, and the process ends by the signal (Ctrl-C: 1).
    import os
    import signal
    import subprocess
    import sys
    import time

    shutil.copyfile(big_store[0], db_path)
    rid = big_store[1]
    out = tmp_path / "out" / f"report.{'html' if fmt == 'html' else 'ndjson'}"
    out.parent.mkdir()
    out.write_text("what was there\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "claudetrace", "export", "--db", str(db_path), rid,
         "--format", fmt, "-o", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
        # A suite run under nohup hands its children SIGHUP ignored, which the
        # command rightly keeps ignoring: the signal sent here is to be heard.
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 60
        while not [p for p in out.parent.iterdir() if p.name.startswith(".report.")]:
            assert proc.poll() is None, "the export ended before it could be stopped"
            assert time.monotonic() < deadline
            time.sleep(0.005)
        proc.send_signal(getattr(signal, signum))
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name], err
    assert out.read_text() == "what was there\n"
    expected = 130 if signum == "SIGINT" else -getattr(signal, signum)
    assert proc.returncode == expected, err


def test_a_title_that_spells_the_templates_data_mark_stays_a_title(store: Store) -> None:
    # The page was made by replacing marks in the whole template one after the
    # other: a recording named "/*REPORT-DATA*/" had the report's JSON put into
    # its <title> as well.
    rec, events = stored(store, "plain")
    data = report_data(rec, events)
    data["title"] = "/*REPORT-DATA*/ <!--REPORT-TITLE-->"
    page = render_report(data)
    title = re.search(r"<title>(.*?)</title>", page, re.S)
    assert title is not None
    assert title.group(1) == "/*REPORT-DATA*/ &lt;!--REPORT-TITLE--&gt; — claudetrace report"
    assert page.count('"v":1') == 1
    assert embedded(page)["title"] == data["title"]
