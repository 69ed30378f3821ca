"""Importing an unchanged tree again: the files' ``stat`` and one read of the store,
nothing more (no transcript opened, no second process, no event model imported,
nothing written), and still exact: a file changed in any way is read again."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace.bench.transcripts import write_tree
from claudetrace.cli import cli
from claudetrace.formats.imports import Watcher
from claudetrace.store import Store
from tests.test_store_postgres import fresh_database, pg_url  # noqa: F401  (the fixture)

PY = sys.executable
CORPUS = Path(__file__).parent / "fixtures" / "transcripts" / "projects"

#: ``claudetrace import`` in a process that notes, through Python's audit hooks,
#: every transcript it opens and every process it starts, and which of the
#: converter's modules it imported; written as JSON to the first argument.
AUDITED = """
import atexit, json, sys
report = sys.argv.pop(1)
opened, started = [], []
def hook(event, args):
    if event == "open" and str(args[0]).endswith(".jsonl"):
        opened.append(str(args[0]))
    elif event in ("subprocess.Popen", "os.posix_spawn", "os.fork", "os.exec"):
        started.append(event)
sys.addaudithook(hook)
def done():
    heavy = sorted(m for m in sys.modules if m.startswith(
        ("claudetrace.model", "claudetrace.formats.claude_code", "sqlalchemy")))
    with open(report, "w") as out:
        json.dump({"opened": opened, "started": started, "modules": heavy}, out)
