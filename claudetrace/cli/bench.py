"""``claudetrace bench``: benchmarks that measure (they do not assert)."""

from __future__ import annotations

import click

from ._common import reports_errors

#: The shapes of `bench ingest` (claudetrace.bench.shapes.SHAPES, named here so that
#: the command line loads no bench module to list them).
SHAPE_NAMES = ("sample", "deltas", "tools", "huge")


@click.group()
def bench() -> None:
    """Measure claudetrace's performance on this machine."""


@bench.command("replay")
@click.option(
    "--lines", default=100_000, show_default=True, help="Recorded lines the engine releases."
)
@click.option(
    "--sdk-lines",
    default=10_000,
    show_default=True,
    help="Recorded lines replayed through the real Python SDK (0: skip).",
)
@reports_errors
def replay_bench(lines: int, sdk_lines: int) -> None:
    """Replay engine throughput, and a long session through the Python SDK.

    Targets: the engine releases at least 100k lines/s; a 10k-line recording
    replays through the real Python SDK in well under 2 s.
    """
    from ..replay.bench import bench_engine, bench_sdk

    engine = bench_engine(lines)
    click.echo(f"engine: {engine.lines} lines compiled in {engine.compile_s:.3f} s")
    click.echo(f"engine: matcher alone releases {engine.matcher_lines_per_s:,.0f} lines/s")
    click.echo(
        f"engine: over pipes with a host thread {engine.engine_lines_per_s:,.0f} lines/s "
        f"({engine.engine_s:.3f} s)"
    )
    if sdk_lines:
        sdk = bench_sdk(sdk_lines)
        click.echo(
            f"sdk: {sdk.lines}-line recording, {sdk.messages} messages received by "
            f"ClaudeSDKClient in {sdk.seconds:.3f} s"
        )


@bench.command("proxy")
@click.option("--lines", default=500_000, show_default=True, help="Lines of input (~0.3 KB each).")
@click.option("--round-trips", default=5_000, show_default=True, help="Ping-pong lines (latency).")
@click.option(
    "--from", "cassette", metavar="CASSETTE",
    help="Build the input from this recording [default: the streaming session].",
)
@click.option(
    "--db", "db_url", metavar="URL",
    help="Record here (the runs' recordings are deleted after) [default: a fresh SQLite file]."
)
@click.option(
    "--repeat", default=3, show_default=True, type=click.IntRange(min=1),
    help="Throughput runs per tool (taking turns); each row is the median.",
)
@click.option("--valgrind", is_flag=True,
              help="Also count telemetry off and on under cachegrind (slow: ~50x).")
@click.option("--valgrind-lines", default=50_000, show_default=True,
              type=click.IntRange(min=1), help="Lines of the runs under cachegrind.")
@reports_errors
def proxy_bench(
    lines: int, round_trips: int, cassette: str | None, db_url: str | None, repeat: int,
    valgrind: bool, valgrind_lines: int,
) -> None:
    """Proxy vs cat vs tee FILE: throughput, added latency per line, peak RSS, telemetry CPU.

    Targets: at least 50% of tee throughput; added latency p50 < 0.1 ms, p99 < 1 ms.
    Live telemetry's CPU is reported (it runs on the OpenTelemetry SDK, off the
    forwarding path).  With --valgrind, telemetry's cost is also counted in
    instructions, which do not vary with the machine's load.
    """
    from ..bench.proxy import run_proxy_bench

    report = run_proxy_bench(
        lines=lines, round_trips=round_trips, cassette=cassette, db=db_url, repeat=repeat,
        valgrind_lines=valgrind_lines if valgrind else 0,
    )
    for line in report.lines():
        click.echo(line)


@bench.command("telemetry")
@click.option("--lines", default=100_000, show_default=True,
              help="Lines of the streaming session the indexer stores.")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(min=1),
              help="Runs per mode (off and on take turns); CPU time is the median.")
@click.option("--valgrind", is_flag=True,
              help="Also count instructions and cache misses under cachegrind (slow: ~50x).")
