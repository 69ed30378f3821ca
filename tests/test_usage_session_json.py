"""The period and session reports' JSON, written from msgspec structs (one path,
:func:`claudetrace.usage._entry`), holds the figures of the calls themselves: each
entry and model breakdown summed from ``usage_calls`` here, independently of the
sums the reports read (``usage_models``, ``usage_hours``), on SQLite and
PostgreSQL: sums, rounding, order, ``null``, unpriced models, escapes. The session
table shows the same entries."""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace.cli import cli
from claudetrace.formats.imports import import_file
from claudetrace.store import open_store
from claudetrace.store.usage import store_reader
from claudetrace.testing.transcripts import Call, Transcript, random_corpus, write_transcript
from tests.test_store_postgres import fresh_database, pg_url  # noqa: F401  (the fixture)

UTC = dt.timezone.utc
KEYS = ["inputTokens", "outputTokens", "cacheCreationTokens", "cacheReadTokens",
        "totalTokens", "totalCost", "costSource", "cliCost", "estimatedCost",
        "unpricedModels", "modelsUsed", "modelBreakdowns"]


def _corpus() -> list[Transcript]:
    """Random sessions of several models, and the odd ones: a model without a price
    beside a priced one, a session of unpriced calls only, controls and bidi in a
    project and a model name, a project name of non-ASCII letters."""
    at = dt.datetime(2026, 11, 20, 9, tzinfo=UTC)
    odd = [
        Transcript("22222222-0000-4000-8000-000000000001", "-x", [
            Call("claude-sonnet-4-5-20250929", at, 100, 10, 7, 3),
            Call("claude-fake-9", at + dt.timedelta(minutes=1), 100, 10)], cwd="/home/dev/x"),
        Transcript("22222222-0000-4000-8000-000000000002", "-y", [
            Call("claude-fake-9", at + dt.timedelta(hours=2), 5, 6)], cwd="/home/dév/ÿ"),
        Transcript("22222222-0000-4000-8000-000000000003", "-z", [
            Call("claude-\u202eder\u2066\x9b31m", at + dt.timedelta(hours=3), 1, 2),
            Call("claude-haiku-4-5-20251001", at + dt.timedelta(hours=3), 3, 4)],
            cwd="/home/\x1b[31mred\u2028"),
    ]
    return [*random_corpus(14, calls=30, seed=5), *odd]


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        found = str(tmp_path / "claudetrace.db")
    else:
        found = fresh_database(request.getfixturevalue("pg_url"), "usage_session_json")
    store = open_store(found, create=True)
    try:
        for t in _corpus():
            assert import_file(store, write_transcript(tmp_path / "projects", t)).recording_id
    finally:
        store.close()
    yield found


def _calls(url: str) -> list[tuple[Any, ...]]:
    """Every counted call: its recording, time, model, four token counts, cost and
    cost source, in time order."""
    store = open_store(url)
    try:
        return sorted(store_reader(store).rows(
            "SELECT recording_id, t_ns, model, input_tokens, output_tokens, "
            "cache_creation_tokens, cache_read_tokens, cost_usd, cost_source "
            "FROM usage_calls WHERE NOT duplicate", []), key=lambda c: (c[1], c[0], c[2]))
    finally:
        store.close()


def _expected(calls: list[tuple[Any, ...]]) -> dict[str, Any]:
    """An entry's fields (but its own keys) summed from its calls, models in the
    order of their first calls, breakdowns the costliest first."""
    models: dict[str, dict[str, Any]] = {}
    for _, _, model, i, o, cc, cr, cost, source in calls:
        m = models.setdefault(model, {"tokens": [0, 0, 0, 0], "cost": 0.0, "est": 0.0,
                                      "sources": set()})
        for k, n in enumerate((i, o, cc, cr)):
            m["tokens"][k] += n
        m["cost"] += cost or 0.0
        m["est"] += (cost or 0.0) if source == "estimate" else 0.0
        m["sources"].add(source)

    def source_of(sources: set[str]) -> str:
        return "cli" if sources <= {"cli"} else "unknown" if sources == {"unknown"} \
            else "estimate"

    tokens = [sum(m["tokens"][k] for m in models.values()) for k in range(4)]
    cost = sum(m["cost"] for m in models.values())
    est = sum(m["est"] for m in models.values())
    every = set().union(*(m["sources"] for m in models.values()))
    return {
        "inputTokens": tokens[0], "outputTokens": tokens[1],
        "cacheCreationTokens": tokens[2], "cacheReadTokens": tokens[3],
        "totalTokens": sum(tokens), "totalCost": pytest.approx(cost, abs=2e-9),
        "costSource": source_of(every),
        "cliCost": pytest.approx(cost - est, abs=2e-9),
        "estimatedCost": pytest.approx(est, abs=2e-9),
        "unpricedModels": [name for name, m in models.items() if "unknown" in m["sources"]],
        "modelsUsed": list(models),
        "modelBreakdowns": [
            {"modelName": name, "inputTokens": m["tokens"][0], "outputTokens": m["tokens"][1],
             "cacheCreationTokens": m["tokens"][2], "cacheReadTokens": m["tokens"][3],
             "cost": None if m["sources"] == {"unknown"}
             else pytest.approx(m["cost"], abs=2e-9),
             "costSource": source_of(m["sources"])}
            for name, m in sorted(models.items(), key=lambda nm: -nm[1]["cost"])],
    }


