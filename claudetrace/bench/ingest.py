"""Start-up and time to queryable: what a session pays before and after the burst.

- **start-up delay** (:func:`run_startup_bench`): how much later a child starts
  through ``claudetrace proxy`` than when run directly.  The child is ``date
  +%s%N``, which prints the wall clock as it starts; the delay is that time
  minus the moment just before the bench started the process.  Direct and
  proxied runs take turns; the figure is the median proxied delay minus the
  median direct one.  The proxy runs as a shim runs it (the command
  :func:`~claudetrace.shim.self_command` gives, ``proxy --db URL -- CMD``), into
  each database, and once more into SQLite with live telemetry on (OTLP to a
  local endpoint that discards): the child's ``TRACEPARENT`` is made before it
  starts.  Each run's indexer (and its telemetry worker) has exited before the
  next run starts (the bench adopts and waits for it, :mod:`.orphans`), so none
  competes with it.
- **time to queryable** (:func:`run_ingest_bench`): ``cat IN | claudetrace proxy
  -- cat > /dev/null``, every line recorded in both directions, timed from the
  start until ``claudetrace sessions`` would list the recording complete (the
  store settled, which waits for the indexer, and the newest recording lists
  every event; the bench then counts the stored rows, off the clock, as the
  naive loop's time holds no count either), side by side with a
  naive loop (:data:`NAIVE_LOOP`) on the same input: a fresh Python process
  that ``json.loads`` every line and stores it in both directions with
  ``executemany`` into a SQLite table with four indexes.  Rows take turns; a
  proxy run's indexer (adopted, :mod:`.orphans`) has exited, the database
  closed, before the next row starts.  It runs on each shape of input
  (:mod:`.shapes`: the sample, text-delta-heavy, tool-heavy, few huge lines)
  and reports, beside the times, the **footprint**: what each database grew by
  (SQLite: the file and its WAL; PostgreSQL: its tables with their indexes and
  TOAST) against the bytes of the lines it recorded.

Both measure from outside, through the same commands a user runs; nothing in
claudetrace's own code knows it is being measured.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..shim import self_command
from . import compile_bytecode
from .orphans import RUN_ENV, Orphans, TreeCpu, adopting
from .proxy import (
    Made,
    _check_stored,
    discarding_otlp_endpoint,
    forgetting,
    sample_lines,
    time_command,
)
from .shapes import SHAPES, shape_lines, write_input

#: The naive loops' database (argv[2]): a table of events with four indexes, the
#: statement that inserts one, and flush(), which stores the rows gathered so far.
NAIVE_TABLE = """
import json, sqlite3, sys, time
db = sqlite3.connect(sys.argv[2])
db.execute("PRAGMA journal_mode = WAL")
db.execute("PRAGMA synchronous = NORMAL")
db.execute("CREATE TABLE events (recording TEXT, seq INTEGER, direction TEXT, t_ns INTEGER,"
           " type TEXT, subtype TEXT, request_id TEXT, data BLOB, PRIMARY KEY (recording, seq))")
db.execute("CREATE INDEX ix_type ON events (recording, type)")
db.execute("CREATE INDEX ix_t ON events (recording, t_ns)")
db.execute("CREATE INDEX ix_request ON events (request_id)")
insert = "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
rows = []


def flush():
    db.executemany(insert, rows)
    db.commit()
    rows.clear()
"""

#: The naive loop the time to queryable is held against (argv: input file, database).
NAIVE_LOOP = NAIVE_TABLE + """
seq = 0
with open(sys.argv[1], "rb") as lines:
    for line in lines:
        line = line.rstrip(b"\\n")
        for direction in ("in", "out"):
            try:
                obj = json.loads(line)
            except ValueError:
                obj = None
            if not isinstance(obj, dict):
                obj = {}
            rows.append(("r", seq, direction, time.monotonic_ns(), obj.get("type"),
                         obj.get("subtype"), obj.get("request_id"), line))
            seq += 1
            if len(rows) >= 5000:
                flush()
