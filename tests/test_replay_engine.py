"""``claudetrace replay`` as a process: driven over pipes with recorded host lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from claudetrace.cassette import Cassette, new_header, read_cassette, write_cassette
from claudetrace.model.events import Event
from claudetrace.replay import ReplayEngine, ReplayOptions, argv_drift, replay_command

FIXTURES = Path(__file__).parent / "fixtures" / "samples"
MCP = FIXTURES / "mcp_hooks.cassette.ndjson"
SDK_ARGS = ["--output-format", "stream-json", "--verbose", "--input-format", "stream-json"]


def run(
    source: Path | str,
    stdin: bytes,
    *args: str,
    cli: list[str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    if cli is None:
        # The host starts the CLI as the recording did (other options diverge).
        recorded = read_cassette(source).header.get("argv") if Path(source).is_file() else None
        cli = list(recorded[1:]) if recorded else SDK_ARGS
    command = [sys.executable, "-m", "claudetrace", "replay", str(source), *args, "--", *cli]
    return subprocess.run(command, input=stdin, capture_output=True, timeout=30, cwd=cwd)


def host_lines(cassette: Cassette, **replace: str) -> bytes:
    """The recorded host lines, with some values replaced (fresh ids, edits)."""
    out = []
    for event in cassette.events:
        if event.direction == "in":
            data = event.data
            for old, new in replace.items():
                data = data.replace(old.encode(), new.encode())
            out.append(data + b"\n")
    return b"".join(out)


def write(
    tmp_path: Path, items: list[tuple[str, Any]], name: str = "c.ndjson", **header: Any
) -> Path:
    events = [
        Event(
            seq=i,
            direction=d,
            t_ns=int(t * 1e9),
            data=(obj if isinstance(obj, bytes) else json.dumps(obj).encode()),
        )
        for i, (d, t, obj) in enumerate(items)
    ]
    path = tmp_path / name
    header = {"argv": ["claude", *SDK_ARGS], "exit_code": 0, **header}
    write_cassette(path, new_header(**header), events)
    return path


def user(text: str) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": text}}


RESULT = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "result": "ok",
    "session_id": "s1",
    "duration_ms": 1,
    "duration_api_ms": 1,
    "num_turns": 1,
}


def test_version_answers_as_recorded() -> None:
    proc = run(MCP, b"", cli=["-v"])
    assert proc.returncode == 0
    assert proc.stdout == b"2.1.330 (Claude Code)\n"


def test_missing_cassette_exit_80(tmp_path: Path) -> None:
    proc = run(tmp_path / "absent.ndjson", b"")
    assert proc.returncode == 80
    assert proc.stderr.decode().strip().startswith("claudetrace: cassette not found")
    assert b"Traceback" not in proc.stderr


def test_sample_replays_with_fresh_request_id() -> None:
    recorded = read_cassette(MCP)
    proc = run(MCP, host_lines(recorded, req_1_b9969339="req_1_c0ffee00"))
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stdout.splitlines()
    expected = [e.data for e in recorded.events if e.direction == "out"]
    assert len(lines) == len(expected)
    init_response = json.loads(lines[1])
    assert init_response["response"]["request_id"] == "req_1_c0ffee00"
    # Output is byte-exact apart from the bound id and the mapped paths.
    assert lines[0] == expected[0]
    assert lines[-1] == expected[-1]


def test_a_changed_model_is_an_argv_divergence_reported_first() -> None:
    recorded = read_cassette(MCP)
    argv = list(recorded.header["argv"][1:])
    live = [*argv, "--model", "claude-haiku-9"]
    proc = run(MCP, host_lines(recorded), cli=live)
    assert proc.returncode == 84, proc.stderr.decode()
    report = proc.stderr.decode()
    assert report.startswith("claudetrace replay: argv-mismatch: ")
    assert 'argv --model: unexpected "claude-haiku-9"' in report
    # The host's initialize gets an error answer and the session an error result.
    first, result = (json.loads(line) for line in proc.stdout.splitlines())
    assert first["response"]["subtype"] == "error"
    assert result["is_error"] and "argv-mismatch" in result["result"]


def test_argv_divergence_is_relaxed_per_key_or_altogether() -> None:
    recorded = read_cassette(MCP)
    argv = list(recorded.header["argv"][1:])
    live = [*argv, "--model", "other"]
    assert run(MCP, host_lines(recorded), "--ignore-argv", "model", cli=live).returncode == 0
    relaxed = run(MCP, host_lines(recorded), "--no-match-argv", cli=live)
    assert relaxed.returncode == 0
    assert b"warning: CLI arguments differ from the recording" in relaxed.stderr
    assert b"live --model other" in relaxed.stderr


def test_argv_drift_lists_both_sides() -> None:
    assert argv_drift(["-a", "1", "-b"], ["-a", "2", "-b", "-c"]) == [
        "recorded 1",
        "live 2",
        "live -c",
    ]
    assert argv_drift(["-a"], ["-a"]) == []


def test_different_prompt_fails_fast_with_report(tmp_path: Path) -> None:
    recorded = read_cassette(MCP)
    report = tmp_path / "report.json"
    started = time.monotonic()
    proc = run(
        MCP, host_lines(recorded, **{"Add 2 and 40": "Add 2 and 41"}), "--report", str(report)
    )
    # Generous for a loaded machine: one that missed the divergence would wait for
    # input until run()'s 30 s timeout.
    assert time.monotonic() - started < 15
    assert proc.returncode == 81
    last = json.loads(proc.stdout.splitlines()[-1])
    assert last["type"] == "result" and last["is_error"] is True
    assert "unmatched-message" in last["result"]
    doc = json.loads(report.read_text())
    assert doc["kind"] == "unmatched-message" and doc["exit_code"] == 81
    assert doc["where"]["lane"] == "user" and doc["where"]["seq"] == 4
    assert doc["diff"] == [
        {
            "path": "$.message.content",
            "expected": "[[MCP]] Add 2 and 40 with the calc tool.",
            "actual": "[[MCP]] Add 2 and 41 with the calc tool.",
        }
    ]
    assert doc["next"][0]["seq"] == 5
    assert "re-record" in proc.stderr.decode()


def test_divergent_control_request_gets_error_response(tmp_path: Path) -> None:
    recorded = read_cassette(MCP)
    stdin = host_lines(recorded, PreToolUse="PostToolUse", req_1_b9969339="req_1_1111")
    proc = run(MCP, stdin.splitlines(keepends=True)[0])
    assert proc.returncode == 81
    response, result = (json.loads(x) for x in proc.stdout.splitlines())
    assert response["response"] == {
        "subtype": "error",
        "request_id": "req_1_1111",
        "error": response["response"]["error"],
    }
    assert "$.request.hooks.PreToolUse" in response["response"]["error"]
    assert result["type"] == "result"


def test_extra_turn_is_recording_exhausted(tmp_path: Path) -> None:
    path = write(tmp_path, [("in", 0.0, user("one")), ("out", 0.1, RESULT)])
    proc = run(path, b"".join(json.dumps(user(t)).encode() + b"\n" for t in ("one", "two")))
    assert proc.returncode == 82
    assert b"recording-exhausted" in proc.stderr


def test_missing_turn_is_input_never_sent(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            ("in", 0.0, user("one")),
            ("out", 0.1, RESULT),
            ("in", 0.2, user("two")),
            ("out", 0.3, RESULT),
        ],
    )
    proc = run(path, json.dumps(user("one")).encode() + b"\n")
    assert proc.returncode == 83
    lines = proc.stdout.splitlines()
    assert json.loads(lines[0]) == RESULT
    assert json.loads(lines[-1])["is_error"] is True
    assert b"recorded input never sent" in proc.stderr and b"seq 2" in proc.stderr


def test_stderr_and_exit_code_are_replayed(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            ("in", 0.0, user("one")),
            ("err", 0.05, b"warning: something"),
            ("out", 0.1, RESULT),
            ("err", 0.2, b"bye"),
        ],
        exit_code=3,
    )
    proc = run(path, json.dumps(user("one")).encode() + b"\n")
    assert proc.returncode == 3
    assert proc.stderr.endswith(b"warning: something\nbye\n")
    assert json.loads(proc.stdout) == RESULT


# At full speed the recorded 4 s gap is not waited for; at speed 2 it is halved (2 s):
# each upper bound stays below what the next slower pace would take (2 s, 4 s), with
# seconds of room for a loaded machine (0.8 s gaps left 50 ms, too little at load 20).
@pytest.mark.parametrize(("speed", "low", "high"), [(None, 0.0, 1.9), (2.0, 1.95, 3.9)])
def test_timing(tmp_path: Path, speed: float | None, low: float, high: float) -> None:
    path = write(
        tmp_path, [("in", 0.0, user("one")), ("out", 2.5, {"type": "a"}), ("out", 4.0, RESULT)]
    )
    engine = ReplayEngine.from_cassette(read_cassette(path), ReplayOptions(speed=speed))
    host_in, engine_in = os.pipe()
    engine_out, host_out = os.pipe()
    codes: list[int] = []
    worker = threading.Thread(target=lambda: codes.append(engine.run(host_in, host_out, host_out)))
    worker.start()
    with os.fdopen(engine_in, "wb") as writer, os.fdopen(engine_out, "rb") as reader:
        writer.write(json.dumps(user("one")).encode() + b"\n")
        writer.flush()
        sent = time.monotonic()
        reader.readline()
        reader.readline()
        elapsed = time.monotonic() - sent
    worker.join(10)
    os.close(host_in)
    os.close(host_out)
    assert codes == [0]
    # Recorded gaps: 4 s from the host's line to the result, halved at speed 2.
    assert low <= elapsed <= high, elapsed


def test_replay_from_store_session(tmp_path: Path) -> None:
    from claudetrace.indexer import open_settled_store

    db = f"sqlite:///{tmp_path / 'ct.db'}"
    store = open_settled_store(db)
    recording_id = store.import_cassette(read_cassette(MCP))
    store.close()
    recorded = read_cassette(MCP)
    argv = list(recorded.header["argv"][1:])
    proc = run(recording_id[:12], host_lines(recorded), "--db", db, cli=argv)
    assert proc.returncode == 0, proc.stderr.decode()
    assert len(proc.stdout.splitlines()) == sum(e.direction == "out" for e in recorded.events)
    missing = run("nosuchsession", b"", "--db", db)
    assert missing.returncode == 80


def test_replay_command_is_a_usable_prefix(tmp_path: Path) -> None:
    command = replay_command(MCP, speed=2.0, report=tmp_path / "r.json")
    assert command[-1] == "--" and command[command.index("replay") + 1] == str(MCP.absolute())
    proc = subprocess.run([*command, "-v"], capture_output=True, timeout=30)
    assert proc.stdout == b"2.1.330 (Claude Code)\n"


def test_argv_is_compared_after_the_recording_s_redaction(tmp_path: Path) -> None:
    prompt = ["--system-prompt", "Use the key [REDACTED] for the billing API."]
    path = write(
        tmp_path,
        [("in", 0.0, user("one")), ("out", 0.1, RESULT)],
        argv=["claude", *SDK_ARGS, *prompt],
    )
    secret = "sk-ant-api03-billingkey0123456789"
    same = [*SDK_ARGS, "--system-prompt", f"Use the key {secret} for the billing API."]
    proc = run(path, json.dumps(user("one")).encode() + b"\n", cli=same)
    assert proc.returncode == 0, proc.stderr.decode()
    other = [*SDK_ARGS, "--system-prompt", f"Use the key {secret} for the shop API."]
    proc = run(path, json.dumps(user("one")).encode() + b"\n", cli=other)
    assert proc.returncode == 84
    report = proc.stderr.decode() + proc.stdout.decode()
    assert "argv --system-prompt" in report and "shop API" in report
    assert secret not in report
