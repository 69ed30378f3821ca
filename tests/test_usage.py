"""``claudetrace usage``: tokens and cost by day, week, month, session and 5-hour block,
from the store's per-call rows, against an independent count of the corpus."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace.cassette import read_cassette
from claudetrace.cli import cli
from claudetrace.formats.imports import import_file
from claudetrace.store import Store, open_store
from claudetrace.store.usage import HourUsage
from claudetrace.testing.transcripts import Call, Transcript, write_transcript
from claudetrace.usage import make_blocks
from tests.test_store_postgres import pg_url  # noqa: F401  (the fixture)

SONNET = "claude-sonnet-4-5-20250929"
OPUS = "claude-opus-4-5-20251101"
HAIKU = "claude-haiku-4-5-20251001"
UTC = dt.timezone.utc


def at(day: int, hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime(2026, 11, day, hour, minute, tzinfo=UTC)


def corpus() -> list[Transcript]:
    """Main-thread sessions in two projects over three days and a month's turn,
    three models, messages written as several lines, a call of 230k input."""
    return [
        Transcript("11111111-0000-4000-8000-000000000001", "-home-dev-alpha", [
            Call(SONNET, at(20, 9), 1200, 300, 40_000, 2_000, lines=2),
            Call(SONNET, at(20, 9, 5), 10_000, 5_000, 230_000, 9_000),
            Call(HAIKU, at(20, 23, 40), 50, 20, 0, 0),
        ], cwd="/home/dev/alpha"),
        Transcript("11111111-0000-4000-8000-000000000002", "-home-dev-beta", [
            Call(OPUS, at(21, 0, 10), 300, 900, 12_000, 800, lines=3),
            Call(OPUS, at(22, 14), 30, 10, 1_000, 0),
        ], cwd="/home/dev/beta"),
        Transcript("11111111-0000-4000-8000-000000000003", "-home-dev-alpha", [
            Call(SONNET, at(30, 22), 7, 8, 9, 10),
        ], cwd="/home/dev/alpha"),
    ]


@pytest.fixture
def filled(store: Store, tmp_path: Path) -> list[Transcript]:
    found = corpus()
    for t in found:
        assert import_file(store, write_transcript(tmp_path / "projects", t)).recording_id
    return found


def run(db_path: Path, *args: str) -> Any:
    out = CliRunner().invoke(cli, ["usage", *args, "--db", str(db_path)])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout) if "--json" in args else out.stdout


def expected(transcripts: list[Transcript], key: Any) -> dict[str, dict[str, int]]:
    """Tokens per period, counted from the corpus itself."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for t in transcripts:
        for c in t.calls:
            row = out[key(c.at)]
            row["inputTokens"] += c.input
            row["outputTokens"] += c.output
            row["cacheReadTokens"] += c.cache_read
            row["cacheCreationTokens"] += c.cache_creation
    return {k: dict(v) for k, v in out.items()}


TOKENS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheCreationTokens")


@pytest.mark.parametrize(("report", "zone", "key"), [
    ("daily", "UTC", lambda t: t.date().isoformat()),
    ("daily", "Asia/Kolkata", lambda t: t.astimezone(
        dt.timezone(dt.timedelta(hours=5, minutes=30))).date().isoformat()),
    ("daily", "Europe/Paris", lambda t: t.astimezone(
        dt.timezone(dt.timedelta(hours=1))).date().isoformat()),  # winter: +1
    ("monthly", "UTC", lambda t: t.strftime("%Y-%m")),
    ("weekly", "UTC", lambda t: (t.date() - dt.timedelta(days=(t.weekday() + 1) % 7))
     .isoformat()),
])
def test_periods_add_up_the_calls(filled: list[Transcript], db_path: Path, report: str,
                                  zone: str, key: Any) -> None:
    got = run(db_path, report, "--json", "--timezone", zone)
    field = {"daily": "date", "weekly": "week", "monthly": "month"}[report]
    want = expected(filled, key)
    assert {e[field]: {k: e[k] for k in TOKENS} for e in got[report]} == want
    assert [e["period"] for e in got[report]] == sorted(want)
    for e in got[report]:
        assert e["totalTokens"] == sum(e[k] for k in TOKENS)
        assert sum(m["inputTokens"] for m in e["modelBreakdowns"]) == e["inputTokens"]
        assert e["costSource"] == "estimate"
    assert got["totals"]["totalTokens"] == sum(sum(v.values()) for v in want.values())


