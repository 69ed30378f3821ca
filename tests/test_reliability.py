"""Nothing a host sends, and no fault of the disk or the database, breaks or
falsifies the store (issue 17): each reproduction of the issue, on real
processes, files and databases."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from claudetrace import capture as cap
from claudetrace.config import resolve_url
from claudetrace.indexer import open_settled_store
from claudetrace.model.events import Event
from claudetrace.recording import RecordingInfo
from claudetrace.store.engine import hide_password

PY = sys.executable
pytestmark = pytest.mark.usefixtures("ct_env")

#: Lines that once made every reader fail: a lone surrogate in indexed fields
#: and in a reply's text (a reply cut inside an emoji), NUL, absurd numbers.
POISON = (
    b'{"type":"\\ud800","subtype":"\\udfff","request_id":"\\ud800","uuid":"a\\u0000b",'
    b'"session_id":"\\ud83d","message":{"content":[{"type":"tool_use","id":"t\\ud800",'
    b'"name":"n\\u0000"}]}}\n'
    b'{"type":"assistant","message":{"role":"assistant","content":[{"type":"text",'
    b'"text":"\\ud83d"}]}}\n'
    b'{"type":"result","subtype":"success","usage":{"input_tokens":'
    + b"1" + b"0" * 30 + b'},"total_cost_usd":1e400,"num_turns":' + b"9" * 40 + b"}\n"
)


def ct(*args: str, env: dict[str, str] | None = None, data: bytes = b"",
       timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([PY, "-m", "claudetrace", *args], input=data, capture_output=True,
                          timeout=timeout, check=False, env=env)


#: ``python -c`` this, then a command's arguments: ``python -m claudetrace`` that at
#: its exit writes to the file ``$CT_ASLEEP`` how many seconds its main thread was
#: asleep (its life less the time it ran and the time it waited for a core, both
#: from ``/proc/self/schedstat``): a wait on a lock or a timer, which a loaded
#: machine does not lengthen as it does the time the command takes.
ASLEEP = """\
import atexit, os, runpy, sys, time
def asleep():
    with open("/proc/self/stat", "rb") as f:
        stat = f.read()
    started = int(stat[stat.rfind(b")") + 2:].split()[22 - 3]) / os.sysconf("SC_CLK_TCK")
    lived = time.clock_gettime(time.CLOCK_BOOTTIME) - started
    with open("/proc/self/schedstat") as f:
        ran, waited = (int(n) / 1e9 for n in f.read().split()[:2])
    with open(os.environ["CT_ASLEEP"], "w") as f:
        f.write(repr(lived - ran - waited))
