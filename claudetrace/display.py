"""Recorded and user-given text made safe to print: the one escaping every command uses.

What a recording holds was written by a host, the CLI, a tool or a model, and
what a user names (a file, a ``--name``, a session) may be anything.  Printed as
they are, such texts could drive the terminal of whoever reads them: ``ESC [2J``
clears the screen, ``ESC ]0;…BEL`` retitles the window, ``ESC ]52;…`` writes the
clipboard, ``ESC P`` starts a device control string, a carriage return hides what
came before it, and a bidi override (U+202E) makes the text after it read
backwards, so that what is shown is not what is there.  :func:`visible` writes
each of them as an escape a person can read:

- every C0 control (tab and newline included), DEL and every C1 control (the
  8-bit CSI, OSC, DCS and ST among them) as ``\\xNN``, so no escape, control or
  string sequence can start (its ESC or introducer is no longer there);
- the Unicode bidi controls (U+061C, U+200E/F, U+202A to U+202E, U+2066 to U+2069) and
  the line and paragraph separators (U+2028/9) as ``\\uNNNN``;
- a lone surrogate (bytes that were not UTF-8, decoded with
  ``surrogateescape``) as ``\\uNNNN``, which no stream refuses to encode.

Rich reads ``[bold]``, ``[link=…]`` and ``[/]`` in a string as markup: text
handed to Rich as a string goes through :func:`markup` (text in a ``Text`` is
never read as markup).  :func:`say` writes one message line through
:func:`visible`.  Pages (the HTML report, the web UI) lay out newlines and tabs
themselves and use :func:`visible_text` / :func:`visible_data`: the same rule
with those two kept.
"""

from __future__ import annotations

import datetime as dt
import re
import sys
from typing import IO, Any, Final

#: The characters other than C0 controls that :func:`visible` escapes: DEL, C1,
#: bidi controls, line and paragraph separators, lone surrogates.
_UNSAFE_ABOVE_C0: Final = (
    "\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff")
#: What :func:`visible` escapes (see the module's docstring).
UNSAFE: Final = re.compile(f"[\x00-\x1f{_UNSAFE_ABOVE_C0}]")
#: What :func:`visible_json` escapes: JSON already writes C0 controls as escapes.
_UNSAFE_IN_JSON: Final = re.compile(f"[{_UNSAFE_ABOVE_C0}]")
#: What :func:`visible_text` escapes: the same but newline and tab.
UNSAFE_IN_TEXT: Final = re.compile(f"[\x00-\x08\x0b-\x1f{_UNSAFE_ABOVE_C0}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every control character, bidi control and lone surrogate written
    as ``\\xNN`` / ``\\uNNNN``: nothing in it can move the cursor, change the
    terminal's state, start a new line or reorder what follows."""
    # Printable text (most of it) has none of them: a C loop tells.
    return text if text.isprintable() else UNSAFE.sub(_escape, text)


def visible_json(text: str) -> str:
    """JSON text with DEL, C1 and bidi controls, line separators and lone surrogates
    written as ``\\uNNNN`` escapes: the same JSON value, and nothing in it can
    reorder or control the terminal it is printed on (``json.dumps`` does this with
    its default ``ensure_ascii``; msgspec writes such characters as they are)."""
    if text.isascii() and "\x7f" not in text:  # nothing to escape: a scan in C
        return text
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def visible_text(text: str) -> str:
    """:func:`visible` for a page (the HTML report, the web UI), which lays out
    newlines and tabs itself: those are kept, every other control character, bidi
    control and lone surrogate is written as ``\\xNN`` / ``\\uNNNN`` as on a
    terminal, so that a page shows what is there, in its order."""
    return text if text.isprintable() else UNSAFE_IN_TEXT.sub(_escape, text)


def visible_data(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, tuples, strings, numbers) with every
    string, keys included, through :func:`visible_text`."""
    if isinstance(value, str):
        return visible_text(value)
    if isinstance(value, dict):
        return {visible_data(k): visible_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [visible_data(item) for item in value]
    return value


def visible_lines(text: str) -> str:
    """:func:`visible` of each line of ``text``: its newlines kept, all else escaped."""
    return "\n".join(visible(line) for line in text.split("\n"))


def markup(text: str) -> str:
    """``text`` for a Rich markup string: :func:`visible`, and its square brackets
    escaped so that ``[/]`` or ``[link=…]`` print as themselves."""
    from rich.markup import escape

    return escape(visible(text))


class _VisibleWriter:
    """A text stream's ``write`` through :func:`visible_lines`."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(visible_lines(text))

    def flush(self) -> None:
        self._stream.flush()


def for_terminal(stream: IO[str]) -> IO[str]:
    """``stream``, or, when it is a terminal, ``stream`` writing what it is given
    through :func:`visible_lines`: for a command whose output is a file format
    (a cassette, a report) that a person may send to the terminal by leaving
    out ``-o``; a pipe or a file still gets the exact text."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return _VisibleWriter(stream) if tty else stream  # type: ignore[return-value]


def say(message: str, *, err: bool = False) -> None:
    """Write one line, :func:`visible`, to stdout (or stderr with ``err``)."""
    stream = sys.stderr if err else sys.stdout
    stream.write(visible(message) + "\n")
    stream.flush()


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``1 turn``, ``2 turns`` (``many``: the plural, when not the noun and an s)."""
    return f"{n} {noun if n == 1 else many or noun + 's'}"


#: Characters of an id (a session's, as a transcript names it) a message shows at most.
ID_SHOWN: Final = 64


def short_id(text: str, most: int = ID_SHOWN) -> str:
    """``text`` (an id from recorded data, which may be any length) as a message shows
    it: whole when short, else its first characters and an ellipsis."""
    return text if len(text) <= most else text[:most - 1] + "…"


def when(ns: int | None) -> str:
    """A wall-clock time (local) for a Unix timestamp in nanoseconds."""
    if ns is None:
        return "—"
    return dt.datetime.fromtimestamp(ns / 1e9).strftime("%Y-%m-%d %H:%M:%S")


__all__ = ["ID_SHOWN", "UNSAFE", "UNSAFE_IN_TEXT", "for_terminal", "markup", "plural", "say",
           "short_id", "visible", "visible_data", "visible_lines", "visible_text", "when"]
