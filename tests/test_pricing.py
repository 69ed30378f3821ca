"""Cost where the CLI did not say: the price table (genai-prices), per call, and
``cost_source`` (cli, estimate, unknown) in the session model and every view."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from claudetrace import pricing
from claudetrace.cli import cli
from claudetrace.formats.html import report_data
from claudetrace.formats.imports import import_file
from claudetrace.model import fold
from claudetrace.store import Store
from claudetrace.telemetry import build_spans
from claudetrace.telemetry import conventions as c
from claudetrace.telemetry.metrics import measurements
from claudetrace.testing.transcripts import Call, Transcript, write_transcript

genai_prices = pytest.importorskip("genai_prices", reason="genai-prices needs Python 3.11")

T0 = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.timezone.utc)
SONNET = "claude-sonnet-4-5-20250929"
OPUS = "claude-opus-4-5-20251101"


def table_price(model: str, i: int, o: int, cr: int, cc: int) -> float:
    """The table's price of one request, asked directly (input includes the cache)."""
    usage = genai_prices.Usage(input_tokens=i + cr + cc, output_tokens=o,
                               cache_read_tokens=cr, cache_write_tokens=cc)
    return float(genai_prices.calc_price(usage, model, provider_id="anthropic").total_price)


@pytest.mark.parametrize("counts", [
    (1200, 300, 40_000, 2_000),       # the first tier
    (10_000, 5_000, 230_000, 9_000),  # above 200k input in all: Sonnet's long-context price
    (0, 700, 0, 0),
    (3, 0, 0, 0),
])
@pytest.mark.parametrize("model", [SONNET, OPUS, "claude-haiku-4-5-20251001"])
def test_a_call_costs_what_the_table_says(model: str, counts: tuple[int, int, int, int]) -> None:
    assert pricing.call_cost(model, *counts) == pytest.approx(table_price(model, *counts),
                                                              rel=1e-12)


def test_no_price_is_none_never_zero() -> None:
    assert pricing.call_cost("claude-fake-9", 10, 10, 0, 0) is None
    assert pricing.call_cost(None, 10, 0, 0, 0) is None
    # A message of no tokens (Claude Code's "<synthetic>" ones) costs nothing.
    assert pricing.call_cost("<synthetic>", 0, 0, 0, 0) == 0.0
    # A name with control characters is no model's, not Sonnet 4.5 by its prefix.
    assert pricing.call_cost("claude-sonnet-4-5", 10, 10, 0, 0) is not None
    assert pricing.call_cost("claude-sonnet-4-5\n\x1b[2J", 10, 10, 0, 0) is None
    assert pricing.calls_cost("claude-sonnet-4-5\n\x1b[2J", 10, 10, 0, 0) is None


def import_one(store: Store, tmp_path: Path, t: Transcript) -> str:
    done = import_file(store, write_transcript(tmp_path / "projects", t))
    assert done.recording_id
    return done.recording_id


def sessions_json(db_path: Path) -> dict[str, dict[str, object]]:
    out = CliRunner().invoke(cli, ["sessions", "--json", "--db", str(db_path)])
    assert out.exit_code == 0, out.output
    return {r["id"]: r for r in json.loads(out.stdout)}


def test_a_transcript_without_cost_is_priced_per_call_and_marked(
    store: Store, db_path: Path, tmp_path: Path
) -> None:
    # Two calls each under 200k input: priced alone, not as one 300k-token request.
    calls = [Call(SONNET, T0, 1000, 400, 150_000, 3000), Call(SONNET, T0 + dt.timedelta(
        minutes=1), 2000, 800, 150_000, 1000, lines=3), Call(OPUS, T0 + dt.timedelta(minutes=2),
                                                           50, 20, 0, 0)]
    rid = import_one(store, tmp_path, Transcript("a1b2c3d4-0000-4000-8000-000000000001",
                                                 "-home-dev-project", calls))
    want = {SONNET: table_price(SONNET, 1000, 400, 150_000, 3000)
            + table_price(SONNET, 2000, 800, 150_000, 1000),
            OPUS: table_price(OPUS, 50, 20, 0, 0)}
    rec = sessions_json(db_path)[rid]
    assert rec["cost_source"] == "estimate"
    assert rec["cost_usd"] == pytest.approx(sum(want.values()))
    assert {m: f["cost_usd"] for m, f in rec["models"].items()} == pytest.approx(want)
    shown = CliRunner().invoke(cli, ["show", rid, "--db", str(db_path)]).stdout
    assert f"${sum(want.values()):.6f} (estimate)" in shown
    # The spans and the cost metric carry the estimate as one.
    spans = build_spans(store.get(rid).info(), list(store.iter_events(rid)))
    root = spans[-1]
    assert root.attributes[c.COST_SOURCE] == "estimate"
    assert root.attributes[c.COST_USD] == pytest.approx(sum(want.values()))
    costs = [m for m in measurements(root) if m.instrument == c.METRIC_SESSION_COST]
    assert {m.attributes[c.COST_SOURCE] for m in costs} == {"estimate"}
    assert sum(m.value for m in costs) == pytest.approx(sum(want.values()))
    # The HTML report's table.
    data = report_data(store.get(rid), list(store.iter_events(rid)))
    assert data["cost_source"] == "estimate"
    assert {r[0]: r[6] for r in data["models"]} == pytest.approx(
        {m: round(v, 6) for m, v in want.items()})