atexit.register(asleep)
sys.argv[0] = "claudetrace"
runpy.run_module("claudetrace", run_name="__main__", alter_sys=True)
"""


def ct_asleep(*args: str, env: dict[str, str], tmp_path: Path,
              timeout: float = 120) -> tuple[subprocess.CompletedProcess[bytes], float]:
    """:func:`ct`, and how many seconds the command was asleep (:data:`ASLEEP`)."""
    said = tmp_path / "asleep"
    done = subprocess.run([PY, "-c", ASLEEP, *args], capture_output=True, timeout=timeout,
                          check=False, env={**env, "CT_ASLEEP": str(said)})
    return done, float(said.read_text())


def one_line(done: subprocess.CompletedProcess[bytes], *needles: str) -> str:
    err = done.stderr.decode()
    assert done.returncode != 0 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("claudetrace: "), err
    for needle in needles:
        assert needle in err, err
    return err


def test_a_poisoned_line_is_stored_and_every_reader_shows_it(db_path: Path) -> None:
    done = ct("proxy", "--db", str(db_path), "--", "cat", data=POISON)
    assert done.returncode == 0 and done.stdout == POISON
    listed = ct("sessions", "--db", str(db_path), "--json")
    assert listed.returncode == 0, listed.stderr
    [rec] = json.loads(listed.stdout)
    assert rec["events"] == 6 and rec["status"] == "ok"
    # The absurd count is a damaged one: read as 0, said in the warnings.
    assert rec["input_tokens"] == 0 and rec["cost_usd"] == 0.0
    assert any("damaged token count" in w for w in rec["warnings"]), rec
    for args in (("show", "latest"), ("show", "latest", "--raw"), ("export", "latest"),
                 ("export", "latest", "--format", "html"), ("otel", "latest", "--tree"),
                 ("usage", "session", "--json"), ("usage", "blocks")):
        shown = ct(*args, "--db", str(db_path))
        assert shown.returncode == 0 and b"Traceback" not in shown.stderr, (args, shown.stderr)
    assert b"\\ud83d" in ct("show", "latest", "--db", str(db_path)).stdout
    # The exact bytes are what was stored.
    store = open_settled_store(str(db_path))
    try:
        events = list(store.iter_events(rec["id"]))
    finally:
        store.close()
    assert b"\n".join(e.data for e in events if e.direction == "in") + b"\n" == POISON


def test_absurd_cassette_values_are_one_line_errors(db_path: Path, tmp_path: Path) -> None:
    header = '{"claudetrace":"cassette","version":1}'
    cases = {
        '"t"': (header, '{"seq":0,"t":1e300,"dir":"out","line":"x"}'),
        '"seq"': (header, '{"seq":' + "1" + "0" * 23 + ',"t":1,"dir":"out","line":"x"}'),
        '"started_ns"': ('{"claudetrace":"cassette","version":1,"started_ns":1' + "0" * 30 + "}",
                         '{"seq":0,"t":1,"dir":"out","line":"x"}'),
        "nested too deeply": (header, "[" * 1000 + "]" * 1000),
        "lone surrogate": (header, '{"seq":0,"t":1,"dir":"out","line":"a\\ud800"}'),
    }
    for needle, lines in cases.items():
        path = tmp_path / "bad.ndjson"
        path.write_text("\n".join(lines) + "\n")
        one_line(ct("import", str(path), "--db", str(db_path)), needle)
        one_line(ct("replay", str(path), "--", "true"), needle)


def test_a_damaged_end_record_is_stored_with_a_warning(db_path: Path) -> None:
    info = RecordingInfo.start(["claude"])
    folder = cap.capture_dirs(resolve_url(str(db_path)))[0]
    folder.mkdir(parents=True)
    path = folder / f"{info.id}{cap.SUFFIX}"
    writer = cap.CaptureWriter(path, info)
    writer.feed("out", b'{"type":"system"}\n')
    writer._append(cap.END, b"\xff\xfe not json")  # as a torn disk could leave it
    writer.close(None)
    listed = ct("sessions", "--db", str(db_path), "--json")
    assert listed.returncode == 0 and b"Traceback" not in listed.stderr, listed.stderr
    [rec] = json.loads(listed.stdout)
    assert rec["events"] == 1 and any("damaged" in w for w in rec["warnings"])
    assert not path.exists()


def test_a_capture_the_database_refuses_is_set_aside_once(db_path: Path) -> None:
    ct("db", "upgrade", "--db", str(db_path))
    with sqlite3.connect(db_path) as conn:  # a database that refuses one line, for good
        conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON events WHEN NEW.data = X'626164' "
                     "BEGIN SELECT RAISE(ABORT, 'this line is refused'); END")
    conn.close()
    env = {**os.environ, "CLAUDETRACE_FLUSH_TIMEOUT": "0.2"}
    done = ct("proxy", "--db", str(db_path), "--", "cat", data=b"good\nbad\n", env=env)
    assert done.returncode == 0 and done.stdout == b"good\nbad\n"
    deadline = time.monotonic() + 60
    while cap.capture_files(resolve_url(str(db_path))) and time.monotonic() < deadline:
        first = ct("sessions", "--db", str(db_path), "--json")
        assert first.returncode == 0, first.stderr
        time.sleep(0.2)
    [aside] = cap.set_aside_files(resolve_url(str(db_path)))
    assert "this line is refused" in aside.reason
    again = ct("sessions", "--db", str(db_path), "--json")
    assert again.returncode == 0 and again.stderr == b""  # never tried again by itself
    [rec] = json.loads(again.stdout)
    assert rec["status"] == "incomplete"
    doctor = ct("doctor", "--db", str(db_path))
    assert doctor.returncode == 1 and b"this line is refused" in doctor.stdout
    with sqlite3.connect(db_path) as conn:
        conn.execute("DROP TRIGGER refuse")
    conn.close()
    fixed = ct("doctor", "--db", str(db_path), "--retry", "all")
    assert fixed.returncode == 0, fixed.stderr
    store = open_settled_store(str(db_path))
    try:
        assert [e.data for e in store.iter_events(rec["id"])] == [b"good", b"bad"] * 2
    finally:
        store.close()


def test_doctor_retry_of_an_id_not_set_aside_is_an_error(db_path: Path) -> None:
    ct("db", "upgrade", "--db", str(db_path))
    done = ct("doctor", "--db", str(db_path), "--retry", "01nosuch", "--retry", "all")
    assert done.returncode == 1 and done.stdout == b""
    assert done.stderr.decode().splitlines() == [  # as typed (it said 01NOSUCH)
        "claudetrace: no capture set aside for 01nosuch (`claudetrace doctor` lists them)"]
    assert ct("doctor", "--db", str(db_path), "--retry", "all").returncode == 0


def test_read_commands_do_not_wait_on_another_writers_lock(db_path: Path,
                                                         tmp_path: Path) -> None:
    ct("db", "upgrade", "--db", str(db_path))
    env = {**os.environ, "CLAUDETRACE_FLUSH_TIMEOUT": "0"}
    holder = subprocess.Popen(
        [PY, "-c", "import sqlite3, sys, time\n"
         f"c = sqlite3.connect({str(db_path)!r}, isolation_level=None)\n"
         "c.execute('BEGIN EXCLUSIVE'); print('held', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        done = ct("proxy", "--db", str(db_path), "--", "cat", data=b"x\n", env=env)
        assert done.returncode == 0 and done.stdout == b"x\n"
        # Asleep, not how long it took: that is seconds more on a loaded machine.
        listed, asleep = ct_asleep("sessions", "--db", str(db_path), "--json",
                                   env=dict(os.environ), tmp_path=tmp_path, timeout=60)
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    assert listed.returncode == 0, listed.stderr
    # The settle's short wait for the lock (2 s), not the store's busy timeout (30 s).
    assert asleep < 15, asleep
    assert b"still waiting to be stored" in listed.stderr or b"still being stored" in listed.stderr
    # Once the lock is gone, the recording is stored by the next reader.
    [rec] = json.loads(ct("sessions", "--db", str(db_path), "--json").stdout)
    assert rec["events"] == 2


#: Every command that reads the store (a mistyped database must not become an empty one).
READ_COMMANDS = (("sessions",), ("show", "latest"), ("export", "latest"),
                 ("export", "latest", "--format", "html"), ("otel", "--all"), ("tail",),
                 ("tail", "--follow"), ("metrics", "dump"), ("metrics", "serve", "--port", "0"),
                 ("doctor",), ("db", "url"), ("replay", "latest"), ("ui", "--port", "0"))


def test_doctor_lists_recordings_that_lost_bytes_without_failing(db_path: Path) -> None:
    from claudetrace.cassette import read_cassette

    store = open_settled_store(str(db_path))
    plain = Path(__file__).parent / "fixtures" / "cassettes" / "plain.ndjson"
    whole = store.import_cassette(read_cassette(plain))
    cut = store.import_cassette(read_cassette(plain))
    # What the indexer stores of a capture that lost bytes (test_a_full_disk… makes one).
    store.update_recording(cut, lost_bytes=4096, outcome="incomplete",
                           outcome_reason="4096 bytes of the capture were lost")
    store.close()
    doctor = ct("doctor", "--db", str(db_path))
    assert doctor.returncode == 0, doctor.stderr
    assert f"{cut}  incomplete: 4096 bytes not stored (forwarded but not recorded, with the " \
           "rest of each line a gap cut".encode() in doctor.stdout
    assert whole.encode() not in doctor.stdout


def _big_cassette(path: Path, lines: int) -> None:
    from claudetrace.cassette import read_cassette, write_cassette

    plain = read_cassette(Path(__file__).parent / "fixtures" / "cassettes" / "plain.ndjson")
    said = [json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "text", "text": f"line {i} " + "x" * 200}]}, "session_id": "s"}).encode()
        for i in range(lines)]
    events = [*plain.events[:-1], *(Event(len(plain.events) - 1 + i, "out", 1_000 + i, data)
                                     for i, data in enumerate(said))]
    events.append(Event(len(events), "out", 2_000 + lines, plain.events[-1].data))
    write_cassette(path, plain.header, events)


def _stored(db_path: Path) -> list[tuple[str, int | None, int]]:
    with sqlite3.connect(db_path) as db:
        return db.execute("SELECT r.id, r.ended_ns, (SELECT count(*) FROM events e "
                          "WHERE e.rec = r.num) FROM recordings r").fetchall()


def _importing(tmp_path: Path, db_path: Path, lines: int,
               output: int) -> tuple[Path, int, subprocess.Popen[bytes]]:
    """A big cassette of ``lines`` lines, its line count, and its import started."""
    big = tmp_path / "big.ndjson"
    _big_cassette(big, lines)
    total = big.read_bytes().count(b"\n") - 1
    return big, total, subprocess.Popen(
        [PY, "-m", "claudetrace", "import", str(big), "--db", str(db_path)],
        stdout=output, stderr=output)


def _wait_some_stored(db_path: Path) -> None:
    """Until some events of the one recording are stored (not all, if it is big)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            rows = _stored(db_path)
        except sqlite3.OperationalError:  # not made yet, or locked for a moment
            rows = []
        if rows and rows[0][2] > 0:
            return
        time.sleep(0.05)


