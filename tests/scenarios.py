"""Application scenarios that drive the real Claude Agent SDK against a fake API.

Each scenario is an async "application": it scripts the fake Anthropic API's
answers, runs :class:`claude_agent_sdk.ClaudeSDKClient` with the given
``cli_path`` and returns a :class:`ScenarioResult` (every message the
application received, and the callbacks that ran).  The same function runs
against the real CLI, through ``claudetrace proxy`` (a shim as ``cli_path``) and
against the replay engine, so the results can be compared::

    from claudetrace.testing import FakeAPI
    from tests.scenarios import SCENARIOS, run_scenario

    with FakeAPI() as api:
        result = run_scenario("plain", cli_path, api)
    assert result.comparable() == expected

``run_scenario`` resets the fake API (script and message ids) before it runs,
so one API can serve many scenarios in turn.

Observed with CLI 2.1.330 and claude-agent-sdk 0.2.187 (the real CLI is the
judge where the protocol notes disagree):

- The only HTTP request of a plain turn is ``POST /v1/messages?beta=true``,
  streamed; no title or quota request is made with nonessential traffic off.
- ``system/init`` is emitted after the first user message, not at start-up.
- ``set_model`` makes the CLI validate the new model with one non-streaming
  request (``"Hi"``); it takes a message id, so the next streamed answer is
  ``msg_fake_00002``.
- The Agent tool runs subagents in the background by default, and the
  subagent's request then races the parent's next one; ``run_in_background:
  false`` in the tool input keeps the order fixed.  Subagent text is not
  forwarded to the host unless ``forward_subagent_text`` is set: by default the
  host sees only the subagent's prompt (a ``user`` message with
  ``parent_tool_use_id``) and task_started/updated/notification messages.
- A Bash command containing a shell variable (``kill -9 $PPID``) is never
  auto-approved, even by a matching ``allowed_tools`` rule ("A variable in this
  command can't be checked before it runs"): ``can_use_tool`` must allow it.
  ``$PPID`` in the tool's shell is the CLI itself.
- Interrupting a stream that hangs after ``message_start`` gives a synthetic
  ``message_delta``/``message_stop``, a ``user`` message "[Request interrupted
  by user]" and a ``result`` with subtype ``error_during_execution``; the
  session accepts the next turn.
- A thinking block makes the CLI emit ``system/thinking_tokens`` progress
  messages, one per thinking delta.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    AgentDefinition,
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    TaskStartedMessage,
    ThinkingBlock,
    ToolResultBlock,
    UserMessage,
    create_sdk_mcp_server,
    tool,
)

from claudetrace.testing import FakeAPI, Reply, text, thinking, tool_use
from claudetrace.testing.harness import PROJECT_DIR, cli_env, make_home

#: How long one scenario may take before it is abandoned (seconds).
SCENARIO_TIMEOUT = 60.0


@dataclass
class ScenarioResult:
    """What the application saw: its messages, callbacks and final error."""

    name: str
    messages: list[Any] = field(default_factory=list)
    #: Callbacks in the order they ran, e.g. ``("can_use_tool", "Bash", {...})``.
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    #: ``"ExceptionType: message"`` when the SDK raised (a dying CLI), else None.
    error: str | None = None
    #: The exception itself (not compared: a proxy reports exit 137 where the
    #: SDK saw -9 from the CLI it started itself).
    exception: BaseException | None = field(default=None, repr=False)
    home: Path | None = None

    def results(self) -> list[ResultMessage]:
        """The result messages received."""
        return [m for m in self.messages if isinstance(m, ResultMessage)]

    def texts(self) -> list[str]:
        """Text blocks of the assistant messages, in order."""
        out: list[str] = []
        for message in self.messages:
            if isinstance(message, AssistantMessage):
                out.extend(getattr(b, "text", "") for b in message.content if hasattr(b, "text"))
        return out

    def comparable(self) -> list[Any]:
        """Messages, calls and error with run-specific values normalised.

        Two runs of the same scenario (direct, proxied, replayed) give equal
        values.  uuids, session ids, timestamps, durations and the temporary
        home are replaced by placeholders.
        """
        home = os.fspath(self.home) if self.home else None
        shaped = [[type(m).__name__, normalise(dataclasses.asdict(m), home)] for m in self.messages]
        return [shaped, normalise([list(c) for c in self.calls], home), self.error]


#: Keys whose values differ between runs of the same scenario.
VOLATILE_KEYS = frozenset(
    {
        "uuid",
        "session_id",
        "timestamp",
        "duration_ms",
        "duration_api_ms",
        "ttft_ms",
        "ttft_stream_ms",
        "time_to_request_ms",
        "first_content_frame_ms",
        "prompt_id",
        "transcript_path",
        "request_id",
        "agentId",
        "agent_id",
        "task_id",
        "totalDurationMs",
        "output_file",
        "run_id",
        "end_time",
        "messaging_socket_path",
    }
)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: Run-specific values inside text (a subagent's hand-back names its id and timing).
_TEXT_VOLATILE = (
    (re.compile(r"\bagentId: [0-9a-f]+"), "agentId: <agent_id>"),
    (re.compile(r"'a[0-9a-f]{16}'"), "'<agent_id>'"),
    (re.compile(r"\bduration_ms: \d+"), "duration_ms: <duration_ms>"),
)


def normalise(value: Any, home: str | None = None) -> Any:
    """Replace volatile values (see :data:`VOLATILE_KEYS`) by placeholders."""
    if isinstance(value, dict):
        return {
            k: (f"<{k}>" if k in VOLATILE_KEYS and v is not None else normalise(v, home))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [normalise(v, home) for v in value]
    if isinstance(value, str):
        if home:
            # The CLI also names the home in project paths, with / and . as -.
            value = value.replace(home, "<home>")
            value = value.replace(re.sub(r"[^A-Za-z0-9]", "-", home), "<home>")
        for pattern, placeholder in _TEXT_VOLATILE:
            value = pattern.sub(placeholder, value)
        return _UUID.sub("<uuid>", value)
    return value


# -- the scenarios --------------------------------------------------------------------------

Scenario = Callable[[str, FakeAPI, ClaudeAgentOptions, ScenarioResult], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(func: Scenario) -> Scenario:
    """Register a scenario under its function name."""
    SCENARIOS[func.__name__] = func
    return func


async def _collect(client: ClaudeSDKClient, result: ScenarioResult) -> None:
    async for message in client.receive_response():
        result.messages.append(message)


@scenario
async def plain(
    cli_path: str, api: FakeAPI, options: ClaudeAgentOptions, result: ScenarioResult
) -> None:
    """One turn, one text answer."""
    api.script(text("Hello from the fake model."))
    async with ClaudeSDKClient(options) as client:
        await client.query("Say hello.")
        await _collect(client, result)


@scenario
async def multi_turn(
    cli_path: str, api: FakeAPI, options: ClaudeAgentOptions, result: ScenarioResult
) -> None:
    """Three turns in one session; the second answer thinks first."""
    api.script(
        text("First answer."),
        thinking("The user wants a second answer.", "Second answer."),
        text("Third answer."),
    )
    async with ClaudeSDKClient(options) as client:
        for prompt in ("First question.", "Second question.", "Third question."):
            await client.query(prompt)
            await _collect(client, result)


async def _permission(
    allow: bool, api: FakeAPI, options: ClaudeAgentOptions, result: ScenarioResult
) -> None:
    async def can_use_tool(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        result.calls.append(("can_use_tool", name, tool_input))
        if allow:
            return PermissionResultAllow()
        return PermissionResultDeny(message="Not in this test.")

    api.script(
        tool_use(
            "Bash",
            {"command": "touch created.txt", "description": "Create a file"},
            say="I will create the file.",
        ),
        text("The file is created." if allow else "I was not allowed to."),
    )
    options.can_use_tool = can_use_tool
    async with ClaudeSDKClient(options) as client:
        await client.query("Create created.txt with touch.")
        await _collect(client, result)
    created = Path(options.cwd or ".") / "created.txt"
    result.calls.append(("file_exists", created.exists()))


@scenario
async def permission_allow(
    cli_path: str, api: FakeAPI, options: ClaudeAgentOptions, result: ScenarioResult
) -> None:
    """Bash ``touch`` needs permission; ``can_use_tool`` allows it."""
    await _permission(True, api, options, result)


@scenario
async def streamed_tools(
    cli_path: str, api: FakeAPI, options: ClaudeAgentOptions, result: ScenarioResult
) -> None:
    """``permission_allow`` with partial messages on: every model call streams
    (message_start … message_delta with the output tokens … message_stop)."""
    options.include_partial_messages = True
    await _permission(True, api, options, result)


@scenario
async def permission_deny(
    cli_path: str, api: FakeAPI, options: ClaudeAgentOptions, result: ScenarioResult
) -> None:
    """Bash ``touch`` needs permission; ``can_use_tool`` denies it."""
    await _permission(False, api, options, result)


@scenario
async def hooks(
    cli_path: str, api: FakeAPI, options: ClaudeAgentOptions, result: ScenarioResult
) -> None:
    """PreToolUse and PostToolUse hooks around a Bash ``echo`` (which runs unasked)."""

    async def pre(hook_input: Any, tool_use_id: str | None, context: Any) -> Any:
        result.calls.append(
            ("PreToolUse", hook_input.get("tool_name"), hook_input.get("tool_input"))
        )
        return {}

    async def post(hook_input: Any, tool_use_id: str | None, context: Any) -> Any:
        response = hook_input.get("tool_response")
        stdout = response.get("stdout") if isinstance(response, dict) else response
        result.calls.append(("PostToolUse", hook_input.get("tool_name"), stdout))
        return {}

    api.script(
        tool_use("Bash", {"command": "echo hooked", "description": "Print a word"}),
        text("It printed hooked."),
    )
    options.hooks = {
        "PreToolUse": [HookMatcher(matcher="Bash", hooks=[pre])],
        "PostToolUse": [HookMatcher(matcher="Bash", hooks=[post])],
    }
    async with ClaudeSDKClient(options) as client:
        await client.query("Echo hooked.")
        await _collect(client, result)


@scenario
async def mcp_tool(
    cli_path: str, api: FakeAPI, options: ClaudeAgentOptions, result: ScenarioResult
) -> None:
    """An in-process SDK MCP tool (``mcp__calc__add``), auto-approved by allowed_tools."""

    @tool("add", "Add two numbers", {"a": float, "b": float})
    async def add(args: dict[str, Any]) -> dict[str, Any]:
        result.calls.append(("mcp__calc__add", args))
        total = args["a"] + args["b"]
        return {"content": [{"type": "text", "text": f"{total:g}"}]}

    api.script(tool_use("mcp__calc__add", {"a": 2, "b": 40}), text("The sum is 42."))
    options.mcp_servers = {"calc": create_sdk_mcp_server("calc", "1.0.0", tools=[add])}
    options.allowed_tools = ["mcp__calc__add"]
    async with ClaudeSDKClient(options) as client:
        await client.query("Add 2 and 40 with the calc tool.")
        await _collect(client, result)


@scenario
async def subagent(
    cli_path: str, api: FakeAPI, options: ClaudeAgentOptions, result: ScenarioResult
) -> None:
    """The main agent delegates to a subagent; its messages carry parent_tool_use_id."""
    await _delegate(api, options, result, None)


def subagent_on(model: str) -> Scenario:
    """:func:`subagent` with the counter agent on ``model`` (an alias such as
    ``haiku`` or a model id), not the session's: no fixture is recorded of it."""

    async def run(
        cli_path: str, api: FakeAPI, options: ClaudeAgentOptions, result: ScenarioResult
    ) -> None:
        await _delegate(api, options, result, model)

    return run


