"""Who imports a cassette (issue 33's closing note): a half recording names its
importer by host, pid and the process's start time; a second import leaves one
that is still being imported alone, replaces a dead one (one import only, when
two try at once), and ``doctor`` tells the two apart.  Real processes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from claudetrace.formats.imports import cassette_recording_id
from claudetrace.formats.owner import importing_elsewhere, start_time, this_importer
from claudetrace.indexer import open_settled_store
from claudetrace.model.events import Event
from tests.test_reliability import _big_cassette, _importing, _stored, _wait_some_stored, ct

PY = sys.executable
pytestmark = pytest.mark.usefixtures("ct_env")


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process on this host that is not an importer."""
    proc = subprocess.Popen([PY, "-c", "import time; time.sleep(600)"])
    yield proc
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def _gone_importer() -> dict[str, Any]:
    """The mark of an importer that is gone: its pid with its start time, read
    before it was reaped, so that the pid taken meanwhile by another process
    (the machine's pids wrap, and other jobs start processes) does not make it
    an importer still running."""
    gone = subprocess.Popen([PY, "-c", "pass"])
    os.waitid(os.P_PID, gone.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped yet
    started = start_time(gone.pid)
    gone.wait()
    assert started is not None
    return {"host": os.uname().nodename, "pid": gone.pid, "started": started}


def _dead_pid() -> int:
    return int(_gone_importer()["pid"])


def _half(db_path: Path, cassette: Path, importer: dict[str, Any]) -> str:
    """Store the first events of ``cassette`` as its import killed half way would,
    marked as imported by ``importer``; its recording id."""
    from claudetrace.cassette import read_cassette
    from claudetrace.store import ingest
    from claudetrace.store.ingest import info_from_header

    whole = read_cassette(cassette)
    info = info_from_header(whole.header)
    info.id = cassette_recording_id(cassette, whole.header)
    info.extra["importer"] = importer

    def killed() -> Iterator[Event]:
        yield from whole.events[:3]
        raise KeyboardInterrupt

    def left_as_killed(writer: Any, forget: Any, recording_id: str) -> None:
        # Nothing taken back, but the batch on the store's writing thread ends
        # here: a killed import writes nothing later, and a batch landing after
        # this returns went into the recording that replaced the half.
        writer.close()

    store = open_settled_store(str(db_path))
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(ingest, "_take_back", left_as_killed)
            with pytest.raises(KeyboardInterrupt):
                store.import_cassette((whole.header, killed()), info=info, batch=2)
    finally:
        store.close()
    return info.id


def test_a_process_is_known_by_its_pid_and_start_time(
        sleeper: subprocess.Popen[bytes]) -> None:
    mark = this_importer()
    assert mark["pid"] == os.getpid() and isinstance(mark["started"], int)
    started = start_time(sleeper.pid)
    assert isinstance(started, int) and started >= mark["started"]
    host = os.uname().nodename
    alive = {"host": host, "pid": sleeper.pid, "started": started}
    assert importing_elsewhere(alive) == f"process {sleeper.pid}"
    # The same pid, started at another time: the importer is gone, its pid reused.
    assert importing_elsewhere({**alive, "started": started - 1}) is None
    # A mark without a start time (an older claudetrace's) goes by the pid alone.
    assert importing_elsewhere({"host": host, "pid": sleeper.pid}) == f"process {sleeper.pid}"
    assert importing_elsewhere({"host": host, "pid": _dead_pid()}) is None
    assert importing_elsewhere({"host": "elsewhere", "pid": 1}) == "process 1 on elsewhere"


def test_a_reused_pid_does_not_keep_a_dead_half_waiting(
        db_path: Path, tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    cassette = tmp_path / "c.ndjson"
    _big_cassette(cassette, 50)
    host = os.uname().nodename
    started = start_time(sleeper.pid)
    assert started is not None
    # The importer's pid is alive and started when it said: it is still importing.
    rid = _half(db_path, cassette, {"host": host, "pid": sleeper.pid, "started": started})
    doctor = ct("doctor", "--db", str(db_path))
    assert f"{rid}  being imported by process {sleeper.pid} ({host})".encode() \
        in doctor.stdout, doctor.stdout
    assert b"half imported" not in doctor.stdout and doctor.returncode == 0
    busy = ct("import", str(cassette), "--db", str(db_path))
    assert busy.returncode == 1
    assert f"being imported by process {sleeper.pid} into recording {rid}".encode() \
        in busy.stderr
    # Now the same pid names a process started at another time (a pid reused).
    with sqlite3.connect(db_path) as db:
        db.execute("DELETE FROM recordings")
    assert _half(db_path, cassette, {"host": host, "pid": sleeper.pid,
                                     "started": started + 1}) == rid
    doctor = ct("doctor", "--db", str(db_path))
    assert doctor.returncode == 1 and f"{rid}  half imported".encode() in doctor.stdout
    again = ct("import", str(cassette), "--db", str(db_path))
    assert again.returncode == 0, again.stderr
    assert b"a half import replaced" in again.stderr
    ((stored_id, ended, events),) = _stored(db_path)
    assert stored_id == rid and ended is not None
    assert events == cassette.read_bytes().count(b"\n") - 1


def test_a_stale_look_deletes_nothing(db_path: Path, tmp_path: Path) -> None:
    cassette = tmp_path / "c.ndjson"
    _big_cassette(cassette, 10)
    rid = _half(db_path, cassette, _gone_importer())
    store = open_settled_store(str(db_path))
    try:
        state = store.import_state(rid)
        assert state is not None and state[0] is None
        # Another import replaced the half between this one's look and its delete.
        assert not store.delete_half_import(rid, state[1].replace("pid", "pid ", 1))
        assert store.import_state(rid) == state
        assert store.delete_half_import(rid, state[1])
        assert store.import_state(rid) is None
    finally:
        store.close()


@pytest.mark.slow
def test_two_imports_replacing_one_dead_half_store_it_once(
        db_path: Path, tmp_path: Path) -> None:
    cassette = tmp_path / "c.ndjson"
    _big_cassette(cassette, 20_000)
    total = cassette.read_bytes().count(b"\n") - 1
    for _round in range(3):
        with sqlite3.connect(db_path) as db:
            if db.execute("SELECT name FROM sqlite_master WHERE name = 'recordings'"
                          ).fetchone():
                db.execute("DELETE FROM recordings")
        rid = _half(db_path, cassette, _gone_importer())
        both = [subprocess.Popen([PY, "-m", "claudetrace", "import", str(cassette),
                                  "--db", str(db_path)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE) for _ in range(2)]
        said = [proc.communicate(timeout=300) for proc in both]
        errs = [err.decode() for _out, err in said]
        replaced = [e for e in errs if "a half import replaced" in e]
        assert len(replaced) == 1, errs
        (other,) = [e for e in errs if e not in replaced]
        assert "unchanged" in other or "being imported by process" in other, errs
        assert [out.decode().split() for out, _ in said].count([rid]) >= 1
        ((stored_id, ended, events),) = _stored(db_path)
        assert (stored_id, events) == (rid, total) and ended is not None
    again = ct("import", str(cassette), "--db", str(db_path))
    assert again.returncode == 0 and b"unchanged" in again.stderr


def test_two_imports_of_one_folder_at_once_say_each_session_imported_once(
        db_path: Path, tmp_path: Path) -> None:
    """Both said "50 imported": the one that found a session stored by the other
    meanwhile (the same recording id) wrote it again over the same events and
    called that an import.  It is ``unchanged`` (or ``updated``) now."""
    from claudetrace.bench.transcripts import write_tree

    projects = tmp_path / "projects"
    write_tree(projects, sessions=50, size=5 << 20, agents=2)
    assert ct("db", "upgrade", "--db", str(db_path)).returncode == 0  # not a race of migrations
    both = [subprocess.Popen([PY, "-m", "claudetrace", "import", "--db", str(db_path),
                              str(projects)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(2)]
    said = [proc.communicate(timeout=300) for proc in both]
    assert [proc.returncode for proc in both] == [0, 0], said
    summaries = [err.splitlines()[-1] for _out, err in said]
    counts = [dict((what, int(n)) for n, what in (
        part.split() for part in summary.removeprefix("import: ").split(", ")))
        for summary in summaries]
    assert sum(c["imported"] for c in counts) == 50, summaries
    assert all(sum(c.values()) == 50 for c in counts), summaries
    assert len(_stored(db_path)) == 50
    # Each session's id said once on stdout, by the import that stored it.
    ids = [line for out, _err in said for line in out.split()]
    assert len(ids) == len(set(ids)) == 50


def test_prune_leaves_a_recording_a_live_import_is_writing(
        db_path: Path, tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    cassette = tmp_path / "c.ndjson"
    _big_cassette(cassette, 50)
    started = start_time(sleeper.pid)
    host = os.uname().nodename
    rid = _half(db_path, cassette, {"host": host, "pid": sleeper.pid, "started": started})
    pruned = ct("prune", "--db", str(db_path), "--older-than", "0s", "--yes")
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.startswith(
        b"0 recordings (0 events, 0.0 MB of lines) match; 1 still running or being imported"), \
        pruned.stdout
    assert [r[0] for r in _stored(db_path)] == [rid]
    # Its importer gone (a pid that names no process): a half left behind, pruned.
    with sqlite3.connect(db_path) as db:
        db.execute("DELETE FROM recordings")
    _half(db_path, cassette, _gone_importer())
    pruned = ct("prune", "--db", str(db_path), "--older-than", "0s", "--yes")
    assert pruned.returncode == 0 and b"deleted 1 recording" in pruned.stdout, pruned.stdout
    assert _stored(db_path) == []


def test_a_half_replaced_is_never_missing_to_another_import(
        db_path: Path, tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """The race of two imports replacing one dead half: the one that deleted it
    inserted its own row later, and the other, looking in between, found nothing
    stored, imported it too and could store it first (said ``imported``, the
    first one ``being imported``).  The replacement's row now comes in the
    delete's transaction: the other finds the recording being imported."""
    from claudetrace.cassette import read_cassette
    from claudetrace.store.ingest import info_from_header

    cassette = tmp_path / "c.ndjson"
    _big_cassette(cassette, 50)
    rid = _half(db_path, cassette, _gone_importer())
    whole = read_cassette(cassette)
    replacement = info_from_header(whole.header)
    replacement.id, replacement.ended_ns = rid, None  # starting, as an import inserts it
    replacement.extra["importer"] = {"host": os.uname().nodename, "pid": sleeper.pid,
                                     "started": start_time(sleeper.pid)}
    store = open_settled_store(str(db_path))
    try:
        state = store.import_state(rid)
        assert state is not None
        assert store.delete_half_import(rid, state[1], replacement)
        after = store.import_state(rid)
        assert after is not None and after[0] is None and str(sleeper.pid) in after[1]
    finally:
        store.close()
    busy = ct("import", str(cassette), "--db", str(db_path))
    assert busy.returncode == 1, busy.stderr
    assert f"being imported by process {sleeper.pid} into recording {rid}".encode() \
        in busy.stderr
    assert _stored(db_path) == [(rid, None, 0)]


@pytest.mark.slow
def test_prune_while_an_import_writes_deletes_nothing_it_writes(
        db_path: Path, tmp_path: Path) -> None:
    _, total, importer = _importing(tmp_path, db_path, 60_000, subprocess.PIPE)
    try:
        _wait_some_stored(db_path)
        pruned = ct("prune", "--db", str(db_path), "--older-than", "0s", "--yes")
    finally:
        out, err = importer.communicate(timeout=300)
    assert importer.returncode == 0, err
    assert pruned.returncode == 0, pruned.stderr
    assert b"1 still running or being imported, left alone" in pruned.stdout, pruned.stdout
    (rid,) = out.decode().split()
    ((stored_id, ended, events),) = _stored(db_path)
    assert (stored_id, events) == (rid, total) and ended is not None
