"""The proxy benchmark's pure parts, and one tiny run end to end."""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from claudetrace.bench import compile_bytecode
from claudetrace.bench.cachegrind import Counts
from claudetrace.bench.proxy import (
    STREAMING_CASSETTE,
    Latency,
    ProxyBenchReport,
    Throughput,
    build_input,
    percentile,
    run_proxy_bench,
    sample_lines,
    side_by_side,
    time_command,
)
from claudetrace.cassette import read_cassette
from claudetrace.cli import cli
from claudetrace.model.events import Event

#: The shipped demo session (small and control-heavy), still usable with --from.
DEMO_SESSION = Path(__file__).parent.parent / "claudetrace/demo_data/session.cassette.ndjson"


def test_percentile_nearest_rank() -> None:
    values = list(range(1, 101))
    assert percentile(values, 0.5) == 50
    assert percentile(values, 0.99) == 99
    assert percentile(values, 1.0) == 100
    assert percentile([7], 0.5) == 7
    with pytest.raises(ValueError):
        percentile([], 0.5)


def test_side_by_side_runs_the_calls_at_the_same_time() -> None:
    # Each call waits for the other at a barrier: run one after the other, the
    # first would time out there and break it.
    barrier = threading.Barrier(2, timeout=10)
    started: list[str] = []

    def call(name: str) -> str:
        started.append(name)
        barrier.wait()
        return name.upper()

    assert side_by_side([lambda: call("off"), lambda: call("on")]) == ["OFF", "ON"]
    assert sorted(started) == ["off", "on"]


def test_side_by_side_raises_a_calls_error_after_all_are_done() -> None:
    finished = threading.Event()

    def slow() -> int:
        finished.wait(0.2)
        finished.set()
        return 1

    def broken() -> int:
        raise RuntimeError("the stand-in exited with status 1")

    with pytest.raises(RuntimeError, match="status 1"):
        side_by_side([broken, slow])
    assert finished.is_set()


def test_input_cycles_the_recorded_lines() -> None:
    lines = sample_lines()
    data = build_input(lines, len(lines) + 2)
    assert data.split(b"\n")[:-1] == [*lines, lines[0], lines[1]]
    assert all(b"\n" not in line for line in lines)


def test_the_default_input_is_the_streaming_session() -> None:
    recorded = read_cassette(STREAMING_CASSETTE)
    assert sample_lines() == [e.data for e in recorded.events if e.direction != "err" and e.data]
    # --from still picks another recording, like the demo session.
    assert sample_lines(DEMO_SESSION) != sample_lines()
    assert len(sample_lines(DEMO_SESSION)) < 100 < len(sample_lines())


def test_the_streaming_session_is_mostly_deltas_with_tools_and_control_round_trips() -> None:
    events = [Event(i, "out", 0, line) for i, line in enumerate(sample_lines())]
    assert 1_000 <= len(events) <= 3_000
    fields = [e.fields for e in events]
    assert all(f.is_json for f in fields)
    kinds = Counter((f.type, f.subtype) for f in fields)
    stream_events = sum(n for (kind, _), n in kinds.items() if kind == "stream_event")
    assert stream_events > len(events) / 2
    assert kinds["stream_event", "content_block_delta"] > len(events) / 2
    # Two user turns, each ending with a result.
    assert kinds["user", None] >= 2 and kinds["result", "success"] == 2
    # Tool calls, their results, and the permission and hook round trips about them.
    refs = [ref for f in fields for ref in f.tools]
    used = {ref.name for ref in refs if ref.kind == "use"}
    assert {"Bash", "mcp__tasks__add_task"} <= used
    assert {ref.kind for ref in refs} == {"use", "result", "permission", "hook"}
    for subtype in ("initialize", "can_use_tool", "hook_callback", "mcp_message"):
        assert kinds["control_request", subtype] >= 1, subtype
    requests = {f.request_id for f in fields if f.type == "control_request"}
    answered = {f.request_id for f in fields if f.type == "control_response"}
    assert requests and requests <= answered


def test_the_streaming_session_is_sanitised() -> None:
    header = read_cassette(STREAMING_CASSETTE).header
    assert header["sanitized"]["secrets"] is True
    assert header["cwd"] == "/home/dev/project" and header["argv"][0] == "claude"
    text = STREAMING_CASSETTE.read_text()
    assert str(Path(__file__).resolve().parent.parent) not in text
    assert "sk-ant-fake-key" not in text and "ct-bench-input-" not in text


