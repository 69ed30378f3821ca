"""The tables ``claudetrace usage`` prints for people (Rich; recorded names as ``Text``)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Iterator
from itertools import zip_longest
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from ..display import visible
from ..pricing import dollars

if TYPE_CHECKING:
    from ..usage import Block, SessionTotals, Totals

_NUMBERS = ("input", "output", "cache create", "cache read", "total tokens", "cost (USD)")


#: A cell: text in its row's style, or Rich :class:`~rich.text.Text` with its own.
Cell = str | Text


def _text(value: str | None) -> str:
    """Recorded text as a cell: control characters escaped (a ``str`` cell reads
    no markup)."""
    return visible(value or "")


def cost_cell(t: Totals) -> Cell:
    """``$1.23``, ``~$1.23`` for an estimate, ``$1.23 + ~$0.05`` where the CLI
    reported a part (the table priced the calls it put no cost on), ``?`` or
    ``$1.23 + ?`` where some calls have no price."""
    source = t.cost_source
    if source == "unknown":
        return Text("?", style="yellow")
    # The figures --json writes (to 1e-9 dollars): a cent's half there reads the
    # same whatever order the database added the calls in.
    split = t.split_json()
    cli = split["cliCost"]
    if source == "estimate" and cli > 0:  # the CLI's part, and the table's
        amount = f"{_amount(cli)} + ~{_amount(split['estimatedCost'])}"
    else:
        amount = ("~" if source == "estimate" else "") + _amount(round(t.cost, 9))
    if t.unpriced:
        cell = Text(amount)
        cell.append(" + ?", style="yellow")
        return cell
    return amount


def _amount(usd: float) -> str:
    return dollars(usd, digits=2 if usd >= 1 else 4)


def _numbers(t: Totals) -> list[Cell]:
    return [f"{t.input:,}", f"{t.output:,}", f"{t.cache_creation:,}", f"{t.cache_read:,}",
            f"{t.total_tokens:,}", cost_cell(t)]


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

    def add_row(self, *cells: Cell, style: str = "") -> None:
        self.rows.append((list(cells), style))

    def add_section(self) -> None:
        self.rows.append(None)

    def _widths(self, max_width: int) -> list[int]:
        widths = [_width(name) for name, _ in self.columns]
        # A column at a time (a row has no more cells than there are columns; a
        # shorter one's missing cells are empty): its cells' lengths where they
        # are all ASCII, each character a cell wide.
        texts = [[cell if isinstance(cell, str) else cell.plain for cell in row[0]]
                 for row in self.rows if row is not None]
        for j, column in enumerate(zip_longest(*texts, fillvalue="")):
            longest = max(map(len, column) if "".join(column).isascii()
                          else map(_width, column))
            widths[j] = max(widths[j], longest)
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

    def lines(self, console: Console, max_width: int) -> Iterator[str]:
        """The table as plain text, a line at a time (no colours)."""
        widths = self._widths(max_width)
        right = [justify == "right" for _, justify in self.columns]
        blank = [""] * len(widths)
        # A row of text cells that fit, in one format: a line of this length.
        fast = "│ " + " │ ".join(f"{{:{'>' if r else '<'}{w}}}"
                                 for r, w in zip(right, widths, strict=True)) + " │"
        size = sum(widths) + 3 * len(widths) + 1
        #: A text cell's lines, by text and column, where it wraps.
        wrapped: dict[tuple[str, int], list[str]] = {}

        #: Whether each character of a text (not ASCII) is one cell wide, by text.
        single: dict[str, bool] = {}

        def one_cell_each(texts: list[str]) -> bool:
            for text in [text for text in texts if not text.isascii()]:
                found = single.get(text)
                if found is None:
                    found = single[text] = cell_len(text) == len(text)
                if not found:
                    return False
            return True

        def row(cells: list[Cell], edge: str) -> Iterator[str]:
            texts = [cell for cell in cells if isinstance(cell, str)]
            if len(texts) == len(cells) and ("".join(texts).isascii()
                                             or one_cell_each(texts)):
                # Every character a cell: no cell wider than its column if the line fits.
                line = fast.format(*texts, *blank[len(texts):])
                if len(line) == size:
                    yield line if edge == "│" else line.replace("│", edge)
                    return
                # Else the cells wider than their columns in lines (each text once:
                # many rows wrap the same models), the others as they are, below
                # them blanks; every line in the one format.
                columns: list[list[str]] = []
                for j, text in enumerate([*texts, *blank[len(texts):]]):
                    if len(text) <= widths[j]:
                        columns.append([text])
                        continue
                    key = (text, j)
                    lines = wrapped.get(key)
                    if lines is None:
                        lines = wrapped[key] = [_plain(_pad(line, widths[j], right[j]))
                                                for line in _wrap(console, text, widths[j])]
                    columns.append(lines)
                for at in range(max(map(len, columns))):
                    line = fast.format(*[c[at] if at < len(c) else "" for c in columns])
                    yield line if edge == "│" else line.replace("│", edge)
                return
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
            for at in range(max(len(p) for p in parts)):
                yield f"{edge} " + f" {edge} ".join(
                    p[at] if at < len(p) else " " * widths[j] for j, p in enumerate(parts)
                ) + f" {edge}"

        yield self._rule(widths, "┏", "━", "┳", "┓")
        yield from row([name for name, _ in self.columns], "┃")
        yield self._rule(widths, "┡", "━", "╇", "┩")
        for found in self.rows:
            if found is None:
                yield self._rule(widths, "├", "─", "┼", "┤")
            else:
                yield from row(found[0], "│")
        yield self._rule(widths, "└", "─", "┴", "┘")
        yield from self._captions(widths)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if console.color_system is None or console.no_color:
            for line in self.lines(console, options.max_width):
                yield Segment(line)
                yield Segment.line()
            return
        widths = self._widths(options.max_width)
        new_line = Segment.line()
        styles: dict[Any, Style] = {}

        def style_of(name: str | Style) -> Style:
            found = styles.get(name)
            if found is None:
                found = styles[name] = (name if isinstance(name, Style)
                                        else console.get_style(name, default=""))
            return found

        def cell_segments(cell: Cell, width: int, right: bool, outer: Style) -> list[Segment]:
            text = cell if isinstance(cell, str) else cell.plain
            inner = outer if isinstance(cell, str) else outer + style_of(cell.style)
            fill = " " * (width - _width(text))
            if isinstance(cell, str) or not cell.spans:  # the text and its fill, as Rich
                return [Segment(fill + text if right else text + fill, inner)]
            out = [Segment(fill, inner)] if right and fill else []
            out += [Segment(seg.text, outer + seg.style if seg.style else outer)
                    for seg in cell.render(console, end="")]
            return [*out, Segment(fill, inner)] if not right and fill else out

        def row(cells: list[Cell], style: str, edge: str) -> Iterator[Segment]:
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
    """Print ``table``: its plain lines straight to the console's file where it
    shows no colour (a pipe, a file), else through Rich."""
    if console.color_system is None or console.no_color:
        console.file.writelines(line + "\n" for line in table.lines(console, console.width))
    else:
        console.print(table)


def _wrap(console: Console, cell: Cell, width: int) -> list[Cell]:
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


def _plain(cell: Cell) -> str:
    return cell if isinstance(cell, str) else cell.plain


def _pad(line: Cell, width: int, right: bool) -> Cell:
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


def _table(first: list[str]) -> Grid:
    return Grid([(name, "left") for name in first] + [(name, "right") for name in _NUMBERS])


def _breakdown(table: Grid, t: Totals, lead: int) -> None:
    for model, m in sorted(t.models.items(), key=lambda mt: -mt[1].cost):
        # "└ " dim as the row: one text.
        table.add_row(*[""] * (lead - 1), "└ " + _text(model), *_numbers(m), style="dim")


def _models(t: Totals) -> str:
    return _text(", ".join(t.models))


def _notes(table: Grid, rows: Iterable[Totals]) -> Grid:
    every = list(rows)
    caption = Text()
    if any(t.cost_source != "cli" for t in every):
        caption.append("~ estimated from the price table (genai-prices): the CLI reported no cost")
    unpriced = sorted({m for t in every for m in t.unpriced})
    if unpriced:
        caption.append("\n? no price for ").append(_text(", ".join(unpriced)))
    if caption:
        table.caption = caption
    return table


def _total(table: Grid, every: list[Totals], lead: int) -> None:
    from ..usage import Totals

    table.add_section()
    table.add_row(Text("Total", style="bold"), *[""] * (lead - 1), *_numbers(Totals.sum_of(every)))


def period_table(report: str, found: dict[str, Totals], breakdown: bool) -> Grid:
    """Days, weeks or months: tokens by type, models and cost."""
    title = {"daily": "day", "weekly": "week (from Sunday)", "monthly": "month"}[report]
    table = _table([title, "models"])
    for when, t in found.items():
        table.add_row(when, _models(t), *_numbers(t))
        if breakdown:
            _breakdown(table, t, 2)
    _total(table, list(found.values()), 2)
    return _notes(table, found.values())


def session_table(found: list[SessionTotals], tz: dt.tzinfo | None, breakdown: bool) -> Grid:
    """Sessions, oldest last activity first."""
    table = _table(["session", "project", "last activity", "models"])
    for s in found:
        last = dt.datetime.fromtimestamp(s.last_ns / 1e9, tz).strftime("%Y-%m-%d %H:%M")
        table.add_row(_text(s.name or s.session_id), _text(s.project), last,
                      _models(s.totals), *_numbers(s.totals))
        if breakdown:
            _breakdown(table, s.totals, 4)
    _total(table, [s.totals for s in found], 4)
    return _notes(table, [s.totals for s in found])


def blocks_table(found: list[Block], now_ns: int, breakdown: bool) -> Grid:
    """5-hour blocks (UTC start); the active one with its burn rate and projection."""
    table = _table(["block start (UTC)", "status", "models"])
    for b in found:
        start = dt.datetime.fromtimestamp(b.start_ns / 1e9, dt.timezone.utc)
        if b.gap:
            hours = (b.end_ns - b.start_ns) / 3.6e12
            table.add_row(start.strftime("%Y-%m-%d %H:%M"), Text("gap", style="dim"),
                          Text(f"{hours:.1f} h without calls", style="dim"))
            continue
        status = Text("ACTIVE", style="bold green") if b.active(now_ns) else ""
        table.add_row(start.strftime("%Y-%m-%d %H:%M"), status, _models(b.totals),
                      *_numbers(b.totals))
        if breakdown:
            _breakdown(table, b.totals, 3)
        if b.active(now_ns):
            rate, projection = b.burn_rate(), b.projection(now_ns)
            if rate and projection:
                table.add_row("", Text("burn rate", style="cyan"),
                              (f"{rate['tokensPerMinute']:,.0f} tokens/min, "
                                   f"${rate['costPerHour']:,.2f}/h"))
                table.add_row("", Text("projected", style="cyan"),
                              (f"{projection['totalTokens']:,} tokens, "
                                   f"${projection['totalCost']:,.2f} at the block's end, "
                                   f"{projection['remainingMinutes']} min left"))
            else:
                table.add_row("", Text("burn rate", style="cyan"),
                              Text("not yet: under a minute between its calls", style="dim"))
    return _notes(table, [b.totals for b in found if not b.gap])
