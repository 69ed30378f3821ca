"""The proxy benchmark: throughput against ``cat`` and ``tee FILE``, added latency, memory.

Everything runs side by side in one invocation on the same input, a stream-json
mix made by cycling the lines of a recording.  Unless another cassette is given
that is the shipped streaming session (``bench/data/streaming.cassette.ndjson``):
two turns of the real CLI with ``include_partial_messages``, so most lines are
``stream_event`` deltas of a few words, as in sustained real traffic, with
assistant messages, three tool calls, permission and hook round trips and
results in between.  The small, control-heavy demo session is available with
``--from claudetrace/demo_data/session.cassette.ndjson``.

- **throughput**: the same input through ``cat IN | X > /dev/null`` where X is
  ``cat`` or ``tee FILE``, and through the proxy recording it into a fresh
  SQLite file, each timed until the process exits:

  - ``proxy``: ``claudetrace proxy -- cat IN > /dev/null``.  The child writes
    the stream into the proxy's pipe as the CLI writes its output, and the
    proxy records and forwards each byte once, as ``tee`` does: the same work
    on the same bytes through the same pipes.  The target is measured on this.
  - ``proxy echo``: ``cat IN | claudetrace proxy -- cat > /dev/null``.  Each
    line is recorded on its way in and again on its way back out, through an
    extra process: twice the work of ``tee``, shown for a host that sends as
    much as the CLI writes.

  For the proxy, "exits" is when every chunk it forwarded is in the session's
  capture file: the recording is durable then, as ``tee``'s file is.  That
  includes the proxy's Python start-up.  The indexer process stores the lines
  in the database behind it; the benchmark waits for that as well (not part
  of the throughput), reports how long after the proxy's exit the last line
  was stored, and checks that every line was.  The tools take turns
  (``repeat`` rounds) and each row is a tool's median run, since a shared
  machine is busier at some moments than at others.
- **latency**: a ping-pong host writes one line to ``cat`` and waits for it to
  come back, first directly over pipes, then through the proxy; the added
  latency per line is the difference of the round-trip percentiles (each line
  crosses the proxy twice, in and out).
- **memory**: the proxy's peak RSS (``VmHWM``) during the throughput run.
- **telemetry**: a real conversation in both directions — the host sends the
  session's host lines and a stand-in child (:mod:`.standin`) plays the CLI's
  lines in the recorded order (``cat`` would echo the CLI's lines back as host
  input) — through the proxy with live OpenTelemetry export off and on, side by
  side (OTLP over HTTP to a local endpoint that accepts and discards), for CPU
  time; and
  the ping-pong again with export on, for latency.

CPU time (user + system) is counted for the proxy process itself, its child
(``cat``) and its indexer, all from outside.  The proxy's own time is read from
the zombie before it is reaped (``waitid(WNOWAIT)``, then ``/proc/PID/stat``),
the child's from ``wait4``.  The indexer outlives the proxy (it runs in a
session of its own): the benchmark adopts it (:mod:`.orphans`, a child
subreaper) and waits for it, and ``wait4`` gives its CPU time, its telemetry
worker's included.  Live telemetry's cost is measured two ways.  On against
off, the target's figure: the total with it on against the total with it off,
run by run — the two sessions of a round run at the same time
(:func:`side_by_side`), so both meet the same machine, and the figure is the
median round.  And with ``valgrind_lines`` one more pair of runs (that many
lines) goes under cachegrind (:mod:`.cachegrind`), every process of the run
counted: instructions and estimated cycles, the same every time.

Targets (DESIGN.md): sustained recording at least 50% of ``tee`` throughput;
added latency p50 < 0.1 ms and p99 < 1 ms.  Live telemetry's CPU is reported, not
held to a target (it runs on the OpenTelemetry SDK, off the forwarding path).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import http.server
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from ..cassette import read_cassette
from . import cachegrind, compile_bytecode
from .cachegrind import Counts, change
from .orphans import RUN_ENV, adopting, cpu_seconds
from .standin import write_script

T = TypeVar("T")

#: The recording whose lines make the benchmark's input by default: a streaming
#: session of the real CLI (recorded by ``python -m tests.record_bench_input``).
STREAMING_CASSETTE = Path(__file__).resolve().parent / "data" / "streaming.cassette.ndjson"


@dataclass
class Throughput:
    """One tool's run over the whole input."""

    name: str
    seconds: float
    bytes: int
    lines: int
    peak_rss_kib: int | None = None
    #: CPU time of the process itself (all of it when /proc is unavailable).
    cpu_seconds: float | None = None
    #: CPU time of the descendants it reaped (its child command).
    children_cpu_seconds: float | None = None
    #: The proxy's indexer: its CPU time (with its telemetry worker's), and how
    #: long after the proxy's exit the last line was stored.
    indexer_cpu_seconds: float | None = None
    stored_after_seconds: float | None = None

    @property
    def recording_cpu_seconds(self) -> float | None:
        """CPU time of the recording itself: the proxy process and its indexer (with
        the indexer's telemetry worker), not the child command it forwards for."""
        if self.cpu_seconds is None:
            return None
        return self.cpu_seconds + (self.indexer_cpu_seconds or 0.0)

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds

    @property
    def lines_per_s(self) -> float:
        return self.lines / self.seconds


