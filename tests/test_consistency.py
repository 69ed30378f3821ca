"""Every view reports the same session, and it is what the CLI itself printed.

For each real-CLI fixture recording (``tests/fixtures/cassettes``, recorded by
``tests/record_fixtures.py`` through the proxy from the bundled CLI), the same
figures are read from every place a user can see them — ``sessions --json``,
``show``, the spans, the OTLP metrics, the Prometheus figures, the HTML
report's per-model table and the UI's list, session header and trace header — and compared
with each other and with the CLI's own ``result`` lines: turns, tool calls,
tokens per model and type, cost per model, and the status.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace.cassette import read_cassette, write_cassette
from claudetrace.cli import cli
from claudetrace.formats.html import report_data
from claudetrace.indexer import open_settled_store
from claudetrace.model import TOKEN_TYPES, Usage
from claudetrace.model.events import Event
from claudetrace.promexport import StoreMetrics
from claudetrace.store import Store
from claudetrace.tail import TailFold
from claudetrace.telemetry import conventions as c
from claudetrace.telemetry.metrics import measurements
from claudetrace.telemetry.spans import build_spans
from claudetrace.transcript import entries
from claudetrace.ui.conversation import build_conversation
from claudetrace.ui.diff import turn_summaries
from claudetrace.ui.present import money
from claudetrace.ui.sessions import FIGURE_SPACE

CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"
FIXTURES = sorted(CASSETTES.glob("*.ndjson"))
#: What the CLI's exit says, per fixture (the statuses the model must give).
STATUS = {"cli_dies": "killed", "interrupt": "interrupted", "killed_mid_stream": "killed"}
#: Where the interrupt recording is cut to make ``killed_mid_stream``: in the second
#: turn's streamed answer, after three of its text deltas.
_CUT_AFTER = 22

pytestmark = pytest.mark.usefixtures("ct_env")

Tokens = dict[tuple[str, str], int]


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    opened = open_settled_store(str(db_path))
    yield opened
    opened.close()


def printed_by_the_cli(path: Path) -> dict[str, Any]:
    """What the CLI printed in its result lines: the last one's running totals."""
    results = [
        e.message or {} for e in read_cassette(path).events
        if e.direction == "out" and e.fields.type == "result"
    ]
    tokens: Tokens = {}
    cost: dict[str, float] = {}
    keys = {"input": "inputTokens", "output": "outputTokens",
            "cache_read": "cacheReadInputTokens", "cache_creation": "cacheCreationInputTokens"}
    for model, entry in (results[-1].get("modelUsage") or {} if results else {}).items():
        for kind in TOKEN_TYPES:
            tokens[model, kind] = entry[keys[kind]]
        cost[model] = entry["costUSD"]
    return {
        "results": len(results),
        "num_turns": sum(r["num_turns"] for r in results),
        "tokens": tokens,
        "cost": cost,
        "total_cost": results[-1]["total_cost_usd"] if results else 0.0,
    }


def from_usage_json(db: Path, rid: str) -> dict[str, Any]:
    """``usage session --json``'s tokens and cost per model of one recording."""
    out = CliRunner().invoke(cli, ["usage", "session", "--json", "-z", "UTC", "--db", str(db)])
    assert out.exit_code == 0, out.output
    (rec,) = [r for r in json.loads(out.stdout)["sessions"] if r["recordingId"] == rid]
    kinds = {"input": "inputTokens", "output": "outputTokens", "cache_read": "cacheReadTokens",
             "cache_creation": "cacheCreationTokens"}
    return {
        "tokens": {(b["modelName"], k): b[key] for b in rec["modelBreakdowns"]
                   for k, key in kinds.items()},
        "cost": {b["modelName"]: b["cost"] for b in rec["modelBreakdowns"] if b["cost"]},
        "total": rec["totalCost"],
        "cost_source": rec["costSource"],
    }


