"""The ``claudetrace`` click group: each command imported from its module on first use."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import click

from .._version import __version__
from ..display import visible_lines

#: command name -> "module:attribute" of its click command, loaded on first use.
COMMANDS: dict[str, str] = {
    "proxy": "claudetrace.cli.record:proxy",
    "shim": "claudetrace.cli.record:shim",
    "sessions": "claudetrace.cli.browse:sessions",
    "show": "claudetrace.cli.browse:show",
    "export": "claudetrace.cli.browse:export",
    "import": "claudetrace.cli.browse:import_",
    "db": "claudetrace.cli.browse:db",
    "doctor": "claudetrace.cli.doctor:doctor",
    "prune": "claudetrace.cli.prune:prune",
    "search": "claudetrace.cli.search:search",
    "replay": "claudetrace.cli.replay:replay",
    "demo": "claudetrace.cli.demo:demo",
    "fakeapi": "claudetrace.cli.fakeapi:fakeapi",
    "bench": "claudetrace.cli.bench:bench",
    "metrics": "claudetrace.cli.metrics:metrics",
    "otel": "claudetrace.cli.otel:otel",
    "tail": "claudetrace.cli.tail:tail",
    "ui": "claudetrace.cli.ui:ui",
    "usage": "claudetrace.cli.usage:usage",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on demand."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        command: click.Command = getattr(importlib.import_module(module_name), attr)
        return command

    # A usage error quotes what the user typed (an option, a value): escaped as
    # every message is (claudetrace.display), whichever command it is about.
    # A Ctrl-C ends every command alike (:func:`_interrupts_end`).
    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        with _interrupts_end(), _escaped_usage_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        with _interrupts_end(), _escaped_usage_errors():
            return super().invoke(ctx)


@contextmanager
def _interrupts_end() -> Iterator[None]:
    """A Ctrl-C that reaches the command line ends the command as a command stopped
    by Ctrl-C ends: one line on stderr and exit status 130 (128 + SIGINT), as the
    proxy exits, not click's "Aborted!" and 1.  The command's own ``finally``
    blocks have run by then: what it was writing is whole or gone (an export's
    file is renamed into place only when complete; an import stores each
    recording in one transaction, or takes back the half of one).  Commands
    that run until stopped (``tail --follow``, ``import --watch``, ``metrics
    serve``, ``usage blocks --live``) take their Ctrl-C themselves and end
    with 0."""
    try:
        yield
    except KeyboardInterrupt:
        import signal

        # Pressed again while this is said: no traceback for that one.
        with suppress(ValueError):  # not the main thread
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        from ..display import say

        with suppress(OSError):  # stderr gone (a closed pipe): the status says it
            say("claudetrace: interrupted", err=True)
        raise SystemExit(130) from None


@contextmanager
def _escaped_usage_errors() -> Iterator[None]:
    """Click's errors as they are, unless their message holds what
    :func:`~claudetrace.display.visible_lines` escapes (its newlines are kept:
    a group run with no command shows its help as such an error)."""
    try:
        yield
    except click.ClickException as exc:
        message = exc.format_message()
        shown = visible_lines(message)
        if shown == message:
            raise
        if isinstance(exc, click.UsageError):
            raise click.UsageError(shown, ctx=exc.ctx) from exc
        raise click.ClickException(shown) from exc  # exit status 1, as click's others


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="claudetrace")
def cli() -> None:
    """Record, replay and observe the traffic between Claude Agent SDK hosts and `claude`.

    The database is --db, else $CLAUDETRACE_DB, else a SQLite file in the user's
    data directory; a SQLAlchemy URL or a plain file path.  SESSION is a recording
    id, a unique prefix of one, the CLI's own session_id, or `latest`.
    """
