"""Writing recorded text for people: on a terminal or into a pipe.

What a recording holds may hold terminal control sequences; every human view
(``show``, ``tail``, ``sessions``, every message naming a file or a session)
writes recorded and user-given text through :func:`claudetrace.display.visible`,
the one escaping (control characters as ``\\xNN``, bidi controls as
``\\uNNNN``); this module only colours it.

Colours are SGR codes written here, only on a terminal, and never when
``NO_COLOR`` is set or ``TERM`` is ``dumb``: a pipe gets plain text.
"""

from __future__ import annotations

import os
from typing import IO, Any, Final

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
    words are ignored).  The text must already be :func:`~claudetrace.display.visible`.
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
