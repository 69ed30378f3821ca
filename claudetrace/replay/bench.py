"""Replay benchmarks: engine throughput, and a long session through the real Python SDK.

Both build a synthetic but protocol-shaped recording (an ``initialize`` round
trip, one user turn streaming ``lines`` partial-message events, a permission-free
hook-less turn end) so the numbers do not depend on any cassette on disk.

- :func:`bench_engine` runs :class:`~claudetrace.replay.engine.ReplayEngine`
  in-process over pipes, with a host thread feeding the recorded host lines
  (fresh request ids) and draining stdout: released lines per second.
- :func:`bench_sdk` writes the recording to a cassette, points
  ``ClaudeAgentOptions(cli_path=…)`` at a replay shim and times a
  ``ClaudeSDKClient`` session that receives every message.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cassette import Cassette, new_header, write_cassette
from ..model.events import Event
from .engine import ReplayEngine
from .matching import Matcher, compile_script

PROMPT = "Benchmark: stream a long answer."
SESSION = "bench0000-0000-4000-8000-000000000000"


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def synthetic_session(lines: int, *, round_trips: int = 0) -> Cassette:
    """A recording with ``lines`` streamed deltas and ``round_trips`` hook callbacks.

    Host lines use the Python SDK's spelling so that a real SDK host matches them.
    """
    events: list[Event] = []
    t = 0

    def add(direction: str, data: bytes) -> None:
        nonlocal t
        t += 20_000
        events.append(Event(seq=len(events), direction=direction, t_ns=t, data=data))  # type: ignore[arg-type]

    req = "req_1_" + secrets.token_hex(4)
    add(
        "in",
        json.dumps(
            {
                "type": "control_request",
                "request_id": req,
                "request": {"subtype": "initialize", "hooks": None},
            }
        ).encode(),
    )
    add(
        "out",
        _dumps(
            {
                "type": "control_response",
                "response": {"subtype": "success", "request_id": req, "response": {}},
            }
        ),
    )
    add(
        "in",
        json.dumps(
            {
                "type": "user",
                "message": {"role": "user", "content": PROMPT},
                "parent_tool_use_id": None,
                "session_id": "default",
            }
        ).encode(),
    )
    add(
        "out",
        _dumps(
            {
                "type": "system",
                "subtype": "init",
                "cwd": os.getcwd(),
                "session_id": SESSION,
                "claude_code_version": "2.1.330",
                "model": "claude-bench",
                "permissionMode": "default",
                "tools": [],
            }
        ),
    )
    every = lines // (round_trips + 1) if round_trips else 0
    for n in range(lines):
        if every and n and n % every == 0 and n // every <= round_trips:
            rid = f"cb-{n}"
            add(
                "out",
                _dumps(
                    {
                        "type": "control_request",
                        "request_id": rid,
                        "request": {
                            "subtype": "hook_callback",
                            "callback_id": "hook_0",
                            "input": {"n": n},
                        },
                    }
                ),
            )
            add(
                "in",
                json.dumps(
                    {
                        "type": "control_response",
                        "response": {"subtype": "success", "request_id": rid, "response": {}},
                    }
                ).encode(),
            )
        add(
            "out",
            _dumps(
                {
                    "type": "stream_event",
                    "session_id": SESSION,
                    "parent_tool_use_id": None,
                    "uuid": f"00000000-0000-4000-8000-{n:012d}",
                    "event": {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": f"word{n} "},
                    },
                }
            ),
        )
    add(
        "out",
        _dumps(
            {
                "type": "assistant",
                "session_id": SESSION,
                "parent_tool_use_id": None,
                "message": {
                    "id": "msg_bench",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-bench",
                    "content": [{"type": "text", "text": "done"}],
                },
            }
        ),
    )
    add(
        "out",
        _dumps(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "duration_ms": 1,
                "duration_api_ms": 1,
                "num_turns": 1,
                "result": "done",
                "session_id": SESSION,
                "total_cost_usd": 0.0,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        ),
    )
    # The arguments ClaudeSDKClient passes for bench_sdk's options.
    argv = [
        "claude",
        "--output-format",
        "stream-json",
        "--verbose",
        "--system-prompt",
        "",
        "--include-partial-messages",
        "--input-format",
        "stream-json",
    ]
    header = new_header(argv=argv, exit_code=0, claude_code_version="2.1.330", cwd=os.getcwd())
    return Cassette(header=header, events=events)


@dataclass
class EngineResult:
    """Engine benchmark figures."""

    lines: int
    compile_s: float
    matcher_lines_per_s: float
    engine_s: float

    @property
    def engine_lines_per_s(self) -> float:
        return self.lines / self.engine_s if self.engine_s else 0.0


def bench_engine(lines: int = 100_000, round_trips: int = 100) -> EngineResult:
    """Release ``lines`` recorded lines through the engine over pipes; time it."""
    cassette = synthetic_session(lines, round_trips=round_trips)
    started = time.perf_counter()
    script = compile_script(cassette, live_paths={"cwd": os.getcwd()})
    compile_s = time.perf_counter() - started
    host_lines = [
        e.data.replace(b"req_1_", b"req_1_f") for e in cassette.events if e.direction == "in"
    ]

    # Pure matcher: no I/O, every host line offered as soon as its turn comes.
    matcher = Matcher(script)
    pending = list(host_lines)
    released = 0
    started = time.perf_counter()
    while True:
        for line in matcher.pop_ready():
            matcher.render(line)
            released += 1
        if not pending:
            break
        divergence = matcher.offer(Event(0, "in", 0, pending.pop(0)))
        if divergence is not None:
            raise RuntimeError(divergence.render())
    matcher_s = time.perf_counter() - started

    engine = ReplayEngine(script)
    host_r, engine_w = os.pipe()
    engine_r, host_w = os.pipe()
    sink = os.open(os.devnull, os.O_WRONLY)

    def host() -> None:
        # The host answers each CLI request as it reads it, like an SDK does.
        with os.fdopen(engine_w, "wb", buffering=0) as writer, os.fdopen(engine_r, "rb") as reader:
            writer.write(host_lines[0] + b"\n" + host_lines[1] + b"\n")
            for data in reader:
                if data.startswith(b'{"type":"control_request"'):
                    rid = json.loads(data)["request_id"]
                    writer.write(
                        json.dumps(
                            {
                                "type": "control_response",
                                "response": {
                                    "subtype": "success",
                                    "request_id": rid,
                                    "response": {},
                                },
                            }
                        ).encode()
                        + b"\n"
                    )
                elif data.startswith(b'{"type":"result"'):
                    break

    worker = threading.Thread(target=host, daemon=True)
    started = time.perf_counter()
    worker.start()
    code = engine.run(host_r, host_w, sink)
    engine_s = time.perf_counter() - started
    for fd in (host_r, host_w, sink):
        os.close(fd)
    worker.join(5)
    if code != 0:
        raise RuntimeError(f"engine benchmark diverged (exit {code})")
    return EngineResult(
        lines=len(script.outputs),
        compile_s=compile_s,
        matcher_lines_per_s=released / matcher_s if matcher_s else 0.0,
        engine_s=engine_s,
    )


@dataclass
class SDKResult:
    """Python SDK benchmark figures."""

    lines: int
    messages: int
    seconds: float


def bench_sdk(lines: int = 10_000) -> SDKResult:
    """Time a ClaudeSDKClient session replayed from a ``lines``-line recording."""
    from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient

    from . import write_replay_shim

    cassette = synthetic_session(lines)
    with tempfile.TemporaryDirectory(prefix="ct-bench-") as tmp:
        path = Path(tmp) / "bench.ndjson"
        write_cassette(path, cassette.header, cassette.events)
        shim = write_replay_shim(Path(tmp) / "claude", path)
        options = ClaudeAgentOptions(
            cli_path=str(shim), include_partial_messages=True, cwd=os.getcwd()
        )

        async def session() -> int:
            count = 0
            async with ClaudeSDKClient(options) as client:
                await client.query(PROMPT)
                async for _ in client.receive_response():
                    count += 1
            return count

        started = time.perf_counter()
        messages = asyncio.run(session())
        seconds = time.perf_counter() - started
    return SDKResult(lines=len(cassette.events), messages=messages, seconds=seconds)
