"""``claudetrace replay``: act as a fake ``claude`` from a recording."""

from __future__ import annotations

import sys

import click

from ._common import Positive, db_option, no_empty_path, reports_errors


@click.command(
    context_settings={"ignore_unknown_options": True, "help_option_names": ["-h", "--help"]}
)
@click.argument("source")
@db_option
@click.option(
    "--speed",
    type=Positive(least=0.001, most=1_000_000.0),
    metavar="X",
    help="Reproduce recorded gaps between lines, X times faster.",
)
@click.option("--realtime", is_flag=True, help="Reproduce recorded gaps (same as --speed 1).")
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False),
    callback=no_empty_path,
    metavar="FILE",
    help="Also write a divergence report as JSON to FILE.",
)
@click.option("--rerecord", metavar="TEXT", help="How to re-record, quoted in divergence reports.")
@click.option(
    "--volatile-key",
    "volatile_keys",
    multiple=True,
    metavar="KEY",
    help="Treat values under KEY in host lines as generated afresh each run.",
)
@click.option(
    "--volatile-pattern",
    "volatile_patterns",
    multiple=True,
    metavar="REGEX",
    help="Treat host strings matching REGEX as generated afresh each run.",
)
@click.option(
    "--volatile-path",
    "volatile_paths",
    multiple=True,
    metavar="PATH",
    help="Do not compare the value at this JSON path of host lines ($.message.content, "
    "$.request.hooks.*, [*] for any list item).",
)
@click.option(
    "--match-regex",
    "regex_rules",
    multiple=True,
    metavar="PATH=REGEX",
    help="Accept any host value at PATH that fully matches REGEX.",
)
@click.option(
    "--matcher",
    metavar="MODULE:FUNC",
    help="A function match(recorded, live) -> bool asked about host lines that still "
    "differ (MODULE:FUNC or FILE.py:FUNC).",
)
@click.option(
    "--redact",
    "redact",
    multiple=True,
    metavar="REGEX",
    help="Hide REGEX in host lines before comparing them (as when the cassette was saved).",
)
@click.option(
    "--match-argv/--no-match-argv",
    default=True,
    help="Compare the CLI options that change behaviour with the recording [default: on].",
)
@click.option(
    "--ignore-argv",
    "ignore_argv",
    multiple=True,
    metavar="KEY",
    help="Do not compare this CLI option (e.g. model, mcp-config).",
)
@click.option(
    "--fault",
    "faults",
    multiple=True,
    metavar="SPEC",
    help="Inject a fault: crash@N, signal=SIG@N, exit=CODE@N, hang@N, delay=SECONDS@N, "
    "garbage@N, truncate@N, stderr=TEXT@N (N: stdout lines written first).",
)
@click.argument("cli_args", nargs=-1, type=click.UNPROCESSED)
@reports_errors
def replay(
    source: str,
    db_url: str | None,
    speed: float | None,
    realtime: bool,
    report_path: str | None,
    rerecord: str | None,
    volatile_keys: tuple[str, ...],
    volatile_patterns: tuple[str, ...],
    volatile_paths: tuple[str, ...],
    regex_rules: tuple[str, ...],
    matcher: str | None,
    redact: tuple[str, ...],
    match_argv: bool,
    ignore_argv: tuple[str, ...],
    faults: tuple[str, ...],
    cli_args: tuple[str, ...],
) -> None:
    """Act as `claude` on stdin/stdout, replaying SOURCE (a cassette file or a SESSION).

    Recorded output is released once the host has sent the input that preceded it
    in the recording; every host line is checked against the recording. Arguments
    after `--` are the CLI arguments the host passed (`-v` prints the recorded
    version). Exit status: the recorded one, or 80 cassette missing, 81 unmatched
    message, 82 recording exhausted, 83 recorded input never sent, 84 a CLI option
    that changes behaviour differs from the recording.
    """
    from ..replay import MatchRules, ReplayOptions, VolatileSpec, parse_faults, run_replay

    if speed is not None and realtime:
        raise click.UsageError("--speed and --realtime exclude each other")
    spec = None
    if volatile_keys or volatile_patterns:
        base = VolatileSpec()
        spec = VolatileSpec(
            any_keys=frozenset(volatile_keys),
            patterns=(*base.patterns, *volatile_patterns),
        )
    options = ReplayOptions(
        speed=1.0 if realtime else speed,
        report_path=report_path,
        rerecord=rerecord,
        spec=spec,
        rules=MatchRules.build(
            volatile_paths=volatile_paths, regex_rules=regex_rules, matcher=matcher
        ),
        redact=redact,
        match_argv=match_argv,
        ignore_argv=ignore_argv,
        faults=tuple(parse_faults(faults)),
    )
    code = run_replay(source, list(cli_args), db=db_url, options=options)
    sys.stdout.flush()
    sys.exit(code)
