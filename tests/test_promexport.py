"""The store-backed Prometheus endpoint: figures, exposition format, HTTP, CLI.

The end-to-end tests import the real-CLI recordings of ``tests/fixtures/telemetry``
into a temporary SQLite store, serve it on 127.0.0.1 port 0, scrape it over real
HTTP and parse what comes back.  Expected values are computed independently: the
session statuses with :attr:`Recording.status`, the summary sums with the ORM, and
tool calls, permission decisions and control round trips with the telemetry
package's own span builder and measurements on the same recordings.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from claudetrace import promexport
from claudetrace.cassette import read_cassette
from claudetrace.cli import cli
from claudetrace.indexer import open_settled_store
from claudetrace.model import STATUSES, Session
from claudetrace.model.events import Event
from claudetrace.promexport import (
    BUCKETS,
    Family,
    Histogram,
    StoreMetrics,
    make_server,
    render,
)
from claudetrace.recording import RecordingInfo, new_recording_id
from claudetrace.store import Recording, Store, info_from_header
from claudetrace.store.models import status_expression
from claudetrace.telemetry import conventions as c
from claudetrace.telemetry.metrics import measurements
from claudetrace.telemetry.spans import build_spans
from tests.test_store_postgres import pg_url  # noqa: F401  (the fixture)

FIXTURES = Path(__file__).parent / "fixtures" / "telemetry"
CASSETTES = sorted(FIXTURES.glob("*.ndjson"))
S = 1_000_000_000

# --------------------------------------------------------------------------- exposition parser

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([A-Za-z_]\w*)="((?:\\.|[^"\\])*)"')


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


Key = tuple[str, frozenset[tuple[str, str]]]


def parse_exposition(text: str) -> tuple[dict[str, str], dict[Key, float]]:
    """``({family: type}, {(sample name, labels): value})``; strict about the format."""
    types: dict[str, str] = {}
    helps: set[str] = set()
    samples: dict[Key, float] = {}
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helps.add(line.split(" ", 3)[2])
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram"), line
            types[name] = kind
        else:
            match = _SAMPLE.match(line)
            assert match, f"malformed sample line: {line!r}"
            name, labels, value = match.groups()
            pairs = _LABEL.findall(labels or "")
            assert ",".join(f'{k}="{v}"' for k, v in pairs) == (labels or ""), line
            key = (name, frozenset((k, _unescape(v)) for k, v in pairs))
            assert key not in samples, f"duplicate sample {line!r}"
            family = re.sub(r"_(bucket|sum|count)$", "", name) if name not in types else name
            assert family in types, f"sample before its TYPE: {line!r}"
            samples[key] = float(value.replace("+Inf", "inf"))
    assert helps == set(types)
    return types, samples


def values(samples: dict[Key, float], name: str, *label_names: str) -> dict[tuple[str, ...], float]:
    """The samples of ``name`` keyed by the values of ``label_names``."""
    out = {}
    for (sample, labels), value in samples.items():
        if sample == name:
            d = dict(labels)
            out[tuple(d[n] for n in label_names)] = value
    return out


# --------------------------------------------------------------------------- pure parts


def test_render_escapes_and_formats() -> None:
    fam = Family(promexport.TOOL_CALLS)
    fam.add(('Bash "quoted"\\path\nnext', "ok"), 3)
    fam.add(("x", "error"), 0.25)
    text = render([fam])  # written by prometheus_client
    assert text.splitlines()[:2] == [
        f"# HELP claudetrace_store_tool_calls_total {promexport.TOOL_CALLS.help}",
        "# TYPE claudetrace_store_tool_calls_total counter",
    ]
    assert 'tool="Bash \\"quoted\\"\\\\path\\nnext"' in text
    _, samples = parse_exposition(text)
    assert values(samples, "claudetrace_store_tool_calls_total", "tool", "outcome") == {
        ('Bash "quoted"\\path\nnext', "ok"): 3,
        ("x", "error"): 0.25,
    }


def test_histogram_buckets_are_cumulative_and_inclusive() -> None:
    hist = Histogram()
    for seconds in (0.005, 0.0051, 2.0, 10_000.0):
        hist.observe(seconds)
    fam = Family(promexport.TOOL_DURATION)
    fam.add_histogram(("Bash",), hist)
    _, samples = parse_exposition(render([fam]))
    buckets = values(samples, "claudetrace_store_tool_duration_seconds_bucket", "le")
    assert buckets[("0.005",)] == 1  # le is inclusive
    assert buckets[("0.01",)] == 2
    assert buckets[("1.0",)] == 2
    assert buckets[("2.5",)] == 3
    assert buckets[(promexport.exposition._number(BUCKETS[-1]),)] == 3
    assert buckets[("+Inf",)] == 4
    assert list(buckets.values()) == sorted(buckets.values())
    assert values(samples, "claudetrace_store_tool_duration_seconds_count")[()] == 4
    assert values(samples, "claudetrace_store_tool_duration_seconds_sum")[()] == pytest.approx(
        10_002.0101
    )


def _line(seq: int, direction: str, t_ns: int, obj: dict[str, object]) -> Event:
    return Event(seq, direction, t_ns, json.dumps(obj).encode())  # type: ignore[arg-type]


def _request(rid: str, **request: object) -> dict[str, object]:
    return {"type": "control_request", "request_id": rid, "request": request}


def _response(rid: str, subtype: str = "success", **answer: object) -> dict[str, object]:
    return {"type": "control_response",
            "response": {"subtype": subtype, "request_id": rid, "response": answer}}


def _tool_use(tid: str, name: str) -> dict[str, object]:
    return {"type": "assistant", "message": {"id": f"m_{tid}", "content": [
        {"type": "tool_use", "id": tid, "name": name, "input": {}}]}}


def _tool_result(tid: str, *, error: bool = False) -> dict[str, object]:
    return {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": tid, "is_error": error, "content": "x"}]}}


def test_session_figures_pair_tools_controls_and_permissions() -> None:
    lines = [
        ("in", 0, _request("req_1", subtype="initialize")),
        ("out", S // 10, _response("req_1")),
        ("in", S // 2, {"type": "user", "message": {"role": "user", "content": "go"}}),
        ("out", 1 * S, _tool_use("t1", "Bash")),
        ("out", 3 * S, _request("p1", subtype="can_use_tool", tool_name="Bash",
                                tool_use_id="t1", input={})),
        ("in", 5 * S, _response("p1", behavior="deny", message="no")),
        ("out", 6 * S, _tool_result("t1")),
        ("out", 7 * S, _tool_use("t2", "Read")),
        ("out", 7 * S + S // 2, _tool_result("t2", error=True)),
        ("out", 8 * S, _tool_use("t3", "Write")),  # never answered
        ("in", 9 * S, _request("req_2", subtype="interrupt")),
        # The request's own id echoed on its own stream is not an answer.
        ("in", 9 * S, _response("req_2")),
        ("out", 9 * S, _request("h1", subtype="hook_callback", tool_use_id="t3",
                                input={"hook_event_name": "PreToolUse"})),
        ("in", 9 * S + S // 100, _response("h1", "error")),
    ]
    session = Session()
    session.add_many(_line(n, d, t, obj) for n, (d, t, obj) in enumerate(lines))
    figures = promexport.session_figures(session)
    assert figures.tool_calls == Counter(
        {("Bash", "ok"): 1, ("Read", "error"): 1, ("Write", "unfinished"): 1}
    )
    assert figures.tool_duration[("Bash",)].sum == 5.0  # tool_use to tool_result
    assert figures.tool_duration[("Read",)].sum == 0.5
    assert ("Write",) not in figures.tool_duration
    assert figures.control_requests == Counter(
        {
            ("initialize", "host", "success"): 1,
            ("can_use_tool", "cli", "success"): 1,
            ("interrupt", "host", "unanswered"): 1,
            ("hook_callback", "cli", "error"): 1,
        }
    )
    assert figures.control_duration[("initialize", "host", "success")].sum == 0.1
    assert ("interrupt", "host", "unanswered") not in figures.control_duration
    assert figures.permission_wait[("Bash",)].sum == 2.0
    assert figures.permission_decisions == Counter({("Bash", "deny"): 1})


# --------------------------------------------------------------------------- store + HTTP


def add_recording(store: Store, now_ns: int, **columns: object) -> str:
    """A recording with no events and the given columns (status scenarios)."""
    info = RecordingInfo(id=new_recording_id(now_ns), argv=["claude"], started_ns=now_ns)
    store.create_recording(info)
    if columns:
        store.update_recording(info.id, **columns)
    return info.id


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    store = open_settled_store(str(db_path))
    for path in CASSETTES:
        store.import_cassette(read_cassette(path))
    now = time.time_ns()
    add_recording(store, now, last_seen_ns=now)  # running: fresh heartbeat
    add_recording(store, now - 60 * S, last_seen_ns=now - 60 * S)  # incomplete
    add_recording(store, now, error="no such file", exit_code=127, ended_ns=now,
                  outcome="error", outcome_reason="the CLI did not start: no such file")
    add_recording(store, now, ended_ns=now, signal=9, model="claude-x", cost_usd=0.5,
                  outcome="killed", outcome_reason="killed by SIGKILL")
    yield store
    store.close()


@pytest.fixture
def server(store: Store) -> Iterator[str]:
    httpd = make_server(StoreMetrics(store), "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def scrape(base: str) -> tuple[dict[str, str], dict[Key, float]]:
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == promexport.CONTENT_TYPE
        return parse_exposition(response.read().decode("utf-8"))


def usage_models(store: Store) -> dict[str, dict[str, object]]:
    """``usage session --json``'s figures per model, summed over its sessions."""
    out = CliRunner().invoke(cli, ["usage", "session", "--json", "-z", "UTC", "--db",
                                   store.url])
    assert out.exit_code == 0, out.output
    models: dict[str, dict[str, object]] = {}
    for entry in json.loads(out.stdout)["sessions"]:
        for b in entry["modelBreakdowns"]:
            mine = models.setdefault(b["modelName"], Counter())
            for key in ("inputTokens", "outputTokens", "cacheReadTokens",
                        "cacheCreationTokens"):
                mine[key] += b[key]
            mine[b["costSource"]] += b["cost"] or 0.0
    return models