@pytest.mark.slow
def test_a_cassette_import_killed_half_way_is_replaced_by_importing_it_again(
    db_path: Path, tmp_path: Path
) -> None:
    import signal

    big, total, importer = _importing(tmp_path, db_path, 150_000, subprocess.DEVNULL)
    try:
        _wait_some_stored(db_path)
        importer.send_signal(signal.SIGKILL)
    finally:
        importer.wait(timeout=60)
    ((half, ended, stored),) = _stored(db_path)
    assert ended is None and 0 < stored < total  # killed half way: no end written
    doctor = ct("doctor", "--db", str(db_path))
    assert doctor.returncode == 1 and f"{half}  half imported".encode() in doctor.stdout
    again = ct("import", str(big), "--db", str(db_path), timeout=300)
    assert again.returncode == 0, again.stderr
    assert again.stdout.decode().split() == [half]  # the same recording id
    assert b"updated recording" in again.stderr and b"a half import replaced" in again.stderr
    ((rid, ended, stored),) = _stored(db_path)
    assert (rid, stored) == (half, total) and ended is not None
    doctor = ct("doctor", "--db", str(db_path))
    assert doctor.returncode == 0 and b"half imported" not in doctor.stdout
    # A third import of the whole cassette adds nothing.
    third = ct("import", str(big), "--db", str(db_path), timeout=300)
    assert third.returncode == 0 and third.stdout.decode().split() == [half], third.stderr
    assert b"unchanged" in third.stderr
    assert [r[0] for r in _stored(db_path)] == [half]