@reports_errors
def telemetry_bench(lines: int, rounds: int, valgrind: bool) -> None:
    """Live telemetry's cost in the indexer: the same capture file stored with it off and on.

    CPU time, and with --valgrind the instruction count, which does not vary
    with the machine's load.
    """
    from ..bench.telemetry import run_telemetry_bench

    for line in run_telemetry_bench(lines=lines, rounds=rounds, valgrind=valgrind).lines_out():
        click.echo(line)


@bench.command("startup")
@click.option("--runs", default=11, show_default=True, type=click.IntRange(min=1),
              help="Runs each, direct and proxied (the figure is the median).")
@click.option("--db", "db_urls", multiple=True, metavar="URL",
              help="Also proxy into this database (repeatable; e.g. a PostgreSQL URL; "
                   "the runs' recordings are deleted after).")
@click.option("--telemetry/--no-telemetry", default=True, show_default=True,
              help="Also proxy into SQLite with live telemetry on (OTLP to a local sink).")
@reports_errors
def startup_bench(runs: int, db_urls: tuple[str, ...], telemetry: bool) -> None:
    """How much later the child starts through the proxy than run directly.

    The proxy runs as a shim runs it.  Target: within 50 ms, on SQLite (a fresh
    file), on any --db and with live telemetry alike.
    """
    from ..bench.ingest import run_startup_bench

    databases: dict[str, str | None] = {"SQLite": None, **{_db_name(u): u for u in db_urls}}
    for line in run_startup_bench(runs=runs, databases=databases,
                                  telemetry=telemetry).lines():
        click.echo(line)


@bench.command("ingest")
@click.option("--lines", default=100_000, show_default=True, type=click.IntRange(min=1),
              help="Lines of the sample shape (~0.3 KB each), each stored in both directions; "
                   "the other shapes scale with it (at 100,000: deltas 127,500 lines, "
                   "tools 40,000, huge 400).")
@click.option("--shape", "shapes", multiple=True, type=click.Choice(list(SHAPE_NAMES)),
              help="Measure this shape of input (repeatable) [default: every shape].")
@click.option("--repeat", default=1, show_default=True, type=click.IntRange(min=1),
              help="Rounds (rows take turns; each row is the median).")
@click.option("--from", "cassette", metavar="CASSETTE",
              help="Build the sample shape from this recording [default: the streaming "
                   "session].")
@click.option("--db", "db_urls", multiple=True, metavar="URL",
              help="Also record into this database (repeatable; e.g. a PostgreSQL URL; "
                   "the runs' recordings are deleted after).")
@reports_errors
def ingest_bench(lines: int, shapes: tuple[str, ...], repeat: int, cassette: str | None,
                 db_urls: tuple[str, ...]) -> None:
    """Time to queryable and footprint: a burst through the proxy until stored, against
    a naive loop, on each shape of input.

    Shapes: sample (the streaming session cycled), deltas (text-delta-heavy, partial
    messages on), tools (tool_use/tool_result pairs), huge (few lines of 1-5 MB).
    Targets: at least twice the naive loop's speed on SQLite; at least its speed on
    PostgreSQL; a store no bigger than the lines it holds.
    """
    from ..bench.ingest import run_ingest_shapes

    databases: dict[str, str | None] = {"SQLite": None, **{_db_name(u): u for u in db_urls}}
    reports = run_ingest_shapes(shapes=list(shapes) or None, lines=lines, repeat=repeat,
                                cassette=cassette, databases=databases)
    for number, report in enumerate(reports, 1):
        for line in report.lines_out(legend=number == len(reports)):
            click.echo(line)
        if number < len(reports):
            click.echo("")


@bench.command("session")
@click.option("--lines", default=200_000, show_default=True, type=click.IntRange(min=1),
              help="Lines of the session (the streaming sample cycled).")
@click.option("--repeat", default=3, show_default=True, type=click.IntRange(min=1),
              help="Rounds (rows take turns; each row is the median).")
@click.option("--from", "cassette", metavar="CASSETTE",
              help="Build the session from this recording [default: the streaming session].")