def assert_usage_figures(samples: dict[Key, float], models: dict[str, dict[str, object]],
                         ) -> None:
    """The scrape's tokens and cost per model are ``usage --json``'s."""
    tokens = values(samples, "claudetrace_store_tokens_total", "model", "type")
    assert tokens == {(m, kind): f[key] for m, f in models.items() for kind, key in (
        ("input", "inputTokens"), ("output", "outputTokens"), ("cache_read", "cacheReadTokens"),
        ("cache_creation", "cacheCreationTokens"))}
    # An estimate (a session that reported no cost, priced by the table) is never
    # counted as the CLI's.
    cost = values(samples, "claudetrace_store_cost_usd_total", "model", "source")
    assert {k: v for k, v in cost.items() if v} == pytest.approx(
        {(m, source): f[source] for m, f in models.items() for source in ("cli", "estimate")
         if f.get(source)})


def test_a_message_held_twice_is_counted_once_and_counters_never_go_down(
        store: Store, server: str) -> None:
    """An import of a recording already in the store adds nothing (its messages are
    counted once, as by ``usage``); deleting it afterwards lowers no counter."""
    _, before = scrape(server)
    models = usage_models(store)
    assert_usage_figures(before, models)
    copy = store.import_cassette(read_cassette(CASSETTES[0]))  # the same messages again
    _, again = scrape(server)
    assert usage_models(store) == models
    assert_usage_figures(again, models)
    store.delete_recording(copy)
    store.delete_recording(next(r for r in store.list_recordings() if r.id != copy
                                and r.source == "import").id)
    _, after = scrape(server)
    for name in ("claudetrace_store_tokens_total", "claudetrace_store_cost_usd_total"):
        assert all(after[k] >= v for k, v in before.items() if k[0] == name)


