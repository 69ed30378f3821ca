"""A stand-in for the CLI in the telemetry benchmark: plays one side of a session.

``python -m claudetrace.bench.standin SCRIPT`` reads SCRIPT, lines prefixed with
``i`` (a line the host sends) or ``o`` (a line the CLI writes), and plays the
CLI: for each ``i`` line it reads one line from stdin, for each ``o`` line it
writes it to stdout.  Through the proxy the recording then holds a real
conversation in both directions, in the recorded order — unlike ``cat``, which
echoes the CLI's lines back as if the host had sent them, so that the span
builder would see every line twice and half of them from the wrong side.
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


if __name__ == "__main__":
    sys.exit(play(Path(sys.argv[1])))
