"""Reading what a command wrote on a pseudo-terminal, as a person's terminal receives it."""

from __future__ import annotations

import errno
import os
import select
import signal
import subprocess
import time


def read_terminal(
    leader: int, proc: subprocess.Popen[bytes], *, until: bytes | None = None,
    timeout: float = 60.0,
) -> bytes:
    """Everything ``proc`` writes on the pseudo-terminal whose leader side is
    ``leader``, until it closes its side (its follower side must already be closed
    here).  With ``until``, ``proc`` gets a Ctrl-C (SIGINT) once the terminal
    showed those bytes, as a person stops a command that runs until stopped.
    Raises TimeoutError (after killing ``proc``) when it runs past ``timeout``."""
    seen = bytearray()
    deadline = time.monotonic() + timeout
    interrupted = False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if not ready:
            if proc.poll() is not None:
                return bytes(seen)
            continue
        try:
            chunk = os.read(leader, 1 << 16)
        except OSError as exc:  # EIO: the other side is closed
            if exc.errno != errno.EIO:
                raise
            return bytes(seen)
        if not chunk:
            return bytes(seen)
        seen += chunk
        if until is not None and not interrupted and until in seen:
            interrupted = True
            proc.send_signal(signal.SIGINT)
    proc.kill()
    raise TimeoutError(f"still running after {timeout} s: {bytes(seen[-2000:])!r}")