@pytest.mark.usefixtures("ct_env")
def test_a_tiny_run_measures_all_four_and_checks_storage() -> None:
    report = run_proxy_bench(lines=300, round_trips=50, repeat=2)
    names = ["cat", "tee FILE", "proxy", "proxy echo", "standin", "standin+otel"]
    assert [t.name for t in report.throughput] == names
    # The tools took turns, twice round; telemetry off and on swap places each round.
    assert [t.name for t in report.runs] == names + names[:4] + names[:3:-1]
    assert all(t.seconds > 0 for t in report.runs)
    assert all(t.bytes == report.input_bytes for t in report.throughput[:4])
    # A row is its tool's median run (of two: the faster).
    for name in names:
        assert report.by_name(name).seconds == min(t.seconds for t in report.runs
                                                   if t.name == name)
    assert all(t.cpu_seconds is not None for t in report.throughput)
    assert report.proxied_otel is not None
    assert (
        len(report.direct.round_trips_ns)
        == len(report.proxied.round_trips_ns)
        == len(report.proxied_otel.round_trips_ns)
        == 50
    )
    assert report.otel_cpu_overhead is not None
    assert report.otel_total_cpu_overhead is not None
    for run in report.runs[2:6] + report.runs[8:]:
        # The indexer is a process of its own (it imports SQLAlchemy): its
        # start-up alone is measurable CPU, which the bench reads as it reaps it.
        assert run.indexer_cpu_seconds is not None and run.indexer_cpu_seconds > 0.05
        assert run.stored_after_seconds is not None and run.stored_after_seconds >= 0
        assert run.cpu_seconds is not None
        assert run.recording_cpu_seconds == pytest.approx(
            run.cpu_seconds + run.indexer_cpu_seconds)
    text = "\n".join(report.lines())
    assert "of tee" in text and "p99" in text and "live telemetry, on against off:" in text
    assert "echoed, every byte recorded twice" in text and "median of 2 runs" in text
    assert "proxy + indexer" in text and "stored +s" in text
    each = [f"{t.recording_cpu_seconds:.2f}" for name in ("standin", "standin+otel")
            for t in report.runs if t.name == name]
    assert f"in order: off {each[0]} {each[1]}; on {each[2]} {each[3]}" in text
    # Telemetry's figure pairs the runs of each round, not the medians of all runs.
    off = [t for t in report.runs if t.name == "standin"]
    on = [t for t in report.runs if t.name == "standin+otel"]
    changes = report.otel_changes()
    assert changes is not None and len(changes) == 2
    for change, a, b in zip(changes, off, on, strict=True):
        assert a.recording_cpu_seconds is not None and b.recording_cpu_seconds is not None
        assert change == pytest.approx(b.recording_cpu_seconds / a.recording_cpu_seconds - 1)
    assert report.otel_total_cpu_overhead == min(changes)  # nearest rank: the lower of two
    assert "each round, on against off: " + " ".join(f"{c:+.1%}" for c in changes) in text
    assert "cachegrind" not in text


def test_telemetry_pairs_each_round_and_reports_cachegrind_counts() -> None:
    def run(name: str, cpu: float) -> Throughput:
        # The child (the stand-in) is not the proxy's: its CPU time counts nowhere.
        return Throughput(name, 1.0, 100, 10, cpu_seconds=cpu, children_cpu_seconds=5.0,
                          indexer_cpu_seconds=0.0)

    # Round one ran on a slow stretch of the machine, round two on a fast one, and
    # round three changed from fast to slow between its runs: the medians of all
    # runs (1.0 against 2.1) would say +110%, the median round says +5%.
    runs = [run(name, 0.1) for name in ("cat", "tee FILE", "proxy", "proxy echo")]
    runs += [run("standin", 2.0), run("standin+otel", 2.1),
             run("standin+otel", 1.05), run("standin", 1.0),
             run("standin", 1.0), run("standin+otel", 2.1)]
    latency = Latency("x", [1_000, 2_000])
    report = ProxyBenchReport(100, 10, runs, latency, latency, latency,
                              {"off": Counts(1_000_000_000, 0, 0),
                               "on": Counts(1_040_000_000, 0, 0)}, 5000)
    assert report.otel_changes() == pytest.approx([0.05, 0.05, 1.1])
    assert report.otel_total_cpu_overhead == pytest.approx(0.05)
    text = "\n".join(report.lines())
    assert "on against off: proxy + indexer +5.0% CPU, the median round (reported; " \
           "forwarding does not wait for it)" in text
    text = "\n".join(report.lines()[-4:])
    assert "under cachegrind (5,000 lines, proxy + child + indexer): instructions 1.00 G -> " \
           "1.04 G (+4.0%); estimated cycles +4.0%" in text
    # A run whose CPU time is unknown leaves the figure unknown, not wrong.
    runs[4].cpu_seconds = None
    assert report.otel_changes() is None and report.otel_total_cpu_overhead is None
    runs[4].cpu_seconds = 2.0
    runs[5].indexer_cpu_seconds = None  # an indexer not seen: the total is unknown too
    assert report.otel_changes() is None and report.otel_changes(total=False) is not None


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
# Python under cachegrind runs some 50 times slower: on a loaded 2-core machine (the
# suite's other worker, other jobs) this outlasted the suite's 300 s per test.
@pytest.mark.timeout(900)
@pytest.mark.usefixtures("ct_env")
def test_the_command_counts_every_process_under_valgrind() -> None:
    result = CliRunner().invoke(cli, ["bench", "proxy", "--lines", "200", "--round-trips", "20",
                                      "--repeat", "1", "--valgrind", "--valgrind-lines", "300"])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if "under cachegrind" in x)
    assert "(300 lines, proxy + child + indexer): instructions" in line, line


