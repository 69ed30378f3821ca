"""``usage``: tokens and cost by day, week, month, session or 5-hour block."""

from __future__ import annotations

import datetime as dt
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from ..display import say
from ._common import (
    INTERVAL,
    db_option,
    echo_json,
    fail,
    no_empty_path,
    read_store,
    reports_errors,
)

#: The years whose days a store's times (ns since 1970, 64-bit) reach, whatever the zone.
_FIRST_YEAR, _LAST_YEAR = 1678, 2261


def _day(value: str | None, tz: dt.tzinfo | None, *, end: bool) -> int | None:
    """``YYYYMMDD`` or ``YYYY-MM-DD`` (a day in ``tz``; its end when ``end``) as Unix ns."""
    if not value:
        return None
    text = value.replace("-", "")
    try:
        day = dt.datetime.strptime(text, "%Y%m%d").replace(tzinfo=tz)  # None: local
    except ValueError:
        fail(f"{'--until' if end else '--since'} {value!r} is not a day "
             "(YYYYMMDD or YYYY-MM-DD)", 2)
    if not _FIRST_YEAR <= day.year <= _LAST_YEAR:
        # A store keeps times as 64-bit ns since 1970 (1677 to 2262): a day past
        # them compared nothing but overflowed (Python's dates end at year 9999).
        fail(f"{'--until' if end else '--since'} {value} is out of range: "
             f"days from {_FIRST_YEAR} to {_LAST_YEAR}", 2)
    if end:
        day += dt.timedelta(days=1)
    return int(day.timestamp()) * 1_000_000_000


@click.command()
@click.argument("report", default="daily",
                type=click.Choice(["daily", "weekly", "monthly", "session", "blocks"]))
@db_option
@click.option("--json", "as_json", is_flag=True, help="JSON in ccusage's field names, for scripts.")
@click.option("--since", metavar="DAY", help="From this day on (YYYYMMDD or YYYY-MM-DD).")
@click.option("--until", metavar="DAY", help="Up to this day, included.")
@click.option("-b", "--breakdown", is_flag=True, help="A row per model under each period.")
@click.option("--project", metavar="TEXT", help="Only sessions whose working directory has TEXT.")
@click.option("--tag", "tags", multiple=True, metavar="K=V", help="Only sessions with this tag.")
@click.option("--name", help="Only sessions of this name.")
@click.option("--source", "sources", multiple=True, metavar="SOURCE",
              help="Only sessions from this source: proxy, transcript, import… (repeatable).")
@click.option("--model", "models", multiple=True, metavar="MODEL",
              help="Only calls of this model (repeatable).")
@click.option("-z", "--timezone", "timezone", metavar="ZONE",
              help="Time zone of days, weeks and months (IANA name or UTC; default: local).")
@click.option("--import", "imports", multiple=True, metavar="PATH", callback=no_empty_path,
              help="Import these transcripts or folders first (only what changed), "
              "e.g. ~/.claude/projects.")
@click.option("--live", is_flag=True, help="blocks: refresh in the terminal until Ctrl-C.")
@click.option("--interval", default=5.0, show_default=True, type=INTERVAL,
              help="Seconds between refreshes.")
@reports_errors
def usage(report: str, db_url: str | None, as_json: bool, since: str | None, until: str | None,
          breakdown: bool, project: str | None, tags: tuple[str, ...], name: str | None,
          sources: tuple[str, ...], models: tuple[str, ...], timezone: str | None,
          imports: tuple[str, ...], live: bool, interval: float) -> None:
    """Tokens and cost of every stored session (proxied and imported), by day,
    week, month, session or 5-hour billing block (REPORT, default daily).

    Cost is the CLI's where it reported one, else estimated from the price table
    (genai-prices) and marked so; a model without a price is listed, not counted
    as 0.  --json writes ccusage's fields (see docs/usage.md for the differences).
    """
    from .. import usage as reports
    from ..store.usage import UsageFilter, unmatched

    try:
        tz = reports.zone(timezone)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--timezone") from None
    if live and report != "blocks":
        raise click.BadParameter("--live is for the blocks report", param_hint="--live")
    if live and as_json:
        raise click.BadParameter("--live refreshes a table in the terminal, not --json",
                                 param_hint="--live")
    since_ns, until_ns = _day(since, tz, end=False), _day(until, tz, end=True)
    if since_ns is not None and until_ns is not None and since_ns >= until_ns:
        # Was an empty report, as if nothing had been used.
        fail(f"--since {since} is after --until {until}: no day is in between", 2)
    parsed: dict[str, str] = {}
    if tags:  # the proxy's command line is loaded only to read them
        from .record import _parse_tags

        parsed = _parse_tags(tags)
    f = UsageFilter(since_ns=since_ns, until_ns=until_ns, models=models, project=project,
                    tags=parsed, name=name, sources=sources)
    tally: Any = None
    if imports:  # the import's tally (and its session model) only when importing
        from .browse import Tally

        tally = Tally(each=False)
    # Paused from the start (the imports of psycopg and Rich start it dozens of times)
    # but where --import runs first, with it on.
    with _collector_paused(not live and not imports), _reader(db_url, imports, tally) \
            as reader, _collector_paused(not live):
        # A filter that matches nothing at all (a mistyped model) is said, not
        # left to look like no use; the (empty) report is still printed, exit 0.
        for line in unmatched(reader, f):
            say(f"claudetrace: {line}", err=True)
        _report(reader, report, as_json, breakdown, live, interval, tz, f)
    if tally is not None and (tally.skipped or tally.damage):
        raise SystemExit(1)  # as import's: the report is made of what could be read


