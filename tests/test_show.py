"""``claudetrace show`` (and ``tail``): the same transcript as before it streamed,
no control sequence of a recording on the terminal, and a big recording read a
page at a time."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import tracemalloc
from contextlib import redirect_stdout
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner, Result

from claudetrace.cassette import read_cassette
from claudetrace.cli import cli
from claudetrace.display import visible
from claudetrace.formats.facts import facts
from claudetrace.model.events import Event
from claudetrace.store import Store
from claudetrace.terminal import Painter
from claudetrace.transcript import entries

FIXTURES = Path(__file__).parent / "fixtures"
#: Every fixture recording the transcript goldens were made from.
RECORDINGS = {
    **{p.stem: p for p in sorted((FIXTURES / "cassettes").glob("*.ndjson"))},
    **{p.name.split(".")[0]: p for p in sorted((FIXTURES / "samples").glob("*.ndjson"))},
    "session": Path(__file__).parent.parent / "claudetrace" / "demo_data"
    / "session.cassette.ndjson",
}


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def transcript(output: str) -> str:
    """What ``show`` printed after the summary (which names a fresh recording id)."""
    _head, blank, body = output.partition("\n\n")
    assert blank, output
    return body


@pytest.mark.parametrize("name", sorted(RECORDINGS))
def test_transcript_is_what_show_printed_before_it_streamed(
    name: str, store: Store, db_path: Path,
) -> None:
    # The goldens are the output of the rich-based ``show`` this one replaced
    # (with no line wrapping), for each fixture recording, with and without deltas.
    rid = store.import_cassette(read_cassette(RECORDINGS[name]))
    for mode, extra in (("plain", ()), ("deltas", ("--deltas",))):
        shown = invoke("show", rid, "--db", str(db_path), *extra)
        assert shown.exit_code == 0, shown.output
        golden = (FIXTURES / "show" / f"{name}.{mode}.txt").read_text(encoding="utf-8")
        assert transcript(shown.stdout) == golden, (name, mode)


#: Lines that would drive a terminal: clear the screen, set the clipboard (OSC 52),
#: retitle the window, a C1 CSI, a carriage return hiding what came before.
NASTY = [
    "\x1b[2J\x1b[Hcleared",
    "\x1b]52;c;ZXZpbA==\x07clipboard",
    "\x1b]0;title\x1b\\",
    "\x9b31mC1 CSI",
    "shown\rhidden",
]


def _nasty_cassette(path: Path) -> Path:
    records = [{"claudetrace": "cassette", "version": 1, "argv": ["claude", "\x1b[2J"],
                "exit_code": 0, "name": "evil\x1b]0;x\x07"}]
    seq = 0

    def add(direction: str, line: str) -> None:
        nonlocal seq
        records.append({"seq": seq, "t": seq / 10, "dir": direction, "line": line})
        seq += 1

    for text in NASTY:
        add("err", text)
        add("in", json.dumps({"type": "user", "message": {"role": "user", "content": text}}))
        add("out", json.dumps({"type": "assistant", "message": {
            "role": "assistant", "content": [{"type": "text", "text": text}]}}))
        add("out", json.dumps({"type": "stream_event", "event": {
            "type": "content_block_delta", "delta": {"type": "text_delta", "text": text}}}))
        add("out", json.dumps({"type": "system", "subtype": text, "x": text}))
        add("out", json.dumps({"type": "control_request", "request_id": text,
                               "request": {"subtype": text}}))
    for n, text in enumerate(NASTY[:2]):  # two models: ``show`` gives each a row
        add("out", json.dumps({"type": "assistant", "message": {
            "id": f"msg_{n}", "role": "assistant", "model": f"model-{n}{text}",
            "content": [{"type": "text", "text": "hi"}],
            "usage": {"input_tokens": 1, "output_tokens": 1}}}))
    add("out", "not json \x1b[2J")
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                    encoding="utf-8")
    return path


def _controls(text: str) -> set[str]:
    """The control characters in ``text`` but newlines."""
    return {c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F}


def test_show_and_tail_escape_what_would_drive_the_terminal(
    db_path: Path, tmp_path: Path,
) -> None:
    rid = invoke("import", str(_nasty_cassette(tmp_path / "evil.ndjson")),
                 "--db", str(db_path)).stdout.strip()
    for args in ((), ("--deltas",)):
        shown = invoke("show", rid, "--db", str(db_path), *args)
        assert shown.exit_code == 0, shown.output
        assert not _controls(shown.stdout), args
        assert "\\x1b]52;c;ZXZpbA==\\x07clipboard" in shown.stdout
        assert "\\x9b31mC1 CSI" in shown.stdout and "shown\\x0dhidden" in shown.stdout
        assert "evil\\x1b]0;x\\x07" in shown.stdout  # the summary too
        assert "model-1\\x1b]52;c;ZXZpbA==\\x07clipboard" in shown.stdout  # its rows' labels
    tailed = invoke("tail", rid, "--db", str(db_path))
    assert tailed.exit_code == 0, tailed.output
    assert not _controls(tailed.stdout) and "\\x1b[2J\\x1b[Hcleared" in tailed.stdout
    raw_tail = invoke("tail", rid, "--db", str(db_path), "--raw")
    assert raw_tail.exit_code == 0 and not _controls(raw_tail.stdout)


def test_raw_writes_exact_bytes_into_a_pipe_and_escapes_them_on_a_terminal(
    db_path: Path, tmp_path: Path,
) -> None:
    cassette = _nasty_cassette(tmp_path / "evil.ndjson")
    rid = invoke("import", str(cassette), "--db", str(db_path)).stdout.strip()
    piped = invoke("show", rid, "--db", str(db_path), "--raw")
    assert piped.exit_code == 0
    lines = transcript(piped.stdout_bytes.decode("utf-8")).removesuffix("\n").split("\n")
    events = read_cassette(cassette).events
    assert len(lines) == len(events)
    for line, event in zip(lines, events, strict=True):
        assert line.encode("utf-8") == (
            f"{event.seq:>6} {event.t:9.3f} {event.direction:>3} ".encode() + event.data)

    # On a terminal (a pseudo-terminal here) every control character is escaped.
    leader, follower = pty.openpty()
    env = {**os.environ, "NO_COLOR": "1"}
    with subprocess.Popen([sys.executable, "-m", "claudetrace", "show", rid, "--raw", "--db",
                           str(db_path)], stdout=follower, stderr=subprocess.PIPE,
                          env=env) as proc:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the writer is gone
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=60) == 0
    os.close(leader)
    seen = b"".join(chunks).decode("utf-8").replace("\r\n", "\n")
    assert not _controls(seen)
    assert "\\x1b]52;c;ZXZpbA==\\x07clipboard" in seen and "not json \\x1b[2J" in seen


def test_visible_and_painter() -> None:
    assert visible("a\x1b[31mb\tc\nd\x7f\x85é") == "a\\x1b[31mb\\x09c\\x0ad\\x7f\\x85é"
    assert Painter(False)("x", "bold red") == "x"
    assert Painter(True)("x", "bold red") == "\x1b[1;31mx\x1b[0m"
    assert Painter(True)("x", "") == "x"


def _big(path: Path, events: int) -> int:
    """A cassette of ``events`` lines of about 1 KB, every other one a delta; its size."""
    payload = "y" * 1000
    with path.open("w") as out:
        out.write('{"claudetrace": "cassette", "version": 1}\n')
        for seq in range(events):
            kind = "stream_event" if seq % 2 else "assistant"
            line = json.dumps({"type": kind, "message": {"role": "assistant", "content": [
                {"type": "text", "text": f"{seq} {payload}"}]}})
            out.write(json.dumps({"seq": seq, "t": seq / 1000, "dir": "out", "line": line})
                      + "\n")
    return path.stat().st_size


def _peak_of_show(db_path: Path, rid: str, args: tuple[str, ...]) -> int:
    """Peak of traced memory while ``show`` writes into /dev/null."""
    tracemalloc.start()
    try:
        # CliRunner would keep what is printed in memory: print into /dev/null.
        with open(os.devnull, "w", encoding="utf-8") as sink, redirect_stdout(sink):
            cli.main(["show", rid, "--db", str(db_path), *args], standalone_mode=False)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def big_recordings(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], int]:
    """A store holding a recording of 10,000 lines and one of 30,000 (their ids), and
    the bigger one's size as a cassette: stored once for the tests that only show them."""
    folder = tmp_path_factory.mktemp("big-show")
    db_path = folder / "claudetrace.db"
    _big(folder / "small.ndjson", 10_000)
    big = _big(folder / "big.ndjson", 30_000)
    ids = [invoke("import", str(folder / f"{name}.ndjson"), "--db", str(db_path)).stdout.strip()
           for name in ("small", "big")]
    return db_path, ids, big