@reports_errors
def session_bench(lines: int, repeat: int, cassette: str | None) -> None:
    """Reading and moving a big session: show (first byte and total), import, export.

    Targets for 200k lines: show begins within 1 s and ends within 3 s; import and
    export within 2 s.  Reference rows: cat of the cassette and naive Python loops.
    """
    from ..bench.session import run_session_bench

    for line in run_session_bench(lines=lines, repeat=repeat, cassette=cassette).lines_out():
        click.echo(line)


def _count(value: str) -> int:
    """``10M``, ``500k`` or a plain number."""
    scale = {"k": 1_000, "m": 1_000_000}.get(value[-1:].lower(), 1)
    digits = value[:-1] if scale > 1 else value
    try:
        return int(float(digits) * scale)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a count (e.g. 1M, 500k, 2000000)") from None


@bench.command("store")
@click.option("--sessions", default=5000, show_default=True, type=click.IntRange(min=2),
              help="Sessions to store (fewer for CI).")
@click.option("--turns", default=4, show_default=True, type=click.IntRange(min=1),
              help="Turns a session (21 lines each, 5 a turn and the init).")
@click.option("--events", metavar="N",
              help="Build a team's store of about N events (1M, 5M, 10M) on PostgreSQL "
                   "instead (--db: an empty database, left filled), and time the targets "
                   "of issue 37 on it, prune included.")
@click.option("--repeat", default=3, show_default=True, type=click.IntRange(min=1),
              help="Rounds (each row is the median).")
@click.option("--db", "db_url", metavar="URL",
              help="Fill this database instead of a new SQLite file (the bench's "
                   "recordings are deleted after).")
@reports_errors
def store_bench(sessions: int, turns: int, events: str | None, repeat: int,
                db_url: str | None) -> None:
    """A team's store: the session list, search, a cold /metrics scrape.

    Fills a store with SESSIONS imported sessions and times reading it through
    the commands' own functions, with a cold scrape that folds every recording
    again (as before the stored figures) for comparison.  With --events, builds
    a store of that many events on PostgreSQL (templates through the writer,
    then copies by COPY), says its footprint beside its lines' raw bytes (each
    table and index, an events row column by column), and times /metrics,
    search, listing, a 20k-line session's page, the Stats page and a prune while
    a proxy records.
    """
    if events is not None:
        from ..bench.teamstore import run_team_bench

        if db_url is None:
            raise click.UsageError("--events needs --db postgresql+psycopg://… "
                                   "(an empty database)")
        for line in run_team_bench(db_url, events=_count(events), sessions=sessions,
                                   repeat=repeat, say=click.echo):
            click.echo(line)
        return
    from ..bench.store import run_store_bench

    report = run_store_bench(sessions=sessions, turns=turns, repeat=repeat, db=db_url)
    for line in report.lines_out():
        click.echo(line)


@bench.command("usage")
@click.option("--sessions", default=200, show_default=True, help="Transcripts in the tree.")
@click.option("--calls", default=700, show_default=True,
              help="Most model calls a session (each 1 to this many; 700: ~100 MB for 200).")
@click.option("--db", "db_url", metavar="URL",
              help="Store here (e.g. PostgreSQL; its recordings stay) "
              "[default: fresh SQLite files].")
@click.option("--ccusage", metavar="PATH",
              help="ccusage to compare with [default: on PATH, or the tests' copy in a checkout].")
@click.option("--ccusage-npm", "npm_version", default="20.0.24", show_default=True,
              metavar="VERSION",
              help="Also install this ccusage release from npm (off the clock) and run it "
              "beside ('none': leave it out).")
@click.option("--repeat", default=3, show_default=True, type=click.IntRange(min=1),
              help="Runs per command (taking turns); each row is the median.")
@click.option("--team", type=click.IntRange(min=1), metavar="SESSIONS",
              help="Instead: a team's store of SESSIONS sessions (35 calls each) seeded "
              "at --db (or a fresh SQLite file), and every report on it, as a table, "
              "--json, --breakdown and filtered.")
