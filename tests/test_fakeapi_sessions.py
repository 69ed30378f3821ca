"""Sessions recorded one after another against one ``claudetrace fakeapi`` are
each counted by ``usage`` (real CLI, the recording proxy, the standalone fake).

Usage counts a message id once across the store, so when every run of the fake
started again at ``msg_fake_00000`` a second session's calls counted as copies
of the first's and the session vanished from the report.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from claudetrace.cli import cli
from claudetrace.testing.fakeapi import usage
from claudetrace.testing.harness import PROJECT_DIR, make_home, subprocess_env

pytestmark = pytest.mark.slow


def test_two_sessions_against_one_fake_each_count_their_own_tokens(
    tmp_path: Path, real_claude: Path
) -> None:
    db = tmp_path / "store.db"
    server = subprocess.Popen(
        [sys.executable, "-m", "claudetrace", "fakeapi", "--fallback", "Hello."],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip().split("=", 1)[1]
        proxy = [sys.executable, "-m", "claudetrace", "proxy", "--db", str(db)]
        claude = [str(real_claude), "-p", "Hi.", "--output-format", "stream-json", "--verbose"]
        said = []
        for run in ("one", "two"):
            home = make_home(tmp_path / run)
            done = subprocess.run(
                [*proxy, "--name", run, "--", *claude],
                env=subprocess_env(url, home),
                cwd=home / PROJECT_DIR,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
            lines = [json.loads(line) for line in done.stdout.splitlines()]
            said.append(next(line for line in lines if line["type"] == "result"))
    finally:
        server.terminate()
        server.wait(timeout=10)
        server.stdout.close()  # type: ignore[union-attr]

    out = CliRunner().invoke(cli, ["usage", "session", "--json", "--db", str(db)])
    assert out.exit_code == 0, out.output
    entries = {entry["name"]: entry for entry in json.loads(out.stdout)["sessions"]}
    assert set(entries) == {"one", "two"}
    start, output = usage(0)  # each session's first message, numbered per session
    for result in said:
        (entry,) = [e for e in entries.values() if e["sessionId"] == result["session_id"]]
        assert entry["inputTokens"] == start["input_tokens"] == result["usage"]["input_tokens"]
        assert entry["outputTokens"] == output == result["usage"]["output_tokens"]
        assert entry["cacheReadTokens"] == start["cache_read_input_tokens"]
        assert entry["totalCost"] == pytest.approx(result["total_cost_usd"], abs=1e-9)
    totals = json.loads(out.stdout)["totals"]
    assert totals["inputTokens"] == 2 * start["input_tokens"]