@pytest.mark.parametrize("args", [(), ("--deltas",), ("--raw",)])
def test_show_reads_a_big_recording_a_page_at_a_time(
    args: tuple[str, ...], big_recordings: tuple[Path, list[str], int],
) -> None:
    # Three times the lines take no more memory: what is read is a page at a time.
    db_path, ids, big = big_recordings
    invoke("show", ids[0], "--db", str(db_path))  # imports and caches, outside the measurement
    peaks = [_peak_of_show(db_path, rid, args) for rid in ids]
    assert big > 30_000_000 and peaks[1] < peaks[0] * 1.3 and peaks[1] < big / 3, (big, peaks)


@pytest.mark.parametrize("text", [
    "plain",
    "two  spaces",
    "tab\tnewline\nspaces   ",
    "no-break\u00a0space, ideographic\u3000space, NEL\u0085",
    "été, 日本語",
    "x" * 2000,
    "y " * 700,
    "  " + "z" * 1300,
])
@pytest.mark.parametrize("width", [5, 40, 300])
def test_a_delta_is_its_json_on_one_line_cut_to_the_width(text: str, width: int) -> None:
    # The rule the quick paths keep: json.dumps of the line (non-ASCII as it is),
    # every run of white space one space, cut to the width with an ellipsis.
    line = {"type": "stream_event", "event": {"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": text}}, "n": [1, 2.5, None, True, {}]}
    event = Event(0, "out", 1_000, json.dumps(line, separators=(",", ":")).encode())
    whole = " ".join(json.dumps(line, ensure_ascii=False).split())
    expected = whole if len(whole) <= width else whole[: width - 1] + "…"
    assert [e.text for e in entries([event], width=width)] == []
    shown = entries([event], width=width, include_deltas=True)
    assert [(e.role, e.text) for e in shown] == [("system", f"stream_event: {expected}")]


