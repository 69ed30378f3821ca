"""A new user's first commands, on a real terminal, over recordings that attack it.

The README's and docs' terminal commands (``import``, ``import --watch``,
``sessions``, ``show``, ``tail``, ``otel --tree``, ``export``, ``metrics dump``,
``replay``, a mistyped session) run as a person runs them: in a subprocess whose
stdout and stderr are a pseudo-terminal with ``TERM`` set, so Rich and the
painter take their terminal path (colours, widths).  The recordings carry
hostile text in every field a command prints: the model name, the recording's
name and tags, the cwd, tool names, prompts and answers, stderr, a transcript's
session id and file name, a host's line that diverges from a cassette.  The
payload is a window-title change (OSC 0), a clipboard write (OSC 52), CSI
sequences that clear the screen and ask the terminal to answer (``ESC [6n``), a
device control string, 8-bit C1 controls, bidi overrides, Rich markup
(``[/]``, ``[link=…]``, ``[bold]``) and a huge line.

Each command must exit as it should, let no ESC sequence, C1 control or bidi
control of the recording reach the terminal (the only escape sequences left are
the colours and bar drawing claudetrace itself writes), and still show the text,
escaped (``\\x1b]0;…``) and readable.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from claudetrace.display import visible
from tests.terminal_rig import read_terminal

TITLE = "\x1b]0;PWNED\x07"
CLIPBOARD = "\x1b]52;c;cHduZWQ=\x07"
CSI = "\x1b[2J\x1b[6n"
DCS = "\x1bP1$qm\x1b\\"
C1 = "\x9d0;c1\x9c\x9b2J"
BIDI = "\u202eevil\u202c\u2066x\u2069\u200f\u061c"
MARKUP = "[/][link=https://x]click[/link][bold]B"
#: Everything at once (answers, prompts, stderr).
PAYLOAD = TITLE + CLIPBOARD + CSI + DCS + C1 + BIDI + MARKUP
#: Short pieces for the fields a table shows in a narrow cell.
NAME = "n" + MARKUP + TITLE
MODEL = "m[/]" + BIDI[:5] + "\x1b[2J"
TOOL = "Bash" + TITLE + "[/]"
CWD = "/w/" + DCS + BIDI
SID = "sid-" + CLIPBOARD + "\u202e"
HUGE = "H" * 200_000 + TITLE

#: What claudetrace itself writes on a terminal: colours (SGR), and the progress
#: bar's cursor hiding, line erasing and moving up.
OURS = re.compile(r"\x1b\[[0-9;]*m|\x1b\[\?25[lh]|\x1b\[2K|\x1b\[[0-9]*A|\r")
#: What must never come from a recording: ESC, C0 but newline, C1, bidi controls.
FORBIDDEN = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"

pytestmark = pytest.mark.usefixtures("ct_env")


# -- the terminal ------------------------------------------------------------------------


def on_terminal(
    args: list[str], *, db: Path, stdin: bytes | None = None, until: bytes | None = None,
    cols: int = 250, timeout: float = 60.0,
) -> tuple[int, str]:
    """Run ``claudetrace ARGS`` with stdout and stderr on one pseudo-terminal of
    ``cols`` columns; its exit status and what the terminal received.

    ``stdin`` is written to a pipe on its stdin (else it has none); with
    ``until`` the command is stopped by Ctrl-C (SIGINT) once the terminal
    showed those bytes, as a person stops ``--watch``.
    """
    env = {k: v for k, v in os.environ.items()
           if k not in ("NO_COLOR", "CLAUDETRACE_PROGRESS", "COLUMNS", "LINES")}
    env.update(PYTHONPATH=os.pathsep.join(sys.path), TERM="xterm-256color",
               CLAUDETRACE_DB=str(db))
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    try:
        with subprocess.Popen(
            [sys.executable, "-m", "claudetrace", *args], stdout=follower, stderr=follower,
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE, env=env,
            start_new_session=True,
        ) as proc:
            os.close(follower)
            follower = -1
            if stdin is not None:
                assert proc.stdin is not None
                proc.stdin.write(stdin)
                proc.stdin.close()
            try:
                seen = read_terminal(leader, proc, until=until, timeout=timeout)
            except TimeoutError as exc:
                pytest.fail(f"claudetrace {args[0]} did not end: {exc}")
            code = proc.wait(timeout=30)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    return code, seen.decode("utf-8")


def assert_safe(shown: str, *readable: str) -> None:
    """Nothing of a recording drives the terminal, and its text is there to read."""
    left = OURS.sub("", shown)
    bad = sorted({f"U+{ord(c):04X}" for c in FORBIDDEN.findall(left)})
    assert not bad, f"{bad} reached the terminal: {left[:3000]!r}"
    plain = OURS.sub("", shown)
    for text in readable:
        assert text in plain, f"{text!r} not shown in {plain[:3000]!r}"


# -- hostile recordings ------------------------------------------------------------------


def _hostile_cassette(path: Path) -> Path:
    """A session whose every printed field carries the payload: cwd, model, a tool
    (its name and command), prompt, answer, stderr, a huge answer."""
    header = {"claudetrace": "cassette", "version": 1, "exit_code": 0, "cwd": CWD,
              "argv": ["claude", "--system-prompt", "", "--model", MODEL]}
    lines: list[tuple[str, dict[str, Any] | str]] = [
        ("in", {"type": "user", "message": {"role": "user", "content": "ask " + PAYLOAD}}),
        ("out", {"type": "system", "subtype": "init", "model": MODEL, "cwd": CWD,
                 "session_id": "s-1", "permissionMode": "default" + TITLE,
                 "claude_code_version": "2.1.330" + BIDI}),
        ("out", {"type": "assistant", "session_id": "s-1", "message": {
            "id": "msg_1", "role": "assistant", "model": MODEL,
            "usage": {"input_tokens": 10, "output_tokens": 5},
            "content": [{"type": "text", "text": "answer " + PAYLOAD},
                        {"type": "tool_use", "id": "toolu_1", "name": TOOL,
                         "input": {"command": "echo " + PAYLOAD}}]}}),
        ("err", "stderr " + PAYLOAD),
        ("out", {"type": "user", "session_id": "s-1", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
             "content": "tool said " + PAYLOAD}]}}),
        ("out", {"type": "assistant", "session_id": "s-1", "message": {
            "id": "msg_2", "role": "assistant", "model": MODEL,
            "usage": {"input_tokens": 12, "output_tokens": 7},
            "content": [{"type": "text", "text": HUGE}]}}),
        ("out", {"type": "result", "subtype": "success", "is_error": False, "num_turns": 2,
                 "session_id": "s-1", "result": "done " + PAYLOAD, "total_cost_usd": 0.01,
                 "usage": {"input_tokens": 22, "output_tokens": 12}}),
    ]
    records = [header]
    for seq, (direction, line) in enumerate(lines):
        text = line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)
        records.append({"seq": seq, "t": seq / 10, "dir": direction, "line": text})
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                    encoding="utf-8")
    return path


def _hostile_transcript(folder: Path) -> Path:
    """A Claude Code transcript whose session id and file name carry the payload."""
    common = {"sessionId": SID, "cwd": CWD, "version": "2.1.330", "isSidechain": False}
    entries = [
        {"type": "user", "uuid": "u1", "timestamp": "2026-11-24T10:00:00.000Z",
         "message": {"role": "user", "content": "hi " + PAYLOAD}, **common},
        {"type": "assistant", "uuid": "a1", "timestamp": "2026-11-24T10:00:01.000Z",
         "message": {"id": "msg_t", "role": "assistant", "model": MODEL,
                     "content": [{"type": "text", "text": "hello " + PAYLOAD}],
                     "usage": {"input_tokens": 3, "output_tokens": 2}}, **common},
    ]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{SID}.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    return path


@pytest.fixture
def hostile(db_path: Path, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A store holding the hostile cassette, imported as the README says; (db, id)."""
    cassette = _hostile_cassette(tmp_path / f"evil{TITLE}.ndjson")
    code, shown = on_terminal(["import", str(cassette), "--name", NAME,
                               "--tag", f"team={CLIPBOARD}"], db=db_path)
    assert code == 0, shown
    assert_safe(shown)
    rid = OURS.sub("", shown).strip().splitlines()[-1]
    assert re.fullmatch(r"[0-9A-Z]{26}", rid), shown
    yield db_path, rid


