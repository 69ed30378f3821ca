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


def test_usage_call_rows_store_every_number_as_the_engines_take_it() -> None:
    """The one-test path of ``usage_call_rows`` keeps exactly what
    :func:`claudetrace.store.values.number` makes of each number: ints past 64
    bits clamped, a cost that is not finite made 0.0, a bool left a bool."""
    from claudetrace.store import values
    from claudetrace.store.rows import usage_call_rows

    calls = [
        ("msg_1", 10, "m", 1, 2, 3, 4, 0.5, "estimate"),
        ("msg_2", 10, "m", 2**70, -(2**70), 3, 4, None, "unknown"),
        ("msg_3", 10, "m", 1, 2, 3, 4, float("nan"), "cli"),
        ("msg_4", 10, "m", True, 2, 3, 4, float("inf"), "cli"),
        ("msg_5", 2**64, "m" * 150, 1, 2, 3, 4, 1, "cli"),
        ("msg_6", 10, "m", 1, 2, 3, 4, 0.5, "estimate", 3),  # of the 4 writes, 3 for an hour
        ("msg_7", 10, "m", 1, 2, 3, 4, 0.5, "estimate", 2**70),
    ]
    rows = usage_call_rows("r", calls)
    assert rows == [("r", c[0], values.number(c[1]), c[2][:100], *map(values.number, c[3:8]),
                     c[8], values.number(c[9]) if len(c) > 9 else 0, False) for c in calls]
    assert [r[10] for r in rows[5:]] == [3, values.INT64_MAX]
    assert rows[1][4:6] == (values.INT64_MAX, values.INT64_MIN)
    assert rows[2][8] == 0.0 and rows[3][8] == 0.0