def test_each_call_is_priced_alone(filled: list[Transcript], db_path: Path) -> None:
    from claudetrace.pricing import call_cost

    want = sum(call_cost(c.model, c.input, c.output, c.cache_read, c.cache_creation) or 0.0
               for t in filled for c in t.calls)
    got = run(db_path, "monthly", "--json", "-z", "UTC")
    assert got["totals"]["totalCost"] == pytest.approx(want)
    assert sum(e["totalCost"] for e in got["monthly"]) == pytest.approx(want)


def test_filters(filled: list[Transcript], db_path: Path) -> None:
    beta = run(db_path, "daily", "--json", "-z", "UTC", "--project", "beta")
    assert [e["date"] for e in beta["daily"]] == ["2026-11-21", "2026-11-22"]
    opus = run(db_path, "monthly", "--json", "-z", "UTC", "--model", OPUS)
    assert opus["totals"]["inputTokens"] == 330
    days = run(db_path, "daily", "--json", "-z", "UTC", "--since", "20261121",
               "--until", "2026-11-22")
    assert [e["date"] for e in days["daily"]] == ["2026-11-21", "2026-11-22"]
    assert run(db_path, "daily", "--json", "--source", "proxy")["daily"] == []
    # A day range the wrong way round was an empty report, exit 0.
    backwards = CliRunner().invoke(cli, ["usage", "--since", "2026-11-22", "--until", "20261121",
                                         "-z", "UTC", "--db", str(db_path)])
    assert backwards.exit_code == 2 and backwards.stdout == ""
    assert backwards.stderr == ("claudetrace: --since 2026-11-22 is after --until 20261121: "
                                "no day is in between\n")


@pytest.mark.parametrize("days", [
    ["--since", "9999-12-31"], ["--until", "99991231"], ["--until", "0001-01-01"],
    ["--since", "0001-01-01", "-z", "America/New_York"],
    ["--since", "99991231", "-z", "Pacific/Kiritimati"],
])
def test_a_day_a_store_cannot_reach_is_one_clear_error(
        filled: list[Transcript], db_path: Path, days: list[str]) -> None:
    # Each was a traceback (Python's date overflow, SQLite's integer overflow).
    far = CliRunner().invoke(cli, ["usage", *days, "--db", str(db_path)])
    assert far.exit_code == 2 and far.stdout == "", far.output
    option, day = days[:2]
    assert far.stderr == f"claudetrace: {option} {day} is out of range: days from 1678 to 2261\n"


