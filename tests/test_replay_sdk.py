"""End to end with the real Python SDK: record through the proxy, replay offline.

The same application code (``tests/scenarios.py``) runs against the real CLI
through ``claudetrace proxy`` and then against ``claudetrace replay`` with the
fake API idle: it must receive the same messages and run the same callbacks.
Divergent applications must fail fast with the right report and exit code.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeSDKClient, ResultMessage

from claudetrace.cassette import read_cassette, write_cassette
from claudetrace.indexer import open_settled_store
from claudetrace.replay import write_replay_shim
from claudetrace.shim import proxy_command, write_shim
from claudetrace.testing import FakeAPI
from claudetrace.testing.harness import make_home
from tests.scenarios import SCENARIOS, base_options, run_scenario

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures"

#: Callbacks that observe the machine or the API rather than the CLI's messages:
#: a replayed Bash tool creates no file and a replay makes no API request.
ENVIRONMENT_CALLS = frozenset({"file_exists", "models"})


def comparable(result: Any) -> list[Any]:
    shaped, calls, error = result.comparable()
    return [shaped, [c for c in calls if c[0] not in ENVIRONMENT_CALLS], error]


@pytest.fixture(scope="module")
def recorder(tmp_path_factory: pytest.TempPathFactory, real_claude: Path) -> tuple[Path, str]:
    """A recording shim (proxy in front of the real CLI) and its database URL."""
    root = tmp_path_factory.mktemp("record")
    db = f"sqlite:///{root / 'ct.db'}"
    return write_shim(root / "claude", proxy_command(str(real_claude), db=db)), db


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_record_then_replay_gives_the_application_the_same_session(
    name: str, recorder: tuple[Path, str], fake_api: FakeAPI, tmp_path: Path
) -> None:
    shim, db = recorder
    recorded = run_scenario(name, shim, fake_api)
    store = open_settled_store(db)
    cassette = store.load_cassette(store.resolve("latest").id)
    store.close()
    path = tmp_path / f"{name}.ndjson"
    write_cassette(path, cassette.header, cassette.events)
    report = tmp_path / "report.json"

    sources = [path]
    committed = FIXTURES / "cassettes" / f"{name}.ndjson"
    if committed.exists():
        sources.append(committed)
    for source in sources:
        (tmp_path / source.stem).mkdir(exist_ok=True)  # a shim goes into a folder that exists
        replay_shim = write_replay_shim(tmp_path / source.stem / "claude", source, report=report)
        fake_api.reset()
        # A replay that waited on something would run into the scenario's timeout,
        # which run_scenario raises.
        replayed = run_scenario(name, replay_shim, fake_api)
        assert fake_api.message_requests() == [], "a replay must not reach the API"
        assert not report.exists(), report.read_text()
        assert comparable(replayed) == comparable(recorded), source.name
        if name in ("hooks", "mcp_tool", "permission_allow", "permission_deny"):
            assert replayed.calls, "callbacks ran during the replay"


def _sample_options(cli_path: str, api: FakeAPI, home: Path, calls: list[Any]) -> Any:
    """The host that recorded the shared samples: SDK MCP calc/add and a PreToolUse hook."""
    from claude_agent_sdk import HookMatcher, create_sdk_mcp_server, tool

    @tool("add", "Add two numbers", {"a": float, "b": float})
    async def add(args: dict[str, Any]) -> dict[str, Any]:
        calls.append(("add", args))
        return {"content": [{"type": "text", "text": f"{args['a'] + args['b']:g}"}]}

    async def pre(hook_input: Any, tool_use_id: str | None, context: Any) -> Any:
        calls.append(("PreToolUse", hook_input.get("tool_name")))
        return {}

    options = base_options(cli_path, api, home)
    options.mcp_servers = {"calc": create_sdk_mcp_server("calc", "1.0.0", tools=[add])}
    options.allowed_tools = ["mcp__calc__add"]
    options.hooks = {"PreToolUse": [HookMatcher(matcher=None, hooks=[pre])]}
    options.include_partial_messages = True
    # The recording host took permission prompts itself (--permission-prompt-tool
    # stdio); its allowed_tools meant none reached it.
    options.permission_prompt_tool_name = "stdio"
    return options


App = Callable[[ClaudeSDKClient, list[Any]], Awaitable[None]]

#: How long :func:`run_app` lets the application run.  A replay that missed a
#: divergence, or a host that waited on a hung CLI, runs into it: the error is then
#: :class:`AppLimitReached` (:func:`waited_out`), not the one the replay or the SDK
#: raised, which is what the tests check instead of a time (on a loaded machine
#: starting the SDK and the replay alone takes several seconds).
APP_LIMIT_S = 30.0


class AppLimitReached(Exception):
    """The application was still running after :data:`APP_LIMIT_S`."""


def waited_out(error: str | None) -> bool:
    """Whether :func:`run_app`'s application ran into its limit."""
    return error is not None and error.startswith(AppLimitReached.__name__)