def from_sessions_json(db: Path, rid: str) -> dict[str, Any]:
    out = CliRunner().invoke(cli, ["sessions", "--json", "--db", str(db)])
    (rec,) = [r for r in json.loads(out.stdout) if r["id"] == rid]
    return {
        "turns": rec["turns"],
        "num_turns": rec["num_turns"],
        "tool_calls": rec["tool_calls"],
        "tokens": {(m, k): f[k] for m, f in rec["models"].items() for k in TOKEN_TYPES},
        "cost": {m: f["cost_usd"] for m, f in rec["models"].items() if f["cost_usd"]},
        "status": rec["status"],
        "model_calls": rec["model_calls"],
        "calls": {m: f["calls"] for m, f in rec["models"].items()},
        "totals": (rec["input_tokens"], rec["output_tokens"], rec["cache_read_tokens"],
                   rec["cache_creation_tokens"], rec["cost_usd"]),
        "cost_source": rec["cost_source"],
    }


def priced_by_the_table(tokens: Tokens) -> dict[str, float]:
    """Per model, what genai-prices says the tokens cost, asked directly (small
    sessions: every call is in the models' first price tier)."""
    genai_prices = pytest.importorskip("genai_prices")
    cost: dict[str, float] = {}
    for model in {m for m, _ in tokens}:
        n = {kind: tokens[model, kind] for kind in TOKEN_TYPES}
        assert n["input"] + n["cache_read"] + n["cache_creation"] < 200_000
        usage = genai_prices.Usage(
            input_tokens=n["input"] + n["cache_read"] + n["cache_creation"],
            output_tokens=n["output"], cache_read_tokens=n["cache_read"],
            cache_write_tokens=n["cache_creation"])
        cost[model] = float(genai_prices.calc_price(usage, model, provider_id="anthropic")
                            .total_price)
    return cost


def from_show(db: Path, rid: str) -> dict[str, Any]:
    text = CliRunner().invoke(cli, ["show", rid, "--db", str(db)]).stdout
    turns = re.search(r"(\d+) turns? \(prompt to result; (\d+) API round trips? by the "
                      r"CLI's num_turns\), \d+ model calls?, (\d+) tool calls?", text)
    tokens = re.search(r"in (\d+) \(\+cache read (\d+), cache write (\d+)\), out (\d+)", text)
    cost = re.search(r"cost\s+(\$(\S+)( \(estimate\))?)", text)
    status = re.search(r"status\s+(\w+)", text)
    assert turns and tokens and cost and status, text
    return {
        "turns": int(turns[1]),
        "num_turns": int(turns[2]),
        "tool_calls": int(turns[3]),
        "totals": (int(tokens[1]), int(tokens[4]), int(tokens[2]), int(tokens[3]),
                   float(cost[2])),
        "status": status[1],
        "cost_source": "estimate" if cost[3] else "cli",
        "cost_text": cost[1],
    }


def from_spans(store: Store, rid: str) -> dict[str, Any]:
    rec = store.get(rid)
    spans = build_spans(rec.info(), list(store.iter_events(rid)))
    tokens: Counter[tuple[str, str]] = Counter()
    attrs = {"input": c.GEN_AI_USAGE_INPUT_TOKENS, "output": c.GEN_AI_USAGE_OUTPUT_TOKENS,
             "cache_read": c.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
             "cache_creation": c.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS}
    for span in spans:
        if span.key.startswith("chat/"):
            model = str(span.attributes[c.GEN_AI_REQUEST_MODEL])
            for kind, key in attrs.items():
                tokens[model, kind] += int(span.attributes[key])  # type: ignore[arg-type]
    for model in {m for m, _ in tokens}:  # the GenAI input includes the cache
        tokens[model, "input"] -= tokens[model, "cache_read"] + tokens[model, "cache_creation"]
    root = spans[-1]
    turns = [s for s in spans if s.key.startswith("turn/")]
    return {
        "turns": len(turns),
        "num_turns": sum(int(s.attributes.get(c.NUM_TURNS, 0)) for s in turns),  # type: ignore[arg-type]
        "tool_calls": sum(s.key.startswith("tool/") for s in spans),
        "tokens": dict(tokens),
        "cost": {m: v for m, v in root.costs.items() if v},
        "status": root.attributes[c.SESSION_OUTCOME],
        "root_error": root.status == "error",
    }


