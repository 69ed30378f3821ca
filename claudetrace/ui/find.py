"""Find a text within one session, as Phoenix and Langfuse search within a trace.

:func:`find` looks for a plain text (case-insensitive; no pattern syntax: ``.``,
``*`` or ``(`` are the characters themselves) in the session's conversation
(prompts, answers, thinking, results, a tool call's input and result, subagent
items included) and in its span tree's rows (each span's name and detail, the
attributes the trace shows), and says how many times it occurs, in which items
and spans and in which turns.  Each match names the anchor the pages put on what
holds it, so a page can jump to it; :func:`~claudetrace.ui.markdown.segments`
cuts a text into the pieces to draw marked and unmarked.

Pure functions over conversation items and trace rows; nothing here reads the
store or writes markup.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..display import visible_text
from ..model import Session
from .conversation import Item
from .markdown import markdown_tree, segments, tree_leaves
from .present import TraceRow

#: Longest text looked for (a longer query is cut: nobody types more).
QUERY_LIMIT: Final = 200
_SPACES: Final = re.compile(r"\s+")
#: Turns named in a summary (the rest counted).
TURNS_NAMED: Final = 12
#: Characters of context either side of the first occurrence in a match's excerpt.
CONTEXT: Final = 40


#: What a browser's ``String.prototype.trim`` takes off a text's ends (the HTML
#: report's find box trims so; ``str.strip`` would also take ``\x1c`` to ``\x1f`` and
#: ``\x85``, and keep ``\ufeff``).
_JS_SPACE: Final = ("\t\n\v\f\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
                    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff")


def query_text(query: str) -> str:
    """``query`` as both pages look for it: trimmed as a browser trims, and cut to
    :data:`QUERY_LIMIT` UTF-16 units as a browser's ``slice`` cuts (a character
    the cut would halve is left out)."""
    text = query.strip(_JS_SPACE)
    if len(text) > QUERY_LIMIT // 2:
        text = text.encode("utf-16-le")[: 2 * QUERY_LIMIT].decode("utf-16-le", "ignore")
    return text


class Needle:
    """A text looked for, case ignored, as the HTML report's find looks for it: the
    text and the query lowercased (``str.lower`` and a browser's ``toLowerCase``
    follow the same Unicode mappings, a final sigma included), then the query
    found literally, matches not overlapping.

    ``re.IGNORECASE`` folds otherwise (a final sigma, a sigma and a capital sigma
    are one letter there, a long s is an ``s``, a dotless i an ``i``), so the session
    page once counted one more or one fewer match than the report in such a text;
    this is the one rule both count by."""

    __slots__ = ("_low", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._low = text.lower()

    def spans(self, text: str) -> Iterator[tuple[int, int]]:
        """Where the text occurs in ``text``: ``(start, end)`` in ``text``'s own
        characters (a lowercased character can be longer: ``İ`` is ``i̇``)."""
        low, q = text.lower(), self._low
        at = low.find(q)
        if at < 0:
            return
        origin: list[int] | None = None
        if len(low) != len(text):
            origin = [i for i, ch in enumerate(text) for _ in ch.lower()]
            origin.append(len(text))
        while at >= 0:
            end = at + len(q)
            if origin is None:
                yield at, end
            else:
                yield origin[at], origin[end - 1] + 1
            at = low.find(q, end)

    def count(self, text: str) -> int:
        """How many times the text occurs in ``text``."""
        return sum(1 for _ in self.spans(text))


def pattern(query: str) -> Needle | None:
    """``query`` to look for (None for an empty query); see :class:`Needle`."""
    text = query_text(query)
    return Needle(text) if text else None


@dataclass(frozen=True, slots=True)
class Match:
    """One item or span that holds the text, with how often and where."""

    #: ``item`` (a conversation item) or ``span`` (a row of the span tree).
    kind: str
    #: The element id the pages give what holds the match (``find-i12``, ``find-s3``).
    anchor: str
    #: What it is, in words (``tool Bash · result``, ``model call claude-…``).
    label: str
    #: Occurrences in it.
    count: int
    #: The first occurrence with some context: before, the match, after.
    excerpt: tuple[str, str, str]
    #: The turn it belongs to (0: before the first prompt).
    turn: int
    #: An item's line, and the line of the top-level item that holds it (the
    #: conversation part to show); a span's row index in the tree's rows.
    seq: int = 0
    top_seq: int = 0
    row: int = 0
    #: A span's node (:attr:`~claudetrace.ui.present.TraceRow.ref`: ``tool:<id>``…).
    ref: str = ""


@dataclass(slots=True)
class Found:
    """What :func:`find` found: every match, items first, in the order shown."""

    query: str
    matches: list[Match] = field(default_factory=list)

    @property
    def total(self) -> int:
        """Occurrences in all."""
        return sum(m.count for m in self.matches)

    def items(self) -> list[Match]:
        return [m for m in self.matches if m.kind == "item"]

    def spans(self) -> list[Match]:
        return [m for m in self.matches if m.kind == "span"]

    def turns(self) -> list[int]:
        """The turns that hold a match, in order."""
        return sorted({m.turn for m in self.matches if m.turn})

    def summary(self) -> str:
        """``7 matches · 4 items, 2 spans · turns 1, 3`` (or ``no match``)."""
        if not self.matches:
            return "no match"
        items, spans = len(self.items()), len(self.spans())
        bits = [f"{self.total:,} match{'es' if self.total != 1 else ''}",
                f"{items:,} item{'s' if items != 1 else ''}, "
                f"{spans:,} span{'s' if spans != 1 else ''}"]
        turns = self.turns()
        if turns:
            named = ", ".join(str(t) for t in turns[:TURNS_NAMED])
            if len(turns) > TURNS_NAMED:
                named += f"… ({len(turns):,} turns)"
            bits.append(("turn " if len(turns) == 1 else "turns ") + named)
        return " · ".join(bits)

    def anchors(self) -> set[str]:
        return {m.anchor for m in self.matches}


def item_texts(item: Item) -> list[tuple[str, str]]:
    """The ``(part, text)`` of ``item`` that are searched, as the pages draw them:
    its text (an answer drawn as Markdown: each of its texts,
    :func:`~claudetrace.ui.markdown.tree_leaves`, none of the syntax), and a tool
    call's input (as JSON: :func:`input_text`) and result."""
    out: list[tuple[str, str]] = []
    if item.text:
        tree = markdown_tree(visible_text(item.text)) if item.markdown else None
        if tree is not None:
            out += [("text", leaf) for leaf in tree_leaves(tree)]
        else:
            out.append(("name" if item.tool is not None else "text", item.text))
    tool = item.tool
    if tool is not None:
        if tool.input is not None:
            out.append(("input", input_text(tool.input)))
        if tool.result is not None:
            out.append(("result", tool.result))
    return out


