"""Errors raised by claudetrace.

Every error a user can cause derives from :class:`ClaudeTraceError`; the command
line turns each into one line on stderr and a non-zero exit code, never a
traceback::

    ClaudeTraceError
    ├── StoreError              the database cannot be opened, migrated or written
    │   └── BadDatabaseURL      --db / $CLAUDETRACE_DB is not a usable URL or path
    ├── SessionNotFound         no recording matches a SESSION argument
    ├── AmbiguousSession        a prefix matches several recordings
    ├── CassetteError           a cassette file cannot be read or is malformed
    ├── ChildStartError         the proxied command could not be started
    ├── ReplayError             the replay engine cannot serve the host
    └── TelemetryError          OTLP export is misconfigured or the collector failed
"""

from __future__ import annotations

import errno
import stat

#: A write refused for want of room: the disk, the user's quota, a file size limit.
NO_ROOM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


#: What a file that is not a regular one is, by its mode.
_NOT_REGULAR = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                (stat.S_ISDIR, "a folder"))


def not_regular(mode: int) -> str | None:
    """``not a regular file (a FIFO)`` when ``mode`` (``st_mode``) is no regular
    file's (a FIFO blocks its reader, ``/dev/null`` keeps nothing); else None."""
    if stat.S_ISREG(mode):
        return None
    what = next((name for test, name in _NOT_REGULAR if test(mode)), "another kind")
    return f"not a regular file ({what})"


class ClaudeTraceError(Exception):
    """Base class of every error claudetrace reports to a user."""

    #: Process exit code the command line uses for this error.
    exit_code: int = 1


class StoreError(ClaudeTraceError):
    """The recording store cannot be opened, migrated or written."""

    #: True when the database refused for now (locked, full, unreachable) rather
    #: than refusing the data (see :func:`claudetrace.store.engine.is_transient_error`).
    transient: bool = False


class BadDatabaseURL(StoreError):
    """A database URL or path that SQLAlchemy cannot use."""

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class SessionNotFound(ClaudeTraceError):
    """No recording matches the SESSION argument."""

    def __init__(self, message: str, *, query: str) -> None:
        super().__init__(message)
        self.query = query


class AmbiguousSession(ClaudeTraceError):
    """A SESSION prefix matches more than one recording."""

    def __init__(self, message: str, *, query: str, candidates: list[str]) -> None:
        super().__init__(message)
        self.query = query
        self.candidates = candidates


class CassetteError(ClaudeTraceError):
    """A cassette file is unreadable or not cassette v1."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        where = path or "<cassette>"
        if line is not None:
            where = f"{where}:{line}"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line


class ChildStartError(ClaudeTraceError):
    """The command to proxy could not be started (not found, not executable)."""

    exit_code = 127

    def __init__(self, message: str, *, argv: list[str]) -> None:
        super().__init__(message)
        self.argv = argv


class ReplayError(ClaudeTraceError):
    """The replay engine cannot serve the host (bad source, divergence)."""


class TelemetryError(ClaudeTraceError):
    """OpenTelemetry export is misconfigured, or the collector did not accept it."""