# -- the journey -------------------------------------------------------------------------


def test_claudetrace_alone_shows_its_help(db_path: Path) -> None:
    code, shown = on_terminal([], db=db_path)
    assert code == 2 and "\\x0a" not in shown
    assert_safe(shown, "Usage: claudetrace [OPTIONS] COMMAND", "Commands:", "sessions")


def test_sessions_lists_hostile_recordings_as_text(hostile: tuple[Path, str]) -> None:
    db, rid = hostile
    code, shown = on_terminal(["sessions"], db=db)
    assert code == 0, shown
    assert "Traceback" not in shown and "MarkupError" not in shown
    # Rich markup prints as itself, escapes as \x.., bidi controls as \u....
    assert_safe(shown, rid, visible(NAME), visible(MODEL))
    assert "\x1b[" in shown  # the terminal path: Rich coloured the status


def test_show_summary_and_transcript(hostile: tuple[Path, str]) -> None:
    db, rid = hostile
    for args in (["show", "latest"], ["show", rid, "--deltas"], ["show", rid, "--raw"]):
        code, shown = on_terminal(args, db=db)
        assert code == 0, shown
        assert_safe(shown, visible(TITLE), visible(CLIPBOARD), visible(BIDI))
        assert len(shown) < 150_000 or args[-1] == "--raw"  # the huge answer is cut
    code, shown = on_terminal(["show", rid], db=db)
    assert_safe(shown, visible(NAME), visible(MODEL), visible(CWD), "team=" + visible(CLIPBOARD),
                "claude --system-prompt '' --model", "answer " + visible(PAYLOAD)[:120])


