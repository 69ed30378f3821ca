"""``doctor``: what the store could not take, and putting it back in line."""

from __future__ import annotations

from typing import Any

import click

from ..display import say
from ..formats.owner import importing_elsewhere
from ..store.unfolded import pending
from ._common import db_option, read_store, reports_errors


@click.command()
@db_option
@click.option(
    "--retry",
    "retry",
    multiple=True,
    metavar="ID",
    help="Put the capture of this recording back in line and store it now (repeatable; "
    "`all` for every one).",
)
@reports_errors
def doctor(db_url: str | None, retry: tuple[str, ...]) -> None:
    """List recordings the store could not take (captures set aside, and why).

    A capture file the database refused after the indexer's retries, or one
    that is damaged, is set aside beside the others (``….capture.failed`` or
    ``….capture.damaged``) and never tried again by itself; its recording, if
    any of it was stored, is marked incomplete.  A cassette whose import was
    stopped before its end (killed) is listed as half imported.  Exit status 1
    while any is set aside or half imported, so scripts can check.  One whose
    import is still running is listed as being imported by its process (host),
    and does not change the exit status.

    Recordings that lost bytes (forwarded to the CLI or the host but never
    written to the capture, as on a full disk) are listed too, for
    information: what they hold is stored and cannot be completed, so they do
    not change the exit status.
    """
    from .. import capture as cap
    from ..config import resolve_url
    from ..errors import ClaudeTraceError, StoreError

    url = resolve_url(db_url)
    if retry:
        wanted = {r.upper() for r in retry}
        # A mistyped id is said (as typed), before any capture is put back in line.
        kept = {i.recording_id.upper() for i in cap.set_aside_files(url)}
        unknown = sorted({r for r in retry if r.upper() not in kept | {"ALL"}})
        if unknown:
            raise ClaudeTraceError(f"no capture set aside for {', '.join(unknown)} "
                                   "(`claudetrace doctor` lists them)")
        for item in cap.set_aside_files(url):
            if "ALL" in wanted or item.recording_id.upper() in wanted:
                say(f"retrying {item.recording_id}", err=True)
                cap.restore(item)
    lossy: list[Any] = []
    halves: list[Any] = []
    unfolded: list[str] = []
    try:
        # Opening it stores what waits (the retried captures among them).
        store = read_store(db_url)
        try:
            lossy = store.lossy_recordings()
            halves = store.half_imported()
            unfolded = pending(store)
        finally:
            store.close()
    except StoreError as exc:
        # A database that cannot be opened (missing, refusing) may be why
        # captures were set aside: list them; with none, it is the answer.
        if not cap.set_aside_files(url):
            raise
        say(f"claudetrace: {exc}", err=True)
    for rec in lossy:
        # More than the proxy's exit line counts (the bytes it could not write):
        # the rest of each line a gap cut is not stored either.
        say(f"{rec.id}  incomplete: {rec.lost_bytes} bytes not stored (forwarded but not "
            "recorded, with the rest of each line a gap cut: a full disk?); the rest is stored")
    stopped = []
    for rec in halves:
        # One still being imported is said as such: nothing to do but wait.
        owner: Any = (rec.extra or {}).get("importer")
        if importing_elsewhere(owner):
            click.echo(f"{rec.id}  being imported by process {owner['pid']} "
                       f"({owner.get('host')})")
            continue
        stopped.append(rec)
        click.echo(f"{rec.id}  half imported: a cassette's import stopped before its end "
                   f"(killed?); import the cassette again")
    for rid in unfolded:
        # Its usage is stored; its events, tools and search words come with the
        # pass an import starts (or a reader that folds it first).
        click.echo(f"{rid}  still being indexed: imported usage first, not folded yet "
                   "(`claudetrace show` it to fold it now)")
    if unfolded:
        from ..display import plural
        from ..formats.folding import last_said, pass_running

        if pass_running(url):
            click.echo(f"{plural(len(unfolded), 'session')} still being indexed: "
                       "a pass is folding them now")
        else:
            # Killed, failed, or never started (CLAUDETRACE_FOLD=later): the next
            # import starts one; --wait folds them before it returns.
            said = last_said(url)
            click.echo(f"{plural(len(unfolded), 'session')} still being indexed and no pass "
                       "folding them: `claudetrace import --wait PATH` (any folder, such as "
                       "~/.claude/projects) folds them all now"
                       + (f"; the last pass said: {said}" if said else ""))
    waiting = [p for p in cap.capture_files(url) if not cap.writer_alive(p)]
    aside = cap.set_aside_files(url)
    for item in aside:
        say(f"{item.recording_id}  set aside ({item.size} bytes): {item.reason}")
        say(f"    {item.path}")
    if waiting:
        click.echo(f"{len(waiting)} finished recording(s) still waiting to be stored "
                   "(the next command that can write the database stores them)")
    if not aside and not waiting:
        click.echo("nothing set aside: every finished recording is stored"
                   + (" (some with bytes lost, above)" if lossy else ""))
    if aside or stopped:
        raise SystemExit(1)