def test_zone_local_empty_and_live_json(filled: list[Transcript], db_path: Path) -> None:
    # The help says "default: local": -z local is that; -z '' was silently local.
    local = CliRunner().invoke(cli, ["usage", "--json", "-z", "local", "--db", str(db_path)])
    assert local.exit_code == 0 and json.loads(local.stdout) == run(db_path, "daily", "--json")
    empty = CliRunner().invoke(cli, ["usage", "-z", "", "--db", str(db_path)])
    assert empty.exit_code == 2 and "an empty time zone" in empty.output
    # --live with --json was ignored silently.
    live = CliRunner().invoke(cli, ["usage", "blocks", "--live", "--json", "--db", str(db_path)])
    assert live.exit_code == 2 and "not --json" in live.output


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_a_filter_that_matches_nothing_says_so_and_what_the_store_has(
        engine: str, tmp_path: Path, db_path: Path, request: pytest.FixtureRequest) -> None:
    """``--model nope`` was an empty report and nothing else, as if nothing had been
    used; every filter of the report now says so alike (exit 0: a valid question)."""
    db = str(db_path) if engine == "sqlite" else request.getfixturevalue("pg_url")
    store = open_store(db)
    try:
        for t in corpus():
            assert import_file(store, write_transcript(tmp_path / "projects", t)).recording_id
        store.update_recording(store.resolve("latest").id, tags={"team": "infra"})
    finally:
        store.close()
    cases = {
        ("--model", "nope"): "no call used model 'nope'; the store has "
        f"{SONNET} (3 calls), {OPUS} (2 calls), {HAIKU} (1 call)",
        ("--project", "gamma"): "no call was made in a project matching 'gamma'; the store "
        "has /home/dev/alpha (4 calls), /home/dev/beta (2 calls)",
        ("--source", "proxy"): "no call came from source 'proxy'; the store has "
        "transcript (6 calls)",
        ("--name", "x"): "no call is of a session named 'x'; the store has none",
        ("--tag", "team=web"): "no call is of a session tagged team=web; the store has "
        "team=infra (1 call)",
    }
    for args, line in cases.items():
        out = CliRunner().invoke(cli, ["usage", "--json", *args, "--db", db])
        assert out.exit_code == 0, out.output
        assert json.loads(out.stdout)["daily"] == []
        assert out.stderr == f"claudetrace: {line}\n"
    # A filter that matches calls, emptied by another: nothing said of it.
    out = CliRunner().invoke(cli, ["usage", "--json", "--model", OPUS, "--project", "alpha",
                                   "--db", db])
    assert (out.exit_code, out.stderr) == (0, "")


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_a_tag_with_a_non_ascii_key_or_a_quote_is_found_by_every_command(
        engine: str, tmp_path: Path, db_path: Path, request: pytest.FixtureRequest) -> None:
    """``sessions --tag`` asked SQLite by a JSON path made of the key, which misses
    a key stored escaped (``équipe``, ``ключ``) or holding a ``"``; ``usage`` and
    ``prune`` found them."""
    db = str(db_path) if engine == "sqlite" else request.getfixturevalue("pg_url")
    store = open_store(db)
    tags = [{"équipe": "web"}, {"ключ": "x"}, {'q"x': "y"}]
    try:
        ids = [import_file(store, write_transcript(tmp_path / "projects", t)).recording_id
               for t in corpus()[:3]]
        for rid, tag in zip(ids, tags, strict=True):
            store.update_recording(rid, tags=tag)
    finally:
        store.close()
    for rid, tag in zip(ids, tags, strict=True):
        ((key, value),) = tag.items()
        asked = ("--tag", f"{key}={value}", "--db", db)
        listed = CliRunner().invoke(cli, ["sessions", "--json", *asked])
        assert listed.exit_code == 0, listed.output
        assert [r["id"] for r in json.loads(listed.stdout)] == [rid], (tag, listed.output)
        used = CliRunner().invoke(cli, ["usage", "session", "--json", *asked])
        assert used.exit_code == 0 and used.stderr == "", used.output
        assert len(json.loads(used.stdout)["sessions"]) == 1
        pruned = CliRunner().invoke(cli, ["prune", "--dry-run", *asked])
        assert pruned.exit_code == 0 and rid in pruned.stdout, pruned.output
        wrong = CliRunner().invoke(cli, ["sessions", "--json", "--tag", f"{key}=other",
                                         "--db", db])
        assert json.loads(wrong.stdout) == []


def test_sessions(filled: list[Transcript], db_path: Path) -> None:
    got = run(db_path, "session", "--json", "-z", "UTC")
    by_id = {s["sessionId"]: s for s in got["sessions"]}
    for t in filled:
        s = by_id[t.session_id]
        assert s["inputTokens"] == sum(c.input for c in t.calls)
        assert s["cacheReadTokens"] == sum(c.cache_read for c in t.calls)
        assert s["projectPath"] == t.cwd
        assert s["lastActivity"] == max(c.at for c in t.calls).date().isoformat()
        assert set(s["modelsUsed"]) == {c.model for c in t.calls}


def test_the_table_marks_estimates_and_unpriced_models(
    store: Store, db_path: Path, tmp_path: Path
) -> None:
    t = Transcript("11111111-0000-4000-8000-000000000009", "-x", [
        Call(SONNET, at(20, 9), 100, 10), Call("claude-fake-9", at(20, 10), 100, 10)])
    import_file(store, write_transcript(tmp_path / "projects", t))
    text = run(db_path, "daily", "-z", "UTC", "--breakdown")
    assert "~$" in text and "+ ?" in text and "no price for claude-fake-9" in text
    got = run(db_path, "daily", "--json", "-z", "UTC")
    (day,) = got["daily"]
    assert day["unpricedModels"] == ["claude-fake-9"]
    assert {m["modelName"]: m["cost"] for m in day["modelBreakdowns"]}["claude-fake-9"] is None


def test_the_cli_s_cost_is_shared_among_its_calls(store: Store, db_path: Path) -> None:
    path = Path(__file__).parent / "fixtures" / "cassettes" / "multi_turn.ndjson"
    rid = store.import_cassette(read_cassette(path))
    got = run(db_path, "session", "--json")
    (s,) = got["sessions"]
    assert s["costSource"] == "cli"
    assert s["totalCost"] == pytest.approx(store.get(rid).cost_usd)


