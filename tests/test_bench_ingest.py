"""bench startup and bench ingest: they run, print their rows, and the naive loop
stores what it says it does (tiny inputs; nothing here is timed)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from claudetrace import capture as cap
from claudetrace.bench.ingest import (
    NAIVE_LOOP,
    IngestReport,
    IngestRun,
    StartupReport,
    _through_proxy,
    run_ingest_bench,
)
from claudetrace.bench.orphans import adopting
from claudetrace.bench.proxy import build_input, sample_lines
from claudetrace.cli import cli

pytestmark = pytest.mark.usefixtures("ct_env")

#: The modules of the processes that store a capture: the indexer and its writer.
INDEXING = frozenset({b"claudetrace.indexer", b"claudetrace.store.writer_child"})


def test_the_naive_loop_parses_and_stores_every_line_both_ways(tmp_path: Path) -> None:
    source = tmp_path / "in.ndjson"
    source.write_bytes(build_input(sample_lines(), 300) + b"not json\n")
    db = tmp_path / "naive.db"
    subprocess.run([sys.executable, "-c", NAIVE_LOOP, str(source), str(db)], check=True)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT seq, direction, type, data FROM events ORDER BY seq").fetchall()
        indexes = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'index'").fetchone()
    conn.close()
    lines = source.read_bytes().splitlines()
    assert [r[3] for r in rows] == [line for line in lines for _ in ("in", "out")]
    assert {r[1] for r in rows} == {"in", "out"}
    assert rows[-1][2] is None and rows[0][2] is not None  # parsed: the JSON lines have a type
    assert indexes[0] == 4  # the primary key's and three more


def test_a_tiny_ingest_run_stores_every_event_and_prints_its_rows() -> None:
    report = run_ingest_bench(lines=400, repeat=2)
    assert [r.name for r in report.runs] == ["naive loop", "claudetrace, SQLite"] * 2
    assert all(r.seconds > 0 for r in report.runs)
    assert all(r.cpu_seconds for r in report.runs)  # the naive loop's; the proxy's and more
    text = "\n".join(report.lines_out())
    assert "naive loop" in text and "claudetrace, SQLite" in text and "x the naive loop" in text
    # Each database holds the lines it recorded, both directions: the naive loop
    # as they came, claudetrace packed once the recording ended (docs/store.md).
    naive = [r for r in report.runs if r.name == "naive loop"]
    assert all(r.stored_bytes and r.stored_bytes >= report.raw_bytes for r in naive)
    assert all(r.stored_bytes for r in report.runs)
    assert report.raw_bytes == 2 * (report.bytes - 400)
    assert "footprint" in text
    # Where the bytes went, by table and index: the lines (packed) are in the
    # events table.
    stores = [r for r in report.runs if r.name != "naive loop"]
    assert all(r.relations["events"] > 0 for r in stores)
    assert all(0 < sum(r.relations.values()) <= r.stored_bytes for r in stores)
    assert "claudetrace, SQLite: B/event by relation" in text and " events " in text


def test_every_shape_runs_with_its_own_line_count() -> None:
    from claudetrace.bench.ingest import run_ingest_shapes, shape_line_count

    reports = run_ingest_shapes(shapes=["deltas", "tools"], lines=200)
    assert [(r.shape, r.lines) for r in reports] == [("deltas", 255), ("tools", 80)]
    assert shape_line_count("huge", 200) == 1 and shape_line_count("sample", 200) == 200
    for report in reports:
        assert all(r.stored_bytes for r in report.runs)
        assert f"shape {report.shape}" in report.lines_out()[0]


def test_a_text_delta_shape_is_stored_whole() -> None:
    report = run_ingest_bench(lines=300, shape="deltas")  # its check: every event stored
    assert [r.name for r in report.runs] == ["naive loop", "claudetrace, SQLite"]


def test_what_the_benches_record_in_a_database_the_user_named_is_deleted_after(
    tmp_path: Path,
) -> None:
    from claudetrace.bench.ingest import run_startup_bench
    from claudetrace.recording import RecordingInfo
    from claudetrace.store import open_store

    url = str(tmp_path / "users.db")
    store = open_store(url)
    mine = RecordingInfo.start(["claude", "-p", "kept"])
    store.create_recording(mine)
    store.close()
    report = run_ingest_bench(lines=200, repeat=2, databases={"SQLite": None, "users": url})
    assert [r.name for r in report.runs].count("claudetrace, users") == 2
    run_startup_bench(runs=2, databases={"users": url}, telemetry=False)
    store = open_store(url)
    try:
        # The user's recording alone is left, whole.
        assert [r.id for r in store.list_recordings()] == [mine.id]
    finally:
        store.close()


def test_a_bench_never_deletes_a_recording_it_did_not_make(tmp_path: Path) -> None:
    # The newest recording is someone else's (the bench's run stored nothing, or
    # a session started meanwhile): the check fails, and it stays.
    from claudetrace.bench.proxy import _check_stored, forgetting
    from claudetrace.recording import RecordingInfo
    from claudetrace.store import open_store

    url = str(tmp_path / "users.db")
    store = open_store(url)
    theirs = RecordingInfo.start(["claude", "-p"], name="my session")
    store.create_recording(theirs)
    store.close()
    with forgetting() as made:
        with pytest.raises(RuntimeError, match="stored 0 of 2000"):
            _check_stored(url, 2000, made)
        _check_stored(url, 0, made)  # the count matches: but for its name it is not ours
    store = open_store(url)
    try:
        assert [r.id for r in store.list_recordings()] == [theirs.id]
    finally:
        store.close()


def test_a_proxy_run_ends_once_its_indexer_and_writer_have_exited(tmp_path: Path) -> None:
    # What they do after the recording is queryable (the database's tidying up as
    # it closes) must not overlap the next row, the naive loop's.
    source = tmp_path / "in.ndjson"
    source.write_bytes(build_input(sample_lines(), 3000))
    url = str(tmp_path / "c.db")
    folders = [str(folder).encode() for folder in cap.capture_dirs(cap.resolve_url(url))]

    def indexing() -> list[str]:
        found = []
        for entry in Path("/proc").iterdir():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if INDEXING.intersection(argv) and any(f in a for f in folders for a in argv):
                found.append(entry.name)
        return found

    with adopting() as orphans:
        run = _through_proxy("claudetrace, SQLite", url, source, 3000, orphans)
        assert indexing() == []
    assert run.cpu_seconds and run.forwarded_seconds is not None
    assert run.peak_rss_kib  # the indexer's and its writer's, from their exit
    # Read as it was listed: each process's share, within the whole run's.
    assert set(run.listed_cpu) == {"proxy", "indexer", "writer"}
    assert run.listed_cpu["indexer"] > 0 and run.listed_cpu["writer"] > 0
    assert run.clock_cpu is not None and run.clock_cpu <= run.cpu_seconds + 0.02


def test_ingest_rows_are_medians_and_ratios_against_the_naive_loop() -> None:
    report = IngestReport(1000, 10_000, [
        IngestRun("naive loop", 4.0), IngestRun("claudetrace, SQLite", 1.0, 0.5, 20480),
        IngestRun("naive loop", 2.0), IngestRun("claudetrace, SQLite", 3.0, 0.5, None),
        IngestRun("naive loop", 3.0), IngestRun("claudetrace, SQLite", 2.0, 0.5, None),
    ])
    assert report.median("naive loop").seconds == 3.0
    text = "\n".join(report.lines_out())
    assert "claudetrace, SQLite: 1.50x the naive loop (target >= 2x: MISSED)" in text


def test_startup_figures_are_the_difference_of_medians() -> None:
    report = StartupReport([1.0, 2.0, 9.0], {"SQLite": [30.0, 31.0, 80.0]})
    assert report.added_ms("SQLite") == 29.0
    assert "29.0 ms later through the proxy (SQLite; target < 50 ms: met)" in "\n".join(
        report.lines())


def test_the_commands_run_and_print_their_rows() -> None:
    result = CliRunner().invoke(cli, ["bench", "startup", "--runs", "2"])
    assert result.exit_code == 0, result.output
    assert "proxy, SQLite" in result.output and "later through the proxy" in result.output
    assert "later through the proxy (SQLite, live telemetry; target" in result.output
    result = CliRunner().invoke(cli, ["bench", "ingest", "--lines", "200"])
    assert result.exit_code == 0, result.output
    assert "claudetrace, SQLite" in result.output and "naive loop" in result.output


def test_the_cpu_column_is_held_against_the_naive_loops() -> None:
    listed = {"proxy": 0.5, "indexer": 3.0, "writer": 2.5}
    report = IngestReport(1000, 10_000, [
        IngestRun("naive loop", 4.0, cpu_seconds=3.0),
        IngestRun("claudetrace, SQLite", 2.0, 0.5, None, cpu_seconds=7.5, listed_cpu=listed),
    ])
    lines = report.lines_out()
    row = next(line for line in lines if line.startswith("claudetrace, SQLite "))
    # until queryable, its ratio to the naive loop's, and what came after the listing
    assert row.split()[-3:] == ["6.00", "0.50", "1.50"]
    assert ("sample, claudetrace, SQLite: CPU until queryable (µs an event): proxy 0.50 s "
            "(250.0), indexer 3.00 s (1500.0), writer 2.50 s (1250.0); the naive loop "
            "3.00 s (1500.0)") in lines
