"""Faults a replay injects on purpose, so that hosts can test their error handling.

A fault SPEC is ``KIND[=VALUE]@N``: it fires once the fake CLI has written N
complete lines to stdout (``@0`` before the first one).  The kinds:

=====================  ===============================================================
spec                   what the host sees
=====================  ===============================================================
``crash@N``            a crash message on stderr, then exit status 1 (stdout closes)
``signal=SIG@N``       the CLI killed by SIG (``KILL``, ``SIGTERM``, ``9`` …)
``exit=CODE@N``        exit status CODE (0-255) without a result line
``hang@N``             no more output; stdin is read and ignored until the host closes
                       it (then exit status 1) or kills the process
``delay=SECONDS@N``    a pause of SECONDS before the next line
``garbage@N``          one line that is not JSON, then the replay goes on
``truncate@N``         the first half of the next line with no newline, then exit 1
``stderr=TEXT@N``      TEXT written to stderr as one line, then the replay goes on
=====================  ===============================================================

Whenever the fake CLI stops (crash, signal, exit, truncate, or a hang the host
gives up on) its stdout is closed with the process, so the host sees EOF at once.
A fault fires as soon as N lines are out (``truncate`` when the next line is due).
A replay with faults does not report recorded input the host never sent.
"""

from __future__ import annotations

import re
import signal as signals
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from ..errors import ReplayError

#: Every fault kind, with the form of its SPEC.
FORMS: Final = {
    "crash": "crash@N",
    "signal": "signal=SIG@N",
    "exit": "exit=CODE@N",
    "hang": "hang@N",
    "delay": "delay=SECONDS@N",
    "garbage": "garbage@N",
    "truncate": "truncate@N",
    "stderr": "stderr=TEXT@N",
}
#: Kinds that end the fake CLI.
TERMINAL: Final = frozenset({"crash", "signal", "exit", "truncate", "hang"})
_NEEDS_VALUE: Final = frozenset({"signal", "exit", "delay", "stderr"})

#: The line ``garbage@N`` writes: it opens like a JSON object but is not one, so a
#: host that skips non-JSON lines (as the Python SDK does) still meets it.
GARBAGE: Final = b"{claudetrace injected garbage: this line is not JSON}\n"

_SPEC: Final = re.compile(r"(?s)(?P<kind>[a-z]+)(?:=(?P<value>.*))?@(?P<at>\d+)")


class BadFault(ReplayError):
    """A fault SPEC that cannot be parsed."""

    exit_code = 2

    def __init__(self, message: str, *, spec: str) -> None:
        super().__init__(message)
        self.spec = spec


@dataclass(frozen=True)
class Fault:
    """One fault: its kind, its value (signal number, exit code, seconds, text) and N."""

    kind: str
    at: int
    value: int | float | str | None = None

    @property
    def terminal(self) -> bool:
        """Whether the fake CLI stops here."""
        return self.kind in TERMINAL

    def spec(self) -> str:
        """The SPEC that parses to this fault."""
        if self.value is None:
            return f"{self.kind}@{self.at}"
        return f"{self.kind}={self.value}@{self.at}"


def _bad(spec: str, why: str) -> BadFault:
    forms = ", ".join(FORMS.values())
    return BadFault(f"bad fault {spec!r}: {why} (forms: {forms})", spec=spec)


def parse_signal(text: str) -> int:
    """A signal number from ``KILL``, ``SIGKILL``, ``sigterm`` or ``9``."""
    name = text.strip().upper()
    if name.isdigit():
        number = int(name)
        if number in {int(s) for s in signals.Signals}:
            return number
        raise ValueError(f"no signal {number}")
    if not name.startswith("SIG"):
        name = "SIG" + name
    try:
        return int(signals.Signals[name])
    except KeyError:
        raise ValueError(f"no signal {text!r}") from None


def parse_fault(spec: str) -> Fault:
    """Parse one SPEC such as ``crash@3`` or ``stderr=boom@0``."""
    found = _SPEC.fullmatch(spec.strip())
    if found is None:
        raise _bad(spec, "expected KIND[=VALUE]@N with N a line count")
    kind, raw, at = found["kind"], found["value"], int(found["at"])
    if kind not in FORMS:
        raise _bad(spec, f"unknown fault kind {kind!r}")
    if kind in _NEEDS_VALUE and not raw:
        raise _bad(spec, f"{kind} needs a value")
    if kind not in _NEEDS_VALUE and raw is not None:
        raise _bad(spec, f"{kind} takes no value")
    value: int | float | str | None = None
    try:
        if kind == "signal":
            value = parse_signal(str(raw))
        elif kind == "exit":
            value = int(str(raw))
            if not 0 <= value <= 255:
                raise ValueError("an exit status is 0-255")
        elif kind == "delay":
            value = float(str(raw))
            if not 0 <= value < 86400:
                raise ValueError("a delay is 0 or more seconds")
        elif kind == "stderr":
            value = str(raw)
    except ValueError as exc:
        raise _bad(spec, str(exc)) from None
    return Fault(kind, at, value)


def parse_faults(specs: Iterable[str]) -> list[Fault]:
    """Parse several SPECs, ordered by N (stable for equal N)."""
    return sorted((parse_fault(spec) for spec in specs), key=lambda f: f.at)


class FaultPlan:
    """The faults of one replay, handed out as the output line count grows."""

    def __init__(self, faults: Iterable[Fault] = ()) -> None:
        self.pending = sorted(faults, key=lambda f: f.at)
        self.fired: list[Fault] = []

    def __bool__(self) -> bool:
        return bool(self.pending)

    def due(self, written: int, *, next_line: bool = True) -> list[Fault]:
        """The faults that fire once ``written`` stdout lines are out (removed from the plan).

        Without a ``next_line`` to cut, ``truncate`` faults wait for one.
        """
        out = [f for f in self.pending if f.at <= written and (next_line or f.kind != "truncate")]
        self.pending = [f for f in self.pending if f not in out]
        self.fired.extend(out)
        return out

    def remaining(self) -> list[Fault]:
        """Faults not fired yet (all of them fire when the recording's output ends)."""
        out, self.pending = self.pending, []
        self.fired.extend(out)
        return out


__all__ = [
    "FORMS",
    "GARBAGE",
    "TERMINAL",
    "BadFault",
    "Fault",
    "FaultPlan",
    "parse_fault",
    "parse_faults",
    "parse_signal",
]
