"""End to end: SDK application → shim → ``claudetrace proxy`` → real CLI → fake API.

Each scenario runs twice, directly against the bundled CLI and through a
recording shim, and the application must see the same messages; the direct run
alone is checked too (what the scenario expects, every scripted answer used).  Below the
proxy, the CLI runs inside a capture wrapper that tees its stdin, stdout and
stderr to files: the stored events must be exactly those bytes, in order, each
with its direction.  This is the independent witness of the recording.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from claude_agent_sdk import ResultMessage, SystemMessage

from claudetrace.indexer import open_settled_store
from claudetrace.store import Store
from claudetrace.store.aggregate import stored_latencies
from claudetrace.telemetry.latency import fold_latencies
from claudetrace.testing import FakeAPI
from claudetrace.testing.harness import bundled_cli_version
from tests.capture_rig import (
    Rig,
    assert_causal_order,
    make_rig,
    stream_bytes,
    wait_for_recording,
)
from tests.scenarios import (
    SCENARIOS,
    DirectRun,
    ScenarioResult,
    check_scenario,
    run_scenario,
)

pytestmark = pytest.mark.slow

#: A scenario that kills its CLI: the capture wrapper's pipeline would hide
#: the signal, so it goes through the plain shim and checks the exit status.
KILLED = "cli_dies"


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, real_claude: Path) -> Rig:
    return make_rig(tmp_path_factory.mktemp("e2e"), real_claude)


@pytest.fixture(scope="module")
def direct_run(real_claude: Path, fake_api: FakeAPI) -> Callable[[str], DirectRun]:
    """Each scenario of tests/scenarios.py run directly against the real CLI once, on
    first asking: the check of every scenario and the comparison with a proxied run
    read the same run instead of starting the CLI for each.  A run is kept only when
    it ended; one that raised raises for every asker.  (In this module, so that
    pytest-xdist's ``--dist loadscope`` gives every test reading them one worker.)
    """
    runs: dict[str, DirectRun] = {}

    def run(name: str) -> DirectRun:
        if name not in runs:
            result = run_scenario(name, real_claude, fake_api)
            runs[name] = DirectRun(result, fake_api.pending, list(fake_api.unknown))
        return runs[name]

    return run


@pytest.fixture
def store(rig: Rig) -> Iterator[Store]:
    opened = open_settled_store(str(rig.db))
    yield opened
    opened.close()


def init_messages(result: ScenarioResult) -> list[dict[str, object]]:
    return [m.data for m in result.messages if isinstance(m, SystemMessage) and m.subtype == "init"]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_against_the_real_cli(name: str, direct_run: Callable[[str], DirectRun]) -> None:
    run = direct_run(name)  # run once, shared with test_scenario_through_the_proxy
    check_scenario(run.result)
    assert run.pending == 0, "the CLI did not use every scripted answer"
    assert run.unknown == [], "the CLI asked the fake API for something it does not serve"


def test_scenarios_are_deterministic(
    real_claude: Path, fake_api: FakeAPI, direct_run: Callable[[str], DirectRun]
) -> None:
    # The basis of comparing direct, proxied and replayed runs: the module's direct
    # run of the scenario and one more, made here.
    first = direct_run("mcp_tool").result.comparable()
    second = run_scenario("mcp_tool", real_claude, fake_api).comparable()
    assert first == second


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_through_the_proxy(
    name: str,
    rig: Rig,
    store: Store,
    real_claude: Path,
    fake_api: FakeAPI,
    direct_run: Callable[[str], DirectRun],
) -> None:
    direct = direct_run(name).result  # run once, shared with test_scenario_against_the_real_cli
    known = {r.id for r in store.list_recordings()}
    capture = rig.root / name
    capture.mkdir()
    shim = rig.shim if name == KILLED else rig.capture_shim
    proxied = run_scenario(
        name, shim, fake_api, env={"CT_CAPTURE": str(capture), "CT_REAL": str(real_claude)}
    )

    # The application cannot tell the proxy is there.
    check_scenario(proxied)
    assert proxied.comparable() == direct.comparable()

    recording_id = wait_for_recording(store, known)
    rec = store.get(recording_id)
    events = list(store.iter_events(recording_id))
    assert [e.seq for e in events] == list(range(len(events)))
    assert rec.event_count == len(events)
    assert rec.argv[-2:] == ["--input-format", "stream-json"]
    # The Stats page's latency samples, stored by the indexer with the end, are
    # what a visit folds from the stored lines.
    assert rec.ended_ns is not None
    assert stored_latencies(store, {recording_id: rec.event_count}) == {
        recording_id: fold_latencies(store, recording_id)}

    # Metadata parsed from the stream.
    inits = init_messages(proxied)
    assert rec.cli_session_id == inits[0]["session_id"]
    assert rec.claude_code_version == bundled_cli_version()
    assert rec.model == inits[-1]["model"]
    assert rec.permission_mode == inits[-1]["permissionMode"]

    # Exactly the lines the host got: one stored result line per result message.
    stored_results = [e for e in events if e.direction == "out" and e.type == "result"]
    assert len(stored_results) == len(proxied.results())
    for line, message in zip(stored_results, proxied.results(), strict=True):
        assert isinstance(message, ResultMessage)
        assert line.message is not None and line.message["subtype"] == message.subtype
    assert {e.type for e in events if e.direction == "in"} <= {
        "control_request",
        "control_response",
        "user",
    }
    assert_causal_order(events)

    if name == KILLED:
        assert (rec.exit_code, rec.signal, rec.status) == (137, 9, "killed")
        assert rec.status_reason == "killed by SIGKILL during turn 1"
        assert getattr(proxied.exception, "exit_code", None) == 137
        return
    # An interrupted session that went on and exited 0 is interrupted, not an error.
    status = "interrupted" if name == "interrupt" else "ok"
    assert (rec.exit_code, rec.signal, rec.status) == (0, None, status)
    # Byte for byte what the capture wrapper saw below the proxy.
    for direction, file in (("in", "in.bin"), ("out", "out.bin"), ("err", "err.bin")):
        witnessed = (capture / file).read_bytes()
        assert stream_bytes(events, direction) == witnessed, direction
        assert witnessed or direction == "err", f"the capture saw no {direction} bytes"


def test_stored_lines_are_the_exact_bytes(rig: Rig, store: Store, fake_api: FakeAPI) -> None:
    # The CLI spells JSON its own way (compact, unicode unescaped); the SDK
    # another (", " and ": ").  Nothing may be re-serialised on the way.
    known = {r.id for r in store.list_recordings()}
    run_scenario("mcp_tool", rig.shim, fake_api)
    events = list(store.iter_events(wait_for_recording(store, known)))
    out = next(e for e in events if e.direction == "out" and e.type == "system")
    host = next(e for e in events if e.direction == "in" and e.type == "control_request")
    assert out.data.startswith(b'{"type":"system"')
    assert host.data.startswith(b'{"type": "control_request"')
    assert json.loads(out.data) == out.obj


def test_version_check_is_not_recorded(rig: Rig, store: Store) -> None:
    known = {r.id for r in store.list_recordings()}
    done = subprocess.run([str(rig.shim), "-v"], capture_output=True, text=True, check=False)
    assert done.returncode == 0
    assert bundled_cli_version() in done.stdout
    assert {r.id for r in store.list_recordings()} == known
