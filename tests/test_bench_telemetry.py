"""``claudetrace bench telemetry``: the indexer stores one capture file, telemetry off and on."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from claudetrace import capture as cap
from claudetrace.bench.cachegrind import Counts, read_log, read_logs
from claudetrace.bench.telemetry import TelemetryBenchReport, run_telemetry_bench, write_capture
from claudetrace.cli import cli


def test_the_capture_holds_the_session_in_pipe_sized_chunks(tmp_path: Path) -> None:
    path = write_capture(tmp_path, 3000)
    data = {"in": b"", "out": b""}
    reader = cap.CaptureReader(path)
    try:
        for record in reader:
            if record.kind < 2:  # in, out
                assert len(record.data) <= 2 * 65536
                data[record.direction] += record.data
    finally:
        reader.close()
    assert data["in"].count(b"\n") + data["out"].count(b"\n") == 3000
    assert data["in"] and data["out"].count(b'"stream_event"') > 1000


@pytest.mark.usefixtures("ct_env")
def test_a_tiny_run_measures_both_modes_in_turns() -> None:
    report = run_telemetry_bench(lines=400, rounds=2)
    assert [len(report.cpu_s[m]) for m in ("off", "on")] == [2, 2]
    assert all(s > 0.05 for m in ("off", "on") for s in report.cpu_s[m])  # a real indexer ran
    text = "\n".join(report.lines_out())
    assert "400 lines" in text and "live telemetry:" in text and "cachegrind" not in text


@pytest.mark.usefixtures("ct_env")
def test_a_run_whose_export_failed_fails_the_benchmark(tmp_path: Path) -> None:
    """A failed export costs less than one that went through: it must not count."""
    from claudetrace.bench.telemetry import _index
    from tests.otlp_receiver import OtlpReceiver

    source = write_capture(tmp_path, 400)
    with OtlpReceiver("http", refuse={"/v1/traces": 400}) as receiver:
        with pytest.raises(RuntimeError, match="live telemetry failed: OTLP traces export"):
            _index(source, tmp_path, "refused", receiver.endpoint, [])
        assert receiver.paths  # it did try


def test_cachegrind_totals_and_the_cycle_estimate(tmp_path: Path) -> None:
    log = tmp_path / "cg.log"
    log.write_text("==1== I   refs:      1,000,000\n==1== I1  misses:  10\n"
                   "==1== D1  misses:       20  (15 rd + 5 wr)\n==1== LL misses:  3  (2 + 1)\n")
    counts = read_log(log)
    assert counts == Counts(1_000_000, 30, 3)
    assert counts.cycles_estimate == 1_000_000 + 300 + 300
    # A run of several processes: their logs add up.
    other = tmp_path / "cg2.log"
    other.write_text("==2== I   refs:      500\n==2== I1  misses:  1\n"
                     "==2== D1  misses:       2  (1 rd + 1 wr)\n==2== LL misses:  1  (1 + 0)\n")
    assert read_logs([log, other]) == Counts(1_000_500, 33, 4)
    report = TelemetryBenchReport(10, {"off": [1.0], "on": [1.1]},
                                  {"off": counts, "on": Counts(1_100_000, 30, 3)})
    assert "instructions 0.00 G -> 0.00 G (+10.0%)" in "\n".join(report.lines_out())
    log.write_text("valgrind: failed to start\n")
    with pytest.raises(RuntimeError, match="I   refs"):
        read_log(log)
    with pytest.raises(RuntimeError, match="no log"):
        read_logs([])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
# Python under cachegrind runs some 50 times slower: on a loaded 2-core machine (the
# suite's other worker, other jobs) this outlasted the suite's 300 s per test.
@pytest.mark.timeout(900)
@pytest.mark.usefixtures("ct_env")
def test_the_command_counts_instructions_under_valgrind() -> None:
    result = CliRunner().invoke(cli, ["bench", "telemetry", "--lines", "300", "--rounds", "1",
                                      "--valgrind"])
    assert result.exit_code == 0, result.output
    assert "cachegrind: instructions" in result.output and "estimated cycles" in result.output
