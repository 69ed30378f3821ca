"""``claudetrace bench store``, scaled down: it fills a store, times reading it, and
leaves a database the user named as it found it."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from claudetrace.bench.store import RARE, run_store_bench
from claudetrace.cassette import read_cassette
from claudetrace.cli import cli
from claudetrace.store import open_store

CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"


def test_bench_store_times_every_row(tmp_path: Path) -> None:
    report = run_store_bench(sessions=12, turns=1, repeat=1, workdir=str(tmp_path))
    assert (report.sessions, report.events) == (12, 12 * 6)
    assert len(report.rows) == 8 and all(len(runs) == 1 for runs in report.rows.values())
    assert any(RARE in name for name in report.rows)
    shown = "\n".join(report.lines_out())
    assert "/metrics, cold, every recording folded (before 0006)" in shown


def test_bench_store_leaves_a_named_database_as_it_was(
        db_path: Path, tmp_path: Path) -> None:
    store = open_store(str(db_path))
    mine = store.import_cassette(read_cassette(CASSETTES / "plain.ndjson"))
    store.close()
    result = CliRunner().invoke(cli, ["bench", "store", "--sessions", "5", "--turns", "1",
                                      "--repeat", "1", "--db", str(db_path)])
    assert result.exit_code == 0, result.output
    assert "deleted the bench's 5 recordings" in result.output
    store = open_store(str(db_path))
    try:
        assert [r.id for r in store.list_recordings()] == [mine]
        assert store.get(mine).figures is not None  # the user's own left alone
    finally:
        store.close()