flush()
db.close()
"""


@dataclass
class StartupReport:
    """Delays (ms) a child saw, run directly and through the proxy into each database
    (and with live telemetry)."""

    direct_ms: list[float]
    proxied_ms: dict[str, list[float]]

    def added_ms(self, name: str) -> float:
        return statistics.median(self.proxied_ms[name]) - statistics.median(self.direct_ms)

    def lines(self) -> list[str]:
        runs = len(self.direct_ms)
        width = max(len("proxy, ") + len(name) for name in ["", *self.proxied_ms])
        out = [f"start-up: the delay before the child runs, median of {runs} runs each (ms)", "",
               f"{'':<{width}} {'median':>8} {'min':>8} {'max':>8} {'added':>8}"]
        rows = [("direct", None, self.direct_ms),
                *((f"proxy, {k}", k, v) for k, v in self.proxied_ms.items())]
        for label, name, values in rows:
            added = "" if name is None else f"{self.added_ms(name):>8.1f}"
            out.append(f"{label:<{width}} {statistics.median(values):>8.1f} "
                       f"{min(values):>8.1f} {max(values):>8.1f} {added:>8}")
        out.append("")
        for name in self.proxied_ms:
            ms = self.added_ms(name)
            out.append(f"child starts {ms:.1f} ms later through the proxy ({name}; "
                       f"target < 50 ms: {'met' if ms < 50 else 'MISSED'})")
        return out


def _delay_ms(argv: list[str], env: dict[str, str]) -> float:
    start = time.time_ns()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=env,
                          check=False, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited with status {done.returncode}: "
                           f"{done.stderr.decode(errors='replace').strip()}")
    try:
        started = int(done.stdout.split()[-1])
    except (ValueError, IndexError):
        raise RuntimeError("the start-up benchmark needs GNU date (date +%s%N)") from None
    return (started - start) / 1e6


def run_startup_bench(*, runs: int = 11, databases: dict[str, str | None] | None = None,
                      telemetry: bool = True, workdir: str | None = None) -> StartupReport:
    """Measure the child's start-up delay directly and through the proxy into each of
    ``databases`` (name → URL; None: a fresh SQLite file), and with ``telemetry``
    once more into a fresh SQLite file with live telemetry on."""
    if shutil.which("date") is None:
        raise RuntimeError("the start-up benchmark needs `date` on PATH")
    compile_bytecode()
    child = ["date", "+%s%N"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    with tempfile.TemporaryDirectory(prefix="claudetrace-bench-", dir=workdir) as tmp, \
            discarding_otlp_endpoint() as endpoint, forgetting() as made, \
            adopting() as orphans:
        rows = {name: (url or str(Path(tmp) / f"{name}.db"), env)
                for name, url in (databases or {"SQLite": None}).items()}
        named = {url for url in (databases or {}).values() if url}  # the user's: cleaned up
        if telemetry:
            rows["SQLite, live telemetry"] = (str(Path(tmp) / "telemetry.db"), {
                **env, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
        report = StartupReport([], {name: [] for name in rows})
        for _ in range(runs):
            report.direct_ms.append(_delay_ms(child, env))
            for name, (url, row_env) in rows.items():
                proxy = [*self_command(), "proxy", "--db", url, "--name", "bench-startup",
                         "--", *child]
                report.proxied_ms[name].append(_delay_ms(proxy, row_env))
                _check_stored(url, 1, made if url in named else None)
                orphans.reap()  # its indexer has exited before the next run
    return report


@dataclass
class IngestRun:
    name: str
    seconds: float
    #: For claudetrace: when the proxy exited (the rest is the indexer finishing).
    forwarded_seconds: float | None = None
    peak_rss_kib: int | None = None
    #: CPU time (user + system): the naive loop's; the proxy's and its indexer's
    #: (with its writer's: the whole run's, waited for once queryable).
    cpu_seconds: float | None = None
    #: What the database grew by (bytes) for the lines recorded.
    stored_bytes: int | None = None
    #: What each table and index grew by (bytes; :meth:`Store.relation_bytes`).
    relations: dict[str, int] = field(default_factory=dict)
    #: For claudetrace: the CPU time (s) each process had used when the recording
    #: was listed complete (``proxy``, ``indexer``, ``writer``): what the time on
    #: the clock bought.  :attr:`cpu_seconds` less their sum is what the indexer
    #: did after (the pass that packs the lines and adds a burst's search words).
    listed_cpu: dict[str, float] = field(default_factory=dict)

    @property
    def clock_cpu(self) -> float | None:
        """CPU seconds spent until queryable: the naive loop's whole run; for
        claudetrace the sum of :attr:`listed_cpu` (None when it was not read)."""
        if self.forwarded_seconds is None:
            return self.cpu_seconds
        return sum(self.listed_cpu.values()) if self.listed_cpu else None


@dataclass
class IngestReport:
    lines: int
    bytes: int
    runs: list[IngestRun] = field(default_factory=list)
    shape: str = "sample"

    def median(self, name: str) -> IngestRun:
        runs = sorted((r for r in self.runs if r.name == name), key=lambda r: r.seconds)
        return runs[(len(runs) - 1) // 2]

    def lines_out(self, *, legend: bool = True) -> list[str]:
        """The report's rows, verdicts and (``legend``) what its columns mean."""
        names = list(dict.fromkeys(r.name for r in self.runs))
        repeat = max(sum(r.name == n for r in self.runs) for n in names)
        naive = self.median("naive loop")
        about = SHAPES[self.shape].about if self.shape in SHAPES else self.shape
        out = [f"shape {self.shape} ({about}): {self.lines:,} lines ({self.bytes / 1e6:.1f} MB), "
               f"each stored in both directions ({2 * self.lines:,} events); each row the "
               f"median of {repeat}", "",
               f"{'':<24} {'queryable s':>12} {'events/s':>10} {'x naive':>8} "
               f"{'proxy exit s':>12} {'peak RSS':>9} {'CPU s':>7} {'CPU x naive':>11} "
               f"{'CPU after':>9} {'store MB':>9} {'x raw':>6} {'B/event':>8}"]
        for name in names:
            run = self.median(name)
            exit_s = f"{run.forwarded_seconds:.2f}" if run.forwarded_seconds is not None else ""
            rss = f"{run.peak_rss_kib / 1024:.0f} MiB" if run.peak_rss_kib else ""
            clock, naive_clock = self.cpu_median(name), self.cpu_median("naive loop")
            cpu = f"{clock:.2f}" if clock else ""
            cpu_ratio = f"{naive_clock / clock:.2f}" if clock and naive_clock else ""
            after = self.cpu_median(name, after=True)
            after_s = "" if after is None else f"{after:.2f}"
            out.append(f"{name:<24} {run.seconds:>12.2f} {2 * self.lines / run.seconds:>10,.0f} "
                       f"{naive.seconds / run.seconds:>8.2f} {exit_s:>12} {rss:>9} {cpu:>7} "
                       f"{cpu_ratio:>11} {after_s:>9} {self._footprint(run)}")
        out.append("")
        verdicts: list[str] = []
        legend_lines = [
            "(queryable s: from the start until every event is in the database; for",
            " claudetrace, cat IN | claudetrace proxy -- cat > /dev/null until claudetrace",
            " sessions would list the recording complete; naive loop: json.loads and",
            " executemany into SQLite with four indexes, in a fresh Python process.  peak RSS:",
            " the indexer's.  CPU s: user + system until queryable, the median of the rounds:",
            " the naive loop's; the proxy's and its indexer's and writer's (read as it is",
            " listed), which run in the idle scheduling class: on a busy machine they wait",
            " for idle CPU, and the CPU ratio is the steadier figure.  CPU after: what the",
            " indexer spent after the listing (packing the lines, a burst's search words).",
            " store MB: what the",
            " database grew by (SQLite: file and WAL; PostgreSQL: tables, indexes, TOAST);",
            " x raw: that over the bytes of the lines recorded, both directions; B/event:",
            " what it keeps per event beyond the line itself)",
        ]
        for name in names:
            if name == "naive loop":
                continue
            ratio = naive.seconds / self.median(name).seconds
            target = 2.0 if "SQLite" in name else 1.0
            verdicts.append(f"{self.shape}, {name}: {ratio:.2f}x the naive loop (target >= "
                            f"{target:g}x: {'met' if ratio >= target else 'MISSED'})")
        for name in names:
            stored = self.median(name).stored_bytes
            if name != "naive loop" and stored is not None:
                raw = self.raw_bytes
                verdicts.append(f"{self.shape}, {name}: footprint {stored / raw:.2f}x the raw "
                                f"bytes (target <= 1x: {'met' if stored <= raw else 'MISSED'})")
        return out + verdicts + self._where_the_cpu_goes(names) + \
            self._where_the_bytes_go(names) + (["", *legend_lines] if legend else [])

    def cpu_median(self, name: str, *, after: bool = False) -> float | None:
        """The median over ``name``'s rounds of its CPU seconds until queryable
        (:attr:`IngestRun.clock_cpu`), or (``after``) after it; None when unknown."""
        figures: list[float] = []
        for run in self.runs:
            clock = run.clock_cpu
            if run.name != name or clock is None:
                continue
            if not after:
                figures.append(clock)
            elif run.listed_cpu and run.cpu_seconds is not None:
                figures.append(run.cpu_seconds - clock)
        return statistics.median(figures) if figures else None

    def _where_the_cpu_goes(self, names: list[str]) -> list[str]:
        """Each claudetrace row's CPU until queryable by process, in µs an event
        beside the naive loop's: the figure a loaded machine does not blur."""
        naive = self.cpu_median("naive loop")
        events = 2 * self.lines
        out: list[str] = []
        for name in names:
            runs = [r for r in self.runs if r.name == name and r.listed_cpu]
            if not runs:
                continue
            parts = {part: statistics.median(r.listed_cpu.get(part, 0.0) for r in runs)
                     for part in runs[0].listed_cpu}
            shown = ", ".join(f"{part} {seconds:.2f} s ({seconds / events * 1e6:.1f})"
                              for part, seconds in parts.items())
            against = "" if naive is None else \
                f"; the naive loop {naive:.2f} s ({naive / events * 1e6:.1f})"
            out.append(f"{self.shape}, {name}: CPU until queryable (µs an event): "
                       f"{shown}{against}")
        return ["", *out] if out else []

    def _where_the_bytes_go(self, names: list[str]) -> list[str]:
        """Each store's growth by table and index, in bytes an event (the line
        itself is in ``events``, or its TOAST on PostgreSQL): what to cut."""
        out: list[str] = []
        for name in names:
            grown = self.median(name).relations
            if not grown:
                continue
            parts = sorted(((size, rel) for rel, size in grown.items() if size > 0), reverse=True)
            shown = ", ".join(f"{rel} {size / (2 * self.lines):.0f}" for size, rel in parts)
            out.append(f"{self.shape}, {name}: B/event by relation (raw line "
                       f"{self.raw_bytes / (2 * self.lines):.0f}): {shown}")
        return ["", *out] if out else []

    @property
    def raw_bytes(self) -> int:
        """The bytes of the lines recorded: each line (no newline), both directions."""
        return 2 * (self.bytes - self.lines)

    def _footprint(self, run: IngestRun) -> str:
        if run.stored_bytes is None:
            return ""
        beyond = (run.stored_bytes - self.raw_bytes) / (2 * self.lines)
        return (f"{run.stored_bytes / 1e6:>9.1f} {run.stored_bytes / self.raw_bytes:>6.2f} "
                f"{beyond:>8.0f}")