atexit.register(done)
from claudetrace.cli import main
main(sys.argv[1:])
"""


def _files(db: Path) -> dict[str, tuple[str, int]]:
    """The store's files (but the shared-memory index readers write, and the empty
    log a read-only reader makes when there is none): digest, mtime."""
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(db.parent.glob(db.name + "*")) if not p.name.endswith("-shm")
            and not (p.name.endswith("-wal") and p.stat().st_size == 0)}


def _import(tree: Path, db: Path) -> str:
    done = CliRunner().invoke(cli, ["import", str(tree), "--db", str(db)])
    assert done.exit_code == 0, done.output
    return done.stderr.splitlines()[-1]


def test_an_unchanged_tree_is_found_so_from_stat_alone(tmp_path: Path, db_path: Path) -> None:
    tree = write_tree(tmp_path / "projects", sessions=5, size=300_000, agents=3)
    assert _import(tree.root, db_path) == "import: 5 imported, 0 updated, 0 unchanged"
    before = _files(db_path)
    report = tmp_path / "report.json"
    run = subprocess.run([PY, "-c", AUDITED, str(report), "import", str(tree.root), "--db",
                          str(db_path)], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines()[-1] == "import: 0 imported, 0 updated, 5 unchanged"
    seen: dict[str, Any] = json.loads(report.read_text())
    assert seen == {"opened": [], "started": [], "modules": []}
    assert _files(db_path) == before


def test_the_same_files_reached_by_another_path_are_unchanged(
    tmp_path: Path, db_path: Path
) -> None:
    # A symlinked folder, a folder then the file in it: the same file, not a second
    # file of its session to store it again with.
    tree = write_tree(tmp_path / "projects", sessions=2, size=100_000, agents=1)
    link = tmp_path / "plink"
    link.symlink_to(tree.root)
    assert _import(tree.root, db_path) == "import: 2 imported, 0 updated, 0 unchanged"
    for path in (link, tree.root, link, tree.root):
        assert _import(path, db_path) == "import: 0 imported, 0 updated, 2 unchanged"
    one = sorted(tree.root.glob("*/*.jsonl"))[0]
    for path in (one, link / one.relative_to(tree.root), tree.root):
        assert _import(path, db_path).endswith(" 0 updated, 1 unchanged" if path != tree.root
                                               else " 0 updated, 2 unchanged")


def _rewrite(path: Path, how: str) -> None:
    """Change a word of ``path``, keeping its size and modification time."""
    st = path.stat()
    data = path.read_bytes()
    word = b"checkout"
    assert word in data
    changed = data.replace(word, b"checkin!", 1)
    assert len(changed) == len(data)
    if how == "in place":
        with path.open("r+b") as out:
            out.write(changed)
    else:
        other = path.with_suffix(".tmp")
        other.write_bytes(changed)
        os.replace(other, path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    now = path.stat()
    assert (now.st_size, now.st_mtime_ns) == (st.st_size, st.st_mtime_ns)


@pytest.mark.parametrize("how", ["in place", "renamed over"])
def test_a_file_rewritten_to_its_size_and_time_is_read_again(
    tmp_path: Path, db_path: Path, how: str
) -> None:
    tree = write_tree(tmp_path / "projects", sessions=3, size=150_000, agents=2)
    _import(tree.root, db_path)
    _rewrite(sorted(tree.root.glob("*/*.jsonl"))[0], how)
    assert _import(tree.root, db_path) == "import: 0 imported, 1 updated, 2 unchanged"
    assert _import(tree.root, db_path) == "import: 0 imported, 0 updated, 3 unchanged"


def test_a_file_grown_is_read_again_and_the_rest_is_not(tmp_path: Path, db_path: Path) -> None:
    tree = write_tree(tmp_path / "projects", sessions=3, size=150_000, agents=2)
    _import(tree.root, db_path)
    side = sorted(tree.root.glob("*/*/subagents/agent-*.jsonl"))[0]
    with side.open("ab") as out:
        out.write(side.read_bytes().splitlines(keepends=True)[-1])
    report = tmp_path / "report.json"
    run = subprocess.run([PY, "-c", AUDITED, str(report), "import", str(tree.root), "--db",
                          str(db_path)], capture_output=True, text=True, check=False)
    assert run.stderr.splitlines()[-1] == "import: 0 imported, 1 updated, 2 unchanged"
    opened = {Path(p) for p in json.loads(report.read_text())["opened"]}
    # The grown session's files are read (by the converting process, when there is
    # one); no other session's.
    owner = side.parent.parent
    assert {p.parent for p in opened if p.parent != owner.parent} <= {side.parent}
    assert all(p.name.startswith(owner.name) for p in opened if p.parent == owner.parent)


def test_a_watch_sees_a_file_rewritten_to_its_size_and_time(
    tmp_path: Path, store: Store
) -> None:
    tree = write_tree(tmp_path / "projects", sessions=2, size=100_000, agents=1)
    watcher = Watcher(store, [tree.root])
    said: list[Any] = []
    watcher.poll(said.append, lambda path, exc: said.append(exc))
    assert [d.action for d in said] == ["imported"] * 2
    said.clear()
    path = sorted(tree.root.glob("*/*.jsonl"))[0]
    _rewrite(path, "in place")
    watcher.poll(said.append, lambda path, exc: said.append(exc))
    assert [(d.path, d.action) for d in said] == [(path, "updated")]


def test_what_a_session_folder_holds_besides_is_skipped_again_unread(
    tmp_path: Path, db_path: Path
) -> None:
    corpus = Path(shutil.copytree(CORPUS, tmp_path / "projects"))
    argv = ["import", str(corpus), "--db", str(db_path)]
    first = CliRunner().invoke(cli, argv)
    assert first.exit_code == 1  # two files skipped
    report = tmp_path / "report.json"
    run = subprocess.run([PY, "-c", AUDITED, str(report), *argv], capture_output=True,
                         text=True, check=False)
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1] == (
        "import: 0 imported, 0 updated, 6 unchanged, 2 skipped; "
        "1 file joined to another file's session")
    said = [line for line in run.stderr.splitlines() if ": skipped: " in line]
    assert said == [line for line in first.stderr.splitlines() if ": skipped: " in line]
    assert len(said) == 2
    # A workflow's journal, filed under its session, is remembered with it; a file
    # beside the sessions of a project, with the project's first session.
    assert json.loads(report.read_text())["opened"] == []
    assert any("journal.jsonl: skipped: not a claudetrace cassette" in line for line in said)
    assert any("notes.jsonl: skipped: not a claudetrace cassette" in line for line in said)


def _audited(tmp_path: Path, argv: list[str]) -> tuple[subprocess.CompletedProcess[str], Any]:
    report = tmp_path / "report.json"
    run = subprocess.run([PY, "-c", AUDITED, str(report), *argv], capture_output=True,
                         text=True, check=False)
    return run, json.loads(report.read_text())


def test_files_that_are_no_transcripts_are_skipped_again_unread_and_unwritten(
    tmp_path: Path, db_path: Path
) -> None:
    tree = write_tree(tmp_path / "projects", sessions=3, size=60_000, agents=1)
    project = sorted(p for p in tree.root.iterdir() if p.is_dir())[0]
    others = {
        project / "notes.jsonl": b'{"note": "call the plumber"}\n',
        tree.root / "tool.log.jsonl": b'{"level": "info", "msg": "started"}\n',
        tree.root / "empty-project" / "other.jsonl": b'{"level": "debug"}\n',
    }
    for path, data in others.items():
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
    argv = ["import", str(tree.root), "--db", str(db_path)]
    first = CliRunner().invoke(cli, argv)
    assert first.exit_code == 1
    assert first.stderr.splitlines()[-1] == "import: 3 imported, 0 updated, 0 unchanged, 3 skipped"
    before = _files(db_path)
    run, seen = _audited(tmp_path, argv)
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1] == "import: 0 imported, 0 updated, 3 unchanged, 3 skipped"
    assert sorted(line for line in run.stderr.splitlines() if ": skipped: " in line) == sorted(
        line for line in first.stderr.splitlines() if ": skipped: " in line)
    assert seen == {"opened": [], "started": [], "modules": []}
    assert _files(db_path) == before
    # One changed (or new) is read again, once; what it is now is remembered.
    notes = project / "notes.jsonl"
    notes.write_bytes(b'{"note": "and the electrician"}\n')
    (project / "more.jsonl").write_bytes(b'{"x": 1}\n')
    run, seen = _audited(tmp_path, argv)
    assert run.stderr.splitlines()[-1] == "import: 0 imported, 0 updated, 3 unchanged, 4 skipped"
    assert sorted(seen["opened"]) == sorted([str(project / "more.jsonl"), str(notes)])
    written = _files(db_path)
    assert written != before
    run, seen = _audited(tmp_path, argv)
    assert run.stderr.splitlines()[-1] == "import: 0 imported, 0 updated, 3 unchanged, 4 skipped"
    assert seen == {"opened": [], "started": [], "modules": []}
    assert _files(db_path) == written


def test_a_watch_reads_a_file_that_is_no_transcript_once(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from claudetrace.formats import imports

    tree = write_tree(tmp_path / "projects", sessions=1, size=20_000, agents=0)
    notes = tree.root / "notes.jsonl"
    notes.write_bytes(b'{"note": "call the plumber"}\n')
    probed: list[Path] = []
    real = imports.probe

    def probe(path: Path) -> Any:
        probed.append(path)
        return real(path)

    monkeypatch.setattr(imports, "probe", probe)
    watcher = Watcher(store, [tree.root])
    said: list[Any] = []
    watcher.poll(said.append, lambda path, exc: said.append(exc))
    assert [d.action for d in said] == ["skipped", "imported"]
    assert probed.count(notes) == 1
    watcher.poll(said.append, lambda path, exc: said.append(exc))
    assert probed.count(notes) == 1
    assert len(said) == 2
    notes.write_bytes(b'{"note": "and the electrician"}\n')
    watcher.poll(said.append, lambda path, exc: said.append(exc))
    assert probed.count(notes) == 2


@pytest.fixture
def pg_db(request: pytest.FixtureRequest) -> str:
    """A fresh database on the module's PostgreSQL server."""
    pytest.importorskip("psycopg")
    server = request.getfixturevalue("pg_url")
    return fresh_database(server, f"reimport_{abs(hash(request.node.name)) % 10**9}")


