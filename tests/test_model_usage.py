"""Usage as read from a line (issue 34): 1-hour cache writes kept apart and priced
at their rate, and damaged token counts (negative, not whole, huge) counted as 0
with a warning on the recording, in every view, imported and recorded alike."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace import capture as cap
from claudetrace import indexer as ix
from claudetrace import pricing
from claudetrace.cli import cli
from claudetrace.formats.html import report_data
from claudetrace.formats.imports import import_file
from claudetrace.model import Usage, fold
from claudetrace.model.events import Event
from claudetrace.model.usage import MAX_TOKENS
from claudetrace.recording import RecordingInfo
from claudetrace.store import Store
from claudetrace.testing.transcripts import Call, Transcript, transcript_lines

genai_prices = pytest.importorskip("genai_prices", reason="genai-prices needs Python 3.11")

OPUS = "claude-opus-4-1-20250805"
SONNET = "claude-sonnet-4-5-20250929"
T0 = dt.datetime(2026, 11, 20, 9, tzinfo=dt.timezone.utc)


def table_price(model: str, i: int, o: int, cr: int, cc: int, hour: int) -> float:
    """The table's own price of one request with ``hour`` of its writes 1-hour ones."""
    usage = genai_prices.Usage(input_tokens=i + cr + cc, output_tokens=o, cache_read_tokens=cr,
                               cache_write_tokens=cc, cache_write_1h_tokens=hour)
    return float(genai_prices.calc_price(usage, model, provider_id="anthropic").total_price)


@pytest.mark.parametrize("counts", [(1200, 300, 40_000, 2_000, 1_500),
                                    (10_000, 5_000, 230_000, 9_000, 9_000),  # Sonnet's long tier
                                    (0, 0, 0, 700, 0)])
@pytest.mark.parametrize("model", [OPUS, SONNET])
def test_one_hour_writes_cost_what_the_table_says(
        model: str, counts: tuple[int, int, int, int, int]) -> None:
    assert pricing.call_cost(model, *counts) == pytest.approx(table_price(model, *counts),
                                                              rel=1e-12)


def test_reading_usage_keeps_the_split_and_zeroes_damage() -> None:
    split = {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 30}
    usage = Usage.from_api({"input_tokens": 5, "cache_creation_input_tokens": 40,
                            "cache_creation": split})
    assert (usage.cache_creation, usage.cache_creation_1h, usage.damaged) == (40, 30, 0)
    damaged = Usage.from_api({"input_tokens": -5, "output_tokens": 7.0, "cache_read_input_tokens":
                              10**30, "cache_creation_input_tokens": MAX_TOKENS,
                              "cache_creation": {"ephemeral_1h_input_tokens": "9"}})
    assert damaged.as_dict() == {"input": 0, "output": 0, "cache_read": 0,
                                 "cache_creation": MAX_TOKENS}
    assert (damaged.cache_creation_1h, damaged.damaged) == (0, 4)
    camel = Usage.from_model_usage({"inputTokens": 3, "outputTokens": True,
                                    "cacheCreationEphemeral1hInputTokens": 2})
    assert (camel.input, camel.output, camel.cache_creation_1h, camel.damaged) == (3, 0, 2, 1)


def line(seq: int, obj: dict[str, Any]) -> Event:
    return Event(seq, "out", seq * 1_000_000, json.dumps(obj).encode())  # type: ignore[arg-type]


def assistant(msg_id: str, usage: dict[str, Any]) -> dict[str, Any]:
    return {"type": "assistant", "parent_tool_use_id": None, "session_id": "s1", "message": {
        "id": msg_id, "type": "message", "role": "assistant", "model": OPUS,
        "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn", "usage": usage}}


