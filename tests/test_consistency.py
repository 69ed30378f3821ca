"""Every view reports the same session, and it is what the CLI itself printed.

For each real-CLI fixture recording (``tests/fixtures/cassettes``, recorded by
``tests/record_fixtures.py`` through the proxy from the bundled CLI), the same
figures are read from every place a user can see them — ``sessions --json``,
``show``, the spans, the OTLP metrics and the Prometheus figures — and compared
with each other and with the CLI's own ``result`` lines: turns, tool calls,
tokens per model and type, cost per model, and the status.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace.cassette import read_cassette
from claudetrace.cli import cli
from claudetrace.indexer import open_settled_store
from claudetrace.model import TOKEN_TYPES
from claudetrace.promexport import StoreMetrics
from claudetrace.store import Store
from claudetrace.telemetry import conventions as c
from claudetrace.telemetry.metrics import measurements
from claudetrace.telemetry.spans import build_spans

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "cassettes").glob("*.ndjson"))
#: What the CLI's exit says, per fixture (the statuses the model must give).
STATUS = {"cli_dies": "killed", "interrupt": "interrupted"}

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
        "totals": (rec["input_tokens"], rec["output_tokens"], rec["cache_read_tokens"],
                   rec["cache_creation_tokens"], rec["cost_usd"]),
    }


def from_show(db: Path, rid: str) -> dict[str, Any]:
    text = CliRunner().invoke(cli, ["show", rid, "--db", str(db)]).stdout
    turns = re.search(r"(\d+) turns? \(the CLI's num_turns: (\d+)\), \d+ model calls?, "
                      r"(\d+) tool calls?", text)
    tokens = re.search(r"in (\d+) \(\+cache read (\d+), cache write (\d+)\), out (\d+)", text)
    cost = re.search(r"cost\s+\$(\S+)", text)
    status = re.search(r"status\s+(\w+)", text)
    assert turns and tokens and cost and status, text
    return {
        "turns": int(turns[1]),
        "num_turns": int(turns[2]),
        "tool_calls": int(turns[3]),
        "totals": (int(tokens[1]), int(tokens[4]), int(tokens[2]), int(tokens[3]),
                   float(cost[1])),
        "status": status[1],
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
    return {
        "tokens": {k: int(v) for k, v in by("claudetrace_store_tokens_total", "model",
                                             "type").items()},
        "cost": {m: v for m, v in by("claudetrace_store_cost_usd_total", "model").items() if v},
        "turns": int(sum(by("claudetrace_store_turns_total", "model").values())),
        "tool_calls": int(sum(tools.values())),
        "status": statuses.pop() if len(statuses) == 1 else statuses,
    }


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_every_view_reports_what_the_cli_printed(path: Path, db_path: Path, store: Store) -> None:
    cli_said = printed_by_the_cli(path)
    rid = store.import_cassette(read_cassette(path))
    listed = from_sessions_json(db_path, rid)
    shown = from_show(db_path, rid)
    spans = from_spans(store, rid)
    otlp = from_otlp_metrics(store, rid)
    prom = from_prometheus(store)
    status = STATUS.get(path.stem, "ok")

    # Turns: a user message to its result; the CLI's num_turns is its own figure.
    assert listed["turns"] == shown["turns"] == spans["turns"] == prom["turns"]
    assert listed["turns"] >= cli_said["results"]
    assert listed["num_turns"] == shown["num_turns"] == spans["num_turns"] == (
        cli_said["num_turns"])
    # Tool calls.
    assert listed["tool_calls"] == shown["tool_calls"] == spans["tool_calls"] == (
        otlp["tool_calls"]) == prom["tool_calls"]
    # Tokens per model and type: what the CLI printed (when it got to print a result).
    assert listed["tokens"] == spans["tokens"] == prom["tokens"]
    if cli_said["tokens"]:
        assert listed["tokens"] == cli_said["tokens"]
    otlp_wanted: Counter[tuple[str, str]] = Counter()
    for (model, kind), n in listed["tokens"].items():
        otlp_wanted[model, "output" if kind == "output" else "input"] += n
    assert otlp["tokens"] == dict(otlp_wanted)
    assert shown["totals"][:4] == listed["totals"][:4] == tuple(
        sum(n for (_, k), n in listed["tokens"].items() if k == kind)
        for kind in ("input", "output", "cache_read", "cache_creation"))
    # Cost per model.
    assert listed["cost"] == pytest.approx(cli_said["cost"])
    assert spans["cost"] == pytest.approx(cli_said["cost"])
    assert otlp["cost"] == pytest.approx(cli_said["cost"])
    assert prom["cost"] == pytest.approx(cli_said["cost"])
    assert shown["totals"][4] == pytest.approx(cli_said["total_cost"], abs=5e-7)
    assert listed["totals"][4] == pytest.approx(cli_said["total_cost"])
    # The status, one definition everywhere.
    assert listed["status"] == shown["status"] == spans["status"] == otlp["status"] == (
        prom["status"]) == status
    assert spans["root_error"] == (status in ("error", "killed", "incomplete"))
