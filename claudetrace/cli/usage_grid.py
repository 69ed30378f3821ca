"""The grid the ``usage`` tables are written in: Rich's ``Table`` look, row by row.

Rich's :class:`~rich.table.Table` measures and lays out every cell as a
renderable of its own (some 2 ms a row); :class:`Grid` sizes its cells' text
once and writes each line straight out: plain where the console shows no
colour, else with the codes Rich writes for its styles (:func:`show`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import starmap, zip_longest
from typing import Any, NamedTuple, cast

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


class _Layout(NamedTuple):
    """A table's columns: their widths and what their cells read (:meth:`Grid._layout`)."""

    widths: list[int]
    #: Each column's cells as text, a row each of :attr:`Grid.rows` but the lines
    #: between sections (a count ``1,234``, Rich's Text its text); None for a
    #: column of counts only (its rows' format writes them).
    texts: list[Sequence[str] | None]
    #: The rows whose cell in each column is not text (a count or Rich's Text
    #: among texts), or that have fewer cells than there are columns (by column).
    odd: list[list[int]]
    #: Whether each column's characters are each a cell wide.
    single: list[bool]
    #: Each column's width before narrowing to the console.
    natural: list[int]
    #: The rows with a cell of Rich's Text.
    texted: set[int]


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
        #: The last :meth:`_layout`, by the width it was made for and the rows then.
        self._laid: tuple[tuple[int, int], _Layout] | None = None

    def add_row(self, *cells: Cell, style: str = "") -> None:
        self.rows.append((list(cells), style))

    def add_section(self) -> None:
        self.rows.append(None)

    def _layout(self, max_width: int) -> _Layout:
        """Each column's width, from its cells read once (a count column's from its
        largest and smallest count, which are its longest)."""
        found = self._laid
        if found is not None and found[0] == (max_width, len(self.rows)):
            return found[1]
        rows = [row[0] for row in self.rows if row is not None]
        count = len(self.columns)
        # A column at a time (a shorter row's missing cells are blanks, as Rich
        # writes them).
        columns: list[Sequence[Cell]] = list(zip_longest(*rows, fillvalue=""))
        columns += [("",) * len(rows)] * (count - len(columns))
        texts: list[Sequence[str] | None] = []
        odd: list[list[int]] = []
        single: list[bool] = []
        natural: list[int] = []
        texted: set[int] = set()
        short = [] if set(map(len, rows)) <= {count} else [
            at for at, row in enumerate(rows) if len(row) != count]
        for (name, _), column in zip(self.columns, columns, strict=True):
            kinds = set(map(type, column))
            mine: Any
            if kinds == {int}:
                counts: Any = column
                texts.append(None)
                odd.append([])
                single.append(True)
                natural.append(max(_width(name), len(COUNT(max(counts))),
                                   len(COUNT(min(counts)))))
                continue
            if kinds == {str}:
                mine, others = column, short
            else:  # mostly text (the totals' row's first cell is Rich's Text)
                mine = list(column)
                others = [at for at, kind in enumerate(map(type, column)) if kind is not str]
                for at in others:
                    cell = column[at]
                    if isinstance(cell, int):
                        mine[at] = COUNT(cell)
                    elif isinstance(cell, Text):
                        mine[at] = cell.plain
                        texted.add(at)
                others = sorted({*others, *short})
            joined = "".join(mine)
            # Only ASCII, or only box drawing (the breakdown's "└"): a cell a character.
            each = joined.isascii() or _BOXES(joined) is not None
            texts.append(mine)
            odd.append(others)
            single.append(each)
            natural.append(max(_width(name), max(map(len if each else _width, mine), default=0)))
        widths = list(natural)
        excess = sum(widths) + 3 * len(widths) + 1 - max_width
        narrow = [j for j, (_, justify) in enumerate(self.columns) if justify == "left"]
        while excess > 0:
            j = max(narrow, key=lambda k: widths[k])
            if widths[j] <= 4:
                break
            widths[j] -= 1
            excess -= 1
        layout = _Layout(widths, texts, odd, single, natural, texted)
        self._laid = ((max_width, len(self.rows)), layout)
        return layout

    def _widths(self, max_width: int) -> list[int]:
        """Each column's width: as wide as its widest cell, narrowed to ``max_width``."""
        return self._layout(max_width).widths

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
              ) -> list[str]:
        """The table as text, a line each (a wrapped row's lines in one): plain,
        or (``styled``) with the terminal codes of its styles as Rich writes them."""
        layout = self._layout(max_width)
        if styled:
            return self._styled(console, layout)
        return self._plain(console, layout)

    def _fields(self, layout: _Layout) -> list[str]:
        """Each column's replacement field in a row's format: its width and side,
        and a count's ``,`` (written by the format itself)."""
        return [f"{{:{'>' if justify == 'right' else '<'}{width}"
                f"{',' if texts is None else ''}}}"
                for (_, justify), width, texts in zip(
                    self.columns, layout.widths, layout.texts, strict=True)]

    def _body(self, console: Console, layout: _Layout,
              codes: Callable[[str], tuple[str, str]] | None) -> list[str | None]:
        """Each row's text (the lines between sections left out): its line, a C
        call of one format each, and below it those of its cells that wrap
        (words, as Rich wraps them); None for a row to write on its own (a cell
        of characters of other widths too wide or not a cell each; with the
        styles' ``codes``, a styled row that wraps or a cell of Rich's Text)."""
        widths = layout.widths
        right = [justify == "right" for _, justify in self.columns]
        rows = [row for row in self.rows if row is not None]
        own: set[int] = set(layout.texted) if codes is not None else set()
        #: The rows whose cells are formatted as others (as text, their first lines).
        changed: dict[int, list[Cell]] = {}

        def change(at: int) -> list[Cell]:
            found = changed.get(at)
            if found is None:
                given = rows[at][0]
                found = changed[at] = [*given, *[""] * (len(widths) - len(given))]
            return found

        #: The wrapping cells' lines, by row: ``(column, its lines)``.
        wrapping: dict[int, list[tuple[int, list[str]]]] = {}
        for j, texts in enumerate(layout.texts):
            if texts is None:
                continue
            width = widths[j]
            for at in layout.odd[j]:
                change(at)[j] = texts[at]
            if not layout.single[j]:  # characters of other widths: such a row its own
                own.update(at for at, text in enumerate(texts) if (not text.isascii()
                           and _width(text) != len(text)) or len(text) > width)
            elif layout.natural[j] > width:  # narrowed: its wider cells wrap
                wrapped: dict[str, list[str]] = {}  # many rows wrap the same text
                for at, text in enumerate(texts):
                    if len(text) <= width:
                        continue
                    if at in layout.texted or (codes is not None and rows[at][1]):
                        own.add(at)
                        continue
                    pieces = wrapped.get(text)
                    if pieces is None:
                        pieces = wrapped[text] = [
                            _plain(_pad(line, width, right[j]))
                            for line in _wrap(console, text, width)]
                    change(at)[j] = pieces[0]
                    wrapping.setdefault(at, []).append((j, pieces))
        fields = self._fields(layout)
        # A row left to be written on its own is given one that formats.
        blank = [0 if texts is None else "" for texts in layout.texts]
        cells: list[Sequence[Cell]] = [row[0] for row in rows]
        for at, mine in changed.items():
            cells[at] = mine
        for at in own:
            cells[at] = blank
        lines: list[str | None] = list(starmap(("│ " + " │ ".join(fields) + " │").format,
                                              cells))
        # Below a wrapped row's line, the others of its wrapping cells (blanks in the
        # other columns): the same for every row that wraps the same texts.
        spaces = [" " * width for width in widths]
        below: dict[tuple[Any, ...], str] = {}
        for at, cells_lines in wrapping.items():
            if at in own:
                continue
            key = tuple((j, id(found)) for j, found in cells_lines)
            more = below.get(key)
            if more is None:
                rest = []
                for line_at in range(1, max(len(found) for _, found in cells_lines)):
                    texts = list(spaces)
                    for j, found in cells_lines:
                        if line_at < len(found):
                            texts[j] = found[line_at]
                    rest.append("\n│ " + " │ ".join(texts) + " │")
                more = below[key] = "".join(rest)
            lines[at] = f"{lines[at]}{more}"
        for at in own:
            lines[at] = None
        if codes is None:
            return lines
        # A row in a style: each pad and cell in its codes, as Rich writes them.
        styled: dict[str, list[int]] = {}
        for at, row in enumerate(rows):
            if row[1] and at not in own:
                styled.setdefault(row[1], []).append(at)
        for style, ats in styled.items():
            start, end = codes(style)
            if "{" in start + end or "}" in start + end:  # not a terminal's codes
                for at in ats:
                    lines[at] = None
                continue
            row_format = "│" + "│".join(f"{start} {end}{start}{field}{end}{start} {end}"
                                        for field in fields) + "│"
            for at, line in zip(ats, starmap(row_format.format, [cells[at] for at in ats]),
                                strict=True):
                lines[at] = line
        return lines

    def _assemble(self, out: list[str], lines: list[str | None], section: str,
                  own: Callable[[tuple[list[Cell], str]], list[str]]) -> None:
        """The body's ``lines`` (:meth:`_body`) onto ``out`` with the lines between
        sections (``section``) put in, a row without a line written by ``own``."""
        if None not in lines:  # every row a line: the lines between sections put in
            whole = cast(list[str], lines)
            start = done = 0
            for stop in _sections(self.rows):
                out += whole[done:done + stop - start]
                out.append(section)
                done += stop - start
                start = stop + 1
            out += whole[done:]
            return
        body = iter(lines)
        for found in self.rows:
            if found is None:
                out.append(section)
                continue
            line = next(body)
            out += [line] if line is not None else own(found)

    def _plain(self, console: Console, layout: _Layout) -> list[str]:
        widths = layout.widths
        row = self._plain_row(console, widths)
        out = [self._rule(widths, "┏", "━", "┳", "┓"),
               *row([name for name, _ in self.columns], "┃"),
               self._rule(widths, "┡", "━", "╇", "┩")]
        section = self._rule(widths, "├", "─", "┼", "┤")
        self._assemble(out, self._body(console, layout, None), section,
                       lambda found: row(found[0], "│"))
        out.append(self._rule(widths, "└", "─", "┴", "┘"))
        out += self._captions(widths)
        return out

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
                 ) -> Callable[[list[Cell], str, str], Iterable[Segment]]:
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

        def row(given: list[Cell], style: str, edge: str) -> Iterable[Segment]:
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

    def _styled(self, console: Console, layout: _Layout) -> list[str]:
        """:meth:`lines` with the styles' codes: what Rich writes to a terminal."""
        from rich.console import COLOR_SYSTEMS

        widths = layout.widths
        system = COLOR_SYSTEMS[console.color_system or "standard"]
        paint = self._painter(console, widths)

        def text_of(segments: Iterable[Segment]) -> list[str]:
            """Segments as the console writes them, a line each."""
            out = "".join(seg.style.render(seg.text, color_system=system)
                          if seg.style else seg.text for seg in segments)
            return out.split("\n")[:-1]

        def codes(style: str) -> tuple[str, str]:
            start, end = console.get_style(style).render("\0", color_system=system).split("\0")
            return start, end

        plain_row = self._plain_row(console, widths)

        def row(cells: list[Cell], style: str, edge: str) -> list[str]:
            # Rich writes the text of a row without a style as it is (a text cell,
            # its pads and fill have none): the plain lines.
            if not style and not any(isinstance(cell, Text) for cell in cells):
                return plain_row(cells, edge)
            return text_of(paint(cells, style, edge))

        section = self._rule(widths, "├", "─", "┼", "┤")
        out = [self._rule(widths, "┏", "━", "┳", "┓"),
               *row([name for name, _ in self.columns], "bold", "┃"),
               self._rule(widths, "┡", "━", "╇", "┩")]
        self._assemble(out, self._body(console, layout, codes), section,
                       lambda found: row(*found, "│"))
        out.append(self._rule(widths, "└", "─", "┴", "┘"))
        if self.caption:
            out += text_of(self._caption_segments(console, widths))
        return out

    def _caption_segments(self, console: Console, widths: list[int]) -> Iterable[Segment]:
        caption = self.caption.copy() if self.caption else Text()
        caption.justify = "center"
        return console.render(caption, console.options.update(
            width=sum(widths) + 3 * len(widths) + 1))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = self._widths(options.max_width)
        if console.color_system is None or console.no_color:
            for line in self._plain(console, self._layout(options.max_width)):
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


def _sections(rows: list[Any]) -> Iterator[int]:
    """Where the lines between sections (None) are among ``rows``: looked for in C
    (a table has a few among tens of thousands of rows)."""
    at = -1
    while True:
        try:
            at = rows.index(None, at + 1)
        except ValueError:
            return
        yield at


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


def _write(console: Console, lines: list[str]) -> None:
    """``lines`` to the console's file, in one write."""
    lines.append("")
    console.file.write("\n".join(lines))
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