def test_a_recorded_name_is_escaped_in_the_table(
    store: Store, db_path: Path, tmp_path: Path
) -> None:
    t = Transcript("11111111-0000-4000-8000-00000000000a", "-x", [
        Call("claude-\x1b[31mred", at(20, 9), 100, 10)])
    import_file(store, write_transcript(tmp_path / "projects", t))
    text = run(db_path, "daily", "-z", "UTC")
    assert "\x1b" not in text and "\\x1b" in text


def test_json_escapes_bidi_and_c1_and_keeps_the_value(
    store: Store, db_path: Path, tmp_path: Path
) -> None:
    """``--json`` writes bidi and C1 controls as ``\\uNNNN`` (as ``sessions --json``
    does): a model name cannot reorder or control the terminal, and a script reads
    the very name recorded."""
    model = "claude-\u202eder\u2066\x9b31m"
    t = Transcript("11111111-0000-4000-8000-00000000000b", "-x", [
        Call(model, at(20, 9), 100, 10)])
    import_file(store, write_transcript(tmp_path / "projects", t))
    out = CliRunner().invoke(cli, ["usage", "daily", "--json", "-z", "UTC", "--db", str(db_path)])
    assert out.exit_code == 0, out.output
    assert not any(c in out.stdout for c in "\u202e\u2066\x9b")
    assert "\\u202e" in out.stdout
    assert json.loads(out.stdout)["daily"][0]["modelsUsed"] == [model]


def call(t: dt.datetime, model: str = SONNET, n: int = 10) -> HourUsage:
    ns = int(t.timestamp()) * 1_000_000_000
    return HourUsage(ns, ns, model, "estimate", n, n, 0, 0, 0.01, 1)


def test_blocks_as_ccusage_cuts_them() -> None:
    # 23:30 and 00:30 share the 23:00 block; 06:30 comes more than five hours
    # after the last call: a gap from 05:30, and a block from 06:00.
    blocks = make_blocks([call(at(20, 23, 30)), call(at(21, 0, 30), OPUS),
                          call(at(21, 6, 30))])
    shape = [(dt.datetime.fromtimestamp(b.start_ns / 1e9, UTC).strftime("%d %H:%M"), b.gap,
              b.totals.calls) for b in blocks]
    assert shape == [("20 23:00", False, 2), ("21 05:30", True, 0), ("21 06:00", False, 1)]
    # Five hours after the block's start, even without a pause, a new block.
    blocks = make_blocks([call(at(20, 9, 10)), call(at(20, 11)), call(at(20, 13)),
                          call(at(20, 14, 20))])
    assert [b.totals.calls for b in blocks] == [3, 1]
    assert not any(b.gap for b in blocks)


def test_the_active_block_has_a_burn_rate_and_a_projection() -> None:
    (block,) = make_blocks([call(at(20, 9, 0)), call(at(20, 9, 30), n=20)])
    now = int(at(20, 10).timestamp()) * 1_000_000_000
    assert block.active(now)
    rate = block.burn_rate()
    assert rate is not None and rate["tokensPerMinute"] == pytest.approx(60 / 30)
    projection = block.projection(now)
    assert projection is not None and projection["remainingMinutes"] == 240
    assert projection["totalTokens"] == 60 + 2 * 240
    later = int(at(20, 15).timestamp()) * 1_000_000_000
    assert not block.active(later)


def test_a_block_of_calls_seconds_apart_has_no_burn_rate_yet() -> None:
    # Two calls 20 s apart: no rate (ccusage's would be 180 tokens a minute, and a
    # session of a few calls in one second gives millions), hence no projection.
    start = at(20, 9, 0)
    (block,) = make_blocks([call(start), call(start + dt.timedelta(seconds=20), n=20)])
    assert block.burn_rate() is None
    assert block.projection(int(at(20, 9, 5).timestamp()) * 1_000_000_000) is None