def telemetry_counts() -> Counter[tuple[str, ...]]:
    """Tool calls, decisions and control round trips as the telemetry measures them."""
    counts: Counter[tuple[str, ...]] = Counter()
    for path in CASSETTES:
        cassette = read_cassette(path)
        for span in build_spans(info_from_header(cassette.header), cassette.events):
            for m in measurements(span):
                a = m.attributes
                if m.instrument == c.METRIC_TOOL_CALLS:
                    counts["tool", a[c.GEN_AI_TOOL_NAME], a[c.TOOL_OUTCOME]] += int(m.value)
                elif m.instrument == c.METRIC_PERMISSION_DECISIONS:
                    counts["decision", a[c.GEN_AI_TOOL_NAME], a[c.PERMISSION_DECISION]] += 1
                elif m.instrument == c.METRIC_CONTROL_DURATION:
                    key = (a[c.CONTROL_SUBTYPE], a[c.CONTROL_INITIATOR], a[c.CONTROL_OUTCOME])
                    counts[("control", *key)] += 1
    return counts


def test_scrape_over_http_matches_independent_figures(store: Store, server: str) -> None:
    types, samples = scrape(server)
    assert set(types) == {spec.name for spec in promexport.METRICS}
    assert {name for name, _ in samples} <= promexport.sample_names()
    for spec in promexport.METRICS:
        assert types[spec.name] == spec.kind

    with store.session() as session:
        recordings = session.scalars(select(Recording)).all()
        expected_status = Counter(r.status for r in recordings)
        output_tokens = session.scalar(select(func.sum(Recording.output_tokens)))
        event_count = session.scalar(select(func.sum(Recording.event_count)))
    assert set(STATUSES) == set(expected_status)
    assert values(samples, "claudetrace_store_sessions", "status") == {
        (s,): expected_status.get(s, 0) for s in STATUSES
    }
    tokens = values(samples, "claudetrace_store_tokens_total", "model", "type")
    # The fake API's message ids repeat across recordings: each message counted once,
    # as by ``usage``, where the recordings' own summaries add them up again.
    assert 0 < sum(v for (_, kind), v in tokens.items() if kind == "output") < output_tokens
    assert_usage_figures(samples, usage_models(store))
    assert values(samples, "claudetrace_store_events_total")[()] == event_count
    started = values(samples, "claudetrace_store_sessions_started_total", "source")
    assert started == {("import",): len(CASSETTES), ("proxy",): 4}

    telemetry = telemetry_counts()
    tool_calls = values(samples, "claudetrace_store_tool_calls_total", "tool", "outcome")
    assert tool_calls == {k[1:]: v for k, v in telemetry.items() if k[0] == "tool"}
    assert {o for _, o in tool_calls} == {"ok", "error", "unfinished"}
    decisions = values(samples, "claudetrace_store_permission_decisions_total", "tool", "decision")
    assert decisions == {k[1:]: v for k, v in telemetry.items() if k[0] == "decision"}
    assert {d for _, d in decisions} == {"allow", "deny"}
    controls = values(
        samples, "claudetrace_store_control_requests_total", "subtype", "initiator", "outcome"
    )
    assert controls == {k[1:]: v for k, v in telemetry.items() if k[0] == "control"}

    # Histograms: every answered round trip is observed once, with a plausible sum.
    answered = {k: v for k, v in controls.items() if k[2] != "unanswered"}
    counts = values(
        samples,
        "claudetrace_store_control_duration_seconds_count",
        "subtype",
        "initiator",
        "outcome",
    )
    assert counts == answered
    waits = values(samples, "claudetrace_store_permission_wait_seconds_count", "tool")
    assert waits == {("Bash",): controls[("can_use_tool", "cli", "success")]}
    wait_sum = values(samples, "claudetrace_store_permission_wait_seconds_sum", "tool")[("Bash",)]
    assert 0 < wait_sum < 60
    inf = values(samples, "claudetrace_store_tool_duration_seconds_bucket", "tool", "le")
    finished = Counter()
    for (tool, outcome), n in tool_calls.items():
        if outcome != "unfinished":
            finished[tool] += n
    assert {t: n for (t, le), n in inf.items() if le == "+Inf"} == dict(finished)


