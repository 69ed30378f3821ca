"""``sessions``, ``show``, ``export``, ``import`` and ``db``: looking at the store."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing, nullcontext
from typing import IO, TYPE_CHECKING, Any, Final

import click

from ..display import for_terminal, say, short_id
from ..errors import ClaudeTraceError
from ..formats.facts import cost_text as _cost_text
from ..formats.facts import duration as _duration
from ..formats.facts import exit_text as _exit_text
from ..formats.facts import plural, session_record
from ..formats.facts import when as _when
from ._common import (
    INTERVAL,
    LIMIT,
    db_option,
    echo_json_array,
    no_empty_path,
    read_store,
    reports_errors,
    since_option_ns,
)

if TYPE_CHECKING:
    from ..sanitize import Sanitizer


@click.command()
@db_option
@click.option("--json", "as_json", is_flag=True, help="JSON (one array) for scripts.")
@click.option(
    "-n", "--limit", default=50, show_default=True, type=LIMIT,
    help="How many, newest first (0: all).",
)
@click.option("--model", "models", multiple=True, metavar="M",
              help="Only sessions of this model (repeatable: any of them).")
@click.option("--status", "statuses", multiple=True, metavar="S",
              help="Only sessions with this status: ok, error, interrupted, killed, "
                   "incomplete, running (repeatable: any of them).")
@click.option("--tag", "tags", multiple=True, metavar="K=V",
              help="Only sessions with this tag (repeatable: all of them).")
@click.option("--since", metavar="AGE|DATE",
              help="Only sessions started since then: a duration ago (2h, 7d) or an ISO date.")
@click.option("--errors", "errors_only", is_flag=True,
              help="Only sessions that failed or had a tool error (as the UI's box).")
@click.option("--search", "text", metavar="TEXT",
              help="Only sessions whose messages say TEXT (as `claudetrace search`).")
@reports_errors
def sessions(db_url: str | None, as_json: bool, limit: int, models: tuple[str, ...],
             statuses: tuple[str, ...], tags: tuple[str, ...], since: str | None,
             errors_only: bool, text: str | None) -> None:
    """List recordings, newest first (narrowed as the session browser narrows them)."""
    from ..model import STATUSES
    from ..store.browse import Filters, list_sessions
    from .record import _parse_tags

    unknown = sorted(set(statuses) - set(STATUSES))
    if unknown:
        raise click.BadParameter(f"{unknown[0]!r} is not one of {', '.join(STATUSES)}",
                                 param_hint="--status")
    filters = Filters(models=models, statuses=statuses, errors_only=errors_only,
                      tags=tuple(f"{k}={v}" for k, v in _parse_tags(tags).items()),
                      text=(text or "").strip(),
                      started_after_ns=since_option_ns(since))
    store = read_store(db_url)
    # Closed when the command ends (run in-process, a PostgreSQL connection was left open).
    click.get_current_context().call_on_close(store.close)
    say_unmatched(store, models, filters.tags)
    if filters.text:
        from .search import say_unsearched

        say_unsearched(db_url)
    if as_json:
        from ..store.links import NO_LINKS, session_links
        from ..store.listing import session_chunks
        from ..usage import summed_cost

        def records() -> Iterator[list[dict[str, Any]]]:
            # Streamed: a chunk's links are read together (its costs come with its
            # rows), and its records written before the next chunk is read.
            for chunk in session_chunks(store, filters, limit=limit or None):
                links = session_links(store, chunk)
                yield [session_record(r, links.get(r.id, NO_LINKS),
                                      summed_cost(r.usage_usd, r.usage_sources, r.usage_calls))
                       for r in chunk]

        echo_json_array(records())
        return
    recs = _with_usage(store, list_sessions(store, filters, limit=limit or None, full=True))
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from ..display import visible
    from ..pricing import NOT_YET_CELL

    console = Console(width=None if sys.stdout.isatty() else 200)
    if not recs:
        if filters != Filters():
            console.print("No recordings match.")
        else:
            console.print(Text(f"No recordings yet in {visible(str(store.url))}. "
                               "Try `claudetrace demo`."))
        return
    table = Table(box=None, header_style="bold")
    for col in (
        "id",
        "started",
        "dur",
        "status",
        "name",
        "model",
        "turns",
        "tools",
        "tokens in/out",
        "cost",
        "exit",
    ):
        table.add_column(col, no_wrap=col in ("id", "started"))
    styles = {
        "ok": "green",
        "error": "red",
        "killed": "red",
        "incomplete": "yellow",
        "interrupted": "yellow",
        "running": "cyan",
    }

    def cell(text: str | None, style: str = "") -> Text:
        # A Text is never read as markup: "[/]" in a name prints as itself.
        return Text(visible(_clip(text or "", _CELL)), style=style)

    for r in recs:
        tokens = r.input_tokens + r.cache_read_tokens + r.cache_creation_tokens
        table.add_row(
            cell(r.id),
            cell(_when(r.started_ns)),
            cell(_duration(r.duration_ns)),
            cell(r.status, styles.get(r.status, "")),
            cell(r.name),
            cell(r.model),
            # Stored usage first and not folded yet: not known yet, not 0.
            cell(NOT_YET_CELL if r.indexing else str(r.turns)),
            cell(NOT_YET_CELL if r.indexing else str(r.tool_calls)),
            cell(f"{tokens}/{r.output_tokens}"),
            cell(_cost_text(r, 4)),
            cell(_exit_text(r)),
        )
    console.print(table)


def _with_usage(store: Any, recs: list[Any]) -> list[Any]:
    """``recs`` with their costs as ``usage session`` gives them (one layer:
    :func:`claudetrace.usage.costed`)."""
    from ..store.usage import store_reader
    from ..usage import costed

    return costed(store_reader(store), recs)


#: The most of a name or model a ``sessions`` cell shows.
_CELL = 60


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@click.command()
@click.argument("session")
@db_option
@click.option(
    "--raw",
    is_flag=True,
    help="Print every line as recorded instead of a transcript (on a terminal with "
    "control characters escaped; into a pipe or file, the exact bytes).",
)
@click.option(
    "--deltas", is_flag=True, help="Include streaming deltas (stream_event) in the transcript."
)
@click.option(
    "-w",
    "--width",
    default=300,
    show_default=True,
    type=click.IntRange(min=1),
    help="Truncate long texts to this many characters.",
)
@reports_errors
def show(session: str, db_url: str | None, raw: bool, deltas: bool, width: int) -> None:
    """Summary and transcript of one recording.

    Recorded text is shown with control characters escaped (as \\x1b), so no
    escape sequence in a recording reaches the terminal; only --raw into a pipe
    or file writes the lines' exact bytes.
    """
    from ..display import visible
    from ..formats.facts import facts
    from ..formats.unfolded import whole
    from ..model import fold
    from ..store.links import links_of
    from ..terminal import Painter, wants_colour
    from ..ui.present import live

    store = read_store(db_url)
    store, rec = whole(store, store.resolve(session))
    (costed,) = _with_usage(store, [rec])
    # A running session's summary is its session model's as far as it is stored,
    # as the session browser's header and the report say it (its summary columns
    # are written at its end: they said 0 turns and no tokens).
    shown = costed if rec.status != "running" else live(
        costed, fold(store.iter_events(rec.id)))
    out = sys.stdout
    paint = Painter(wants_colour(out))
    # A label is recorded text too: a per-model row is labelled with the model's name.
    out.write("".join(f"{paint(f'{visible(key):>14}', 'bold')}  {visible(value)}\n"
                      for key, value in facts(shown, links_of(store, rec))) + "\n")
    out.flush()  # the summary is on screen before the transcript is read
    if raw:
        _show_raw(store, rec.id, out, paint)
    else:
        _show_transcript(store, rec.id, out, paint, width=width, deltas=deltas)


#: How many lines ``show`` writes at once (it flushes after each batch).
_BATCH = 2000

#: Colour of each transcript role on a terminal.
_ROLE_STYLES = {
    "user": "cyan",
    "assistant": "green",
    "tool": "yellow",
    "result": "magenta",
    "control": "blue",
    "system": "dim",
    "stderr": "red",
    "raw": "red",
}


def _show_transcript(store: Any, recording_id: str, out: Any, paint: Any, *, width: int,
                     deltas: bool) -> None:
    """The transcript, written a batch of lines at a time as the events are read."""
    from ..display import visible
    from ..model.events import Event
    from ..transcript import FOLDED, iter_entries

    if deltas:
        # Every line, as export reads them (on SQLite without SQLAlchemy's rows);
        # the transcript needs no line's wall clock nor its end of line.
        events: Iterable[Event] = (
            Event(seq, direction, t_ns, data)
            for page in store.iter_line_pages(recording_id)
            for seq, direction, t_ns, data, _eol in page)
    else:
        events = (Event(*row) for row in
                  store.iter_event_rows(recording_id, skip_types=tuple(FOLDED)))
    styles = {role: paint(f"{role:>10}", style) for role, style in _ROLE_STYLES.items()}

    # The time's style around a format: the style's codes hold no braces.
    stamp = paint("{:8.3f}", "dim").format

    def lines() -> Iterator[str]:
        for _seq, t, _direction, role, text, is_error in iter_entries(
                events, width=width, include_deltas=deltas):
            if is_error:
                shown = paint(f"{visible(role):>10}", "bold red")
            else:
                shown = styles.get(role) or paint(f"{visible(role):>10}",
                                                  _ROLE_STYLES.get(role.split()[0], ""))
            yield f"{stamp(t)} {shown} {visible(text)}\n"

    _write_batched(out, lines(), "")


def _show_raw(store: Any, recording_id: str, out: Any, paint: Any) -> None:
    """Every recorded line with its sequence number, time and direction.

    On a terminal the text is :func:`~claudetrace.terminal.visible`; into a pipe
    or a file the line's exact bytes follow the prefix (``--raw`` is the
    recording itself, for grep and friends).
    """
    from ..display import visible

    rows = store.iter_event_rows(recording_id)
    if not out.isatty():
        _write_batched(out.buffer, (
            b"%6d %9.3f %3s %s\n" % (seq, t_ns / 1e9, direction.encode(), data)
            for seq, direction, t_ns, data, _eol, _wall in rows), b"")
        return
    _write_batched(out, (
        f"{paint(f'{seq:>6} {t_ns / 1e9:9.3f} {direction:>3}', 'dim')} "
        f"{visible(data.decode('utf-8', 'replace'))}\n"
        for seq, direction, t_ns, data, _eol, _wall in rows), "")


def _write_batched(out: Any, lines: Iterable[Any], joiner: str | bytes) -> None:
    """Write ``lines`` (text or bytes, as ``joiner``) :data:`_BATCH` at a time,
    flushing after each batch: the reader sees output as it is made, and the
    stream is written a few hundred kilobytes at a time, not a line at a time."""
    batch: list[Any] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= _BATCH:
            out.write(joiner.join(batch))
            out.flush()
            batch.clear()
    out.write(joiner.join(batch))
    out.flush()


@click.command()
@click.argument("session")
@db_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["cassette", "html"]),
    default=None,
    help="cassette: NDJSON for tests and import; html: one self-contained report page "
    "[default: html for an -o FILE ending in .html or .htm, else cassette].",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True),
    callback=no_empty_path,
    default="-",
    help="File to write [default: stdout].",
)
@click.option(
    "--no-redact",
    is_flag=True,
    help="Keep secrets (API keys, tokens, passwords in lines) as recorded; "
    "by default they are redacted as the pytest plugin redacts cassettes.",
)
@reports_errors
def export(
    session: str, db_url: str | None, fmt: str | None, output: str, no_redact: bool
) -> None:
    """Write a recording as a cassette (NDJSON, version 1) or an HTML report.

    The format follows the output file's suffix (.html, .htm) unless --format
    says otherwise, and a --format that contradicts the suffix is refused.
    Secrets in the lines are redacted unless --no-redact; a file written is
    readable by its owner only.
    """
    from ..cassette import write_cassette_pages
    from ..progress import track

    fmt = export_format(fmt, output)

    from ..formats.unfolded import whole

    store = read_store(db_url)
    store, rec = whole(store, store.resolve(session))
    redactor = None if no_redact else _redactor(rec)
    if fmt == "html":
        _export_html(store, rec, output, redactor)
        return
    header = store.cassette_header(rec)
    if redactor is not None:
        header = {**redactor.value(header), "redacted": True}
    pages = _cassette_pages(store.iter_line_pages(rec.id), redactor)
    with track(pages, f"exporting {rec.id}", total=rec.event_count, unit="events",
               size=len) as shown:
        target = for_terminal(sys.stdout) if output == "-" else output
        count = write_cassette_pages(target, header, shown)
    if output == "-":
        sys.stdout.flush()
    else:
        say(f"wrote {count} events of {rec.id} to {output}", err=True)


#: Output suffixes that name a format.
_SUFFIXES: Final = {".html": "html", ".htm": "html", ".ndjson": "cassette",
                    ".jsonl": "cassette"}


def export_format(fmt: str | None, output: str) -> str:
    """The format to write ``output`` in: ``fmt``, else the one its suffix names
    (a report written as ``report.html`` was an NDJSON cassette); a format the
    suffix contradicts is a usage error."""
    implied = _SUFFIXES.get(os.path.splitext(output)[1].lower()) if output != "-" else None
    if fmt is not None and implied is not None and fmt != implied:
        raise click.UsageError(
            f"--format {fmt} contradicts the output file {output!r} (a {implied} suffix): "
            "change one of them")
    return fmt or implied or "cassette"


def _cassette_pages(pages: Iterator[Sequence[tuple[Any, ...]]], redactor: Sanitizer | None,
                    ) -> Iterator[list[str]]:
    """The cassette lines of pages of ``(seq, direction, t_ns, data, eol)``, a page
    at a time: its columns taken apart at once, its lines redacted together
    (:meth:`Sanitizer.lines`) unless no ``redactor``."""
    from ..cassette import event_lines

    for page in pages:
        seqs, directions, times, datas, eols = zip(*page, strict=True)
        if redactor is not None:
            datas = tuple(redactor.lines(datas))
        yield event_lines(seqs, directions, times, datas, eols)


def _redactor(rec: Any) -> Any:
    """The pytest plugin's record-time secret redaction (secrets only: paths stay)."""
    import os

    from ..sanitize import Sanitizer

    return Sanitizer.for_recording(environ={**os.environ, **(rec.env or {})})


