"""Record modes for test cassettes (vcrpy / pytest-recording semantics, one session each).

A test cassette holds exactly one CLI session, so vcrpy's per-request modes are
adapted to whole sessions:

=================  ============================================================
mode               what a test using the ``claude_cli`` fixture gets
=================  ============================================================
``none``           replay only; a missing cassette fails the test at setup
``once``           replay if the cassette exists, else record it
``new_episodes``   replay if the cassette exists; if the host diverges from it
                   (a new episode), the test is run again against the real CLI
                   and the new session replaces the cassette; missing → record
``all``            always record against the real CLI; the cassette is replaced
                   only when the test passes (a failing run keeps the old one)
``rewrite``        as ``all``: nothing is deleted before a new recording
                   replaces it (vcrpy's rewrite deletes first)
=================  ============================================================

Recording always goes through ``claudetrace proxy`` to the real CLI, and a
recorded cassette is written only when the test passes.  The default is ``none``
when ``$CI`` is set (so CI never calls a real API by accident), else ``once``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import Enum

from .errors import ClaudeTraceError


class BadRecordMode(ClaudeTraceError):
    """A record mode that is not one of :class:`RecordMode`'s values."""

    def __init__(self, message: str, *, value: object) -> None:
        super().__init__(message)
        self.value = value


class RecordMode(str, Enum):
    """How a test treats its cassette: replay it, record it, or both."""

    NONE = "none"
    ONCE = "once"
    NEW_EPISODES = "new_episodes"
    ALL = "all"
    REWRITE = "rewrite"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: str | RecordMode) -> RecordMode:
        """The mode named by ``value`` (``new-episodes`` is accepted too)."""
        if isinstance(value, RecordMode):
            return value
        text = str(value).strip().lower().replace("-", "_")
        try:
            return cls(text)
        except ValueError:
            choices = ", ".join(mode.value for mode in cls)
            raise BadRecordMode(
                f"unknown claude record mode {value!r} (choose from {choices})", value=value
            ) from None

    @classmethod
    def default(cls, environ: Mapping[str, str] | None = None) -> RecordMode:
        """``none`` under CI (``$CI`` set and not false), else ``once``."""
        env = os.environ if environ is None else environ
        ci = env.get("CI", "").strip().lower()
        return cls.NONE if ci not in ("", "0", "false", "no") else cls.ONCE

    @property
    def may_record(self) -> bool:
        """Whether this mode ever talks to the real CLI."""
        return self is not RecordMode.NONE


def choose_mode(
    *,
    option: str | None = None,
    marker: str | None = None,
    ini: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> RecordMode:
    """The effective mode: command line, else marker, else ini option, else the default.

    The command line wins over a test's marker because it is the run's explicit
    intent (``--claude-record-mode=rewrite`` re-records everything it selects).
    """
    for value in (option, marker, ini):
        if value is not None and str(value).strip():
            return RecordMode.parse(value)
    return RecordMode.default(environ)


def plan(mode: RecordMode, exists: bool) -> str:
    """What the fixture does first: ``"replay"``, ``"record"`` or ``"missing"``.

    ``"missing"`` means the test cannot run (mode ``none`` without a cassette).
    """
    if mode in (RecordMode.ALL, RecordMode.REWRITE):
        return "record"
    if exists:
        return "replay"
    return "missing" if mode is RecordMode.NONE else "record"


__all__ = ["BadRecordMode", "RecordMode", "choose_mode", "plan"]