async def _delegate(
    api: FakeAPI, options: ClaudeAgentOptions, result: ScenarioResult, model: str | None
) -> None:
    api.script(
        tool_use(
            "Agent",
            {
                "description": "Count words",
                "prompt": "Count the words in 'a b c'.",
                "subagent_type": "counter",
                # Background agents (the default) race the parent's next request.
                "run_in_background": False,
            },
        ),
        text("There are 3 words."),
        text("The subagent says there are 3 words."),
    )
    options.agents = {
        "counter": AgentDefinition(
            description="Counts words.", prompt="You count words.", tools=["Read"], model=model
        )
    }
    async with ClaudeSDKClient(options) as client:
        await client.query("Ask the counter agent to count the words in 'a b c'.")
        await _collect(client, result)


@scenario
async def interrupt(
    cli_path: str, api: FakeAPI, options: ClaudeAgentOptions, result: ScenarioResult
) -> None:
    """The model's stream hangs after message_start; the application interrupts.

    A second turn afterwards shows the session is still usable.
    """
    api.script(Reply(blocks=(), hang=True), text("After the interrupt."))
    options.include_partial_messages = True
    async with ClaudeSDKClient(options) as client:
        await client.query("Tell me a very long story.")
        interrupted = False
        async for message in client.receive_response():
            result.messages.append(message)
            if (
                not interrupted
                and isinstance(message, StreamEvent)
                and message.event.get("type") == "message_start"
            ):
                interrupted = True
                await client.interrupt()
                result.calls.append(("interrupt",))
        await client.query("Are you still there?")
        async for message in client.receive_response():
            if not isinstance(message, StreamEvent):
                result.messages.append(message)


