"""End to end with the TypeScript Agent SDK: node host → shim → proxy → real CLI → fake API.

``tests/ts/host.mjs`` runs one ``query()`` of ``@anthropic-ai/claude-agent-sdk``
(pinned in ``tests/ts/package.json``) with a ``canUseTool`` callback and an SDK
MCP tool, and prints every message it receives as a JSON line.  Its
``pathToClaudeCodeExecutable`` is a recording shim in front of the CLI bundled
with the *Python* SDK, so both SDKs drive the same CLI.  As in
``test_e2e_proxy.py`` (both use ``tests/capture_rig.py``), the CLI runs inside a
capture wrapper that tees its three streams below the proxy: the stored events
must be exactly those bytes.

The npm packages are installed once (``npm ci`` into ``tests/ts/node_modules``)
when missing or older than the lock file; without ``node``/``npm`` the tests skip.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from claudetrace.indexer import open_settled_store
from claudetrace.shim import self_command
from claudetrace.store import Store
from claudetrace.testing import FakeAPI, text, tool_use
from claudetrace.testing.harness import PROJECT_DIR, bundled_cli_version, make_home, subprocess_env
from tests.capture_rig import (
    HostRun,
    Rig,
    assert_causal_order,
    make_rig,
    stream_bytes,
    wait_for_recording,
    write_script,
)

pytestmark = pytest.mark.slow

TS_DIR = Path(__file__).parent / "ts"
HOST = TS_DIR / "host.mjs"
#: The SDK's engines field asks for Node.js >= 18.14.
MIN_NODE = (18, 14)
#: Below pytest-timeout's 300 s, so a stuck install fails with its own message.
NPM_TIMEOUT = 240
HOST_TIMEOUT = 90

#: Sits between the host and the shim and logs each invocation's argv (one
#: line, arguments NUL-separated), to show which processes the SDK starts.
SPY_SCRIPT = """#!/bin/sh
{ for arg in "$@"; do printf '%s\\0' "$arg"; done; printf '\\n'; } >> "$CT_CAPTURE/invocations"
exec "$CT_SHIM" "$@"
"""


@dataclass
class TsRig(Rig):
    """The npm-installed host, shims and the database shared by this module."""

    node: str
    spy: Path


def node_version(node: str) -> tuple[int, ...]:
    done = subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
    return tuple(int(part) for part in re.findall(r"\d+", done.stdout)[:2])


def npm_installed() -> bool:
    """Whether ``node_modules`` holds a complete install of the current lock file."""
    # npm writes its hidden lock file last, so it marks a finished install.
    hidden = TS_DIR / "node_modules" / ".package-lock.json"
    lock = TS_DIR / "package-lock.json"
    return hidden.is_file() and hidden.stat().st_mtime >= lock.stat().st_mtime


def npm_ci(npm: str) -> None:
    """``npm ci`` into ``tests/ts/node_modules`` unless already done.

    Several test sessions may share the working tree, so the install runs under
    an advisory lock on the lock file.  Optional dependencies are omitted: they
    are the npm package's own native CLI, which this test does not use.
    """
    with open(TS_DIR / "package-lock.json", "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if npm_installed():
            return
        try:
            done = subprocess.run(
                [npm, "ci", "--omit=optional", "--no-audit", "--no-fund"],
                cwd=TS_DIR,
                capture_output=True,
                text=True,
                timeout=NPM_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"npm ci in tests/ts took more than {NPM_TIMEOUT} s (is the registry reachable?)"
            )
        if done.returncode != 0:
            pytest.fail(f"npm ci in tests/ts failed:\n{done.stderr[-3000:]}")


@pytest.fixture(scope="module")
def ts(tmp_path_factory: pytest.TempPathFactory, real_claude: Path) -> TsRig:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed for the TypeScript SDK test (Node.js >= 18.14)")
    if node_version(node) < MIN_NODE:
        pytest.skip(f"Node.js {node_version(node)} is too old for the TypeScript SDK (>= 18.14)")
    npm_ci(npm)
    rig = make_rig(tmp_path_factory.mktemp("e2e-ts"), real_claude)
    spy = write_script(rig.root / "spy.sh", SPY_SCRIPT)
    return TsRig(**vars(rig), node=node, spy=spy)


@pytest.fixture
def store(ts: TsRig) -> Iterator[Store]:
    opened = open_settled_store(str(ts.db))
    yield opened
    opened.close()


def run_host(ts: TsRig, api: FakeAPI, name: str, shim: Path, real: Path, prompt: str) -> HostRun:
    """Run the node host with the spy in front of ``shim`` as its CLI."""
    capture = ts.root / name
    home = make_home(capture / "home")
    env = subprocess_env(
        api.url,
        home,
        extra={"CT_CAPTURE": str(capture), "CT_REAL": str(real), "CT_SHIM": str(shim)},
    )
    done = subprocess.run(
        [ts.node, str(HOST), str(ts.spy), prompt],
        cwd=home / PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=HOST_TIMEOUT,
        check=False,
    )
    return HostRun.parse(done, capture)


def invocations(run: HostRun) -> list[list[str]]:
    """The argv of every CLI process the SDK started, in order."""
    log = (run.capture / "invocations").read_text()
    return [line.split("\0")[:-1] for line in log.splitlines()]


def is_version_check(argv: list[str]) -> bool:
    return argv in (["-v"], ["--version"])


def test_typescript_sdk_through_the_proxy(
    ts: TsRig, store: Store, fake_api: FakeAPI, real_claude: Path
) -> None:
    fake_api.reset(tool_use("mcp__calc__add", {"a": 2, "b": 40}), text("The sum is 42."))
    known = {r.id for r in store.list_recordings()}
    run = run_host(ts, fake_api, "mcp", ts.capture_shim, real_claude, "Add 2 and 40.")

    # The host's view: an init, the tool round trip, the answer, a success result.
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.errors() == []
    (init,) = run.messages("system", "init")
    assert init["claude_code_version"] == bundled_cli_version()
    assert {"name": "calc", "status": "connected", "source": "sdk"} in init["mcp_servers"]
    assert run.texts() == ["The sum is 42."]
    assert run.callbacks() == [
        {"callback": "can_use_tool", "tool": "mcp__calc__add", "input": {"a": 2, "b": 40}},
        {"callback": "add", "args": {"a": 2, "b": 40}},
    ]
    (result,) = run.messages("result")
    assert (result["subtype"], result["is_error"], result["result"]) == (
        "success",
        False,
        "The sum is 42.",
    )
    assert run.lines[-1]["message"] is result
    assert len(fake_api.message_requests()) == 2

    # One session process, through the shim.  SDK 0.3.330 starts no separate
    # `-v` check: the CLI's version reaches it in-band (init, above), recorded.
    started = invocations(run)
    sessions = [argv for argv in started if not is_version_check(argv)]
    assert len(sessions) == 1, started
    assert "stream-json" in sessions[0]

    # The recording: complete, in order, exactly what the host exchanged.
    recording_id = wait_for_recording(store, known)
    rec = store.get(recording_id)
    events = list(store.iter_events(recording_id))
    assert [e.seq for e in events] == list(range(len(events)))
    assert rec.event_count == len(events)
    assert rec.argv[1:] == sessions[0]
    assert (rec.exit_code, rec.signal, rec.status) == (0, None, "ok")
    assert rec.cli_session_id == init["session_id"]
    assert rec.claude_code_version == init["claude_code_version"]
    assert (rec.model, rec.permission_mode) == (init["model"], init["permissionMode"])

    # Every message the host got is a stored CLI line, in the same order.
    stored_uuids = [e.fields.uuid for e in events if e.direction == "out" and e.fields.uuid]
    host_uuids = [
        line["message"]["uuid"] for line in run.lines if "uuid" in line.get("message", {})
    ]
    assert host_uuids, "the host saw no message with a uuid"
    remaining = iter(stored_uuids)
    missing = [uuid for uuid in host_uuids if uuid not in remaining]
    assert missing == [], "host messages not stored, or stored out of order"

    # The permission question went out and the host's answer came back in.
    asks = [
        e
        for e in events
        if e.direction == "out"
        and e.type == "control_request"
        and e.obj["request"]["subtype"] == "can_use_tool"
    ]
    assert [a.obj["request"]["tool_name"] for a in asks] == ["mcp__calc__add"]
    answers = [
        e
        for e in events
        if e.direction == "in"
        and e.type == "control_response"
        and e.request_id == asks[0].request_id
    ]
    assert [a.obj["response"]["response"]["behavior"] for a in answers] == ["allow"]
    assert_causal_order(events)
    prompts = [e for e in events if e.direction == "in" and e.type == "user"]
    assert len(prompts) == 1 and b"Add 2 and 40." in prompts[0].data

    # Byte for byte what the capture wrapper saw below the proxy.
    for direction, file in (("in", "in.bin"), ("out", "out.bin"), ("err", "err.bin")):
        witnessed = (run.capture / file).read_bytes()
        assert stream_bytes(events, direction) == witnessed, direction
        assert witnessed or direction == "err", f"the capture saw no {direction} bytes"


def test_typescript_sdk_sees_the_cli_die(
    ts: TsRig, store: Store, fake_api: FakeAPI, real_claude: Path
) -> None:
    # The tool's shell kills its parent, the CLI; the capture wrapper's pipeline
    # would hide the signal, so this goes through the plain shim.
    fake_api.reset(
        tool_use("Bash", {"command": "kill -9 $PPID", "description": "Stop the CLI"}, say="Stop.")
    )
    known = {r.id for r in store.list_recordings()}
    run = run_host(ts, fake_api, "killed", ts.shim, real_claude, "Stop yourself.")

    assert run.returncode == 1, run.stderr[-2000:]
    assert [c["tool"] for c in run.callbacks()] == ["Bash"]
    assert run.messages("result") == []
    (message,) = run.errors()
    assert re.search(r"\b137\b|SIGKILL", message), message

    rec = store.get(wait_for_recording(store, known))
    assert (rec.exit_code, rec.signal, rec.status) == (137, 9, "killed")


# -- fault injection: the TypeScript SDK reports a faulty CLI promptly ---------------------------


@pytest.fixture(scope="module")
def ts_cassette(
    ts: TsRig, fake_api: FakeAPI, real_claude: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A cassette of the node host's session (calc tool, permission callback)."""
    from claudetrace.cassette import write_cassette

    fake_api.reset(tool_use("mcp__calc__add", {"a": 2, "b": 40}), text("The sum is 42."))
    store = open_settled_store(str(ts.db))
    try:
        known = {r.id for r in store.list_recordings()}
        run = run_host(ts, fake_api, "to-replay", ts.shim, real_claude, "Add 2 and 40.")
        assert run.returncode == 0, run.stderr[-2000:]
        cassette = store.load_cassette(wait_for_recording(store, known))
    finally:
        store.close()
    path = tmp_path_factory.mktemp("ts-cassette") / "calc.ndjson"
    write_cassette(path, cassette.header, cassette.events)
    return path


