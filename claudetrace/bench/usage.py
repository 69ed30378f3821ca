"""``claudetrace bench usage``: ``usage`` reports against ccusage on the same transcripts.

A tree of made-up Claude Code transcripts (:mod:`claudetrace.testing.transcripts`)
is read by ccusage (``daily --offline --json``, where it is installed) and by
``claudetrace usage daily --import TREE`` into a fresh store (import, then the
report); then each report runs again on the filled store.  Every figure is the
median of ``repeat`` runs of the command as a user runs it (a process each, its
start-up included), taking turns.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..testing.transcripts import random_corpus, write_transcript


@dataclass
class Row:
    """One command's median time."""

    what: str
    seconds: float


def find_ccusage(given: str | None) -> str | None:
    """ccusage: ``given``, else on PATH, else the copy the tests install in a checkout."""
    if given:
        return given
    found = shutil.which("ccusage")
    if found:
        return found
    checkout = Path(__file__).resolve().parents[2] / "tests" / "ccusage" / "node_modules" / ".bin"
    return str(checkout / "ccusage") if (checkout / "ccusage").exists() else None


def _timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def run_usage_bench(*, sessions: int, calls: int, db_url: str | None, ccusage: str | None,
                    repeat: int, say: Callable[[str], None]) -> list[Row]:
    """Write the tree, then time ccusage and claudetrace on it (see the module's text)."""
    with tempfile.TemporaryDirectory(prefix="claudetrace-bench-usage-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        for t in random_corpus(sessions, calls=calls, seed=5):
            write_transcript(root / "projects", t)
        size = sum(p.stat().st_size for p in (root / "projects").rglob("*.jsonl"))
        say(f"{sessions} sessions, {size / 1e6:.1f} MB of transcripts written in "
            f"{time.perf_counter() - started:.1f} s")
        env = {**os.environ, "CLAUDE_CONFIG_DIR": str(root), "TZ": "UTC",
               "CLAUDETRACE_PROGRESS": "0"}
        me = [sys.executable, "-m", "claudetrace", "usage"]
        fresh = iter(range(repeat + 1))

        def store() -> str:
            return db_url or f"sqlite:///{root}/claudetrace-{next(fresh)}.db"

        filled = store()
        _timed([*me, "daily", "--json", "--db", filled, "--import", str(root / "projects")],
               env)  # the store the later reports read
        commands: dict[str, Callable[[], list[str]]] = {}
        if ccusage:
            commands["ccusage daily --offline --json"] = lambda: [
                ccusage, "daily", "--offline", "--json"]
        if db_url is None:
            commands["claudetrace usage daily --json --import TREE (fresh store)"] = lambda: [
                *me, "daily", "--json", "--db", store(), "--import", str(root / "projects")]
        for report in ("daily", "monthly", "session", "blocks"):
            argv = [*me, report, "--json", "--db", filled]
            commands[f"claudetrace usage {report} --json (filled store)"] = argv.copy
        times: dict[str, list[float]] = {what: [] for what in commands}
        for _ in range(repeat):
            for what, command in commands.items():
                times[what].append(_timed(command(), env))
        return [Row(what, statistics.median(found)) for what, found in times.items()]


def report_lines(rows: list[Row]) -> Iterator[str]:
    """The rows, with each claudetrace row's ratio to ccusage's."""
    base = next((r.seconds for r in rows if r.what.startswith("ccusage")), None)
    for row in rows:
        ratio = f"  {row.seconds / base:.2f}x ccusage" if base and row.what.startswith(
            "claudetrace") else ""
        yield f"{row.what:<62} {row.seconds:7.3f} s{ratio}"
