"""``claudetrace demo``: record a shipped session through the proxy, offline."""

from __future__ import annotations

import click

from ._common import db_option, reports_errors


@click.command()
@db_option
@reports_errors
def demo(db_url: str | None) -> None:
    """Record a real (shipped) Claude Code session through the proxy, offline.

    Runs `claudetrace proxy` with `claudetrace replay` of a small session recorded
    from Claude Code as the child, plays the host's side of it, and leaves the
    recording in the database. No API key, no network.
    """
    from ..config import resolve_url
    from ..demo import DEMO_CASSETTE, next_steps, run_demo
    from ..store.engine import hide_password

    click.echo(f"Replaying {DEMO_CASSETTE.name} (an SDK MCP tool call) through the proxy…")
    result = run_demo(db_url)
    click.echo(
        f"Recorded session {result.recording_id}: {result.events} lines "
        f"({result.sent} from the host, {result.received} from the CLI) "
        f"into {hide_password(resolve_url(db_url))}"
    )
    click.echo("\nWhat next:")
    for command in next_steps(result.recording_id, db_url):
        click.echo(f"  {command}")