def test_an_unknown_model_is_unknown_cost(store: Store, db_path: Path, tmp_path: Path) -> None:
    calls = [Call(SONNET, T0, 100, 10), Call("claude-fake-9", T0 + dt.timedelta(seconds=5),
                                             100, 10)]
    rid = import_one(store, tmp_path, Transcript("a1b2c3d4-0000-4000-8000-000000000002",
                                                 "-home-dev-project", calls))
    rec = sessions_json(db_path)[rid]
    assert rec["cost_source"] == "unknown"
    assert rec["cost_usd"] is None
    assert rec["models"]["claude-fake-9"]["cost_usd"] is None
    assert rec["models"][SONNET]["cost_usd"] == pytest.approx(table_price(SONNET, 100, 10, 0, 0))
    shown = CliRunner().invoke(cli, ["show", rid, "--db", str(db_path)]).stdout
    assert "unknown (no price for claude-fake-9)" in shown
    root = build_spans(store.get(rid).info(), list(store.iter_events(rid)))[-1]
    assert root.attributes[c.COST_SOURCE] == "unknown"
    assert c.COST_USD not in root.attributes


def test_without_a_price_table_nothing_is_priced(monkeypatch: pytest.MonkeyPatch) -> None:
    # Python 3.10, where genai-prices does not install (nor are its rates kept).
    monkeypatch.setattr(pricing, "_library", lambda: None)
    monkeypatch.setattr(pricing, "_table_key", lambda: "")
    from claudetrace.cassette import read_cassette

    cassette = read_cassette(Path(__file__).parent / "fixtures" / "cassettes" / "cli_dies.ndjson")
    session = fold(cassette.events)
    assert not session.cli_cost_reported and session.usage
    assert session.cost().source == "unknown" and session.cost().usd is None


def test_the_cli_s_cost_wins(store: Store, db_path: Path) -> None:
    from claudetrace.cassette import read_cassette

    path = Path(__file__).parent / "fixtures" / "cassettes" / "multi_turn.ndjson"
    rid = store.import_cassette(read_cassette(path))
    rec = sessions_json(db_path)[rid]
    results = [e.message for e in read_cassette(path).events if e.fields.type == "result"]
    assert rec["cost_source"] == "cli"
    assert rec["cost_usd"] == pytest.approx(results[-1]["total_cost_usd"])  # type: ignore[index]


def test_the_migration_prices_what_was_stored_before(
    store: Store, db_path: Path, tmp_path: Path
) -> None:
    from alembic import command
    from sqlalchemy import update

    from claudetrace.store.engine import alembic_config
    from claudetrace.store.models import Recording

    rid = import_one(store, tmp_path, Transcript("a1b2c3d4-0000-4000-8000-000000000003",
                                                 "-home-dev-project", [Call(OPUS, T0, 500, 60)]))
    with store.engine.begin() as conn:  # as an earlier claudetrace stored it
        conn.execute(update(Recording).where(Recording.id == rid).values(
            cost_usd=0.0, models={OPUS: {"cost_usd": 0.0}}))
        command.downgrade(alembic_config(conn), "0005_postgres_bulk_events")
        command.upgrade(alembic_config(conn), "head")
    rec = sessions_json(db_path)[rid]
    assert rec["cost_source"] == "estimate"
    assert rec["cost_usd"] == pytest.approx(table_price(OPUS, 500, 60, 0, 0))


@pytest.mark.parametrize(("usd", "digits", "shown"), [
    (0.0019, 4, "$0.0019"),
    (0.00012, 4, "$0.00012"),
    (0.000_000_123, 4, "$0.00000012"),
    (0.012345, 6, "$0.012345"),
    (0.5, 4, "$0.5000"),
    (1234.5, 2, "$1,234.50"),
    (0.0, 4, "$0.0000"),
])
def test_every_cost_prints_with_enough_significant_digits(
    usd: float, digits: int, shown: str
) -> None:
    assert pricing.dollars(usd, digits=digits) == shown


def test_a_tiny_estimate_never_reads_zero(store: Store, db_path: Path, tmp_path: Path) -> None:
    rid = import_one(store, tmp_path, Transcript("a1b2c3d4-0000-4000-8000-000000000009",
                                                 "-home-dev-project", [Call(SONNET, T0, 3, 1)]))
    usd = table_price(SONNET, 3, 1, 0, 0)
    assert 0 < usd < 0.0001
    shown = pricing.dollars(usd)
    assert shown.strip("$0.") and shown.startswith("$0.0000")
    for command in (["show", rid], ["sessions"], ["tail", rid]):
        out = CliRunner().invoke(cli, [*command, "--db", str(db_path)])
        assert out.exit_code == 0, out.output
        assert "$0.0000 " not in out.stdout and "$0.000000 " not in out.stdout
        assert shown in out.stdout or pricing.dollars(usd, digits=6) in out.stdout, out.stdout


