"""The proxy's telemetry sink and its worker process: what is lost, and when we say so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from claudetrace.events import Event
from claudetrace.recording import RecordingInfo
from claudetrace.store import open_store
from claudetrace.telemetry import live
from claudetrace.telemetry.config import resolve_settings
from claudetrace.telemetry.live import GAVE_UP, LiveTelemetry, live_sink, shortfall_message
from claudetrace.telemetry.records import traceparent
from tests.otlp_receiver import OtlpReceiver

#: A "worker" that never reads its input: the sink must not wait for it.
STUCK = [sys.executable, "-c", "import time; time.sleep(60)"]


def test_shortfall_message() -> None:
    assert shortfall_message(10, 10, 0, None) is None
    assert shortfall_message(10, 4, GAVE_UP, None) is None  # the worker said why itself
    assert shortfall_message(10, 6, 0, "it fell behind") == (
        "live telemetry incomplete: it fell behind; 4 of 10 events were not exported")
    assert shortfall_message(10, 6, -9, None) == (
        "live telemetry incomplete: the telemetry worker was killed by signal 9; "
        "at least 4 of 10 events were not exported")
    assert shortfall_message(10, 10, 1, None) == (
        "live telemetry incomplete: the telemetry worker exited with status 1; "
        "spans it had not exported yet are lost")


def test_traceparent_without_importing_opentelemetry() -> None:
    code = (
        "import sys\n"
        "from claudetrace.recording import RecordingInfo\n"
        "from claudetrace.telemetry.live import live_sink\n"
        "from claudetrace.telemetry.records import traceparent\n"
        "info = RecordingInfo(id='01JTRACEPARENT', argv=[], started_ns=0)\n"
        "sink = live_sink(info, endpoint='http://127.0.0.1:9', environ={})\n"
        "assert sink.child_env() == {'TRACEPARENT': traceparent(info.id)}\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'imported'\n"
        "info.ended_ns, info.exit_code = 1, 0\n"
        "sink.on_close(info)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, capture_output=True)
    assert traceparent("01JTRACEPARENT").startswith("00-")


def test_a_worker_that_cannot_start_costs_one_warning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(live, "worker_command", lambda: ["/nonexistent/claudetrace-worker"])
    info = RecordingInfo(id="01NOWORKER", argv=[], started_ns=time.time_ns())
    assert live_sink(info, endpoint="http://127.0.0.1:9", environ={}) is None
    err = capsys.readouterr().err
    assert err.count("warning") == 1 and "telemetry worker" in err


def test_a_stuck_worker_blocks_events_only_briefly_and_costs_one_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    info = RecordingInfo(id="01STUCKWORKER", argv=[], started_ns=time.time_ns())
    settings = resolve_settings(endpoint="http://127.0.0.1:9", environ={})
    sink = LiveTelemetry(info, settings, command=STUCK, backlog_limit=256 * 1024,
                         flush_timeout=0.5, stall_timeout=0.3)
    line = b"x" * 10_000
    began = time.monotonic()
    for seq in range(400):  # 4 MB: more than the pipe and the backlog hold
        sink.on_event(Event(seq, "out", seq, line, True, info.started_ns + seq))
    # One stall timeout while the backlog is full, then events are dropped at once.
    assert time.monotonic() - began < 0.3 + 1.0
    assert sink.stopped is not None and "behind" in sink.stopped
    info.ended_ns, info.exit_code = time.time_ns(), 0
    sink.on_close(info)
    assert time.monotonic() - began < 5.0
    err = capsys.readouterr().err
    assert err.count("warning") == 1
    assert "behind" in err and "of 400 events were not exported" in err
    assert 0 < 400 - sink.delivered < 400


SLOW = [
    sys.executable,
    "-c",
    "import sys, time\n"
    "while True:\n"
    "    chunk = sys.stdin.buffer.read1(65536)\n"
    "    if not chunk:\n"
    "        break\n"
    "    time.sleep(0.01)\n",
]


def test_a_slow_worker_that_keeps_reading_gets_every_event(
    capsys: pytest.CaptureFixture[str],
) -> None:
    info = RecordingInfo(id="01SLOWWORKER", argv=[], started_ns=time.time_ns())
    settings = resolve_settings(endpoint="http://127.0.0.1:9", environ={})
    sink = LiveTelemetry(info, settings, command=SLOW, backlog_limit=256 * 1024,
                         flush_timeout=5.0, stall_timeout=2.0)
    line = b"y" * 10_000
    for seq in range(400):  # 4 MB through a 256 KiB backlog: the recorder waits
        sink.on_event(Event(seq, "out", seq, line, True, info.started_ns + seq))
    assert sink.stopped is None
    info.ended_ns, info.exit_code = time.time_ns(), 0
    sink.on_close(info)
    assert sink.delivered == 400
    assert "warning" not in capsys.readouterr().err


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append((int(entry.name), cmdline))
    return found


def _worker_of(proxy_pid: int) -> int:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for pid, cmdline in _children(proxy_pid):
            if "claudetrace.telemetry.worker" in cmdline:
                return pid
        time.sleep(0.05)
    raise AssertionError("the proxy started no telemetry worker")


ECHO_THEN_EXIT_7 = (
    "import sys\n"
    "for line in sys.stdin:\n"
    "    sys.stdout.write(line); sys.stdout.flush()\n"
    "sys.exit(7)\n"
)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_worker_killed_mid_session(db_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    with OtlpReceiver("http") as receiver:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
        with subprocess.Popen(
            [sys.executable, "-m", "claudetrace", "proxy", "--db", str(db_path), "--",
             sys.executable, "-c", ECHO_THEN_EXIT_7],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        ) as proxy:
            assert proxy.stdin is not None and proxy.stdout is not None
            try:
                for i in range(50):
                    if i == 20:
                        os.kill(_worker_of(proxy.pid), signal.SIGKILL)
                    line = f'{{"type":"user","n":{i}}}\n'.encode()
                    proxy.stdin.write(line)
                    proxy.stdin.flush()
                    assert proxy.stdout.readline() == line
                _, err_bytes = proxy.communicate(timeout=30)
            finally:
                if proxy.poll() is None:
                    proxy.kill()
        err = err_bytes.decode()
    assert proxy.returncode == 7, err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1, err
    assert "killed by signal 9" in warnings[0] and "of 100 events were not exported" in warnings[0]
    store = open_store(str(db_path))
    try:
        assert store.count_events(store.resolve("latest").id) == 100
    finally:
        store.close()
