"""Spool files do not outlive the import that made them: they live in a folder of the
importing process's own, removed when it ends, and, when it was killed, by the next
import that spools (``claudetrace/formats/spool.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from claudetrace.bench.transcripts import write_tree
from claudetrace.formats.owner import start_time
from claudetrace.formats.spool import FOLDER_PREFIX, Spool, spool_folder, sweep

PY = sys.executable


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie not reaped yet has)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return True


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as found:
        return [int(child) for child in found.read().split()]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc (Linux)")
def test_an_import_killed_at_its_start_leaves_no_spool_file(
    tmp_path: Path, db_path: Path
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    tree = write_tree(tmp_path / "projects", sessions=24, size=4_800_000, agents=2)
    argv = [PY, "-m", "claudetrace", "import", str(tree.root), "--db", str(db_path)]
    # Into a new SQLite file: the converting process starts first, on 16 sessions.
    importer = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    # Killed once a few sessions are converted ahead, their answers unread in the
    # pipe while the importing process makes the file (or once one is, after a while).
    deadline, first = time.monotonic() + 120, None
    while (spooled := len([p for p in temp.rglob("*") if p.is_file()])) < 3 and not (
            first is not None and time.monotonic() > first + 20):
        assert importer.poll() is None and time.monotonic() < deadline
        first = first if first is not None or not spooled else time.monotonic()
        time.sleep(0.005)
    children = _children(importer.pid)
    importer.send_signal(signal.SIGKILL)
    importer.wait()
    # Its converting process ends by itself (before its next session, or when its
    # answer finds no reader), removing what it was writing.
    while not all(_gone(child) for child in children):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    left = list(temp.iterdir())
    assert left and all(p.name.startswith(FOLDER_PREFIX) and p.is_dir() for p in left)
    # The next import removes the dead one's folder, and its own when it ends.
    again = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines()[-1].startswith("import: 24 imported")
    assert list(temp.iterdir()) == []


def test_only_the_folders_of_processes_gone_are_swept(tmp_path: Path) -> None:
    host = os.uname().nodename
    gone = subprocess.Popen([PY, "-c", "pass"])
    gone.wait()
    alive = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"])
    try:
        started = start_time(alive.pid) or 0
        folders = {
            "gone": tmp_path / f"{FOLDER_PREFIX}{host}-{gone.pid}-0-abc",
            "alive": tmp_path / f"{FOLDER_PREFIX}{host}-{alive.pid}-{started}-abc",
            # The pid of a live process, started at another time: its pid was reused.
            "reused": tmp_path / f"{FOLDER_PREFIX}{host}-{alive.pid}-{started + 1}-abc",
            "elsewhere": tmp_path / f"{FOLDER_PREFIX}other-host-{gone.pid}-0-abc",
            "not ours": tmp_path / f"{FOLDER_PREFIX}{host}-x-0-abc",
        }
        for folder in folders.values():
            folder.mkdir()
            (folder / "claudetrace-import-1").write_bytes(b"x")
        removed = set(sweep(str(tmp_path)))
    finally:
        alive.kill()
        alive.wait()
    expected = ({"gone", "reused"} if start_time(os.getpid()) is not None else {"gone"})
    assert removed == {str(folders[k]) for k in expected}
    assert {p.name for p in tmp_path.iterdir()} == {
        folders[k].name for k in folders.keys() - expected}


def test_a_spool_is_written_in_this_process_folder() -> None:
    spool = Spool()
    try:
        assert Path(spool.name).parent == Path(spool_folder())
        assert Path(spool_folder()).name.startswith(
            f"{FOLDER_PREFIX}{os.uname().nodename}-{os.getpid()}-")
    finally:
        spool.discard()
