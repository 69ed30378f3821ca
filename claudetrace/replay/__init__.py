"""The replay engine: a deterministic fake ``claude`` fed from a recording.

Library entry points:

- :func:`replay_command` — the argv a shim execs to stand in for ``claude``
  (the host's CLI arguments follow it);
- :class:`ReplayEngine` — serve a host over file descriptors from a cassette;
- :func:`compile_script` / :class:`Matcher` — the pure causal matcher, for tools
  that want to check a host's lines against a recording without processes;
- :class:`Divergence` / :class:`DivergenceKind` — the structured report and the
  documented exit codes (80 cassette missing, 81 unmatched message, 82 recording
  exhausted, 83 recorded input never sent, 84 CLI options differ);
- :class:`MatchRules` — volatile JSON paths, regex paths and a user matcher;
- :func:`parse_fault` — fault injection SPECs (:mod:`claudetrace.replay.faults`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from .argv import BEHAVIOUR_OPTIONS, argv_changes
from .engine import (
    CassetteMissing,
    ReplayEngine,
    ReplayOptions,
    argv_drift,
    load_source,
    run_replay,
    version_text,
)
from .faults import BadFault, Fault, parse_fault, parse_faults
from .matching import Matcher, Script, compile_script, lane_of
from .normalize import VolatileSpec
from .report import EXIT_CODES, Divergence, DivergenceKind
from .rules import BadRule, MatchRules, matcher_reference


def replay_command(
    source: str | os.PathLike[str],
    *,
    db: str | None = None,
    speed: float | None = None,
    report: str | os.PathLike[str] | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The argv prefix that runs a replay of ``source`` as ``claude``.

    A shim execs it followed by ``"$@"``: everything after the trailing ``--`` is
    taken as the host's CLI arguments.  A cassette path is made absolute so the
    shim works from any directory; anything else is a SESSION in the store.
    ``extra`` are further ``claudetrace replay`` options (``--fault SPEC`` …).
    """
    from ..shim import self_command

    text = os.fspath(source)
    if Path(text).exists():
        text = str(Path(text).absolute())
    command = [*self_command(), "replay", text]
    if db:
        command += ["--db", db]
    if speed is not None:
        command += ["--speed", repr(float(speed))]
    if report is not None:
        command += ["--report", str(Path(report).absolute())]
    return [*command, *extra, "--"]


def write_replay_shim(
    out: str | os.PathLike[str], source: str | os.PathLike[str], **options: object
) -> Path:
    """Write an executable usable as the SDK's ``cli_path`` that replays ``source``."""
    from ..shim import write_shim

    return write_shim(out, replay_command(source, **options))  # type: ignore[arg-type]


__all__ = [
    "BEHAVIOUR_OPTIONS",
    "EXIT_CODES",
    "BadFault",
    "BadRule",
    "CassetteMissing",
    "Divergence",
    "DivergenceKind",
    "Fault",
    "MatchRules",
    "Matcher",
    "ReplayEngine",
    "ReplayOptions",
    "Script",
    "VolatileSpec",
    "argv_changes",
    "argv_drift",
    "compile_script",
    "lane_of",
    "load_source",
    "matcher_reference",
    "parse_fault",
    "parse_faults",
    "replay_command",
    "run_replay",
    "version_text",
    "write_replay_shim",
]
