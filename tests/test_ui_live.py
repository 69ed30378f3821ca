"""The session browser's auto-refresh, on a session still being recorded, in Chromium."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from claudetrace.cassette import read_cassette
from claudetrace.indexer import open_settled_store
from claudetrace.model import fold
from claudetrace.model.summary import summary_columns
from claudetrace.recording import RecordingInfo
from tests.browsing import launched, needs_chromium, ui_server

pytestmark = [pytest.mark.slow, needs_chromium]

PLAIN = Path(__file__).parent / "fixtures" / "cassettes" / "plain.ndjson"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched() as chromium:
        yield chromium


def test_a_running_session_shows_what_arrives_without_a_reload(
    browser: Any, tmp_path: Path
) -> None:
    cassette = read_cassette(PLAIN)
    prompt_end = 2  # initialize and the prompt "Say hello."; the answer comes later
    db = tmp_path / "live.db"
    store = open_settled_store(str(db))
    try:
        info = RecordingInfo.start(["claude", "--output-format", "stream-json"], name="live-one")
        info.pid = os.getpid()  # a live pid on this host: the recording counts as running
        store.create_recording(info)
        # A heartbeat far ahead keeps it running however slow the machine is.
        beat = {"last_seen_ns": time.time_ns() + 3_600_000_000_000}
        store.write_batch(info.id, cassette.events[:prompt_end], beat)
        with ui_server(str(db), tmp_path) as base:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            try:
                page.goto(f"{base}/?session={info.id}")
                page.get_by_text("Say hello.").first.wait_for(timeout=60_000)
                # What the session is doing (its liveness) and when it last said something.
                page.get_by_text(re.compile(r"thinking · turn 1 · last event \d\d:\d\d")
                                 ).first.wait_for(timeout=20_000)
                assert page.get_by_text("Hello from the fake model.").count() == 0
                # The header's figures are the fold's the conversation is drawn from:
                # the summary columns, written at the end, made it say 0 turns.
                turns = page.locator("[data-testid='stMetric']").filter(has_text="Turns")
                assert turns.locator("[data-testid='stMetricValue']").inner_text() == "1"
                assert page.get_by_text(re.compile(r"^id .* · 2 lines · ")).count() == 1
                requests_before = page.evaluate("performance.getEntriesByType('navigation').length")

                # The CLI answers: the proxy stores the rest of the session.
                rest = cassette.events[prompt_end:]
                store.write_batch(info.id, rest, {**beat, **summary_columns(fold(cassette.events))})
                page.get_by_text("Hello from the fake model.").first.wait_for(timeout=20_000)
                page.get_by_text(re.compile(r"idle · after turn 1 · last event")).first.wait_for(
                    timeout=20_000)

                # The session ends: the status follows, still without a reload.
                store.update_recording(
                    info.id, ended_ns=info.started_ns + rest[-1].t_ns, exit_code=0
                )
                page.get_by_text("the view refreshes while auto-refresh is on").wait_for(
                    state="detached", timeout=20_000
                )
                navigations = page.evaluate("performance.getEntriesByType('navigation').length")
                assert navigations == requests_before  # the same page, refreshed in place
                page.screenshot(path=str(tmp_path / "live.png"), full_page=True)
            finally:
                page.close()
    finally:
        store.close()