def test_a_session_without_model_calls_has_no_cost(db_path: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "claudetrace", "proxy", "--db", str(db_path), "--",
                    "true"], check=True, cwd=tmp_path)
    (rec,) = sessions_json(db_path).values()
    assert rec["cost_usd"] is None and rec["cost_source"] == "unknown"
    for command in (["show", "latest"], ["sessions"]):
        out = CliRunner().invoke(cli, [*command, "--db", str(db_path)]).stdout
        assert "— (no model calls)" in out and "$0" not in out, out
    tail = CliRunner().invoke(cli, ["tail", "latest", "--db", str(db_path)]).stdout
    assert "$0" not in tail and "cost unknown" in tail, tail


def test_a_sum_of_calls_is_priced_only_where_the_sum_tells_the_tier() -> None:
    """Two Sonnet calls of 150k input each are two first-tier prices; their sum
    (300k) would read as one long-context request, so it has no price."""
    one = (2000, 800, 148_000, 1000)
    assert pricing.calls_cost(SONNET, *one) == pytest.approx(table_price(SONNET, *one))
    two = tuple(2 * n for n in one)
    assert pricing.call_cost(SONNET, *two) is not None
    assert pricing.calls_cost(SONNET, *two) is None
    small = (100, 20, 300, 10)
    assert pricing.calls_cost(SONNET, *(3 * n for n in small)) == pytest.approx(
        3 * table_price(SONNET, *small))
    assert pricing.calls_cost("no-such-model", *small) is None
    assert pricing.calls_cost(None, 0, 0, 0, 0) == 0.0


def test_a_summary_prices_each_call_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The session's cost and its calls' rows (usage_calls) take one price of each
    call: the rows reuse what Session.cost priced (an import summed it twice)."""
    from claudetrace.bench.transcripts import write_tree
    from claudetrace.formats.claude_code import read_transcript
    from claudetrace.model import session as session_module
    from claudetrace.model.summary import summary_columns

    tree = write_tree(tmp_path / "projects", sessions=1, size=200_000, agents=2)
    path = next(p for p in tree.root.glob("*/*.jsonl"))
    session = fold(read_transcript(path).events)
    asked: list[str | None] = []

    def counted(model: str | None, *tokens: int) -> float | None:
        asked.append(model)
        return pricing.call_cost(model, *tokens)

    monkeypatch.setattr(session_module, "call_cost", counted)
    columns = summary_columns(session, started_ns=0)
    assert columns["cost_source"] == "estimate"
    rows = columns["usage_calls"]
    assert len(asked) == len(session.calls) == len(rows) > 10
    assert sum(row[7] for row in rows) == pytest.approx(columns["cost_usd"])


def test_the_rates_are_kept_for_the_next_process(tmp_path: Path) -> None:
    """A process that prices a call it has not priced before reads the rates an
    earlier one asked of the same table, without loading the table (an indexer
    pricing a session without a result, on the way to listing it complete)."""
    import subprocess
    import sys

    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path)}
    script = (
        "import sys; from claudetrace import pricing\n"
        f"price = pricing.call_cost({SONNET!r}, 1200, 300, 40000, 2000)\n"
        f"unknown = pricing.call_cost('no-such-model', 1, 1, 0, 0)\n"
        "print(price, unknown, 'genai_prices' in sys.modules)\n")
    first, second = (subprocess.run([sys.executable, "-c", script], env=env, check=True,
                                    capture_output=True, text=True).stdout.split()
                     for _ in range(2))
    assert first == [repr(table_price(SONNET, 1200, 300, 40_000, 2_000)), "None", "True"]
    assert second == [*first[:2], "False"]
    assert (tmp_path / "claudetrace" / pricing.KEPT_FILE).exists()
    # Rates of another table are not read.
    kept = tmp_path / "claudetrace" / pricing.KEPT_FILE
    kept.write_text(kept.read_text().replace('"table": "', '"table": "x'))
    third = subprocess.run([sys.executable, "-c", script], env=env, check=True,
                           capture_output=True, text=True).stdout.split()
    assert third == first
    # Rates kept by a claudetrace that kept four (no 1-hour write) are asked again.
    import json

    older = json.loads(kept.read_text().replace('"table": "x', '"table": "'))
    older["rates"] = [row[:-1] for row in older["rates"]]
    kept.write_text(json.dumps(older))
    fourth = subprocess.run([sys.executable, "-c", script], env=env, check=True,
                            capture_output=True, text=True).stdout.split()
    assert fourth == first
