"""The grid the ``usage`` tables are written in: Rich's ``Table`` look, row by row.

Rich's :class:`~rich.table.Table` measures and lays out every cell as a
renderable of its own (some 2 ms a row); :class:`Grid` sizes its cells' text
once and writes each line straight out: plain where the console shows no
colour, else with the codes Rich writes for its styles (:func:`show`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from itertools import zip_longest
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

#: A cell: text in its row's style, Rich :class:`~rich.text.Text` with its own, or a
#: count (written ``1,234``, right-aligned).
Cell = str | Text | int
#: A cell as it is written: a count made text.
Shown = str | Text


#: A count as the tables write it: ``1,234``.
COUNT = "{:,}".format
#: Whether a text's characters are printable ASCII and box drawing (``└``): each
#: one cell wide (a C scan, where asking Rich each one's width is not).
_BOXES = re.compile("[\x20-\x7e\u2500-\u257f]*").fullmatch


def _width(text: str) -> int:
    return len(text) if text.isascii() else cell_len(text)


class Grid:
    """A table as Rich's :class:`~rich.table.Table` prints it (its default box,
    bold headers, sections, a centred caption), written row by row: Rich
    measures and lays out every cell as a renderable of its own, some 2 ms a row
    (25 s for 10,000 sessions); this is its cells' text, sized once, and plain
    lines where the console shows no colour (a pipe, a file).

    Each column is as wide as its widest cell; a table wider than the console
    narrows its widest left-aligned columns and wraps their cells, as Rich
    does."""

    def __init__(self, columns: list[tuple[str, str]]) -> None:
        #: ``(header, justify)``: ``left`` or ``right``.
        self.columns = columns
        #: ``(cells, row style)``, or None: a line between sections.
        self.rows: list[tuple[list[Cell], str] | None] = []
        self.caption: Text | None = None
        #: The columns whose cells are all counts (set by :meth:`_widths`).
        self._counted: set[int] = set()

    def add_row(self, *cells: Cell, style: str = "") -> None:
        self.rows.append((list(cells), style))

    def add_section(self) -> None:
        self.rows.append(None)

    def _widths(self, max_width: int) -> list[int]:
        """Each column's width (and which hold only counts: :attr:`_counted`)."""
        widths = [_width(name) for name, _ in self.columns]
        rows = [row[0] for row in self.rows if row is not None]
        counted: set[int] = set()
        # A column at a time (a row has no more cells than there are columns; a
        # shorter one's missing cells are None): its cells' lengths where they are
        # all ASCII, each character a cell wide; a count's, its longest's.
        for j, column in enumerate(zip_longest(*rows)):
            kinds = set(map(type, column))
            kinds.discard(type(None))
            present: Any = column if None not in column else [
                c for c in column if c is not None]
            numbers: Any
            texts: Any
            if kinds == {int}:
                numbers, texts = present, []
            elif kinds == {str}:
                numbers, texts = [], present
            else:
                numbers = [cell for cell in present if type(cell) is int]
                texts = [cell if isinstance(cell, str) else cell.plain for cell in present
                         if isinstance(cell, (str, Text))]
            if numbers:
                widths[j] = max(widths[j], len(COUNT(max(numbers))), len(COUNT(min(numbers))))
                if texts:  # counts beside texts: written as texts
                    for row in rows:
                        if j < len(row) and type(row[j]) is int:
                            row[j] = COUNT(row[j])
                else:
                    counted.add(j)
            if texts:
                joined = "".join(texts)
                widths[j] = max(widths[j], max(
                    map(len, texts) if joined.isascii() or _BOXES(joined)
                    else map(_width, texts)))
        self._counted = counted
        excess = sum(widths) + 3 * len(widths) + 1 - max_width
        narrow = [j for j, (_, justify) in enumerate(self.columns) if justify == "left"]
        while excess > 0:
            j = max(narrow, key=lambda k: widths[k])
            if widths[j] <= 4:
                break
            widths[j] -= 1
            excess -= 1
        return widths

    @staticmethod
    def _rule(widths: list[int], left: str, line: str, cross: str, right: str) -> str:
        return left + cross.join(line * (w + 2) for w in widths) + right

    def _captions(self, widths: list[int]) -> list[str]:
        width = sum(widths) + 3 * len(widths) + 1
        out = []
        for line in (self.caption.plain.split("\n") if self.caption else []):
            space = max(0, width - _width(line))
            out.append(" " * (space // 2) + line + " " * (space - space // 2))
        return out

    def lines(self, console: Console, max_width: int, *, styled: bool = False,
              ) -> Iterator[str]:
        """The table as text, a line at a time: plain, or (``styled``) with the
        terminal codes of its styles as Rich writes them (a row of text cells in
        one format of its style's codes; any other row through Rich's segments)."""
        widths = self._widths(max_width)
        if styled:
            yield from self._styled(console, widths)
            return
        yield from self._plain(console, widths)

    def _fields(self, widths: list[int]) -> list[str]:
        """Each column's replacement field in a row's format: its width and side,
        and a count's ``,`` (written by the format itself: no text made for it)."""
        return [f"{{:{'>' if justify == 'right' else '<'}{w}{',' if j in self._counted else ''}}}"
                for j, ((_, justify), w) in enumerate(zip(self.columns, widths, strict=True))]

    def _fits(self, widths: list[int]) -> Callable[[list[Cell]], str | None]:
        """What writes a row of text cells in one format where it fits (every
        character a cell, no cell wider than its column), else gives None."""
        fast = "│ " + " │ ".join(self._fields(widths)) + " │"
        fast_format = fast.format
        size = sum(widths) + 3 * len(widths) + 1
        count = len(widths)
        edges = size + 2 * (count + 1)  # a line's UTF-8 bytes when its text is ASCII
        counted = sorted(self._counted)
        #: Whether each character of a text (not ASCII) is one cell wide, by text.
        single: dict[str, bool] = {}

        def one_cell_each(texts: list[str]) -> bool:
            for text in texts:
                if not text.isascii():
                    found = single.get(text)
                    if found is None:
                        found = single[text] = cell_len(text) == len(text)
                    if not found:
                        return False
            return True

        def fits(cells: list[Cell]) -> str | None:
            if len(cells) != count:
                return None
            try:
                line: str = fast_format(*cells)
            except (TypeError, ValueError):  # a cell of Rich's Text, a text in counts
                return None
            if len(line) != size:
                return None
            # Only ASCII besides its edges (three bytes each in UTF-8), or only
            # box drawing (the breakdown's "└"): every character a cell.
            if len(line.encode()) == edges or _BOXES(line):
                return line
            # Every cell text now (a Text raised), but the counts.
            texts: Any = [c for c in cells if type(c) is not int] if counted else cells
            return line if one_cell_each(texts) else None

        return fits

    def _plain(self, console: Console, widths: list[int]) -> Iterator[str]:
        fits = self._fits(widths)
        row = self._plain_row(console, widths)
        yield self._rule(widths, "┏", "━", "┳", "┓")
        yield from row([name for name, _ in self.columns], "┃")
        yield self._rule(widths, "┡", "━", "╇", "┩")
        section = self._rule(widths, "├", "─", "┼", "┤")
        for found in self.rows:
            if found is None:
                yield section
                continue
            line = fits(found[0])
            if line is not None:
                yield line
            else:
                yield from row(found[0], "│")
        yield self._rule(widths, "└", "─", "┴", "┘")
        yield from self._captions(widths)

    def _plain_row(self, console: Console, widths: list[int],
                   ) -> Callable[[list[Cell], str], list[str]]:
        """What writes any row as plain lines (its cells, its edge)."""
        right = [justify == "right" for _, justify in self.columns]
        blank = [""] * len(widths)
        fast = "│ " + " │ ".join(f"{{:{'>' if r else '<'}{w}}}"
                                 for r, w in zip(right, widths, strict=True)) + " │"
        #: A text cell's lines, by text and column, where it wraps.
        wrapped: dict[tuple[str, int], list[str]] = {}
        #: The lines below a row's first, by the cells that wrap (and the edge).
        following: dict[tuple[Any, ...], list[str]] = {}

        def row(given: list[Cell], edge: str) -> list[str]:
            cells: list[Shown] = [COUNT(c) if isinstance(c, int) else c for c in given]
            texts = [cell for cell in cells if isinstance(cell, str)]
            if len(texts) == len(cells) and (
                    "".join(texts).isascii() or all(_width(t) == len(t) for t in texts)):
                # Every character a cell: the cells wider than their columns in lines
                # (each text once: many rows wrap the same models), the others as
                # they are, below them blanks; every line in the one format.
                every = [*texts, *blank[len(texts):]]
                columns: list[list[str]] = []
                wrapping: list[tuple[str, int]] = []
                for j, text in enumerate(every):
                    if len(text) <= widths[j]:
                        columns.append([text])
                        continue
                    key = (text, j)
                    wrapping.append(key)
                    lines = wrapped.get(key)
                    if lines is None:
                        lines = wrapped[key] = [_plain(_pad(line, widths[j], right[j]))
                                                for line in _wrap(console, text, widths[j])]
                    columns.append(lines)
                if not wrapping:  # a line
                    line = fast.format(*every)
                    return [line if edge == "│" else line.replace("│", edge)]
                # The lines below the first have only the wrapped cells' (the others
                # are a line each): the same for every row wrapping the same texts.
                below = following.get((*wrapping, edge))
                if below is None:
                    below = following[(*wrapping, edge)] = [
                        fast.format(*[c[at] if at < len(c) else "" for c in columns])
                        for at in range(1, max(map(len, columns)))]
                    if edge != "│":
                        below = [line.replace("│", edge) for line in below]
                first = fast.format(*[c[0] for c in columns])
                return [first if edge == "│" else first.replace("│", edge), *below]
            parts: list[list[str]] = []
            for j, cell in enumerate([*cells, *blank[len(cells):]]):
                text = _plain(cell)
                width = widths[j]
                space = width - _width(text)
                if space >= 0:
                    parts.append([" " * space + text if right[j] else text + " " * space])
                elif isinstance(cell, str):
                    # Many rows wrap the same text (a session's models): once each.
                    key = (cell, j)
                    lines = wrapped.get(key)
                    if lines is None:
                        lines = wrapped[key] = [_plain(_pad(line, width, right[j]))
                                                for line in _wrap(console, cell, width)]
                    parts.append(lines)
                else:
                    parts.append([_plain(_pad(line, width, right[j]))
                                  for line in _wrap(console, cell, width)])
            return [f"{edge} " + f" {edge} ".join(
                        p[at] if at < len(p) else " " * widths[j] for j, p in enumerate(parts)
                    ) + f" {edge}" for at in range(max(len(p) for p in parts))]

        return row

    def _painter(self, console: Console, widths: list[int],
                 ) -> Callable[[list[Cell], str, str], Iterator[Segment]]:
        """What writes a row as Rich's segments (its cells, style and edge)."""
        new_line = Segment.line()
        styles: dict[Any, Style] = {}

        def style_of(name: str | Style) -> Style:
            found = styles.get(name)
            if found is None:
                found = styles[name] = (name if isinstance(name, Style)
                                        else console.get_style(name, default=""))
            return found

        def cell_segments(cell: Shown, width: int, right: bool, outer: Style) -> list[Segment]:
            text = cell if isinstance(cell, str) else cell.plain
            inner = outer if isinstance(cell, str) else outer + style_of(cell.style)
            fill = " " * (width - _width(text))
            if isinstance(cell, str) or not cell.spans:  # the text and its fill, as Rich
                return [Segment(fill + text if right else text + fill, inner)]
            out = [Segment(fill, inner)] if right and fill else []
            out += [Segment(seg.text, outer + seg.style if seg.style else outer)
                    for seg in cell.render(console, end="")]
            return [*out, Segment(fill, inner)] if not right and fill else out

        def row(given: list[Cell], style: str, edge: str) -> Iterator[Segment]:
            cells: list[Shown] = [COUNT(c) if isinstance(c, int) else c for c in given]
            outer = style_of(style)
            pad = Segment(" ", outer) if style else Segment(" ")
            parts: list[list[list[Segment]]] = []
            for j, width in enumerate(widths):
                cell = cells[j] if j < len(cells) else ""
                right = self.columns[j][1] == "right"
                if _width(cell if isinstance(cell, str) else cell.plain) <= width:
                    parts.append([cell_segments(cell, width, right, outer)])
                else:
                    parts.append([cell_segments(_pad(line, width, right), width, right, outer)
                                  for line in _wrap(console, cell, width)])
            for at in range(max(len(p) for p in parts)):
                yield Segment(edge)
                for j, p in enumerate(parts):
                    if at < len(p):
                        yield pad
                        yield from p[at]
                        yield pad
                    else:  # below a shorter cell: one blank, as Rich writes it
                        yield Segment(" " * (widths[j] + 2), outer)
                    yield Segment(edge)
                yield new_line

        return row

    def _styled(self, console: Console, widths: list[int]) -> Iterator[str]:
        """:meth:`lines` with the styles' codes: what Rich writes to a terminal."""
        from rich.console import COLOR_SYSTEMS

        system = COLOR_SYSTEMS[console.color_system or "standard"]
        paint = self._painter(console, widths)

        def text_of(segments: Iterable[Segment]) -> Iterator[str]:
            """Segments as the console writes them, a line at a time."""
            out = "".join(seg.style.render(seg.text, color_system=system)
                          if seg.style else seg.text for seg in segments)
            yield from out.split("\n")[:-1]

        fits = self._fits(widths)
        plain_row = self._plain_row(console, widths)
        formats: dict[tuple[str, str], str] = {}

        def styled(style: str, edge: str) -> str:
            """A row's format in ``style`` (each pad and cell wrapped in its codes)."""
            found = formats.get((style, edge))
            if found is None:
                start, end = console.get_style(style).render(
                    "\0", color_system=system).split("\0")
                found = formats[style, edge] = edge + edge.join(
                    f"{start} {end}{start}{field}{end}{start} {end}"
                    for field in self._fields(widths)) + edge
            return found

        def row(cells: list[Cell], style: str, edge: str) -> Iterator[str]:
            # Rich writes the text of a row without a style as it is (a text cell,
            # its pads and fill have none): the plain lines.
            if not style and not any(isinstance(cell, Text) for cell in cells):
                yield from plain_row(cells, edge)
            elif style and fits(cells) is not None:
                yield styled(style, edge).format(*cells)
            else:
                yield from text_of(paint(cells, style, edge))

        section = self._rule(widths, "├", "─", "┼", "┤")
        yield self._rule(widths, "┏", "━", "┳", "┓")
        yield from row([name for name, _ in self.columns], "bold", "┃")
        yield self._rule(widths, "┡", "━", "╇", "┩")
        for found in self.rows:
            if found is None:
                yield section
                continue
            cells, style = found
            line = None if style else fits(cells)
            if line is not None:
                yield line
            else:
                yield from row(cells, style, "│")
        yield self._rule(widths, "└", "─", "┴", "┘")
        if self.caption:
            yield from text_of(self._caption_segments(console, widths))

    def _caption_segments(self, console: Console, widths: list[int]) -> Iterable[Segment]:
        caption = self.caption.copy() if self.caption else Text()
        caption.justify = "center"
        return console.render(caption, console.options.update(
            width=sum(widths) + 3 * len(widths) + 1))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = self._widths(options.max_width)
        if console.color_system is None or console.no_color:
            for line in self._plain(console, widths):
                yield Segment(line)
                yield Segment.line()
            return
        new_line = Segment.line()
        row = self._painter(console, widths)

        def rule(*parts: str) -> list[Segment]:
            return [Segment(self._rule(widths, *parts)), new_line]

        yield from rule("┏", "━", "┳", "┓")
        yield from row([name for name, _ in self.columns], "bold", "┃")
        yield from rule("┡", "━", "╇", "┩")
        for found in self.rows:
            if found is None:
                yield from rule("├", "─", "┼", "┤")
            else:
                yield from row(*found, "│")
        yield from rule("└", "─", "┴", "┘")
        if self.caption:
            caption = self.caption.copy()
            caption.justify = "center"
            yield from console.render(caption, options.update(
                width=sum(widths) + 3 * len(widths) + 1))


_WORD = re.compile(r"\s*\S+\s*")


def show(console: Console, table: Grid) -> None:
    """Print ``table``: its lines straight to the console's file, plain where it
    shows no colour (a pipe, a file), else with the codes Rich would write (where
    the table fits the terminal: Rich would crop a wider one); else through Rich."""
    if console.color_system is None or console.no_color:
        _write(console, table.lines(console, console.width))
        return
    widths = table._widths(console.width)
    if (console.legacy_windows or console.is_jupyter or console.record
            or sum(widths) + 3 * len(widths) + 1 > console.width):
        console.print(table)
        return
    _write(console, table.lines(console, console.width, styled=True))


def _write(console: Console, lines: Iterable[str]) -> None:
    """``lines`` to the console's file, some thousands at a time."""
    write = console.file.write
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) == 4096:
            batch.append("")
            write("\n".join(batch))
            batch.clear()
    if batch:
        batch.append("")
        write("\n".join(batch))
    console.file.flush()


def _wrap(console: Console, cell: Shown, width: int) -> list[Shown]:
    """A cell wider than its column in lines, as Rich wraps a table's cell
    (words, a word longer than the line cut with ``…``); plain ASCII text
    without Rich's objects."""
    if isinstance(cell, str) and cell.isascii() and cell.isprintable():
        words = _WORD.findall(cell)
        if "".join(words) == cell:
            lines: list[str] = []
            line = ""
            for word in words:
                if line and (len(line) + len(word.rstrip()) > width
                             or len(word.rstrip()) > width):
                    lines.append(line)
                    line = word
                else:
                    line += word
            lines.append(line)
            return [text if len(text) <= width else text[:width - 1] + "…"
                    for text in (line.rstrip() for line in lines)]
    text = Text(cell) if isinstance(cell, str) else cell
    return list(text.wrap(console, width, overflow="ellipsis"))


def _plain(cell: Shown) -> str:
    return cell if isinstance(cell, str) else cell.plain


def _pad(line: Shown, width: int, right: bool) -> Shown:
    if isinstance(line, str):
        text = line.rstrip()
        space = " " * (width - _width(text))
        return space + text if right else text + space
    out = line.copy()
    out.rstrip()
    room = width - _width(out.plain)
    if room > 0:
        if right:
            out.pad_left(room)
        else:
            out.pad_right(room)
    return out