def _report(url: str, *args: str) -> tuple[str, dict[str, Any]]:
    out = CliRunner().invoke(cli, ["usage", *args, "--json", "-z", "UTC", "--db", url])
    assert out.exit_code == 0, out.output
    return out.stdout, json.loads(out.stdout)


def test_each_session_s_entry_is_its_calls(url: str) -> None:
    calls = _calls(url)
    text, found = _report(url, "session")
    by_recording: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for call in calls:
        by_recording[call[0]].append(call)
    entries = found["sessions"]
    assert [e["recordingId"] for e in entries] == sorted(
        by_recording, key=lambda r: (max(c[1] for c in by_recording[r]), r))
    for entry in entries:
        assert list(entry) == ["sessionId", *KEYS, "lastActivity", "projectPath",
                               "recordingId", "name", "source", "period", "agent", "metadata"]
        assert (entry["period"], entry["agent"]) == (entry["sessionId"], "claude")
        assert {k: entry[k] for k in KEYS} == _expected(by_recording[entry["recordingId"]])
        last = max(c[1] for c in by_recording[entry["recordingId"]])
        assert entry["lastActivity"] == dt.datetime.fromtimestamp(last / 1e9, UTC).date() \
            .isoformat()
        assert entry["metadata"] == {"lastActivity": dt.datetime.fromtimestamp(
            last // 1_000_000 / 1e3, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"}
    total = _expected(calls)
    assert {k: found["totals"][k] for k in KEYS[:9]} == {k: total[k] for k in KEYS[:9]}
    assert set(found["totals"]["unpricedModels"]) == set(total["unpricedModels"])
    # What could move a terminal's cursor is escaped, as json.dumps escapes it.
    assert "\\u202e" in text and "\\u2028" in text and "\x1b" not in text
    by_id = {s["sessionId"][-1]: s for s in entries if s["sessionId"].startswith("22222222")}
    assert by_id["1"]["unpricedModels"] == ["claude-fake-9"]
    assert by_id["2"]["costSource"] == "unknown"
    assert by_id["2"]["modelBreakdowns"][0]["cost"] is None


@pytest.mark.parametrize("report", ["daily", "monthly"])
def test_each_period_s_entry_is_its_calls(url: str, report: str) -> None:
    calls = _calls(url)
    _, found = _report(url, report)
    by_period: dict[str, list[tuple[Any, ...]]] = defaultdict(list)

    def day(call: tuple[Any, ...]) -> str:
        return dt.datetime.fromtimestamp(call[1] / 1e9, UTC).date().isoformat()

    # A period's models in the order of the days (the database's sums) they are in,
    # a day's by name.
    for call in sorted(calls, key=lambda c: (day(c), c[2])):
        by_period[day(call) if report == "daily" else day(call)[:7]].append(call)
    key = {"daily": "date", "monthly": "month"}[report]
    entries = found[report]
    assert [e[key] for e in entries] == sorted(by_period)
    for entry in entries:
        assert list(entry) == [key, "period", *KEYS, "agent", "metadata"]
        assert (entry["agent"], entry["metadata"]) == ("all", {"agents": ["claude"]})
        assert entry["period"] == entry[key]
        assert {k: entry[k] for k in KEYS} == _expected(by_period[entry[key]])


def test_the_session_table_shows_the_json_s_entries(url: str) -> None:
    _, found = _report(url, "session")
    out = CliRunner().invoke(cli, ["usage", "session", "--breakdown", "-z", "UTC",
                                   "--db", url])
    assert out.exit_code == 0, out.output
    rows = [[cell.strip() for cell in line.split("│")[1:-1]]
            for line in out.stdout.splitlines() if line.startswith("│")]
    # A session's row (its models may wrap below it), then a row per model.
    firsts = [row for row in rows if row[0]]
    assert len(firsts) == len(found["sessions"]) + 1  # and the total
    for row, entry in zip(firsts, found["sessions"], strict=False):
        assert row[4:9] == [f"{entry[k]:,}" for k in KEYS[:5]]
    models = [row for row in rows if row[3].startswith("└ ")]
    assert [row[4:9] for row in models] == [
        [f"{b[k]:,}" for k in KEYS[:4]]
        + [f"{sum(b[k] for k in KEYS[:4]):,}"]
        for e in found["sessions"] for b in e["modelBreakdowns"]]


def test_sessions_json_costs_are_the_usage_session_entries(url: str) -> None:
    """``sessions --json`` (its costs read by ``recording_costs``, a chunk of
    recordings a query) gives each recording the cost of its ``usage session``
    entry: none where a model has no price, else the entry's figure and source."""
    _, found = _report(url, "session")
    out = CliRunner().invoke(cli, ["sessions", "--json", "-n", "0", "--db", url])
    assert out.exit_code == 0, out.output
    listed = {r["id"]: (r["cost_usd"], r["cost_source"]) for r in json.loads(out.stdout)}
    expected = {e["recordingId"]: (None, "unknown") if e["unpricedModels"]
                else (e["totalCost"], e["costSource"]) for e in found["sessions"]}
    assert {rid: listed[rid] for rid in expected} == expected
    assert {source for _, source in expected.values()} >= {"unknown", "estimate"}