def _exported_events(store: Any, rec: Any, redactor: Any = None) -> Any:
    """A recording's events (redacted by ``redactor``), with a progress bar on a
    terminal (a context manager)."""
    from ..progress import track

    events = store.iter_events(rec.id)
    if redactor is not None:
        events = map(redactor.event, events)
    return track(events, f"exporting {rec.id}", total=rec.event_count, unit="events")


def _export_html(store: Any, rec: Any, output: str, redactor: Any) -> None:
    from ..cassette import replace_file
    from ..formats.html import write_report
    from ..sanitize import Sanitizer
    from ..store.links import links_of
    from ..store.usage import store_reader
    from ..usage import counted_elsewhere, recording_totals

    # The report redacts the strings it shows, not every event; with --no-redact,
    # nothing (the report's own default is to redact).
    shown = Sanitizer(secrets=False) if redactor is None else redactor
    # Tokens and cost as `usage session` gives them (one query layer).
    reader = store_reader(store)
    usage = recording_totals(reader, rec.id)
    elsewhere = counted_elsewhere(reader, rec.id)
    links = links_of(store, rec)
    if output == "-":
        with _exported_events(store, rec) as events:
            write_report(for_terminal(sys.stdout), rec, events, redactor=shown, usage=usage,
                         links=links, elsewhere=elsewhere)
        sys.stdout.flush()
        return
    def write(out: IO[str]) -> int:
        with _exported_events(store, rec) as events:
            return write_report(out, rec, events, redactor=shown, usage=usage, links=links,
                                elsewhere=elsewhere)

    try:
        count = replace_file(output, write)
    except OSError as exc:
        raise ClaudeTraceError(f"{output}: cannot write report: {exc.strerror or exc}") from exc
    say(f"wrote the report of {rec.id} ({count} events) to {output}", err=True)


