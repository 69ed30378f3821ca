"""When an import's sessions are folded (:mod:`.unfolded`), told without loading it.

``import`` decides whether to store usage first before it knows whether
anything is to be stored at all: an unchanged tree loads neither the
converter nor the session model, so this is a module of its own.
"""

from __future__ import annotations

import os
import sys
from typing import Final

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


def start_pass(url: str) -> int | None:
    """Start the pass that folds what is not folded yet in ``url``'s store, as a
    process of its own that outlives the import (a session of its own, at idle
    priority); its process id, or None with ``CLAUDETRACE_FOLD=later``.  The URL
    goes in ``$CLAUDETRACE_DB``, not argv, where other users could read a password."""
    from ..config import DB_ENV

    if fold_later():
        return None
    # Spawned, not a Popen: nothing of this process waits for it (a Popen left
    # running is a warning when collected); the system reaps it once we are gone.
    quiet = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    return os.posix_spawn(sys.executable, [sys.executable, "-m", "claudetrace.formats.unfolded"],
                          {**os.environ, DB_ENV: url}, file_actions=quiet, setsid=True)


__all__ = ["FOLD_ENV", "fold_later", "fold_now", "start_pass"]