def test_openmetrics_to_a_scraper_that_asks(server: str) -> None:
    request = urllib.request.Request(f"{server}/metrics", headers={
        "Accept": "application/openmetrics-text; version=1.0.0; charset=utf-8"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("application/openmetrics-text")
        text = response.read().decode("utf-8")
    assert text.endswith("# EOF\n")
    assert "# TYPE claudetrace_store_sessions_started counter" in text  # OpenMetrics names
    assert "claudetrace_store_sessions_started_total{" in text


def test_an_unreadable_store_answers_500(db_path: Path) -> None:
    from sqlalchemy import create_engine

    engine = create_engine(f"sqlite:///{db_path}")  # never migrated: no tables
    httpd = make_server(StoreMetrics(Store(engine)), "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(urllib.error.HTTPError) as excinfo:
            urllib.request.urlopen(
                f"http://127.0.0.1:{httpd.server_address[1]}/metrics", timeout=10
            )
        assert excinfo.value.code == 500
        assert b"cannot read the store" in excinfo.value.read()
        excinfo.value.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
        engine.dispose()


def test_ended_recordings_are_read_once_and_new_ones_are_added(store: Store) -> None:
    metrics = StoreMetrics(store)
    _, before = parse_exposition(metrics.exposition())
    with store.session() as session:
        ended = set(session.scalars(select(Recording.id).where(Recording.ended_ns.is_not(None))))
    assert metrics._folded == ended

    # A running recording is read on every scrape; once it ends it is folded in.
    cassette = read_cassette(FIXTURES / "permission_deny.cassette.ndjson")
    header = {k: v for k, v in cassette.header.items() if k != "ended_ns"}
    rid = store.import_cassette((header, cassette.events))
    store.update_recording(rid, ended_ns=None, last_seen_ns=time.time_ns())
    _, running = parse_exposition(metrics.exposition())
    assert rid not in metrics._folded
    store.update_recording(rid, ended_ns=time.time_ns())
    _, after = parse_exposition(metrics.exposition())
    assert rid in metrics._folded
    for snapshot in (running, after):
        key = (
            "claudetrace_store_permission_decisions_total",
            frozenset({("tool", "Bash"), ("decision", "deny")}),
        )
        assert snapshot[key] == before[key] + 1
    # Folding did not count the recording twice.
    _, again = parse_exposition(metrics.exposition())
    assert {k: v for k, v in again.items() if "scrape_duration" not in k[0]} == {
        k: v for k, v in after.items() if "scrape_duration" not in k[0]
    }


def _figures_only(samples: dict[Key, float]) -> dict[Key, float]:
    return {k: v for k, v in samples.items() if "scrape_duration" not in k[0]}


def test_a_cold_scrape_reads_the_stored_figures_not_the_events(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ended recording stored the records its figures are made of (its
    ``figures`` column): a cold scrape folds no recording's events but the
    running ones', and its figures are those the fold gives."""
    from sqlalchemy import update

    from claudetrace.store import aggregate

    asked: list[str] = []
    events_of = aggregate.events_of

    def counted(store: Store, ids: list[str], types: tuple[str, ...]) -> Iterator[object]:
        asked.extend(ids)
        return events_of(store, ids, types)

    monkeypatch.setattr(aggregate, "events_of", counted)
    _, stored = parse_exposition(StoreMetrics(store).exposition())
    with store.session() as session:  # running, or made without the store's writes
        unfigured = set(session.scalars(select(Recording.id).where(
            (Recording.ended_ns.is_(None)) | (Recording.figures.is_(None)))))
        imported = session.scalar(select(func.count()).where(Recording.figures.is_not(None)))
    assert set(asked) == unfigured and imported == len(CASSETTES)
    assert any(k[0] == "claudetrace_store_tool_calls_total" for k in stored)
    assert any(k[0] == "claudetrace_store_permission_decisions_total" for k in stored)
    with store.engine.begin() as conn:  # as stored before migration 0006: folded
        conn.execute(update(Recording).values(figures=None))
    asked.clear()
    _, folded = parse_exposition(StoreMetrics(store).exposition())
    assert len(asked) == len(unfigured) + len(CASSETTES)
    assert _figures_only(folded) == _figures_only(stored)


@pytest.fixture(params=["sqlite", "postgresql"])
def engine_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "claudetrace.db")
    return str(request.getfixturevalue("pg_url"))


def test_stored_sums_scrape_as_the_records_and_the_events_do(engine_url: str) -> None:
    """An ended recording stores its figures summed by label set and bucket (both
    writers: import here, the proxy's indexer below); the full exposition is the
    same as from the records stored before (one row a tool call), from a mix of
    both, and from every recording's events folded again."""
    from sqlalchemy import update

    from claudetrace.model.summary import figure_records, is_records

    store = open_settled_store(engine_url)
    try:
        for path in CASSETTES:
            store.import_cassette(read_cassette(path))
        now = time.time_ns()
        cassette = read_cassette(FIXTURES / "permission_deny.cassette.ndjson")
        header = {k: v for k, v in cassette.header.items() if k != "ended_ns"}
        running = store.import_cassette((header, cassette.events))
        store.update_recording(running, ended_ns=None, last_seen_ns=now)
        add_recording(store, now, ended_ns=now, signal=9, outcome="killed")  # no events

        def exposition() -> str:
            text = StoreMetrics(store, clock=lambda: now).exposition()
            return re.sub(r"(claudetrace_store_scrape_duration_seconds) \S+", r"\1", text)

        with store.session() as session:
            stored = dict(session.execute(select(Recording.id, Recording.figures).where(
                Recording.ended_ns.is_not(None), Recording.figures.is_not(None))).all())
        stored = {rid: f for rid, f in stored.items() if isinstance(f, dict)}
        assert len(stored) >= len(CASSETTES)
        assert not any(is_records(figures) for figures in stored.values())
        summed = exposition()
        for name in ("tool_duration_seconds_bucket", "permission_wait_seconds_sum",
                     "control_duration_seconds_count", "tool_calls_total",
                     "permission_decisions_total"):
            assert f"claudetrace_store_{name}{{" in summed, name

        def store_records(ids: list[str]) -> None:
            for rid in ids:
                session = Session()
                session.add_many(list(store.iter_events(rid)))
                store.update_recording(rid, figures=figure_records(session))

        ids = sorted(stored)
        store_records(ids[::2])  # some as stored before the sums
        mixed = exposition()
        store_records(ids[1::2])
        recorded = exposition()
        with store.engine.begin() as conn:  # as stored before migration 0006: folded
            conn.execute(update(Recording).values(figures=None))
        folded = exposition()
        assert summed == mixed == recorded == folded
    finally:
        store.close()


def test_status_sql_agrees_with_the_model(store: Store) -> None:
    now = time.time_ns()
    with store.session() as session:
        rows = session.execute(select(Recording, status_expression(now))).all()
    assert rows
    for recording, sql_status in rows:
        assert sql_status == recording.status, recording.id


# --------------------------------------------------------------------------- command line


def test_metrics_dump(store: Store, db_path: Path) -> None:
    result = CliRunner().invoke(cli, ["metrics", "dump", "--db", str(db_path)])
    assert result.exit_code == 0, result.output
    types, samples = parse_exposition(result.output)
    assert set(types) == {spec.name for spec in promexport.METRICS}
    assert values(samples, "claudetrace_store_sessions_started_total", "source")[
        ("import",)
    ] == len(CASSETTES)


def test_metrics_dump_into_a_pipe_is_the_exposition_exactly(
    db_path: Path, tmp_path: Path,
) -> None:
    # click.echo drops ``ESC [...m`` from what it writes into a pipe: a model named
    # with one had another label value in ``dump`` than on /metrics.
    model = "claude-x\x1b[31mred"
    line = json.dumps({"type": "assistant", "message": {
        "id": "msg_1", "role": "assistant", "model": model, "content": [],
        "usage": {"input_tokens": 3, "output_tokens": 4}}})
    cassette = tmp_path / "red.ndjson"
    # Only ended recordings (not the store fixture's): one without an end is running
    # for 5 s after its last heartbeat, then incomplete, and on a loaded machine the
    # two reads below fell on either side of that (running 1 against 0).
    cassette.write_text(json.dumps({"claudetrace": "cassette", "version": 1, "argv": [],
                                    "exit_code": 0, "started_ns": 1_700_000_000_000_000_000,
                                    "ended_ns": 1_700_000_001_000_000_000}) + "\n"
                        + json.dumps({"seq": 0, "t": 0.1, "dir": "out", "line": line}) + "\n")
    store = open_settled_store(str(db_path))
    try:
        store.import_cassette(read_cassette(cassette))
        result = CliRunner().invoke(cli, ["metrics", "dump", "--db", str(db_path)])
        assert result.exit_code == 0, result.output
        exposition = StoreMetrics(store).exposition()
    finally:
        store.close()

    def steady(text: str) -> str:  # all but the scrape's own duration
        return re.sub(r"(claudetrace_store_scrape_duration_seconds) \S+", r"\1", text)

    assert steady(result.output) == steady(exposition)
    assert f'model="{model}"' in result.output


def test_metrics_dump_openmetrics(store: Store, db_path: Path) -> None:
    result = CliRunner().invoke(cli, ["metrics", "dump", "--openmetrics", "--db", str(db_path)])
    assert result.exit_code == 0, result.output
    assert result.output.endswith("# EOF\n")
    assert "# TYPE claudetrace_store_tool_duration_seconds histogram" in result.output


def test_metrics_serve_subprocess(store: Store, db_path: Path) -> None:
    argv = [sys.executable, "-m", "claudetrace", "metrics", "serve", "--db", str(db_path)]
    with subprocess.Popen([*argv, "--port", "0"], stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", line)
        assert match, line
        _, samples = scrape(f"http://127.0.0.1:{match.group(1)}")
        assert values(samples, "claudetrace_store_sessions", "status")[("killed",)] == 2
        proc.terminate()
        assert proc.wait(10) is not None


def test_metrics_serve_reports_a_busy_port(db_path: Path) -> None:
    import socket

    open_settled_store(str(db_path)).close()

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = CliRunner().invoke(
            cli, ["metrics", "serve", "--db", str(db_path), "--port", str(port)]
        )
    assert result.exit_code == 1
    assert "cannot listen on 127.0.0.1" in result.output
    assert "Traceback" not in result.output


def test_a_proxied_recording_stores_its_figures_as_it_ends(db_path: Path) -> None:
    # The indexer (not only import) stores them: a cold scrape folds no proxied session.
    open_settled_store(str(db_path)).close()
    line = (b'{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use",'
            b'"id":"toolu_1","name":"Bash","input":{}}]}}\n')
    done = subprocess.run([sys.executable, "-m", "claudetrace", "proxy", "--db", str(db_path),
                           "--", "cat"], input=line, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    store = open_settled_store(str(db_path))
    try:
        (rec,) = store.list_recordings()
        assert rec.figures == {  # summed: one row a label set
            "tool_calls": [["Bash", "unfinished", 1]], "control_requests": [],
            "permission_decisions": [], "tool_duration": [], "control_duration": [],
            "permission_wait": []}
    finally:
        store.close()


def test_running_gauges_are_the_live_summary_less_the_written_calls(store: Store) -> None:
    """A running recording's tokens its summary has and its calls' rows do not yet
    (a turn under way) are the gauge's; written, or the recording ended, or its
    heartbeat stale, they are not; a model served stays at 0."""
    metrics = StoreMetrics(store)
    cassette = read_cassette(FIXTURES / "permission_deny.cassette.ndjson")
    header = {k: v for k, v in cassette.header.items() if k != "ended_ns"}
    rid = store.import_cassette((header, cassette.events))
    store.update_recording(rid, ended_ns=None, last_seen_ns=time.time_ns())
    running = "claudetrace_store_running_tokens"
    _, samples = parse_exposition(metrics.exposition())
    gauge = values(samples, running, "model", "type")
    counted = values(samples, "claudetrace_store_tokens_total", "model", "type")
    assert set(gauge) == set(counted)  # every model the counters have, at 0:
    assert not any(gauge.values())  # the rows have every call
    summary = store.get(rid).models
    model = next(iter(summary))
    more = {**summary, model: {**summary[model], "input": summary[model]["input"] + 7,
                               "output": summary[model]["output"] + 3},
            "claude-y": {"input": 5, "output": 0, "cache_read": 0, "cache_creation": 0}}
    store.update_recording(rid, models=more)
    _, samples = parse_exposition(metrics.exposition())
    gauge = values(samples, running, "model", "type")
    assert {k: v for k, v in gauge.items() if v} == {
        (model, "input"): 7, (model, "output"): 3, ("claude-y", "input"): 5}
    counters = values(samples, "claudetrace_store_tokens_total", "model", "type")
    assert ("claude-y", "input") not in counters
    for stop in ({"last_seen_ns": time.time_ns() - 60 * S}, {"ended_ns": time.time_ns()}):
        store.update_recording(rid, **stop)
        _, samples = parse_exposition(metrics.exposition())
        gauge = values(samples, running, "model", "type")
        assert set(gauge) >= {(model, "input"), ("claude-y", "input")}
        assert not any(gauge.values())
        store.update_recording(rid, ended_ns=None, last_seen_ns=time.time_ns())


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_the_running_cost_prices_1_hour_cache_writes_at_their_rate(
        tmp_path: Path, request: pytest.FixtureRequest, engine: str) -> None:
    """An imported session whose calls wrote to the 1-hour cache: its calls' rows
    hold that split; running, with a turn under way that wrote more of both, the
    gauge is that turn's price with its 1-hour writes at the 1-hour rate."""
    import datetime as dt

    from claudetrace.formats.imports import import_file
    from claudetrace.pricing import call_cost
    from claudetrace.store import open_store
    from claudetrace.store.models import UsageCall
    from claudetrace.testing.transcripts import Call, Transcript, write_transcript

    model = "claude-sonnet-4-5-20250929"
    at = dt.datetime(2026, 5, 1, 12, tzinfo=dt.timezone.utc)
    path = write_transcript(tmp_path / "projects", Transcript("s-1h", "-home-dev", [
        Call(model, at, input=10, output=20, cache_read=300, cache_creation=4000,
             cache_creation_1h=3000),
        Call(model, at + dt.timedelta(minutes=1), input=5, output=7, cache_creation=1000,
             cache_creation_1h=1000)]))
    url = str(tmp_path / "s.db") if engine == "sqlite" else request.getfixturevalue("pg_url")
    store = open_store(url)
    try:
        rid = import_file(store, path).recording_id
        with store.session() as s:
            assert s.execute(select(func.sum(UsageCall.cache_creation_1h_tokens)).where(
                UsageCall.recording_id == rid)).scalar_one() == 4000
        summary = store.get(rid).models
        assert summary[model]["cache_creation_1h"] == 4000
        # A turn under way: 2,000 more cache writes, 1,500 of them for an hour.
        store.update_recording(rid, ended_ns=None, last_seen_ns=time.time_ns(), models={
            model: {**summary[model], "cache_creation": summary[model]["cache_creation"] + 2000,
                    "cache_creation_1h": 5500}})
        _, samples = parse_exposition(StoreMetrics(store).exposition())
        price = call_cost(model, 0, 0, 0, 2000, 1500)
        as_5_minutes = call_cost(model, 0, 0, 0, 2000)
        assert price is not None and as_5_minutes is not None and price > as_5_minutes
        assert values(samples, "claudetrace_store_running_cost_usd", "model")[
            model,] == pytest.approx(price, abs=1e-12)
        assert values(samples, "claudetrace_store_running_tokens", "model", "type")[
            model, "cache_creation"] == 2000
    finally:
        if engine == "postgresql":
            with store.engine.begin() as conn:
                conn.exec_driver_sql("TRUNCATE recordings CASCADE")
        store.close()


def test_a_turn_ending_during_a_scrape_is_not_counted_twice(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The counters are read before the gauges: a turn whose calls are written
    between the two reads is in neither in that scrape (in the counters in the
    next), never in both."""
    from claudetrace.promexport import store as promstore

    metrics = StoreMetrics(store)
    cassette = read_cassette(FIXTURES / "permission_deny.cassette.ndjson")
    header = {k: v for k, v in cassette.header.items() if k != "ended_ns"}
    rid = store.import_cassette((header, cassette.events))
    summary = store.get(rid).models
    model = next(iter(summary))
    store.update_recording(rid, ended_ns=None, last_seen_ns=time.time_ns(), models={
        **summary, model: {**summary[model], "input": summary[model]["input"] + 7}})
    tokens, running = "claudetrace_store_tokens_total", "claudetrace_store_running_tokens"
    _, before = parse_exposition(metrics.exposition())
    under_way = values(before, running, "model", "type")[model, "input"]
    assert under_way == 7
    final = values(before, tokens, "model", "type")[model, "input"] + 7
    read = promstore.aggregate.running_unwritten
    ends: list[int] = []

    def turn_ends_meanwhile(*args: object) -> object:
        found = read(*args)  # type: ignore[arg-type]
        if not ends:  # then the turn's call is written, as the indexer does when it ends
            ends.append(1)
            store.write_batch(rid, [], {"usage_calls": [
                ("msg_under_way", time.time_ns(), model, 7, 0, 0, 0, None, "unknown")]})
        return found

    monkeypatch.setattr(promstore.aggregate, "running_unwritten", turn_ends_meanwhile)
    _, during = parse_exposition(metrics.exposition())
    _, after = parse_exposition(metrics.exposition())
    assert values(during, running, "model", "type")[model, "input"] == 7  # read first
    for samples in (during, after):
        assert (values(samples, tokens, "model", "type")[model, "input"]
                + values(samples, running, "model", "type")[model, "input"]) <= final
    assert values(after, tokens, "model", "type")[model, "input"] == final
    assert values(after, running, "model", "type")[model, "input"] == 0
