"""Migration 0009_footprint: events keep no copy of the line's uuid and session_id,
up and down with every line and the search index intact (SQLite here; PostgreSQL
in test_store_postgres.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from claudetrace.cassette import read_cassette
from claudetrace.store import open_store
from claudetrace.store.search import search

CASSETTES = Path(__file__).parent / "fixtures" / "samples"


def _columns(db_path: Path) -> set[str]:
    with sqlite3.connect(db_path) as conn:
        return {row[1] for row in conn.execute("PRAGMA table_info(events)")}


def test_0009_drops_the_copies_and_a_downgrade_fills_them_from_the_lines(db_path: Path) -> None:
    from alembic import command

    from claudetrace.store.engine import alembic_config, create_store_engine

    store = open_store(str(db_path))
    sample = sorted(CASSETTES.glob("*.cassette.ndjson"))[0]
    rid = store.import_cassette(read_cassette(sample))
    events = [(e.seq, e.direction, e.t_ns, e.data, e.eol) for e in store.iter_events(rid)]
    said = [h.seq for h in search(store, "the")]
    store.close()
    assert not {"uuid", "session_id"} & _columns(db_path)
    engine = create_store_engine(f"sqlite:///{db_path}")
    try:
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0008_usage_rollups")
    finally:
        engine.dispose()
    assert {"uuid", "session_id"} <= _columns(db_path)
    with sqlite3.connect(db_path) as conn:
        filled = conn.execute("SELECT count(*), count(uuid), count(session_id) FROM events"
                              " WHERE instr(CAST(data AS TEXT), '\"session_id\"') > 0"
                              ).fetchone()
    assert filled[0] > 0 and filled[2] == filled[0] and filled[1] > 0
    # And up again: the same lines, byte for byte, and the index finds the same ones.
    store = open_store(str(db_path))
    try:
        assert not {"uuid", "session_id"} & _columns(db_path)
        assert [(e.seq, e.direction, e.t_ns, e.data, e.eol)
                for e in store.iter_events(rid)] == events
        assert [h.seq for h in search(store, "the")] == said and said
    finally:
        store.close()