def say_unmatched(store: Any, models: tuple[str, ...], tags: tuple[str, ...]) -> None:
    """A line on stderr for each --model and --tag no recording has (a mistyped one
    must not look like no session), with what the store has; as ``usage`` says."""
    from ..store.browse import choices
    from ..store.browse import models as stored_models
    from ..store.usage import some_of

    def held(values: list[str]) -> str:
        return some_of(values) if values else "none"

    if models:
        known = stored_models(store)
        for model in models:
            if model not in known:
                say(f"claudetrace: no session used model {model!r}; the store has "
                    f"{held(known)}", err=True)
    if tags:
        pairs = choices(store)["tags"]
        for tag in tags:
            if tag not in pairs:
                say(f"claudetrace: no session is tagged {tag}; the store has {held(pairs)}",
                    err=True)


@click.command("import")
@click.argument("paths", nargs=-1, required=True, metavar="PATH…", type=click.Path(),
                callback=no_empty_path)
@db_option
@click.option("--name", help="Name for the imported recording(s).")
@click.option("--tag", "tags", multiple=True, metavar="K=V", help="Tag (repeatable).")
@click.option(
    "--watch",
    is_flag=True,
    help="Keep importing transcripts that appear or grow under PATH… (Ctrl-C to stop).",
)
@click.option(
    "--interval", default=2.0, show_default=True, type=INTERVAL,
    help="Seconds between looks with --watch.",
)
@click.option(
    "--wait", is_flag=True,
    help="Index each session before returning (by default a session's usage is stored "
    "first and the rest is indexed by a process in the background).",
)
@reports_errors
def import_(
    paths: tuple[str, ...],
    db_url: str | None,
    name: str | None,
    tags: tuple[str, ...],
    watch: bool,
    interval: float,
    wait: bool,
) -> None:
    """Store cassettes, Claude Code transcripts and claude-trace logs; prints each
    recording's id.

    PATH is a cassette, a Claude Code session transcript, a claude-trace log, or
    a folder of them, such as ~/.claude/projects (all your Claude Code
    sessions) or one project's folder in it.  The format is told by content; a
    session's subagents are read with it, in every layout Claude Code has
    written.  A file that is none of these is skipped, saying what it seems to
    be; a damaged line is skipped and counted.  Importing a transcript or log
    again skips it when unchanged and updates its recording when it grew (one
    now shorter is reported and left as stored); --watch keeps doing so as they
    are written.  The last line sums up; the exit status is 1 when anything was
    skipped, or when PATH holds nothing to import (said so, with where Claude
    Code keeps its transcripts).
    """
    import os
    from pathlib import Path

    from ..config import plain_file, plain_name, resolve_url
    from ..formats.folding import fold_now, start_pass
    from ..formats.imports import (
        Converting,
        ImportFormatError,
        Planner,
        in_parallel,
        stored_in_file,
        stored_peeks,
        stored_sessions,
        there,
    )
    from ..formats.owner import sweep_spools
    from .record import _parse_tags

    parsed_tags = _parse_tags(tags)
    url = resolve_url(db_url)
    # Spool folders that killed imports left behind go now, whatever this one
    # does (a listing of the temporary folder when there are none).
    sweep_spools()
    opened: list[Any] = []

    def store() -> Any:
        """The store, opened (and settled) when first needed: cassettes written
        by the writer into a database that is there need none (nor SQLAlchemy)."""
        if not opened:
            # Here: an unchanged tree needs no store, nor the indexer's imports.
            from ..indexer import open_settled_store

            opened.append(open_settled_store(db_url, create=True))
        return opened[0]

    usage_first = not (wait or fold_now() or url == "sqlite://")
    if usage_first:
        # A new SQLite file is made from the schema's script (no Alembic, no
        # SQLAlchemy): its sessions are then written by the plain batch.
        from ..store.schema import make_if_new

        make_if_new(url)
    # What the store holds already, read first, in one query: an unchanged file
    # is then planned without being opened.  A SQLite file is read straight
    # (no SQLAlchemy); a server database through the store, which its import
    # opens anyway.
    index = stored_in_file(url)
    if index is None and not url.startswith("sqlite"):
        index = stored_sessions(url, store)
    planner = Planner(stored=stored_peeks(index))
    # Watched, a path not there yet is said by the watcher, once, and waited for.
    try:
        units, skipped = planner.plan(there(paths) if watch else paths)
    except ClaudeTraceError:
        if not watch:
            raise
        units, skipped = [], []  # the watcher's first look says why, once, and goes on
    # One file named: what is wrong with it is the command's one-line error.
    single = len(paths) == 1 and not os.path.isdir(paths[0]) and not watch
    if single and skipped and skipped[0].path == Path(paths[0]).expanduser():
        raise ImportFormatError(skipped[0].note)  # (not a folder of its subagents')
    from .. import capture as cap

    # Into a SQLite file not made yet (nothing in it to compare with), the
    # sessions' conversion starts first: it runs beside the file's migrations.
    sessions = [u for u in units if u.kind != "cassette"]
    new_file = plain_name(url)
    converting = Converting.start(sessions) if (
        new_file is not None and not new_file.exists() and in_parallel(sessions)
        and not usage_first) else None
    # A cassette's events are written by a process of its own, beside the
    # reading; started first, so its start-up runs beside ours (none without one).
    started: Any = None
    if any(u.kind == "cassette" for u in units):
        from ..indexer import writer_for
        from ..store.writer import WriterProcess

        started = WriterProcess(url, writer_for(db_url))
    tally = Tally()
    for done in skipped:
        tally.add(done)
    with closing(started) if started is not None else nullcontext(), \
            converting if converting is not None else nullcontext():
        if url.startswith("sqlite") and plain_file(url) is None:
            store()  # a file to make, or a database in memory: opened first, as ever
        # A database in memory is one per process: the writer's would be another.
        writer = None if opened and opened[0].in_memory else started
        _import_units(units, store, writer, name, parsed_tags, tally, url, single, converting,
                      index, usage_first)
        if not opened and not cap.nothing_to_settle(url):
            store()  # stores the finished sessions still waiting, as every command does
    if usage_first:
        # Whenever the store holds sessions not folded yet and no pass is running
        # (one killed, failed, or never started): what this import stored or not.
        start_pass(url, store)
    elif wait and (opened or plain_name(url) is None or plain_file(url) is not None):
        from ..formats.unfolded import fold_all

        fold_all(store())  # those earlier imports stored usage first too
    click.echo(tally.summary(), err=True)
    if not units and not watch:
        # Nothing there to import: a wrong folder, most likely (--watch waits for
        # transcripts to appear).
        say(f"claudetrace: no Claude Code transcript, cassette or claude-trace log in "
            f"{', '.join(paths)} (Claude Code keeps its transcripts in ~/.claude/projects)",
            err=True)
        raise SystemExit(1)
    if watch:
        said = {(done.path, done.note) for done in skipped}
        _watch(store(), paths, interval, planner, name, parsed_tags, said, usage_first)
    if tally.skipped or tally.damage:
        raise SystemExit(1)


