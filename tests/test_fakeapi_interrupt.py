"""A prompt after an interrupt gets its own answer from ``claudetrace fakeapi``
(real Python SDK, the shim's recording proxy, the real CLI, the standalone fake).

When the interrupt lands before the model says anything, CLI 2.1.330 sends no
assistant message: the next request's last user message holds the interrupted
prompt, ``[Request interrupted by user]`` and the new prompt together.  The fake
matched the interrupted prompt's slow rule again, so the second turn waited for
the whole slow answer (a 120 s timeout with a slower rule) and then got it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ResultMessage,
    StreamEvent,
    TextBlock,
)

from claudetrace.testing.harness import PROJECT_DIR, cli_env, make_home

pytestmark = pytest.mark.slow

#: Seconds before each streamed event of the slow answer: 14 events, so a
#: second turn answered by the slow rule again takes about 40 s, not a moment.
SLOW = 3.0


async def interrupt_then_ask(options: ClaudeAgentOptions) -> list[str]:
    """Ask slowly, interrupt at the answer's first event, ask again: the texts seen."""
    texts: list[str] = []
    async with ClaudeSDKClient(options) as client:
        await client.query("Please do it slowly.")
        async for message in client.receive_response():
            if isinstance(message, StreamEvent) and message.event["type"] == "message_start":
                await client.interrupt()
        await client.query("What is the second answer?")
        async for message in client.receive_response():
            if isinstance(message, AssistantMessage):
                texts += [b.text for b in message.content if isinstance(b, TextBlock)]
            elif isinstance(message, ResultMessage):
                texts.append(f"result: {message.subtype}")
    return texts


def test_a_prompt_after_an_interrupt_is_not_answered_by_the_interrupted_rule(
    tmp_path: Path, real_claude: Path
) -> None:
    script = tmp_path / "rules.json"
    script.write_text(
        json.dumps(
            {
                "rules": [
                    {"prompt": "slowly", "reply": {"text": "Slow " * 10, "delay": SLOW}},
                    {"prompt": "second answer", "reply": {"text": "The second answer."}},
                ],
                "fallback": {"text": "Fallback."},
            }
        )
    )
    shim = tmp_path / "claude-shim"
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "claudetrace",
            "shim",
            str(shim),
            "--real",
            str(real_claude),
            "--db",
            str(tmp_path / "store.db"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    with subprocess.Popen(
        [sys.executable, "-m", "claudetrace", "fakeapi", "--script", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as server:
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip().split("=", 1)[1]
            home = make_home(tmp_path / "home")
            options = ClaudeAgentOptions(
                cli_path=str(shim),
                cwd=str(home / PROJECT_DIR),
                env=cli_env(url, home),
                include_partial_messages=True,
                stderr=lambda line: None,
            )
            texts = asyncio.run(asyncio.wait_for(interrupt_then_ask(options), 120))
        finally:
            server.terminate()
    assert texts == ["The second answer.", "result: success"]
