"""What the store writes per event row, and the sparse indexes it keeps (migration 0004)."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import select

from claudetrace.model.events import Event
from claudetrace.recording import RecordingInfo
from claudetrace.store import EventRow, Store, event_rows, open_store
from claudetrace.store.browse import CONTROL_TYPES, control_events, raw_count
from claudetrace.store.engine import alembic_config, bytes_unchanged
from claudetrace.store.models import number_of, type_in

#: Lines whose fields cover each kind of value a row holds: NULLs, text, a clipped
#: value, bytes that are not UTF-8, a line without a newline, tool references.
LINES = [
    b'{"type":"assistant","message":{"content":[{"type":"tool_use","id":"tu_1","name":"B"}]},'
    b'"session_id":"s1","uuid":"u1","parent_tool_use_id":"tu_0"}',
    b'{"type":"control_request","request_id":"r\\\\1","request":{"subtype":"can_use_tool",'
    b'"tool_use_id":"tu_1","tool_name":"Bash"}}',
    b'{"type":"control_response","response":{"subtype":"success","request_id":"r1"}}',
    b'{"type":"stream_event","event":{"type":"content_block_delta"},"session_id":"s1"}',
    b"tab\there \\N back\\slash\r",
    b"\x00\xff\xfe not utf-8",
    b"",
    b'{"type":"' + b"t" * 100 + b'"}',
]

COLUMNS = ("rec, seq, direction, t_ns, wall_ns, data, eol, size, is_json, type, "
           "subtype, request_id, parent_tool_use_id")


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    opened = open_store(str(db_path))
    yield opened
    opened.close()


def _events() -> list[Event]:
    return [Event(i, ("in", "out", "err")[i % 3], 1000 * i, line, i != len(LINES) - 1, 17 + i)
            for i, line in enumerate(LINES)]


def _recording(store: Store) -> str:
    info = RecordingInfo.start(["rows"])
    store.create_recording(info)
    events = _events()
    store.write_batch(info.id, events[:3])
    store.write_batch(info.id, events[3:], {"last_seen_ns": 5})
    return info.id


def test_every_field_of_a_row_is_stored_as_built_with_its_type(store: Store) -> None:
    """Rows go in with sqlite3's adapters for None, bytes and bool (store/engine.py):
    each value comes back as built, as a NULL, a BLOB and an INTEGER."""
    rid = _recording(store)
    with contextlib.closing(sqlite3.connect(store.engine.url.database or "")) as conn:
        (number,) = conn.execute("SELECT num FROM recordings WHERE id = ?", (rid,)).fetchone()
        rows = conn.execute(f"SELECT {COLUMNS} FROM events WHERE rec = ? ORDER BY seq",
                            (number,)).fetchall()
        kinds = conn.execute(
            "SELECT typeof(data), typeof(eol), typeof(is_json), typeof(request_id) FROM events"
            " WHERE rec = ? ORDER BY seq", (number,)).fetchall()
        tools = conn.execute("SELECT rec, seq, tool_use_id, tool_name, kind"
                             " FROM event_tools WHERE rec = ?", (number,)).fetchall()
    want_rows, want_tools = event_rows(number, _events())
    assert rows == [tuple(int(v) if isinstance(v, bool) else v for v in row)
                    for row in want_rows]
    assert sorted(tools) == sorted(want_tools)
    assert kinds[0] == ("blob", "integer", "integer", "null")
    assert kinds[1][3] == "text"
    assert rows[-1][9] == "t" * 64
    back = list(store.iter_events(rid))
    assert [(e.seq, e.direction, e.t_ns, e.data, e.eol, e.wall_ns) for e in back] == [
        (e.seq, e.direction, e.t_ns, e.data, e.eol, e.wall_ns) for e in _events()]


def _indexes(path: str) -> dict[str, str]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return {name: sql for name, sql in conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events'"
            " AND sql IS NOT NULL")}


def test_the_sparse_indexes_migrate_up_and_down(store: Store) -> None:
    rid = _recording(store)
    path = store.engine.url.database or ""
    at_head = _indexes(path)
    assert set(at_head) == {"ix_events_recording_type"}
    assert "WHERE type <> 'stream_event'" in at_head["ix_events_recording_type"]
    with store.engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0003_reliability")
    before = _indexes(path)
    assert set(before) == {"ix_events_recording_type", "ix_events_request_id",
                           "ix_events_recording_t"}
    assert not any("WHERE" in sql for sql in before.values())
    with store.engine.begin() as conn:
        command.upgrade(alembic_config(conn), "head")
    assert _indexes(path) == at_head
    assert len(list(store.iter_events(rid))) == len(LINES)


def test_type_lookups_use_the_sparse_index(store: Store) -> None:
    rid = _recording(store)
    for types in (CONTROL_TYPES, ["user"], ["assistant", "result"]):
        stmt = select(EventRow.seq).where(EventRow.rec == number_of(rid), type_in(types))
        sql = str(stmt.compile(store.engine, compile_kwargs={"literal_binds": True}))
        with store.engine.connect() as conn:
            plan = " ".join(str(row[-1]) for row in conn.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {sql}"))
        assert "ix_events_recording_type" in plan, plan
    # The lines the index leaves out are still found by type, through the key.
    with store.engine.connect() as conn:
        found = conn.execute(select(EventRow.seq).where(
            EventRow.rec == number_of(rid), type_in(["stream_event"]))).scalars().all()
    assert found == [3]
    assert [e.seq for e in control_events(store, rid)] == [1, 2]
    assert raw_count(store, rid, types=["stream_event", "(not JSON)"]) == 4
    assert [e.seq for e in store.iter_events(rid, types=["assistant"])] == [0]


def test_a_host_programs_own_adapters_are_left_alone(tmp_path: Path) -> None:
    probe = (
        "import sqlite3\n"
        "def mine(value): return 'yes' if value else 'no'\n"
        "sqlite3.register_adapter(bool, mine)\n"
        "from claudetrace.store import open_store\n"
        f"open_store({str(tmp_path / 'x.db')!r}).close()\n"
        "assert sqlite3.adapters[(bool, sqlite3.PrepareProtocol)] is mine\n"
        "assert sqlite3.connect(':memory:').execute('SELECT ?', (True,)).fetchone() == ('yes',)\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=120)


def test_the_bytes_adapter_gives_back_the_same_object_with_or_without_bytes_dunder() -> None:
    """Python 3.10 has no ``bytes.__bytes__``: the adapter is then the type itself."""
    line = b'{"type":"user"}'
    for adapter in (bytes_unchanged(), bytes_unchanged(None)):
        assert adapter(line) is line
    assert bytes_unchanged(None) is bytes


def test_a_host_programs_adapters_do_not_change_what_is_stored(tmp_path: Path) -> None:
    """The adapter registry is one for the whole process: adapters of the program
    that uses the store (for bytes, str, int, float, None) must not change what the
    store writes or looks up, and still apply to the program's own connections."""
    probe = (
        "import sqlite3\n"
        "sqlite3.register_adapter(bytes, lambda v: v.hex())\n"
        "sqlite3.register_adapter(str, lambda v: v.upper() + '!')\n"
        "sqlite3.register_adapter(int, lambda v: str(v + 1))\n"
        "sqlite3.register_adapter(float, lambda v: 'f')\n"
        "sqlite3.register_adapter(type(None), lambda v: 'none')\n"
        "from claudetrace.model.events import Event\n"
        "from claudetrace.store import open_store\n"
        "lines = [b'{\"type\":\"user\",\"n\":%d}' % i for i in range(700)] + [b'\\xff not json']\n"
        "events = [Event(i, 'out' if i % 2 else 'in', 1000 * i, line, i % 3 > 0, 7 * i)\n"
        "          for i, line in enumerate(lines)]\n"
        f"store = open_store({str(tmp_path / 'x.db')!r}, create=True)\n"
        "rid = store.import_cassette(({'argv': ['claude']}, iter(events)), batch=100)\n"
        "back = list(store.iter_events(rid))\n"
        "assert [(e.seq, e.direction, e.t_ns, e.data, e.eol, e.wall_ns) for e in back] == [\n"
        "    (e.seq, e.direction, e.t_ns, e.data, e.eol, e.wall_ns) for e in events], back[:2]\n"
        "assert store.get(rid).argv == ['claude']\n"
        "store.close()\n"
        f"raw = sqlite3.connect({str(tmp_path / 'x.db')!r})\n"
        "assert raw.execute('SELECT DISTINCT typeof(data) FROM events').fetchall() == [('blob',)]\n"
        "assert raw.execute('SELECT ?, ?', (b'a', 1)).fetchone() == ('61', '2')\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=120)
