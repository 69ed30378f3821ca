"""The store on PostgreSQL: a throwaway cluster (initdb/pg_ctl) on a free local port.

Skipped when the PostgreSQL server binaries or psycopg are missing.  As root, the
cluster runs as the ``postgres`` system user (the server refuses to run as root).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from claudetrace.cassette import read_cassette
from claudetrace.errors import StoreError
from claudetrace.model.events import Event
from claudetrace.recording import RecordingInfo
from claudetrace.store import open_store
from claudetrace.store.models import number_of

pytest.importorskip("psycopg")

SAMPLES = sorted((Path(__file__).parent / "fixtures" / "samples").glob("*.cassette.ndjson"))


def fresh_database(server: str, name: str, *, template: str | None = None) -> str:
    """The URL of a database ``name`` made afresh (dropped first) on the server
    ``server`` (:func:`pg_url`), a copy of the database ``template`` if given."""
    import psycopg

    admin = server.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
    return server.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(scope="module")
def pg_url(pg_server: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of this test module's own, made afresh on the session's throwaway
    cluster (``pg_server`` in conftest.py): each module starts from an empty
    database, as it did with a cluster of its own, without paying for one."""
    name = "m_" + re.sub(r"\W", "_", request.module.__name__.rsplit(".", 1)[-1])
    yield fresh_database(pg_server, name)
    import psycopg

    admin = pg_server.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.usefixtures("ct_env")
def test_migrations_import_export_on_postgres(pg_url: str) -> None:
    store = open_store(pg_url)
    try:
        for sample in SAMPLES:
            rid = store.import_cassette(read_cassette(sample))
            back = store.load_cassette(rid)
            original = read_cassette(sample)
            assert [(e.seq, e.direction, e.t_ns, e.data, e.eol) for e in back.events] == [
                (e.seq, e.direction, e.t_ns, e.data, e.eol) for e in original.events
            ]
            assert store.resolve(rid[:20]).id == rid
        assert store.get(rid).claude_code_version == "2.1.330"
    finally:
        store.close()


