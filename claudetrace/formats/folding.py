"""When an import's sessions are folded (:mod:`.unfolded`), told without loading it.

``import`` decides whether to store usage first before it knows whether
anything is to be stored at all: an unchanged tree loads neither the
converter nor the session model, so this is a module of its own.

One pass at a time folds a store's recordings: it holds the store's pass
lock (:func:`pass_files`, under the user's data directory, keyed by the
database as capture folders are) while it folds.  Every ``import`` starts one
when the lock is free and the store holds a recording not folded yet, so a
pass killed, or one never started (``CLAUDETRACE_FOLD=later``), is made up
for by the next import.  What a pass says (a recording it could not fold, or
why it stopped) is in the lock's ``.log`` beside it, which ``doctor`` shows.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

#: The environment variable that makes ``import`` fold in its own process (``now``)
#: or start no pass (``later``).
FOLD_ENV: Final = "CLAUDETRACE_FOLD"


def fold_now() -> bool:
    """Whether ``import`` folds in its own process (``CLAUDETRACE_FOLD=now``)."""
    return os.environ.get(FOLD_ENV, "").strip().lower() == "now"


def fold_later() -> bool:
    """Whether ``import`` leaves what it stored usage first for a reader or a later
    pass to fold, starting none (``CLAUDETRACE_FOLD=later``: tests of the readers)."""
    return os.environ.get(FOLD_ENV, "").strip().lower() == "later"


def pass_files(url: str) -> tuple[Path, Path]:
    """The lock a pass over ``url``'s store holds while it runs, and its log."""
    from ..capture import _url_key
    from ..config import data_dir

    base = data_dir() / "fold" / _url_key(url)
    return base.with_suffix(".lock"), base.with_suffix(".log")


def take_lock(path: Path) -> int | None:
    """``path``'s lock, taken (a descriptor that holds it); None while another
    process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def pass_running(url: str) -> bool:
    """Whether a pass over ``url``'s store is running (it holds the lock)."""
    lock, _log = pass_files(url)
    if not lock.exists():
        return False
    with contextlib.suppress(OSError):
        fd = take_lock(lock)
        if fd is None:
            return True
        os.close(fd)
    return False


def last_said(url: str) -> str | None:
    """The last line the last pass over ``url``'s store wrote to its log, if any."""
    _lock, log = pass_files(url)
    with contextlib.suppress(OSError):
        lines = log.read_text(errors="replace").strip().splitlines()
        return lines[-1] if lines else None
    return None


def _waiting(url: str, opened: Callable[[], Any]) -> bool:
    """Whether ``url``'s store holds a recording not folded yet: read straight from
    a plain SQLite file or through psycopg alone (no SQLAlchemy: an unchanged tree's
    import opens no store), else through the store ``opened`` gives."""
    import sqlite3

    from ..config import plain_file, plain_name

    if url.startswith("postgresql"):
        from ..store.postgres import plain_url

        conninfo = plain_url(url)
        if conninfo is not None:
            import psycopg

            with contextlib.suppress(psycopg.Error), \
                    psycopg.connect(conninfo, autocommit=True) as conn:
                return conn.execute("SELECT 1 FROM unfolded LIMIT 1").fetchone() is not None
    path = plain_file(url)
    if path is not None:
        try:
            with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro",
                                                    uri=True)) as conn:
                return conn.execute("SELECT 1 FROM unfolded LIMIT 1").fetchone() is not None
        except sqlite3.Error:
            return False  # no such table yet, or not a store: nothing to fold
    if plain_name(url) is not None:
        return False  # a file not made: nothing in it
    from ..store.unfolded import pending

    return bool(pending(opened()))


#: The passes this process started and has not reaped yet (:func:`reap_passes`).
_started: set[int] = set()


def reap_passes() -> None:
    """Reap the passes this process started that have ended, without waiting for
    the others: a long-lived process (``import --watch``) starts one after each
    look, and each that ended would stay a zombie until it exits."""
    for pid in list(_started):
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # reaped already (a test's waitpid)
            done = pid
        if done:
            _started.discard(pid)


def start_pass(url: str, opened: Callable[[], Any] | None = None) -> int | None:
    """Start the pass that folds what is not folded yet in ``url``'s store, as a
    process of its own that outlives the import (a session of its own, at idle
    priority), unless one is running; with ``opened`` (the store, opened when
    asked), only when the store holds a recording not folded yet.  The pass's
    process id, or None when none was started (``CLAUDETRACE_FOLD=later`` too).
    The URL goes in ``$CLAUDETRACE_DB``, not argv, where other users could read
    a password."""
    from ..config import DB_ENV

    reap_passes()
    if fold_later():
        return None
    lock_path, log_path = pass_files(url)
    try:
        lock = take_lock(lock_path)
    except OSError:
        lock = -1  # no lock to be had here: the pass runs without (folds claim rows)
    if lock is None:
        return None  # the running pass looks for more before it lets the lock go
    try:
        if opened is not None and not _waiting(url, opened):
            return None
        # Spawned, not a Popen: nothing of this process waits for it (a Popen left
        # running is a warning when collected); the next start_pass reaps it if it
        # has ended, the system once we are gone.  It is handed the lock (the same
        # open file), held until it is done.
        actions: list[tuple[Any, ...]] = [
            (os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1)]
        try:
            log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError:
            actions.append((os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_RDWR, 0))
        else:
            actions.append((os.POSIX_SPAWN_DUP2, log, 2))
        argv = [sys.executable, "-m", "claudetrace.formats.unfolded"]
        if lock >= 0:
            os.set_inheritable(lock, True)
            argv += ["--lock-fd", str(lock)]
        try:
            pid = os.posix_spawn(sys.executable, argv, {**os.environ, DB_ENV: url},
                                 file_actions=actions, setsid=True)
            _started.add(pid)
            return pid
        finally:
            if actions[-1][0] == os.POSIX_SPAWN_DUP2:
                os.close(actions[-1][1])
    finally:
        if lock >= 0:
            os.close(lock)


__all__ = ["FOLD_ENV", "fold_later", "fold_now", "last_said", "pass_files", "pass_running",
           "reap_passes", "start_pass", "take_lock"]