def from_otlp_metrics(store: Store, rid: str) -> dict[str, Any]:
    rec = store.get(rid)
    tokens: Counter[tuple[str, str]] = Counter()
    cost: Counter[str] = Counter()
    tools = 0
    outcome = None
    for span in build_spans(rec.info(), list(store.iter_events(rid))):
        for m in measurements(span):
            a = m.attributes
            if m.instrument == c.METRIC_TOKEN_USAGE:
                tokens[str(a[c.GEN_AI_REQUEST_MODEL]), str(a[c.GEN_AI_TOKEN_TYPE])] += int(m.value)
            elif m.instrument == c.METRIC_SESSION_COST:
                cost[str(a[c.GEN_AI_REQUEST_MODEL])] += m.value
            elif m.instrument == c.METRIC_TOOL_CALLS:
                tools += int(m.value)
            elif m.instrument == c.METRIC_SESSION_COUNT:
                outcome = a[c.SESSION_OUTCOME]
    return {"tokens": dict(tokens), "cost": dict(cost), "tool_calls": tools, "status": outcome}


def from_html_report(store: Store, rid: str) -> dict[str, Any]:
    """The HTML report's table of tokens and cost per model, read from the page
    ``claudetrace export --format html`` writes."""
    out = CliRunner().invoke(cli, ["export", rid, "--db", store.url, "--format", "html"])
    assert out.exit_code == 0, out.output
    page = re.search(r'<script type="application/json" id="report-data">(.*?)</script>',
                     out.stdout, re.S)
    assert page is not None
    data = json.loads(page[1])
    rows = data["models"]
    kinds = ("input", "output", "cache_read", "cache_creation")
    return {
        "facts_cost": dict(data["facts"])["cost"],
        "tokens": {(r[0], kind): r[2 + i] for r in rows for i, kind in enumerate(kinds)},
        "cost": {r[0]: r[6] for r in rows if r[6]},
        "calls": {r[0]: r[1] for r in rows},
    }