@dataclass
class Latency:
    """Round-trip times (ns) of a ping-pong through one path."""

    name: str
    round_trips_ns: list[int] = field(default_factory=list)

    def percentile(self, q: float) -> float:
        """The ``q`` quantile (0..1) in milliseconds."""
        return percentile(self.round_trips_ns, q) / 1e6


@dataclass
class ProxyBenchReport:
    """Everything one run measured."""

    input_bytes: int
    input_lines: int
    #: Every timed run, ``repeat`` of each tool, in the order they ran.
    runs: list[Throughput]
    direct: Latency
    proxied: Latency
    proxied_otel: Latency | None = None
    #: Telemetry off and on under cachegrind: proxy + child + indexer, and the lines.
    telemetry_counts: dict[str, Counts] = field(default_factory=dict)
    telemetry_counts_lines: int = 0

    @property
    def names(self) -> list[str]:
        return list(dict.fromkeys(t.name for t in self.runs))

    @property
    def throughput(self) -> list[Throughput]:
        """Each tool's median run (by seconds), for the table."""
        return [self.by_name(name) for name in self.names]

    def by_name(self, name: str) -> Throughput:
        """The median run of ``name`` (by seconds)."""
        runs = sorted((t for t in self.runs if t.name == name), key=lambda t: t.seconds)
        if not runs:
            raise KeyError(name)
        return runs[(len(runs) - 1) // 2]

    def ratio(self, name: str) -> float:
        """Throughput of ``name`` as a fraction of ``tee FILE``'s (median runs)."""
        return self.by_name(name).mb_per_s / self.by_name("tee FILE").mb_per_s

    @property
    def ratio_to_tee(self) -> float:
        """The target's figure: the proxy recording a CLI-shaped stream, against tee."""
        return self.ratio("proxy")

    def otel_changes(self, *, total: bool = True) -> list[float] | None:
        """Each round's CPU time with live telemetry on against off (on / off - 1).

        ``total``: the recording, proxy + indexer (the stand-in that plays the CLI,
        the same in both runs, is not the proxy's and is left out), else the proxy
        process alone.  None when a run's CPU time is unknown.
        """
        def cpu(name: str) -> list[float | None]:
            return [(t.recording_cpu_seconds if t.indexer_cpu_seconds is not None else None)
                    if total else t.cpu_seconds
                    for t in self.runs if t.name == name]

        off, on = cpu("standin"), cpu("standin+otel")
        if not off or len(off) != len(on) or not all(off) or not all(on):
            return None
        return [b / a - 1 for a, b in zip(off, on, strict=True) if a is not None and b is not None]

    def _otel_overhead(self, total: bool) -> float | None:
        changes = self.otel_changes(total=total)
        return None if changes is None else percentile(changes, 0.5)

    @property
    def otel_cpu_overhead(self) -> float | None:
        """Extra CPU time of the proxy process alone with live telemetry on (median round)."""
        return self._otel_overhead(total=False)

    @property
    def otel_total_cpu_overhead(self) -> float | None:
        """The same for proxy + indexer: what recording costs the machine."""
        return self._otel_overhead(total=True)

    def added_ms(self, q: float) -> float:
        """Added round-trip latency at quantile ``q``, in milliseconds."""
        return self.proxied.percentile(q) - self.direct.percentile(q)

    def lines(self) -> list[str]:
        """The report for people."""
        repeat = max(sum(t.name == name for t in self.runs) for name in self.names)
        out = [f"input: {self.input_lines:,} lines, {self.input_bytes / 1e6:.1f} MB; each row "
               f"the median of {repeat} runs", ""]
        out.append(
            f"{'':<12} {'seconds':>8} {'MB/s':>9} {'lines/s':>11} {'peak RSS':>10} {'CPU s':>7}"
            f" {'child':>6} {'indexer':>8} {'stored +s':>9}"
        )
        for t in self.throughput:
            rss = f"{t.peak_rss_kib / 1024:.0f} MiB" if t.peak_rss_kib else ""
            cpu = f"{t.cpu_seconds:.2f}" if t.cpu_seconds is not None else ""
            kids = f"{t.children_cpu_seconds:.2f}" if t.children_cpu_seconds is not None else ""
            idx = f"{t.indexer_cpu_seconds:.2f}" if t.indexer_cpu_seconds is not None else ""
            after = f"{t.stored_after_seconds:.2f}" if t.stored_after_seconds is not None else ""
            out.append(
                f"{t.name:<12} {t.seconds:>8.2f} {t.mb_per_s:>9.1f} "
                f"{t.lines_per_s:>11,.0f} {rss:>10} {cpu:>7} {kids:>6} {idx:>8} {after:>9}"
            )
        out += [
            "(cat, tee FILE: cat IN | X > /dev/null.  proxy: proxy -- cat IN > /dev/null, the",
            " child writing the stream as the CLI does.  proxy echo: cat IN | proxy -- cat >",
            " /dev/null, every line recorded on the way in and again on the way out.",
            " seconds: until the process exited, for the proxy with everything in its capture",
            " file; CPU s: the process itself; child: its child command; indexer: the process",
            " that stores the capture file; stored +s: the last line was in the database this",
            " long after the proxy's exit.  standin rows: the proxy in front of a stand-in",
            " that plays the CLI's side of the session, telemetry off and on, the two",
            " sessions running side by side (at the same time); their MB/s count the",
            " host's lines only)",
            "",
            f"{'round trip':<10} {'p50 ms':>8} {'p99 ms':>9} {'max ms':>11}",
        ]
        for lat in (self.direct, self.proxied, self.proxied_otel):
            if lat is None:
                continue
            out.append(
                f"{lat.name:<10} {lat.percentile(0.5):>8.3f} {lat.percentile(0.99):>9.3f} "
                f"{lat.percentile(1.0):>11.3f}"
            )
        p50, p99 = self.added_ms(0.5), self.added_ms(0.99)
        out += [
            "",
            f"proxy throughput: {self.ratio_to_tee:.0%} of tee "
            f"(target >= 50%: {'met' if self.ratio_to_tee >= 0.5 else 'MISSED'}); "
            f"echoed, every byte recorded twice: {self.ratio('proxy echo'):.0%} of tee",
            f"added latency per round trip: p50 {p50:.3f} ms (target < 0.1: "
            f"{'met' if p50 < 0.1 else 'MISSED'}), p99 {p99:.3f} ms (target < 1: "
            f"{'met' if p99 < 1.0 else 'MISSED'})",
        ]
        overhead, total = self.otel_cpu_overhead, self.otel_total_cpu_overhead
        if overhead is not None and total is not None and self.proxied_otel is not None:
            on, off = self.proxied_otel, self.proxied
            deltas = ", ".join(
                f"{label} {on.percentile(q) - off.percentile(q):+.3f} ms"
                for label, q in (("p50", 0.5), ("p99", 0.99), ("max", 1.0))
            )
            changes = " ".join(f"{c:+.1%}" for c in self.otel_changes() or [])
            out += [
                f"live telemetry, on against off: proxy + indexer {total:+.1%} CPU, "
                f"the median round (reported; forwarding does not wait for it); "
                f"the proxy process alone {overhead:+.1%}",
                f"  each round, on against off: {changes}",
                "  CPU s of each run, proxy + indexer, in order: off "
                + self._cpu_runs("standin") + "; on " + self._cpu_runs("standin+otel"),
            ]
            out.append(f"live telemetry round trip: {deltas}")
        if self.telemetry_counts:
            out.append(
                f"live telemetry under cachegrind ({self.telemetry_counts_lines:,} lines, "
                "proxy + child + indexer): "
                + change(self.telemetry_counts["off"], self.telemetry_counts["on"])
            )
        return out

    def _cpu_runs(self, name: str) -> str:
        return " ".join(f"{t.recording_cpu_seconds:.2f}" for t in self.runs
                        if t.name == name and t.recording_cpu_seconds is not None)


def side_by_side(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Each call on a thread of its own, started in order and run at the same time;
    their results in the same order (the first error is raised once all are done)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
    return [future.result() for future in futures]


def taking_turns(items: Sequence[T], round_: int) -> list[T]:
    """``items`` in order in even rounds, reversed in odd ones: each goes first every
    other round, so whatever favours a position favours each alike."""
    return list(items) if round_ % 2 == 0 else list(reversed(items))


def percentile(values: Sequence[int] | Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by the nearest-rank method."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 1))))
    return float(ordered[rank - 1])


def sample_lines(cassette: str | os.PathLike[str] | None = None) -> list[bytes]:
    """The lines of a recording (both directions, stderr left out), in order."""
    recorded = read_cassette(cassette or STREAMING_CASSETTE)
    lines = [e.data for e in recorded.events if e.direction != "err" and e.data]
    if not lines:
        raise ValueError("the cassette has no lines to build the benchmark input from")
    return lines


def sample_records(cassette: str | os.PathLike[str] | None = None) -> list[tuple[str, bytes]]:
    """The lines of a recording with their direction (stderr left out), in order."""
    recorded = read_cassette(cassette or STREAMING_CASSETTE)
    return [(e.direction, e.data) for e in recorded.events if e.direction != "err" and e.data]


def build_input(lines: Iterable[bytes], count: int) -> bytes:
    """``count`` lines cycled from ``lines``, each ending with a newline."""
    return b"".join(line + b"\n" for line in itertools.islice(itertools.cycle(lines), count))


def _peak_rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def time_command(
    name: str,
    argv: list[str],
    input_path: Path,
    lines: int,
    env: dict[str, str] | None = None,
    *,
    piped: bool = True,
    host: list[str] | None = None,
    on_exit: Callable[[], None] | None = None,
) -> Throughput:
    """Time ``cat INPUT | argv > /dev/null`` (watching argv's peak RSS).

    The input comes through a pipe, as the CLI's output does, for every tool
    alike (``cat`` straight from a file would use in-kernel copies).  With
    ``piped=False`` argv makes the stream itself (``proxy -- cat INPUT``, the
    child writing into the proxy's pipe) and its stdin is empty.  With ``host``,
    that command talks with argv instead: its stdout is argv's stdin and argv's
    stdout its stdin (INPUT only gives the size).  ``on_exit`` is called as soon
    as argv has exited, before anything else.
    """
    size = input_path.stat().st_size
    peak: list[int] = []
    with open(os.devnull, "wb") as sink:
        start = time.perf_counter()
        producer: subprocess.Popen[bytes] | None = None
        if host is not None:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
            assert proc.stdin is not None and proc.stdout is not None
            try:
                producer = subprocess.Popen(host, stdin=proc.stdout, stdout=proc.stdin)
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            finally:
                proc.stdin.close()
                proc.stdout.close()
        elif piped:
            producer = subprocess.Popen(["cat", str(input_path)], stdout=subprocess.PIPE)
            assert producer.stdout is not None
            proc = subprocess.Popen(argv, stdin=producer.stdout, stdout=sink, env=env)
            producer.stdout.close()
        else:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sink, env=env)

        exited = threading.Event()

        def watch() -> None:
            # Never poll()/wait here: the process must stay unreaped until
            # _own_cpu_at_exit has read its own CPU time.
            while not exited.wait(0.02):
                value = _peak_rss_kib(proc.pid)
                if value:
                    peak.append(value)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        own = _own_cpu_at_exit(proc.pid)
        if on_exit is not None:
            on_exit()
        exited.set()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        hosted = producer.wait() if producer is not None else 0
        seconds = time.perf_counter() - start
        watcher.join()
    if code != 0:
        raise RuntimeError(f"{name} exited with status {code}")
    if hosted and host is not None:  # it missed lines of the CLI's: the talk went wrong
        raise RuntimeError(f"{name}: the host exited with status {hosted}")
    total = usage.ru_utime + usage.ru_stime
    return Throughput(
        name, seconds, size, lines, max(peak) if peak else None,
        cpu_seconds=total if own is None else own,
        children_cpu_seconds=None if own is None else max(0.0, total - own),
    )


def _own_cpu_at_exit(pid: int) -> float | None:
    """Wait for ``pid`` to exit, leave it unreaped, and read its own CPU seconds.

    ``wait4`` would add the time of the children it reaped; ``/proc/PID/stat``
    of the zombie keeps its own ``utime``/``stime`` apart (clock ticks).
    """
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    except (OSError, AttributeError):
        return None
    return cpu_seconds(pid, waited=False)


def ping_pong(
    name: str,
    argv: list[str],
    lines: Sequence[bytes],
    round_trips: int,
    warmup: int = 200,
    env: dict[str, str] | None = None,
) -> Latency:
    """Send one line at a time through ``argv`` (an echoing child), timing each round trip."""
    result = Latency(name)
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, env=env
    )
    assert proc.stdin is not None and proc.stdout is not None
    out_fd, in_fd = proc.stdout.fileno(), proc.stdin.fileno()
    try:
        for i, line in enumerate(itertools.islice(itertools.cycle(lines), warmup + round_trips)):
            data = line + b"\n"
            start = time.perf_counter_ns()
            os.write(in_fd, data)
            got = 0
            while got < len(data):
                chunk = os.read(out_fd, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"{name}: the echo child closed its output")
                got += len(chunk)
            if i >= warmup:
                result.round_trips_ns.append(time.perf_counter_ns() - start)
    finally:
        proc.stdin.close()
        proc.stdout.read()
        proc.stdout.close()
        proc.wait()
    return result


def run_proxy_bench(
    *,
    lines: int = 500_000,
    round_trips: int = 5_000,
    cassette: str | None = None,
    db: str | None = None,
    workdir: str | None = None,
    repeat: int = 3,
    valgrind_lines: int = 0,
) -> ProxyBenchReport:
    """Measure cat, tee FILE and the proxy on the same input (see the module doc).

    The throughput runs go round ``repeat`` times, each tool once per round, so a
    machine that is busier for a while slows every tool alike; the report takes
    each tool's median.  With ``valgrind_lines``, telemetry off and on also run
    under cachegrind on that many lines.
    """
    for tool in ("cat", "tee"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"the benchmark needs `{tool}` on PATH")
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    if valgrind_lines:
        cachegrind.require()
    compile_bytecode()
    source = sample_lines(cassette)
    with tempfile.TemporaryDirectory(prefix="claudetrace-bench-", dir=workdir) as tmp, \
            forgetting() as made, adopting() as orphans:
        folder = Path(tmp)
        input_path = folder / "input.ndjson"
        input_path.write_bytes(build_input(source, lines))
        from ..store import open_store

        databases = itertools.count()

        def fresh_db() -> str:
            """Where the next proxy run records: a new SQLite file, as each tee writes a
            new file, so that no run stores into bigger indexes than another (``--db``:
            every run shares that one).  The schema is made first, outside the timing."""
            url = db or str(folder / f"bench-{next(databases)}.db")
            open_store(url).close()
            return url

        # What the runs recorded in a database the user named is deleted at the end.
        noted = made if db else None

        def done_with(url: str) -> None:
            if not db:
                for path in folder.glob(f"{Path(url).name}*"):  # the file, its WAL, its captures
                    shutil.rmtree(path) if path.is_dir() else path.unlink()

        def proxy(url: str) -> list[str]:
            return [sys.executable, "-m", "claudetrace", "proxy", "--db", url, "--name", "bench"]

        plain = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        # Telemetry: a real conversation in both directions (the CLI played by
        # a stand-in, see claudetrace.bench.standin), with export off and on.
        host_path, standin, host, events = _standin(folder, "standin", cassette, lines)
        runs: list[Throughput] = []
        numbers = itertools.count()  # each proxy run's marker, to tell its indexer by
        with discarding_otlp_endpoint() as endpoint:
            otel = {
                **plain,
                "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            }

            def recorded(name: str, child: list[str], source: Path, env: dict[str, str],
                         stored: int, *, piped: bool = True, url: str | None = None,
                         host: list[str] | None = None) -> Throughput:
                """One proxy run (into ``url``, else a fresh database); waits until the
                indexer stored all ``stored`` events, then for the indexer to exit."""
                marker = str(next(numbers))
                url = url or fresh_db()
                run = time_command(name, [*proxy(url), "--", *child], source, lines,
                                   {**env, RUN_ENV: marker}, piped=piped, host=host,
                                   on_exit=orphans.look)
                run.stored_after_seconds = _check_stored(url, stored, noted)
                usage = orphans.usage(marker)
                run.indexer_cpu_seconds = None if usage is None else usage.cpu_seconds
                done_with(url)
                return run

            tee_file = folder / "tee.out"
            for round_ in range(repeat):
                tee_file.unlink(missing_ok=True)  # each tee writes a new file, as the proxy does
                runs += [
                    time_command("cat", ["cat"], input_path, lines),
                    time_command("tee FILE", ["tee", str(tee_file)], input_path, lines),
                    recorded("proxy", ["cat", str(input_path)], input_path, plain, lines,
                             piped=False),
                    recorded("proxy echo", ["cat"], input_path, plain, 2 * lines),
                ]
                # Telemetry off and on side by side: both sessions at once, one
                # starting first in even rounds, the other in odd ones, so that the
                # machine's speed, which drifts here by a fifth within seconds,
                # is the same for both halves of a round.  (With a shared --db,
                # both store into the same, growing indexes.)
                pair = taking_turns([("standin", plain), ("standin+otel", otel)], round_)
                urls = [fresh_db() for _ in pair]  # the schema, outside the threads
                runs += side_by_side([
                    functools.partial(recorded, name, standin, host_path, env, events, url=url,
                                      host=host)
                    for (name, env), url in zip(pair, urls, strict=True)
                ])
            direct = ping_pong("direct", ["cat"], source, round_trips)
            latency: list[Latency] = []
            for name, env in (("proxy", plain), ("proxy+otel", otel)):
                url = fresh_db()
                latency.append(ping_pong(name, [*proxy(url), "--", "cat"], source, round_trips,
                                         env=env))
                _check_stored(url, 2 * round_trips + 2 * 200, noted)  # the warm-up lines too
                done_with(url)
            proxied, proxied_otel = latency
            counts: dict[str, Counts] = {}
            if valgrind_lines:
                vg_input, vg_standin, vg_host, vg_events = _standin(
                    folder, "valgrind", cassette, valgrind_lines)
                for name, env in (("off", plain), ("on", otel)):
                    logs = folder / f"cachegrind-{name}"
                    logs.mkdir()
                    url = fresh_db()
                    counted = [*cachegrind.wrapper(logs / "%p.log", children=True), *proxy(url)]
                    time_command(f"cachegrind {name}", [*counted, "--", *vg_standin], vg_input,
                                 valgrind_lines, env, host=vg_host)
                    _check_stored(url, vg_events, noted)
                    counts[name] = cachegrind.read_logs(cachegrind.finished_logs(logs))
                    done_with(url)
        return ProxyBenchReport(
            input_bytes=input_path.stat().st_size,
            input_lines=lines,
            runs=runs,
            direct=direct,
            proxied=proxied,
            proxied_otel=proxied_otel,
            telemetry_counts=counts,
            telemetry_counts_lines=valgrind_lines,
        )


def _standin(folder: Path, name: str, cassette: str | None,
             lines: int) -> tuple[Path, list[str], list[str], int]:
    """The host's lines (for their size), the stand-in's command, the host's command
    and the events a run stores, for ``lines`` lines of the recording played as a
    conversation (see :mod:`.standin`)."""
    script = folder / f"{name}.script"
    host_input, events = write_script(
        script, itertools.islice(itertools.cycle(sample_records(cassette)), lines)
    )
    host_path = folder / f"{name}-host.ndjson"
    host_path.write_bytes(host_input)
    play = [sys.executable, "-m", "claudetrace.bench.standin"]
    return host_path, [*play, str(script)], [*play, "--host", str(script)], events


@contextlib.contextmanager
def discarding_otlp_endpoint() -> Iterator[str]:
    """An OTLP/HTTP endpoint on 127.0.0.1 that accepts every export and keeps nothing,
    keeping the connection alive as a collector does."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


#: Notes a recording a bench made in a database the user named (url, recording id).
Made = Callable[[str, str], None]


@contextlib.contextmanager
def forgetting() -> Iterator[Made]:
    """What a bench notes (:func:`_check_stored`'s ``made``) is deleted once it is
    done, off the clock: a bench leaves a database the user named (``--db``) as it
    found it, and each run of it finds the same one (the indexes a burst goes
    into do not grow from run to run).  Entered before :func:`~.orphans.adopting`,
    so that the indexers it adopted have exited before anything is deleted."""
    made: dict[str, list[str]] = {}
    try:
        yield lambda url, recording_id: made.setdefault(url, []).append(recording_id)
    finally:
        from ..store import open_store

        for url, ids in made.items():
            try:
                store = open_store(url)
                try:
                    for recording_id in ids:
                        store.delete_recording(recording_id)
                finally:
                    store.close()
            except Exception as exc:
                print(f"claudetrace bench: could not delete its {len(ids)} recordings "
                      f"({exc})", file=sys.stderr)


def _check_stored(db_url: str, expected: int, made: Made | None = None, *,
                  on_listed: Callable[[], None] | None = None) -> float:
    """Seconds until the newest recording is listed complete, as ``claudetrace
    sessions`` lists it: stored (the store settled, which waits for its indexer),
    with ``expected`` events.  Its stored rows are then counted, off the clock
    (a ``count(*)`` of 200k rows takes 10-15 ms, and no reader waits for it):
    the figures only count if every line really was stored.  ``made`` notes
    the recording (:func:`forgetting`); ``on_listed`` is called as soon as it
    is listed, before the count.
    """
    from ..indexer import settle
    from ..store import open_store

    start = time.perf_counter()
    store = open_store(db_url)
    try:
        settle(store, quiet=True)  # waits for the indexer
        newest = store.resolve("latest")  # the first that claudetrace sessions lists
        waited = time.perf_counter() - start
        if on_listed is not None:
            on_listed()
        stored = store.count_events(newest.id)
    finally:
        store.close()
    if newest.event_count != expected or stored != expected:
        raise RuntimeError(f"the proxy stored {stored} of {expected} events "
                           f"(the recording lists {newest.event_count})")
    # Only the bench's own (named by it, and as long as its run): a newest
    # recording of anyone else's is never taken for it.
    if made is not None and (newest.name or "").startswith("bench"):
        made(db_url, newest.id)
    return waited