def row_texts(row: TraceRow) -> list[tuple[str, str]]:
    """The ``(part, text)`` of a span row that are searched: its name and detail."""
    return [(part, text) for part, text in (("name", row.label), ("detail", row.detail))
            if text]


def input_text(value: Any) -> str:
    """A tool call's input as the pages show it: a text as it is, else JSON
    indented by two (what the HTML report's ``JSON.stringify(value, null, 2)``
    writes wherever :func:`js_differs` says it would not: the report then carries
    this text)."""
    return value if isinstance(value, str) else json.dumps(
        value, ensure_ascii=False, indent=2, default=str)


#: The largest integer a browser's JSON reads exactly.
_JS_SAFE: Final = 2**53 - 1


def js_differs(value: Any) -> bool:
    """Whether a browser's ``JSON.stringify(value, null, 2)`` can differ from
    :func:`input_text`: a float (``1.0`` is ``1`` there, exponents are written
    otherwise), an integer past 2**53, a key a browser orders first (an array
    index, such as ``"1"``), or a value JSON has no type for."""
    if value is None or isinstance(value, (str, bool)):
        return False
    if isinstance(value, int):
        return abs(value) > _JS_SAFE
    if isinstance(value, list):
        return any(js_differs(v) for v in value)
    if isinstance(value, dict):
        return any(not isinstance(k, str) or k.isdigit() or js_differs(v)
                   for k, v in value.items())
    return True


def _excerpt(text: str, start: int, end: int) -> tuple[str, str, str]:
    before = text[max(0, start - CONTEXT):start]
    after = text[end:end + CONTEXT]
    if start > CONTEXT:
        before = "…" + before
    if end + CONTEXT < len(text):
        after += "…"
    return _SPACES.sub(" ", before), text[start:end], _SPACES.sub(" ", after)


def _item_label(item: Item) -> str:
    if item.tool is not None:
        return f"tool {item.tool.name}"
    return item.label or item.kind


def _scan(texts: Iterable[tuple[str, str]], found: Needle
          ) -> tuple[int, list[str], tuple[str, str, str] | None]:
    count, parts, excerpt = 0, [], None
    for part, text in texts:
        hits = 0
        for start, end in found.spans(text):
            if excerpt is None:
                excerpt = _excerpt(text, start, end)
            hits += 1
        if hits:
            count += hits
            if part not in parts:
                parts.append(part)
    return count, parts, excerpt


def find(query: str, items: Sequence[Item], rows: Sequence[TraceRow],
         session: Session) -> Found:
    """Where ``query`` occurs among ``items`` (the conversation, nested items
    included) and ``rows`` (the span tree's rows) of ``session``."""
    found = pattern(query)
    out = Found(query_text(query))
    if found is None:
        return out
    starts = [t.start_seq for t in session.turns]
    for top in items:
        for item in _walk(top):
            count, parts, excerpt = _scan(item_texts(item), found)
            if count and excerpt is not None:
                out.matches.append(Match(
                    "item", item_anchor(item.seq), f"{_item_label(item)} · {', '.join(parts)}",
                    count, excerpt, bisect.bisect_right(starts, item.seq),
                    seq=item.seq, top_seq=top.seq))
    turn_of = _row_turns(rows)
    for index, row in enumerate(rows):
        count, parts, excerpt = _scan(row_texts(row), found)
        if count and excerpt is not None:
            out.matches.append(Match(
                "span", span_anchor(index), f"{row.kind} {row.label} · {', '.join(parts)}",
                count, excerpt, turn_of[index], row=index, ref=row.ref))
    return out


def _walk(item: Item) -> Iterable[Item]:
    yield item
    if item.tool is not None:
        for child in item.tool.children:
            yield from _walk(child)


def _row_turns(rows: Sequence[TraceRow]) -> list[int]:
    """Each row's turn: the ``turn:N`` row it is drawn under (0 for none)."""
    out, turn = [], 0
    for row in rows:
        if row.kind == "turn" and row.ref.startswith("turn:"):
            turn = int(row.ref.removeprefix("turn:") or 0)
        elif row.depth <= 1:
            turn = 0 if row.kind != "turn" else turn
        out.append(turn)
    return out


def item_anchor(seq: int) -> str:
    """The element id of the conversation item at line ``seq``."""
    return f"find-i{seq}"


def span_anchor(index: int) -> str:
    """The element id of the span tree's row ``index``."""
    return f"find-s{index}"


__all__ = ["Found", "Match", "Needle", "find", "input_text", "item_anchor", "item_texts",
           "js_differs", "pattern", "query_text", "row_texts", "segments", "span_anchor"]
