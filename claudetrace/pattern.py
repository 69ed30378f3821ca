"""User-supplied regular expressions, compiled by RE2 (time linear in the text).

A ``redact`` pattern (pytest marker, ini option, cassette header, ``replay
--redact``), a ``match_regex`` rule and a fake API script's prompt pattern all
come from the user and run on recorded or live text: with Python's engine a
pattern such as ``(a+)+$`` can take for ever on one 30-character line.  RE2 has
no look-around nor back-references; a pattern that needs them is refused in one
line (:class:`BadPattern`) when it is compiled, before anything is recorded.
"""

from __future__ import annotations

from typing import Any

from .errors import ClaudeTraceError


class BadPattern(ClaudeTraceError):
    """A user's regular expression that the linear-time engine (RE2) cannot take."""

    exit_code = 2

    def __init__(self, message: str, *, pattern: str) -> None:
        super().__init__(message)
        self.pattern = pattern


def linear_regex(pattern: str, *, what: str = "pattern") -> Any:
    """``pattern`` compiled by RE2 (``search``, ``fullmatch``, ``sub``, ``groups``
    and ``pattern`` as in :mod:`re`); a :class:`BadPattern` naming ``what`` if
    RE2 cannot take it."""
    import re2

    if not isinstance(pattern, str):
        raise BadPattern(f"{what} {pattern!r} is not a string", pattern=repr(pattern))
    options = re2.Options()
    options.log_errors = False  # the error is ours to tell, not RE2's log's
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise BadPattern(
            f"{what} {pattern!r} is not one the linear-time engine (RE2) takes: {reason}",
            pattern=pattern) from None


__all__ = ["BadPattern", "linear_regex"]
