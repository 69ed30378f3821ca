"""Ended recordings' lines packed (claudetrace.store.packing) and read back byte for byte."""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from claudetrace.bench.shapes import shape_lines
from claudetrace.cassette import read_cassette
from claudetrace.indexer import open_settled_store
from claudetrace.store import Store, open_store
from claudetrace.store.browse import (
    _tool_usage_from_events,
    conversation_events,
    first_prompts,
)
from claudetrace.store.packing import (
    KEPT,
    ZLIB,
    LinePacker,
    Unpacker,
    pack,
    pack_url,
    train_zstd,
    unpack,
    zstd_codec,
)
from claudetrace.store.search import search, search_plain
from tests.test_store_postgres import fresh_database, pg_url  # noqa: F401 - pg_url: a fixture

FIXTURES = Path(__file__).parent / "fixtures"
CASSETTES = sorted([*FIXTURES.glob("cassettes/*.ndjson"),
                    *FIXTURES.glob("telemetry/*.ndjson")])


def _odd_cassette(path: Path) -> Path:
    """A cassette of lines that test the packing: a 2 MB line, bytes that are not
    UTF-8, every byte but the newline, an empty line, a last line without its
    newline, and a text delta the search finds."""
    rng = random.Random(7)
    huge = json.dumps({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1",
         "content": "".join(rng.choice("abcdef \n") for _ in range(2_000_000))}]}})
    lines: list[bytes] = [
        json.dumps({"type": "user", "message": {"role": "user",
                                                "content": "find the zanzibar word"}}).encode(),
        huge.encode(),
        b"\xff\xfe not utf-8 \xc3\x28",
        bytes(b for b in range(256) if b != 10),
        bytes(rng.randrange(256) for _ in range(5000)).replace(b"\n", b"x"),
        b"",
        b'{"type":"assistant","message":{"id":"msg_9","role":"assistant","content":[{"type":'
        b'"tool_use","id":"toolu_9","name":"Bash","input":{"command":"false"}}]}}',
        b'{"type":"user","message":{"role":"user","content":[{"type":"tool_result",'
        b'"tool_use_id":"toolu_9","is_error":true,"content":"exit 1"}]}}',
        b'{"type":"result","subtype":"success","is_error":false,"result":"done"}',
        b"partial last line",
    ]
    records = [{"claudetrace": "cassette", "version": 1, "argv": ["claude"], "exit_code": 0}]
    for seq, data in enumerate(lines):
        # The CLI's lines go out: the failed tool's result among them.
        direction = "in" if seq % 2 and b'"is_error":true' not in data else "out"
        record: dict[str, Any] = {"seq": seq, "t": seq / 10, "dir": direction}
        try:
            record["line"] = data.decode("utf-8")
        except UnicodeDecodeError:
            record["line_b64"] = base64.b64encode(data).decode()
        if seq == len(lines) - 1:
            record["eol"] = False
        records.append(record)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _everything(store: Store, rid: str) -> dict[str, Any]:
    """What every reader gives of a recording."""
    pages = [tuple(row) for page in store.iter_line_pages(rid, chunk=3) for row in page]
    return {
        "rows": list(store.iter_event_rows(rid, chunk=5)),
        "pages": [(s, d, t, bytes(b), bool(e)) for s, d, t, b, e in pages],
        "events": [(e.seq, e.data, e.eol) for e in store.iter_events(rid)],
        "conversation": [(e.seq, e.data) for e in conversation_events(store, rid)],
        "prompts": first_prompts(store, [rid]),
        # From the lines themselves (an ended recording's figures are read otherwise).
        "failed tools": _tool_usage_from_events(store, [rid]),
    }


def _codecs(store: Store) -> dict[Any, int]:
    from sqlalchemy import text

    with store.engine.connect() as conn:
        return {codec: int(n) for codec, n in conn.execute(text(
            "SELECT codec, count(*) FROM events GROUP BY codec"))}


