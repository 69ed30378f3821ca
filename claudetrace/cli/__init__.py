"""The ``claudetrace`` command line: a thin layer over the library.

Commands live in small modules and are imported only when used (the click group
is :mod:`claudetrace.cli.commands`).  ``claudetrace proxy`` is on the host's
critical path, started for every session: its usual command line is read
without click (:mod:`claudetrace.cli.launch`), and the child is started before
anything else is imported.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn


def main(argv: list[str] | None = None) -> Any:
    """Console entry point (also handles argv[0] dispatch as ``claude``)."""
    try:
        args = sys.argv[1:] if argv is None else argv
        prog = os.path.basename(sys.argv[0]) if argv is None else "claudetrace"
        as_claude = prog == "claude" or prog.startswith("claude-")
        if as_claude or args[:1] == ["proxy"]:
            # A Ctrl-C from here on is noted for the child, not raised (see
            # HeldInterrupts); click, should it read the command line, gets it back.
            from ..interrupts import HeldInterrupts

            held = HeldInterrupts()
            if as_claude:
                from .launch import dispatch_as_claude

                return dispatch_as_claude(args, held)
            from .launch import parse_proxy_args, run_and_exit

            parsed = parse_proxy_args(args[1:])
            if parsed is not None:  # else click reads it, and says what is wrong
                run_and_exit(**parsed, held=held)
            if held.release():
                interrupted()
    except KeyboardInterrupt:
        # Ctrl-C while the proxy starts, before its forwarder takes SIGINT from
        # Python's own handler (no child runs yet, nothing is recorded), or once
        # the proxy has put that handler back, its recording complete.
        interrupted()
    from .commands import cli

    return cli.main(args=args, prog_name="claudetrace")


def interrupted() -> NoReturn:
    """End quietly as a command stopped by Ctrl-C ends, with 128 + SIGINT (2)."""
    os._exit(130)


def __getattr__(name: str) -> Any:
    # The click group and its table, for whoever imports them from here.
    if name in ("cli", "COMMANDS", "LazyGroup"):
        from . import commands

        return getattr(commands, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
