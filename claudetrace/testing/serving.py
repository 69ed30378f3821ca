"""Wait for a server a test (or a benchmark) started to answer.

:func:`wait_until_answering` polls a health URL until it answers 200, and gives
up as soon as the server's process has exited, or after a bound that only a
server that never comes up reaches: the session browser's ``/_stcore/health``,
Phoenix's ``/healthz``.
"""

from __future__ import annotations

import subprocess
import time
import urllib.request
from typing import Final

#: Longest wait for a server to answer (a busy 2-core machine starts Streamlit
#: or Phoenix in seconds; this bound is for one that never will).
START_TIMEOUT_S: Final = 120.0


class NotAnswering(RuntimeError):
    """The server exited, or did not answer within the bound."""


def answers(url: str) -> bool:
    """True when ``url`` answers 200 now."""
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def wait_until_answering(
    url: str,
    proc: subprocess.Popen[bytes] | None = None,
    *,
    timeout: float = START_TIMEOUT_S,
    poll_s: float = 0.2,
) -> None:
    """Return once ``url`` answers 200; :class:`NotAnswering` when ``proc`` (the
    server's process) has exited first, or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not answers(url):
        if proc is not None and proc.poll() is not None:
            raise NotAnswering(f"the server exited with status {proc.returncode}")
        if time.monotonic() > deadline:
            raise NotAnswering(f"{url} did not answer within {timeout:g} s")
        time.sleep(poll_s)


__all__ = ["START_TIMEOUT_S", "NotAnswering", "answers", "wait_until_answering"]
