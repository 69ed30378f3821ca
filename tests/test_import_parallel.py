"""A folder imported with a second process converting ahead
(claudetrace.formats.imports.import_units ``parallel``) stores exactly what one
unit at a time stores: the same recordings, ids, events, search entries and usage
rows, the same answers in the same order, and no spool file left behind."""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from claudetrace.bench.transcripts import write_tree
from claudetrace.formats.imports import Converting, Planner, import_units
from claudetrace.formats.spool import spool_folder, use_folder
from claudetrace.indexer import open_settled_store

CORPUS = Path(__file__).parent / "fixtures" / "transcripts" / "projects"
#: Sessions resumed (one conversation in several files: one recording).
RESUMED = Path(__file__).parent / "fixtures" / "transcripts" / "resumed" / "projects"


def _dump(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    with sqlite3.connect(db) as conn:
        return {
            "recordings": conn.execute("SELECT * FROM recordings ORDER BY id").fetchall(),
            "events": conn.execute(
                "SELECT r.id, e.* FROM events e JOIN recordings r ON r.num = e.rec "
                "ORDER BY r.id, e.seq").fetchall(),
            "event_tools": conn.execute(
                "SELECT r.id, seq, tool_use_id, tool_name, kind FROM event_tools t "
                "JOIN recordings r ON r.num = t.rec "
                "ORDER BY r.id, seq, tool_use_id, kind").fetchall(),
            "usage_calls": conn.execute(
                "SELECT * FROM usage_calls ORDER BY recording_id, call_id").fetchall(),
            # Each entry under its own event's rowid.
            "event_search": conn.execute(
                "SELECT r.id, e.seq, s.words FROM event_search s "
                "JOIN events e ON e.rowid = s.rowid JOIN recordings r ON r.num = e.rec "
                "ORDER BY 1, 2").fetchall(),
            "entries": conn.execute("SELECT count(*) FROM event_search").fetchall(),
        }


def _import(root: Path, db: Path, parallel: bool, units: Any = None) -> list[tuple[str, ...]]:
    if units is None:
        units, _skipped = Planner().plan([root])
    store = open_settled_store(str(db), create=True)
    try:
        return [(str(done.path), done.action, done.recording_id or "", done.note)
                for done in import_units(store, units, parallel=parallel)]
    finally:
        store.close()


@pytest.fixture
def spools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary folder of its own for the spool files (of both processes): this
    process's spool folder while the test runs.  The folder an importer makes lasts
    as long as its process (the first test to import would have found it here, left
    behind by design); its files must not."""
    before = spool_folder()
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)
    use_folder(str(folder))
    yield folder
    use_folder(before)


@pytest.mark.parametrize("shape", ["corpus", "resumed", "bench"])
def test_converting_ahead_stores_what_one_at_a_time_stores(
        shape: str, tmp_path: Path, ct_env: Path, spools: Path) -> None:
    root = tmp_path / "projects"
    if shape == "corpus":  # every layout and damage the transcript tests know
        shutil.copytree(CORPUS, root)
    elif shape == "resumed":  # resumed chains and forks among plain sessions
        shutil.copytree(CORPUS, root)
        shutil.copytree(RESUMED, root, dirs_exist_ok=True)
    else:
        write_tree(root, sessions=5, size=500_000, agents=3)
    one, ahead = tmp_path / "one.db", tmp_path / "ahead.db"
    said_one = _import(root, one, parallel=False)
    said_ahead = _import(root, ahead, parallel=True)
    assert said_ahead == said_one
    assert {action for _path, action, _rid, _note in said_one} >= {"imported"}
    dump = _dump(one)
    assert _dump(ahead) == dump
    if shape == "resumed":  # the chain of three files is one recording, resumes listed
        assert any("resumed_as" in str(row) and "5e550001" in str(row)
                   for row in dump["recordings"])
    assert list(spools.iterdir()) == []

    # Again: unchanged; then one session grown and one file cut short.
    assert {a for _p, a, _r, _n in _import(root, ahead, parallel=True)} == {"unchanged"}
    mains = sorted(root.glob("*/*.jsonl"), key=lambda p: p.stat().st_size)
    grown, cut = mains[-1], mains[-2]
    with grown.open("ab") as out:
        out.write(grown.read_bytes().splitlines(keepends=True)[-1])
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    said_one = _import(root, one, parallel=False)
    said_ahead = _import(root, ahead, parallel=True)
    assert said_ahead == said_one
    assert {"updated", "truncated"} <= {a for _p, a, _r, _n in said_one}
    assert _dump(ahead) == _dump(one)
    assert list(spools.iterdir()) == []


def test_a_unit_the_second_process_cannot_read_is_skipped_as_it_would_be(
        tmp_path: Path, ct_env: Path, spools: Path) -> None:
    root = tmp_path / "projects"
    write_tree(root, sessions=4, size=200_000, agents=1)
    units, _skipped = Planner().plan([root])
    # Planned as a transcript, then written over with lines that carry no time.
    main = units[1].path
    for broken in [main, *main.with_suffix("").rglob("*.jsonl")]:
        lines = [json.loads(line) for line in broken.read_text().splitlines()]
        broken.write_text("".join(json.dumps({k: v for k, v in line.items() if k != "timestamp"})
                                  + "\n" for line in lines))
    said_one = _import(root, tmp_path / "one.db", False, units)
    said_ahead = _import(root, tmp_path / "ahead.db", True, units)
    assert said_ahead == said_one
    assert [a for _p, a, _r, _n in said_one] == ["imported", "skipped", "imported", "imported"]
    assert "no timestamp" in said_one[1][3]
    assert _dump(tmp_path / "ahead.db") == _dump(tmp_path / "one.db")
    assert list(spools.iterdir()) == []


def _import_converting(db: Path, units: Any) -> list[tuple[str, ...]]:
    """As ``import`` into a new SQLite file: the converting process started on
    ``units`` first, the store opened (made) after."""
    with Converting.start(units) as converting:
        store = open_settled_store(str(db), create=True)
        try:
            return [(str(done.path), done.action, done.recording_id or "", done.note)
                    for done in import_units(store, units, converting=converting)]
        finally:
            store.close()


def test_converting_started_before_the_store_stores_what_one_at_a_time_stores(
        tmp_path: Path, ct_env: Path, spools: Path) -> None:
    root = tmp_path / "projects"
    write_tree(root, sessions=5, size=500_000, agents=3)
    units, _skipped = Planner().plan([root])
    one, ahead = tmp_path / "one.db", tmp_path / "ahead.db"
    said_one = _import(root, one, False, units)
    assert _import_converting(ahead, units) == said_one
    assert _dump(ahead) == _dump(one)
    assert list(spools.iterdir()) == []
    # Started on a store that holds every session already: each conversion made
    # before its look is thrown away, nothing is stored again.
    again = _import_converting(ahead, units)
    assert {action for _p, action, _r, _n in again} == {"unchanged"}
    assert _dump(ahead) == _dump(one)
    assert list(spools.iterdir()) == []


def test_converting_started_for_a_store_that_fails_leaves_no_spool(
        tmp_path: Path, ct_env: Path, spools: Path) -> None:
    root = tmp_path / "projects"
    write_tree(root, sessions=4, size=200_000, agents=1)
    units, _skipped = Planner().plan([root])
    with pytest.raises(RuntimeError), Converting.start(units):
        raise RuntimeError("the store could not be made")
    assert list(spools.iterdir()) == []


@pytest.mark.parametrize("parallel", [False, True])
def test_sessions_stored_a_batch_at_a_time_are_said_once_committed(
        parallel: bool, tmp_path: Path, ct_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Several sessions go in one transaction: each is yielded once its batch is
    committed (another connection sees it), and an import stopped in the middle
    of a batch leaves none of that batch, which the next import stores."""
    from claudetrace.formats import imports

    monkeypatch.setattr(imports, "BATCH_UNITS", 2)
    root, db = tmp_path / "projects", tmp_path / "batch.db"
    write_tree(root, sessions=5, size=300_000, agents=1)
    units, _skipped = Planner().plan([root])
    store = open_settled_store(str(db), create=True)

    def stored() -> set[str]:
        with sqlite3.connect(db) as conn:
            return {r[0] for r in conn.execute("SELECT id FROM recordings")}

    try:
        said = import_units(store, units, parallel=parallel)
        first = [next(said), next(said)]
        assert {d.action for d in first} == {"imported"}
        assert stored() == {d.recording_id for d in first}
        said.close()  # stopped (Ctrl-C, killed) with the second batch under way
        assert stored() == {d.recording_id for d in first}
        again = list(import_units(store, units, parallel=parallel))
    finally:
        store.close()
    assert [d.action for d in again] == ["unchanged"] * 2 + ["imported"] * 3
    assert stored() == {d.recording_id for d in again}