@pytest.mark.slow
def test_a_second_import_leaves_a_cassette_another_process_is_importing(
    db_path: Path, tmp_path: Path
) -> None:
    big, total, first = _importing(tmp_path, db_path, 60_000, subprocess.PIPE)
    try:
        _wait_some_stored(db_path)  # the first has stored some, not all
        second = ct("import", str(big), "--db", str(db_path), timeout=300)
    finally:
        out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    (rid,) = out.decode().split()
    # The second neither deleted the half the first was writing nor stored a copy.
    assert second.returncode == 1
    assert f"being imported by process {first.pid} into recording {rid}".encode() \
        in second.stderr
    ((stored_id, ended, stored),) = _stored(db_path)
    assert (stored_id, stored) == (rid, total) and ended is not None
    again = ct("import", str(big), "--db", str(db_path))
    assert again.returncode == 0 and b"unchanged" in again.stderr


def test_importing_a_cassette_twice_keeps_one_recording(db_path: Path, tmp_path: Path) -> None:
    plain = Path(__file__).parent / "fixtures" / "cassettes" / "plain.ndjson"
    first = ct("import", str(plain), "--db", str(db_path))
    second = ct("import", str(plain), "--db", str(db_path))
    assert first.returncode == second.returncode == 0, second.stderr
    assert first.stdout == second.stdout and len(first.stdout.split()) == 1
    assert b"unchanged" in second.stderr
    assert len(_stored(db_path)) == 1
    # Another cassette (one byte differs) is another recording.
    other = tmp_path / "other.ndjson"
    other.write_bytes(plain.read_bytes() + b"\n")
    assert ct("import", str(other), "--db", str(db_path)).returncode == 0
    assert len(_stored(db_path)) == 2


