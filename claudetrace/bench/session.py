"""Reading and moving a big session: ``show``, ``import`` and ``export`` of 200k lines.

The session is the shipped streaming sample (``claudetrace/bench/data``) cycled
to the size asked for (sequence numbers and times carried on from cycle to
cycle), written as a cassette.  Every claudetrace row is the real command in a
fresh process, timed from outside:

- ``import``: the cassette into a SQLite file in use (its schema made
  beforehand, as :mod:`.ingest` does: a user's store is made once), and into a
  new file (the schema made by the command, migrations and all);
- ``export --no-redact`` (and ``export``, which redacts secrets) to a file; the
  exported events are checked to be the imported file's, byte for byte;
- ``show``, ``show --raw``, ``show --deltas`` into a pipe the bench reads:
  the time to the first byte and until the last.

Reference rows run the same way on the same input: ``cat`` of the cassette, and
naive Python loops (:data:`NAIVE_IMPORT`: ``json.loads`` of every record and of
its line, ``executemany`` into a SQLite table with four indexes;
:data:`NAIVE_EXPORT`: every row back out through ``json.dumps``;
:data:`NAIVE_SHOW`: every row's line parsed and printed).  Rows take turns for
``repeat`` rounds; each is reported as its median.  Nothing in claudetrace's own
code knows it is being measured.
"""

from __future__ import annotations

import itertools
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from . import compile_bytecode
from .ingest import NAIVE_TABLE

#: The naive import: every record and its line parsed, stored with executemany
#: into a table with four indexes (argv: cassette, database).
NAIVE_IMPORT = NAIVE_TABLE + """
with open(sys.argv[1], "rb") as lines:
    header = json.loads(next(lines))
    for line in lines:
        record = json.loads(line)
        data = record["line"].encode()
        try:
            obj = json.loads(data)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            obj = {}
        rows.append(("r", record["seq"], record["dir"], round(record["t"] * 1e9),
                     obj.get("type"), obj.get("subtype"), obj.get("request_id"), data))
        if len(rows) >= 5000:
            flush()
flush()
db.close()
"""

#: The naive export: every row of the naive import's table as a cassette line
#: (argv: database, output file).
NAIVE_EXPORT = """
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
with open(sys.argv[2], "w", encoding="utf-8") as out:
    out.write(json.dumps({"claudetrace": "cassette", "version": 1}) + "\\n")
    for seq, direction, t_ns, data in db.execute(
            "SELECT seq, direction, t_ns, data FROM events ORDER BY recording, seq"):
        out.write(json.dumps({"seq": seq, "t": t_ns / 1e9, "dir": direction,
                              "line": data.decode()}, ensure_ascii=False) + "\\n")
"""

#: The naive show: every row's line parsed and printed with its time and type
#: (argv: database).
NAIVE_SHOW = """
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
out = sys.stdout
for seq, t_ns, data in db.execute("SELECT seq, t_ns, data FROM events ORDER BY recording, seq"):
    try:
        obj = json.loads(data)
    except ValueError:
        obj = None
    kind = obj.get("type") if isinstance(obj, dict) else "raw"
    out.write(f"{t_ns / 1e9:8.3f} {kind:>10} {data[:300].decode(errors='replace')}\\n")
"""


@dataclass
class Run:
    """One timed process: seconds to its first byte of output (when read) and to
    its end, its CPU seconds and peak RSS."""

    name: str
    seconds: float
    first_byte: float | None
    cpu: float
    peak_rss_kib: int


