"""The running gauges of ``/metrics`` over a real session held mid-turn (real CLI,
fake API, the recording proxy, the endpoint scraped over HTTP).

A turn under way shows in ``claudetrace_store_running_tokens`` (and its estimated
cost) as the indexer's live summary has it; once the turn ends the counters have
those tokens and the gauges are 0.  Scraped all along in a thread: at no scrape
does a gauge plus its counter exceed the counter's final value.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient

from claudetrace.pricing import call_cost
from claudetrace.promexport import StoreMetrics, make_server
from claudetrace.store import open_store
from claudetrace.testing import FakeAPI
from claudetrace.testing.fakeapi import DEFAULT_MODEL, text, usage
from tests.capture_rig import make_rig, wait_for_recording
from tests.scenarios import ScenarioResult, run_scenario
from tests.test_promexport import Key, scrape, values

pytestmark = pytest.mark.slow

TOKENS = "claudetrace_store_tokens_total"
RUNNING = "claudetrace_store_running_tokens"
RUNNING_COST = "claudetrace_store_running_cost_usd"
KINDS = ("input", "output", "cache_read", "cache_creation")


def _of(samples: dict[Key, float], name: str) -> dict[str, float]:
    """``name``'s samples of the fake model, by type."""
    return {kind: value for (model, kind), value in values(samples, name, "model", "type").items()
            if model == DEFAULT_MODEL}


def _sent(number: int, *, final: bool) -> dict[str, int]:
    """The tokens the fake API sent for its ``number``-th message: ``message_start``'s,
    and with its final output count once the message ended."""
    start, output = usage(number)
    return {"input": start["input_tokens"], "output": output if final else start["output_tokens"],
            "cache_read": start["cache_read_input_tokens"],
            "cache_creation": start["cache_creation_input_tokens"]}


def _until(base: str, check: Callable[[dict[Key, float]], bool],
           timeout: float = 30.0) -> dict[Key, float]:
    deadline = time.monotonic() + timeout
    while True:
        _, samples = scrape(base)
        if check(samples):
            return samples
        assert time.monotonic() < deadline, f"not seen in {timeout} s: {_of(samples, RUNNING)}"
        time.sleep(0.1)


def test_a_turn_under_way_shows_in_the_gauges_then_in_the_counters(
    tmp_path: Path, real_claude: Path, fake_api: FakeAPI
) -> None:
    rig = make_rig(tmp_path, real_claude)
    store = open_store(str(rig.db))  # made now: scraped before the session starts
    httpd = make_server(StoreMetrics(store), "127.0.0.1", 0)
    serving = threading.Thread(target=httpd.serve_forever, daemon=True)
    serving.start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    first, second = _sent(0, final=True), _sent(1, final=True)
    final = {kind: first[kind] + second[kind] for kind in KINDS}
    held = _sent(1, final=False)
    seen: dict[str, dict[str, float]] = {}
    every: list[dict[Key, float]] = []
    stop = threading.Event()

    def keep_scraping() -> None:
        while not stop.is_set():
            every.append(scrape(base)[1])
            time.sleep(0.02)

    _, before = scrape(base)
    assert not _of(before, TOKENS) and not _of(before, RUNNING)
    hold = threading.Event()

    async def held_turn(cli_path: str, api: FakeAPI, options: ClaudeAgentOptions,
                        result: ScenarioResult) -> None:
        api.script(text("First answer."), text("More.", hold=hold))
        options.include_partial_messages = True  # message_start's usage is a line
        async with ClaudeSDKClient(options) as client:
            await client.query("Hello.")
            async for message in client.receive_response():
                result.messages.append(message)
            # The first turn has ended: the counters have it, the gauges nothing.
            counted = await asyncio.to_thread(
                _until, base, lambda s: _of(s, TOKENS) == {k: float(v) for k, v in first.items()})
            seen["counted"] = _of(counted, RUNNING)
            await client.query("Tell me more.")
            # The second message's stream is held after message_start.
            during = await asyncio.to_thread(_until, base, lambda s: any(_of(s, RUNNING).values()))
            seen["during"] = _of(during, RUNNING)
            seen["during_counter"] = _of(during, TOKENS)
            seen["during_cost"] = values(during, RUNNING_COST, "model")
            hold.set()
            async for message in client.receive_response():
                result.messages.append(message)
            after = await asyncio.to_thread(
                _until, base, lambda s: _of(s, TOKENS) == {k: float(v) for k, v in final.items()})
            seen["after"] = _of(after, RUNNING)

    scraper = threading.Thread(target=keep_scraping, daemon=True)
    scraper.start()
    try:
        run = run_scenario("held_mid_turn", rig.shim, fake_api, func=held_turn)
        assert run.error is None
        wait_for_recording(store, set())
        _, ended = scrape(base)
    finally:
        stop.set()
        scraper.join(10)
        httpd.shutdown()
        httpd.server_close()
        store.close()

    assert seen["counted"] == dict.fromkeys(KINDS, 0.0)
    # Mid-turn: the held message's tokens (message_start's), in the gauge only.
    assert seen["during"] == {k: float(v) for k, v in held.items()}
    assert seen["during_counter"] == {k: float(v) for k, v in first.items()}
    price = call_cost(DEFAULT_MODEL, held["input"], held["output"], held["cache_read"],
                      held["cache_creation"])
    assert price is not None and price > 0
    assert seen["during_cost"] == {(DEFAULT_MODEL,): pytest.approx(price, abs=1e-12)}
    # The turn ended: the counters have it all, the gauges are 0 (not gone).
    assert seen["after"] == dict.fromkeys(KINDS, 0.0)
    assert _of(ended, TOKENS) == {k: float(v) for k, v in final.items()}
    assert _of(ended, RUNNING) == dict.fromkeys(KINDS, 0.0)
    assert values(ended, RUNNING_COST, "model") == {(DEFAULT_MODEL,): 0.0}
    # No scrape counted a token twice.
    assert len(every) > 10
    for samples in every:
        counter, gauge = _of(samples, TOKENS), _of(samples, RUNNING)
        for kind in KINDS:
            assert counter.get(kind, 0) + gauge.get(kind, 0) <= final[kind], (kind, samples)
