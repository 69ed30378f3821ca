"""``tail``: a running session in the terminal, as it happens."""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from ..errors import SessionNotFound
from ._common import db_option, read_store, reports_errors

#: Colour of each kind of line on a terminal (pipes get plain text).
_STYLES = {
    "prompt": "cyan",
    "tool": "yellow",
    "model": "magenta",
    "permission": "dark_orange",
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
    "--interval", default=0.2, show_default=True, help="Seconds between looks at the store."
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
    from ..tail import TailFold, next_session, raw_line
    from ..tail import follow as follow_events
    from ..terminal import Painter, visible, wants_colour

    store = read_store(db_url)
    paint = Painter(wants_colour(sys.stdout))

    def show(text: str, style: str = "") -> None:
        # Whatever a recording holds, no control sequence of it reaches the terminal.
        sys.stdout.write(paint(visible(text), style) + "\n")
        sys.stdout.flush()

    launched = time.time_ns()

    def session_of(query: str | None, seen: set[str]) -> Any:
        if query is not None:
            return store.resolve(query)
        rec = next_session(store, started_after_ns=launched if follow else None, skip=seen)
        if rec is None and not follow:
            raise SessionNotFound(
                "no session is running (name one, e.g. `claudetrace tail latest`, "
                "or wait for the next with --follow)",
                query="",
            )
        return rec

    seen: set[str] = set()
    try:
        while True:
            rec = session_of(session, seen)
            if rec is None:
                time.sleep(interval)
                continue
            seen.add(rec.id)
            title = rec.name or rec.cli_session_id or rec.id
            show(f"── {rec.id} {title} ({rec.status})", "bold")
            fold = TailFold(rec.info())

            def on_event(event: Any, fold: TailFold = fold, started: int = rec.started_ns) -> None:
                if raw:
                    colour = {"in": "cyan", "out": "", "err": "red"}[event.direction]
                    show(raw_line(event, started), colour)
                    return
                for line in fold.feed(event):
                    style = "red" if line.status == "error" else _STYLES.get(line.kind, "")
                    show(f"{line.t:9.3f}s  {line.kind:<10} {line.text}", style)

            ended = follow_events(store, rec.id, on_event, poll_s=interval)
            if not raw:
                for line in fold.close(ended.info()):
                    style = "red" if line.status == "error" else _STYLES.get(line.kind, "")
                    show(f"{line.t:9.3f}s  {line.kind:<10} {line.text}", style)
            show(f"── {rec.id} {ended.status}", "bold")
            sys.stdout.flush()
            if not follow or session is not None:
                return
    except KeyboardInterrupt:
        pass
    finally:
        store.close()