@dataclass
class SessionReport:
    lines: int
    bytes: int
    runs: list[Run] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: This process's peak RSS when the rows ran (the least any child can show).
    floor_kib: int = 0

    def median(self, name: str) -> Run:
        runs = [r for r in self.runs if r.name == name]
        middle = sorted(runs, key=lambda r: r.seconds)[(len(runs) - 1) // 2]
        first = [r.first_byte for r in runs if r.first_byte is not None]
        return Run(name, middle.seconds, statistics.median(first) if first else None,
                   statistics.median(r.cpu for r in runs), max(r.peak_rss_kib for r in runs))

    def lines_out(self) -> list[str]:
        names = list(dict.fromkeys(r.name for r in self.runs))
        repeat = max(sum(r.name == n for r in self.runs) for n in names)
        out = [f"session: {self.lines:,} lines ({self.bytes / 1e6:.1f} MB cassette) of the "
               f"streaming sample; each row the median of {repeat}", "",
               f"{'':<31} {'first byte s':>12} {'total s':>8} {'CPU s':>6} {'peak RSS':>9} "
               f"{'x ref':>6}  reference"]
        for name in names:
            run = self.median(name)
            ref = _REFERENCE.get(name)
            ratio = f"{self.median(ref).seconds / run.seconds:.2f}" if ref in names else ""
            shown = f"{run.first_byte:.2f}" if run.first_byte is not None else ""
            out.append(f"{name:<31} {shown:>12} {run.seconds:>8.2f} {run.cpu:>6.2f} "
                       f"{run.peak_rss_kib / 1024:>5.0f} MiB {ratio:>6}  {ref or ''}")
        out += ["", "(x ref: the reference row's time over this row's, > 1 when claudetrace is "
                "faster; every row a fresh process, Python start-up included; a peak RSS "
                f"counts the bench's own {self.floor_kib / 1024:.0f} MiB the child was forked "
                "with)"]
        for name, target, within in _TARGETS:
            if name not in names:
                continue
            run = self.median(name)
            met = run.seconds < target and (within is None or (run.first_byte or 0) < within)
            want = f"first byte < {within:g} s, " if within is not None else ""
            out.append(f"{name}: {want}total < {target:g} s: {'met' if met else 'MISSED'}")
        return out + self.notes


#: Each claudetrace row's reference row.
_REFERENCE = {
    "claudetrace import": "naive import loop",
    "claudetrace import (new file)": "naive import loop",
    "claudetrace export --no-redact": "naive export loop",
    "claudetrace export (redacted)": "naive export loop",
    "claudetrace show": "naive show loop",
    "claudetrace show --raw": "naive show loop",
    "claudetrace show --deltas": "naive show loop",
}
#: Row, target total seconds, target seconds to the first byte.
_TARGETS = [
    ("claudetrace show", 3.0, 1.0),
    ("claudetrace show --raw", 3.0, 1.0),
    ("claudetrace show --deltas", 3.0, 1.0),
    ("claudetrace import", 2.0, None),
    ("claudetrace export --no-redact", 2.0, None),
    # What export does by default: a user exports a recording redacted.
    ("claudetrace export (redacted)", 2.0, None),
]


def build_cassette(path: Path, lines: int, source: str | os.PathLike[str] | None = None) -> int:
    """Write a cassette of ``lines`` events cycled from ``source`` (the streaming
    sample by default), each cycle after the one before in ``seq`` and time;
    returns its size in bytes."""
    from ..cassette import event_line as line_of
    from ..cassette import iter_cassette, new_header, write_cassette_lines
    from .proxy import STREAMING_CASSETTE

    header, events = iter_cassette(source or STREAMING_CASSETTE)
    sample = list(events)
    if not sample:
        raise ValueError("the cassette has no events to build the session from")
    span = sample[-1].t_ns + 1_000_000
    cycled = (line_of(seq, ev.direction, ev.t_ns + cycle * span, ev.data, True)
              for seq, (cycle, ev) in zip(range(lines), (
                  (i // len(sample), ev) for i, ev in enumerate(itertools.cycle(sample))),
                  strict=False))
    header = {**new_header(), **header}
    header.pop("recording_id", None)
    header["ended_ns"] = header.get("started_ns", 0) + lines // len(sample) * span + span
    write_cassette_lines(path, header, cycled)
    return path.stat().st_size


def timed(name: str, argv: list[str], *, stdout: Path | None = None,
          read_output: bool = False) -> Run:
    """Run ``argv``; with ``read_output`` read its stdout through a pipe, noting
    when the first byte came; else send it to ``stdout`` (or /dev/null)."""
    start = time.perf_counter()
    first: float | None = None
    if read_output:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        chunk = os.read(fd, 65536)
        first = time.perf_counter() - start if chunk else None
        while chunk:
            chunk = os.read(fd, 1 << 20)
    else:
        with open(stdout or os.devnull, "wb") as sink:
            proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    error = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    if code != 0:
        raise RuntimeError(f"{name} exited with status {code}: {error.strip()[-500:]}")
    return Run(name, seconds, first, usage.ru_utime + usage.ru_stime, usage.ru_maxrss)


def run_session_bench(*, lines: int = 200_000, repeat: int = 3,
                      cassette: str | None = None, workdir: str | None = None,
                      ) -> SessionReport:
    """The rows described in the module docstring, ``repeat`` rounds."""
    compile_bytecode()
    claudetrace = [sys.executable, "-m", "claudetrace"]
    python = [sys.executable, "-c"]
    with tempfile.TemporaryDirectory(prefix="claudetrace-bench-", dir=workdir) as tmp:
        folder = Path(tmp)
        source = folder / "session.cassette.ndjson"
        report = SessionReport(lines, build_cassette(source, lines, cassette))
        for round_ in range(repeat):
            db = folder / f"store-{round_}.db"
            naive_db = folder / f"naive-{round_}.db"
            url = ["--db", str(db)]
            rows = [
                partial(timed, "cat (the cassette)", ["cat", str(source)], read_output=True),
                partial(timed, "naive import loop",
                        [*python, NAIVE_IMPORT, str(source), str(naive_db)]),
                partial(timed, "claudetrace import", [*claudetrace, "import", str(source), *url]),
                partial(timed, "claudetrace import (new file)",
                        [*claudetrace, "import", str(source), "--db",
                         str(folder / f"new-{round_}.db")]),
                partial(timed, "naive export loop",
                        [*python, NAIVE_EXPORT, str(naive_db), str(folder / "naive.out")]),
                partial(timed, "claudetrace export --no-redact",
                        [*claudetrace, "export", "latest", "--no-redact", "-o",
                         str(folder / "export.ndjson"), *url]),
                partial(timed, "claudetrace export (redacted)",
                        [*claudetrace, "export", "latest", "-o", str(folder / "redacted.ndjson"),
                         *url]),
                partial(timed, "naive show loop", [*python, NAIVE_SHOW, str(naive_db)],
                        read_output=True),
                partial(timed, "claudetrace show", [*claudetrace, "show", "latest", *url],
                        read_output=True),
                partial(timed, "claudetrace show --raw",
                        [*claudetrace, "show", "latest", "--raw", *url], read_output=True),
                partial(timed, "claudetrace show --deltas",
                        [*claudetrace, "show", "latest", "--deltas", *url], read_output=True),
            ]
            # Imports first (the rest reads what they stored), then the readers
            # in an order that turns from round to round.
            # A store in use: its schema is there (made in a process of its own,
            # so the bench's own memory, which the rows are forked with, stays small).
            subprocess.run([*claudetrace, "db", "upgrade", *url], check=True,
                           capture_output=True, timeout=600)
            report.runs += [row() for row in rows[:4]]
            readers = rows[4:]
            shift = round_ % len(readers)
            report.runs += [row() for row in readers[shift:] + readers[:shift]]
            report.floor_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            if round_ == 0:
                report.notes.append(_same_events(source, folder / "export.ndjson"))
            for path in folder.glob("*.db*"):
                path.unlink()
    return report


def _same_events(source: Path, exported: Path) -> str:
    """Whether the export holds the imported cassette's event lines, byte for byte."""
    with source.open("rb") as a, exported.open("rb") as b:
        next(a), next(b)  # the headers differ (recording id, claudetrace version)
        same = all(x == y for x, y in itertools.zip_longest(a, b))
    if not same:
        raise RuntimeError("export --no-redact did not give back the imported events")
    return "export --no-redact gave back the imported events byte for byte"
