"""Referential integrity on SQLite: no delete, by the store or by hand, leaves orphans
(migration 0006; PostgreSQL's are in test_store_postgres.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from claudetrace.cassette import read_cassette
from claudetrace.store import Store, open_store

CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"


def _children(db_path: Path) -> tuple[int, int, int]:
    with sqlite3.connect(db_path) as conn:
        return tuple(  # type: ignore[return-value]
            conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("events", "event_tools", "usage_calls"))


def _two_recordings(store: Store) -> tuple[str, str]:
    cassette = read_cassette(CASSETTES / "hooks.ndjson")
    return store.import_cassette(cassette), store.import_cassette(cassette)


def test_a_delete_by_hand_with_foreign_keys_off_leaves_no_orphans(
        store: Store, db_path: Path) -> None:
    gone, kept = _two_recordings(store)
    events, tools, calls = _children(db_path)
    assert events and tools and calls
    with sqlite3.connect(db_path) as conn:  # as the sqlite3 shell: foreign keys off
        assert conn.execute("PRAGMA foreign_keys").fetchone() == (0,)
        conn.execute("DELETE FROM recordings WHERE id = ?", (gone,))
    assert _children(db_path) == (events // 2, tools // 2, calls // 2)
    assert store.count_events(kept) == events // 2
    with sqlite3.connect(db_path) as conn:
        conn.execute("DELETE FROM recordings")
    assert _children(db_path) == (0, 0, 0)


def test_the_store_deletes_a_recording_with_its_rows(store: Store, db_path: Path) -> None:
    gone, kept = _two_recordings(store)
    events, tools, calls = _children(db_path)
    store.delete_recording(gone)
    assert _children(db_path) == (events // 2, tools // 2, calls // 2)
    assert [r.id for r in store.list_recordings()] == [kept]


def test_the_migration_deletes_orphans_left_before_it(db_path: Path) -> None:
    from alembic import command

    from claudetrace.store.engine import alembic_config

    store = open_store(str(db_path))
    gone, kept = _two_recordings(store)
    with store.engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0005_postgres_bulk_events")
    store.close()
    with sqlite3.connect(db_path) as conn:  # before 0006: orphans by hand
        conn.execute("DELETE FROM recordings WHERE id = ?", (gone,))
        orphans = conn.execute("SELECT count(*) FROM events WHERE recording_id = ?",
                               (gone,)).fetchone()[0]
    assert orphans > 0
    store = open_store(str(db_path))
    try:
        assert store.count_events(gone) == 0
        assert store.count_events(kept) == orphans
        with sqlite3.connect(db_path) as conn:
            assert conn.execute("SELECT count(*) FROM event_tools t WHERE NOT EXISTS "
                                "(SELECT 1 FROM recordings r WHERE r.num = t.rec)",
                                ).fetchone() == (0,)
    finally:
        store.close()
