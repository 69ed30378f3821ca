"""``claudetrace prune``: delete old recordings, safely while proxies record."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..formats.facts import when as _when
from ._common import db_option, fail, read_store, reports_errors
from .record import _parse_tags


def _can_ask() -> bool:
    """Whether a person can be asked (stdin is a terminal)."""
    return sys.stdin.isatty()


@click.command()
@db_option
@click.option("--older-than", metavar="AGE",
              help="Recordings started before this long ago (30d, 12h, 2w) or before an "
                   "ISO date.")
@click.option("--tag", "tags", multiple=True, metavar="K=V",
              help="Recordings with this tag (repeatable: all of them).")
@click.option("--name", help="Recordings with this name.")
@click.option("--source", help="Recordings from this source (proxy, import, transcript…).")
@click.option("--dry-run", is_flag=True, help="List what would be deleted; delete nothing.")
@click.option("--yes", "-y", is_flag=True, help="Delete without asking.")
@reports_errors
def prune(db_url: str | None, older_than: str | None, tags: tuple[str, ...],
          name: str | None, source: str | None, dry_run: bool, yes: bool) -> None:
    """Delete recordings (never one still running), then give the space back.

    The conditions given must all hold.  The count is printed first, and the
    deletion asked for unless --yes.  Deleting goes in short transactions, so
    proxies recording meanwhile are stored as usual.
    """
    from ..display import plural, visible
    from ..store.retention import Criteria, give_back_space, matching
    from ..store.retention import prune as delete
    from ..telemetry.backfill import parse_since

    before = None if older_than is None else parse_since(older_than, option="--older-than")
    criteria = Criteria(started_before_ns=before, tags=_parse_tags(tags), name=name,
                        source=source)
    if not criteria.given():
        fail("prune needs --older-than, --tag, --name or --source", 2)
    store = read_store(db_url)
    try:
        _say_unmatched(store, criteria)
        found = matching(store, criteria)
        running = (f"; {found.running} still running or being imported, left alone"
                   if found.running else "")
        click.echo(f"{plural(len(found.recordings), 'recording')} ({found.events} events, "
                   f"{found.bytes / 1e6:.1f} MB of lines) match{running}")
        if dry_run:
            for rec in found.recordings:
                # The name is recorded text (a tag, a session's own title): escaped.
                click.echo(f"  {visible(rec.id)}  {_when(rec.started_ns)}"
                           f"  {rec.event_count:>9} events  {visible(rec.name or '')}")
            return
        if not found.recordings:
            return
        if not yes:
            if not _can_ask():
                fail("not deleting without a terminal to ask on: add --yes", 2)
            click.confirm(f"Delete {len(found.recordings)} recordings?", abort=True)
        # Each is looked at again before it is deleted: a session that came back
        # to life while the user answered (or the prune ran) is left alone.
        done = delete(store, [r.id for r in found.recordings])
        click.echo(f"deleted {plural(done.recordings, 'recording')} ({done.events} events) in "
                   f"{done.transactions} transactions (longest {done.longest_s:.3f} s)")
        if done.revived:
            click.echo(f"{plural(done.revived, 'recording')} written again while the prune "
                       "ran, left alone")
        space = give_back_space(store)
        if space.note:
            click.echo(space.note)
    finally:
        store.close()


def _say_unmatched(store: Any, criteria: Any) -> None:
    """A line on stderr for a --source or --tag no recording has (a mistyped one must
    not look like nothing old enough to delete), with what the store has; as
    ``sessions`` and ``usage`` say."""
    from ..store.browse import choices
    from ..store.usage import some_of
    from .browse import say_unmatched as say_tags_unmatched

    say_tags_unmatched(store, (), tuple(f"{k}={v}" for k, v in criteria.tags.items()))
    if criteria.source is not None:
        sources = choices(store)["sources"]
        if criteria.source not in sources:
            click.echo(f"claudetrace: no recording came from source {criteria.source!r}; the "
                       f"store has {some_of(sources) if sources else 'none'}", err=True)