def _rec(**given: object) -> SimpleNamespace:
    fields: dict[str, object] = {
        "id": "01FACTS", "name": None, "status": "ok", "status_reason": None,
        "started_ns": 1_700_000_000_000_000_000, "duration_ns": None, "ended_ns": None,
        "argv": ["claude", "--system-prompt", "", "--output-format", "stream-json"],
        "cwd": "/w", "host": "h", "pid": 1, "source": "proxy", "signal": None,
        "exit_code": None, "cli_session_id": None, "claude_code_version": None,
        "model": None, "permission_mode": None, "turns": 0, "num_turns": 0,
        "model_calls": 0, "tool_calls": 0, "tool_errors": 0, "input_tokens": 0,
        "cache_read_tokens": 0, "cache_creation_tokens": 0, "output_tokens": 0,
        "cost_usd": 0.0, "result_subtype": None, "models": {}, "event_count": 0,
        "byte_count": 0, "lost_bytes": 0, "tags": {}, "warnings": [], "extra": {},
    }
    rec = SimpleNamespace(**{**fields, **given})
    # The stored row's cost and its source (Recording.cost, Recording.cost_origin).
    rec.cost_origin = given.get("cost_origin", "cli")
    rec.cost = rec.cost_usd
    return rec


def test_facts_quote_the_command_and_say_what_a_running_session_has_not_reported() -> None:
    running = dict(facts(_rec(status="running")))
    assert running["command"] == "claude --system-prompt '' --output-format stream-json"
    assert running["exit"] == "running" and running["cost"] == "not yet reported"
    assert "None" not in "".join(running.values())
    ended = dict(facts(_rec(ended_ns=1, exit_code=0, result_subtype="success", cost_usd=0.5,
                            turns=1, num_turns=2)))
    assert ended["exit"] == "0" and ended["cost"] == "$0.500000"
    assert ended["turns / tools"].startswith(
        "1 turn (prompt to result; 2 API round trips by the CLI's num_turns)")
    assert dict(facts(_rec(status="incomplete", ended_ns=1)))["exit"] == "—"