def test_the_standin_plays_the_cli_side_in_the_recorded_order(tmp_path: Path) -> None:
    import subprocess
    import sys

    from claudetrace.bench.proxy import sample_records
    from claudetrace.bench.standin import write_script

    records = sample_records()
    script = tmp_path / "script"
    host, count = write_script(script, records)
    assert count == len(records)
    assert host.splitlines() == [line for d, line in records if d == "in"]
    done = subprocess.run(
        [sys.executable, "-m", "claudetrace.bench.standin", str(script)],
        input=host, capture_output=True, timeout=60, check=True,
    )
    assert done.stdout.splitlines() == [line for d, line in records if d == "out"]


def test_benchmarks_time_compiled_modules_as_an_installed_package_has(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("X = 1\n")
    (package / "sub" / "b.py").write_text("Y = 2\n")
    compile_bytecode(package)
    compiled = sorted(package.rglob("__pycache__/*.pyc"))
    assert [p.name.split(".")[0] for p in compiled] == ["a", "b"]
    stamps = [p.stat().st_mtime_ns for p in compiled]
    (package / "a.py").write_text("X = 2  # changed\n")
    later = (package / "a.py").stat().st_mtime + 2  # bytecode records whole seconds
    os.utime(package / "a.py", (later, later))
    compile_bytecode(package)  # the changed module again, the other left alone
    assert compiled[0].stat().st_mtime_ns != stamps[0]
    assert compiled[1].stat().st_mtime_ns == stamps[1]


def test_a_host_that_cannot_start_leaves_nothing_running(tmp_path: Path) -> None:
    source = tmp_path / "in"
    source.write_bytes(b"x\n")
    before = {p.name for p in Path("/proc").iterdir() if p.name.isdigit()}
    with pytest.raises(FileNotFoundError):
        time_command("x", ["sleep", "30"], source, 1, host=[str(tmp_path / "no-such-host")])
    # The command it talked to was killed and reaped: no sleep of ours is left.
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and p.name not in before
            and (p / "cmdline").read_bytes().startswith(b"sleep\x0030")]
    assert left == []


def test_a_host_that_misses_lines_fails_the_run(tmp_path: Path) -> None:
    script = tmp_path / "script"
    script.write_bytes(b"ofirst\nihello\n")  # the CLI never writes "first"
    source = tmp_path / "in"
    source.write_bytes(b"hello\n")
    host = [sys.executable, "-m", "claudetrace.bench.standin", "--host", str(script)]
    with pytest.raises(RuntimeError, match="the host exited with status 1"):
        time_command("quiet", ["true"], source, 1, host=host)


def test_the_standin_says_how_to_call_it() -> None:
    from claudetrace.bench.standin import main

    assert main([]) == 2 and main(["--host"]) == 2 and main(["a", "b"]) == 2


@pytest.mark.usefixtures("ct_env")
def test_the_host_and_the_standin_record_the_conversation_in_its_order(tmp_path: Path) -> None:
    # A host piped from a file would have every line of its recorded first, before
    # the CLI asked anything; the stand-in host waits for the CLI's lines before each.
    from claudetrace.bench.proxy import _standin, sample_records
    from claudetrace.indexer import open_settled_store

    records = sample_records()
    host_input, standin, host, events = _standin(tmp_path, "order", None, len(records))
    db = str(tmp_path / "order.db")
    open_settled_store(db).close()
    run = time_command("standin", [sys.executable, "-m", "claudetrace", "proxy", "--db", db,
                                   "--", *standin], host_input, events, host=host)
    assert run.cpu_seconds is not None
    store = open_settled_store(db)
    try:
        recording = store.resolve("latest").id
        stored = [(e.direction, e.data) for e in store.iter_events(recording)]
    finally:
        store.close()
    assert stored == [(d, line) for d, line in records]