@reports_errors
def usage_bench(sessions: int, calls: int, db_url: str | None, ccusage: str | None,
                npm_version: str, repeat: int, team: int | None) -> None:
    """claudetrace usage against ccusage on the same made-up transcript tree.

    Targets: import then usage daily at most 2x ccusage's time; usage daily on the
    filled store at most 0.25x; any report under 1 s on 10,000 sessions in PostgreSQL
    (--team 10000 --db URL).
    """
    from ..bench.usage import find_ccusage, report_lines, run_team_bench, run_usage_bench

    if team is not None:
        for line in report_lines(run_team_bench(sessions=team, db_url=db_url, repeat=repeat,
                                                say=click.echo)):
            click.echo(line)
        return
    found = find_ccusage(ccusage)
    if found is None and npm_version == "none":
        click.echo("ccusage not found: no side-by-side row (npm install ccusage)", err=True)
    rows = run_usage_bench(sessions=sessions, calls=calls, db_url=db_url, ccusage=found,
                           repeat=repeat, say=click.echo,
                           npm_version=None if npm_version == "none" else npm_version)
    for line in report_lines(rows):
        click.echo(line)


def _db_name(url: str) -> str:
    """A short name for a database row: its kind."""
    scheme = url.partition("://")[0].split("+")[0] if "://" in url else "sqlite"
    return {"postgresql": "PostgreSQL", "sqlite": "SQLite file"}.get(scheme, scheme)


def _add_ui_bench() -> None:
    # The UI benchmark lives with the UI command (it needs the ui extra only when run).
    from .ui import ui_bench

    bench.add_command(ui_bench, "ui")


_add_ui_bench()


@bench.command("import")
@click.option("--sessions", default=200, show_default=True, help="Sessions in the tree.")
@click.option("--mib", default=100, show_default=True, help="Size of the tree (MiB).")
@click.option("--repeat", default=3, show_default=True, type=click.IntRange(min=1),
              help="Runs per row, taking turns; each row is the median.")
@click.option("--tree", "tree_path", type=click.Path(exists=True, file_okay=False),
              help="Import this projects folder instead of a generated one.")
@click.option("--ccusage", "ccusage", default="latest", show_default=True, metavar="VERSION",
              help="The ccusage release to run beside ('none': leave it out).")
@reports_errors
def import_bench(sessions: int, mib: int, repeat: int, tree_path: str | None,
                 ccusage: str) -> None:
    """Importing a ~/.claude/projects tree, beside a naive loop and ccusage.

    Targets: an import takes at most 2x ccusage's time on the same tree, a
    re-import of it unchanged under 0.5 s, peak memory under 150 MB.  The
    import stores usage first; ``import + usage daily`` is what a user waits
    for, and the pass that folds the sessions after it is a row of its own
    (its CPU seconds), as is ``import --wait`` (every session converted first).  ccusage
    (``ccusage daily --json --offline``) is installed from npm into a cache
    folder first, off the clock, where npm is on PATH.
    """
    import statistics
    from pathlib import Path

    from ..bench.transcripts import run_import_bench

    tree, rows = run_import_bench(
        sessions=sessions, size=mib << 20, repeat=repeat,
        tree_path=Path(tree_path) if tree_path else None,
        ccusage=None if ccusage == "none" else ccusage)
    click.echo(f"tree: {tree.sessions} sessions, {tree.files or 'its'} files, "
               f"{tree.bytes / 1e6:.1f} MB")
    base = next((r for r in rows if r.name.startswith("ccusage") and r.seconds), None)
    for row in rows:
        ratio = f"  {row.median / base.median:.2f}x ccusage" if base and row is not base else ""
        note = f"  ({row.note})" if row.note else ""
        if not row.seconds:
            click.echo(f"{row.name:<26} {note.strip()}")
            continue
        cpu = f"  CPU {statistics.median(row.cpu):.2f} s" if row.cpu else ""
        click.echo(f"{row.name:<26} {row.median:8.3f} s  peak {row.peak_mib:6.1f} MiB"
                   f"{ratio}{cpu}{note}")
