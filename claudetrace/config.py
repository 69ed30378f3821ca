"""Configuration: where claudetrace keeps its data, which database it uses, and the
environment variables it reads.

The one place these are decided; every layer may import it, and it imports
nothing of claudetrace but its errors.  Worked out without SQLAlchemy (the proxy needs the
database URL before it forwards a byte, and must not wait for that import).
"""

from __future__ import annotations

import os
import sys

# Neither typing nor pathlib at import: the proxy started as ``claude`` (argv[0]
# dispatch) reads this module before it starts the CLI.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Final

#: The database: a SQLAlchemy URL or a plain file path (``--db`` wins over it).
DB_ENV: Final = "CLAUDETRACE_DB"
#: The real ``claude`` for a shim or an argv[0] ``claude`` symlink.
REAL_CLI_ENV: Final = "CLAUDETRACE_REAL_CLI"
#: Seconds the indexer keeps retrying a failing store after the proxy has gone.
FLUSH_TIMEOUT_ENV: Final = "CLAUDETRACE_FLUSH_TIMEOUT"
#: Seconds a running recording's input must pause before its indexer adds the
#: search words a burst's batches were stored without (default 1).
WORDS_QUIET_ENV: Final = "CLAUDETRACE_WORDS_QUIET"
#: Progress bars: ``1`` forces them on, ``0`` off (default: on a terminal).
PROGRESS_ENV: Final = "CLAUDETRACE_PROGRESS"


def data_dir() -> Path:
    """The per-user data directory for claudetrace (XDG on Linux, Library on macOS)."""
    from pathlib import Path

    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        # The XDG spec: a relative XDG_DATA_HOME is invalid and ignored (it made
        # a database under whatever folder the command ran in).
        xdg = os.environ.get("XDG_DATA_HOME") or ""
        base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "claudetrace"


def default_home_there() -> bool:
    """Whether the default database's folder, or the home folder it goes under, is
    there: a command that only reads makes no home folder (it made the whole
    ``$HOME/.local/share/claudetrace`` path for a missing HOME)."""
    from pathlib import Path

    return data_dir().is_dir() or Path.home().is_dir()


def database_named(db: str | None = None) -> bool:
    """True when the user named the database (``--db`` or ``$CLAUDETRACE_DB``): a
    named SQLite file is never made by a command that only reads it."""
    return bool((db or os.environ.get(DB_ENV) or "").strip())


def resolve_url(db: str | None = None, *, memory: bool = False) -> str:
    """A SQLAlchemy URL from ``--db``, ``$CLAUDETRACE_DB`` or the default file.

    A database in memory (:func:`in_memory`) is a :class:`~.errors.BadDatabaseURL`
    unless ``memory``: a command's recorder and indexer are other processes, so
    nothing would be kept.  (A program's own store in memory is fine.)"""
    value = db or os.environ.get(DB_ENV) or ""
    if not value.strip():
        return f"sqlite:///{data_dir() / 'claudetrace.db'}"
    if "://" in value:
        if not memory and in_memory(value):
            from .errors import BadDatabaseURL

            raise BadDatabaseURL(
                f"{value!r} is an in-memory database: nothing would be kept (the recorder"
                " and indexer are other processes); give a file or a server", url=value)
        return value
    from pathlib import Path

    return f"sqlite:///{Path(value).expanduser().absolute()}"


def in_memory(url: str) -> bool:
    """Whether ``url`` is a SQLite database in memory (``sqlite://``,
    ``sqlite:///:memory:``, ``sqlite:///file::memory:?uri=true``, ``mode=memory``):
    gone when its process ends, and not shared with another one."""
    from urllib.parse import unquote

    scheme, _, rest = url.partition("://")
    if scheme.split("+")[0].lower() != "sqlite":
        return False
    database, _, query = rest.removeprefix("/").partition("?")
    database = unquote(database)
    return (database in ("", ":memory:") or database.startswith("file::memory:")
            or "mode=memory" in unquote(query) or "mode=memory" in database)


#: ``$CLAUDETRACE_INDEXER_PRIORITY``: ``idle`` (default), ``low`` (nice 10) or ``normal``.
INDEXER_PRIORITY_ENV: Final = "CLAUDETRACE_INDEXER_PRIORITY"


def plain_file(url: str) -> Path | None:
    """The file of ``url`` when it is a SQLite file named plainly
    (``sqlite:///PATH``, nothing to decode, no options) and exists; else None."""
    path = plain_name(url)
    return path if path is not None and path.is_file() else None


def plain_name(url: str) -> Path | None:
    """The file ``url`` names when it is a SQLite file named plainly
    (``sqlite:///PATH``, nothing to decode, no options), there or not; else None."""
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        return None
    name = url[len(prefix):]
    if not name or name == ":memory:" or name.startswith("file:") or any(
            c in name for c in "%?#"):
        return None
    from pathlib import Path

    return Path(name)


#: What ``$CLAUDETRACE_INDEXER_PRIORITY`` may say.
INDEXER_PRIORITIES: Final = ("idle", "low", "normal")


def env_seconds(name: str) -> float | None:
    """``$name`` in seconds: a number ≥ 0, else None (unset or a mistake)."""
    value = os.environ.get(name, "").strip()
    try:
        seconds = float(value) if value else None
    except ValueError:
        return None
    return seconds if seconds is not None and seconds >= 0 else None


def env_mistakes() -> list[str]:
    """A sentence for each setting of the environment claudetrace cannot read and
    so ignores (the proxy says them, once, on stderr)."""
    said = []
    for name in (FLUSH_TIMEOUT_ENV, WORDS_QUIET_ENV):
        value = os.environ.get(name, "").strip()
        if value and env_seconds(name) is None:
            said.append(f"${name}={value!r} is not a number of seconds (0 or more): ignored")
    choice = os.environ.get(INDEXER_PRIORITY_ENV, "").strip()
    if choice and choice.lower() not in INDEXER_PRIORITIES:
        said.append(f"${INDEXER_PRIORITY_ENV}={choice!r} is not one of "
                    f"{', '.join(INDEXER_PRIORITIES)}: idle is used")
    return said


def yield_cpu(priority: str | None = None) -> None:
    """Run on otherwise idle CPU time (``SCHED_IDLE``) unless told otherwise.

    For the indexer and its writer.  On a machine with few cores the indexer
    would otherwise take a core from the host, the proxy or the CLI just when one
    of them wakes up to pass a line on; an idle-class task is preempted at once.
    Nothing is lost when the indexer falls behind: the capture file holds
    everything, and readers wait for it.  Where there is no idle CPU at all for long stretches, set
    ``$CLAUDETRACE_INDEXER_PRIORITY`` to ``low`` or ``normal``.
    """
    import contextlib

    choice = (priority or os.environ.get(INDEXER_PRIORITY_ENV) or "idle").strip().lower()
    if choice not in INDEXER_PRIORITIES:
        choice = "idle"  # a mistaken value: the default (:func:`env_mistakes` says so)
    if choice == "normal":
        return
    if choice == "idle":
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            return
        except (AttributeError, OSError):  # not Linux: the next best thing
            pass
    with contextlib.suppress(OSError):
        os.nice(19 if choice == "idle" else 10)
