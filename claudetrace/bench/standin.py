"""Stand-ins for the CLI and its host in the telemetry benchmark: one session, replayed.

``python -m claudetrace.bench.standin SCRIPT`` reads SCRIPT, lines prefixed with
``i`` (a line the host sends) or ``o`` (a line the CLI writes), and plays the
CLI: for each ``i`` line it reads one line from stdin, for each ``o`` line it
writes it to stdout.  ``python -m claudetrace.bench.standin --host SCRIPT`` plays
the host: it sends each ``i`` line once every ``o`` line before it has come back
through the proxy, as an SDK answers a request once it has read it.  Between the
two, the recording holds a real conversation in both directions, in the recorded
order — unlike ``cat``, which echoes the CLI's lines back as if the host had sent
them (the span builder would see every line twice and half of them from the wrong
side), or a host piped from a file, whose lines would all be recorded first, before
the CLI had asked anything.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path


def write_script(path: Path, records: Iterable[tuple[str, bytes]]) -> tuple[bytes, int]:
    """Write the script for ``records`` (direction, line); the host's input and line count."""
    host: list[bytes] = []
    count = 0
    with open(path, "wb") as handle:
        for direction, line in records:
            handle.write((b"i" if direction == "in" else b"o") + line + b"\n")
            if direction == "in":
                host.append(line + b"\n")
            count += 1
    return b"".join(host), count


def play(script: Path) -> int:
    """Play the CLI's side of ``script`` over stdin/stdout; the exit status."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    with open(script, "rb") as handle:
        for record in handle:
            if record[:1] == b"i":
                stdout.flush()  # the host answers what it has seen
                if not stdin.readline():
                    return 0
            else:
                stdout.write(record[1:])
    stdout.flush()
    return 0


def host(script: Path) -> int:
    """Play the host's side of ``script``: each of its lines once the CLI's lines
    before it have arrived on stdin (counted in bytes, read whole); 1 if the CLI's
    output ends before that."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    due = 0  # bytes of the CLI's lines still to come before the next host line
    with open(script, "rb") as handle:
        for record in handle:
            if record[:1] != b"i":
                due += len(record) - 1
                continue
            if due and len(stdin.read(due)) < due:
                return 1
            due = 0
            stdout.write(record[1:])
            stdout.flush()
    while stdin.read(1 << 20):  # the rest of the CLI's output, until it exits
        pass
    return 0


def main(argv: list[str]) -> int:
    """``[--host] SCRIPT``: play the CLI's side of SCRIPT, or with ``--host`` the host's."""
    as_host = argv[:1] == ["--host"]
    args = argv[1:] if as_host else argv
    if len(args) != 1:
        print("usage: python -m claudetrace.bench.standin [--host] SCRIPT", file=sys.stderr)
        return 2
    return host(Path(args[0])) if as_host else play(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
