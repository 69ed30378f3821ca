"""Fault SPECs, and the fake CLI injecting them (through `claudetrace replay`)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from claudetrace.cassette import new_header, write_cassette
from claudetrace.model.events import Event
from claudetrace.replay import BadFault, Fault, parse_fault, parse_faults
from claudetrace.replay.faults import GARBAGE

ARGS = ["--output-format", "stream-json", "--input-format", "stream-json"]


@pytest.mark.parametrize(
    ("spec", "fault"),
    [
        ("crash@3", Fault("crash", 3)),
        ("signal=KILL@0", Fault("signal", 0, int(signal.SIGKILL))),
        ("signal=sigterm@2", Fault("signal", 2, int(signal.SIGTERM))),
        ("signal=9@1", Fault("signal", 1, 9)),
        ("exit=3@1", Fault("exit", 1, 3)),
        ("hang@2", Fault("hang", 2)),
        ("delay=0.5@1", Fault("delay", 1, 0.5)),
        ("garbage@0", Fault("garbage", 0)),
        ("truncate@4", Fault("truncate", 4)),
        ("stderr=rate limited @ 3pm@2", Fault("stderr", 2, "rate limited @ 3pm")),
    ],
)
def test_specs_parse_and_round_trip(spec: str, fault: Fault) -> None:
    assert parse_fault(spec) == fault
    assert parse_fault(fault.spec()) == fault


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("crash", "expected KIND[=VALUE]@N"),
        ("explode@1", "unknown fault kind 'explode'"),
        ("exit@1", "exit needs a value"),
        ("crash=1@1", "crash takes no value"),
        ("exit=300@1", "0-255"),
        ("signal=NOPE@1", "no signal 'NOPE'"),
        ("delay=soon@1", "could not convert"),
    ],
)
def test_bad_specs_name_the_valid_forms(spec: str, why: str) -> None:
    with pytest.raises(BadFault) as caught:
        parse_fault(spec)
    assert why in str(caught.value)
    assert "crash@N, signal=SIG@N" in str(caught.value)


def test_faults_are_ordered_by_line_count() -> None:
    assert [f.at for f in parse_faults(["crash@5", "stderr=x@1", "delay=0@3"])] == [1, 3, 5]


# -- through the replay command -----------------------------------------------------------


def user(text: str) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": text}}


def cassette(tmp_path: Path, outputs: int = 4) -> Path:
    """One turn: the host's user line, then ``outputs`` CLI lines, the last a result."""
    events = [Event(0, "in", 1_000_000, json.dumps(user("hi")).encode())]
    for i in range(outputs - 1):
        events.append(
            Event(i + 1, "out", (i + 2) * 1_000_000, json.dumps({"type": "a", "n": i}).encode())
        )
    result = {"type": "result", "subtype": "success", "is_error": False, "result": "ok"}
    events.append(Event(outputs, "out", (outputs + 2) * 1_000_000, json.dumps(result).encode()))
    path = tmp_path / "c.ndjson"
    write_cassette(path, new_header(argv=["claude", *ARGS], exit_code=0), events)
    return path


def start(path: Path, *faults: str) -> subprocess.Popen[bytes]:
    fault_args = [arg for spec in faults for arg in ("--fault", spec)]
    return subprocess.Popen(
        [sys.executable, "-m", "claudetrace", "replay", str(path), *fault_args, "--", *ARGS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


#: Seconds within which a host that keeps stdin open sees EOF: starting the replay
#: (Python and claudetrace) takes under a second, several on a loaded machine; one
#: that missed it would wait for the host's stdin for ever (pytest-timeout's 300 s).
PROMPT_S = 30


def host(path: Path, *faults: str, close: bool = False) -> tuple[int, list[bytes], bytes, float]:
    """Send the user line and read to EOF; (exit status, stdout lines, stderr, seconds)."""
    started = time.monotonic()
    with start(path, *faults) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(json.dumps(user("hi")).encode() + b"\n")
        proc.stdin.flush()
        if close:
            proc.stdin.close()
        out = proc.stdout.read()
        elapsed = time.monotonic() - started
        err = proc.stderr.read()
        if not close:
            proc.stdin.close()
        code = proc.wait(timeout=10)
    return code, out.splitlines(keepends=True), err, elapsed


def test_crash_closes_stdout_after_n_lines(tmp_path: Path) -> None:
    # The host keeps stdin open, as an SDK does: it must still see EOF at once.
    code, lines, err, elapsed = host(cassette(tmp_path), "crash@2")
    assert code == 1 and len(lines) == 2 and elapsed < PROMPT_S
    assert b"injected crash after 2 line(s)" in err
    assert b"input-never-sent" not in err


def test_exit_and_signal(tmp_path: Path) -> None:
    code, lines, _, _ = host(cassette(tmp_path), "exit=7@1")
    assert (code, len(lines)) == (7, 1)
    code, lines, _, _ = host(cassette(tmp_path), "signal=TERM@0")
    assert code == -signal.SIGTERM and lines == []


def test_garbage_stderr_and_delay_then_the_replay_goes_on(tmp_path: Path) -> None:
    code, lines, err, elapsed = host(
        cassette(tmp_path), "garbage@1", "stderr=overloaded@0", "delay=0.6@2", close=True
    )
    assert code == 0
    assert lines[1] == GARBAGE and len(lines) == 5
    assert json.loads(lines[-1])["type"] == "result"
    assert err.startswith(b"overloaded\n")
    assert elapsed >= 0.6


def test_truncate_cuts_the_next_line_without_newline(tmp_path: Path) -> None:
    code, lines, _, _ = host(cassette(tmp_path), "truncate@1")
    assert code == 1 and len(lines) == 2
    assert not lines[1].endswith(b"\n")
    with pytest.raises(ValueError):
        json.loads(lines[1])


def test_hang_stops_output_until_the_host_gives_up(tmp_path: Path) -> None:
    with start(cassette(tmp_path), "hang@1") as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(user("hi")).encode() + b"\n")
        proc.stdin.flush()
        assert proc.stdout.readline()
        time.sleep(0.5)
        assert proc.poll() is None, "a hung CLI stays alive"
        proc.stdin.close()
        assert proc.stdout.read() == b""
        assert proc.wait(timeout=5) == 1
        assert proc.stderr is not None and b"input-never-sent" not in proc.stderr.read()


def test_a_fault_beyond_the_recording_fires_at_its_end(tmp_path: Path) -> None:
    code, lines, _, elapsed = host(cassette(tmp_path), "crash@100")
    assert code == 1 and len(lines) == 4 and elapsed < PROMPT_S


def test_a_recorded_early_exit_ends_without_waiting_for_the_host(tmp_path: Path) -> None:
    # A hand-edited cassette: the CLI died (exit 1, no signal) after two lines
    # of a turn.  A host that keeps stdin open must still see EOF promptly.
    events = [
        Event(0, "in", 1_000_000, json.dumps(user("hi")).encode()),
        Event(1, "out", 2_000_000, b'{"type":"a"}'),
        Event(2, "err", 3_000_000, b"Error: boom"),
    ]
    path = tmp_path / "died.ndjson"
    write_cassette(path, new_header(argv=["claude", *ARGS], exit_code=1), events)
    code, lines, err, elapsed = host(path)
    assert code == 1 and len(lines) == 1 and elapsed < PROMPT_S
    assert err == b"Error: boom\n"


def test_a_bad_spec_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "claudetrace",
            "replay",
            str(cassette(tmp_path)),
            "--fault",
            "boom@1",
        ],
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert proc.stderr.decode().count("\n") == 1 and b"unknown fault kind 'boom'" in proc.stderr
