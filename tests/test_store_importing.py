"""A folder import's new sessions written through sqlite3 alone (claudetrace.store.importing).

``import`` into a plain SQLite file writes each new session stored usage first
through :class:`~claudetrace.store.importing.ImportBatch`; into any other URL
through the store (SQLAlchemy).  Both must leave every table the same, rowids
included; a new file must be made and filled without SQLAlchemy or Alembic;
a session another importer stored meanwhile is the store's to update, never
stored twice; a killed import leaves whole sessions only.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from claudetrace.bench.transcripts import write_tree
from claudetrace.cli import cli
from claudetrace.formats.folding import FOLD_ENV
from claudetrace.formats.imports import Planner, import_units
from claudetrace.store import open_store
from tests.test_import_unfolded import tree  # noqa: F401  (the fixture)


def _import(db: str, root: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(FOLD_ENV, "later")
    done = CliRunner().invoke(cli, ["import", str(root), "--db", db])
    assert done.exit_code in (0, 1), done.output
    return done.output


def _tables(db: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every table's rows with their rowids, but for the time each mark was written."""
    conn = sqlite3.connect(db)
    try:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        out = {}
        for name in names:
            try:
                rows = conn.execute(f'SELECT rowid, * FROM "{name}" ORDER BY rowid').fetchall()
            except sqlite3.OperationalError:  # WITHOUT ROWID
                rows = sorted(conn.execute(f'SELECT * FROM "{name}"').fetchall())
            out[name] = [row[:-1] if name == "unfolded" else row for row in rows]
        return out
    finally:
        conn.close()


def test_the_plain_batch_stores_what_the_store_stores(
        tree: Path, tmp_path: Path, ct_env: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    plain, through_store = tmp_path / "plain.db", tmp_path / "store.db"
    said = _import(str(plain), tree, monkeypatch)
    # Options in the URL: not a plain file, so the store writes it.
    assert _import(f"sqlite:///{through_store}?timeout=30", tree, monkeypatch) == said
    got, want = _tables(plain), _tables(through_store)
    assert len(got["recordings"]) > 6 and len(got["unfolded"]) > 6
    assert len(got["events"]) > 500 and len(got["usage_calls"]) > 100
    assert {name: rows for name, rows in got.items() if want.get(name) != rows} == {}
    assert got.keys() == want.keys()


def test_a_new_store_is_made_and_filled_without_sqlalchemy(tree: Path, tmp_path: Path,  # noqa: F811
                                                          ct_env: Path) -> None:
    db = tmp_path / "new.db"
    # (The fixtures hold sessions converted at once: cost lines, no times.)
    script = (
        "import sys\n"
        "from claudetrace.cli import cli\n"
        "try:\n"
        f"    cli.main(['import', {str(tree / 'bench')!r}, '--db', {str(db)!r}])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in ('sqlalchemy', 'alembic') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, FOLD_ENV: "later"}, timeout=300, check=False)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stderr
    assert "imported" in done.stderr
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT count(*) FROM unfolded").fetchone()[0] == 8
    finally:
        conn.close()


def test_a_session_stored_meanwhile_is_unchanged_not_stored_twice(
        tree: Path, tmp_path: Path, ct_env: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "plain.db"
    _import(str(db), tree, monkeypatch)
    before = _tables(db)
    # What this importer read of the store before another one stored every session.
    units, _skipped = Planner().plan([tree])
    store = open_store(str(db))
    try:
        done = list(import_units(store, units, index={}, usage_first=True, plain=db))
    finally:
        store.close()
    # Found stored by the batch's transaction, from these very files: unchanged,
    # as the store's own path says (not "updated", not stored again).
    assert {d.action for d in done} <= {"unchanged", "skipped"}
    assert any(d.action == "unchanged" for d in done)
    after = _tables(db)
    assert [len(after[t]) for t in ("recordings", "usage_calls", "unfolded")] == \
        [len(before[t]) for t in ("recordings", "usage_calls", "unfolded")]
    for name in ("usage_calls", "usage_hours", "usage_models"):
        assert sorted(row[1:] for row in after[name]) == sorted(row[1:] for row in before[name])


def test_a_killed_import_leaves_whole_sessions_only(
        tmp_path: Path, ct_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "in"
    write_tree(root / "projects", sessions=80, size=16 << 20, agents=2)
    db = tmp_path / "killed.db"
    env = {**os.environ, FOLD_ENV: "later"}
    run = subprocess.Popen([sys.executable, "-m", "claudetrace", "import", str(root), "--db",
                            str(db)], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and run.poll() is None and not db.exists():
        time.sleep(0.05)
    time.sleep(0.5)
    run.send_signal(signal.SIGKILL)
    run.wait()
    conn = sqlite3.connect(db)
    try:
        # Each recording stored holds its lines, its usage rows and its mark.
        for rid, num, count, tokens in conn.execute(
                "SELECT id, num, event_count, input_tokens + output_tokens FROM recordings"
        ).fetchall():
            assert conn.execute("SELECT count(*) FROM events WHERE rec = ?",
                                (num,)).fetchone()[0] == count, rid
            assert conn.execute("SELECT count(*) FROM unfolded WHERE rec = ?",
                                (num,)).fetchone()[0] == 1, rid
            assert conn.execute(
                "SELECT sum(input_tokens + output_tokens) FROM usage_calls"
                " WHERE recording_id = ?", (rid,)).fetchone()[0] == tokens, rid
    finally:
        conn.close()
    again = _import(str(db), root, monkeypatch)
    whole = tmp_path / "whole.db"
    _import(str(whole), root, monkeypatch)
    assert "0 updated" in again.splitlines()[-1]
    got, want = _tables(db), _tables(whole)
    for name in ("usage_calls", "usage_hours", "usage_models"):
        assert sorted(row[1:] for row in got[name]) == sorted(row[1:] for row in want[name])
    assert len(got["recordings"]) == len(want["recordings"]) == 80
