"""``claudetrace search``: text in every stored session, through the word index."""

from __future__ import annotations

import datetime as dt
import json

import click

from ..formats.facts import when as _when
from ._common import db_option, read_store, reports_errors


@click.command()
@click.argument("text")
@db_option
@click.option("-n", "--limit", default=50, show_default=True,
              help="How many lines at most, the newest stored first (0: all).")
@click.option("--json", "as_json", is_flag=True, help="JSON (one array) for scripts.")
@reports_errors
def search(text: str, db_url: str | None, limit: int, as_json: bool) -> None:
    """Lines of every session whose messages, tool calls or results say TEXT.

    Case is ignored and TEXT's words are found from their beginnings ("hel"
    finds "hello", not "shell").  Each line found is printed with its session,
    its sequence number and the text around the match.
    """
    from ..display import visible
    from ..store.search import search as find

    store = read_store(db_url)
    try:
        hits = find(store, text, limit=limit or None)
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps([{
            "recording_id": h.recording_id,
            "seq": h.seq,
            "direction": h.direction,
            "type": h.type,
            "name": h.name,
            "started_at": dt.datetime.fromtimestamp(h.started_ns / 1e9,
                                                    dt.timezone.utc).isoformat(),
            "snippet": h.snippet,
        } for h in hits], indent=2))
        return
    if not hits:
        click.echo(f"nothing says {visible(text)!r}", err=True)
        raise SystemExit(1)
    for h in hits:
        click.echo(f"{h.recording_id}  {_when(h.started_ns)}  #{h.seq:<6} {h.type or '':<9} "
                   f"{visible(h.name or '')}  {visible(h.snippet)}")