def _import_units(units: Sequence[Any], store: Any, writer: Any, name: str | None,
                  tags: dict[str, str], tally: Tally, url: str, single: bool,
                  converting: Any = None, index: Any = None, usage_first: bool = False) -> None:
    from ..config import plain_file
    from ..errors import ClaudeTraceError, StoreError
    from ..formats.imports import (
        Imported,
        ImportFormatError,
        import_cassette_file,
        import_units,
        stored_sessions,
    )
    from ..progress import track

    cassettes = [u for u in units if u.kind == "cassette"]
    converted = [u for u in units if u.kind != "cassette"]
    # One file shows its own bar (its events); several, one bar over them.
    bar = track(units, "importing", total=len(units), unit="files")
    with bar if len(units) > 1 else nullcontext(iter(units)) as shown:
        done: Any
        for unit in itertools.islice(shown, len(cassettes)):
            try:
                done = import_cassette_file(store, unit.path, name=name, tags=tags,
                                            writer=writer, url=url)
            except ClaudeTraceError as exc:
                if single or isinstance(exc, StoreError):
                    raise  # the file named, or the database refuses (so would it the others)
                done = Imported(unit.path, unit.kind, "skipped", None, note=str(exc))
                writer = None  # closed taking the half cassette back: the store writes
            tally.add(done)
        if not converted:
            return
        # What is stored already, in one look (an unchanged session opens nothing).
        if index is None:
            index = stored_sessions(url, store)
        for done, unit, _shown in zip(import_units(store, converted, name=name, tags=tags,
                                                   index=index, converting=converting,
                                                   usage_first=usage_first,
                                                   plain=plain_file(url) if usage_first
                                                   else None),
                                      converted, shown, strict=False):
            if single and done.action == "skipped":
                raise ImportFormatError(done.note)
            tally.add(done)
            tally.joined(done, unit)