def from_ui(db: Path, rid: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The cost the UI gives the recording: its row of the session list, its
    page's cost metric and its trace header's cost (Streamlit's AppTest)."""
    from streamlit.testing.v1 import AppTest

    import claudetrace.ui

    app = str(Path(claudetrace.ui.__file__).with_name("app.py"))
    monkeypatch.setenv("CLAUDETRACE_DB", str(db))

    def run(**params: str) -> AppTest:
        at = AppTest.from_file(app, default_timeout=60)
        for key, value in params.items():
            at.query_params[key] = value
        at.run()
        assert not at.exception, at.exception
        return at

    table = run().dataframe(key="sessions_table").value
    (row,) = [r for _, r in table.iterrows() if r["id"] == rid]
    metrics = {m.label: m.value for m in run(session=rid).metric}
    (label,) = [k for k in metrics if k.startswith("Cost")]
    trace = "".join(str(e.proto.body) for e in run(session=rid, tab="trace").get("html"))
    header = re.search(r'data-label="cost"><span>cost</span>([^<]*)<', trace)
    assert header is not None, trace
    # The list's amounts are led by figure spaces (sortable_amounts): they do not show.
    return {"list": row["cost"].lstrip(FIGURE_SPACE), "list_source": row["cost source"],
            "header": metrics[label], "header_label": label, "trace": unescape(header[1])}


def from_prometheus(store: Store) -> dict[str, Any]:
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for line in StoreMetrics(store).exposition().splitlines():
        match = re.fullmatch(r"(\w+)(?:\{(.*)\})? (\S+)", line)
        if match and not line.startswith("#"):
            labels = frozenset(re.findall(r'(\w+)="([^"]*)"', match[2] or ""))
            samples[match[1], labels] = float(match[3])

    def by(name: str, *keys: str) -> dict[Any, float]:
        out = {}
        for (sample, labels), value in samples.items():
            if sample == name:
                d = dict(labels)
                out[tuple(d[k] for k in keys) if len(keys) > 1 else d[keys[0]]] = value
        return out

    statuses = {s for s, n in by("claudetrace_store_sessions", "status").items() if n}
    tools = by("claudetrace_store_tool_calls_total", "tool", "outcome")
    cost = by("claudetrace_store_cost_usd_total", "model", "source")  # cli + estimate
    return {
        "tokens": {k: int(v) for k, v in by("claudetrace_store_tokens_total", "model",
                                             "type").items()},
        "cost": {m: sum(v for (model, _), v in cost.items() if model == m)
                 for (m, _), v in cost.items() if v},
        "turns": int(sum(by("claudetrace_store_turns_total", "model").values())),
        "tool_calls": int(sum(tools.values())),
        "status": statuses.pop() if len(statuses) == 1 else statuses,
    }


def killed_mid_stream(directory: Path) -> Path:
    """A CLI killed (SIGKILL) while a message streams, made from a real recording.

    The ``interrupt`` recording (partial messages on) cut in its second turn's
    answer, after ``message_start`` and three text deltas, with the first half of
    the next line written and no newline after it: where the CLI was when it died.
    """
    cassette = read_cassette(CASSETTES / "interrupt.ndjson")
    kept = [e for e in cassette.events if e.seq <= _CUT_AFTER]
    torn = cassette.events[_CUT_AFTER + 1]
    assert torn.fields.subtype == "content_block_delta"
    kept.append(Event(torn.seq, torn.direction, torn.t_ns, torn.data[: len(torn.data) // 2],
                      eol=False, wall_ns=torn.wall_ns))
    header = {**cassette.header, "exit_code": 137, "signal": 9, "scenario": "killed_mid_stream",
              "ended_ns": cassette.header["started_ns"] + kept[-1].t_ns + 1_000_000}
    path = directory / "killed_mid_stream.ndjson"
    write_cassette(path, header, kept)
    return path


def unfinished_calls(path: Path) -> Tokens:
    """The usage of the messages that started (``message_start``) and got no result."""
    events = read_cassette(path).events
    last_result = max((e.seq for e in events if e.fields.type == "result"), default=-1)
    tokens: Tokens = {}
    for e in events:
        if e.seq > last_result and e.fields.subtype == "message_start":
            message = (e.message or {})["event"]["message"]
            usage = Usage.from_api(message["usage"])
            for kind in TOKEN_TYPES:
                key = (message["model"], kind)
                tokens[key] = tokens.get(key, 0) + usage.get(kind)
    return tokens


@pytest.mark.parametrize(
    "name", [p.stem for p in FIXTURES] + ["killed_mid_stream"])
def test_every_view_reports_what_the_cli_printed(
    name: str, db_path: Path, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = killed_mid_stream(tmp_path) if name == "killed_mid_stream" else CASSETTES / (
        f"{name}.ndjson")
    cli_said = printed_by_the_cli(path)
    rid = store.import_cassette(read_cassette(path))
    listed = from_sessions_json(db_path, rid)
    shown = from_show(db_path, rid)
    spans = from_spans(store, rid)
    otlp = from_otlp_metrics(store, rid)
    prom = from_prometheus(store)
    html = from_html_report(store, rid)
    usage = from_usage_json(db_path, rid)
    ui = from_ui(db_path, rid, monkeypatch)
    status = STATUS.get(name, "ok")

    # Turns: a user message to its result; the CLI's num_turns is its own figure.
    assert listed["turns"] == shown["turns"] == spans["turns"] == prom["turns"]
    assert listed["turns"] >= cli_said["results"]
    assert listed["num_turns"] == shown["num_turns"] == spans["num_turns"] == (
        cli_said["num_turns"])
    # Tool calls.
    assert listed["tool_calls"] == shown["tool_calls"] == spans["tool_calls"] == (
        otlp["tool_calls"]) == prom["tool_calls"]
    # Tokens per model and type: what the CLI printed (when it got to print a result),
    # and what a message it was streaming when it died had used so far.
    assert listed["tokens"] == spans["tokens"] == prom["tokens"] == html["tokens"]
    # Model calls: the ones the host saw, per model and in all (the HTML report's
    # are the usage layer's: a call per API message id).
    assert sum(listed["calls"].values()) == listed["model_calls"]
    if cli_said["tokens"]:
        unfinished = unfinished_calls(path)
        assert listed["tokens"] == {
            key: n + unfinished.pop(key, 0) for key, n in cli_said["tokens"].items()
        } | unfinished
    otlp_wanted: Counter[tuple[str, str]] = Counter()
    for (model, kind), n in listed["tokens"].items():
        otlp_wanted[model, "output" if kind == "output" else "input"] += n
    assert otlp["tokens"] == dict(otlp_wanted)
    assert shown["totals"][:4] == listed["totals"][:4] == tuple(
        sum(n for (_, k), n in listed["tokens"].items() if k == kind)
        for kind in ("input", "output", "cache_read", "cache_creation"))
    # Cost per model: the CLI's; where it printed none (it died first), the price
    # table's, marked as an estimate.  The session's cost: the CLI's, plus the
    # table's price of a message it was streaming when it died (counted from the
    # raw lines: the tokens its message_start carried), then an estimate.
    if cli_said["results"]:
        want, total = cli_said["cost"], cli_said["total_cost"]
        source = "cli"
        unfinished = unfinished_calls(path)
        if unfinished:
            total += sum(priced_by_the_table(unfinished).values())
            source = "estimate"
        assert listed["cost_source"] == shown["cost_source"] == usage["cost_source"] == source
    else:
        assert listed["cost_source"] == shown["cost_source"] == "estimate"
        want = priced_by_the_table(listed["tokens"])
        total = sum(want.values())
    assert listed["cost"] == pytest.approx(want)
    assert spans["cost"] == pytest.approx(want)
    assert otlp["cost"] == pytest.approx(want)
    # The endpoint's tokens and cost per model are ``usage --json``'s (one query).
    assert prom["tokens"] == usage["tokens"]
    assert prom["cost"] == pytest.approx(usage["cost"])
    # The HTML report's tokens and cost are ``usage session --json``'s too.
    assert html["tokens"] == usage["tokens"]
    assert html["cost"] == pytest.approx({m: round(v, 6) for m, v in usage["cost"].items()})
    assert shown["totals"][4] == pytest.approx(total, abs=5e-7)
    assert listed["totals"][4] == pytest.approx(total)
    # One cost everywhere: sessions, show and the HTML report's facts say usage's.
    assert listed["totals"][4] == pytest.approx(usage["total"], abs=1e-9)
    assert html["facts_cost"] == shown["cost_text"]
    # And the UI's: the list's row, the session page's header and its trace header.
    assert ui["list"] == money(usage["total"])
    assert ui["list_source"] == usage["cost_source"]
    estimated = usage["cost_source"] == "estimate"
    assert (ui["header"], ui["header_label"]) == (
        money(usage["total"]), "Cost (estimate)" if estimated else "Cost")
    assert ui["trace"] == money(usage["total"]) + (
        " (estimate, price table)" if estimated else " (the CLI's)")
    # The status, one definition everywhere.
    assert listed["status"] == shown["status"] == spans["status"] == otlp["status"] == (
        prom["status"]) == status
    assert spans["root_error"] == (status in ("error", "killed", "incomplete"))


def test_a_stream_broken_mid_message_reads_the_same_in_every_other_view(
    db_path: Path, store: Store, tmp_path: Path
) -> None:
    # The views that show the session line by line: the conversation (UI and
    # HTML report), show's transcript, the turn diff and tail.
    path = killed_mid_stream(tmp_path)
    events = read_cassette(path).events
    rid = store.import_cassette(read_cassette(path))
    rec = store.get(rid)
    assert (rec.status, rec.status_reason) == ("killed", "killed by SIGKILL during turn 2")

    items = build_conversation(events)
    assert [i.text for i in items if i.kind == "user"] == [
        "Tell me a very long story.", "Are you still there?"]
    assert [(i.kind, i.is_error, i.turn.number if i.turn else None)
            for i in items if i.kind == "result"] == [("result", True, 1)]
    assert items[-1].kind == "error" and "unparsable line" in items[-1].text  # the torn line

    transcript = entries(events)
    assert [e.role for e in transcript].count("result") == 1
    assert transcript[-1].role == "raw" and transcript[-1].is_error

    turns = turn_summaries(events)
    assert [(t.result_subtype, t.result) for t in turns][1] == (None, None)
    assert turns[0].is_error and not turns[1].is_error

    info = rec.info()
    fold = TailFold(info)
    said = [line for event in events for line in fold.feed(event)] + fold.close(info)
    assert said[-1].text.startswith("ended killed (killed by SIGKILL during turn 2)")
    assert said[-1].status == "error"

    report = report_data(rec, list(store.iter_events(rid)))
    assert report["status"] == "killed"
    assert [row[0] for row in report["conv"]].count("result") == 1
