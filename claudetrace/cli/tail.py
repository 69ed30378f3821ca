"""``tail``: a running session in the terminal, as it happens."""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from ..errors import SessionNotFound
from ._common import INTERVAL, db_option, read_store, reports_errors

#: Colour of each kind of line on a terminal (pipes get plain text).
_STYLES = {
    "prompt": "cyan",
    "tool": "yellow",
    "model": "magenta",
    "permission": "dark_orange",
    "state": "dark_orange",
    "hook": "olive",
    "mcp": "blue",
    "control": "blue",
    "subagent": "cyan",
    "turn": "bold",
    "session": "bold",
    "stderr": "red",
}


@click.command("tail")
@click.argument("session", required=False)
@db_option
@click.option(
    "-f",
    "--follow",
    is_flag=True,
    help="When the session ends, wait for the next one (Ctrl-C to stop).",
)
@click.option("--raw", is_flag=True, help="The recorded lines themselves, with time and direction.")
@click.option(
    "--interval", default=0.2, show_default=True, type=INTERVAL,
    help="Seconds between looks at the store.",
)
@reports_errors
def tail(session: str | None, db_url: str | None, follow: bool, raw: bool, interval: float) -> None:
    """Show a running session as it happens: turns, model calls, tool calls with their
    duration and outcome, permission waits, hook and MCP round trips, running tokens
    and cost.

    SESSION defaults to the newest running session; with --follow, tail waits for
    one to start and, after each session, for the next.  Output has no colours or
    control codes when it is not a terminal.
    """
    from ..display import visible
    from ..tail import TailFold, next_session, raw_line
    from ..tail import follow as follow_events
    from ..terminal import Painter, wants_colour

    store = read_store(db_url)
    paint = Painter(wants_colour(sys.stdout))

    def show(text: str, style: str = "") -> None:
        # Whatever a recording holds, no control sequence of it reaches the terminal.
        sys.stdout.write(paint(visible(text), style) + "\n")
        sys.stdout.flush()

    launched = time.time_ns()

    def session_of(query: str | None) -> Any:
        if query is not None:
            from ..formats.unfolded import whole

            nonlocal store  # folded in memory when the store cannot be written
            store, rec = whole(store, store.resolve(query))
            return rec
        rec = next_session(store, started_after_ns=launched if follow else None, shown=shown)
        if rec is None and not follow:
            raise SessionNotFound(
                "no session is running (name one, e.g. `claudetrace tail latest`, "
                "or wait for the next with --follow)",
                query="",
            )
        return rec

    def show_lines(lines: list[Any]) -> None:
        for line in lines:
            style = "red" if line.status == "error" else _STYLES.get(line.kind, "")
            show(f"{line.t:9.3f}s  {line.kind:<10} {line.text}", style)

    #: Events shown of each recording: one that grows again (a transcript that
    #: `import --watch` brings up to date) is taken up where it was left.
    shown: dict[str, int] = {}
    waiting = False
    try:
        while True:
            rec = session_of(session)
            if rec is None:
                if not waiting:
                    click.echo("claudetrace tail: waiting for the next session (Ctrl-C to stop)",
                               err=True)
                    waiting = True
                time.sleep(interval)
                continue
            waiting = False
            start = shown.get(rec.id, 0)
            title = rec.name or rec.cli_session_id or rec.id
            again = f", from line {start}" if start else ""
            show(f"── {rec.id} {title} ({rec.status}{again})", "bold")
            fold = TailFold(rec.info())
            for event in store.iter_events(rec.id, limit=start) if start else ():
                fold.feed(event)  # what was shown before: the running totals go on

            def on_event(event: Any, fold: TailFold = fold, rid: str = rec.id,
                         started: int = rec.started_ns) -> None:
                shown[rid] = event.seq + 1
                if raw:
                    colour = {"in": "cyan", "out": "", "err": "red"}[event.direction]
                    show(raw_line(event, started), colour)
                    return
                show_lines(fold.feed(event))

            ended = follow_events(store, rec.id, on_event, poll_s=interval, start_seq=start)
            shown.setdefault(rec.id, start)
            if not raw:
                show_lines(fold.close(ended.info()))
            show(f"── {rec.id} {ended.status}", "bold")
            sys.stdout.flush()
            if not follow or session is not None:
                return
    except KeyboardInterrupt:
        pass
    finally:
        store.close()