class Tally:
    """What an import did, said a line for each thing (on stderr, the ids on stdout)
    and summed up at the end."""

    def __init__(self, *, each: bool = True) -> None:
        #: Say each file imported (and its id on stdout); else only what was skipped.
        self.each = each
        self.counts: dict[str, int] = {}
        self.skipped = 0
        self.damage = 0
        self.folded = 0
        self.together = 0

    def add(self, done: Any) -> None:
        self.counts[done.action] = self.counts.get(done.action, 0) + 1
        self.damage += done.damage
        self.folded += len(done.folded)
        what = f"session {short_id(str(done.session_id))}" if done.kind == "transcript" else (
            f"recording {done.recording_id}")
        if done.action == "skipped":
            self.skipped += 1
            note = done.note.removeprefix(f"{done.path}: ")
            say(f"{done.path}: skipped: {note}", err=True)
        elif done.action == "truncated":
            self.skipped += 1
            say(f"{done.path}: not updated: {done.note}", err=True)
        elif not self.each:
            return
        elif done.action == "unchanged":
            extra = f" ({done.note})" if done.note else ""
            say(f"{done.path}: unchanged, recording {done.recording_id}{extra}", err=True)
            if done.kind == "cassette":  # its id, as when it was imported
                click.echo(done.recording_id)
        else:
            extra = f" ({done.note})" if done.note else ""
            if done.kind != "cassette" or done.action != "imported":
                say(f"{done.path}: {done.action} {what}{extra}", err=True)
            click.echo(done.recording_id)

    def joined(self, done: Any, unit: Any) -> None:
        """A line for each further main file of a session (a resumed session's, a copy):
        its entries are the recording's of the session named first, not one of its own."""
        if done.kind != "transcript" or done.action in ("skipped", "truncated") or (
                unit.files is None):
            return
        for path in unit.files.mains[1:]:
            self.together += 1
            say(f"{path}: part of session {short_id(str(done.session_id))}, with {unit.path} (one "
                "conversation: the same session id, or the same first entry)", err=True)

    def summary(self) -> str:
        order = ("imported", "updated", "unchanged", "truncated", "skipped")
        said = ", ".join(f"{self.counts.get(a, 0)} {a}" for a in order
                         if self.counts.get(a) or a in ("imported", "updated", "unchanged"))
        if self.damage:
            said += f"; {plural(self.damage, 'damaged line')} skipped"
        if self.together:
            said += f"; {plural(self.together, 'file')} joined to another file's session"
        if self.folded:
            said += (f"; {plural(self.folded, 'earlier recording')} of resumed sessions "
                     "folded in")
        return f"import: {said}"


