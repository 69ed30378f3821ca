"""`sessions`, `show`, `export`, `import`, `db`: through click's CliRunner and a subprocess."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from click.testing import CliRunner, Result

from claudetrace.cli import cli
from claudetrace.ids import recording_id_ns

TRANSCRIPT = (Path(__file__).parent / "fixtures" / "transcripts" / "projects" / "-home-dev-shop"
              / "7c1e2a90-3b4d-4e5f-8a6b-1c2d3e4f5a60.jsonl")
SAMPLES = sorted((Path(__file__).parent / "fixtures" / "samples").glob("*.cassette.ndjson"))

pytestmark = pytest.mark.usefixtures("ct_env")


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def one_line_error(result: Result, *needles: str) -> None:
    """A user mistake: non-zero exit, one line on stderr, no traceback."""
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("claudetrace: ")
    assert "Traceback" not in result.output + result.stderr
    for needle in needles:
        assert needle in lines[0]


@pytest.mark.parametrize(("args", "name"), [
    (["import", ""], "PATH"), (["import", ".", ""], "PATH"),
    (["usage", "--import", ""], "--import"),
    (["sessions", "--db", ""], "--db"), (["export", "latest", "-o", ""], "--output"),
    (["shim", ""], "OUT"), (["replay", "x", "--report", ""], "--report"),
])
def test_an_empty_path_is_refused_in_one_line(
    args: list[str], name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Path("") is the current folder: `import ""` imported it, recursively.
    monkeypatch.chdir(tmp_path)
    result = invoke(*args)
    one_line_error(result, f"{name}: empty path")
    assert result.exit_code == 2


@pytest.mark.parametrize("args", [
    ["sessions", "--since", "bogus"], ["otel", "--since", "bogus"],
    ["usage", "--since", "bogus"], ["usage", "weekly", "--until", "2024-13-45"],
])
def test_a_bad_since_or_until_is_one_line_and_exit_2_in_every_command(
    args: list[str], db_path: Path
) -> None:
    # sessions said it in one line with exit 1, usage in click's three with exit 2.
    invoke("import", str(SAMPLES[0]), "--db", str(db_path))
    result = invoke(*args, "--db", str(db_path))
    one_line_error(result, f"{args[-2]} {args[-1]!r} is ")
    assert result.exit_code == 2


@pytest.fixture
def imported(db_path: Path) -> list[str]:
    ids = []
    for sample in SAMPLES:
        result = invoke("import", str(sample), "--db", str(db_path), "--tag", "suite=cli")
        assert result.exit_code == 0, result.stderr
        ids.append(result.stdout.strip())
    return ids


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs Linux /proc")
def test_export_to_a_symlink_to_its_own_stdout_writes_where_stdout_goes(
    db_path: Path, imported: list[str], tmp_path: Path
) -> None:
    # export -o /dev/stdout > out.txt: /dev/stdout is a symlink to /proc/self/fd/1,
    # which leads to out.txt.  The rename went over the symlink (as root, over
    # /dev/stdout itself) and out.txt stayed empty.
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    out = tmp_path / "out.txt"
    with out.open("wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "claudetrace", "export", imported[0], "--db", str(db_path),
             "-o", str(link)],
            stdout=stdout, stderr=subprocess.PIPE, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and link.readlink() == Path("/proc/self/fd/1")
    original = SAMPLES[0].read_text(encoding="utf-8").splitlines()
    assert out.read_text(encoding="utf-8").splitlines()[1:] == original[1:]


def test_import_prints_the_id_and_export_reproduces_the_events(
    db_path: Path, imported: list[str], tmp_path: Path
) -> None:
    for rid, sample in zip(imported, SAMPLES, strict=True):
        out = tmp_path / f"{rid}.ndjson"
        result = invoke("export", rid, "--db", str(db_path), "-o", str(out))
        assert result.exit_code == 0
        assert f"to {out}" in result.stderr
        original = sample.read_text(encoding="utf-8").splitlines()
        assert out.read_text(encoding="utf-8").splitlines()[1:] == original[1:]
        to_stdout = invoke("export", rid, "--db", str(db_path))
        assert to_stdout.stdout.splitlines()[1:] == original[1:]
        header = json.loads(to_stdout.stdout.splitlines()[0])
        assert header["recording_id"] == rid and header["tags"] == {"suite": "cli"}


def test_sessions_table_and_json(db_path: Path, imported: list[str]) -> None:
    table = invoke("sessions", "--db", str(db_path))
    assert table.exit_code == 0
    for rid in imported:
        assert rid in table.stdout
    assert "ok" in table.stdout
    listed = json.loads(invoke("sessions", "--db", str(db_path), "--json").stdout)
    assert {r["id"] for r in listed} == set(imported)
    assert all(r["status"] == "ok" and r["tags"] == {"suite": "cli"} for r in listed)
    assert {r["claude_code_version"] for r in listed} == {"2.1.330"}
    assert (
        len(json.loads(invoke("sessions", "--db", str(db_path), "--json", "-n", "1").stdout)) == 1
    )


def test_sessions_on_an_empty_database(db_path: Path) -> None:
    assert invoke("db", "upgrade", "--db", str(db_path)).exit_code == 0
    result = invoke("sessions", "--db", str(db_path))
    assert result.exit_code == 0 and "No recordings yet" in result.stdout
    assert json.loads(invoke("sessions", "--db", str(db_path), "--json").stdout) == []


def test_show_summary_transcript_and_raw(db_path: Path, imported: list[str]) -> None:
    rid = imported[1]
    result = invoke("show", rid[:12], "--db", str(db_path))
    assert result.exit_code == 0
    assert rid in result.stdout and "2.1.330" in result.stdout and "suite=cli" in result.stdout
    assert "result" in result.stdout
    raw = invoke("show", rid, "--db", str(db_path), "--raw")
    assert raw.exit_code == 0
    assert '"type":"system"' in raw.stdout.replace(" ", "")
    latest = invoke("show", "latest", "--db", str(db_path))
    assert latest.exit_code == 0


def test_db_upgrade_and_url(db_path: Path) -> None:
    first = invoke("db", "upgrade", "--db", str(db_path))
    assert first.exit_code == 0 and "upgraded from empty" in first.stdout
    again = invoke("db", "upgrade", "--db", str(db_path))
    assert again.exit_code == 0 and "already at revision" in again.stdout
    assert invoke("db", "url", "--db", str(db_path)).stdout.strip() == f"sqlite:///{db_path}"


def test_db_upgrade_says_how_many_recordings_an_older_version_imported(
    db_path: Path, tmp_path: Path,
) -> None:
    # The store keeps the events an import made, not the transcript: a recording
    # imported by an older reading keeps its figures until its files come again.
    import shutil

    projects = tmp_path / "projects"
    shutil.copytree(Path(__file__).parent / "fixtures" / "transcripts" / "projects"
                    / "-home-dev-mid", projects / "-home-dev-mid")
    assert invoke("import", str(projects), "--db", str(db_path)).exit_code == 0
    fresh = invoke("db", "upgrade", "--db", str(db_path))
    assert fresh.exit_code == 0 and "older" not in fresh.stdout + fresh.stderr
    with sqlite3.connect(db_path) as conn:  # as an import before the reading was kept
        conn.execute("UPDATE recordings SET extra = json_set(json_remove(extra, '$.reading'),"
                     " '$.peeked_reading', '4', '$.fingerprint', 'read otherwise')")
    older = invoke("db", "upgrade", "--db", str(db_path))
    assert older.exit_code == 0
    assert "1 recording imported by an older claudetrace: status, tokens and cost as it " \
        "read the files; `claudetrace import` the files again" in older.stdout + older.stderr
    assert "1 updated" in invoke("import", str(projects), "--db", str(db_path)).stderr
    again = invoke("db", "upgrade", "--db", str(db_path))
    assert "older" not in again.stdout + again.stderr


def test_db_comes_from_the_environment(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDETRACE_DB", str(db_path))
    result = invoke("import", str(SAMPLES[0]))
    assert result.exit_code == 0
    assert db_path.exists()
    assert result.stdout.strip() in invoke("sessions").stdout


def test_unknown_and_ambiguous_sessions(db_path: Path, imported: list[str]) -> None:
    one_line_error(invoke("show", "NOPE", "--db", str(db_path)), "no recording matches 'NOPE'")
    one_line_error(invoke("export", "NOPE", "--db", str(db_path)), "NOPE")
    one_line_error(
        invoke("show", imported[0][:2], "--db", str(db_path)), "matches several", imported[0]
    )


def test_malformed_and_unreadable_cassettes(db_path: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing.ndjson"
    one_line_error(invoke("import", str(missing), "--db", str(db_path)), "cannot read cassette")
    bad_header = tmp_path / "header.ndjson"
    bad_header.write_text('{"hello": 1}\n')
    one_line_error(
        invoke("import", str(bad_header), "--db", str(db_path)), "not a claudetrace cassette"
    )
    bad_line = tmp_path / "line.ndjson"
    bad_line.write_text(
        '{"claudetrace": "cassette", "version": 1}\n'
        '{"seq": 0, "t": 0, "dir": "in", "line": "ok"}\n'
        '{"seq": 1, "t": 0, "dir": "sideways", "line": "x"}\n'
    )
    one_line_error(invoke("import", str(bad_line), "--db", str(db_path)), "line.ndjson:3", '"dir"')
    binary = tmp_path / "binary.ndjson"
    binary.write_bytes(b'{"claudetrace": "cassette", "version": 1}\n\xff\xfe\n')
    one_line_error(invoke("import", str(binary), "--db", str(db_path)), "binary.ndjson:2", "UTF-8")
    # Nothing was stored from the bad files: a malformed line must not leave half a recording.
    assert json.loads(invoke("sessions", "--db", str(db_path), "--json").stdout) == []


#: 2023-11-14 22:13:20 UTC.
STARTED_NS = 1_700_000_000_000_000_000


def _big_cassette(path: Path, events: int, *, bad_at: int | None = None) -> int:
    """A cassette of ``events`` 1 KB lines (the one at ``bad_at`` malformed); its size.

    Its header says when it started: without a time anywhere, an import reads the
    whole file for one before it stores a line (10 s of a 200,000-line import)."""
    payload = "x" * 1000
    with path.open("w") as out:
        header = {"claudetrace": "cassette", "version": 1, "started_ns": STARTED_NS}
        out.write(json.dumps(header) + "\n")
        for seq in range(events):
            direction = "sideways" if seq == bad_at else "out"
            out.write(json.dumps({"seq": seq, "t": seq / 1000, "dir": direction,
                                  "line": f'{{"type":"x","p":"{payload}"}}'}) + "\n")
    return path.stat().st_size


def test_a_malformed_line_after_stored_batches_leaves_no_recording(
    db_path: Path, tmp_path: Path,
) -> None:
    cassette = tmp_path / "late.ndjson"
    _big_cassette(cassette, 5000, bad_at=4500)  # two batches of 2000 stored before it
    one_line_error(invoke("import", str(cassette), "--db", str(db_path)), "late.ndjson:4502",
                   '"dir"')
    assert json.loads(invoke("sessions", "--db", str(db_path), "--json").stdout) == []


def _counts(db_path: Path) -> tuple[int, int]:
    with sqlite3.connect(db_path) as conn:
        found = (conn.execute("SELECT count(*) FROM recordings").fetchone()[0],
                 conn.execute("SELECT count(*) FROM events").fetchone()[0])
    conn.close()
    return found


@pytest.fixture(scope="module")
def long_cassette(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cassette of 200,000 lines (200 MB), long enough to import that an import of it
    can be stopped midway: written once for the tests that only read it."""
    path = tmp_path_factory.mktemp("long") / "big.ndjson"
    _big_cassette(path, 200_000)
    return path


