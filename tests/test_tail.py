"""``claudetrace tail``: the fold over recorded sessions, and a live tail of real sessions."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace.cassette import read_cassette
from claudetrace.cli import cli
from claudetrace.formats.facts import latency
from claudetrace.model.events import Event
from claudetrace.recording import RecordingInfo
from claudetrace.store import Store
from claudetrace.tail import TailFold, TailLine, printable, raw_line

CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"


def tail_of(name: str) -> list[TailLine]:
    cassette = read_cassette(CASSETTES / f"{name}.ndjson")
    info = RecordingInfo(id="01TAIL", argv=[], started_ns=1_000_000_000_000)
    fold = TailFold(info)
    lines = [line for event in cassette.events for line in fold.feed(event)]
    info.ended_ns = info.started_ns + cassette.events[-1].t_ns
    info.exit_code = cassette.exit_code
    return lines + fold.close(info)


def texts(lines: list[TailLine], kind: str) -> list[str]:
    return [line.text for line in lines if line.kind == kind]


def test_a_tool_call_with_its_permission_wait() -> None:
    lines = tail_of("permission_allow")
    assert texts(lines, "prompt") == ["Create created.txt with touch."]
    tools = texts(lines, "tool")
    assert tools[0] == "▶ Bash touch created.txt"
    # The wait on the host is said when it starts (the session model's liveness).
    assert texts(lines, "state") == ["awaiting approval · can_use_tool Bash"]
    assert tools[1].startswith("✓ Bash ok after ")
    (permission,) = texts(lines, "permission")
    assert permission.startswith("Bash: allow after waiting ")
    models = texts(lines, "model")
    # Without streamed events a call's output is known from the turn's result:
    # each call is told once, with its final figures.
    assert models == ["claude-opus-5-5 · 160 in, 25 out", "claude-opus-5-5 · 161 in, 26 out"]
    (turn,) = texts(lines, "turn")
    assert turn.startswith("turn 1 success after ")
    assert "2 model calls, tokens 321 in / 51 out, $0.0019" in turn
    assert lines[-1].kind == "session" and lines[-1].text.startswith("ended ok")
    assert [line.t for line in lines if line.kind != "model"] == sorted(
        line.t for line in lines if line.kind != "model"
    )


@pytest.mark.parametrize("path", sorted(CASSETTES.glob("*.ndjson")), ids=lambda p: p.stem)
def test_the_calls_tokens_add_up_to_the_totals_told(path: Path) -> None:
    lines = tail_of(path.stem)
    calls = [re.search(r"· ([\d,]+) in(?:, ([\d,]+) out)?", text) for text in texts(lines, "model")]
    told_in = sum(int(m[1].replace(",", "")) for m in calls if m)
    told_out = sum(int(m[2].replace(",", "")) for m in calls if m and m[2])
    end = re.search(r"([\d,]+) model calls?(?: \(\+(\d+) .*?\))?, tokens ([\d,]+) in / "
                    r"([\d,]+) out", lines[-1].text)
    assert end, lines[-1].text
    assert len(calls) == int(end[1]) + int(end[2] or 0)
    assert (told_in, told_out) == (int(end[3].replace(",", "")), int(end[4].replace(",", "")))


def test_latencies_are_rounded_for_people() -> None:
    assert [latency(s) for s in (0.4123, 3.251, 66.1514, 725.0)] == [
        "412 ms", "3.25 s", "66.2 s", "12.1 min"]


def test_hooks_mcp_denials_and_a_dying_cli() -> None:
    hooks = texts(tail_of("hooks"), "hook")
    assert [h.split()[0] for h in hooks] == ["PreToolUse", "PostToolUse"]
    assert all("round trip" in h for h in hooks)
    mcp = texts(tail_of("mcp_tool"), "mcp")
    assert any(m.startswith("tools/call calc") for m in mcp)
    denied = tail_of("permission_deny")
    assert texts(denied, "permission")[0].startswith("Bash: deny")
    assert [line.status for line in denied if line.kind == "tool"][-1] == "error"
    dying = tail_of("cli_dies")
    assert "✗ Bash unfinished" in texts(dying, "tool")[-1]
    # The CLI died before its result: the price table's cost, said as show says it.
    assert dying[-1].status == "error" and dying[-1].text.endswith("$0.00048 (estimate)")


def test_the_totals_cost_is_the_clis_else_the_estimate_else_unknown() -> None:
    assert tail_of("hooks")[-1].text.endswith("tokens 321 in / 51 out, $0.0019")
    info = RecordingInfo(id="01TAIL", argv=[], started_ns=1_000_000_000_000)
    fold = TailFold(info)
    answer = {"type": "assistant", "message": {
        "id": "msg_1", "role": "assistant", "model": "no-such-model[/]",
        "content": [{"type": "text", "text": "hi"}],
        "usage": {"input_tokens": 3, "output_tokens": 4}}}
    event = Event(0, "out", 1_000_000, json.dumps(answer).encode(),
                  wall_ns=1_700_000_000_000_000_000)
    lines = fold.feed(event) + fold.close(info)
    assert lines[-1].text.endswith("tokens 3 in / 4 out, cost unknown")


def test_recorded_control_characters_are_shown_not_obeyed() -> None:
    assert printable("red \x1b[31mtext\x07\nnext") == "red \\x1b[31mtext\\x07 ⏎ next"
    event = Event(0, "err", 1_500_000_000, b"\x1b[2Jwiped", wall_ns=1_700_000_000_000_000_000)
    line = raw_line(event, 0)
    assert line.endswith("  1.500 err \\x1b[2Jwiped") and "\x1b" not in line


def test_tail_of_a_finished_session_and_without_one(store: Store, db_path: Path) -> None:
    rid = store.import_cassette(read_cassette(CASSETTES / "hooks.ndjson"), name="hooks")
    runner = CliRunner()
    done = runner.invoke(cli, ["tail", rid, "--db", str(db_path)])
    assert done.exit_code == 0, done.output
    assert "\x1b" not in done.stdout
    assert "PreToolUse round trip" in done.stdout
    assert done.stdout.splitlines()[-1] == f"── {rid} ok"
    raw = runner.invoke(cli, ["tail", rid, "--raw", "--db", str(db_path)])
    assert raw.exit_code == 0
    assert sum(1 for line in raw.stdout.splitlines() if " in {" in line) >= 3
    none = runner.invoke(cli, ["tail", "--db", str(db_path)])
    assert none.exit_code != 0
    assert "no session is running" in none.stderr and "Traceback" not in none.output


# -- live, against the real CLI --------------------------------------------------------


class Reader(threading.Thread):
    """Collects a process's output lines as they come."""

    def __init__(self, stream: Any) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.lines: list[tuple[float, str]] = []

    def run(self) -> None:
        for raw in iter(self.stream.readline, b""):
            self.lines.append((time.monotonic(), raw.decode("utf-8", "replace")))

    def wait_for(self, needle: str, count: int = 1, timeout: float = 30) -> float:
        """When the ``count``-th line containing ``needle`` arrived."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hits = [when for when, line in list(self.lines) if needle in line]
            if len(hits) >= count:
                return hits[count - 1]
            time.sleep(0.05)
        raise AssertionError(f"{needle!r} (x{count}) not seen in:\n{self.text()}")

    def text(self) -> str:
        return "".join(line for _, line in self.lines)


@pytest.mark.slow
def test_tail_follows_real_sessions_as_they_run(
    tmp_path: Path, fake_api: Any, real_claude: Path
) -> None:
    from claudetrace.testing.harness import make_home
    from tests.record_fixtures import claudetrace
    from tests.scenarios import run_scenario

    db = tmp_path / "live.db"
    shim = tmp_path / "claude"
    claudetrace("shim", str(shim), "--real", str(real_claude), "--db", str(db))
    claudetrace("db", "upgrade", "--db", str(db))  # tail reads it: it must exist
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("CLAUDETRACE_DB", None)
    cmd = [sys.executable, "-m", "claudetrace", "tail", "--follow", "--db", str(db)]
    raw_cmd = [*cmd, "--raw"]
    with (
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as tail,
        subprocess.Popen(raw_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as raw,
    ):
        readers = [Reader(stream) for stream in (tail.stdout, raw.stdout, tail.stderr, raw.stderr)]
        for reader in readers:
            reader.start()
        out, raw_out, *errs = readers
        try:
            for err in errs:  # both tails are waiting for a session
                err.wait_for("waiting for the next session", timeout=120)
            for count, name in enumerate(("permission_allow", "hooks"), 1):
                run_scenario(name, shim, fake_api, home=make_home(tmp_path / f"home-{name}"))
                out.wait_for(" session    ended ok", count, timeout=120)
            # Each session's own lines, before the tails are stopped: under load a
            # short session can be stored whole before a tail looks, and an
            # "ended ok" counted once failed the test on lines still to come
            # (with the whole output to see, should they never come).
            for needle in ("prompt     Create created.txt with touch.", "prompt     Echo hooked.",
                           "hook       PreToolUse round trip", "turn       turn 1 success after"):
                out.wait_for(needle, timeout=120)
            raw_out.wait_for("── ", 4, timeout=120)
        finally:
            for proc in (tail, raw):
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=20)
    text_all = out.text()
    assert "prompt     Create created.txt with touch." in text_all
    assert "permission Bash: allow after waiting" in text_all
    assert "prompt     Echo hooked." in text_all
    assert "hook       PreToolUse round trip" in text_all
    assert "tool       ✓ Bash ok after" in text_all
    assert "turn       turn 1 success after" in text_all and "$0.0019" in text_all
    assert "\x1b" not in text_all
    raw_text = raw_out.text()
    assert raw_text.count("── ") == 4  # two sessions, each opened and closed
    lines = raw_text.splitlines()
    assert any(" in {" in line and '"type": "user"' in line for line in lines)
    assert any(" out {" in line and '"type":"result"' in line for line in lines)


def test_follow_takes_up_an_imported_session_each_time_it_grows(
    tmp_path: Path, db_path: Path
) -> None:
    """A Claude Code transcript that `import --watch` brings up to date is a session
    that goes on after it ended: ``tail --follow`` shows each new turn, and only it."""
    import datetime as dt
    import json

    from tests.test_transcript_import import SID, assistant, session_lines, text, user, write

    def now_lines(*lines: dict[str, Any]) -> list[dict[str, Any]]:
        """Lines written now (a session that goes on is stamped by the clock)."""
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        return [{**line, "timestamp": stamp} if "timestamp" in line else line
                for line in lines]

    def grow(lines: list[dict[str, Any]]) -> None:
        with path.open("a") as handle:
            handle.writelines(json.dumps(line) + "\n" for line in lines)
        done = CliRunner().invoke(cli, ["import", str(path), "--db", str(db_path)])
        assert done.exit_code == 0 and "updated session" in done.stderr, done.output

    path = write(tmp_path / "projects" / "-home-dev-p" / f"{SID}.jsonl", session_lines()[:7])
    assert CliRunner().invoke(cli, ["import", str(path), "--db", str(db_path)]).exit_code == 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-m", "claudetrace", "tail", "--follow", "--db", str(db_path)]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as proc:
        out, err = Reader(proc.stdout), Reader(proc.stderr)
        out.start()
        err.start()
        try:
            err.wait_for("waiting for the next session", timeout=120)
            grow(now_lines(user("Thanks!", 1000), assistant("msg_3", text("Welcome."), 1100)))
            out.wait_for("── ", 2, timeout=120)  # the session, opened and closed
            grow(now_lines(user("Once more.", 2000), assistant("msg_4", text("Sure."), 2100)))
            out.wait_for("── ", 4, timeout=120)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
    shown = out.text()
    assert shown.count(", from line ") == 1, shown
    first, second = shown.split(", from line ")
    # The first time it is shown whole; the second, from where it was left.
    assert "List the files." in first and "Thanks!" in first, shown
    assert "Once more." in second and "List the files." not in second, shown
    assert "Thanks!" not in second and "turn 3 success" in second, shown  # figures go on
