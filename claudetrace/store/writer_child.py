"""``python -m claudetrace.store.writer_child``: the writer process
(:func:`.writer.main`), with SQLite set up for it before :mod:`sqlite3` loads it.

The child holds two connections, each used by one thread alone: the writes on
its main thread, the checkpoints on theirs (:mod:`.writer`).  SQLite as Python
ships it is built for any program: it takes a mutex on every call into a
connection (a 200k-event burst binds 3 M values, each a call) and counts every
allocation it makes, under another mutex, for statistics nothing here reads.
The child needs neither: :func:`configure_sqlite` sets SQLite's multi-thread
mode (a connection may be used by any thread, but by one at a time) and turns
the memory statistics off.  Both are settings of the whole process, which
:mod:`sqlite3` does not offer and which SQLite takes only before it starts
(the module starts it as it loads): so this entry makes them, through SQLite's
C API (``sqlite3_config``), before anything imports :mod:`sqlite3`.  The writer
then takes about a tenth fewer instructions for a burst (``bench ingest``).
"""

from __future__ import annotations

import sys
from typing import Final

#: ``sqlite3_config`` options (sqlite3.h): the threading mode and the memory statistics.
_CONFIG_MULTITHREAD: Final = 2
_CONFIG_MEMSTATUS: Final = 9


def configure_sqlite() -> bool:
    """Multi-thread mode and no memory statistics for SQLite, if it has not
    started yet in this process; True when the library took both.

    The library is the one :mod:`sqlite3`'s C module uses: looked up through that
    module's file (its own SQLite, or the one it links to), which is loaded but
    not started (the import starts it).  Best effort: where its functions cannot
    be reached (a SQLite built into the module and not exported, no
    :mod:`ctypes`), or it has started already, nothing changes and SQLite runs as
    it always does.
    """
    if "_sqlite3" in sys.modules:
        return False  # started: it takes no settings now
    try:
        import ctypes
        import importlib.util

        spec = importlib.util.find_spec("_sqlite3")
        if spec is None or not spec.origin:
            return False
        configure = ctypes.CDLL(spec.origin).sqlite3_config
    except (ImportError, OSError, AttributeError, ValueError):
        return False
    # int sqlite3_config(int, ...): the option is the one fixed argument (on
    # some platforms a variadic one is passed elsewhere than a fixed one).
    configure.argtypes = [ctypes.c_int]
    configure.restype = ctypes.c_int
    # SQLITE_OK (0) each, else the library keeps its own settings.
    threads: int = configure(_CONFIG_MULTITHREAD)
    statistics: int = configure(_CONFIG_MEMSTATUS, ctypes.c_int(0))
    return threads == 0 and statistics == 0


def run() -> int:
    """Set SQLite up, then serve as :func:`.writer.main` does."""
    configure_sqlite()
    from .writer import main

    return main()


if __name__ == "__main__":
    sys.exit(run())
