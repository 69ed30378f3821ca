"""The ``claudetrace`` click group: each command imported from its module on first use."""

from __future__ import annotations

import importlib

import click

from .._version import __version__

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


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="claudetrace")
def cli() -> None:
    """Record, replay and observe the traffic between Claude Agent SDK hosts and `claude`.

    The database is --db, else $CLAUDETRACE_DB, else a SQLite file in the user's
    data directory; a SQLAlchemy URL or a plain file path.  SESSION is a recording
    id, a unique prefix of one, the CLI's own session_id, or `latest`.
    """
