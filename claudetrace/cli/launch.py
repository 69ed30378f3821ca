"""``claudetrace proxy`` without click: the child starts before anything else loads.

The proxy starts for every session, and the host waits for the CLI behind it.
Importing click (with ``re``, ``enum``, ``typing``…) took longer than starting
the child itself, so the usual command line — what shims and hosts write:
known options, ``--``, the command — is read here by hand, and anything else
(``--help``, an unknown or malformed option, no ``--``) goes to the click
command in :mod:`claudetrace.cli.record`, which says what is wrong.  The two
agree on every command line this reads (tests/test_launch.py holds them to it);
:data:`VALUE_OPTIONS` and :data:`FLAGS` must name every option that command has.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

#: The proxy's options that take a value, and the keyword each becomes.
VALUE_OPTIONS = {
    "--db": "db",
    "--name": "name",
    "--tag": "tags",
    "--otel-endpoint": "otel_endpoint",
    "--otel-protocol": "otel_protocol",
}
#: Its flags, and the value each sets for ``otel_content``.
FLAGS = {"--otel-content": True, "--no-otel-content": False}
OTEL_PROTOCOLS = ("grpc", "http/protobuf")


def parse_proxy_args(args: list[str]) -> dict[str, Any] | None:
    """``run_and_exit``'s keywords from the arguments after ``proxy``; None when they are
    not of the plain form ``[OPTION VALUE | --OPTION=VALUE | FLAG]… -- COMMAND…``,
    or a value is not valid (click then reads them and reports)."""
    values: dict[str, Any] = {"db": None, "name": None, "otel_endpoint": None,
                              "otel_protocol": None}
    tags: dict[str, str] = {}
    content: bool | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            command = args[i + 1 :]
            if not command:
                return None
            if values["otel_protocol"] not in (None, *OTEL_PROTOCOLS):
                return None
            db = values["db"] if values["db"] is not None else os.environ.get("CLAUDETRACE_DB")
            otel = {"endpoint": values["otel_endpoint"], "protocol": values["otel_protocol"],
                    "capture_content": content}
            return {"argv": command, "db": db or None, "name": values["name"], "tags": tags,
                    "otel": otel}
        if arg in FLAGS:
            content = FLAGS[arg]
            i += 1
            continue
        option, equals, value = arg.partition("=")
        key = VALUE_OPTIONS.get(option)
        if key is None:
            return None
        if not equals:
            if i + 1 >= len(args):
                return None
            value = args[i + 1]
            i += 1
        i += 1
        if key == "tags":
            tag, sep, tag_value = value.partition("=")
            if not sep or not tag.strip():
                return None
            tags[tag.strip()] = tag_value
        else:
            values[key] = value
    return None


def run_and_exit(
    argv: list[str],
    *,
    db: str | None,
    name: str | None = None,
    tags: dict[str, str] | None = None,
    otel: dict[str, Any] | None = None,
    held: Any = None,
) -> NoReturn:
    """Run the proxy and exit with the child's status (the drop-in contract).

    The child is started first; the store is not looked at here at all (the
    indexer opens it, and a database that is wrong or down never keeps the
    child from starting: its capture file waits, and the problem is one line
    on stderr).  ``held``: the Ctrl-Cs noted since the command began
    (:class:`~claudetrace.interrupts.HeldInterrupts`), delivered to the child.
    """
    try:
        open_closed_standard_fds()
        from .. import spawn

        flags = {k: v for k, v in (otel or {}).items() if v is not None} or None
        environ = dict(os.environ)
        recording_id = None
        if flags or any(key.startswith("OTEL_") for key in environ):
            # Live traces put the recording's trace id in the child's environment:
            # the recording's id comes first (telemetry sessions only; nothing heavier).
            from ..ids import new_recording_id
            from ..telemetry.context import child_env

            recording_id = new_recording_id()
            extra = child_env(recording_id, environ, flags)
            started = spawn.launch(argv, {**environ, **extra}, held)
        else:
            started = spawn.launch(argv, environ, held)
    except KeyboardInterrupt:
        # Python's own SIGINT handler raises this until spawn.launch installs the
        # forwarder (which holds a Ctrl-C that comes later for the child): here no
        # child was started (the click command line comes this way too).
        from . import interrupted

        interrupted()
    from ..config import env_mistakes

    for mistake in env_mistakes():  # the child started first, as ever
        sys.stderr.write(f"claudetrace: {mistake}\n")
    from ..errors import ClaudeTraceError
    from ..proxy import ProxyOptions, report_problems, run_proxy

    options = ProxyOptions(argv=argv, db=db, name=name, tags=tags or {}, otel=flags)
    try:
        status, report = run_proxy(options, started, recording_id)
    except ClaudeTraceError as exc:
        from ..display import visible
        print(f"claudetrace: {visible(str(exc))}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(exc.exit_code)
    report_problems(report)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # daemon threads (stdin) may still block in read()


def open_closed_standard_fds() -> None:
    """Put ``/dev/null`` on any of fds 0, 1 and 2 that is closed (as a shell's
    ``>&-`` leaves them), before the proxy opens a file.

    Otherwise the first file opened takes the free number: the capture file
    became fd 1, the child's stdout was forwarded into it, and the proxy ended
    in a traceback with the recording incomplete.  Python left the matching
    ``sys`` stream None; it is given one on the new descriptor, so what the
    proxy says goes to its own stream, not into another.
    """
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDWR)  # the lowest free number: fd itself
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        os.set_inheritable(fd, True)
        if getattr(sys, name) is None:
            # Kept for the life of the process, as Python keeps its own streams.
            setattr(sys, name, open(fd, mode, encoding="utf-8", closefd=False))  # noqa: SIM115


def dispatch_as_claude(args: list[str], held: Any = None) -> int:
    """Behave as ``claude`` (argv[0] dispatch): proxy to the real CLI, recording."""
    from ..config import DB_ENV
    from ..errors import ClaudeTraceError
    from ..shim import VERSION_FLAGS, find_real_cli

    try:
        real = find_real_cli()
    except ClaudeTraceError as exc:
        from ._common import fail

        fail(str(exc), 127)
        return 127
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    if (len(args) == 1 and args[0] in VERSION_FLAGS) or interactive:
        # Version checks and interactive terminal sessions are not stream-json
        # traffic: hand over to the real CLI untouched.
        os.execv(real, [real, *args])
    return run_and_exit([real, *args], db=os.environ.get(DB_ENV), held=held)
