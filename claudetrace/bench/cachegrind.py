"""Counting instructions with valgrind's cachegrind, for benchmarks on a noisy machine.

CPU time on a shared virtual machine swings by up to a factor of two from one
few-second stretch to the next (whatever else the host runs on the same
cores); cachegrind's counts come out the same every time.  They do not see
what a real CPU adds (branch mispredictions, the other core, the scheduler),
so a benchmark reports them beside CPU time, not instead of it.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Counts:
    """Cachegrind's totals for one run (summed over its processes)."""

    instructions: int
    l1_misses: int
    ll_misses: int

    @property
    def cycles_estimate(self) -> int:
        """Ir + 10 x L1 misses + 100 x last-level misses (cachegrind's manual's rule)."""
        return self.instructions + 10 * self.l1_misses + 100 * self.ll_misses

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.instructions + other.instructions,
                      self.l1_misses + other.l1_misses, self.ll_misses + other.ll_misses)


def require() -> None:
    """Fail early, before a benchmark's other runs, when valgrind is missing."""
    if shutil.which("valgrind") is None:
        raise RuntimeError("--valgrind needs valgrind on PATH")


def wrapper(log: Path, *, children: bool = False) -> list[str]:
    """The command prefix running a program under cachegrind, its summary in ``log``.

    With ``children`` the processes it starts are counted too, each in a log of its
    own (``log`` gets the process id: ``%p``).
    """
    require()
    argv = ["valgrind", "--tool=cachegrind", "--cache-sim=yes",
            "--cachegrind-out-file=/dev/null", f"--log-file={log}"]
    return [*argv, "--trace-children=yes"] if children else argv


def read_log(log: Path) -> Counts:
    """The totals in one cachegrind log."""
    text = log.read_text()

    def total(label: str) -> int:
        match = re.search(label + r":\s+([\d,]+)", text)
        if match is None:
            raise RuntimeError(f"no {label.strip()!r} in cachegrind's output ({log.name})")
        return int(match.group(1).replace(",", ""))

    return Counts(total("I   refs"), total("I1  misses") + total("D1  misses"),
                  total("LL misses"))


def finished_logs(folder: Path, timeout_s: float = 60.0) -> list[Path]:
    """The logs in ``folder`` once each holds its summary.

    A process that outlives the one the benchmark waited for (the proxy's
    indexer) writes its summary when it exits, a moment after its work is done.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        logs = sorted(folder.glob("*.log"))
        if logs and all("I   refs" in log.read_text() for log in logs):
            return logs
        if time.monotonic() >= deadline:
            return logs  # read_logs says which one has no summary
        time.sleep(0.05)


def read_logs(logs: Iterable[Path]) -> Counts:
    """The totals of several processes' logs, added up."""
    found = list(logs)
    if not found:
        raise RuntimeError("cachegrind wrote no log")
    total = Counts(0, 0, 0)
    for log in found:
        total += read_log(log)
    return total


def change(off: Counts, on: Counts) -> str:
    """``instructions 1.00 G -> 1.05 G (+5.0%); estimated cycles +4.8%``."""
    return (f"instructions {off.instructions / 1e9:.2f} G -> {on.instructions / 1e9:.2f} G "
            f"({on.instructions / off.instructions - 1:+.1%}); estimated cycles "
            f"{on.cycles_estimate / off.cycles_estimate - 1:+.1%}")
