"""``claudetrace bench telemetry``: what live telemetry costs the indexer, off against on.

Live telemetry runs in a worker process the session's indexer
(:mod:`claudetrace.indexer`) starts beside itself (:mod:`claudetrace.telemetry.worker`)
and waits for; the indexer's CPU time (``wait4``) includes its worker's.  This
benchmark writes one capture file of the streaming session (as the proxy writes
it: chunks of up to 64 KiB per direction) and has the indexer store a copy of it
into a fresh SQLite file, telemetry off and on (exporting through the
OpenTelemetry SDK over OTLP/HTTP to a local endpoint that accepts and discards;
a run whose export failed fails the benchmark), taking turns for ``rounds``
rounds:

- CPU time of the indexer process (and its worker), each mode's median;
- with ``valgrind``, one run of each under cachegrind (:mod:`.cachegrind`, both
  processes counted):
  instructions executed and an estimate of cycles from the simulated cache
  misses, which come out the same every time.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .. import capture as cap
from ..model.events import Direction
from ..recording import RecordingInfo
from . import compile_bytecode
from .cachegrind import Counts, change, finished_logs, read_logs, require, wrapper
from .proxy import discarding_otlp_endpoint, sample_records, taking_turns

CHUNK_BYTES = 65536
MODES = ("off", "on")


@dataclass
class TelemetryBenchReport:
    lines: int
    cpu_s: dict[str, list[float]] = field(default_factory=dict)
    counts: dict[str, Counts] = field(default_factory=dict)

    def cpu_overhead(self) -> float:
        off, on = (statistics.median(self.cpu_s[m]) for m in MODES)
        return on / off - 1

    def lines_out(self) -> list[str]:
        rounds = len(self.cpu_s["off"])
        out = [f"indexer storing {self.lines:,} lines of the streaming session, telemetry "
               f"off and on, {rounds} rounds", ""]
        for mode in MODES:
            runs = " ".join(f"{s:.2f}" for s in self.cpu_s[mode])
            median = statistics.median(self.cpu_s[mode])
            out.append(f"CPU s, telemetry {mode:<3}  median {median:6.2f}   runs: {runs}")
        out.append(f"live telemetry: {self.cpu_overhead():+.1%} CPU time")
        if self.counts:
            out.append("cachegrind: " + change(self.counts["off"], self.counts["on"]))
        return out


def write_capture(folder: Path, lines: int) -> Path:
    """A capture file of ``lines`` lines of the streaming session, in ``folder``."""
    info = RecordingInfo.start(["claude"])
    path = folder / f"{info.id}.capture"
    writer = cap.CaptureWriter(path, info)
    pending: dict[Direction, list[bytes]] = {"in": [], "out": []}
    size = dict.fromkeys(pending, 0)

    def flush(direction: Direction) -> None:
        if pending[direction]:
            writer.feed(direction, b"".join(pending[direction]))
            pending[direction], size[direction] = [], 0

    for name, line in itertools.islice(itertools.cycle(sample_records()), lines):
        direction: Direction = "in" if name == "in" else "out"
        flush("out" if direction == "in" else "in")  # a pipe delivers one direction at a time
        pending[direction].append(line + b"\n")
        size[direction] += len(line) + 1
        if size[direction] >= CHUNK_BYTES:
            flush(direction)
    for direction in pending:
        flush(direction)
    writer.close({"exit_code": 0})
    return path


def _index(source: Path, folder: Path, run: str, otel: str | None,
           prefix: list[str]) -> tuple[float, Path]:
    """Store a copy of ``source`` into a fresh database, the indexer's command after
    ``prefix`` (cachegrind's, or none); (indexer CPU s, its work folder)."""
    from ..store import open_store

    work = folder / run
    work.mkdir()
    db = work / "bench.db"
    open_store(str(db)).close()  # the schema first, outside the measurement
    capture_dir = cap.capture_dirs(f"sqlite:///{db}")[0]
    capture_dir.mkdir(exist_ok=True)
    capture = capture_dir / source.name
    shutil.copyfile(source, capture)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
           "CLAUDETRACE_DB": str(db), "CLAUDETRACE_INDEXER_PRIORITY": "normal"}
    argv = [*prefix, sys.executable, "-m", "claudetrace.indexer", str(capture)]
    if otel is not None:
        argv += ["--otel", json.dumps({"endpoint": otel, "protocol": "http/protobuf"})]
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=errors)
        # wait4: the indexer's CPU time with that of the worker it waited for.
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0 or capture.exists():
            errors.seek(0)
            raise RuntimeError(f"the indexer failed ({code}): "
                               f"{errors.read().decode(errors='replace').strip()[-300:]}")
    if otel is not None:
        # A failed export costs less than one that went through: that run would
        # flatter telemetry, so it fails the benchmark instead.
        store = open_store(str(db))
        try:
            warnings = store.resolve("latest").extra.get("warnings")
        finally:
            store.close()
        if warnings:
            raise RuntimeError(f"live telemetry failed: {warnings[0]}")
    return usage.ru_utime + usage.ru_stime, work


def run_telemetry_bench(*, lines: int = 100_000, rounds: int = 3, valgrind: bool = False,
                        workdir: str | None = None) -> TelemetryBenchReport:
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    if valgrind:
        require()
    compile_bytecode()
    report = TelemetryBenchReport(lines, {m: [] for m in MODES})
    with tempfile.TemporaryDirectory(prefix="claudetrace-bench-", dir=workdir) as tmp, \
            discarding_otlp_endpoint() as endpoint:
        folder = Path(tmp)
        source = write_capture(folder, lines)
        runs: Iterator[int] = itertools.count()
        for round_ in range(rounds):
            for mode in taking_turns(MODES, round_):
                cpu, work = _index(source, folder, f"run{next(runs)}",
                                   endpoint if mode == "on" else None, [])
                report.cpu_s[mode].append(cpu)
                shutil.rmtree(work)
        if valgrind:
            for mode in MODES:
                # The indexer and, telemetry on, the worker it starts: a log each.
                logs = folder / f"cachegrind-logs-{mode}"
                logs.mkdir()
                _, work = _index(source, folder, f"cachegrind-{mode}",
                                 endpoint if mode == "on" else None,
                                 wrapper(logs / "%p.log", children=True))
                report.counts[mode] = read_logs(finished_logs(logs))
                shutil.rmtree(work)
    return report