@scenario
async def set_model_and_mode(
    cli_path: str, api: FakeAPI, options: ClaudeAgentOptions, result: ScenarioResult
) -> None:
    """``set_model`` and ``set_permission_mode`` between two turns."""
    api.script(text("On the default model."), text("On the other model."))
    async with ClaudeSDKClient(options) as client:
        await client.query("Which model?")
        await _collect(client, result)
        await client.set_model("claude-sonnet-5")
        await client.set_permission_mode("acceptEdits")
        await client.query("And now?")
        await _collect(client, result)
    result.calls.append(("models", [r.model for r in api.message_requests()]))


@scenario
async def cli_dies(
    cli_path: str, api: FakeAPI, options: ClaudeAgentOptions, result: ScenarioResult
) -> None:
    """The CLI is killed (SIGKILL) in the middle of a turn.

    The model asks for a Bash command that kills the CLI process, the parent
    of the tool's shell, so the death lands at the same point every run.
    """
    api.script(
        tool_use(
            "Bash",
            {"command": "kill -9 $PPID", "description": "Stop the CLI"},
            say="Stopping.",
        ),
    )

    async def can_use_tool(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        # Needed: the CLI refuses to auto-approve a command with a variable in it.
        result.calls.append(("can_use_tool", name, tool_input))
        return PermissionResultAllow()

    options.can_use_tool = can_use_tool
    try:
        async with ClaudeSDKClient(options) as client:
            await client.query("Stop yourself.")
            await _collect(client, result)
    except Exception as exc:
        result.error = type(exc).__name__
        result.exception = exc


# -- expectations -----------------------------------------------------------------------
#
# What each scenario must show, whoever plays the CLI (the real one, the proxy,
# the replay engine).  Each check raises AssertionError with a reason.


def _only_result(result: ScenarioResult) -> ResultMessage:
    results = result.results()
    assert len(results) == 1, f"expected one result, got {len(results)}"
    return results[0]


def _tool_results(result: ScenarioResult) -> list[Any]:
    return [
        block
        for message in result.messages
        if isinstance(message, UserMessage) and isinstance(message.content, list)
        for block in message.content
        if isinstance(block, ToolResultBlock)
    ]


def _check_plain(result: ScenarioResult) -> None:
    final = _only_result(result)
    assert (final.subtype, final.is_error) == ("success", False)
    assert result.texts() == ["Hello from the fake model."]
    assert final.usage is not None and final.usage["input_tokens"] == 100


def _check_multi_turn(result: ScenarioResult) -> None:
    assert [r.subtype for r in result.results()] == ["success"] * 3
    assert result.texts() == ["First answer.", "Second answer.", "Third answer."]
    thoughts = [
        block.thinking
        for m in result.messages
        if isinstance(m, AssistantMessage)
        for block in m.content
        if isinstance(block, ThinkingBlock)
    ]
    assert thoughts == ["The user wants a second answer."]


def _check_permission_allow(result: ScenarioResult) -> None:
    assert result.calls[0][:2] == ("can_use_tool", "Bash")
    assert result.calls[-1] == ("file_exists", True)
    (tool_result,) = _tool_results(result)
    assert not tool_result.is_error
    assert result.texts()[-1] == "The file is created."


def _check_streamed_tools(result: ScenarioResult) -> None:
    _check_permission_allow(result)
    deltas = [m for m in result.messages if isinstance(m, StreamEvent)
              and m.event.get("type") == "message_delta"]
    assert len(deltas) == 2


def _check_permission_deny(result: ScenarioResult) -> None:
    assert result.calls[0][:2] == ("can_use_tool", "Bash")
    assert result.calls[-1] == ("file_exists", False)
    (tool_result,) = _tool_results(result)
    assert tool_result.is_error
    assert "Not in this test." in str(tool_result.content)
    assert _only_result(result).subtype == "success"


def _check_hooks(result: ScenarioResult) -> None:
    assert result.calls == [
        ("PreToolUse", "Bash", {"command": "echo hooked", "description": "Print a word"}),
        ("PostToolUse", "Bash", "hooked"),
    ]
    assert _only_result(result).subtype == "success"


def _check_mcp_tool(result: ScenarioResult) -> None:
    assert result.calls == [("mcp__calc__add", {"a": 2, "b": 40})]
    (tool_result,) = _tool_results(result)
    assert tool_result.content == [{"type": "text", "text": "42"}]
    assert result.texts() == ["The sum is 42."]


def _check_subagent(result: ScenarioResult) -> None:
    nested = [m for m in result.messages if getattr(m, "parent_tool_use_id", None)]
    assert nested, "no message carries parent_tool_use_id"
    assert {m.parent_tool_use_id for m in nested} == {"toolu_msg_fake_00000_0"}
    assert any(isinstance(m, TaskStartedMessage) for m in result.messages)
    assert result.texts()[-1] == "The subagent says there are 3 words."


def _check_interrupt(result: ScenarioResult) -> None:
    first, second = result.results()
    assert (first.subtype, first.is_error) == ("error_during_execution", True)
    assert (second.subtype, second.is_error) == ("success", False)
    assert result.calls == [("interrupt",)]
    assert result.texts() == ["After the interrupt."]


def _check_set_model_and_mode(result: ScenarioResult) -> None:
    assert result.calls == [("models", ["claude-opus-5-5", "claude-sonnet-5"])]
    inits = [
        m.data for m in result.messages if isinstance(m, SystemMessage) and m.subtype == "init"
    ]
    assert [(d["model"], d["permissionMode"]) for d in inits] == [
        ("claude-opus-5-5", "default"),
        ("claude-sonnet-5", "acceptEdits"),
    ]


def _check_cli_dies(result: ScenarioResult) -> None:
    assert result.error == "ProcessError"
    assert result.results() == []
    assert result.calls[0][:2] == ("can_use_tool", "Bash")


CHECKS: dict[str, Callable[[ScenarioResult], None]] = {
    "plain": _check_plain,
    "multi_turn": _check_multi_turn,
    "permission_allow": _check_permission_allow,
    "permission_deny": _check_permission_deny,
    "streamed_tools": _check_streamed_tools,
    "hooks": _check_hooks,
    "mcp_tool": _check_mcp_tool,
    "subagent": _check_subagent,
    "interrupt": _check_interrupt,
    "set_model_and_mode": _check_set_model_and_mode,
    "cli_dies": _check_cli_dies,
}


def check_scenario(result: ScenarioResult) -> None:
    """Assert that ``result`` shows what its scenario must (AssertionError if not)."""
    CHECKS[result.name](result)


# -- running ------------------------------------------------------------------------------


def base_options(cli_path: str | os.PathLike[str], api: FakeAPI, home: Path) -> ClaudeAgentOptions:
    """The options every scenario starts from."""
    return ClaudeAgentOptions(
        cli_path=os.fspath(cli_path),
        cwd=os.fspath(home / PROJECT_DIR),
        env=cli_env(api.url, home),
        stderr=lambda line: None,
    )


async def run_scenario_async(
    name: str,
    cli_path: str | os.PathLike[str],
    api: FakeAPI,
    *,
    home: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    func: Scenario | None = None,
) -> ScenarioResult:
    """Run scenario ``name`` (see :data:`SCENARIOS`) and return what the host saw.

    ``home`` is the CLI's home directory (a fresh temporary one, removed
    afterwards, when None); ``env`` adds to the CLI's environment; ``func`` runs
    in place of the registered scenario (a test's variant of one, no fixture).
    """
    func = func or SCENARIOS[name]
    owned = home is None
    home_path = make_home(tempfile.mkdtemp(prefix="ct-home-") if owned else os.fspath(home))
    api.reset()
    result = ScenarioResult(name=name, home=home_path)
    options = base_options(cli_path, api, home_path)
    if env:
        options.env.update(env)
    try:
        await asyncio.wait_for(func(os.fspath(cli_path), api, options, result), SCENARIO_TIMEOUT)
    finally:
        if owned:
            shutil.rmtree(home_path, ignore_errors=True)
    return result


def run_scenario(
    name: str,
    cli_path: str | os.PathLike[str],
    api: FakeAPI,
    *,
    home: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    func: Scenario | None = None,
) -> ScenarioResult:
    """Synchronous :func:`run_scenario_async` (runs its own event loop)."""
    return asyncio.run(run_scenario_async(name, cli_path, api, home=home, env=env, func=func))


@dataclass(frozen=True)
class DirectRun:
    """A scenario run directly against the real CLI (the ``direct_run`` fixture): what
    the application saw, and what the fake API was left with right after (scripted
    answers not used, requests for paths it does not serve)."""

    result: ScenarioResult
    pending: int
    unknown: list[Any]