def _running(store: Store, lines: int) -> str:
    """A recording of the plain session's first ``lines`` lines, still being
    recorded (a live pid on this host, a fresh heartbeat): its summary columns
    are not written yet."""
    import time

    from claudetrace.recording import RecordingInfo

    plain = read_cassette(FIXTURES / "cassettes" / "plain.ndjson")
    info = RecordingInfo.start(["claude", "--output-format", "stream-json"], name="running")
    info.pid = os.getpid()
    store.create_recording(info)
    store.write_batch(info.id, plain.events[:lines],
                      {"last_seen_ns": time.time_ns() + 3_600_000_000_000})
    return info.id


def test_a_running_session_s_summary_is_its_fold_in_show_the_report_and_the_page(
        store: Store, db_path: Path) -> None:
    # show and the report read the summary columns, written at the session's end:
    # "0 turns", "in 0 … out 0" above a transcript showing the call and its tokens.
    from claudetrace.formats.html import report_data
    from claudetrace.model import fold
    from claudetrace.ui.present import header

    rid = _running(store, 6)  # the prompt and the model's answer; no result yet
    rec = store.get(rid)
    assert rec.status == "running" and rec.turns == 0 and rec.input_tokens == 0
    session = fold(store.iter_events(rid))
    usage = session.usage
    assert len(session.turns) == 1 and usage.input > 0

    shown = invoke("show", rid, "--db", str(db_path))
    assert shown.exit_code == 0, shown.output
    summary = dict(line.strip().split("  ", 1) for line in
                   shown.stdout.split("\n\n", 1)[0].splitlines())
    assert summary["turns / tools"].startswith("1 turn (prompt to result")
    assert "1 model call" in summary["turns / tools"]
    assert summary["tokens"] == (
        f"in {usage.input} (+cache read {usage.cache_read}, cache write "
        f"{usage.cache_creation}), out {usage.output}")
    assert summary["events"].startswith(f"{session.event_count} lines")
    assert summary["model / mode"].startswith(f"{session.model} / ")

    report = dict(report_data(rec, store.iter_events(rid))["facts"])
    assert {k: report[k] for k in ("turns / tools", "tokens", "events", "model / mode")} == {
        k: summary[k] for k in ("turns / tools", "tokens", "events", "model / mode")}
    head = header(rec, session)  # the session page's header, from the same fold
    assert (head.turns, head.usage, head.lines) == (1, usage, session.event_count)


def test_a_running_session_s_cost_is_one_figure_in_one_wording_everywhere(
        store: Store, db_path: Path) -> None:
    # Its header, show and the report said "not yet reported" while its prompt's
    # line (and the span tree) showed the price table's estimate of the call made.
    from claudetrace.formats.html import report_data
    from claudetrace.model import fold
    from claudetrace.pricing import dollars
    from claudetrace.ui import outline, present
    from claudetrace.ui.sessions import session_row

    rid = _running(store, 6)  # the model answered; no result (no cost reported) yet
    rec = store.get(rid)
    session = fold(store.iter_events(rid))
    cost = session.cost()
    assert cost.source == "estimate" and cost.usd

    shown = invoke("show", rid, "--db", str(db_path))
    summary = dict(line.strip().split("  ", 1) for line in
                   shown.stdout.split("\n\n", 1)[0].splitlines())
    assert summary["cost"] == f"{dollars(cost.usd, digits=6)} (estimate)"
    report = report_data(rec, store.iter_events(rid))
    assert dict(report["facts"])["cost"] == summary["cost"]
    assert report["cost_text"] == summary["cost"]  # the tokens tab
    assert dict((k, v) for k, v, _ in report["th"])["cost"] == (
        f"{dollars(cost.usd)} (estimate, price table)")

    said = f"{dollars(cost.usd)} (estimate)"
    assert present.header(rec, session).cost == said
    tree = present.trace_tree(session, end_ns=None, status="running")
    (prompt,) = outline.prompt_figures(session, tree).values()
    assert prompt.cost == said
    row = session_row(present.live(rec, session))  # the list's row of it
    assert (row["cost"], row["cost source"]) == (dollars(cost.usd), "estimate")

    bare = _running(store, 2)  # its prompt sent, no call made: nothing to say yet
    rec = store.get(bare)
    session = fold(store.iter_events(bare))
    assert present.header(rec, session).cost == "not yet reported"
    assert session_row(present.live(rec, session))["cost"] == "not yet"
    shown = invoke("show", bare, "--db", str(db_path))
    assert "not yet reported" in shown.stdout.split("\n\n", 1)[0]