def run_app(
    source: Path,
    app: App,
    api: FakeAPI,
    tmp_path: Path,
    *,
    sample_host: bool = True,
    faults: tuple[str, ...] = (),
    change: Callable[[Any], None] | None = None,
) -> tuple[list[Any], list[Any], str | None, float, dict[str, Any] | None]:
    """Run ``app`` against a replay of ``source``: messages, calls, error, seconds, report."""
    report = tmp_path / "report.json"
    extra = [arg for spec in faults for arg in ("--fault", spec)]
    shim = write_replay_shim(tmp_path / "claude", source, report=report, extra=extra)
    home = make_home(tempfile.mkdtemp(prefix="ct-home-"))
    calls: list[Any] = []
    messages: list[Any] = []
    error: str | None = None

    async def main() -> None:
        if sample_host:
            options = _sample_options(str(shim), api, home, calls)
        else:
            options = base_options(str(shim), api, home)
        if change is not None:
            change(options)
        async with ClaudeSDKClient(options) as client:
            await app(client, messages)

    async def limited() -> None:
        # Not asyncio.wait_for: a TimeoutError the application raises itself
        # (test_a_hung_cli_is_left_by_a_host_with_a_timeout) is told apart.
        task = asyncio.ensure_future(main())
        done, _pending = await asyncio.wait({task}, timeout=APP_LIMIT_S)
        if not done:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            raise AppLimitReached(f"still running after {APP_LIMIT_S:g} s")
        task.result()

    started = time.monotonic()
    try:
        asyncio.run(limited())
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    finally:
        shutil.rmtree(home, ignore_errors=True)
    elapsed = time.monotonic() - started
    doc = json.loads(report.read_text()) if report.exists() else None
    return messages, calls, error, elapsed, doc


def ask(*prompts: str) -> App:
    async def app(client: ClaudeSDKClient, messages: list[Any]) -> None:
        for prompt in prompts:
            await client.query(prompt)
            async for message in client.receive_response():
                messages.append(message)

    return app


MCP_PROMPT = "[[MCP]] Add 2 and 40 with the calc tool."


def test_shared_sample_replays_with_tool_and_hook(fake_api: FakeAPI, tmp_path: Path) -> None:
    source = FIXTURES / "samples" / "mcp_hooks.cassette.ndjson"
    messages, calls, error, _elapsed, report = run_app(source, ask(MCP_PROMPT), fake_api, tmp_path)
    assert error is None and report is None
    assert calls == [("PreToolUse", "mcp__calc__add"), ("add", {"a": 2, "b": 40})]
    final = messages[-1]
    assert isinstance(final, ResultMessage) and final.result == "The sum is 42."
    recorded = read_cassette(source)
    expected_stream = sum(b'"stream_event"' in e.data for e in recorded.events)
    assert sum(type(m).__name__ == "StreamEvent" for m in messages) == expected_stream


def test_different_prompt_fails_fast(fake_api: FakeAPI, tmp_path: Path) -> None:
    source = FIXTURES / "samples" / "mcp_hooks.cassette.ndjson"
    prompt = MCP_PROMPT.replace("40", "41")
    messages, calls, error, _elapsed, report = run_app(source, ask(prompt), fake_api, tmp_path)
    assert not waited_out(error), error
    assert report is not None and report["kind"] == "unmatched-message"
    assert report["exit_code"] == 81
    assert report["diff"][0]["path"] == "$.message.content"
    assert calls == []
    final = messages[-1] if messages else None
    assert error is not None or (isinstance(final, ResultMessage) and final.is_error)


def test_extra_turn_is_recording_exhausted(fake_api: FakeAPI, tmp_path: Path) -> None:
    source = FIXTURES / "samples" / "mcp_hooks.cassette.ndjson"
    messages, _, error, _elapsed, report = run_app(
        source, ask(MCP_PROMPT, "And again?"), fake_api, tmp_path
    )
    assert report is not None and report["kind"] == "recording-exhausted"
    assert report["exit_code"] == 82
    assert not waited_out(error), error
    results = [m for m in messages if isinstance(m, ResultMessage)]
    assert results[0].result == "The sum is 42."
    assert error is not None or results[-1].is_error


def test_missing_turn_is_reported_at_exit(fake_api: FakeAPI, tmp_path: Path) -> None:
    source = FIXTURES / "cassettes" / "multi_turn.ndjson"
    if not source.exists():
        pytest.skip("fixture cassettes not present")

    async def one_turn(client: ClaudeSDKClient, messages: list[Any]) -> None:
        await client.query("First question.")
        async for message in client.receive_response():
            messages.append(message)

    messages, _, _, _elapsed, report = run_app(
        source, one_turn, fake_api, tmp_path, sample_host=False
    )
    assert [m.result for m in messages if isinstance(m, ResultMessage)] == ["First answer."]
    assert report is not None and report["kind"] == "input-never-sent"
    assert report["exit_code"] == 83
    assert report["never_sent"][0]["summary"].find("Second question.") > 0


