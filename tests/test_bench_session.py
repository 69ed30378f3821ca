"""bench session: it runs, prints its rows against their references, and the
session it builds and the naive loops are what they say (tiny inputs; nothing
here is timed)."""

from __future__ import annotations

import itertools
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from claudetrace.bench.session import (
    NAIVE_EXPORT,
    NAIVE_IMPORT,
    Run,
    SessionReport,
    build_cassette,
    run_session_bench,
)
from claudetrace.cassette import read_cassette

pytestmark = pytest.mark.usefixtures("ct_env")


def test_the_session_cycles_the_sample_on_in_seq_and_time(tmp_path: Path) -> None:
    path = tmp_path / "s.ndjson"
    build_cassette(path, 5000)
    events = read_cassette(path).events  # validates every line, and that seq increases
    assert [e.seq for e in events] == list(range(5000))
    assert all(a.t_ns <= b.t_ns for a, b in itertools.pairwise(events))
    sample = read_cassette(Path(__file__).parent.parent / "claudetrace" / "bench" / "data"
                           / "streaming.cassette.ndjson").events
    assert [e.data for e in events[: len(sample)]] == [e.data for e in sample]
    assert events[len(sample)].data == sample[0].data


def test_the_naive_loops_store_and_write_back_every_line(tmp_path: Path) -> None:
    path = tmp_path / "s.ndjson"
    build_cassette(path, 300)
    db, out = tmp_path / "naive.db", tmp_path / "out.ndjson"
    subprocess.run([sys.executable, "-c", NAIVE_IMPORT, str(path), str(db)], check=True)
    with sqlite3.connect(db) as conn:
        count, typed = conn.execute("SELECT count(*), count(type) FROM events").fetchone()
    conn.close()
    assert count == 300 and typed == 300
    subprocess.run([sys.executable, "-c", NAIVE_EXPORT, str(db), str(out)], check=True)
    assert [e.data for e in read_cassette(out).events] == [
        e.data for e in read_cassette(path).events]


def test_a_tiny_run_times_every_row_and_checks_the_export() -> None:
    report = run_session_bench(lines=2000, repeat=1)
    names = {r.name for r in report.runs}
    assert {"cat (the cassette)", "naive import loop", "claudetrace import",
            "claudetrace import (new file)", "claudetrace export --no-redact",
            "claudetrace show", "claudetrace show --raw", "claudetrace show --deltas"} <= names
    assert all(r.seconds > 0 for r in report.runs)
    assert all(r.first_byte is not None for r in report.runs if "show" in r.name)
    text = "\n".join(report.lines_out())
    assert "byte for byte" in text and "naive show loop" in text


def test_rows_are_medians_with_ratios_and_targets() -> None:
    report = SessionReport(200_000, 10**8, [
        Run("naive show loop", 4.0, 0.1, 3.0, 1024), Run("claudetrace show", 2.0, 0.5, 1.0, 2048),
        Run("naive show loop", 6.0, 0.1, 3.0, 1024), Run("claudetrace show", 4.0, 1.5, 1.0, 2048),
        Run("naive show loop", 5.0, 0.1, 3.0, 1024), Run("claudetrace show", 3.5, 0.9, 1.0, 2048),
    ])
    median = report.median("claudetrace show")
    assert (median.seconds, median.first_byte) == (3.5, 0.9)
    text = "\n".join(report.lines_out())
    assert "1.43  naive show loop" in text  # 5.0 / 3.5
    assert "claudetrace show: first byte < 1 s, total < 3 s: MISSED" in text