def _watch(store: Any, paths: tuple[str, ...], interval: float, planner: Any,
           name: str | None, tags: dict[str, str], said: set[Any],
           usage_first: bool = False) -> None:
    import time

    from ..formats.imports import Watcher

    watcher = Watcher(store, paths, name=name, tags=tags)
    watcher.planner = planner
    watcher.said = said  # the files skipped already said so
    watcher.usage_first = usage_first
    tally = Tally()

    def failed(path: Any, exc: Exception) -> None:
        said = str(exc).removeprefix(f"{path}: ")  # a transcript's error names it already
        say(f"claudetrace: {path}: {said}", err=True)

    def back(path: Any) -> None:
        say(f"claudetrace: {path}: found again, watching", err=True)

    say(f"watching {', '.join(paths)} (Ctrl-C to stop)", err=True)
    try:
        while True:
            watcher.poll(tally.add, failed, back)
            time.sleep(interval)
    except KeyboardInterrupt:
        pass


@click.group()
def db() -> None:
    """Manage the database."""


@db.command("upgrade")
@db_option
@reports_errors
def db_upgrade(db_url: str | None) -> None:
    """Apply the Alembic migrations (the store also does this on first use)."""
    from ..config import resolve_url
    from ..store.engine import create_store_engine, head_revision, shown_url, upgrade

    url = resolve_url(db_url)
    engine = create_store_engine(url)
    before = upgrade(engine, only_if_needed=False)
    head = head_revision()
    shown = shown_url(engine.url)
    if before == head:
        say(f"{shown}: already at revision {head}")
    else:
        say(f"{shown}: upgraded from {before or 'empty'} to {head}")
    from ..formats.imports import older_imports
    from ..store import open_store

    store = open_store(db_url, create=False)
    try:
        older = older_imports(store)
    finally:
        store.close()
    if older:
        # The store keeps the events an import made, not the files: nothing here
        # can read them again as this version would.
        say(f"{plural(older, 'recording')} imported by an older claudetrace: status, "
            "tokens and cost as it read the files; `claudetrace import` the files again "
            "to refresh them (Claude Code deletes its transcripts after 30 days)")