def test_the_active_block_of_one_quick_session_says_its_rate_is_not_known_yet(
    tmp_path: Path
) -> None:
    now = dt.datetime.now(UTC)
    quick = Transcript("44444444-0000-4000-8000-000000000001", "-home-dev-quick", [
        Call(SONNET, now - dt.timedelta(seconds=12), 1000, 200),
        Call(SONNET, now - dt.timedelta(seconds=11), 1000, 200)], cwd="/home/dev/quick")
    db = tmp_path / "store.db"
    store = open_store(f"sqlite:///{db}")
    try:
        import_file(store, write_transcript(tmp_path / "projects", quick))
    finally:
        store.close()
    table = CliRunner().invoke(cli, ["usage", "blocks", "--db", str(db)], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert "ACTIVE" in table.output and "under a minute between its calls" in table.output
    assert "tokens/min" not in table.output
    data = CliRunner().invoke(cli, ["usage", "blocks", "--json", "--db", str(db)])
    (block,) = json.loads(data.output)["blocks"]
    assert block["isActive"] and block["burnRate"] is None and block["projection"] is None


def test_a_message_two_recordings_hold_counts_once(
    filled: list[Transcript], store: Store, db_path: Path, tmp_path: Path
) -> None:
    # A resumed session's transcript repeats the history it was resumed from: the
    # same API messages under another session id (ccusage counts them once too).
    first = filled[1]
    resumed = Transcript("11111111-0000-4000-8000-0000000000aa", first.project, [])
    path = write_transcript(tmp_path / "projects", resumed)
    lines = [line.replace(first.session_id, resumed.session_id) for line in
             (tmp_path / "projects" / first.project / f"{first.session_id}.jsonl")
             .read_text().splitlines(keepends=True)]
    # The message ids stay the original's; only the session's id is new.
    lines = [line.replace(f"msg_{resumed.session_id}", f"msg_{first.session_id}")
             .replace(f"req_{resumed.session_id}", f"req_{first.session_id}") for line in lines]
    path.write_text("".join(lines))
    assert import_file(store, path).recording_id
    got = run(db_path, "monthly", "--json", "-z", "UTC")
    assert got["totals"]["inputTokens"] == sum(c.input for t in filled for c in t.calls)
    sessions = {s["sessionId"]: s for s in run(db_path, "session", "--json")["sessions"]}
    assert resumed.session_id not in sessions  # all its calls were counted with the first


def test_the_migration_fills_the_rows_of_what_was_stored(
    filled: list[Transcript], store: Store, db_path: Path
) -> None:
    from alembic import command

    from claudetrace.store.engine import alembic_config

    before = run(db_path, "daily", "--json", "-z", "UTC")
    with store.engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0007_cost_source")
        command.upgrade(alembic_config(conn), "head")
    assert run(db_path, "daily", "--json", "-z", "UTC") == before


def test_the_live_indexer_writes_ended_turns_without_the_price_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from claudetrace import pricing
    from claudetrace.model import fold
    from claudetrace.model.summary import summary_columns

    events = read_cassette(Path(__file__).parent / "fixtures" / "cassettes"
                           / "multi_turn.ndjson").events
    results = [e.seq for e in events if e.direction == "out" and e.fields.type == "result"]
    # Cut in the second turn, after its first model call began.
    cut = next(e.seq for e in events if e.seq > results[0] and e.fields.type == "assistant")
    session = fold(e for e in events if e.seq <= cut)
    assert session.results == 1 and session.open_turn is not None

    def no_table() -> None:
        raise AssertionError("the price table was loaded")

    monkeypatch.setattr(pricing, "_library", no_table)
    monkeypatch.setattr(pricing, "_table_key", lambda: "")
    rows = summary_columns(session, started_ns=0, ended_turns=True)["usage_calls"]
    first = {c.id for c in session.turns[0].calls if c.usage}
    assert {r[0] for r in rows} == first and {r[8] for r in rows} == {"cli"}
    assert sum(r[7] for r in rows) == pytest.approx(session.cost_usd)


def _tricky() -> Transcript:
    """Calls at a block's exact end (five hours after its start, on the hour),
    just after it, and after pauses of exactly five hours and just more."""
    base = at(25, 10)
    five = dt.timedelta(hours=5)
    times = [base, base + dt.timedelta(minutes=20), base + five,
             base + five + dt.timedelta(seconds=1), base + 2 * five + dt.timedelta(seconds=1),
             base + 3 * five + dt.timedelta(seconds=2), base + 3 * five + dt.timedelta(hours=1)]
    return Transcript("11111111-0000-4000-8000-0000000000bb", "-home-dev-gamma",
                      [Call(OPUS if n % 2 else SONNET, t, 10 + n, 20 + n, 30, 40)
                       for n, t in enumerate(times)], cwd="/home/dev/gamma")


@pytest.mark.parametrize("args", [
    ("daily", "-z", "UTC"), ("daily", "-z", "Asia/Kolkata"), ("daily", "-z", "Europe/Paris"),
    ("weekly", "-z", "UTC"), ("monthly", "-z", "America/New_York"),
    ("session", "-z", "UTC"), ("blocks",), ("blocks", "--since", "20260910", "-z", "UTC"),
    ("daily", "--since", "20260905", "--until", "20260920", "-z", "Asia/Kolkata"),
    ("session", "--project", "p3", "--model", SONNET), ("blocks", "--project", "p2"),
])
def test_reports_from_the_hour_sums_equal_those_from_the_calls(
    store: Store, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
) -> None:
    from claudetrace.store import usage as q
    from claudetrace.testing.transcripts import random_corpus

    for t in [*random_corpus(12, calls=40, seed=11), _tricky(), *corpus()]:
        assert import_file(store, write_transcript(tmp_path / "projects", t)).recording_id
    # A recording written again (the indexer's turns) and one deleted: the sums follow.
    victim = store.list_recordings(limit=1)[0].id
    store.delete_recording(victim)
    assert q._columns(q.UsageFilter()) is q._HOURS  # the reports read the hour sums
    from_hours = run(db_path, *args, "--json")
    monkeypatch.setattr(q, "_columns", lambda *_: q._CALLS)
    assert run(db_path, *args, "--json") == from_hours
    assert from_hours[args[0] if args[0] != "session" else "sessions"]


def test_usage_import_reads_only_what_changed(db_path: Path, tmp_path: Path) -> None:
    projects = tmp_path / "projects"
    found = corpus()
    for t in found:
        write_transcript(projects, t)

    def report() -> tuple[str, Any]:
        out = CliRunner().invoke(cli, ["usage", "monthly", "--json", "-z", "UTC", "--db",
                                       str(db_path), "--import", str(projects)])
        assert out.exit_code == 0, out.output
        return out.stderr.strip(), json.loads(out.stdout)

    said, first = report()
    assert said == f"import: {len(found)} imported, 0 updated, 0 unchanged", said
    said, again = report()
    assert "unchanged" in said and again == first  # nothing read again
    grown = found[2]
    grown.calls.append(Call(SONNET, at(30, 23), 1, 2, 3, 4))
    write_transcript(projects, grown)
    said, last = report()
    assert f"{len(found) - 1} unchanged" in said, said
    assert last["totals"]["inputTokens"] == first["totals"]["inputTokens"] + 1


def test_usage_import_says_what_it_skipped_as_import_does(db_path: Path, tmp_path: Path) -> None:
    # A FIFO and a file with two damaged lines were left out of "imported: N
    # imported", exit 0; import says them and exits 1: usage --import alike,
    # still printing the report.
    projects = tmp_path / "projects"
    found = corpus()
    for t in found:
        write_transcript(projects, t)
    damaged = next(projects.rglob("*.jsonl"))
    damaged.write_text(damaged.read_text() + "{broken\n[1, 2\n")
    os.mkfifo(projects / "pipe.jsonl")
    out = CliRunner().invoke(cli, ["usage", "monthly", "--json", "-z", "UTC", "--db",
                                   str(db_path), "--import", str(projects)])
    assert out.exit_code == 1, out.output
    assert json.loads(out.stdout)["totals"]["inputTokens"] > 0
    summary = out.stderr.strip().splitlines()[-1]
    assert summary == (f"import: {len(found)} imported, 0 updated, 0 unchanged, 1 skipped; "
                       "2 damaged lines skipped"), out.stderr
    assert "pipe.jsonl: skipped" in out.stderr


#: ``usage`` run alone in a process: the report on stdout, then the heavy modules
#: it imported on stderr.
USAGE_ALONE = """
import sys
from claudetrace.cli import cli
try:
    cli(["usage", *sys.argv[1:]])
finally:
    print(sorted({m for m in sys.modules if m.startswith(
        ("claudetrace.model", "claudetrace.store.textindex", "sqlalchemy"))}), file=sys.stderr)
"""


def test_a_report_on_a_bare_connection_loads_no_session_model(
        filled: list[Transcript], db_path: Path) -> None:
    # What a report reads is the store's sums: the session model (and the search
    # index's code that folds lines with it) is start-up time it does not use.
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", USAGE_ALONE, "daily", "--json", "-z", "UTC",
                           "--db", str(db_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["daily"]
    assert done.stderr.strip().splitlines()[-1] == "[]"