def test_different_permission_decision_diverges(fake_api: FakeAPI, tmp_path: Path) -> None:
    source = FIXTURES / "cassettes" / "permission_allow.ndjson"
    if not source.exists():
        pytest.skip("fixture cassettes not present")
    report_path = tmp_path / "report.json"
    shim = write_replay_shim(tmp_path / "claude", source, report=report_path)
    # A replay that missed the divergence runs into the scenario's timeout (raised).
    result = run_scenario("permission_deny", shim, fake_api)
    report = json.loads(report_path.read_text())
    assert report["kind"] == "unmatched-message" and report["exit_code"] == 81
    paths = [d["path"] for d in report["diff"]]
    assert any(p.endswith(".behavior") for p in paths), paths
    assert result.error is not None or any(r.is_error for r in result.results())


# -- fault injection: the real SDK must raise or report promptly, never hang -------------------


@pytest.mark.parametrize(
    ("spec", "raised"),
    [
        ("crash@2", "ProcessError"),
        ("exit=3@2", "ProcessError"),
        ("signal=KILL@2", "ProcessError"),
        ("truncate@2", "ProcessError"),
        ("garbage@2", "CLIJSONDecodeError"),
    ],
)
def test_an_injected_fault_makes_the_sdk_raise_promptly(
    spec: str, raised: str, fake_api: FakeAPI, tmp_path: Path
) -> None:
    source = FIXTURES / "cassettes" / "plain.ndjson"
    messages, _, error, _elapsed, report = run_app(
        source, ask("Say hello."), fake_api, tmp_path, sample_host=False, faults=(spec,)
    )
    # Raised by the SDK, not the application's limit reached (a hang).
    assert error is not None and error.startswith(raised), (error, messages)
    assert report is None, "a faulted replay reports no divergence"
    assert not any(isinstance(m, ResultMessage) for m in messages)


def test_a_hung_cli_is_left_by_a_host_with_a_timeout(fake_api: FakeAPI, tmp_path: Path) -> None:
    source = FIXTURES / "cassettes" / "plain.ndjson"

    async def impatient(client: ClaudeSDKClient, messages: list[Any]) -> None:
        await client.query("Say hello.")

        async def collect() -> None:
            async for message in client.receive_response():
                messages.append(message)

        await asyncio.wait_for(collect(), 2.0)

    _messages, _, error, _elapsed, report = run_app(
        source, impatient, fake_api, tmp_path, sample_host=False, faults=("hang@2",)
    )
    # Two seconds of waiting, then the SDK closes the hung CLI: the host's own
    # TimeoutError, not the application's limit reached while the SDK waited on it.
    assert error is not None and error.startswith("TimeoutError"), error
    assert report is None


def test_delay_stderr_slow_the_session_without_breaking_it(
    fake_api: FakeAPI, tmp_path: Path
) -> None:
    source = FIXTURES / "cassettes" / "plain.ndjson"
    messages, _, error, elapsed, report = run_app(
        source,
        ask("Say hello."),
        fake_api,
        tmp_path,
        sample_host=False,
        faults=("delay=1.0@2", "stderr=warning: slow network@1"),
    )
    assert error is None and report is None
    assert elapsed >= 1.0
    final = messages[-1]
    assert isinstance(final, ResultMessage) and not final.is_error


# -- options that change behaviour ---------------------------------------------------------------


def _rename_calc(options: Any) -> None:
    options.mcp_servers = {"calculator": options.mcp_servers["calc"]}


def _other_model(options: Any) -> None:
    options.model = "claude-haiku-9"


@pytest.mark.parametrize(
    ("change", "diff"),
    [
        (_other_model, 'argv --model: unexpected "claude-haiku-9"'),
        (_rename_calc, 'argv --mcp-config: expected {"calc": "sdk"}, got {"calculator": "sdk"}'),
    ],
)
def test_a_changed_option_is_an_argv_divergence_reported_first(
    change: Callable[[Any], None], diff: str, fake_api: FakeAPI, tmp_path: Path
) -> None:
    from claudetrace.replay.normalize import describe_change

    source = FIXTURES / "samples" / "mcp_hooks.cassette.ndjson"
    _messages, calls, error, _elapsed, report = run_app(
        source, ask(MCP_PROMPT), fake_api, tmp_path, change=change
    )
    assert report is not None and report["kind"] == "argv-mismatch", report
    assert report["exit_code"] == 84
    assert describe_change(report["diff"][0]) == diff
    # The application is not shown the recorded session: it fails at once.
    assert error is not None and "argv-mismatch" in error
    assert calls == [] and not waited_out(error)
