"""``claudetrace proxy`` and ``claudetrace shim``: recording sessions."""

from __future__ import annotations

import os
import sys

import click

from ._common import db_option, no_empty_path, reports_errors
from .launch import run_and_exit


def _parse_tags(values: tuple[str, ...]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{value!r} is not KEY=VALUE", param_hint="--tag")
        tags[key.strip()] = val
    return tags


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@db_option
@click.option("--name", help="A name for this recording.")
@click.option("--tag", "tags", multiple=True, metavar="K=V", help="A tag (repeatable).")
@click.option("--otel-endpoint", metavar="URL", help="Export spans/metrics live over OTLP to URL.")
@click.option(
    "--otel-protocol",
    type=click.Choice(["grpc", "http/protobuf"]),
    help="OTLP protocol [env: OTEL_EXPORTER_OTLP_PROTOCOL].",
)
@click.option(
    "--otel-content/--no-otel-content",
    default=None,
    help="Put message and tool content on spans (off unless asked).",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@reports_errors
def proxy(
    db_url: str | None,
    name: str | None,
    tags: tuple[str, ...],
    otel_endpoint: str | None,
    otel_protocol: str | None,
    otel_content: bool | None,
    command: tuple[str, ...],
) -> None:
    """Run CMD as the child, tee everything into the store, exit with its status.

    Every byte is forwarded untouched (stdin to the child, its stdout and stderr
    back), every line recorded with timestamps.  Exits with the child's exit code,
    or 128+N when the child died of signal N; 127 when CMD cannot be started.

    \b
    Example:
      claudetrace proxy --name smoke -- claude --output-format stream-json ...
    """
    if command[0].startswith("-"):
        # An option of ours misspelt (``--nmae``), taken for the command as unknown
        # options are: it would fail to start and leave a failed recording behind.
        from difflib import get_close_matches

        ctx = click.get_current_context()
        option = command[0].partition("=")[0]
        ours = [opt for param in ctx.command.params for opt in param.opts + param.secondary_opts]
        raise click.NoSuchOption(option, possibilities=get_close_matches(option, ours), ctx=ctx)
    run_and_exit(
        list(command),
        db=db_url,
        name=name,
        tags=_parse_tags(tags),
        otel={
            "endpoint": otel_endpoint,
            "protocol": otel_protocol,
            "capture_content": otel_content,
        },
    )


@click.command()
@click.argument("out", type=click.Path(dir_okay=False), callback=no_empty_path)
@click.option(
    "--real",
    metavar="PATH",
    help="The real claude CLI [default: $CLAUDETRACE_REAL_CLI, else PATH].",
)
@db_option
@click.option("--name", help="Name every recording made through this shim.")
@click.option(
    "--tag", "tags", multiple=True, metavar="K=V", help="Tag every recording (repeatable)."
)
@click.option(
    "--replay",
    "replay_source",
    metavar="SOURCE",
    help="Replay SOURCE (cassette or SESSION) instead of recording.",
)
@click.option(
    "--fault",
    "faults",
    multiple=True,
    metavar="SPEC",
    help="With --replay: inject a fault (crash@N, signal=SIG@N, exit=CODE@N, hang@N, "
    "delay=SECONDS@N, garbage@N, truncate@N, stderr=TEXT@N; repeatable).",
)
@click.option("--force", is_flag=True,
              help="Replace OUT even when it is a file claudetrace did not write.")
@reports_errors
def shim(
    out: str,
    real: str | None,
    db_url: str | None,
    name: str | None,
    tags: tuple[str, ...],
    replay_source: str | None,
    faults: tuple[str, ...],
    force: bool,
) -> None:
    """Write an executable OUT to use as the SDK's cli_path.

    \b
    Python:     ClaudeAgentOptions(cli_path="OUT")
    TypeScript: query({ options: { pathToClaudeCodeExecutable: "OUT" } })
    Go:         the SDK's CLI path option
    """
    from ..display import for_terminal
    from ..shim import find_real_cli, proxy_command, write_shim

    if faults and not replay_source:
        raise click.UsageError("--fault needs --replay (faults are injected by the replay)")
    if replay_source:
        from ..replay import parse_faults, replay_command

        # Checked now, so a typo fails here and not inside the host's test.
        extra = [arg for fault in parse_faults(faults) for arg in ("--fault", fault.spec())]
        command = replay_command(replay_source, db=db_url, extra=extra)
        path = write_shim(out, command, force=force)
    else:
        real_cli = find_real_cli(real)
        db = os.path.abspath(db_url) if db_url and "://" not in db_url else db_url
        command = proxy_command(real_cli, db=db, name=name, tags=_parse_tags(tags))
        path = write_shim(out, command, real=real_cli, force=force)
    # The path as written (click.echo would drop an ESC [...m from it in a pipe),
    # escaped on a terminal.
    for_terminal(sys.stdout).write(f"{path}\n")