@contextmanager
def _reader(db_url: str | None, imports: tuple[str, ...], tally: Any) -> Iterator[Any]:
    """What runs the report's queries: on a database at the newest schema with
    nothing waiting to be stored, a bare sqlite3 or psycopg connection (no
    SQLAlchemy); else the store, after importing ``imports``."""
    from ..store.usage import plain_reader, store_reader

    if not imports:
        from ..capture import nothing_to_settle
        from ..config import database_named, default_home_there, resolve_url
        from ..store.schema import make_if_new

        url = resolve_url(db_url)
        if nothing_to_settle(url):  # told without SQLAlchemy (a fifth of a second)
            # The default database not made yet is made as the store would make it
            # (from the schema script), to be read plainly: a named one is not made.
            make_if_new(url, create=not database_named(db_url) and default_home_there())
            with plain_reader(url) as plain:
                if plain is not None:
                    yield plain
                    return
    store = read_store(db_url) if not imports else _imported(db_url, imports, tally)
    try:
        yield store_reader(store)
    finally:
        store.close()


@contextmanager
def _collector_paused(paused: bool) -> Iterator[None]:
    """Python's cyclic garbage collector off while a report is made (``paused``).

    A report builds an object or more per session and model and holds them all
    to the end: the collector, started every 700 new ones, only walks them again
    (a third of a 10,000-session report's time).  Reference counting still frees
    what the report drops; the collector is back on after it (any --import ran
    before, with it on)."""
    import gc

    was = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _report(reader: Any, report: str, as_json: bool, breakdown: bool, live: bool,
            interval: float, tz: dt.tzinfo | None, f: Any) -> None:
    from .. import usage as reports

    kind: Any = report
    if as_json:
        echo_json(reports.report_json(reader, kind, f, tz, time.time_ns()))
        return
    from rich.console import Console

    from .usage_grid import show
    from .usage_table import blocks_table, period_table, session_table

    console = Console(width=None if sys.stdout.isatty() else 200)
    if report == "blocks":
        def table() -> Any:
            return blocks_table(reports.blocks(reader, f), time.time_ns(), breakdown)

        if live:
            from rich.live import Live

            with Live(table(), console=console, refresh_per_second=1) as shown:
                try:
                    while True:
                        time.sleep(interval)
                        shown.update(table())
                except KeyboardInterrupt:
                    pass
            return
        show(console, table())
    elif report == "session":
        show(console, session_table(reports.session_report(reader, f, tz), tz, breakdown))
    else:
        show(console, period_table(kind, reports.periods(reader, kind, f, tz), breakdown))


def _imported(db_url: str | None, paths: tuple[str, ...], tally: Any) -> Any:
    """The store after importing ``paths`` (unchanged files are skipped), saying
    what was skipped and the import's summary line on stderr (``tally``)."""
    from ..formats.folding import fold_now, start_pass
    from ..formats.imports import Imported, Planner, import_file, import_unit
    from ..indexer import open_settled_store

    store = open_settled_store(db_url, create=True)
    units, skipped = Planner().plan(paths)
    for done in skipped:
        tally.add(done)
    # Sessions stored usage first (the report reads that), folded by a pass after.
    usage_first = not fold_now() and not store.in_memory
    for unit in units:
        try:
            if usage_first and unit.kind == "transcript":
                tally.add(import_unit(store, unit, usage_first=True))
                continue
            tally.add(import_file(store, unit.path))
        except Exception as exc:  # one file must not stop the report
            from ..errors import ClaudeTraceError, StoreError

            if isinstance(exc, StoreError) or \
                    not isinstance(exc, (ClaudeTraceError, OSError, ValueError)):
                raise  # the database refuses (so would it the others): said once
            tally.add(Imported(unit.path, unit.kind, "skipped", None, note=str(exc)))
    if usage_first:
        start_pass(store.capture_url, lambda: store)
    click.echo(tally.summary(), err=True)
    return store