@db.command("url")
@db_option
@reports_errors
def db_url_cmd(db_url: str | None) -> None:
    """Print the database URL claudetrace would use (its password hidden).

    A SQLite file named by --db / $CLAUDETRACE_DB that does not exist is an
    error naming it, as for the commands that read it.
    """
    from ..config import database_named, resolve_url
    from ..store.engine import hide_password, require_database

    url = resolve_url(db_url)
    if database_named(db_url):
        require_database(url)
    say(hide_password(url))


@db.command("pack")
@db_option
@reports_errors
def db_pack(db_url: str | None) -> None:
    """Pack the lines of every ended recording not packed yet.

    A proxied recording's lines are packed (zstd against a dictionary the store
    keeps) by its indexer once it is listed complete; imported recordings, and
    any whose packing was cut short, are packed here.  Reads give every line
    back byte for byte either way.

    Also folds the Stats page's latency samples of every ended recording stored
    without them (by an earlier version, or cut short), a batch of recordings a
    short transaction, so that the page's first look folds none.
    """
    from ..config import resolve_url
    from ..store import open_store
    from ..telemetry.latency import catch_up

    resolve_url(db_url)  # an in-memory database is refused, as by every command
    store = open_store(db_url, create=False)
    try:
        rows = store.pack_lines()
        folded = catch_up(store)
        # The space the packed lines freed: SQLite shrinks its file, PostgreSQL
        # makes the dead row versions reusable (a plain VACUUM) and builds a
        # loose events' key again, as prune does.
        from ..store.retention import give_back_space

        give_back_space(store)
    finally:
        store.close()
    say(f"{rows} lines looked at")
    if folded:
        say(f"latency samples of {folded} recordings folded for the Stats page")
