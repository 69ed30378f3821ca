"""Ctrl-C held back while something must not be stopped half way.

Imports only :mod:`signal`: the proxy takes it before its child starts.
"""

from __future__ import annotations

import signal


class HeldInterrupts:
    """Ctrl-C (SIGINT) noted, not raised, until :meth:`release`: from the proxy's
    first lines until its forwarder takes it
    (:class:`~claudetrace.spawn.SignalForwarder`, which sends it to the child), and
    while an import that failed takes its half-stored recording back out
    (:mod:`claudetrace.store.ingest`).

    Python's own handler raises ``KeyboardInterrupt`` at whatever bytecode runs
    next, and one raised in code the interpreter calls by itself is printed and
    dropped ("Exception ignored in"): in an import, a module lock's weakref
    callback is such code, and the Ctrl-C was lost, the child left to run to its
    end (one start in a few hundred on a loaded machine).
    """

    def __init__(self) -> None:
        self.signals: list[int] = []
        self.previous: object = None
        try:  # noqa: SIM105 - contextlib is one import more before the child starts
            self.previous = signal.signal(signal.SIGINT, self._note)
        except ValueError:  # not the main thread: signals are not ours to take
            pass

    def _note(self, signum: int, _frame: object) -> None:
        self.signals.append(signum)

    def release(self) -> bool:
        """Put the handler found back; True when a Ctrl-C came meanwhile."""
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)  # type: ignore[arg-type]
            self.previous = None
        return bool(self.signals)