def test_proxied_lines_carry_the_split_streamed_or_not() -> None:
    hour = {"input_tokens": 10, "output_tokens": 4, "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 1000,
            "cache_creation": {"ephemeral_5m_input_tokens": 400, "ephemeral_1h_input_tokens": 600}}
    init = {"type": "system", "subtype": "init", "model": OPUS, "session_id": "s1"}
    plain = fold([line(0, init), line(1, assistant("msg_a", hour))])
    start = {"type": "stream_event", "parent_tool_use_id": None, "session_id": "s1", "event": {
        "type": "message_start", "message": {"id": "msg_b", "model": OPUS, "usage": {
            **hour, "output_tokens": 1}}}}
    delta = {"type": "stream_event", "parent_tool_use_id": None, "session_id": "s1", "event": {
        "type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": hour}}
    streamed = fold([line(0, init), line(1, start), line(2, delta),
                     line(3, assistant("msg_b", hour))])
    want = table_price(OPUS, 10, 4, 0, 1000, 600)
    for session in (plain, streamed):
        (call,) = session.calls.values()
        assert call.usage.cache_creation_1h == 600
        assert session.cost().usd == pytest.approx(want)
        assert session.cost().source == "estimate"


def cli_json(db_path: Path, *args: str) -> Any:
    out = CliRunner().invoke(cli, [*args, "--json", "--db", str(db_path)])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def views(db_path: Path, rid: str) -> dict[str, Any]:
    """What usage, sessions and show say of the one recording."""
    usage = cli_json(db_path, "usage", "daily", "--timezone", "UTC")["totals"]
    (rec,) = cli_json(db_path, "sessions")
    shown = CliRunner().invoke(cli, ["show", rid, "--db", str(db_path)])
    assert shown.exit_code == 0, shown.output
    return {"usage": usage, "rec": rec, "show": shown.stdout}


def check_damage_ignored(seen: dict[str, Any], sound: Usage, price: float) -> None:
    usage, rec = seen["usage"], seen["rec"]
    assert (usage["inputTokens"], usage["outputTokens"], usage["cacheReadTokens"],
            usage["cacheCreationTokens"]) == (sound.input, sound.output, sound.cache_read,
                                              sound.cache_creation)
    assert usage["totalTokens"] == sound.total
    assert usage["totalCost"] == pytest.approx(price)
    assert (rec["input_tokens"], rec["cache_read_tokens"]) == (sound.input, sound.cache_read)
    assert rec["cost_usd"] == pytest.approx(price)
    assert f"in {sound.input} (+cache read {sound.cache_read}," in seen["show"]
    assert "1 line with a damaged token count" in seen["show"]


def test_damaged_counts_in_a_transcript_count_zero_with_a_warning(
    store: Store, db_path: Path, tmp_path: Path
) -> None:
    t = Transcript("66666666-0000-4000-8000-000000000001", "-home-dev-damage",
                   [Call(OPUS, T0, 100, 50, 2_000, 300), Call(OPUS, T0 + dt.timedelta(minutes=1),
                                                           -5, 40, 10**30, 0)])
    path = tmp_path / "projects" / t.project / f"{t.session_id}.jsonl"
    path.parent.mkdir(parents=True)
    text = "".join(json.dumps(x, separators=(",", ":")) + "\n" for x in transcript_lines(t))
    path.write_text(text)
    rid = import_file(store, path).recording_id
    assert rid
    check_damage_ignored(views(db_path, rid), SOUND, PRICE)
    assert path.read_text() == text  # the transcript is read, never written


