"""A CLI killed while a message streams, as the usage report prices it (real CLI,
fake API, the recording proxy).

The CLI's last ``result`` covers the turns before; the message it was streaming
is priced by the table from its own tokens (those the fake API sent), never the
whole session again.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage
from click.testing import CliRunner

from claudetrace.cli import cli
from claudetrace.indexer import open_settled_store
from claudetrace.pricing import call_cost, dollars
from claudetrace.testing import FakeAPI
from claudetrace.testing.fakeapi import DEFAULT_MODEL, Reply, text, usage
from tests.capture_rig import make_rig, wait_for_recording
from tests.scenarios import ScenarioResult, run_scenario

pytestmark = pytest.mark.slow


def _cli_pid(db: Path, real: Path) -> int:
    """The real CLI's process id: the deepest process under the proxy (the
    recording's ``pid``) that runs it."""
    store = open_settled_store(str(db))
    try:
        (rec,) = store.list_recordings()
        assert rec.ended_ns is None and rec.pid
    finally:
        store.close()
    found, pids = [], [int(rec.pid)]
    while pids:
        pid = pids.pop()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if os.fsencode(str(real)) in argv[:2]:
            found.append(pid)
        for task in Path(f"/proc/{pid}/task").iterdir():
            pids += [int(n) for n in (task / "children").read_text().split()]
    assert found, "the CLI's process was not found"
    return found[-1]


def test_a_killed_stream_adds_its_own_estimate_to_the_cli_s_cost(
    tmp_path: Path, real_claude: Path, fake_api: FakeAPI
) -> None:
    rig = make_rig(tmp_path, real_claude)

    async def killed(cli_path: str, api: FakeAPI, options: ClaudeAgentOptions,
                     result: ScenarioResult) -> None:
        api.script(text("First answer."), Reply(blocks=(), hang=True))
        options.include_partial_messages = True  # the host sees message_start's usage
        try:
            async with ClaudeSDKClient(options) as client:
                await client.query("Hello.")
                async for message in client.receive_response():
                    result.messages.append(message)
                await client.query("Tell me more.")
                async for message in client.receive_response():
                    result.messages.append(message)
                    event = getattr(message, "event", None) or {}
                    if event.get("type") == "message_start":
                        await asyncio.sleep(1.0)  # the proxy has stored the line
                        os.kill(_cli_pid(rig.db, real_claude), signal.SIGKILL)
        except Exception as exc:
            result.error = type(exc).__name__

    run = run_scenario("killed_mid_stream", rig.shim, fake_api, func=killed)
    assert run.error is not None  # the CLI died under the host
    (said,) = [m for m in run.messages if isinstance(m, ResultMessage)]
    assert said.total_cost_usd is not None and said.total_cost_usd > 0
    assert len(fake_api.message_requests()) == 2

    store = open_settled_store(str(rig.db))
    try:
        rid = wait_for_recording(store, set())
        assert store.get(rid).status == "killed"
    finally:
        store.close()
    out = CliRunner().invoke(cli, ["usage", "session", "--json", "--db", str(rig.db)])
    assert out.exit_code == 0, out.output
    (entry,) = json.loads(out.stdout)["sessions"]
    # The independent count: the tokens the fake API sent for its second message
    # (message_start's, the stream held after it), priced by the table.
    start, _final = usage(1)
    streaming = call_cost(DEFAULT_MODEL, start["input_tokens"], start["output_tokens"],
                          start["cache_read_input_tokens"],
                          start["cache_creation_input_tokens"])
    assert streaming is not None
    assert entry["totalCost"] == pytest.approx(said.total_cost_usd + streaming, abs=1e-9)
    assert entry["inputTokens"] == usage(0)[0]["input_tokens"] + start["input_tokens"]
    assert entry["costSource"] == "estimate"
    assert entry["cliCost"] == pytest.approx(said.total_cost_usd, abs=1e-9)
    assert entry["estimatedCost"] == pytest.approx(streaming, abs=1e-9)
    # The table says the same: the CLI's part, then the table's, marked.
    table = CliRunner().invoke(cli, ["usage", "session", "--db", str(rig.db)])
    assert table.exit_code == 0, table.output
    assert f"{dollars(said.total_cost_usd)} + ~{dollars(streaming)}" in table.stdout
    # The session list and show say the same figure (they read the same layer),
    # not the CLI's alone.
    listed = CliRunner().invoke(cli, ["sessions", "--json", "--db", str(rig.db)])
    assert listed.exit_code == 0, listed.output
    (rec,) = json.loads(listed.stdout)
    assert rec["cost_usd"] == pytest.approx(said.total_cost_usd + streaming, abs=1e-9)
    assert rec["cost_source"] == "estimate"
    shown = CliRunner().invoke(cli, ["show", rid, "--db", str(rig.db)])
    assert shown.exit_code == 0, shown.output
    assert f"{dollars(entry['totalCost'], digits=6)} (estimate)" in shown.stdout