def shape_line_count(shape: str, lines: int) -> int:
    """The lines of ``shape`` for a run of ``lines`` sample lines: each shape's
    own count (:data:`.shapes.SHAPES`) scaled as ``lines`` is to 100,000."""
    return max(1, round(SHAPES[shape].lines * lines / 100_000))


def run_ingest_shapes(*, shapes: list[str] | None = None, lines: int = 100_000,
                      repeat: int = 1, cassette: str | None = None,
                      databases: dict[str, str | None] | None = None,
                      workdir: str | None = None) -> list[IngestReport]:
    """:func:`run_ingest_bench` on each of ``shapes`` (default: all), each with
    its own line count scaled by ``lines`` (:func:`shape_line_count`)."""
    return [run_ingest_bench(lines=shape_line_count(shape, lines), repeat=repeat,
                             cassette=cassette, databases=databases, workdir=workdir,
                             shape=shape)
            for shape in shapes or list(SHAPES)]


def run_ingest_bench(*, lines: int = 100_000, repeat: int = 1, cassette: str | None = None,
                     databases: dict[str, str | None] | None = None,
                     workdir: str | None = None, shape: str = "sample") -> IngestReport:
    """Time to queryable through the proxy (into each of ``databases``, name → URL,
    None: a fresh SQLite file) against the naive loop, ``repeat`` rounds, on
    ``lines`` lines of ``shape`` (:mod:`.shapes`), with each database's footprint."""
    compile_bytecode()
    with tempfile.TemporaryDirectory(prefix="claudetrace-bench-", dir=workdir) as tmp, \
            forgetting() as made, adopting() as orphans:
        folder = Path(tmp)
        source = folder / "input.ndjson"
        sample = sample_lines(cassette) if shape == "sample" else ()
        written = write_input(source, shape_lines(shape, lines, sample))
        report = IngestReport(lines, written, shape=shape)
        for round_ in range(repeat):
            naive_db = folder / f"naive-{round_}.db"
            before = _children_cpu_s()
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", NAIVE_LOOP, str(source), str(naive_db)],
                           check=True, timeout=3600)
            report.runs.append(IngestRun("naive loop", time.perf_counter() - start,
                                         cpu_seconds=_children_cpu_s() - before,
                                         stored_bytes=_stored_bytes(str(naive_db))))
            for name, url in (databases or {"SQLite": None}).items():
                target = url or str(folder / f"claudetrace-{round_}.db")
                report.runs.append(_through_proxy(f"claudetrace, {name}", target, source,
                                                  lines, orphans, made if url else None))
            for path in folder.glob("*.db*"):
                shutil.rmtree(path) if path.is_dir() else path.unlink()
    return report


