"""Writing recorded text for people: on a terminal or into a pipe.

What a recording holds was written by a host, the CLI, a tool or a model, and
may hold terminal control sequences: ``ESC [2J`` clears the screen, ``ESC ]52;…``
sets the clipboard, ``ESC ]0;…`` retitles the window, a carriage return hides
what came before it.  Shown as they are, they would drive the terminal of
whoever looks at the recording.  Every human view (``show``, ``tail``) writes
them visibly escaped by :func:`visible`: each C0 control character, DEL and each
C1 control character becomes ``\\xNN``.  (A JSON line can only carry them
escaped, ``\\u001b``; its parsed strings, stderr and lines that are not JSON
carry them raw.)

Colours are SGR codes written here, only on a terminal, and never when
``NO_COLOR`` is set or ``TERM`` is ``dumb``: a pipe gets plain text.
"""

from __future__ import annotations

import os
import re
from typing import IO, Any, Final

#: C0 controls (tab and newline included), DEL and the C1 controls.
CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f]")


def _hex(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def visible(text: str) -> str:
    """``text`` with every control character written as ``\\xNN``: nothing in it
    can move the cursor, change the terminal's state or start a new line."""
    # Printable text (most of it) has no control character: a C loop tells.
    return text if text.isprintable() else CONTROL.sub(_hex, text)


#: SGR parameters of the styles the views use.
_SGR: Final = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
    "olive": "38;5;3",
    "dark_orange": "38;5;208",
}


def wants_colour(stream: IO[Any]) -> bool:
    """Whether ``stream`` is a terminal that should get colours."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Painter:
    """Wraps text in a style's SGR codes on a terminal; leaves it plain otherwise.

    ``paint(text, "bold red")``: the style is words of :data:`_SGR` (unknown
    words are ignored).  The text must already be :func:`visible`.
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._opening: dict[str, str] = {}

    def __call__(self, text: str, style: str) -> str:
        if not self.enabled or not style:
            return text
        opening = self._opening.get(style)
        if opening is None:
            codes = ";".join(_SGR[word] for word in style.split() if word in _SGR)
            opening = self._opening[style] = f"\x1b[{codes}m" if codes else ""
        return f"{opening}{text}\x1b[0m" if opening else text
