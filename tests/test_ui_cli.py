"""``claudetrace ui`` / ``bench ui`` command lines, and stopping the server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from claudetrace.cli import cli
from claudetrace.cli.ui import streamlit_argv
from claudetrace.indexer import open_settled_store
from claudetrace.store.browse import Filters, first_prompts, list_sessions
from claudetrace.testing.serving import wait_until_answering
from claudetrace.ui.bench import find_text, seed, template_turn


def test_help_lists_the_options() -> None:
    result = CliRunner().invoke(cli, ["ui", "--help"])
    assert result.exit_code == 0
    assert "--db" in result.output and "--host" in result.output and "--port" in result.output
    assert "ui" in CliRunner().invoke(cli, ["bench", "--help"]).output.split("Commands:")[1]


def test_streamlit_command_binds_where_asked() -> None:
    argv = streamlit_argv(Path("app.py"), "127.0.0.1", 8600, headless=True)
    assert argv[1:4] == ["-m", "streamlit", "run"]
    assert argv[argv.index("--server.address") + 1] == "127.0.0.1"
    assert argv[argv.index("--server.port") + 1] == "8600"
    assert argv[argv.index("--browser.gatherUsageStats") + 1] == "false"
    # No per-run source watching or full collection holding back the page's elements.
    assert argv[argv.index("--server.fileWatcherType") + 1] == "none"
    assert argv[argv.index("--runner.postScriptGC") + 1] == "false"
    assert "--server.port" not in streamlit_argv(Path("app.py"), "127.0.0.1", None, headless=True)


def test_unusable_database_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = CliRunner().invoke(cli, ["ui", "--db", str(blocker / "x.db")])
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert result.output.startswith("claudetrace: ") and result.output.count("\n") == 1


def test_seed_builds_what_the_benchmark_measures(tmp_path: Path) -> None:
    store = open_settled_store(str(tmp_path / "bench.db"))
    big = seed(store, sessions=5, lines=300, now_ns=1_800_000_000_000_000_000)
    assert store.count_recordings() == 6
    assert store.count_events(big) == 300
    rec = store.get(big)
    # The session is cut at 300 lines: its last turn may be waiting for its result.
    assert rec.turns > 10 and rec.turns - 1 <= rec.tool_calls <= rec.turns
    assert rec.status == ("ok" if rec.tool_calls == rec.turns else "incomplete")
    # The find view looks for one turn's prompt, whatever the session's size (a
    # text past its last turn left `bench ui --browser` waiting for a list never drawn).
    for lines, turns in ((300, rec.turns), (50_000, 2_000)):
        prompts = [f"big turn {n}" for n in range(turns)]
        assert sum(p.startswith(find_text(lines)) for p in prompts) == 1
    small = [r for r in store.list_recordings() if r.id != big]
    assert {r.event_count for r in small} == {3 + len(template_turn("x", 0))}
    # The small ones, stored together, have their lines, tool refs and words.
    assert {store.count_events(r.id) for r in small} == {3 + len(template_turn("x", 0))}
    assert first_prompts(store, [r.id for r in small]) == {
        r.id: f"task {r.name.split('-')[1]}: add {r.name.split('-')[1]} and 40" for r in small}
    assert len(list_sessions(store, Filters(tools=("mcp__calc__add",)))) == 6
    assert [r.name for r in list_sessions(store, Filters(text="task 3"))] == ["bench-3"]
    # Their calls are in the usage layer, as the indexer leaves them (the Stats
    # page sums them): the big session's messages repeat the small ones' ids, so
    # each is counted once, as `usage` counts a message two recordings hold.
    from claudetrace.store.usage import UsageFilter, store_reader
    from claudetrace.usage import periods, sessions

    total = sum(t.output for t in periods(
        store_reader(store), "daily", UsageFilter(), None).values())
    # (bench-N's message is msg_N, as is the big session's turn N, alike in usage).
    assert total == rec.output_tokens > sum(r.output_tokens for r in small) > 0
    per_recording = {s.recording_id: s.totals.calls for s in sessions(
        store_reader(store), UsageFilter())}
    assert all(per_recording[r.id] == r.model_calls == 2 for r in small)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_the_command_stops_the_server(tmp_path: Path, signum: int) -> None:
    """Stopping ``claudetrace ui`` must not leave Streamlit listening behind it."""
    db = tmp_path / "ui.db"
    open_settled_store(str(db)).close()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "HOME": str(tmp_path)}  # keep Streamlit's first-run prompt away
    proc = subprocess.Popen(
        [sys.executable, "-m", "claudetrace", "ui", "--db", str(db), "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        # A suite run under nohup hands its children SIGHUP ignored, which the
        # command rightly keeps ignoring: the signal sent here is to be heard.
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
    )
    health = f"http://127.0.0.1:{port}/_stcore/health"
    try:
        wait_until_answering(health, proc)
        proc.send_signal(signum)
        proc.wait(timeout=30)
        with pytest.raises(OSError):  # nothing answers on the port any more
            urllib.request.urlopen(health, timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_port_taken_is_one_line_before_any_url(tmp_path: Path) -> None:
    db = tmp_path / "ui.db"
    open_settled_store(str(db)).close()
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "claudetrace", "ui", "--db", str(db), "--port", str(port)],
            capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, done.stderr
    assert done.stderr == (f"claudetrace: cannot listen on 127.0.0.1:{port}: Address already "
                           "in use (choose another with --port)\n")