def test_doctor_lists_a_cassette_whose_import_was_killed(db_path: Path) -> None:
    from claudetrace.cassette import read_cassette
    from claudetrace.store import ingest
    from claudetrace.store.ingest import info_from_header

    store = open_settled_store(str(db_path))
    plain = Path(__file__).parent / "fixtures" / "cassettes" / "plain.ndjson"
    cassette = read_cassette(plain)
    whole = store.import_cassette(cassette)
    half = info_from_header(cassette.header)
    assert half.ended_ns is not None  # the cassette says when it ended

    def killed() -> Iterator[Event]:
        yield from cassette.events[:3]
        raise KeyboardInterrupt

    # A kill leaves no chance to take the half-stored recording back.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ingest, "_take_back", lambda *args: None)
        with pytest.raises(KeyboardInterrupt):
            store.import_cassette((cassette.header, killed()), info=half, batch=2)
    store.close()
    doctor = ct("doctor", "--db", str(db_path))
    assert doctor.returncode == 1, doctor.stderr
    assert f"{half.id}  half imported: ".encode() in doctor.stdout
    assert whole.encode() not in doctor.stdout
    check = open_settled_store(str(db_path))
    try:
        assert check.get(half.id).status == "incomplete"  # never whole
    finally:
        check.close()


def test_a_mistyped_database_path_is_an_error_and_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent" / "dir" / "x.db"
    typo = tmp_path / "claudetrace.bd"  # in a folder that exists
    for args in READ_COMMANDS:
        # A command that made the database would go on serving, following or
        # browsing it: the timeout turns that into a failure, not a hang.
        one_line(ct(*args, "--db", str(typo), timeout=60), "no database at", str(typo))
        one_line(ct(*args, env={**os.environ, "CLAUDETRACE_DB": str(missing)}, timeout=60),
                 "no database at", str(missing))
        assert not typo.exists(), args
    assert not missing.parent.parent.exists()
    assert list(tmp_path.iterdir()) == []
    # The proxy still runs the child and forwards; it says where the recording waits.
    done = ct("proxy", "--db", str(missing), "--", "cat", data=b"hello\n")
    assert done.returncode == 0 and done.stdout == b"hello\n"
    assert b"does not exist" in done.stderr and b"Traceback" not in done.stderr
    assert not missing.parent.parent.exists()


def test_the_proxy_says_at_once_when_its_database_cannot_take_the_session(
        tmp_path: Path, ct_env: Path) -> None:
    """``--db /dev/null``, a folder, a FIFO or a file that is no SQLite database: the
    child runs and every byte is forwarded, but the indexer, which finds out later,
    may be alone by then; the proxy says so before the session goes on."""
    folder = tmp_path / "folder"
    folder.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    text = tmp_path / "notes.db"
    text.write_text("not a database\n")
    for db, why in ((Path("/dev/null"), "not a regular file (a character device)"),
                    (folder, "not a regular file (a folder)"),
                    (fifo, "not a regular file (a FIFO)"),
                    (text, "not a SQLite database")):
        done = ct("proxy", "--db", str(db), "--", "cat", data=b'{"type":"x"}\n', timeout=60)
        err = done.stderr.decode()
        assert done.returncode == 0 and done.stdout == b'{"type":"x"}\n', err
        assert f"claudetrace: cannot use database {db}: {why}; the session is forwarded" \
            " and kept in " in err, err
        kept = Path(err.split(" and kept in ", 1)[1].split(" until ", 1)[0])
        assert kept.name.endswith(cap.SUFFIX), err  # the bytes are on disk, not lost
    # Beside a folder or a file, as for any database; never in /dev.
    assert not Path("/dev/null" + cap.SUFFIX).exists()
    assert text.read_text() == "not a database\n"
    # A new database and an empty file are fine: nothing said.
    for db in (tmp_path / "new.db", tmp_path / "empty.db"):
        if db.name == "empty.db":
            db.touch()
        done = ct("proxy", "--db", str(db), "--", "cat", data=b'{"type":"x"}\n', timeout=60)
        assert done.returncode == 0 and done.stderr == b"", done.stderr