def test_tail_and_tail_raw(hostile: tuple[Path, str]) -> None:
    db, rid = hostile
    code, shown = on_terminal(["tail", rid], db=db)
    assert code == 0, shown
    assert_safe(shown, "▶ " + visible(TOOL), "✗ " + visible(TOOL), visible(NAME),
                visible(MODEL) + " · ")
    code, shown = on_terminal(["tail", rid, "--raw"], db=db)
    assert code == 0, shown
    assert_safe(shown, visible(PAYLOAD)[:100])


def test_otel_tree_export_metrics_and_a_mistyped_session(
    hostile: tuple[Path, str], tmp_path: Path,
) -> None:
    db, rid = hostile
    code, shown = on_terminal(["otel", rid, "--tree"], db=db)
    assert code == 0, shown
    assert_safe(shown, f"chat {visible(MODEL)}", f"execute_tool {visible(TOOL)}")
    out = tmp_path / f"report{TITLE}\u202e.html"
    code, shown = on_terminal(["export", rid, "--format", "html", "-o", str(out)], db=db)
    assert code == 0 and out.is_file(), shown
    assert_safe(shown, visible(str(out)))
    # export with no -o writes the cassette on the terminal: escaped there
    # (a pipe or a file gets the exact lines, as test_cli_browse checks).
    code, shown = on_terminal(["export", rid], db=db)
    assert code == 0, shown
    # (JSON escapes ESC itself; C1 and bidi controls it leaves as they are.)
    assert_safe(shown, '"claudetrace": "cassette"', visible(C1))
    code, shown = on_terminal(["metrics", "dump"], db=db)
    assert code == 0, shown
    assert_safe(shown, visible(MODEL)[:6])
    code, shown = on_terminal(["show", "x" + TITLE], db=db)
    assert code != 0
    assert_safe(shown, "claudetrace: no recording matches 'x" + visible(TITLE))
    assert len(OURS.sub("", shown).strip().splitlines()) == 1
    code, shown = on_terminal(["show", "--" + TITLE], db=db)  # click's usage error
    assert code == 2
    assert_safe(shown, f"No such option '--{visible(TITLE)}'")


def test_import_and_import_watch_of_a_hostile_transcript(db_path: Path, tmp_path: Path) -> None:
    folder = tmp_path / ("proj" + BIDI)
    path = _hostile_transcript(folder)
    code, shown = on_terminal(["import", str(folder)], db=db_path)
    assert code == 0, shown
    assert_safe(shown, f"{visible(str(path))}: imported session {visible(SID)}")
    code, shown = on_terminal(["sessions"], db=db_path)
    assert code == 0 and "Traceback" not in shown
    assert_safe(shown, visible(MODEL))

    # --watch: the session appears while it watches (written a moment after it starts).
    other = tmp_path / ("watched" + TITLE)
    other.mkdir()
    later = threading.Timer(2.0, _hostile_transcript, (other,))
    later.start()
    try:
        code, shown = on_terminal(["import", "--watch", "--interval", "0.2", str(other)],
                                  db=tmp_path / "watch.db", until=b"imported session")
    finally:
        later.cancel()
    assert code == 0, shown
    assert_safe(shown, f"watching {visible(str(other))} (Ctrl-C to stop)",
                f"imported session {visible(SID)}")


def test_replay_divergence_report_on_the_terminal(tmp_path: Path, db_path: Path) -> None:
    # The host sends a line the cassette never recorded: the report quotes it
    # and the recorded lines, escaped; the --report file keeps the exact JSON.
    cassette = _hostile_cassette(tmp_path / "c.ndjson")
    report = tmp_path / "report.json"
    host = json.dumps({"type": "user", "message": {"role": "user", "content": "other " + PAYLOAD}})
    code, shown = on_terminal(
        ["replay", str(cassette), "--report", str(report), "--", "--system-prompt", "",
         "--model", MODEL], db=db_path, stdin=host.encode() + b"\n")
    assert code != 0, shown
    # The recorded lines it would have gone on with include the raw stderr line.
    assert_safe(shown, "claudetrace replay: ", "host sent: ", "stderr " + visible(TITLE))
    actual = json.loads(json.loads(report.read_text(encoding="utf-8"))["actual"])
    assert actual["message"]["content"] == "other " + PAYLOAD  # the file: exact

    # Run by hand on a terminal with the recorded input, the fake CLI's replayed
    # output (raw stderr among it) is escaped there too.
    first = json.loads(cassette.read_text(encoding="utf-8").splitlines()[1])["line"]
    code, shown = on_terminal(["replay", str(cassette), "--", "--system-prompt", "", "--model",
                               MODEL], db=db_path, stdin=first.encode() + b"\n")
    assert code == 0, shown
    assert_safe(shown, "stderr " + visible(PAYLOAD)[:60], '"type": "result"')