def test_a_message_counts_at_the_time_of_the_line_whose_usage_counts(
    store: Store, db_path: Path, tmp_path: Path
) -> None:
    # ccusage 20's rule: the lines of a streamed message before its last carry
    # message_start's usage; the last, 1.4 s later each, the final one: its time
    # counts.  A message whose lines all say the same counts at its first.
    gap = dt.timedelta(milliseconds=1400)
    t = Transcript("66666666-0000-4000-8000-000000000002", "-home-dev-late",
                   [Call(OPUS, T0, 100, 50, 2_000, 300, lines=3, line_gap=gap),
                    Call(OPUS, T0 + dt.timedelta(minutes=1), 10, 0, 0, 0, lines=2, line_gap=gap)])
    path = tmp_path / "projects" / t.project / f"{t.session_id}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(x, separators=(",", ":")) + "\n"
                            for x in transcript_lines(t)))
    assert import_file(store, path).recording_id
    with sqlite3.connect(db_path) as conn:
        counted = conn.execute("SELECT t_ns, output_tokens FROM usage_calls ORDER BY t_ns")
        times = [(dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc), out)
                 for ns, out in counted]
    assert times == [(T0 + 2 * gap, 50), (T0 + dt.timedelta(minutes=1), 0)]
    out = CliRunner().invoke(cli, ["usage", "blocks", "--json", "-z", "UTC", "--db", str(db_path)])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["blocks"][0]["actualEndTime"] == "2026-11-20T09:01:00.000Z"


INIT = {"type": "system", "subtype": "init", "model": OPUS, "session_id": "s1"}
GOOD = {"input_tokens": 100, "output_tokens": 50, "cache_read_input_tokens": 2_000,
        "cache_creation_input_tokens": 300}
BAD = {"input_tokens": -5, "output_tokens": 40, "cache_read_input_tokens": 10**30,
       "cache_creation_input_tokens": 0}
#: A session whose second answer's usage is damaged: (seq, direction, line).
LINES = [(0, "in", {"type": "user", "message": {"role": "user", "content": "hi"}}),
         (1, "out", INIT), (2, "out", assistant("msg_a", GOOD)),
         (3, "out", assistant("msg_b", BAD))]
SOUND = Usage(100, 90, 2_000, 300)
PRICE = table_price(OPUS, 100, 50, 2_000, 300, 0) + table_price(OPUS, 0, 40, 0, 0, 0)


def test_damaged_counts_in_a_cassette_count_zero_with_a_warning(
    store: Store, db_path: Path, tmp_path: Path
) -> None:
    header = {"claudetrace": "cassette", "version": 1, "argv": ["claude"], "started_ns":
              int(T0.timestamp() * 1e9), "session_id": "s1", "model": OPUS}
    cassette = tmp_path / "damaged.ndjson"
    cassette.write_text("".join(json.dumps(x) + "\n" for x in [header, *(
        {"seq": seq, "t": seq / 10, "dir": d, "line": json.dumps(obj)} for seq, d, obj in LINES)]))
    rid = import_file(store, cassette).recording_id
    assert rid
    check_damage_ignored(views(db_path, rid), SOUND, PRICE)
    # The line is stored as it was, damage and all.
    stored = [e.data for e in store.iter_events(rid)]
    assert json.dumps(assistant("msg_b", BAD)).encode() in stored


def test_damaged_counts_in_a_proxied_recording_count_zero_with_a_warning(
    store: Store, db_path: Path
) -> None:
    # The proxy's indexer, fed the capture's records as the proxy writes them.
    info = RecordingInfo.start(["claude", "-p"], model=OPUS)
    indexer = ix.Indexer(info, store)
    start = int(T0.timestamp() * 1e9)
    for seq, (_n, direction, obj) in enumerate(LINES):
        data = json.dumps(obj).encode() + b"\n"
        indexer.feed(cap.Record(cap.KIND_CODE[direction], seq, start + seq, data))
    indexer.feed(cap.Record(cap.END, len(LINES), start + 9, b'{"exit_code": 0}'))
    indexer.finish()
    check_damage_ignored(views(db_path, info.id), SOUND, PRICE)
    # The HTML report's model table: calls, the four token counts, cost.
    data = report_data(store.get(info.id), list(store.iter_events(info.id)))
    (row,) = data["models"]
    assert row[2:6] == [SOUND.input, SOUND.output, SOUND.cache_read, SOUND.cache_creation]
    assert row[6] == pytest.approx(round(PRICE, 6))
    stored = [e.data for e in store.iter_events(info.id)]
    assert json.dumps(assistant("msg_b", BAD)).encode() in stored