def test_files_with_recorded_content_are_private(db_path: Path, ct_env: Path,
                                                 tmp_path: Path) -> None:
    os.umask(0o022)
    assert ct("proxy", "--db", str(db_path), "--", "cat", data=b"x\n").returncode == 0
    assert ct("sessions", "--db", str(db_path)).returncode == 0
    for path in db_path.parent.glob("claudetrace.db*"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    out = tmp_path / "out.ndjson"
    assert ct("export", "latest", "--db", str(db_path), "-o", str(out)).returncode == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    # The default database, in a data directory made for it.
    assert ct("proxy", "--", "cat", data=b"y\n").returncode == 0
    assert ct("sessions").returncode == 0
    assert stat.S_IMODE(ct_env.stat().st_mode) == 0o700
    assert stat.S_IMODE((ct_env / "claudetrace.db").stat().st_mode) == 0o600


def test_export_redacts_secrets_unless_told_not_to(db_path: Path, tmp_path: Path) -> None:
    key = "sk-ant-api03-" + "Q" * 40
    line = json.dumps({"type": "user", "message": {"role": "user", "content":
                      f"use {key} and Authorization: Bearer abcdefghijklmnop1234"}})
    assert ct("proxy", "--db", str(db_path), "--", "cat",
              data=line.encode() + b"\n").returncode == 0
    for fmt in ("cassette", "html"):
        shown = ct("export", "latest", "--db", str(db_path), "--format", fmt)
        assert shown.returncode == 0 and key.encode() not in shown.stdout
        assert b"abcdefghijklmnop1234" not in shown.stdout and b"[REDACTED]" in shown.stdout
    for fmt in ("cassette", "html"):
        raw = ct("export", "latest", "--db", str(db_path), "--format", fmt, "--no-redact")
        assert raw.returncode == 0 and key.encode() in raw.stdout, fmt
        assert b"abcdefghijklmnop1234" in raw.stdout and b"[REDACTED]" not in raw.stdout, fmt


def test_export_hides_the_secrets_of_the_issue_and_keeps_the_figures(
        db_path: Path, tmp_path: Path) -> None:
    secrets = ("Tr0ub4dor3x", "dXNlcjpzM2NyM3RwYXNz", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    text = (f"postgresql://user:{secrets[0]}@host/db\nAuthorization: Basic {secrets[1]}\n"
            f"AWS_SECRET_ACCESS_KEY={secrets[2]}\nmax_tokens: 4096, subagent_tokens: 1200")
    line = json.dumps({"type": "user", "message": {"role": "user", "content": text}})
    assert ct("proxy", "--db", str(db_path), "--", "cat",
              data=line.encode() + b"\n").returncode == 0
    out = tmp_path / "out.ndjson"
    assert ct("export", "latest", "--db", str(db_path), "-o", str(out)).returncode == 0
    exported = out.read_text()
    assert not [secret for secret in secrets if secret in exported]
    lines = [json.loads(record)["line"] for record in exported.splitlines()[1:]]
    assert [json.loads(line)["type"] for line in lines] == ["user", "user"]  # still JSON (cat)
    assert "max_tokens: 4096, subagent_tokens: 1200" in exported


def test_no_command_prints_a_password_from_a_url(ct_env: Path) -> None:
    for url in ("postgresql+nosuchdriver://user:PASSWORD@127.0.0.1/db",
                "postgresql+psycopg://user:PASSWORD@host:abc/db"):
        one_line(ct("sessions", "--db", url))
        assert b"PASSWORD" not in ct("sessions", "--db", url).stderr
        shown = ct("db", "url", "--db", url)
        assert shown.returncode == 0 and b"PASSWORD" not in shown.stdout + shown.stderr
    # A password with an unescaped "@", "/" or "?" (SQLAlchemy reads its tail as the
    # host, which a driver's error echoes): hidden whole, and refused at once.
    for url in ("postgresql+psycopg://alice:p@ssw0rd-Secret@127.0.0.1:1/ct",
                "postgresql+psycopg://alice:p/ss@w0rd-Secret@127.0.0.1:1/ct",
                "postgresql+psycopg://alice:p?w0rd-Secret@127.0.0.1:1/ct?password=Secret2"):
        shown = ct("db", "url", "--db", url)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.startswith(b"postgresql+psycopg://alice:***@127.0.0.1:1/ct"), \
            shown.stdout
        assert b"Secret" not in shown.stdout
        for args in (("sessions",), ("db", "upgrade")):
            said = ct(*args, "--db", url)
            assert said.returncode != 0 and b"Secret" not in said.stdout + said.stderr
        if "p@ss" in url:
            assert "holds an '@': write it as %40" in one_line(said)
    assert hide_password("postgresql://u:pw@h/db?sslmode=require&password=Secret2") == \
        "postgresql://u:***@h/db?sslmode=require&password=***"
    # A URL the store cannot use does not stop the child, nor forwarding.
    done = ct("proxy", "--db", "postgresql+psycopg://u:PASSWORD@host:abc/db", "--", "cat",
              data=b"hello\n", env={**os.environ, "CLAUDETRACE_FLUSH_TIMEOUT": "0"})
    assert done.returncode == 0 and done.stdout == b"hello\n"
    assert b"PASSWORD" not in done.stderr and b"Traceback" not in done.stderr


def _tmpfs(folder: Path, size: str) -> None:
    if shutil.which("mount") is None:
        pytest.skip("no mount command to make a small file system")
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")


def test_a_full_disk_loses_bytes_but_never_invents_lines(tmp_path: Path) -> None:
    small = tmp_path / "small"
    _tmpfs(small, "4m")
    try:
        db = small / "x.db"
        assert ct("db", "upgrade", "--db", str(db)).returncode == 0
        # The host's lines reach the proxy many to a chunk (a gap cuts some);
        # the child writes one line at a time.
        lines = [(f"{i:06d} " + "x" * 4000).encode() for i in range(150)]
        data = b"\n".join(lines) + b"\n"
        filler = small / "filler"
        # The child fills the disk at line 20 and frees it at line 75.
        child = ("import os,sys,time\n"
                 "for line in sys.stdin.buffer:\n"
                 "    sys.stdout.buffer.write(line); sys.stdout.flush(); time.sleep(0.005)\n"
                 "    if line.startswith(b'000020'):\n"
                 "        fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT)\n"
                 "        try:\n"
                 "            while True: os.write(fd, bytes(1 << 16))\n"
                 "        except OSError: os.close(fd)\n"
                 "    if line.startswith(b'000075'):\n"
                 "        os.unlink(sys.argv[1]); time.sleep(1)\n")
        done = ct("proxy", "--db", str(db), "--", PY, "-c", child, str(filler), data=data,
                  env={**os.environ, "CLAUDETRACE_FLUSH_TIMEOUT": "5"})
        assert done.returncode == 0 and done.stdout == data  # forwarding never suffers
        listed = ct("sessions", "--db", str(db), "--json")
        assert listed.returncode == 0, listed.stderr
        [rec] = json.loads(listed.stdout)
        store = open_settled_store(str(db))
        try:
            stored = [e.data for e in store.iter_events(rec["id"])]
        finally:
            store.close()
        sent = set(lines)
        assert all(line in sent for line in stored)  # nothing glued, nothing invented
        assert rec["lost_bytes"] > 0 and rec["status"] == "incomplete"
        assert len(stored) < 2 * len(lines)
        shown = ct("show", "latest", "--db", str(db))
        assert b"bytes lost" in shown.stdout and b"were lost" in shown.stdout
        tree = ct("otel", "latest", "--tree", "--db", str(db))
        assert tree.returncode == 0 and b"were lost" in tree.stdout, tree.stdout[-2000:]
        # doctor lists it, for information (nothing to retry: exit status 0).
        doctor = ct("doctor", "--db", str(db))
        assert doctor.returncode == 0, doctor.stdout
        assert f"{rec['id']}  incomplete: {rec['lost_bytes']} bytes not stored".encode() \
            in doctor.stdout
        # The proxy counts the bytes it could not write; the store those and the
        # pieces of the lines the gaps cut (3,638,170 against 3,638,183 once).
        written = re.search(rb"\((\d+) bytes\) were forwarded but not recorded", done.stderr)
        assert written is not None, done.stderr
        assert 0 < int(written[1]) <= rec["lost_bytes"]
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False, capture_output=True)


def test_a_cassette_import_loads_no_sqlalchemy_and_still_stores_what_waits(
    db_path: Path,
) -> None:
    sample = str(Path(__file__).parent / "fixtures" / "samples" / "basic.cassette.ndjson")
    assert ct("db", "upgrade", "--db", str(db_path)).returncode == 0
    # Its own process writes nothing: the writer does, through sqlite3 alone.
    done = subprocess.run([PY, "-X", "importtime", "-m", "claudetrace", "import", sample,
                           "--db", str(db_path)], capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.decode().splitlines()]
    assert "claudetrace.store.ingest" in imported
    assert not [name for name in imported if name.split(".")[0] in ("sqlalchemy", "alembic")]
    # A finished session whose indexer is gone waits in a capture file: stored too.
    info = RecordingInfo.start(["claude"])
    folder = cap.capture_dirs(resolve_url(str(db_path)))[0]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{info.id}{cap.SUFFIX}"
    writer = cap.CaptureWriter(path, info)
    writer.feed("out", b'{"type":"system"}\n')
    writer.close({"exit_code": 0, "ended_ns": time.time_ns()})
    assert ct("import", sample, "--db", str(db_path)).returncode == 0  # unchanged: no second
    assert not path.exists()
    listed = json.loads(ct("sessions", "--db", str(db_path), "--json").stdout)
    assert len(listed) == 2 and info.id in {rec["id"] for rec in listed}


def test_export_takes_its_format_from_the_file_name_or_refuses_a_contradiction(
        db_path: Path, tmp_path: Path) -> None:
    line = json.dumps({"type": "user", "message": {"role": "user", "content": "hi"}})
    assert ct("proxy", "--db", str(db_path), "--", "cat",
              data=line.encode() + b"\n").returncode == 0
    report = tmp_path / "report.html"
    assert ct("export", "latest", "--db", str(db_path), "-o", str(report)).returncode == 0
    assert report.read_text().lstrip().lower().startswith("<!doctype html")
    cassette = tmp_path / "c.ndjson"
    assert ct("export", "latest", "--db", str(db_path), "-o", str(cassette)).returncode == 0
    assert json.loads(cassette.read_text().splitlines()[0])["claudetrace"]
    refused = ct("export", "latest", "--db", str(db_path), "-o", str(tmp_path / "r.HTM"),
                 "--format", "cassette")
    assert refused.returncode == 2 and b"contradicts the output file" in refused.stderr
    assert not (tmp_path / "r.HTM").exists()


@pytest.mark.parametrize(("name", "first", "message"), [
    ("deep.ndjson", '{"claudetrace": "cassette", "version": 1, "x": ' + "[" * 1000 + "]" * 1000
     + "}", "its first line is JSON nested deeper than 200 levels"),
    # A transcript whose only readable line has no time: its damaged line is skipped
    # (never a RecursionError), and the file says what it lacks.
    ("deep.jsonl", json.dumps({"type": "user", "sessionId": "s", "uuid": "u",
                               "message": {"role": "user", "content": "hi"}})
     + "\n" + "[" * 100_000 + "]" * 100_000, "deep.jsonl: no timestamp in this file"),
])
def test_import_of_a_deeply_nested_file_is_one_line(
        db_path: Path, tmp_path: Path, name: str, first: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(first + "\n")
    done = ct("import", str(path), "--db", str(db_path))
    assert done.returncode == 1 and message.encode() in done.stderr, done.stderr[-300:]
    assert done.stderr.count(b"\n") == 1


def test_a_setting_the_proxy_cannot_read_is_said_once(tmp_path: Path) -> None:
    db = str(tmp_path / "x.db")
    env = {**os.environ, "CLAUDETRACE_FLUSH_TIMEOUT": "abc",
           "CLAUDETRACE_INDEXER_PRIORITY": "bogus"}
    done = ct("proxy", "--db", db, "--", "cat", data=b"hello\n", env=env)
    assert done.returncode == 0 and done.stdout == b"hello\n", done.stderr
    assert done.stderr.decode().splitlines() == [
        "claudetrace: $CLAUDETRACE_FLUSH_TIMEOUT='abc' is not a number of seconds "
        "(0 or more): ignored",
        "claudetrace: $CLAUDETRACE_INDEXER_PRIORITY='bogus' is not one of idle, low, normal: "
        "idle is used"]
    fine = ct("proxy", "--db", db, "--", "cat", data=b"hello\n",
              env={**os.environ, "CLAUDETRACE_FLUSH_TIMEOUT": "5",
                   "CLAUDETRACE_INDEXER_PRIORITY": "Low"})
    assert fine.returncode == 0 and fine.stderr == b""