def _through_proxy(name: str, url: str, source: Path, lines: int,
                   orphans: Orphans, made: Made | None = None) -> IngestRun:
    """One ``cat IN | proxy -- cat`` run, until the recording is listed complete in
    ``url``; then the indexer (and its writer) are waited for, off the clock, so
    that what they do after (the database's tidying up as it closes) is over
    before the next run starts."""
    from ..store import open_store

    open_store(url).close()  # the schema exists, as in any database in use
    before, relations = _stored_bytes(url), _relation_bytes(url)
    proxy = [sys.executable, "-m", "claudetrace", "proxy", "--db", url, "--name", "bench-ingest",
             "--", "cat"]
    marker = f"ingest-{next(_RUNS)}"
    start = time.perf_counter()
    run = time_command(name, proxy, source, lines, {**os.environ, RUN_ENV: marker},
                       on_exit=orphans.look)
    checked = time.perf_counter()
    listed: list[TreeCpu | None] = []
    queryable = checked + _check_stored(url, 2 * lines, made,
                                        on_listed=lambda: listed.append(
                                            orphans.cpu_now(marker))) - start
    # The indexer's usage, its writer's with it (the larger peak RSS of the two).
    indexing = orphans.usage(marker)
    cpu, peak = (0.0, None) if indexing is None else indexing
    grown = {rel: size - relations.get(rel, 0) for rel, size in _relation_bytes(url).items()}
    at_listing = listed[0] if listed else None
    listed_cpu = {} if at_listing is None or run.cpu_seconds is None else {
        "proxy": run.cpu_seconds, "indexer": at_listing.own, "writer": at_listing.descendants}
    return IngestRun(name, queryable, run.seconds, peak, (run.cpu_seconds or 0.0) + cpu,
                     _stored_bytes(url) - before, grown, listed_cpu)


