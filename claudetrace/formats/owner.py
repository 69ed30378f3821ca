"""Who is importing a half-stored recording, and whether they still are.

An import writes a cassette's recording without its end until the last batch,
and marks it with its importer (:func:`this_importer`: host, pid and, on Linux,
the process's start time).  A second import of the cassette, and ``doctor``,
read that mark: :func:`importing_elsewhere` (the recording model's, which
``prune`` asks too) says who still imports it, or None when nobody does (the
process is gone, or its pid now names another process: one started at
another time).  :func:`sweep_spools` removes by the same mark
the spool folders of importers that are gone.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from ..recording import importing_elsewhere as importing_elsewhere  # re-exported
from ..recording import start_time as start_time  # re-exported

#: The names of spool folders (:mod:`.spool`) begin with this, then ``HOST-PID-START-``.
FOLDER_PREFIX = "claudetrace-spool-"


def this_importer() -> dict[str, Any]:
    """This process's mark on a recording it is importing."""
    mark: dict[str, Any] = {"host": os.uname().nodename, "pid": os.getpid()}
    started = start_time(os.getpid())
    if started is not None:
        mark["started"] = started
    return mark


def sweep_spools(where: str | None = None, *, keep: str | None = None) -> list[str]:
    """Remove the spool folders (:mod:`.spool`) in ``where`` (the temporary
    folder) of processes on this host that are gone (killed before they could
    remove their own), but ``keep``; the folders removed.  Cheap where there
    are none: one listing of the folder, nothing written."""
    import shutil
    import tempfile

    try:
        where = where or tempfile.gettempdir()
    except OSError:  # no usable temporary folder (a full disk): nothing to sweep
        return []
    here = os.uname().nodename.replace(os.sep, "_")
    removed = []
    with contextlib.suppress(OSError), os.scandir(where) as entries:
        for entry in entries:
            if not entry.name.startswith(FOLDER_PREFIX) or entry.path == keep:
                continue
            parts = entry.name[len(FOLDER_PREFIX):].rsplit("-", 3)
            if len(parts) != 4 or parts[0] != here or not (
                    parts[1].isdigit() and parts[2].isdigit()):
                continue
            pid, started = int(parts[1]), int(parts[2])
            mark = {"host": os.uname().nodename, "pid": pid}
            if started:
                mark["started"] = started
            try:
                mine = entry.is_dir(follow_symlinks=False) and (
                    entry.stat(follow_symlinks=False).st_uid == os.getuid())
            except OSError:
                continue
            if mine and importing_elsewhere(mark) is None:
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(entry.path)
    return removed