@pytest.mark.usefixtures("ct_env")
def test_a_proxied_recording_and_cli_export_on_postgres(pg_url: str, tmp_path: Path) -> None:
    data = b'{"type":"system","subtype":"init","session_id":"pg-1"}\n\xff raw\n\nlast'
    done = subprocess.run(
        [sys.executable, "-m", "claudetrace", "proxy", "--db", pg_url, "--name", "pg", "--", "cat"],
        input=data,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == data
    out = tmp_path / "pg.ndjson"
    exported = subprocess.run(
        [sys.executable, "-m", "claudetrace", "export", "pg-1", "--db", pg_url, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert exported.returncode == 0, exported.stderr
    events = read_cassette(out).events
    assert [(e.data, e.eol) for e in events if e.direction == "out"] == [
        (b'{"type":"system","subtype":"init","session_id":"pg-1"}', True),
        (b"\xff raw", True),
        (b"", True),
        (b"last", False),
    ]
    listed = subprocess.run(
        [sys.executable, "-m", "claudetrace", "sessions", "--json", "--db", pg_url],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rec = next(r for r in json.loads(listed.stdout) if r["name"] == "pg")
    assert rec["status"] == "ok" and rec["session_id"] == "pg-1" and rec["events"] == 8


@pytest.mark.usefixtures("ct_env")
def test_a_batch_goes_in_by_copy_and_comes_back_exactly(pg_url: str) -> None:
    # write_batch takes psycopg's COPY: every byte that COPY's text format escapes
    # (backslash, tab, carriage return, NUL, bytes that are not UTF-8) and every
    # field of the row must come back as it went in, tool references too.
    from claudetrace.model.events import Event
    from claudetrace.recording import RecordingInfo
    from claudetrace.store import event_rows

    lines = [
        b'{"type":"assistant","message":{"content":[{"type":"tool_use","id":"tu_1","name":"B"}]}}',
        b'{"type":"control_request","request_id":"r\\\\1","request":{"subtype":"can_use_tool",'
        b'"tool_use_id":"tu_1","tool_name":"Bash"}}',
        b"tab\there \\N back\\slash\r",
        b"\x00\xff\xfe not utf-8 \\x00",
        b"",
        b'{"type":"' + b"t" * 100 + b'"}',
    ]
    events = [Event(i, ("in", "out", "err")[i % 3], 1000 * i, line, i != 5, 17 + i)
              for i, line in enumerate(lines)]
    store = open_store(pg_url)
    try:
        info = RecordingInfo.start(["copy"])
        store.create_recording(info)
        store.write_batch(info.id, events[:3])
        store.write_batch(info.id, events[3:], {"last_seen_ns": 5})
        back = list(store.iter_events(info.id))
        assert [(e.seq, e.direction, e.t_ns, e.data, e.eol, e.wall_ns) for e in back] == [
            (e.seq, e.direction, e.t_ns, e.data, e.eol, e.wall_ns) for e in events]
        with store.engine.connect() as conn:
            number = conn.exec_driver_sql("SELECT num FROM recordings WHERE id = %s",
                                          (info.id,)).scalar_one()
            rows = conn.exec_driver_sql(
                "SELECT rec, seq, direction, t_ns, wall_ns, data, eol, size, is_json,"
                " type, subtype, request_id, parent_tool_use_id"
                " FROM events WHERE rec = %s ORDER BY seq", (number,)).all()
            tools = conn.exec_driver_sql(
                "SELECT rec, seq, tool_use_id, tool_name, kind FROM event_tools"
                " WHERE rec = %s ORDER BY seq, kind", (number,)).all()
        want_rows, want_tools = event_rows(number, events)
        assert [(*r[:5], bytes(r[5]), *r[6:]) for r in rows] == want_rows
        assert sorted(tuple(t) for t in tools) == sorted(want_tools)
        assert rows[5][9] == "t" * 64  # an indexed value is clipped to its column
    finally:
        store.close()


@pytest.mark.usefixtures("ct_env")
def test_nul_and_lone_surrogates_in_indexed_fields_are_stored_on_postgres(pg_url: str) -> None:
    """PostgreSQL refuses NUL in text: the indexed fields hold it escaped, the line
    its exact bytes, and no error shows the recorded bytes (issue 17)."""
    import subprocess
    import sys

    line = b'{"type":"a\\u0000b","request_id":"\\ud800","session_id":"s\\u0000"}\n'
    done = subprocess.run(
        [sys.executable, "-m", "claudetrace", "proxy", "--db", pg_url, "--", "cat"],
        input=line, capture_output=True, timeout=120, check=False,
    )
    assert done.returncode == 0 and done.stdout == line, done.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "claudetrace", "sessions", "--json", "--db", pg_url],
        capture_output=True, timeout=120, check=False,
    )
    assert listed.returncode == 0 and b"Traceback" not in listed.stderr, listed.stderr
    rec = json.loads(listed.stdout)[0]
    assert rec["events"] == 2
    store = open_store(pg_url)
    try:
        events = list(store.iter_events(rec["id"]))
        assert [e.data for e in events] == [line[:-1]] * 2
        with store.engine.connect() as conn:
            types = conn.exec_driver_sql(
                "SELECT type, request_id FROM events WHERE rec = "
                "(SELECT num FROM recordings WHERE id = %s)",
                (rec["id"],)
            ).all()
        assert set(types) == {("a\\u0000b", "\\ud800")}
    finally:
        store.close()


@pytest.mark.usefixtures("ct_env")
def test_the_sparse_indexes_migrate_up_and_down_and_are_used_on_postgres(pg_url: str) -> None:
    from alembic import command
    from sqlalchemy import select

    from claudetrace.store import EventRow
    from claudetrace.store.browse import CONTROL_TYPES
    from claudetrace.store.engine import alembic_config
    from claudetrace.store.models import type_in

    def indexes() -> dict[str, str]:
        with store.engine.connect() as conn:
            return dict(conn.exec_driver_sql(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'events'"
                " AND indexname LIKE 'ix_%%'").all())

    store = open_store(pg_url)
    try:
        rid = store.import_cassette(read_cassette(SAMPLES[0]))
        at_head = indexes()
        assert set(at_head) == {"ix_events_recording_type"}
        assert "WHERE ((type)::text <> 'stream_event'::text)" in at_head[
            "ix_events_recording_type"]
        with store.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0003_reliability")
        assert set(indexes()) == {"ix_events_recording_type", "ix_events_request_id",
                                  "ix_events_recording_t"}
        assert not any("WHERE" in sql for sql in indexes().values())
        with store.engine.begin() as conn:
            command.upgrade(alembic_config(conn), "head")
        assert indexes() == at_head
        stmt = select(EventRow.seq).where(EventRow.rec == number_of(rid), type_in(CONTROL_TYPES))
        sql = str(stmt.compile(store.engine, compile_kwargs={"literal_binds": True}))
        with store.engine.connect() as conn:
            conn.exec_driver_sql("SET enable_seqscan = off")
            plan = " ".join(r[0] for r in conn.exec_driver_sql(f"EXPLAIN {sql}"))
            control = conn.execute(stmt).scalars().all()
        assert "ix_events_recording_type" in plan, plan
        assert sorted(control) == [e.seq for e in store.iter_events(rid) if e.type in CONTROL_TYPES]
        assert control
    finally:
        store.close()


@pytest.mark.usefixtures("ct_env")
def test_events_of_a_missing_recording_are_refused_without_a_foreign_key(pg_url: str) -> None:
    from sqlalchemy import inspect

    store = open_store(pg_url)
    try:
        # Migration 0005: no per-row foreign key trigger on PostgreSQL…
        for table in ("events", "event_tools"):
            assert inspect(store.engine).get_foreign_keys(table) == []
        # …the store checks the recording once a batch instead.
        ghost = RecordingInfo.start(["claude"])
        with pytest.raises(StoreError, match="no recording"):
            store.write_batch(ghost.id, [Event(0, "out", 0, b'{"type":"x"}')])
        assert store.count_events(ghost.id) == 0
    finally:
        store.close()


@pytest.mark.usefixtures("ct_env")
def test_a_recording_deleted_while_a_batch_is_written_leaves_no_lines(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without the foreign key's cascade (migration 0005), the delete takes the
    # recording's row first: the batch in flight commits, then goes with it.
    import threading
    import time

    from claudetrace.store import Store, event_rows

    writing, deleting = open_store(pg_url), open_store(pg_url)
    info = RecordingInfo.start(["claude", "-p"])
    writing.create_recording(info)
    inserted = threading.Event()
    insert_rows = Store._insert_rows

    def slow_insert(self: Store, conn: object, table: object,
                    rows: list[tuple[object, ...]]) -> None:
        insert_rows(self, conn, table, rows)  # type: ignore[arg-type]
        inserted.set()
        time.sleep(0.5)  # the batch's transaction is still open

    monkeypatch.setattr(Store, "_insert_rows", slow_insert)
    rows, tools = event_rows(info.id, [Event(s, "out", s, b'{"n":%d}' % s) for s in range(100)])
    batch = threading.Thread(target=writing.write_rows, args=(info.id, rows, tools))
    try:
        batch.start()
        assert inserted.wait(30)
        deleting.delete_recording(info.id)
        batch.join()
        assert deleting.count_events(info.id) == 0
    finally:
        batch.join()
        writing.close()
        deleting.close()



def _line_by_id(store: Any, line: bytes, words: str | None = None) -> str:
    """A new recording with one line, written by hand into a schema before
    0020_recnum (its rows keyed by the recording's id): the store's writers
    write the newest schema only.  Returns its id."""
    from claudetrace.store.textindex import insert_postgres

    info = RecordingInfo.start(["claude"])
    store.create_recording(info)
    with store.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO events (recording_id, seq, direction, t_ns, wall_ns, data, eol, "
            "size, is_json, type) VALUES (%s, 0, 'in', 0, 0, %s, true, %s, true, 'user')",
            (info.id, line, len(line)))
        if words is not None:
            cursor = conn.connection.cursor()
            insert_postgres(cursor, [(info.id, 0, words)], key="recording_id")
            cursor.close()
    return info.id


def _rows_of(conn: Any, ids: list[str]) -> tuple[int, int, int]:
    """The rows of the recordings ``ids`` in each table, with any row left behind
    (whose number no recording has) counted too."""
    numbered = ("rec IN (SELECT num FROM recordings WHERE id = ANY(%s)) OR "
                "rec NOT IN (SELECT num FROM recordings)")
    mine = {"events": numbered, "event_tools": numbered, "usage_calls": "recording_id = ANY(%s)"}
    return tuple(  # type: ignore[return-value]
        int(conn.execute(f"SELECT count(*) FROM {table} WHERE {mine[table]}",
                         (ids,)).fetchone()[0])
        for table in ("events", "event_tools", "usage_calls"))


@pytest.mark.usefixtures("ct_env")
def test_a_delete_by_hand_leaves_no_orphans_on_postgres(pg_url: str) -> None:
    # Migration 0006: a trigger a DELETE statement on recordings takes their
    # events and tool references, as psql's user would expect of a foreign key.
    import psycopg

    from claudetrace.store.postgres import plain_url

    store = open_store(pg_url)
    try:
        cassette = read_cassette(Path(__file__).parent / "fixtures" / "cassettes" / "hooks.ndjson")
        ids = [store.import_cassette(cassette) for _ in range(3)]
    finally:
        store.close()
    conninfo = plain_url(pg_url)
    assert conninfo is not None
    with psycopg.connect(conninfo, autocommit=True) as conn:
        events, tools, calls = _rows_of(conn, ids)
        assert events and tools and calls
        conn.execute("DELETE FROM recordings WHERE id = %s", (ids[0],))
        assert _rows_of(conn, ids[:1]) == (0, 0, 0)
        assert _rows_of(conn, ids[1:]) == (events * 2 // 3, tools * 2 // 3, calls * 2 // 3)
        conn.execute("DELETE FROM recordings WHERE id = ANY(%s)", (ids[1:],))
        assert _rows_of(conn, ids) == (0, 0, 0)
    store = open_store(pg_url)
    try:
        last = store.import_cassette(cassette)
    finally:
        store.close()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        assert _rows_of(conn, [last]) == (events // 3, tools // 3, calls // 3)
        conn.execute("TRUNCATE recordings")
        assert _rows_of(conn, [last]) == (0, 0, 0)



@pytest.mark.usefixtures("ct_env")
def test_the_stores_orphan_check_and_delete_by_hand_on_postgres(pg_url: str) -> None:
    from claudetrace.store.retention import delete_row_by_hand, orphans, waiting_locks

    store = open_store(pg_url)
    try:
        cassette = read_cassette(Path(__file__).parent / "fixtures" / "cassettes" / "hooks.ndjson")
        ids = [store.import_cassette(cassette) for _ in range(2)]
        assert orphans(store) == {} and waiting_locks(store) == 0
        delete_row_by_hand(store, ids[0])
        assert orphans(store) == {}
        lines = store.count_events(ids[1])  # (its rows have no id once it is gone)
        with store.engine.begin() as conn:  # a row left by hand, as before migration 0006
            conn.exec_driver_sql("ALTER TABLE events DISABLE TRIGGER USER")
            conn.exec_driver_sql("ALTER TABLE recordings DISABLE TRIGGER USER")
            conn.exec_driver_sql("DELETE FROM recordings WHERE id = %s", (ids[1],))
            conn.exec_driver_sql("ALTER TABLE recordings ENABLE TRIGGER USER")
            conn.exec_driver_sql("ALTER TABLE events ENABLE TRIGGER USER")
        found = orphans(store)
        assert found["events"] == lines > 0
        assert "usage_calls" in found
    finally:
        with store.engine.begin() as conn:
            conn.exec_driver_sql("TRUNCATE recordings")  # its trigger takes the rest
        store.close()


@pytest.mark.usefixtures("ct_env")
def test_a_prune_stopped_half_way_leaves_no_search_rows_behind(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A large recording's events go from its last down, a batch a transaction;
    # their search rows (PostgreSQL has no trigger on events) go in the same one.
    import psycopg

    from claudetrace.store import retention
    from claudetrace.store.postgres import plain_url
    from tests.pruning import old_recording

    store = open_store(pg_url)
    try:
        rid = old_recording(store, days=45, events=6_000, tags={"prune": "stopped"})
        calls = 0
        paced = retention._paced

        def stop_after_two(done: retention.Pruned, work: Any) -> None:
            nonlocal calls
            calls += 1
            if calls > 2:
                raise KeyboardInterrupt
            paced(done, work)

        monkeypatch.setattr(retention, "_paced", stop_after_two)
        with pytest.raises(KeyboardInterrupt):
            retention.prune(store, [rid], batch_events=1000)
    finally:
        store.close()
    conninfo = plain_url(pg_url)
    assert conninfo is not None
    with psycopg.connect(conninfo) as conn:
        left = conn.execute("SELECT count(*), max(seq) FROM events WHERE rec = "
                            "(SELECT num FROM recordings WHERE id = %s)", (rid,)).fetchone()
        assert left == (4000, 3999)
        behind = conn.execute(
            "SELECT count(*) FROM event_search s WHERE rec = (SELECT num FROM recordings "
            "WHERE id = %s) AND NOT EXISTS (SELECT 1 FROM events e WHERE e.rec = s.rec "
            "AND e.seq = s.seq)",
            (rid,)).fetchone()
        assert behind == (0,)
        assert conn.execute("SELECT count(*) FROM event_search WHERE rec = (SELECT num "
                            "FROM recordings WHERE id = %s)", (rid,)).fetchone() == (400,)
        conn.execute("DELETE FROM recordings WHERE id = %s", (rid,))


@pytest.mark.usefixtures("ct_env")
def test_prune_while_a_proxy_records_on_postgres(pg_url: str) -> None:
    import psycopg

    from claudetrace.store.postgres import plain_url
    from tests.pruning import old_recording, prune_while_a_proxy_records

    store = open_store(pg_url)
    try:
        gone = [old_recording(store, days=45, events=12_000, tags={"prune": "pg"})
                for _ in range(2)]
    finally:
        store.close()
    pruned, listed = prune_while_a_proxy_records(pg_url)
    assert pruned.returncode == 0, pruned.stderr
    assert "deleted 2 recordings (24000 events)" in pruned.stdout
    assert "VACUUM made the deleted rows' space reusable" in pruned.stdout
    live = [r for r in listed if r["name"] == "live"]
    assert len(live) == 1 and live[0]["exit_code"] == 0 and live[0]["events"] == 600
    assert not [r for r in listed if r["id"] in gone]
    conninfo = plain_url(pg_url)
    assert conninfo is not None
    with psycopg.connect(conninfo) as conn:
        assert _rows_of(conn, gone) == (0, 0, 0)
        assert _rows_of(conn, [str(live[0]["id"])])[0] == 600
        # Every table a recording has rows in was vacuumed and analyzed, the
        # search index too.
        tables = {"recordings", "events", "event_tools", "event_search", "usage_calls",
                  "usage_hours"}
        for _ in range(50):  # the statistics are published a moment later
            vacuumed = {row[0] for row in conn.execute(
                "SELECT relname FROM pg_stat_user_tables WHERE last_vacuum IS NOT NULL")}
            analyzed = {row[0] for row in conn.execute(
                "SELECT relname FROM pg_stat_user_tables WHERE last_analyze IS NOT NULL")}
            if tables <= vacuumed and tables <= analyzed:
                break
            time.sleep(0.1)
        assert tables <= vacuumed
        assert tables <= analyzed



@pytest.mark.usefixtures("ct_env")
def test_prune_builds_the_events_key_again_beside_the_old_one_on_postgres(
        pg_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a prune ``pk_events`` keeps the pages the deleted keys had; when it
    takes much more than it would packed, the events' indexes are built again
    beside the old ones (``REINDEX … CONCURRENTLY``) and the old pages go back
    to the system; a rebuild that waits too long for an older transaction gives
    up, and what it (or an interrupted one) left behind is dropped."""
    import psycopg

    from claudetrace.store import retention
    from claudetrace.store.postgres import plain_url
    from tests.pruning import old_recording

    url = fresh_database(pg_server, "loose_key")
    conninfo = plain_url(url)
    assert conninfo is not None

    def indexes(conn: Any) -> dict[str, bool]:
        return dict(conn.execute(
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c"
            " ON c.oid = i.indexrelid WHERE i.indrelid = 'events'::regclass").fetchall())

    def key_bytes(conn: Any) -> int:
        return int(conn.execute("SELECT pg_relation_size('pk_events')").fetchone()[0])

    store = open_store(url)
    try:
        gone = old_recording(store, days=45, events=40_000)
        kept = old_recording(store, days=2, events=10_000)
        retention.prune(store, [gone])
        with psycopg.connect(conninfo, autocommit=True) as conn:
            # What an interrupted rebuild leaves: an index no one reads.
            with pytest.raises(psycopg.errors.DivisionByZero):
                conn.execute("CREATE INDEX CONCURRENTLY pk_events_ccnew ON events ((seq / 0))")
            assert indexes(conn)["pk_events_ccnew"] is False
            loose = key_bytes(conn)
            with psycopg.connect(conninfo) as old:  # a snapshot older than the rebuild
                old.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                old.execute("SELECT count(*) FROM recordings").fetchone()
                monkeypatch.setattr(retention, "REBUILD_WAITS", "1s")
                waited = retention.give_back_space(store)
                old.rollback()
            assert "the events' indexes were not built again: canceling statement due to " \
                   "lock timeout" in waited.note, waited.note
            assert indexes(conn) == {"pk_events": True, "ix_events_recording_type": True}
            assert key_bytes(conn) == loose

            space = retention.give_back_space(store)
            assert "(the events' indexes built again beside the old ones) went back to the " \
                   "system" in space.note, space.note
            assert indexes(conn) == {"pk_events": True, "ix_events_recording_type": True}
            assert key_bytes(conn) < loose / 2
            assert space.returned_bytes is not None and space.returned_bytes >= loose / 2
            # Packed now: the next prune leaves it alone.
            assert "indexes" not in retention.give_back_space(store).note
        assert [e.seq for e in store.iter_events(kept)] == list(range(10_000))
        assert [r.id for r in store.list_recordings()] == [kept]
    finally:
        store.close()


def test_a_prune_does_not_wait_for_another_prunes_vacuum_on_postgres(pg_server: str) -> None:
    """Two prunes at once: while one's VACUUM or rebuild holds the events' table
    (SHARE UPDATE EXCLUSIVE), the other's VACUUM skips it instead of waiting
    without a limit."""
    import threading

    import psycopg

    from claudetrace.store import retention
    from claudetrace.store.postgres import plain_url
    from tests.pruning import old_recording

    url = fresh_database(pg_server, "two_prunes")
    conninfo = plain_url(url)
    assert conninfo is not None
    store = open_store(url)
    try:
        retention.prune(store, [old_recording(store, days=45, events=300)])
        spaces: list[retention.Space] = []
        with psycopg.connect(conninfo) as other:  # the other prune, in its VACUUM
            other.execute("LOCK TABLE events IN SHARE UPDATE EXCLUSIVE MODE")
            worker = threading.Thread(
                target=lambda: spaces.append(retention.give_back_space(store)), daemon=True)
            worker.start()
            worker.join(120)  # a hang's guard, far above the few ms it takes
            assert spaces, "give_back_space waited for the other VACUUM"
            other.rollback()
        assert "VACUUM made the deleted rows' space reusable" in spaces[0].note
    finally:
        store.close()


@pytest.mark.usefixtures("ct_env")
def test_search_on_postgres_through_both_writers_and_the_migration(pg_url: str) -> None:
    import psycopg
    from alembic import command
    from click.testing import CliRunner

    from claudetrace.cli import cli
    from claudetrace.indexer import open_settled_store
    from claudetrace.store.engine import alembic_config
    from claudetrace.store.postgres import plain_url
    from claudetrace.store.search import recordings_saying, search, search_plain
    from tests.test_search import SEARCH_ALONE

    line = b'{"type":"result","subtype":"success","result":"Proxied okapi, in PostgreSQL"}\n'
    done = subprocess.run(
        [sys.executable, "-m", "claudetrace", "proxy", "--db", pg_url, "--", "cat"],
        input=line, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    store = open_settled_store(pg_url)
    try:
        rid = store.import_cassette(read_cassette(
            Path(__file__).parent / "fixtures" / "cassettes" / "plain.ndjson"))
        okapi = [(h.seq, h.direction, h.snippet) for h in search(store, "OKAPI, in postgres")]
        assert okapi == [(1, "out", "Proxied okapi, in PostgreSQL"),
                         (0, "in", "Proxied okapi, in PostgreSQL")]
        # (The module's other tests may have stored lines saying it too.)
        fake = [h.seq for h in search(store, "fake model", limit=None) if h.recording_id == rid]
        assert fake
        assert rid in recordings_saying(store, "fak")
        # ``claudetrace search`` asks through psycopg alone, and finds the same.
        for query in ("OKAPI, in postgres", "fake model", "fak", "!!!"):
            assert search_plain(pg_url, query, limit=None) == search(store, query, limit=None)
        done = subprocess.run([sys.executable, "-c", SEARCH_ALONE, "okapi", "--db", pg_url],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines()[-1] == "[]"  # neither SQLAlchemy nor Alembic
        assert done.stdout == CliRunner().invoke(cli, ["search", "okapi", "--db", pg_url]).output
        with store.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0005_postgres_bulk_events")
    finally:
        store.close()
    assert search_plain(pg_url, "fake model") is None  # not at the head: the store's
    store = open_store(pg_url)  # upgraded again: what was stored is indexed
    try:
        assert [h.seq for h in search(store, "fake model", limit=None)
                if h.recording_id == rid] == fake
        store.delete_recording(rid)
        assert rid not in {h.recording_id for h in search(store, "fake model", limit=None)}
    finally:
        store.close()
    conninfo = plain_url(pg_url)
    assert conninfo is not None
    with psycopg.connect(conninfo) as conn:
        assert conn.execute("SELECT count(*) FROM event_search WHERE rec NOT IN "
                            "(SELECT num FROM recordings)").fetchone() == (0,)
        # Both writers and the migration keep the words, not where they stand.
        assert conn.execute("SELECT count(*) FROM event_search").fetchone()[0] > 0  # type: ignore[index]
        assert conn.execute("SELECT count(*) FROM event_search WHERE terms <> strip(terms)"
                            ).fetchone() == (0,)



@pytest.mark.usefixtures("ct_env")
def test_accents_are_folded_alike_on_postgres_and_0016_folds_older_entries(
        pg_url: str) -> None:
    from alembic import command

    from claudetrace.indexer import open_settled_store
    from claudetrace.store.engine import alembic_config
    from claudetrace.store.search import search, search_plain
    from tests.test_search import accents_are_folded_alike

    store = open_settled_store(pg_url)
    try:
        accents_are_folded_alike(store)
        assert search_plain(pg_url, "cafe naive") == search(store, "cafe naive")
        rid = store.import_cassette(read_cassette(SAMPLES[0]))
        with store.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0015_pgfoot")
            # An entry as the earlier writers made it: its accents kept.
            conn.exec_driver_sql(
                "INSERT INTO event_search (recording_id, seq, terms) VALUES "
                "(%(r)s, 0, strip(to_tsvector('simple', 'Ångström déjà vu'))), "
                "(%(r)s, 1, strip(to_tsvector('simple', 'plain ascii')))", {"r": rid})
    finally:
        store.close()
    store = open_store(pg_url)  # upgraded again: the older entry folded, the other kept
    try:
        with store.engine.connect() as conn:
            terms = dict(conn.exec_driver_sql(
                "SELECT seq, terms::text FROM event_search WHERE rec = "
                "(SELECT num FROM recordings WHERE id = %(r)s) AND seq < 2", {"r": rid}).all())
        assert terms == {0: "'angstrom' 'deja' 'vu'", 1: "'ascii' 'plain'"}
    finally:
        store.close()


@pytest.mark.usefixtures("ct_env")
def test_number_like_words_are_whole_on_postgres_and_0019_recuts_older_entries(
        pg_url: str) -> None:
    from alembic import command

    from claudetrace.indexer import open_settled_store
    from claudetrace.store.engine import alembic_config
    from claudetrace.store.search import search
    from tests.test_search import number_like_words_are_whole

    store = open_settled_store(pg_url)
    try:
        rid = number_like_words_are_whole(store)
        plain = store.import_cassette(read_cassette(SAMPLES[0]))
        with store.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0018_words_later")
            # Entries as the earlier writers made them: through PostgreSQL's parser.
            conn.exec_driver_sql(
                "UPDATE event_search SET terms = strip(to_tsvector('simple', "
                "'Reverted 49e9e56a893f and 1e5x kept 9E9')) WHERE recording_id = %(r)s",
                {"r": rid})
            before = dict(conn.exec_driver_sql(
                "SELECT seq, terms::text FROM event_search WHERE recording_id = %(r)s",
                {"r": plain}).all())
            # The old cut: the number's part a word of its own.
            assert conn.exec_driver_sql(
                "SELECT count(*) FROM event_search WHERE recording_id = %(r)s AND "
                "terms @@ CAST('e56:*' AS tsquery)", {"r": rid}).scalar() == 1
    finally:
        store.close()
    store = open_settled_store(pg_url)  # upgraded again: the cut entry made again
    try:
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM event_search WHERE rec = "
                                        "(SELECT num FROM recordings WHERE id = %(r)s)",
                                        {"r": rid}).scalar() == 0
            after = dict(conn.exec_driver_sql(
                "SELECT seq, terms::text FROM event_search WHERE rec = "
                "(SELECT num FROM recordings WHERE id = %(r)s)", {"r": plain}).all())
        assert after == before  # entries without such a word are left as they are
        # The first search adds the words back from the line, whole.
        assert [(h.recording_id, h.seq) for h in search(store, "49e9e56a893f")] == [(rid, 1)]
        assert search(store, "e56") == [] and search(store, "1e5x")[0].recording_id == rid
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql(
                "SELECT terms::text FROM event_search WHERE rec = "
                "(SELECT num FROM recordings WHERE id = %(r)s)",
                {"r": rid}).scalar() == "'1e5x' '49e9e56a893f' '9e9' 'and' 'kept' 'reverted'"
    finally:
        store.close()


@pytest.mark.usefixtures("ct_env")
def test_session_filters_by_tag_and_status_on_postgres(pg_url: str) -> None:
    from claudetrace.store.browse import Filters, list_sessions

    store = open_store(pg_url)
    try:
        cassette = read_cassette(Path(__file__).parent / "fixtures" / "cassettes" / "plain.ndjson")
        tagged = store.import_cassette(cassette, tags={"filter-test": "pg"})
        running = RecordingInfo.start(["claude"], tags={"filter-test": "pg"})
        store.create_recording(running)
        mine = Filters(tags=("filter-test=pg",))
        assert [r.id for r in list_sessions(store, mine)] == [running.id, tagged]
        assert [r.id for r in list_sessions(store, mine.with_(statuses=("ok",)))] == [tagged]
        assert [r.id for r in list_sessions(store, mine.with_(statuses=("running",)),
                                            full=True)] == [running.id]
    finally:
        store.close()


# -- the writer's plain writes (claudetrace/store/postgres.py) ---------------------------


def test_the_copy_types_are_the_models() -> None:
    from sqlalchemy.dialects import postgresql

    from claudetrace.store.models import EventRow, EventTool
    from claudetrace.store.postgres import COPY_TYPES
    from claudetrace.store.rows import COLUMNS

    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    for model in (EventRow, EventTool):
        table = model.__table__
        assert COPY_TYPES[table.name] == tuple(
            table.c[name].type.compile(dialect).split("(")[0].lower()
            for name in COLUMNS[table.name])


def _recording_as_stored(pg_url: str, recording_id: str) -> dict[str, list[tuple[object, ...]]]:
    """Every column of the recording's rows in the three tables, as text with its
    type (the recording's id left out: the two writers write two recordings;
    ``usage_calls.duplicate`` last)."""
    import psycopg

    from claudetrace.store.postgres import plain_url

    conninfo = plain_url(pg_url)
    assert conninfo is not None
    shown: dict[str, list[tuple[object, ...]]] = {}
    with psycopg.connect(conninfo) as conn:
        for table, key, order in (("recordings", "id", "1"),
                                  ("events", "rec", "seq"),
                                  ("event_tools", "rec", "seq, kind, tool_use_id"),
                                  ("usage_calls", "recording_id", "call_id")):
            names = [row[0] for row in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                "ORDER BY ordinal_position", (table,))
                if row[0] not in (key, "id", "num")]
            names.sort(key=lambda name: name == "duplicate")  # last (later columns added after it)
            columns = ", ".join(f"{name}::text, pg_typeof({name})::text" for name in names)
            of = "(SELECT num FROM recordings WHERE id = %s)" if key == "rec" else "%s"
            shown[table] = [tuple(row) for row in conn.execute(
                f"SELECT {columns} FROM {table} WHERE {key} = {of} ORDER BY {order}",
                (recording_id,))]
    return shown


@pytest.mark.usefixtures("ct_env")
@pytest.mark.parametrize("flat", [False, True], ids=["rows", "flat"])
@pytest.mark.parametrize("sample", ["basic.cassette.ndjson", "mcp_hooks.cassette.ndjson"])
def test_a_recording_is_written_plainly_as_the_store_writes_it(
    pg_url: str, sample: str, flat: bool,
) -> None:
    import dataclasses
    import math

    from claudetrace.model import Session
    from claudetrace.model.summary import outcome_columns, summary_columns
    from claudetrace.recording import new_recording_id
    from claudetrace.store import event_rows
    from claudetrace.store.postgres import PostgresWrites, plain_url
    from claudetrace.store.rows import flat_rows

    events = list(read_cassette(SAMPLES[[p.name for p in SAMPLES].index(sample)]).events)
    info = RecordingInfo.start(["claude", "-p", "hi"], name="a name", tags={"k": "v"},
                               env={"CLAUDE_X": "1"}, extra={"nested": {"a": [1, 2.5, None]}})
    twin = dataclasses.replace(info, id=new_recording_id(info.started_ns))
    store = open_store(pg_url)
    conninfo = plain_url(pg_url)
    assert conninfo is not None
    plain = PostgresWrites(conninfo)
    try:
        store.create_recording(info)
        plain.create_recording(twin)
        session = Session()
        for start in range(0, len(events), 7):
            batch = events[start:start + 7]
            session.add_many(batch)
            updates = {"last_seen_ns": 5, "lost_bytes": 0,
                       **summary_columns(session, started_ns=info.started_ns),
                       "cli_session_id": "s", "model": None, "models": None}
            store.write_rows(info.id, *event_rows(info.id, batch), updates)
            rows = flat_rows(twin.id, batch) if flat else event_rows(twin.id, batch)
            plain.write_rows(twin.id, *rows, updates)
        ended = {"ended_ns": 9, "exit_code": 0, "signal": None, "error": None,
                 "cost_usd": math.nan, "is_error": True,
                 **outcome_columns(session.outcome(ended=True, exit_code=0))}
        store.update_recording(info.id, **ended)
        plain.update_recording(twin.id, **ended)
    finally:
        store.close()
        plain.close()
    written = _recording_as_stored(pg_url, twin.id)
    stored = _recording_as_stored(pg_url, info.id)
    # The twin holds the same API messages, written second: its rows are
    # duplicates (the last column, with its type).
    assert {row[-2:] for row in written["usage_calls"]} == {("true", "boolean")}
    for table in (written, stored):
        table["usage_calls"] = [row[:-2] for row in table["usage_calls"]]
    assert written == stored
    assert len(written["events"]) == len(events)
    assert written["usage_calls"], "the sample's calls are stored"
    if sample.startswith("mcp"):
        assert written["event_tools"], "the sample's tool uses are stored"


@pytest.mark.usefixtures("ct_env")
def test_the_plain_writes_fail_as_the_store_fails(pg_url: str) -> None:
    from claudetrace.store import event_rows
    from claudetrace.store.engine import is_transient_error
    from claudetrace.store.postgres import PostgresWrites, plain_url

    conninfo = plain_url(pg_url)
    assert conninfo is not None
    rows, tools = event_rows("missing", [Event(0, "out", 1, b"{}", True, 2)])
    failures = []
    for target in (open_store(pg_url), PostgresWrites(conninfo)):
        info = RecordingInfo.start(["claude"])
        with pytest.raises(StoreError) as missing:
            target.write_rows("missing", rows, tools)
        target.create_recording(info)
        with pytest.raises(StoreError) as twice:
            target.create_recording(info)
        failures.append((str(missing.value), str(twice.value), is_transient_error(twice.value)))
        target.close()
    assert failures[0] == failures[1]
    assert failures[1][1].startswith("create recording failed: duplicate key value")
    assert failures[1][2] is False


@contextlib.contextmanager
def _writes_whose_backend_was_killed(
    pg_url: str, ping_after_s: float,
) -> Iterator[tuple[Any, RecordingInfo, int]]:
    """Plain writes with a recording created, whose server process was then ended
    (as a restart or an idle timeout ends it): the writes, the recording, the
    process's id."""
    import psycopg

    from claudetrace.store.postgres import PostgresWrites, plain_url

    conninfo = plain_url(pg_url)
    assert conninfo is not None
    open_store(pg_url).close()  # the schema
    plain = PostgresWrites(conninfo, ping_after_s=ping_after_s)
    try:
        info = RecordingInfo.start(["claude"])
        plain.create_recording(info)
        backend = plain._conn.info.backend_pid
        with psycopg.connect(conninfo, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
        yield plain, info, backend
    finally:
        plain.close()


@pytest.mark.usefixtures("ct_env")
def test_a_lost_connection_fails_one_write_as_transient_and_the_next_connects_again(
    pg_url: str,
) -> None:
    import psycopg

    from claudetrace.store import event_rows
    from claudetrace.store.engine import error_line, is_transient_error

    # Never checked before a write: the write finds the connection lost.
    with _writes_whose_backend_was_killed(pg_url, ping_after_s=3600) as (plain, info, backend):
        rows, tools = event_rows(info.id, [Event(0, "out", 1, b"{}", True, 2)])
        with pytest.raises(psycopg.Error) as lost:
            plain.write_rows(info.id, rows, tools, {"event_count": 1})
        assert is_transient_error(lost.value), error_line(lost.value)
        plain.write_rows(info.id, rows, tools, {"event_count": 1})  # connected again
        assert plain._conn.info.backend_pid != backend
    store = open_store(pg_url)
    try:
        assert store.count_events(info.id) == 1
        assert store.get(info.id).event_count == 1
    finally:
        store.close()


@pytest.mark.usefixtures("ct_env")
def test_a_connection_dropped_while_unused_is_made_again_before_the_write(pg_url: str) -> None:
    from claudetrace.store import event_rows

    # Checked before every write.
    with _writes_whose_backend_was_killed(pg_url, ping_after_s=0) as (plain, info, backend):
        rows, tools = event_rows(info.id, [Event(0, "out", 1, b"{}", True, 2)])
        plain.write_rows(info.id, rows, tools, {"event_count": 1})  # no failure
        assert plain._conn.info.backend_pid != backend


@pytest.mark.parametrize("url, plain", [
    ("postgresql+psycopg://u:p%40ss@h:5433/db", "postgresql://u:p%40ss@h:5433/db"),
    ("postgresql+psycopg://u@/db?host=/run/pg&sslmode=disable",
     "postgresql://u@/db?host=/run/pg&sslmode=disable"),
    ("postgresql+psycopg://u@/db?host=a&host=b", None),  # hosts to fail over along
    ("postgresql+psycopg://u@a:1,b:2/db", None),
    ("postgresql+psycopg://u@h/db?application_name=a+b", None),  # a space to SQLAlchemy
    ("postgresql://u@h/db", None),  # psycopg2's, to SQLAlchemy
    ("postgresql+psycopg2://u@h/db", None),
])
def test_which_urls_are_written_plainly_on_postgres(url: str, plain: str | None) -> None:
    from claudetrace.store.postgres import plain_url

    assert plain_url(url) == plain


_OPEN_WRITES = """
import sys
from claudetrace.store.writer import _open_writes
writes = _open_writes(1.0)
print(type(writes).__name__)
print(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'alembic')))
writes.close()
"""


@pytest.mark.usefixtures("ct_env")
def test_the_writer_writes_postgres_without_sqlalchemy_once_it_is_at_the_head(
    pg_url: str,
) -> None:
    import psycopg

    from claudetrace.store.postgres import plain_url

    conninfo = plain_url(pg_url)
    assert conninfo is not None
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS fresh")
        admin.execute("CREATE DATABASE fresh")
    fresh = pg_url.rsplit("/", 1)[0] + "/fresh"

    def run(url: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", _OPEN_WRITES], capture_output=True,
                              text=True, check=False, timeout=60,
                              env={**os.environ, "CLAUDETRACE_DB": url})

    def open_writes(url: str) -> list[str]:
        done = run(url)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    # A database not made yet goes through the store, which makes it…
    kind, loaded = open_writes(fresh)
    assert kind == "Store" and "sqlalchemy" in loaded
    # …and at the head it is written plainly.
    assert open_writes(fresh) == ["PostgresWrites", "[]"]
    # A URL for another driver goes through the store, which says what is wrong.
    other = run(fresh.replace("+psycopg", "+nosuchdriver"))
    assert other.returncode != 0 and "unsupported database URL" in other.stderr


@pytest.mark.usefixtures("ct_env")
def test_the_session_lists_filters_and_first_prompts_on_postgres(pg_url: str) -> None:
    from claudetrace.store import browse

    store = open_store(pg_url)
    fixtures = Path(__file__).parent / "fixtures" / "cassettes"
    try:
        ids = {name: store.import_cassette(read_cassette(fixtures / f"{name}.ndjson"), name=name)
               for name in ("plain", "permission_deny", "cli_dies")}

        def names(**kw: Any) -> set[str]:
            return {r.name for r in browse.list_sessions(store, browse.Filters(**kw))
                    if r.id in ids.values()}

        bash = names(tools=("Bash",))
        assert "permission_deny" in bash and "plain" not in bash
        assert names(statuses=("killed",)) == {"cli_dies"}
        assert names(statuses=("ok", "error")) >= {"plain", "permission_deny"}
        assert names(sources=("import",)) == set(ids)
        assert names(projects=(store.get(ids["plain"]).cwd,)) >= {"plain"}
        prompts = browse.first_prompts(store, list(ids.values()))
        assert prompts[ids["plain"]] == "Say hello."
        assert "Bash" in browse.choices(store)["tools"]
    finally:
        store.close()


@pytest.mark.usefixtures("ct_env")
def test_usage_reports_on_postgres_are_sqlite_s(pg_url: str, tmp_path: Path) -> None:
    """The usage queries (plain SQL) read the same on both databases, filters too."""
    import json as json_module

    from click.testing import CliRunner

    from claudetrace.cli import cli
    from claudetrace.formats.imports import import_file
    from claudetrace.testing.transcripts import random_corpus, write_transcript

    sqlite_db = f"sqlite:///{tmp_path / 'usage.db'}"
    corpus = random_corpus(6, seed=3, calls=5)
    for url in (pg_url, sqlite_db):
        store = open_store(url)
        try:
            for t in corpus:
                import_file(store, write_transcript(tmp_path / "projects", t),
                            tags={"team": "infra"} if t.project.endswith("p1") else {})
        finally:
            store.close()

    def report(url: str, *args: str) -> object:
        # Only the transcripts: the module's database holds other tests' recordings.
        out = CliRunner().invoke(cli, ["usage", *args, "--json", "-z", "UTC", "--db", url,
                                       "--source", "transcript"])
        assert out.exit_code == 0, out.output
        got = json_module.loads(out.stdout)
        for s in got.get("sessions", ()):  # each store names its recordings
            del s["recordingId"]
            s["modelsUsed"].sort()
        return got

    for args in (("daily",), ("monthly", "--project", "p2"), ("session", "--tag", "team=infra"),
                 ("blocks",), ("weekly", "--model", "claude-opus-4-5-20251101")):
        assert report(pg_url, *args) == report(sqlite_db, *args), args
    tagged = report(pg_url, "session", "--tag", "team=infra")
    assert tagged["sessions"] and all(s["projectPath"].endswith("p1")  # type: ignore[index]
                                      for s in tagged["sessions"])  # type: ignore[index]

    # The queries behind /metrics, the HTML report and the Stats page too.
    from claudetrace.store import usage as q
    from claudetrace.usage import recording_totals

    def rounded(value: Any) -> Any:
        """``value`` with every dollar figure to 1e-12: the engines' SUMs add the
        calls' costs in orders of their own, which can differ in the last bit."""
        if isinstance(value, float):
            return round(value, 12)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: rounded(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            return type(value)(*map(rounded, value))
        if isinstance(value, (list, tuple)):
            return type(value)(map(rounded, value))
        if isinstance(value, dict):
            return {k: rounded(v) for k, v in value.items()}
        return value

    def surfaces(url: str) -> object:
        store = open_store(url)
        try:
            reader = q.store_reader(store)
            only = q.UsageFilter(sources=("transcript",))
            each = sorted(repr(rounded(recording_totals(reader, r.recording_id)))
                          for r in q.by_recording(reader, only))
            return rounded(q.by_model(reader, only)), each
        finally:
            store.close()

    assert surfaces(pg_url) == surfaces(sqlite_db)


def test_the_ingest_bench_measures_what_a_recording_adds_on_postgres(pg_url: str) -> None:
    # bench ingest's footprint on PostgreSQL: its tables, indexes and TOAST grow
    # by at least the bytes of the lines stored.  A database of its own: one that
    # earlier tests deleted from has free index pages to reuse.
    from claudetrace.bench.ingest import _relation_bytes, _stored_bytes

    pg_url = fresh_database(pg_url, "ingest_measures")
    store = open_store(pg_url)
    info = RecordingInfo.start(["claude", "-p"])
    store.create_recording(info)
    store.close()
    before, relations = _stored_bytes(pg_url), _relation_bytes(pg_url)
    rng = random.Random(5)  # text that does not compress
    lines = [b'{"type":"user","text":"%d %s"}' % (i, rng.randbytes(1500).hex().encode())
             for i in range(300)]
    store = open_store(pg_url)
    try:
        store.write_batch(info.id, [Event(i, "out", i, line) for i, line in enumerate(lines)],
                          {"event_count": 300})
    finally:
        store.close()
    assert _stored_bytes(pg_url) - before >= sum(map(len, lines))
    # Where it went: the events table (with its TOAST) holds the lines; its
    # primary key grew too; every table is counted once, apart from its indexes.
    grown = {rel: size - relations.get(rel, 0) for rel, size in _relation_bytes(pg_url).items()}
    assert grown["events"] >= sum(map(len, lines))
    assert grown["pk_events"] > 0
    assert sum(_relation_bytes(pg_url).values()) == _stored_bytes(pg_url)


@pytest.mark.usefixtures("ct_env")
def test_0009_drops_the_line_copies_and_a_downgrade_fills_them_on_postgres(pg_url: str) -> None:
    from alembic import command

    from claudetrace.store.engine import alembic_config

    def columns(store: Any) -> set[str]:
        with store.engine.connect() as conn:
            return set(conn.exec_driver_sql(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_name = 'events' AND table_schema = current_schema()").scalars())

    store = open_store(pg_url)
    try:
        rid = store.import_cassette(read_cassette(SAMPLES[0]))
        events = [(e.seq, e.direction, e.t_ns, e.data, e.eol) for e in store.iter_events(rid)]
        assert not {"uuid", "session_id"} & columns(store)
        with store.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0008_usage_rollups")
        assert {"uuid", "session_id"} <= columns(store)
        with store.engine.connect() as conn:
            said, filled = conn.exec_driver_sql(
                "SELECT count(*), count(session_id) FROM events WHERE recording_id = %(r)s"
                " AND position('\"session_id\"'::bytea in data) > 0", {"r": rid}).one()
        assert said > 0 and filled == said
    finally:
        store.close()
    store = open_store(pg_url)  # upgraded again: every line as it was
    try:
        assert not {"uuid", "session_id"} & columns(store)
        assert [(e.seq, e.direction, e.t_ns, e.data, e.eol)
                for e in store.iter_events(rid)] == events
    finally:
        store.close()


def test_0010_compresses_lines_with_lz4_and_a_downgrade_goes_back_on_postgres(
        pg_url: str) -> None:
    """Lines over PostgreSQL's compression threshold are stored with lz4 after
    0010 (pglz took most of a burst of huge lines), with pglz after its
    downgrade, and every line reads back byte for byte either way."""
    from alembic import command

    from claudetrace.store.engine import alembic_config

    big = json.dumps({"type": "user", "message": {"content": [{
        "type": "tool_result", "content": "a line of a file read\n" * 4000}]}}).encode()

    def store_big(store: Any, by_id: bool = False) -> tuple[str, str]:
        if by_id:  # a schema before 0020_recnum
            rid = _line_by_id(store, big)
        else:
            info = RecordingInfo.start(["claude"])
            store.create_recording(info)
            store.write_batch(info.id, [Event(0, "out", 0, big)])
            rid = info.id
        key = "recording_id = %(r)s" if by_id else \
            "rec = (SELECT num FROM recordings WHERE id = %(r)s)"
        with store.engine.connect() as conn:
            how = conn.exec_driver_sql(
                f"SELECT pg_column_compression(data) FROM events WHERE {key}",
                {"r": rid}).scalar_one()
        return rid, how

    store = open_store(pg_url)
    try:
        after, lz4 = store_big(store)
        with store.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0009_footprint")
        before, pglz = store_big(store, by_id=True)
        assert (lz4, pglz) == ("lz4", "pglz")
        # Read as stored: the models are the newest schema's (events.codec).
        with store.engine.connect() as conn:
            for rid in (after, before):
                assert [bytes(d) for d in conn.exec_driver_sql(
                    "SELECT data FROM events WHERE recording_id = %(r)s",
                    {"r": rid}).scalars()] == [big]
    finally:
        store.close()
    store = open_store(pg_url)  # upgraded again
    try:
        assert store_big(store)[1] == "lz4"
        for rid in (after, before):
            assert [e.data for e in store.iter_events(rid)] == [big]
    finally:
        store.close()


def test_0015_bounds_the_search_index_pending_list_and_a_downgrade_resets_it(
        pg_url: str) -> None:
    """The search index's pending list is bounded at 256 kB after 0015 (the server's
    4 MB was a tenth of a fresh store's first burst), the server's default after
    its downgrade, and search finds words written either way."""
    from alembic import command

    from claudetrace.store.engine import alembic_config
    from claudetrace.store.search import search

    url = fresh_database(pg_url, "pending_list")

    def options(store: Any) -> list[str] | None:
        with store.engine.connect() as conn:
            found: list[str] | None = conn.exec_driver_sql(
                "SELECT reloptions FROM pg_class WHERE relname = 'ix_event_search_terms'"
            ).scalar_one()
        return found

    def said(store: Any, word: str) -> str:
        info = RecordingInfo.start(["claude"])
        store.create_recording(info)
        line = json.dumps({"type": "user", "message": {"role": "user", "content": word}})
        store.write_batch(info.id, [Event(0, "in", 0, line.encode())])
        return info.id

    store = open_store(url)
    try:
        assert options(store) == ["gin_pending_list_limit=256"]
        after = said(store, "wombat")
        with store.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0014_links")
        assert options(store) is None
        line = json.dumps({"type": "user", "message": {"role": "user", "content": "numbat"}})
        before = _line_by_id(store, line.encode(), "numbat")
    finally:
        store.close()
    store = open_store(url)  # upgraded again
    try:
        assert options(store) == ["gin_pending_list_limit=256"]
        assert {h.recording_id for h in search(store, "wombat")} == {after}
        assert {h.recording_id for h in search(store, "numbat")} == {before}
    finally:
        store.close()


@pytest.mark.usefixtures("ct_env")
def test_usage_reports_from_the_hour_sums_on_postgres(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from click.testing import CliRunner

    from claudetrace.cli import cli
    from claudetrace.formats.imports import import_file
    from claudetrace.store import usage as q
    from claudetrace.testing.transcripts import random_corpus, write_transcript

    store = open_store(pg_url)
    try:
        for t in random_corpus(10, calls=40, seed=12):
            assert import_file(store, write_transcript(tmp_path / "projects", t)).recording_id
        victim = store.list_recordings(limit=1)[0].id
        store.delete_recording(victim)  # the schema's trigger takes its sums too
        with store.engine.connect() as conn:
            orphans = conn.exec_driver_sql(
                "SELECT COUNT(*) FROM usage_hours WHERE recording_id = %s", (victim,)).scalar()
        assert orphans == 0
    finally:
        store.close()

    def reports() -> list[object]:
        out = []
        for args in (("daily", "-z", "UTC"), ("daily", "-z", "Asia/Kolkata"),
                     ("session",), ("blocks",)):
            got = CliRunner().invoke(cli, ["usage", *args, "--json", "--db", pg_url])
            assert got.exit_code == 0, got.output
            out.append(json.loads(got.stdout))
        return out

    from_hours = reports()
    assert from_hours[0]["daily"]
    monkeypatch.setattr(q, "_columns", lambda *_: q._CALLS)
    assert reports() == from_hours


@pytest.mark.usefixtures("ct_env")
def test_the_total_cost_tile_is_the_sum_of_the_costs_shown_on_postgres(pg_url: str) -> None:
    # Its cost is the usage roll-up grouped once and joined (the correlated
    # aggregate was most of the tiles' query at 100,000 sessions): the same sum.
    from tests.summaries import check_tile_cost

    store = open_store(pg_url)
    try:
        check_tile_cost(store)
    finally:
        store.close()


@pytest.mark.usefixtures("ct_env")
def test_session_list_figures_counted_in_sql_on_postgres(pg_url: str) -> None:
    from tests.summaries import check_summaries, seed_statuses

    store = open_store(pg_url)
    try:
        seed_statuses(store, "pg")
        check_summaries(store, "pg")
    finally:
        store.close()


@pytest.mark.usefixtures("ct_env")
def test_a_resumed_sessions_id_and_a_half_import_on_postgres(pg_url: str) -> None:
    from claudetrace.indexer import open_settled_store
    from claudetrace.recording import RecordingInfo
    from tests.test_reliability import ct
    from tests.test_resume_ids import CHAIN, S2, S3

    (rid,) = ct("import", str(CHAIN), "--db", pg_url).stdout.decode().split()
    assert f"recording  {rid}" in ct("show", S3, "--db", pg_url).stdout.decode()
    store = open_settled_store(pg_url)
    try:
        assert store.resolve(S2).id == rid
        # The half-import replacement compares extra's text on PostgreSQL too.
        half = RecordingInfo(id="01HALF0000000000000000000X", argv=[], started_ns=1,
                             source="import", extra={"importer": {"pid": 1}})
        store.create_recording(half)
        state = store.import_state(half.id)
        assert state is not None and state[0] is None and '"pid"' in state[1]
        assert not store.delete_half_import(half.id, state[1] + " ")
        assert store.delete_half_import(half.id, state[1])
        assert store.import_state(half.id) is None
        # Replaced by another import's row in the same transaction: never missing.
        store.create_recording(half)
        state = store.import_state(half.id)
        assert state is not None
        mine = dataclasses.replace(half, extra={"importer": {"pid": 2}})
        assert store.delete_half_import(half.id, state[1], mine)
        again = store.import_state(half.id)
        assert again is not None and again[0] is None
        assert json.loads(again[1])["importer"] == {"pid": 2}
    finally:
        store.close()


@pytest.mark.usefixtures("ct_env")
def test_resume_files_imported_apart_fold_in_on_postgres(pg_url: str, tmp_path: Path) -> None:
    from tests.test_reliability import ct
    from tests.test_transcript_resume import CHAIN, S1, S2, S3, _imported_the_old_way

    projects = tmp_path / "projects"
    shutil.copytree(CHAIN, projects / CHAIN.name)
    store = open_store(pg_url)
    try:
        for rec in store.list_recordings():  # the chain as another test left it: gone
            if rec.cli_session_id in (S1, S2, S3):
                store.delete_recording(rec.id)
    finally:
        store.close()
    assert len(_imported_the_old_way(pg_url, projects)) == 3
    done = ct("import", str(projects), "--db", pg_url)
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().splitlines()[-1] == (
        "import: 0 imported, 1 updated, 0 unchanged; 2 files joined to another file's "
        "session; 2 earlier recordings of resumed sessions folded in")
    report = json.loads(ct("usage", "session", "--json", "--db", pg_url).stdout)
    assert [(s["sessionId"], s["outputTokens"]) for s in report["sessions"]
            if s["sessionId"] in (S1, S2, S3)] == [(S1, 80 + 140 + 210 + 60)]


@pytest.mark.usefixtures("ct_env")
def test_the_writer_stores_long_lines_packed_as_a_store_holds_them(
    pg_url: str, tmp_path: Path,
) -> None:
    """The indexer's writer on PostgreSQL (packing as it stores), with lines on
    either side of the length from which they cross beside their batch's pickle."""
    from tests.test_store_writer import long_lines, stored_rows, written_both_ways

    batches = [long_lines(start) for start in (0, 6, 12)]
    recording, expected = written_both_ways(pg_url, str(tmp_path / "direct.db"), batches,
                                            pack=True)
    store = open_store(pg_url)
    try:
        assert stored_rows(store, recording) == expected
        assert [row[3] for row in expected] == [e.data for batch in batches for e in batch]
    finally:
        store.close()


def test_a_batch_of_recordings_takes_back_one_that_fails_alone_on_postgres(pg_url: str) -> None:
    """A folder import's batch on PostgreSQL, where a failed statement spoils the
    whole transaction but for a savepoint: the others are stored at the commit."""
    def lines(*texts: str) -> list[Event]:
        return [Event(i, "out", i, b'{"n":"%s"}' % t.encode()) for i, t in enumerate(texts)]

    store = open_store(pg_url)
    try:
        with store.batch() as batch:
            batch.put(RecordingInfo.start(["claude"], id="batch-0"), lines("a", "b"))
            # Two lines numbered 0: one line saying so, as any store error (COPY's
            # error came as psycopg raised it, a traceback).
            with pytest.raises(StoreError, match="pk_events"):
                batch.put(RecordingInfo.start(["claude"], id="batch-1"),
                          [*lines("a"), *lines("x")])
            batch.put(RecordingInfo.start(["claude"], id="batch-2"), lines("c"))
            batch.commit()
        ids = {r.id for r in store.list_recordings()}
        assert {"batch-0", "batch-2"} <= ids and "batch-1" not in ids
        assert [e.data for e in store.iter_events("batch-0")] == [b'{"n":"a"}', b'{"n":"b"}']
    finally:
        store.close()
