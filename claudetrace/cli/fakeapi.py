"""``claudetrace fakeapi``: the scripted fake Anthropic API as a server of its own."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING

import click

from ._common import no_empty_path, reports_errors

if TYPE_CHECKING:
    from ..testing.fakeapi import Ids


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=0, help="Port [default: any free one]."
)
@click.option(
    "--script",
    "script_path",
    type=click.Path(dir_okay=False),
    callback=no_empty_path,
    metavar="FILE",
    help="JSON script: replies chosen by prompt regex (see claudetrace.testing.script).",
)
@click.option(
    "--fallback",
    metavar="TEXT",
    help="Answer prompts no rule matches with this text [default: an error naming the request].",
)
@click.option(
    "--ids",
    type=click.Choice(["session", "sequence"]),
    default="session",
    show_default=True,
    help="Number message ids per CLI session (msg_fake_<8 hex of the session>_00000), "
    "or in one sequence for the server's life (msg_fake_00000).",
)
@reports_errors
def fakeapi(host: str, port: int, script_path: str | None, fallback: str | None, ids: Ids) -> None:
    """Serve a fake Anthropic Messages API until interrupted, for recording without a key.

    Prints `ANTHROPIC_BASE_URL=URL` on its first line; point the CLI there (with any
    ANTHROPIC_API_KEY).  Replies are streamed like the real API's, with message ids
    deterministic per CLI session and unique across sessions (usage counts a message
    id once across a store), and deterministic usage.
    """
    from ..testing.fakeapi import FakeAPI, text
    from ..testing.script import Script, load_script

    script = load_script(script_path) if script_path else Script([])
    default = text(fallback) if fallback is not None else script.fallback
    stop = threading.Event()

    def finish(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGINT, finish)
    try:
        api = FakeAPI(fallback=default, host=host, port=port, ids=ids)
    except OSError as exc:
        raise click.ClickException(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from None
    api.rules = list(script.rules)
    with api:
        click.echo(f"ANTHROPIC_BASE_URL={api.url}")
        stop.wait()
    click.echo(f"fake API: answered {len(api.requests)} request(s)", err=True)