def _round_trip(store: Store, paths: list[Path]) -> None:
    ids = [store.import_cassette(read_cassette(p)) for p in paths]
    before = {rid: _everything(store, rid) for rid in ids}
    assert any(b["failed tools"].get("Bash", (0, 0))[1] for b in before.values())
    exact = {rid: [(e.seq, e.data, e.eol) for e in read_cassette(p).events]
             for rid, p in zip(ids, paths, strict=True)}
    assert set(_codecs(store)) == {None}
    assert store.pack_lines() > 0
    codecs = _codecs(store)
    assert None not in codecs and any(c not in (KEPT,) for c in codecs)
    for rid in ids:
        after = _everything(store, rid)
        assert after == before[rid]
        assert after["events"] == exact[rid]
    assert store.pack_lines() == 0  # nothing left to pack


def test_unpack_gives_back_what_pack_was_given() -> None:
    lines = [b"", b"\x00\xff", b'{"type":"assistant"}' * 50, bytes(range(256))]
    for line in lines:
        assert unpack(pack(line), ZLIB, lambda n: b"") == line
        assert unpack(memoryview(line), None, lambda n: b"") == line


def test_lines_packed_against_a_deflate_dictionary_by_an_earlier_build_are_read() -> None:
    zdict = b'{"type":"assistant","message":{"content":[{"type":"text","text":"'
    for line in [b"", b'{"type":"assistant","message":{}}', bytes(range(256))]:
        deflate = zlib.compressobj(6, zlib.DEFLATED, -15, zdict=zdict)
        packed = deflate.compress(line) + deflate.flush()
        assert unpack(packed, 7, {7: zdict}.__getitem__) == line
        assert Unpacker({7: zdict}.get)(packed, 7) == line


def test_zstd_packs_lines_against_a_dictionary_it_trained_and_reads_them_back() -> None:
    """The dictionary zstd trains on a store's lines packs lines like them to a
    fraction of their bytes (below a third here); each reads back exactly,
    through :func:`unpack` and through an :class:`Unpacker` shared by threads
    (the UI's sessions share a store's); what packing would not make smaller
    is kept as it is, as is what PostgreSQL compresses itself."""
    from concurrent.futures import ThreadPoolExecutor

    lines = list(shape_lines("deltas", 3000))
    zdict = train_zstd(lines[:1000])
    assert zdict is not None and train_zstd(lines[:3]) is None  # too few to train on
    packer = LinePacker(5, zdict)
    odd = [b"", b"\xff\xfe not utf-8", bytes(range(256)), b"{}" * 5000]
    packed = [packer(line) for line in [*lines, *odd]]
    assert {codec for _, codec in packed} == {zstd_codec(5), KEPT}
    assert zstd_codec(5) < ZLIB
    assert packed[-4] == (b"", KEPT) and packed[-2] == (bytes(range(256)), KEPT)
    assert sum(len(d) for d, _ in packed[:3000]) < sum(map(len, lines)) / 3
    read = Unpacker({5: zdict}.get)
    with ThreadPoolExecutor(4) as pool:
        back = list(pool.map(lambda row: read(*row), packed))
    assert back == [*lines, *odd]
    assert [unpack(d, c, {5: zdict}.__getitem__) for d, c in packed[-5:]] == [lines[-1], *odd]
    assert LinePacker(5, zdict, keep_from=100)(b"{}" * 50) == (b"{}" * 50, KEPT)


