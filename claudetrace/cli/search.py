"""``claudetrace search``: text in every stored session, through the word index."""

from __future__ import annotations

import datetime as dt

import click

from ..display import when as _when
from ..store.search import Hit
from ._common import LIMIT, db_option, echo_json, read_store, reports_errors


@click.command()
@click.argument("text")
@db_option
@click.option("-n", "--limit", default=50, show_default=True, type=LIMIT,
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

    hits = _find(db_url, text, limit or None)
    say_unsearched(db_url)
    if as_json:
        echo_json([{
            "recording_id": h.recording_id,
            "seq": h.seq,
            "direction": h.direction,
            "type": h.type,
            "name": h.name,
            "started_at": dt.datetime.fromtimestamp(h.started_ns / 1e9,
                                                    dt.timezone.utc).isoformat(),
            "snippet": h.snippet,
        } for h in hits])
        return
    if not hits:
        click.echo(f"nothing says {visible(text)!r}", err=True)
        raise SystemExit(1)
    for h in hits:
        click.echo(f"{h.recording_id}  {_when(h.started_ns)}  #{h.seq:<6} {h.type or '':<9} "
                   f"{visible(h.name or '')}  {visible(h.snippet)}")


def say_unsearched(db_url: str | None) -> None:
    """Say on stderr how many imported sessions a search of the database ``db_url``
    does not read yet (stored usage first, not folded: no search words yet)."""
    from ..config import resolve_url
    from ..display import plural
    from ..store.waiting import count_plain

    waiting = count_plain(resolve_url(db_url))
    if waiting:
        click.echo(f"{plural(waiting, 'imported session')} still being indexed: their lines "
                   "are not searched yet", err=True)


def _find(db_url: str | None, text: str, limit: int | None) -> list[Hit]:
    """The lines saying ``text``: asked of the database through its driver alone
    (:func:`~claudetrace.store.search.search_plain`: no SQLAlchemy, a new process
    answers in its start-up's time and the query's) when no finished recording
    waits in a capture file to be stored first; else, or where the plain path
    does not serve (another URL, an older schema), through the store, as every
    read command opens it (:func:`read_store`)."""
    from .. import capture as cap
    from ..config import resolve_url
    from ..store.search import search, search_plain

    url = resolve_url(db_url)
    if cap.nothing_to_settle(url):
        hits = search_plain(url, text, limit=limit)
        if hits is not None:
            return hits
    store = read_store(db_url)
    try:
        return search(store, text, limit=limit)
    finally:
        store.close()
