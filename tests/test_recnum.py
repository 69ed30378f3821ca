"""A recording's rows keyed by its number (migration 0020_recnum), on SQLite and PostgreSQL.

``events``, ``event_tools`` and ``event_search`` hold ``recordings.num`` in place
of the recording's id (:mod:`claudetrace.store.keys`).  The migration rewrites
them on a populated store: every reader gives what it gave before, SQLite's
events keep their rowids (its search index's), and a recording's rows still go
with it, on both engines.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from claudetrace.cassette import read_cassette
from claudetrace.model.events import Event
from claudetrace.recording import RecordingInfo
from claudetrace.store import Store, open_store
from claudetrace.store.browse import Filters, first_prompts, list_sessions, tool_usage
from claudetrace.store.retention import delete_row_by_hand, orphans
from claudetrace.store.search import recordings_saying, search, search_plain
from tests.test_store_postgres import fresh_database

FIXTURES = Path(__file__).parent / "fixtures"
CASSETTES = sorted([*(FIXTURES / "samples").glob("*.cassette.ndjson"),
                    *(FIXTURES / "cassettes").glob("*.ndjson")])


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path, ct_env: Path) -> Iterator[str]:
    """A new store's URL: a SQLite file, or a database of its own on the session's
    throwaway PostgreSQL cluster."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'claudetrace.db'}"
        return
    server: str = request.getfixturevalue("pg_server")
    name = "recnum_" + re.sub(r"\W", "_", request.node.name).lower()[-40:]
    yield fresh_database(server, name)
    import psycopg

    with psycopg.connect(server.replace("postgresql+psycopg://", "postgresql://"),
                         autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _readers(store: Store) -> dict[str, Any]:
    """What each reader above the store gives for every recording stored."""
    ids = sorted(r.id for r in store.list_recordings())
    return {
        "lines": {rid: [(e.seq, e.direction, e.t_ns, e.data, e.eol, e.wall_ns)
                        for e in store.iter_events(rid)] for rid in ids},
        "counts": {rid: store.count_events(rid) for rid in ids},
        "pages": {rid: [tuple(p) for p in store.iter_line_pages(rid, chunk=7)] for rid in ids},
        "prompts": first_prompts(store, ids),
        "tools": tool_usage(store, ids),
        "listed": [r.id for r in list_sessions(store, Filters())],
        "by tool": [r.id for r in list_sessions(store, Filters(tools=("Bash",)))],
        "search": [(h.recording_id, h.seq) for h in search(store, "the", limit=None)],
        "first hits": [(h.recording_id, h.seq) for h in search(store, "the", limit=5)],
        "saying": recordings_saying(store, "hello"),
        "phrase": recordings_saying(store, "the user"),
    }


def _keys(url: str, key: str) -> dict[str, Any]:
    """The three tables' rows with the recording's id (``key``: the column that
    names it), and on SQLite each event's rowid and its search entry's words."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    named = "x.recording_id" if key == "recording_id" else "r.id"
    joined = "" if key == "recording_id" else " JOIN recordings r ON r.num = x.rec"
    try:
        with engine.connect() as conn:
            out = {
                "events": conn.execute(sa.text(
                    f"SELECT {named}, x.seq, x.type, x.size, x.codec FROM events x{joined} "
                    "ORDER BY 1, 2")).all(),
                "tools": conn.execute(sa.text(
                    f"SELECT x.id, {named}, x.seq, x.tool_use_id, x.kind FROM event_tools x"
                    f"{joined} ORDER BY 1")).all()}
            if engine.dialect.name == "sqlite":
                out["rowids"] = conn.execute(sa.text(
                    f"SELECT x.rowid, {named}, x.seq FROM events x{joined} ORDER BY 1")).all()
                out["words"] = conn.execute(sa.text(
                    "SELECT rowid, words FROM event_search ORDER BY 1")).all()
            else:
                out["words"] = conn.execute(sa.text(
                    f"SELECT {named}, x.seq, x.terms::text FROM event_search x{joined} "
                    "ORDER BY 1, 2")).all()
            return out
    finally:
        engine.dispose()


def _migrate(url: str, target: str) -> None:
    from alembic import command

    from claudetrace.store.engine import alembic_config, create_store_engine

    engine = create_store_engine(url)
    try:
        with engine.begin() as conn:
            if target == "head":
                command.upgrade(alembic_config(conn), target)
            else:
                command.downgrade(alembic_config(conn), target)
    finally:
        engine.dispose()


def test_0020_rewrites_a_populated_store_and_every_reader_is_unchanged(url: str) -> None:
    store = open_store(url)
    try:
        for path in CASSETTES:
            store.import_cassette(read_cassette(path))
        before = _readers(store)
        keyed = _keys(url, "rec")
    finally:
        store.close()
    assert len(before["lines"]) == len(CASSETTES) and before["search"] and before["saying"]
    _migrate(url, "0020_recnum")  # the search entries as 0020 had them
    numbered = _keys(url, "rec")
    _migrate(url, "0019_pgwords")  # the ids back, as 0019 had them
    assert _keys(url, "recording_id") == numbered
    _migrate(url, "head")  # from 0019, with data
    assert _keys(url, "rec") == keyed  # SQLite's rowids and their words kept
    store = open_store(url)
    try:
        assert _readers(store) == before
        assert search_plain(url, "the", limit=None) == search(store, "the", limit=None)
        # Numbered in the order of their ids, and the next one after the last.
        import sqlalchemy as sa

        with store.engine.connect() as conn:
            numbered = conn.execute(sa.text("SELECT id, num FROM recordings ORDER BY id")).all()
        assert [n for _, n in numbered] == list(range(1, len(numbered) + 1))
        info = RecordingInfo.start(["claude"])
        store.create_recording(info)
        store.write_batch(info.id, [Event(0, "out", 0, b'{"type":"system"}')])
        with store.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT num FROM recordings WHERE id = :r"),
                                {"r": info.id}).scalar() == len(numbered) + 1
        # A recording's rows go with it, by the store or by hand.
        gone, by_hand = numbered[0][0], numbered[1][0]
        store.delete_recording(gone)
        delete_row_by_hand(store, by_hand)
        assert orphans(store) == {}
        assert {gone, by_hand}.isdisjoint({h.recording_id for h in
                                           search(store, "the", limit=None)})
        assert store.count_events(gone) == store.count_events(by_hand) == 0
    finally:
        store.close()


def test_0020_leaves_out_rows_whose_recording_is_gone(url: str) -> None:
    """PostgreSQL's ``events`` has had no foreign key since 0005: a row left by
    hand with no recording has no number to take, and is not copied."""
    import sqlalchemy as sa

    store = open_store(url)
    try:
        kept = store.import_cassette(read_cassette(CASSETTES[0]))
    finally:
        store.close()
    _migrate(url, "0019_pgwords")
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            if engine.dialect.name == "sqlite":
                conn.exec_driver_sql("PRAGMA foreign_keys = OFF")
            conn.execute(sa.text(
                "INSERT INTO events (recording_id, seq, direction, t_ns, wall_ns, data, eol, "
                "size, is_json) VALUES ('gone', 0, 'out', 0, 0, :d, true, 2, true)"),
                {"d": b"{}"})
    finally:
        engine.dispose()
    _migrate(url, "head")
    store = open_store(url)
    try:
        assert orphans(store) == {}
        assert store.count_events(kept) > 0
    finally:
        store.close()


def test_search_orders_by_start_not_by_number(url: str) -> None:
    """Numbers follow the order recordings are stored in; search gives the newest
    session first (its start) on both engines: an old session imported after a
    newer one still comes after it, within the newest lines and past them."""
    store = open_store(url)
    try:
        newer = _said(store, "shared words here", started_ns=2 * 10**18)
        older = _said(store, "shared words here too", started_ns=10**18)
        assert [h.recording_id for h in search(store, "shared")] == [newer, older]
        assert [h.recording_id for h in search(store, "shared", limit=None)] == [newer, older]
        assert [h.recording_id for h in search_plain(url, "shared") or []] == [newer, older]
    finally:
        store.close()


def _said(store: Store, text: str, *, started_ns: int) -> str:
    info = RecordingInfo.start(["claude"], started_ns=started_ns)
    store.create_recording(info)
    line = {"type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}}
    store.write_batch(info.id, [Event(0, "out", 0, json.dumps(line).encode())])
    return info.id


def test_a_sqlite_recording_is_numbered_by_the_schema(tmp_path: Path, ct_env: Path) -> None:
    """SQLite numbers a row inserted without one (the trigger), as PostgreSQL's
    identity does: a ``sqlite3`` shell's insert too."""
    path = tmp_path / "claudetrace.db"
    open_store(str(path)).close()
    with sqlite3.connect(path) as conn:
        for rid in ("a" * 26, "b" * 26):
            conn.execute("INSERT INTO recordings (id, tags, argv, cwd, host, env, "
                         "claudetrace_version, source, started_ns, event_count, byte_count, "
                         "turns, tool_calls, tool_errors, input_tokens, output_tokens, "
                         "cache_read_tokens, cache_creation_tokens, cost_usd, is_error, extra) "
                         "VALUES (?, '{}', '[]', '', '', '{}', '', 'proxy', 0, 0, 0, 0, 0, 0, "
                         "0, 0, 0, 0, 0, 0, '{}')", (rid,))
        assert conn.execute("SELECT num FROM recordings ORDER BY id").fetchall() == [(1,), (2,)]