def _long_lines_recorded(db: str, count: int, size: int) -> tuple[str, str]:
    """A finished recording of ``count`` lines of ``size`` bytes (a file's text,
    as a Read result echoes it) stored as recorded into ``db``; the database's
    URL and the recording's id."""
    from claudetrace.model.events import Event
    from claudetrace.recording import RecordingInfo

    rng = random.Random(11)
    words = [f"w{n}" for n in range(500)]
    store = open_store(db)
    try:
        info = RecordingInfo.start(["claude"])
        store.create_recording(info)
        for seq in range(count):
            text = " ".join(rng.choice(words) for _ in range(size // 4))[:size - 40]
            line = json.dumps({"type": "system", "subtype": "file", "text": text}).encode()
            store.write_batch(info.id, [Event(seq, "out", seq, line)])
        store.update_recording(info.id, ended_ns=time.time_ns(), exit_code=0)
        return store.url, info.id
    finally:
        store.close()


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_training_a_dictionary_reads_no_line_whole(
        engine: str, tmp_path: Path, ct_env: Path, monkeypatch: pytest.MonkeyPatch,
        request: pytest.FixtureRequest) -> None:
    """The pass holds a chunk of lines at a time, training its dictionary too:
    it reads the first bytes of each line it trains on, not the line (a
    recording of files read whole held every line in memory at once: 332 MiB
    for the huge shape's 300 MB).  Its peak of Python memory stays under a
    third of the recording's lines, the lines read back exactly."""
    import tracemalloc

    from claudetrace.store import packing

    # PostgreSQL: a database of its own (the module's would keep its packed rows).
    db = (str(tmp_path / "t.db") if engine == "sqlite"
          else fresh_database(request.getfixturevalue("pg_server"), "m_test_packing_training"))
    db, rid = _long_lines_recorded(db, 48, 256 * 1024)
    store = open_store(db)
    try:
        before = [e.data for e in store.iter_events(rid)]
    finally:
        store.close()
    monkeypatch.setattr(packing, "CHUNK_BYTES", 1 << 20)
    tracemalloc.start()
    try:
        assert pack_url(db, rid) is not None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < sum(map(len, before)) / 3
    store = open_store(db)
    try:
        assert [e.data for e in store.iter_events(rid)] == before
        assert None not in _codecs(store)
    finally:
        store.close()


def test_every_fixture_and_odd_line_is_read_back_exactly_after_packing_on_sqlite(
        tmp_path: Path, ct_env: Path) -> None:
    store = open_store(str(tmp_path / "a.db"))
    try:
        _round_trip(store, [*CASSETTES, _odd_cassette(tmp_path / "odd.ndjson")])
        # A zstd dictionary was trained (the fixtures together are over TRAIN_FROM)
        # and used.
        assert any(c is not None and c < ZLIB for c in _codecs(store))
        said = [h.seq for h in search(store, "zanzibar")]
        assert said and said == [h.seq for h in search_plain(store.url, "zanzibar") or []]
    finally:
        store.close()


def test_every_fixture_and_odd_line_is_read_back_exactly_after_packing_on_postgres(
        pg_url: str, tmp_path: Path, ct_env: Path) -> None:  # noqa: F811 - the fixture
    store = open_store(pg_url)
    try:
        _round_trip(store, [*CASSETTES, _odd_cassette(tmp_path / "odd.ndjson")])
        assert [h.seq for h in search(store, "zanzibar word")] == [0]
        assert [h.seq for h in search_plain(pg_url, "zanzibar") or []] == [0]
    finally:
        store.close()


def test_export_is_the_same_file_before_and_after_packing(tmp_path: Path, ct_env: Path) -> None:
    db = str(tmp_path / "b.db")
    odd = _odd_cassette(tmp_path / "odd.ndjson")
    run = [sys.executable, "-m", "claudetrace"]
    subprocess.run([*run, "import", "--db", db, str(odd)], check=True, capture_output=True)
    before = subprocess.run([*run, "export", "latest", "--db", db, "--no-redact"],
                            check=True, capture_output=True).stdout
    done = subprocess.run([*run, "db", "pack", "--db", db], check=True, capture_output=True)
    assert b"10 lines looked at" in done.stdout
    after = subprocess.run([*run, "export", "latest", "--db", db, "--no-redact"],
                           check=True, capture_output=True).stdout
    assert after == before
    raw = subprocess.run([*run, "show", "latest", "--db", db, "--raw"],
                         check=True, capture_output=True).stdout
    assert b"\xff\xfe not utf-8 \xc3\x28" in raw


def test_a_proxied_recording_is_packed_by_its_indexer(tmp_path: Path, ct_env: Path) -> None:
    db = tmp_path / "p.db"
    lines = list(shape_lines("deltas", 3000))
    odd = [b"\xff\xfe not utf-8", bytes(b for b in range(256) if b != 10)]
    sent = b"".join(line + b"\n" for line in [*lines, *odd])
    done = subprocess.run([sys.executable, "-m", "claudetrace", "proxy", "--db", str(db),
                           "--", "cat"], input=sent, capture_output=True, check=True)
    assert done.stdout == sent
    store = open_settled_store(str(db))
    try:
        rid = store.list_recordings()[0].id
        deadline = time.monotonic() + 60
        while None in _codecs(store) and time.monotonic() < deadline:
            time.sleep(0.2)  # the indexer packs after the recording is listed complete
        codecs = _codecs(store)
        assert None not in codecs and codecs.get(zstd_codec(1), 0) > 0
        stored = [e.data for e in store.iter_events(rid) if e.direction == "in"]
        assert stored == [*lines, *odd]
        with sqlite3.connect(db) as conn:
            packed, raw = conn.execute("SELECT sum(length(data)), sum(size) FROM events"
                                       ).fetchone()
        assert packed < 0.5 * raw
    finally:
        store.close()


def _lines_of(db: str) -> list[tuple[int, bytes]]:
    store = open_store(db)
    try:
        rid = store.list_recordings()[0].id
        return [(e.seq, e.data) for e in store.iter_events(rid)]
    finally:
        store.close()


def _packed_or_not(engine: Any, recording_id: str | None = None) -> dict[bool, int]:
    """How many rows (of ``recording_id``, default all) are packed (True) and not
    (False), read apart from the store."""
    from sqlalchemy import text

    where = ("" if recording_id is None
             else "WHERE rec = (SELECT num FROM recordings WHERE id = :rid)")
    with engine.connect() as conn:
        return {bool(k): int(n) for k, n in conn.execute(text(
            f"SELECT codec IS NOT NULL, count(*) FROM events {where} GROUP BY 1"),
            {"rid": recording_id})}


def _recording_ids(engine: Any) -> set[str]:
    from sqlalchemy import text

    with engine.connect() as conn:
        return {row[0] for row in conn.execute(text("SELECT id FROM recordings"))}


def _kill_midway(db: str, tmp_path: Path) -> None:
    """A real ``db pack`` killed (SIGKILL) once it has committed some rows: every
    line reads back as recorded, and a second pass packs the rest."""
    lines = list(shape_lines("deltas", 40_000))
    cassette = tmp_path / "big.ndjson"
    cassette.write_text(json.dumps({"claudetrace": "cassette", "version": 1, "argv": []}) + "\n"
                        + "".join(json.dumps({"seq": i, "t": i / 1000, "dir": "out",
                                              "line": line.decode()}) + "\n"
                                  for i, line in enumerate(lines)))
    run = [sys.executable, "-m", "claudetrace"]
    from sqlalchemy import create_engine

    engine = create_engine(db if "://" in db else f"sqlite:///{db}")
    # The PostgreSQL server is shared by the module's tests: count this
    # recording's rows only.
    subprocess.run([*run, "db", "upgrade", "--db", db], check=True, capture_output=True)
    before = _recording_ids(engine)
    subprocess.run([*run, "import", "--db", db, str(cassette)], check=True,
                   capture_output=True)
    (mine,) = _recording_ids(engine) - before
    expected = list(enumerate(lines))
    packing = subprocess.Popen([*run, "db", "pack", "--db", db],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and packing.poll() is None:
            if _packed_or_not(engine, mine).get(True):
                break
            time.sleep(0.005)
        assert packing.poll() is None, "the pass ended before it could be killed"
        os.kill(packing.pid, signal.SIGKILL)
        assert packing.wait(30) == -signal.SIGKILL
        half = _packed_or_not(engine, mine)
        assert half.get(True) and half.get(False), half  # some packed, some not: cut midway
        assert _lines_of(db) == expected
        subprocess.run([*run, "db", "pack", "--db", db], check=True, capture_output=True)
        assert _packed_or_not(engine, mine) == {True: len(lines)}
        assert _lines_of(db) == expected
    finally:
        if packing.poll() is None:
            packing.kill()
            packing.wait()
        engine.dispose()


def test_a_packing_killed_midway_loses_nothing(tmp_path: Path, ct_env: Path) -> None:
    _kill_midway(str(tmp_path / "k.db"), tmp_path)


def test_a_packing_killed_midway_loses_nothing_on_postgres(
        pg_url: str, tmp_path: Path, ct_env: Path) -> None:  # noqa: F811 - the fixture
    _kill_midway(pg_url, tmp_path)


def test_packing_leaves_a_running_recording_alone(tmp_path: Path, ct_env: Path) -> None:
    store = open_store(str(tmp_path / "r.db"))
    try:
        rid = store.import_cassette(read_cassette(CASSETTES[0]))
        store.update_recording(rid, ended_ns=None)
        assert pack_url(store.url, rid) == 0
        assert store.pack_lines() == 0
        assert set(_codecs(store)) == {None}
    finally:
        store.close()


def test_a_downgrade_unpacks_every_line_first(tmp_path: Path, ct_env: Path) -> None:
    from alembic import command

    from claudetrace.store.engine import alembic_config

    store = open_store(str(tmp_path / "d.db"))
    try:
        paths = [*CASSETTES, _odd_cassette(tmp_path / "odd.ndjson")]
        ids = [store.import_cassette(read_cassette(p)) for p in paths]
        store.pack_lines()
        with store.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0010_lz4")
        with store.engine.connect() as conn:
            for rid, path in zip(ids, paths, strict=True):
                stored = [bytes(d) for d in conn.exec_driver_sql(
                    "SELECT data FROM events WHERE recording_id = ? ORDER BY seq",
                    (rid,)).scalars()]
                assert stored == [e.data for e in read_cassette(path).events]
    finally:
        store.close()


def _events_updated(url: str) -> int:
    """Rows of ``events`` updated so far, as the server's statistics count them
    (each backend reports its counts as its transaction ends, or as it exits)."""
    import psycopg

    from claudetrace.store.postgres import plain_url

    conninfo = plain_url(url)
    assert conninfo is not None
    with psycopg.connect(conninfo) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT n_tup_upd FROM pg_stat_user_tables "
                           "WHERE relname = 'events'").fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize("paced", [True, False], ids=["session", "burst"])
def test_a_proxied_recording_on_postgres_is_packed_as_recorded(
        pg_url: str, tmp_path: Path, ct_env: Path, paced: bool) -> None:  # noqa: F811
    """Once the store has a dictionary (here trained on the first recording's first
    lines, as they are recorded) the indexer's writer stores each line packed,
    at a session's pace and in a burst alike: no row is rewritten (a rewrite
    leaves the line as recorded behind as a dead row).  Every line reads back
    exactly, and search finds the words of a packed line (a burst's words are
    added by the pass after the listing)."""
    from tests.test_store_postgres import fresh_database

    url = fresh_database(pg_url, f"packed_as_recorded_{'session' if paced else 'burst'}")
    lines = list(shape_lines("deltas", 3000))
    odd = [b"\xff\xfe not utf-8", bytes(b for b in range(256) if b != 10),
           b'{"type":"user","message":{"role":"user","content":"the quokka word"}}']
    sent = b"".join(line + b"\n" for line in [*lines, *odd])
    store = open_store(url)
    try:
        for name in ("first", "second"):
            if name == "second":
                updated = _events_updated(url)
            # A session's pace (small batches): 20 lines each twentieth of a second;
            # a burst: all at once.
            pace = ("import sys, time\n"
                    "lines = sys.stdin.buffer.readlines()\n"
                    f"step = {20 if paced else 10**9}\n"
                    "for at in range(0, len(lines), step):\n"
                    "    sys.stdout.buffer.write(b''.join(lines[at:at + step]))\n"
                    "    sys.stdout.buffer.flush()\n"
                    "    time.sleep(0.05)\n")
            feeder = subprocess.Popen([sys.executable, "-c", pace], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE)
            assert feeder.stdin is not None and feeder.stdout is not None
            done = subprocess.Popen([sys.executable, "-m", "claudetrace", "proxy", "--db", url,
                                     "--name", name, "--", "cat"],
                                    stdin=feeder.stdout, stdout=subprocess.PIPE)
            feeder.stdout.close()  # the proxy's now
            feeder.stdin.write(sent)
            feeder.stdin.close()
            out, _ = done.communicate(timeout=120)
            assert feeder.wait(30) == 0 and done.returncode == 0
            assert out == sent
            settled = open_settled_store(url)
            settled.close()
            deadline = time.monotonic() + 60
            while None in _codecs(store) and time.monotonic() < deadline:
                time.sleep(0.2)  # the first recording's first lines: packed after
            assert None not in _codecs(store)
        (second,) = [r.id for r in store.list_recordings() if r.name == "second"]
        time.sleep(1.5)  # the indexer's backends have reported their counts
        # Inserted packed, none rewritten (stored as recorded and packed after, all
        # 6,006 rows of both directions would be; a burst's were, those its
        # writer stored while the next batch waited: 1,069 to 6,006 of them).
        assert _events_updated(url) - updated == 0
        from sqlalchemy import text

        with store.engine.connect() as conn:
            packed, raw = conn.execute(text(
                "SELECT sum(length(data)), sum(size) FROM events WHERE rec = "
                "(SELECT num FROM recordings WHERE id = :r)"),
                {"r": second}).one()
            dictionaries = conn.execute(text("SELECT count(*) FROM line_dictionaries")).scalar()
        assert packed < 0.5 * raw
        assert dictionaries == 1
        for direction in ("in", "out"):
            stored = [e.data for e in store.iter_events(second) if e.direction == direction]
            assert stored == [*lines, *odd]
        hits = search(store, "quokka")
        assert second in {h.recording_id for h in hits}
        assert [h.seq for h in search_plain(url, "quokka") or []] == [h.seq for h in
                                                                      search(store, "quokka")]
    finally:
        store.close()


def test_every_line_is_packed_at_ingest_against_the_newest_zstd_dictionary() -> None:
    """The writer packs each line of every batch, a burst's too, against the
    store's newest zstd dictionary (read back exactly with it), passing over a
    deflate dictionary an earlier build stored; lines PostgreSQL compresses
    itself are kept as they are."""
    import contextlib

    from claudetrace.store.packing import POSTGRES_COMPRESSES_FROM, PackAtIngest

    lines = list(shape_lines("deltas", 400))
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE line_dictionaries (id INTEGER PRIMARY KEY, data BLOB, "
                 "created_ns INTEGER)")
    zdict = train_zstd(lines)
    assert zdict is not None
    conn.executemany("INSERT INTO line_dictionaries (id, data, created_ns) VALUES (?, ?, 0)",
                     [(7, zdict), (8, b'{"type":"assistant","message":')])

    @contextlib.contextmanager
    def transaction() -> Any:
        yield conn.cursor()

    packer = PackAtIngest().packer(transaction, lines)
    assert packer is not None
    huge = b"{}" * POSTGRES_COMPRESSES_FROM
    packed = [packer(line) for line in [*lines, huge]]
    assert {codec for _, codec in packed} == {zstd_codec(7), KEPT}
    assert packed[-1] == (huge, KEPT)
    assert sum(len(data) for data, _ in packed[:-1]) < 0.4 * sum(map(len, lines))
    assert [unpack(data, codec, {7: zdict}.__getitem__) for data, codec in packed] == [
        *lines, huge]