@pytest.mark.parametrize("again_after", [0.05, 0.15, 0.3])
def test_ctrl_c_pressed_twice_during_an_import_leaves_no_recording(
    db_path: Path, long_cassette: Path, again_after: float,
) -> None:
    """The first Ctrl-C stops the import, which takes what it stored back out; a
    second one while it does so (the store opening, the delete) is held until
    that is done: it left half a recording behind (found by a review)."""
    assert invoke("import", str(SAMPLES[0]), "--db", str(db_path)).exit_code == 0
    before = _counts(db_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "claudetrace", "import", str(long_cassette), "--db", str(db_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 240  # a hang's guard: 200k lines take 60 s+ at load 30
        while _counts(db_path)[1] <= before[1]:  # a batch of it is stored
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        time.sleep(again_after)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    assert _counts(db_path) == before, err


def _interrupted(cmd: list[str], ready: Any) -> tuple[int, str, str]:
    """Run ``cmd`` in a process group of its own, Ctrl-C it as a terminal does (the
    group: an import's converting process too) once ``ready(proc)`` is true; its
    status, stdout and stderr."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not ready(proc):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.002)
        os.killpg(proc.pid, signal.SIGINT)
        # Read on through ``ready``'s reader: communicate() reads the pipe past
        # what that reader holds already (lines said at once went missing).
        errs: list[str] = []
        reader = threading.Thread(target=lambda: errs.append(proc.stderr.read()))  # type: ignore[union-attr]
        reader.start()
        out = proc.stdout.read()  # type: ignore[union-attr]
        reader.join(60)
        proc.wait(60)
        err = "".join(errs)
        for pipe in (proc.stdout, proc.stderr):
            pipe.close()  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err


def test_ctrl_c_during_a_folders_import_ends_130_keeping_whole_sessions(
    db_path: Path, tmp_path: Path,
) -> None:
    """Ctrl-C ended an import with click's "Aborted!" and status 1; the converting
    process printed a traceback of its own.  Now: one line, 130, and each session
    stored whole (a batch's transaction, each in a savepoint) or not at all."""
    from claudetrace.bench.transcripts import write_tree
    from claudetrace.formats.imports import BATCH_UNITS

    projects = tmp_path / "projects"
    # More sessions than a batch stores in one transaction (BATCH_UNITS): the
    # first said are committed while later ones are still being converted.
    sessions = 3 * BATCH_UNITS
    write_tree(projects, sessions=sessions, size=30 << 20, agents=2)
    printed: list[str] = []

    def two_stored(proc: subprocess.Popen[str]) -> bool:
        printed.append(proc.stdout.readline())  # type: ignore[union-attr]
        return len(printed) >= 2

    status, out, err = _interrupted(
        [sys.executable, "-m", "claudetrace", "import", "--db", str(db_path), str(projects)],
        two_stored)
    assert status == 130, err
    assert err.splitlines()[-1] == "claudetrace: interrupted", err
    assert "Traceback" not in err and "Aborted" not in err, err
    said = [line.strip() for line in printed + out.splitlines() if line.strip()]
    stored = json.loads(invoke("sessions", "--db", str(db_path), "--json", "-n", "0").stdout)
    assert 2 <= len(stored) < sessions
    assert sorted(s["id"] for s in stored) == sorted(said)
    # What was stored is what an import left alone stores of those sessions.
    whole = tmp_path / "whole.db"
    assert invoke("import", "--db", str(whole), str(projects)).exit_code == 0
    expected = {s["id"]: s for s in json.loads(
        invoke("sessions", "--db", str(whole), "--json", "-n", "0").stdout)}
    for got in stored:
        assert {k: got[k] for k in ("events", "turns", "status")} == {
            k: expected[got["id"]][k] for k in ("events", "turns", "status")}


def test_ctrl_c_during_an_export_leaves_no_file(db_path: Path, tmp_path: Path) -> None:
    cassette = tmp_path / "big.ndjson"
    _big_cassette(cassette, 100_000)
    assert invoke("import", str(cassette), "--db", str(db_path)).exit_code == 0
    target = tmp_path / "out" / "copy.ndjson"
    target.parent.mkdir()

    def writing(_proc: subprocess.Popen[str]) -> bool:
        return any(target.parent.iterdir())  # the file beside its place, being written

    status, _out, err = _interrupted(
        [sys.executable, "-m", "claudetrace", "export", "latest", "--db", str(db_path),
         "-o", str(target)], writing)
    assert (status, err) == (130, "claudetrace: interrupted\n")
    assert list(target.parent.iterdir()) == []


def test_import_takes_a_batchs_memory_not_the_files(db_path: Path, tmp_path: Path) -> None:
    small, big = tmp_path / "small.ndjson", tmp_path / "big.ndjson"
    _big_cassette(small, 10_000)
    size = _big_cassette(big, 40_000)
    # Once first, outside the measurement: the schema, and what the first import
    # of a process loads and keeps (modules, caches), megabytes that depend on
    # the versions installed, not on the file.  Another cassette (a byte more):
    # the same one again would be unchanged, not imported.
    warm = tmp_path / "warm.ndjson"
    warm.write_bytes(small.read_bytes() + b"\n")
    assert invoke("import", str(warm), "--db", str(db_path)).exit_code == 0
    peaks = []
    for cassette in (small, big):
        tracemalloc.start()
        try:
            result = invoke("import", str(cassette), "--db", str(db_path))
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert result.exit_code == 0, result.stderr
    # Four times the events, about the same memory: a few batches, not the file.
    assert size > 40_000_000 and peaks[1] < peaks[0] + size / 10, (size, peaks)
    shown = json.loads(invoke("sessions", "--db", str(db_path), "--json").stdout)
    assert sorted(s["events"] for s in shown) == [10_000, 10_000, 40_000]


def test_bad_database_url_and_missing_driver(tmp_path: Path) -> None:
    one_line_error(invoke("sessions", "--db", "nosuchdialect://x"), "unsupported database URL")
    one_line_error(invoke("sessions", "--db", "mysql://u@127.0.0.1/db"), "unsupported database URL")
    one_line_error(invoke("import", str(SAMPLES[0]), "--db", "postgresql+nosuch://u@127.0.0.1/d"))
    blocker = tmp_path / "file"
    blocker.write_text("")
    one_line_error(
        invoke("sessions", "--db", str(blocker / "sub" / "x.db")), "no database at"
    )
    # A folder is no database; the root folder has no name to put captures beside.
    one_line_error(invoke("sessions", "--db", str(tmp_path)), "not a regular file (a folder)")
    one_line_error(invoke("sessions", "--db", "/"), "not a regular file (a folder)")


def test_an_import_that_fails_before_reading_leaves_no_file_open(tmp_path: Path) -> None:
    # The cassette is opened (its header read) before the database is: when that
    # fails, the file must still be closed (pytest fails a test on the warning).
    one_line_error(invoke("import", str(SAMPLES[0]), "--db", "nosuchdialect://x"),
                   "unsupported database URL")
    gc.collect()


def test_a_negative_limit_is_a_usage_error(db_path: Path) -> None:
    # SQLite reads LIMIT -1 as no limit, PostgreSQL refuses it: neither is asked.
    result = invoke("sessions", "--db", str(db_path), "-n", "-1")
    assert result.exit_code == 2 and "-1 is not in the range x>=0" in result.stderr


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_a_limit_past_what_a_database_integer_holds_is_all(
    db_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    # sessions -n 99999999999999999999 was an OverflowError (SQLite INTEGER).
    from tests.test_store_postgres import fresh_database

    db = str(db_path) if engine == "sqlite" else fresh_database(
        request.getfixturevalue("pg_server"), "m_test_cli_browse_limit")
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        # A process each, as a user runs them: in-process, the runs against
        # PostgreSQL leave connections for the garbage collector to close.
        return subprocess.run([sys.executable, "-m", "claudetrace", *args, "--db", db],
                              capture_output=True, text=True, timeout=120)

    assert run("import", str(SAMPLES[0])).returncode == 0
    huge = str(10**20)
    listed = run("sessions", "--json", "-n", huge)
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 1
    found = run("search", "--json", "-n", huge, "Hello")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)


@pytest.mark.parametrize("args", [("tail", "--follow"), ("import", ".", "--watch")])
def test_a_polling_interval_of_zero_or_less_is_a_usage_error(
    db_path: Path, args: tuple[str, ...]
) -> None:
    # time.sleep(-1) raised ValueError: a traceback once the first look was done.
    for interval in ("-1", "0"):
        result = invoke(*args, "--interval", interval, "--db", str(db_path))
        assert result.exit_code == 2 and "--interval" in result.stderr, result.output


@contextlib.contextmanager
def watching(tmp_path: Path, db_path: Path, interval: str) -> Iterator[IO[str]]:
    """``import --watch`` of the folder ``watchdir`` (made here), once it says it
    watches: its stderr.  Stopped with Ctrl-C afterwards."""
    (tmp_path / "watchdir").mkdir()
    with subprocess.Popen([sys.executable, "-m", "claudetrace", "import", "--watch",
                           "--interval", interval, "--db", str(db_path), "watchdir"],
                          cwd=tmp_path, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stderr is not None
            while "watching" not in proc.stderr.readline():
                assert proc.poll() is None
            yield proc.stderr
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)


def test_a_watched_file_that_fails_is_named_once(tmp_path: Path, db_path: Path) -> None:
    # Was "claudetrace: watchdir/grow.jsonl: watchdir/grow.jsonl: no timestamp in this file".
    with watching(tmp_path, db_path, "0.2") as stderr:
        (tmp_path / "watchdir" / "grow.jsonl").write_text(json.dumps(
            {"type": "user", "sessionId": "a1b2c3d4-0000-4000-8000-000000000001",
             "uuid": "u1", "message": {"role": "user", "content": "hi"}}) + "\n")
        said = stderr.readline()
    assert said == "claudetrace: watchdir/grow.jsonl: no timestamp in this file\n"


def test_a_watched_folder_removed_is_said_once_and_once_when_it_is_back(
    tmp_path: Path, db_path: Path
) -> None:
    # Was the same error at every look: 6 lines in 3 s at --interval 0.5.
    with watching(tmp_path, db_path, "0.1") as stderr:
        (tmp_path / "watchdir").rmdir()
        gone = stderr.readline()
        time.sleep(1)  # ten looks at the missing folder
        (tmp_path / "watchdir").mkdir()
        back = stderr.readline()
    assert gone == "claudetrace: watchdir: no such file or folder\n"
    assert back == "claudetrace: watchdir: found again, watching\n"


def test_a_watched_path_missing_does_not_stop_the_others(tmp_path: Path, db_path: Path) -> None:
    # Was: the planner failed on the missing path and nothing was imported at all.
    (tmp_path / "here").mkdir()
    with subprocess.Popen([sys.executable, "-m", "claudetrace", "import", "--watch",
                           "--interval", "0.1", "--db", str(db_path), "gone", "here"],
                          cwd=tmp_path, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stderr is not None
            said = [proc.stderr.readline() for _ in range(3)]
            shutil.copy(TRANSCRIPT, tmp_path / "here" / TRANSCRIPT.name)
            imported = proc.stderr.readline()
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
    assert said[1:] == ["watching gone, here (Ctrl-C to stop)\n",
                        "claudetrace: gone: no such file or folder\n"], said
    assert "imported session" in imported, imported


def test_a_show_width_below_one_is_a_usage_error(db_path: Path) -> None:
    # -w -5 cut every text 5 characters short of its end (text[:-5]), -w 0 at random.
    assert invoke("import", str(CASSETTES / "hooks.ndjson"), "--db", str(db_path)).exit_code == 0
    assert invoke("show", "latest", "-w", "1", "--db", str(db_path)).exit_code == 0
    for width in ("-5", "0"):
        result = invoke("show", "latest", "-w", width, "--db", str(db_path))
        assert result.exit_code == 2 and "--width" in result.stderr, result.output


def test_bad_tag_is_a_usage_error(db_path: Path) -> None:
    result = invoke("import", str(SAMPLES[0]), "--db", str(db_path), "--tag", "novalue")
    assert result.exit_code == 2 and "KEY=VALUE" in result.stderr


def test_errors_in_a_real_process_have_no_traceback(tmp_path: Path, db_path: Path) -> None:
    for args in (
        ["show", "NOPE", "--db", str(db_path)],
        ["import", str(tmp_path / "none.ndjson"), "--db", str(db_path)],
        ["sessions", "--db", "nosuchdialect://x"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "claudetrace", *args], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 1, args
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"


def test_show_names_turns_and_the_clis_num_turns_apart(db_path: Path) -> None:
    """One user turn with two API round trips: "1 turn", and the CLI's 2 named as its own."""
    rid = invoke("import", str(CASSETTES / "permission_allow.ndjson"), "--db", str(db_path))
    shown = invoke("show", rid.stdout.strip(), "--db", str(db_path)).stdout
    assert ("1 turn (prompt to result; 2 API round trips by the CLI's num_turns), "
            "2 model calls, 1 tool call (0 failed)") in shown
    assert "1 turns" not in shown
    # The transcript's result line names the CLI's count as the header does.
    assert "result success · 2 API round trips · " in shown and "2 turns" not in shown


def test_show_and_sessions_json_give_status_reason_and_cost_per_model(db_path: Path) -> None:
    for name in ("cli_dies", "set_model_and_mode", "interrupt"):
        imported = invoke("import", str(CASSETTES / f"{name}.ndjson"), "--db", str(db_path))
        assert imported.exit_code == 0
    listed = {r["name"] or r["session_id"]: r for r in json.loads(
        invoke("sessions", "--json", "--db", str(db_path)).stdout)}
    by_status = {r["status"]: r for r in listed.values()}
    assert by_status["killed"]["status_reason"] == "killed by SIGKILL during turn 1"
    assert by_status["interrupted"]["status_reason"] == "turn 1 interrupted; the session went on"
    models = by_status["ok"]["models"]
    assert {m: f["cost_usd"] for m, f in models.items()} == {
        "claude-opus-5-5": 0.00096, "claude-sonnet-5": 0.000509}
    shown = invoke("show", by_status["ok"]["id"], "--db", str(db_path)).stdout
    assert "claude-sonnet-5" in shown and "$0.000509" in shown
    killed = invoke("show", by_status["killed"]["id"], "--db", str(db_path)).stdout
    assert "killed — killed by SIGKILL during turn 1" in killed


def test_sessions_filters_as_the_ui_does(db_path: Path) -> None:
    """``sessions`` narrows through the session browser's query layer
    (claudetrace.store.browse): model, status, tag, since, errors only, text."""
    from claudetrace.cassette import read_cassette
    from claudetrace.recording import RecordingInfo
    from claudetrace.store import open_store

    store = open_store(str(db_path))
    try:
        ok = store.import_cassette(read_cassette(CASSETTES / "plain.ndjson"),
                                   tags={"team": "infra"})
        denied = store.import_cassette(read_cassette(CASSETTES / "permission_deny.ndjson"),
                                       tags={"team": "web"})
        running = RecordingInfo.start(["claude"], tags={"team": "infra"})
        store.create_recording(running)
        hour = 3600 * 10**9
        store.update_recording(ok, model="claude-x", started_ns=time.time_ns() - hour)
        store.update_recording(denied, started_ns=time.time_ns() - 2 * hour)
        old = store.import_cassette(read_cassette(CASSETTES / "hooks.ndjson"))
        store.update_recording(old, started_ns=time.time_ns() - 10 * 86_400 * 10**9)
    finally:
        store.close()

    def ids(*args: str) -> list[str]:
        result = invoke("sessions", "--db", str(db_path), "--json", *args)
        assert result.exit_code == 0, result.output
        return [r["id"] for r in json.loads(result.output)]

    assert ids("--model", "claude-x") == [ok]
    assert ids("--tag", "team=infra") == [running.id, ok]
    assert ids("--tag", "team=infra", "--status", "ok") == [ok]
    assert ids("--status", "running") == [running.id]
    assert set(ids("--since", "2d")) == {ok, denied, running.id}
    # Before 1970 (or before year 1) is "all", past what a time can hold is "none":
    # these were an OverflowError / ValueError traceback.
    for far_back in ("99999999999d", "9" * 400 + "w", "0001-01-01"):
        assert len(ids("--since", far_back, "-n", "0")) == 4, far_back
    assert ids("--since", "9999-12-31T23:59:59+00:00") == []
    pruned = invoke("prune", "--db", str(db_path), "--older-than", "99999999999d", "--dry-run")
    assert pruned.exit_code == 0 and "Traceback" not in pruned.output
    assert old in ids("--status", "ok", "--status", "error", "-n", "0")
    assert ids("--errors") == [r for r in ids() if r in ids("--errors")]
    assert ids("--search", "fake model") == [ok]
    bad = invoke("sessions", "--db", str(db_path), "--status", "fine")
    assert bad.exit_code == 2 and "'fine' is not one of" in bad.output
    none = invoke("sessions", "--db", str(db_path), "--tag", "team=nobody")
    assert none.exit_code == 0 and "No recordings match." in none.output


def _limited(limit: int, *args: str, stdout: Path) -> subprocess.CompletedProcess[str]:
    """``claudetrace ARGS`` with no file allowed past ``limit`` bytes (a full disk),
    its stdout into ``stdout``."""
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    # Unbuffered, Python's stdout drops what a short write left (a CPython
    # limitation, not ours): buffered as a user's is, a full disk raises.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with stdout.open("w") as out:
        return subprocess.run([sys.executable, "-m", "claudetrace", *args], stdout=out,
                              stderr=subprocess.PIPE, text=True, timeout=120, preexec_fn=cap,
                              env=env)


def test_a_full_disk_is_one_line_and_leaves_the_last_report_whole(
    db_path: Path, tmp_path: Path,
) -> None:
    # Printing into a full disk was a traceback; export -o report.html cut the
    # report already there at the limit (the cassette export replaces its file).
    lines = [{"claudetrace": "cassette", "version": 1, "argv": ["claude"], "exit_code": 0}]
    lines += [{"seq": i, "t": i / 100, "dir": "out", "line": json.dumps({
        "type": "assistant", "message": {"id": f"m{i}", "role": "assistant", "content": [
            {"type": "text", "text": f"word{i} " * 40}]}})} for i in range(2000)]
    cassette = tmp_path / "big.ndjson"
    cassette.write_text("".join(json.dumps(r) + "\n" for r in lines))
    rid = invoke("import", str(cassette), "--db", str(db_path)).stdout.strip()
    report = tmp_path / "report.html"
    assert invoke("export", rid, "--db", str(db_path), "-o", str(report)).exit_code == 0
    before = report.read_bytes()
    assert len(before) > 200_000
    limit = 100_000
    for args in (("show", rid), ("show", rid, "--raw"), ("export", rid),
                 ("export", rid, "--format", "html"), ("tail", rid, "--raw"),
                 ("export", rid, "-o", str(report))):
        done = _limited(limit, *args, "--db", str(db_path), stdout=tmp_path / "out")
        assert done.returncode == 1, (args, done.stderr)
        [line] = done.stderr.splitlines()
        assert line.startswith("claudetrace: ") and "cannot write" in line, args
        assert line.endswith("File too large"), (args, line)
    assert report.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name], "no file left behind"


def test_sessions_says_a_model_or_tag_no_recording_has(
        db_path: Path, imported: list[str]) -> None:
    result = invoke("sessions", "--db", str(db_path), "--model", "nope", "--tag", "suite=x")
    assert result.exit_code == 0 and "No recordings match." in result.stdout
    models = json.loads(invoke("sessions", "--db", str(db_path), "--json").stdout)
    held = ", ".join(sorted({s["model"] for s in models}))
    assert result.stderr.splitlines() == [
        f"claudetrace: no session used model 'nope'; the store has {held}",
        "claudetrace: no session is tagged suite=x; the store has suite=cli"]
    assert invoke("sessions", "--db", str(db_path), "--tag", "suite=cli").stderr == ""


def _id_ms(recording_id: str) -> int:
    return recording_id_ns(recording_id) // 1_000_000


def test_a_cassette_without_a_start_is_dated_by_its_content_else_its_file(
        db_path: Path, tmp_path: Path) -> None:
    """A cassette whose header has no ``started_ns`` (the shipped samples) got an
    id beginning 00000000 (1970), listed last, and the time of its import."""
    import datetime as dt

    for sample in SAMPLES:
        assert "started_ns" not in json.loads(sample.read_text().splitlines()[0])
        assert invoke("import", str(sample), "--db", str(db_path)).exit_code == 0
    listed = json.loads(invoke("sessions", "--db", str(db_path), "--json").stdout)
    for rec in listed:
        assert not rec["id"].startswith("0000")
        # The first "timestamp" of a line, less its t: within the session's first seconds.
        started = rec["started_ns"] / 1e9
        assert _id_ms(rec["id"]) == rec["started_ns"] // 1_000_000
        assert str(dt.datetime.fromtimestamp(started, dt.timezone.utc)).startswith(
            "2026-11-22 02:4")
    assert [r["started_ns"] for r in listed] == sorted((r["started_ns"] for r in listed),
                                                       reverse=True)
    # No time written in it: the file's modification time; importing it again: unchanged.
    bare = tmp_path / "bare.ndjson"
    bare.write_text('{"claudetrace": "cassette", "version": 1}\n'
                    '{"seq": 0, "t": 0.5, "dir": "out", "line": "{\\"type\\":\\"x\\"}"}\n')
    os.utime(bare, ns=(1_790_000_000_123_000_000, 1_790_000_000_123_000_000))
    first = invoke("import", str(bare), "--db", str(db_path))
    assert _id_ms(first.stdout.strip()) == 1_790_000_000_123
    again = invoke("import", str(bare), "--db", str(db_path))
    assert again.stdout == first.stdout and "unchanged" in again.stderr
    # A checkout or a copy changes that time: the same bytes keep their recording.
    os.utime(bare, ns=(1_800_000_000_000_000_000, 1_800_000_000_000_000_000))
    copy = tmp_path / "copy" / "bare.ndjson"
    copy.parent.mkdir()
    copy.write_bytes(bare.read_bytes())
    for path in (bare, copy):
        again = invoke("import", str(path), "--db", str(db_path))
        assert again.stdout == first.stdout and "unchanged" in again.stderr, again.stderr
    ids = [r["id"] for r in json.loads(invoke("sessions", "--db", str(db_path),
                                              "--json").stdout)]
    assert ids.count(first.stdout.strip()) == 1 and len(ids) == len(SAMPLES) + 1


def test_import_shortens_a_long_session_id_in_its_messages(
        db_path: Path, tmp_path: Path) -> None:
    from claudetrace.testing.transcripts import Transcript, write_transcript
    from tests.test_usage import corpus

    long_id = "s" * 5000
    (first, *_) = corpus()
    path = write_transcript(tmp_path / "projects", Transcript("short-id", first.project,
                                                              first.calls))
    path.write_text(path.read_text().replace('"sessionId":"short-id"',
                                             f'"sessionId":"{long_id}"'))
    assert long_id in path.read_text()
    result = CliRunner().invoke(cli, ["import", str(path), "--db", str(db_path)])
    assert result.exit_code == 0, result.output
    (line, *_) = result.stderr.splitlines()
    assert line == f"{path}: imported session {'s' * 63}…", line
