"""The CPU time of processes a benchmarked command leaves behind when it exits (Linux).

The proxy starts its indexer in a session of its own and exits before it has
stored everything: the indexer outlives the process the benchmark times, so its
CPU time is in no resource usage the benchmark gets from its own children.
Inside :func:`adopting`, this process is a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``): the orphans of its descendants become its
children instead of init's, and waiting for one with ``wait4`` returns its whole
resource usage, the children it waited for included (live telemetry's worker).
Nothing in the measured programs knows about it.

An adopted process is told from the ones this process started by its process
group (the indexer starts a session of its own; commands a benchmark starts stay
in the benchmark's group), and a run's from another's by a marker in its
environment (:data:`RUN_ENV`, inherited from the command the run started), read
as soon as the command has exited: a process that has exited shows its
environment no more.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from collections.abc import Iterator
from typing import NamedTuple

from ..recording import stat_fields

#: Set in a benchmarked command's environment; what it leaves behind inherits it.
RUN_ENV = "CLAUDETRACE_BENCH_RUN"
_PR_SET_CHILD_SUBREAPER = 36


class RunUsage(NamedTuple):
    """What a run's orphans used: CPU seconds (user + system, all of them) and the
    largest peak RSS among them and their children (KiB, ``ru_maxrss``)."""

    cpu_seconds: float
    peak_rss_kib: int


class TreeCpu(NamedTuple):
    """CPU seconds (user + system) a run's adopted processes have used so far:
    their own, and their descendants', living or waited for (:meth:`Orphans.cpu_now`)."""

    own: float
    descendants: float


class Orphans:
    """The processes adopted while :func:`adopting`, told apart by their run's marker."""

    def __init__(self, enabled: bool) -> None:
        #: False where this process cannot adopt orphans (not Linux): nothing is measured.
        self.enabled = enabled
        self._lock = threading.Lock()
        #: Each adopted pid seen so far and its run's marker ("" when not a run's, None
        #: when it had exited before it was seen).
        self._runs: dict[int, str | None] = {}
        self._reaped: set[int] = set()
        #: Adopted pids that had exited before they could be told whose they were,
        #: not yet counted in a run: the next run asked for (:meth:`usage`) takes them.
        self._untold: list[int] = []

    def look(self) -> None:
        """Note the run of every orphan adopted so far (call it as soon as a benchmarked
        command has exited, while what it left behind still runs)."""
        if not self.enabled:
            return
        with self._lock:
            for pid in _adopted():
                if pid not in self._runs:
                    self._runs[pid] = _marker(pid)
                    if self._runs[pid] is None:
                        self._untold.append(pid)

    def usage(self, marker: str) -> RunUsage | None:
        """Wait for every process run ``marker`` left behind; their resource usage
        (with their own children's), or None when none was seen.

        A process that had exited before it could be told whose it was (a tiny
        run's indexer, done before its proxy, under load) counts in the run asked
        for next: the benchmarks ask for each run's usage before they start the
        next run, so whatever was adopted meanwhile and could not be told is this
        run's.  (Before, such a run read None: no figure.)"""
        self.look()
        with self._lock:
            pids = [pid for pid, run in self._runs.items() if run == marker]
            pids += self._untold
            self._untold = []
        if not pids:
            return None
        total, peak = 0.0, 0
        for pid in pids:
            _, _, usage = os.wait4(pid, 0)
            with self._lock:
                self._reaped.add(pid)
            total += usage.ru_utime + usage.ru_stime
            peak = max(peak, usage.ru_maxrss)
        return RunUsage(total, peak)

    def cpu_now(self, marker: str) -> TreeCpu | None:
        """The CPU time run ``marker``'s processes have used so far, read while they
        run (``/proc``): their own, and their descendants' (the indexer's writer),
        living or waited for; None when none of them is running.  What ``wait4``
        gives later holds this and whatever they do after it."""
        self.look()
        with self._lock:
            pids = [pid for pid, run in self._runs.items()
                    if run == marker and pid not in self._reaped]
        own = descendants = 0.0
        seen = False
        for pid in pids:
            cpu = cpu_seconds(pid, waited=False)
            whole = cpu_seconds(pid)
            if cpu is None or whole is None:
                continue
            seen = True
            own += cpu
            descendants += whole - cpu + sum(filter(None, map(cpu_seconds, _descendants(pid))))
        return TreeCpu(own, descendants) if seen else None

    def reap(self) -> None:
        """Wait for every adopted process not waited for yet."""
        self.look()
        with self._lock:
            pids = [pid for pid in self._runs if pid not in self._reaped]
        for pid in pids:
            with contextlib.suppress(ChildProcessError):
                os.wait4(pid, 0)
            with self._lock:
                self._reaped.add(pid)


@contextlib.contextmanager
def adopting() -> Iterator[Orphans]:
    """This process adopts its descendants' orphans while inside; on the way out it
    waits for those it has not waited for: then, or after an error (which goes on at
    once) in a thread of its own, as they end.  Not waited for, each would stay a
    zombie of this process as long as it runs (a benchmark that failed, in a test
    session, left its indexers so for the rest of the session)."""
    enabled = _set_subreaper(True)
    orphans = Orphans(enabled)
    try:
        yield orphans
    except BaseException:
        if enabled:
            _set_subreaper(False)
            threading.Thread(target=orphans.reap, name="orphans-reap", daemon=True).start()
        raise
    orphans.reap()
    if enabled:
        _set_subreaper(False)


def _set_subreaper(on: bool) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _adopted() -> list[int]:
    """This process's children outside its process group: not started by it."""
    group = os.getpgrp()
    found = []
    for pid in _children(os.getpid()):
        with contextlib.suppress(OSError):
            if os.getpgid(pid) != group:
                found.append(pid)
    return found


def _children(pid: int) -> list[int]:
    """``pid``'s children (of any of its threads); none once it has gone."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found += [int(child) for child in handle.read().split()]
        except OSError:
            continue
    return found


def cpu_seconds(pid: int, *, waited: bool = True) -> float | None:
    """CPU seconds (user + system) ``pid`` has used so far (``/proc/PID/stat``),
    with (``waited``) those of the children it has waited for; None once it has
    gone (an exited process not yet waited for is still read)."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    # utime, stime, cutime, cstime: fields 14 to 17, in clock ticks.
    return sum(int(value) for value in fields[11:15 if waited else 13]) / os.sysconf(
        "SC_CLK_TCK")


def _descendants(pid: int) -> list[int]:
    """``pid``'s living descendants."""
    found: list[int] = []
    parents = [pid]
    while parents:
        children = _children(parents.pop())
        found += children
        parents += children
    return found


def _marker(pid: int) -> str | None:
    """The run marker in ``pid``'s environment, "" if it has none, None if it has exited."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return None
    if not environ:  # a zombie's environment is gone
        return None
    prefix = RUN_ENV.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix):].decode(errors="replace")
    return ""