@pytest.mark.parametrize(
    "spec", ["crash@3", "exit=3@3", "signal=KILL@3", "truncate@3", "garbage@3", "hang@3"]
)
def test_typescript_sdk_reports_an_injected_fault_promptly(
    ts: TsRig, ts_cassette: Path, fake_api: FakeAPI, real_claude: Path, spec: str
) -> None:
    import time

    shim = ts.root / f"replay-{spec.split('@')[0].replace('=', '-')}"
    made = subprocess.run(
        [*self_command(), "shim", str(shim), "--replay", str(ts_cassette), "--fault", spec],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    fake_api.reset()
    os.environ["HOST_TIMEOUT_MS"] = "3000"
    try:
        started = time.monotonic()
        run = run_host(ts, fake_api, f"fault-{shim.name}", shim, real_claude, "Add 2 and 40.")
        elapsed = time.monotonic() - started
    finally:
        del os.environ["HOST_TIMEOUT_MS"]
    assert elapsed < 20, elapsed
    if spec.startswith("garbage"):
        # The TypeScript SDK skips a line it cannot parse: the session goes on.
        assert run.returncode == 0 and run.errors() == [], run.lines
        assert [r["result"] for r in run.messages("result")] == ["The sum is 42."]
        return
    assert run.returncode == 1, (run.lines, run.stderr[-2000:])
    assert run.errors(), run.lines
    assert run.messages("result") == []
    assert fake_api.message_requests() == [], "a replay must not reach the API"