def _relation_bytes(url: str) -> dict[str, int]:
    """The store's tables and indexes, bytes each (:meth:`Store.relation_bytes`)."""
    from ..store import open_store

    store = open_store(url)
    try:
        return store.relation_bytes()
    finally:
        store.close()


def _stored_bytes(url: str) -> int:
    """The database's size: a SQLite file with its WAL, less its free pages (a new
    store's migrations leave some, which the run then fills: the file's growth
    alone said less than the tables grew); on PostgreSQL its tables in the current
    schema with their indexes and TOAST (the run's share is the difference)."""
    from ..store import open_store
    from ..store.engine import sqlite_file_bytes, sqlite_path

    path = sqlite_path(url) if "://" in url else Path(url)
    if path is not None:  # the naive loop's too, which is no store to open
        read_only = path.resolve().as_uri() + "?mode=ro"
        with contextlib.closing(sqlite3.connect(read_only, uri=True)) as conn:
            free = (conn.execute("PRAGMA freelist_count").fetchone()[0]
                    * conn.execute("PRAGMA page_size").fetchone()[0])
        return sqlite_file_bytes(path) - int(free)
    store = open_store(url)
    try:
        return store.tables_bytes()
    finally:
        store.close()


#: Each proxy run's marker, to tell its indexer by.
_RUNS = itertools.count()


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
