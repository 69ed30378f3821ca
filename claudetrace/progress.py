"""Progress bars for long work (import, export, otel --all, db upgrade), on terminals only.

:func:`track` wraps an iterable for the length of a ``with``: on a terminal
(stderr is a TTY) it draws a rich bar with the count done, the total, the rate
and the time left, and removes it when done; anywhere else (a pipe, a file, a test) it draws nothing
and costs nothing.  ``CLAUDETRACE_PROGRESS=0`` turns bars off, ``=1`` forces
them (for a terminal that does not say it is one).

Only one bar is drawn at a time: a bar asked for while another is showing
(a migration run while a command shows its own) stays silent.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from .config import PROGRESS_ENV
from .display import markup

T = TypeVar("T")

_active = False


def enabled() -> bool:
    """Whether bars are drawn (stderr is a terminal, unless the environment says)."""
    forced = os.environ.get(PROGRESS_ENV, "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    try:
        return os.isatty(2)
    except (OSError, ValueError):
        return False


@contextmanager
def track(
    items: Iterable[T], description: str, *, total: int | None = None, unit: str = "items",
    size: Callable[[T], int] | None = None,
) -> Iterator[Iterator[T]]:
    """``items`` to iterate inside the ``with``, showing a bar on a terminal;
    each item counts as ``size(item)`` units (a page of lines) if ``size`` is given.

    The bar shows the count done, the total, the rate and the time left; it is
    gone when the ``with`` ends, by an error too, before the error is reported::

        with track(events, "exporting", total=n, unit="events") as shown:
            write_cassette(out, header, shown)
    """
    global _active
    if _active or total == 0 or not enabled():
        yield iter(items)
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(f"{{task.fields[rate]}} {unit}/s"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    # Updating the bar costs microseconds: do it a few hundred times in all,
    # not once per event of a 200k-line session.
    step = max(1, total // 400) if total else 200
    console = Console(stderr=True, force_terminal=True)
    _active = True
    try:
        with Progress(*columns, console=console, transient=True) as bar:
            # The description names files and sessions: escaped, and never markup.
            task = bar.add_task(markup(description), total=total, rate="?")

            def shown() -> Iterator[T]:
                n = 0
                last = 0
                for item in items:
                    yield item
                    n += 1 if size is None else size(item)
                    if n - last >= step:
                        last = n
                        speed = bar.tasks[0].speed
                        rate = "?" if speed is None else f"{speed:,.0f}"
                        bar.update(task, completed=n, rate=rate)
                bar.update(task, completed=n)

            yield shown()
    finally:
        _active = False


def count_lines(path: str | os.PathLike[str]) -> int:
    """Newlines in a file (the events of a cassette, plus its header), read fast."""
    lines = 0
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            lines += block.count(b"\n")
    return lines


__all__ = ["count_lines", "enabled", "track"]
