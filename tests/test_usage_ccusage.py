"""``claudetrace usage --json`` against ccusage itself (npm, run ``--offline`` in UTC) on
transcripts written for the test: the same tokens per period, model and session,
exactly; the same cost where the two price tables agree, and where they do not,
the difference they have (docs/usage.md).

``ccusage`` is ccusage 18 (``tests/ccusage``), which prices every cache write at
the 5-minute rate: the transcripts it is compared on have no 1-hour writes.
1-hour writes are compared with ccusage 20 (``tests/ccusage20``), which prices
them at the 1-hour rate as claudetrace does."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace.cli import cli
from claudetrace.store import Store
from claudetrace.testing.transcripts import Call, Transcript, random_corpus, write_transcript
from tests.ccusage_runner import CCUSAGE_20, ccusage_or_skip, run_ccusage

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ct_env")]
TOKENS = ("inputTokens", "outputTokens", "cacheCreationTokens", "cacheReadTokens",
          "totalTokens")


@pytest.fixture(scope="module")
def ccusage() -> Path:
    return ccusage_or_skip()


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[Path, list[Transcript]]]:
    corpus = random_corpus(24, seed=11)
    for t in corpus:
        write_transcript(tmp_path / "config" / "projects", t)
    yield tmp_path / "config", corpus


def ours(db_path: Path, *args: str) -> Any:
    out = CliRunner().invoke(cli, ["usage", *args, "--json", "--timezone", "UTC",
                                   "--db", str(db_path)])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def by_model(entries: list[dict[str, Any]], key: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e[key], m["modelName"]): m for e in entries for m in e["modelBreakdowns"]}


@pytest.mark.parametrize(("report", "key"), [("daily", "date"), ("monthly", "month"),
                                             ("weekly", "week")])
def test_periods_match_ccusage(ccusage: Path, tree: tuple[Path, list[Transcript]],
                               db_path: Path, report: str, key: str) -> None:
    config, _ = tree
    want = run_ccusage(ccusage, config, report)
    got = ours(db_path, report, "--import", str(config / "projects"))
    assert [e[key] for e in got[report]] == [e[key] for e in want[report]]
    for mine, theirs in zip(got[report], want[report], strict=True):
        assert {k: mine[k] for k in TOKENS} == {k: theirs[k] for k in TOKENS}
        assert sorted(mine["modelsUsed"]) == sorted(theirs["modelsUsed"])
        assert mine["totalCost"] == pytest.approx(theirs["totalCost"], rel=1e-9)
    fields = ("inputTokens", "outputTokens", "cacheCreationTokens", "cacheReadTokens")
    mine_models, their_models = by_model(got[report], key), by_model(want[report], key)
    assert mine_models.keys() == their_models.keys()
    for k, m in mine_models.items():
        assert {f: m[f] for f in fields} == {f: their_models[k][f] for f in fields}
        assert m["cost"] == pytest.approx(their_models[k]["cost"], rel=1e-9)
    assert {k: got["totals"][k] for k in TOKENS} == {k: want["totals"][k] for k in TOKENS}


def test_sessions_match_ccusage(ccusage: Path, tree: tuple[Path, list[Transcript]],
                                db_path: Path) -> None:
    # ccusage 18 adds up a project folder's sessions under the folder's name.
    config, _ = tree
    want = {s["sessionId"]: s for s in run_ccusage(ccusage, config, "session")["sessions"]}
    got: dict[str, dict[str, int]] = {}
    costs: dict[str, float] = {}
    for s in ours(db_path, "session", "--import", str(config / "projects"))["sessions"]:
        folder = s["projectPath"].replace("/", "-")
        row = got.setdefault(folder, dict.fromkeys(TOKENS, 0))
        for k in TOKENS:
            row[k] += s[k]
        costs[folder] = costs.get(folder, 0.0) + s["totalCost"]
    assert got == {f: {k: s[k] for k in TOKENS} for f, s in want.items()}
    assert costs == pytest.approx({f: s["totalCost"] for f, s in want.items()}, rel=1e-9)


def test_a_long_context_call_is_where_the_tables_differ(
    ccusage: Path, store: Store, db_path: Path, tmp_path: Path
) -> None:
    # Sonnet 4.5 above 200k input tokens (cache included): genai-prices charges the
    # long-context rates for the whole request, as Anthropic bills it; ccusage 18
    # charges LiteLLM's higher rate only for the tokens of one type past 200k (here
    # 30k of the 230k cache reads).  Tokens agree.
    at = dt.datetime(2026, 11, 20, 9, tzinfo=dt.timezone.utc)
    t = Transcript("33333333-0000-4000-8000-000000000001", "-home-dev-long",
                   [Call("claude-sonnet-4-5-20250929", at, 10_000, 5_000, 230_000, 9_000)])
    write_transcript(tmp_path / "config" / "projects", t)
    (theirs,) = run_ccusage(ccusage, tmp_path / "config", "daily")["daily"]
    (mine,) = ours(db_path, "daily", "--import", str(tmp_path / "config" / "projects"))["daily"]
    assert {k: mine[k] for k in TOKENS} == {k: theirs[k] for k in TOKENS}
    base = (10_000 * 3 + 5_000 * 15 + 230_000 * 0.3 + 9_000 * 3.75) / 1e6
    assert theirs["totalCost"] == pytest.approx(base + 30_000 * (0.6 - 0.3) / 1e6)
    assert mine["totalCost"] == pytest.approx(
        (10_000 * 6 + 5_000 * 22.5 + 230_000 * 0.6 + 9_000 * 7.5) / 1e6)


def test_one_hour_cache_writes_cost_what_ccusage_20_says(db_path: Path, tmp_path: Path) -> None:
    # Issue 34: a day of 1-hour cache writes (the usage's cache_creation split)
    # was priced at the 5-minute rate, $3.75/M short on Opus 4.1 and $2.25/M on
    # Sonnet 4.5 (1-hour writes cost 2x input, 5-minute ones 1.25x).
    ccusage20 = ccusage_or_skip(CCUSAGE_20)
    at = dt.datetime(2026, 11, 20, 9, tzinfo=dt.timezone.utc)
    opus, sonnet = "claude-opus-4-1-20250805", "claude-sonnet-4-5-20250929"
    minute = dt.timedelta(minutes=1)
    calls = [Call(opus, at, 1_200, 800, 20_000, 615_226 // 2, cache_creation_1h=615_226 // 2),
             Call(opus, at + minute, 300, 200, 90_000, 4_000, cache_creation_1h=1_500, lines=2),
             Call(sonnet, at + 2 * minute, 100, 50, 5_000, 42_176, cache_creation_1h=42_176),
             Call(sonnet, at + 3 * minute, 100, 50, 9_000, 700)]  # 5-minute writes only
    write_transcript(tmp_path / "config" / "projects",
                     Transcript("55555555-0000-4000-8000-000000000001", "-home-dev-hour", calls))
    theirs = run_ccusage(ccusage20, tmp_path / "config", "daily")
    mine = ours(db_path, "daily", "--import", str(tmp_path / "config" / "projects"))
    assert {k: mine["totals"][k] for k in TOKENS} == {k: theirs["totals"][k] for k in TOKENS}
    assert mine["totals"]["totalCost"] == pytest.approx(theirs["totals"]["totalCost"], rel=1e-9)
    assert ({m["modelName"]: m["cost"] for m in mine["daily"][0]["modelBreakdowns"]}
            == pytest.approx({m["modelName"]: m["cost"]
                              for m in theirs["daily"][0]["modelBreakdowns"]}, rel=1e-9))
    # And by the API's rates: 1-hour writes at 2x input ($30/M on Opus 4.1).
    one_hour = (615_226 // 2 + 1_500) * 30 / 1e6 + 42_176 * 6 / 1e6
    five_minute = 2_500 * 18.75 / 1e6 + 700 * 3.75 / 1e6
    rest = ((1_500 * 15 + 1_000 * 75 + 110_000 * 1.5) + (200 * 3 + 100 * 15 + 14_000 * 0.3)) / 1e6
    assert mine["totals"]["totalCost"] == pytest.approx(one_hour + five_minute + rest, rel=1e-9)


def test_a_subagent_s_tokens_count(ccusage: Path, db_path: Path, tmp_path: Path) -> None:
    # A subagent's transcript (<session>/subagents/agent-*.jsonl) counts with its
    # session's.  The import branch reworks subagent imports (issue 32): this is
    # the check that they still add up as ccusage does.
    at = dt.datetime(2026, 11, 20, 9, tzinfo=dt.timezone.utc)
    sid = "44444444-0000-4000-8000-000000000001"
    opus = "claude-opus-4-5-20251101"
    main = Transcript(sid, "-home-dev-sub", [Call(opus, at, 100, 50, 2000, 0)],
                      cwd="/home/dev/sub")
    agent = Transcript(sid, "-home-dev-sub", [Call("claude-haiku-4-5-20251001",
                                                   at + dt.timedelta(seconds=30), 70, 30, 900, 40)],
                       cwd="/home/dev/sub", agent_id="a1b2c3")
    for t in (main, agent):
        write_transcript(tmp_path / "config" / "projects", t)
    theirs = run_ccusage(ccusage, tmp_path / "config", "daily")["totals"]
    mine = ours(db_path, "daily", "--import", str(tmp_path / "config" / "projects"))["totals"]
    assert {k: mine[k] for k in TOKENS} == {k: theirs[k] for k in TOKENS}


def test_blocks_match_ccusage(ccusage: Path, tree: tuple[Path, list[Transcript]],
                              db_path: Path) -> None:
    config, _ = tree
    fields = ("id", "startTime", "endTime", "actualEndTime", "isActive", "isGap", "entries",
              "tokenCounts", "totalTokens")
    want = run_ccusage(ccusage, config, "blocks")["blocks"]
    got = ours(db_path, "blocks", "--import", str(config / "projects"))["blocks"]
    assert [{k: b[k] for k in fields} for b in got] == [{k: b[k] for k in fields} for b in want]
    assert [sorted(b["models"]) for b in got] == [sorted(b["models"]) for b in want]
    assert [b["costUSD"] for b in got] == pytest.approx([b["costUSD"] for b in want], rel=1e-9)


def test_blocks_match_ccusage_20_to_the_millisecond(db_path: Path, tmp_path: Path) -> None:
    # ccusage 20 keeps a message's largest usage and counts it at the time of the
    # line that carries it: the last of a streamed message's lines, written ~1.4 s
    # after its first.  Blocks' ends, last activity and gaps took the first line's
    # time, 1.4 s early.
    ccusage20 = ccusage_or_skip(CCUSAGE_20)
    config = tmp_path / "config"
    for t in random_corpus(24, seed=11, line_gap=dt.timedelta(milliseconds=1400)):
        write_transcript(config / "projects", t)
    fields = ("id", "startTime", "endTime", "actualEndTime", "isActive", "isGap", "entries",
              "tokenCounts", "totalTokens")
    want = run_ccusage(ccusage20, config, "blocks")["blocks"]
    got = ours(db_path, "blocks", "--import", str(config / "projects"))["blocks"]
    assert [{k: b[k] for k in fields} for b in got] == [{k: b[k] for k in fields} for b in want]
    assert [b["costUSD"] for b in got] == pytest.approx([b["costUSD"] for b in want], rel=1e-9)
    # The day a call counts on is that line's too (ccusage 20 names it "period").
    daily = ours(db_path, "daily")["daily"]
    theirs = run_ccusage(ccusage20, config, "daily")["daily"]
    assert [{k: d[k] for k in ("period", *TOKENS)} for d in daily] == [
        {k: d[k] for k in ("period", *TOKENS)} for d in theirs]


def _key_paths(data: Any, prefix: str = "") -> set[str]:
    """Every key of ``data`` as a path (``daily[].metadata.agents``), lists' items
    taken together."""
    if isinstance(data, dict):
        return {path for k, v in data.items()
                for path in (prefix + k, *_key_paths(v, prefix + k + "."))}
    if isinstance(data, list):
        return {path for item in data for path in _key_paths(item, prefix.rstrip(".") + "[].")}
    return set()


@pytest.mark.parametrize(("report", "listed"), [("daily", "daily"), ("weekly", "weekly"),
                                                ("monthly", "monthly"), ("session", "session")])
def test_every_ccusage_20_key_is_there_with_its_value(
        db_path: Path, tmp_path: Path, report: str, listed: str) -> None:
    # Issue 34: ccusage 20 renamed keys (a top-level "session", "period" for a
    # session's id, "metadata.lastActivity" a time) and added "agent" and
    # "metadata": a script written for it reads each of them here too, beside
    # ccusage 18's, with ccusage 20's value.
    ccusage20 = ccusage_or_skip(CCUSAGE_20)
    config = tmp_path / "config"
    for t in random_corpus(10, seed=11, line_gap=dt.timedelta(milliseconds=700)):
        write_transcript(config / "projects", t)
    theirs = run_ccusage(ccusage20, config, report)
    mine = ours(db_path, report, "--import", str(config / "projects"))
    assert _key_paths(theirs) <= _key_paths(mine)
    got = {e["period"]: e for e in mine[listed]}
    # ccusage 20's weeks start on Monday, ccusage 18's (and ours) on Sunday: the
    # weekly entries hold other days (docs/usage.md), only their keys compare.
    # Its sessions come costliest first, ours by last activity.
    periods = [e["period"] for e in theirs[listed]]
    assert report == "weekly" or (list(got) == periods if report != "session"
                                  else sorted(got) == sorted(periods))
    for want in theirs[listed] if report != "weekly" else []:
        entry = got[want["period"]]
        apart = ("totalCost", "modelBreakdowns", "modelsUsed")
        assert {k: entry[k] for k in want if k not in apart} == {
            k: v for k, v in want.items() if k not in apart}
        assert sorted(entry["modelsUsed"]) == sorted(want["modelsUsed"])  # theirs sorted
        assert entry["totalCost"] == pytest.approx(want["totalCost"], rel=1e-9)
        assert {m["modelName"]: m for m in entry["modelBreakdowns"]} == {
            m["modelName"]: {**m, "cost": pytest.approx(m["cost"], rel=1e-9),
                             "costSource": "estimate"} for m in want["modelBreakdowns"]}
    assert {k: mine["totals"][k] for k in theirs["totals"]} == {
        **theirs["totals"], "totalCost": pytest.approx(theirs["totals"]["totalCost"], rel=1e-9)}
    if report == "session":
        assert mine["session"] == mine["sessions"]


def test_a_call_dated_before_the_file_s_first_entry_counts_on_its_own_day(
        db_path: Path, tmp_path: Path) -> None:
    # A clock stepped back: the calls stamped a day before the file's first entry
    # were counted on the first entry's day (the events' times never go back).
    day = dt.datetime(2026, 11, 2, 10, tzinfo=dt.timezone.utc)
    sonnet = "claude-sonnet-4-5-20250929"
    calls = [Call(sonnet, day, 1, 0, 0, 0),
             Call(sonnet, day - dt.timedelta(days=1), 100, 0, 0, 0),
             Call(sonnet, day - dt.timedelta(hours=23), 10, 0, 0, 0)]
    config = tmp_path / "config"
    write_transcript(config / "projects",
                     Transcript("55555555-0000-4000-8000-000000000002", "-home-dev-clock", calls))
    mine = ours(db_path, "daily", "--import", str(config / "projects"))["daily"]
    assert [(d["date"], d["totalTokens"]) for d in mine] == [("2026-11-01", 110),
                                                            ("2026-11-02", 1)]
    theirs = run_ccusage(ccusage_or_skip(CCUSAGE_20), config, "daily")["daily"]
    assert [(d["period"], d["totalTokens"]) for d in theirs] == [("2026-11-01", 110),
                                                                ("2026-11-02", 1)]