@pytest.mark.usefixtures("ct_env")
def test_an_unchanged_tree_on_postgresql_opens_no_file(tmp_path: Path, pg_db: str) -> None:
    tree = write_tree(tmp_path / "projects", sessions=3, size=60_000, agents=2)
    (tree.root / "notes.jsonl").write_bytes(b'{"note": "call the plumber"}\n')
    argv = ["import", str(tree.root), "--db", pg_db]
    first = subprocess.run([PY, "-m", "claudetrace", *argv], capture_output=True, text=True,
                           check=False)
    assert first.stderr.splitlines()[-1] == "import: 3 imported, 0 updated, 0 unchanged, 1 skipped"
    run, seen = _audited(tmp_path, argv)
    assert run.stderr.splitlines()[-1] == "import: 0 imported, 0 updated, 3 unchanged, 1 skipped"
    # What was stored is read in one query, through psycopg alone: no file opened
    # to plan, no process started, neither the converter nor SQLAlchemy loaded.
    assert seen == {"opened": [], "started": [], "modules": []}


def test_an_unchanged_import_sweeps_the_spool_folders_of_dead_importers(
    tmp_path: Path, db_path: Path
) -> None:
    from claudetrace.formats.owner import FOLDER_PREFIX, start_time

    tree = write_tree(tmp_path / "projects", sessions=2, size=40_000, agents=1)
    _import(tree.root, db_path)
    before = _files(db_path)
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    argv = [PY, "-c", AUDITED, str(tmp_path / "report.json"), "import", str(tree.root),
            "--db", str(db_path)]
    # None to sweep: the temporary folder is only listed.
    run = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert run.stderr.splitlines()[-1] == "import: 0 imported, 0 updated, 2 unchanged"
    assert list(temp.iterdir()) == []
    host = os.uname().nodename
    gone = subprocess.Popen([PY, "-c", "pass"])
    gone.wait()
    alive = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"])
    try:
        dead = temp / f"{FOLDER_PREFIX}{host}-{gone.pid}-0-abc"
        live = temp / f"{FOLDER_PREFIX}{host}-{alive.pid}-{start_time(alive.pid) or 0}-abc"
        for folder in (dead, live):
            folder.mkdir()
            (folder / "claudetrace-import-1").write_bytes(b"x" * 1000)
        run = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        assert run.stderr.splitlines()[-1] == "import: 0 imported, 0 updated, 2 unchanged"
        assert [p.name for p in temp.iterdir()] == [live.name]
    finally:
        alive.kill()
        alive.wait()
    seen = json.loads((tmp_path / "report.json").read_text())
    assert seen == {"opened": [], "started": [], "modules": []}
    assert _files(db_path) == before
