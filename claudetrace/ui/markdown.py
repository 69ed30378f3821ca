"""Markdown in recorded text (an assistant's answer), read safely.

:func:`markdown_tree` parses with markdown-it-py (CommonMark with pipe tables and
strikethrough, **raw HTML off**) into a small tree of plain values: a node is
``[tag, child, …]`` where a child is a string (text, never markup) or a node, and
tags come from a fixed list.  The HTML report's script builds DOM nodes from it
with ``textContent``; :func:`tree_html` writes it as HTML for the session browser
with every text escaped.  A link keeps its address only when it is ``http(s)``
(``["a", href, …]``); an image becomes its text (``[image: alt]``), so nothing
loads from anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from html import escape
from typing import Any, Final, Protocol

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

#: Node types and the tag each becomes (anything else keeps only its text).
_TAGS: Final = {
    "paragraph": "p", "strong": "strong", "em": "em", "s": "s", "code_inline": "code",
    "bullet_list": "ul", "ordered_list": "ol", "list_item": "li", "blockquote": "blockquote",
    "table": "table", "thead": "thead", "tbody": "tbody", "tr": "tr", "th": "th", "td": "td",
    "hr": "hr", "hardbreak": "br", "link": "a",
}
#: The tags a tree may hold.
TAGS: Final = frozenset(_TAGS.values()) | {"pre", "h1", "h2", "h3", "h4", "h5", "h6"}
#: What makes text worth parsing: a plain sentence is shown as it is.
_SYNTAX: Final = re.compile(r"[*_`#|>~\[]|^\s*(?:[-+]|\d+[.)])\s", re.MULTILINE)
#: Longest text parsed (a longer one is shown as plain text).
LIMIT: Final = 200_000

_PARSER: MarkdownIt | None = None


def _parser() -> MarkdownIt:
    global _PARSER
    if _PARSER is None:
        _PARSER = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(
            ["table", "strikethrough"]
        )
    return _PARSER


Tree = list[Any]


class Marker(Protocol):
    """What marks a text found (:class:`claudetrace.ui.find.Needle`)."""

    def spans(self, text: str) -> Iterable[tuple[int, int]]:
        """``(start, end)`` of each match in ``text``, in order, not overlapping."""
        ...


def markdown_tree(text: str) -> Tree | None:
    """The blocks of ``text`` as a tree; None when it has no Markdown worth drawing."""
    if not text or len(text) > LIMIT or not _SYNTAX.search(text):
        return None
    root = SyntaxTreeNode(_parser().parse(text))
    blocks = _children(root)
    if all(isinstance(b, list) and b[0] == "p" and all(isinstance(c, str) for c in b[1:])
           for b in blocks):
        return None  # paragraphs of plain text: the text as it is reads the same
    return blocks


def _children(node: SyntaxTreeNode) -> list[Any]:
    out: list[Any] = []
    for child in node.children:
        converted = _node(child)
        if converted is None or converted == "":
            continue
        if isinstance(converted, str) and out and isinstance(out[-1], str):
            out[-1] += converted
        elif isinstance(converted, tuple):
            for part in converted:
                if part == "":
                    continue
                if isinstance(part, str) and out and isinstance(out[-1], str):
                    out[-1] += part
                else:
                    out.append(part)
        else:
            out.append(converted)
    return out


def _node(node: SyntaxTreeNode) -> Any:
    kind = node.type
    if kind == "text":
        return node.content
    if kind == "softbreak":
        return "\n"
    if kind in ("html_inline", "html_block"):  # not parsed with html off; kept as text
        return node.content
    if kind in ("fence", "code_block"):
        return ["pre", node.content.rstrip("\n")]
    if kind == "heading":
        return [node.tag if node.tag in TAGS else "p", *_children(node)]
    if kind == "image":
        alt = "".join(c for c in _children(node) if isinstance(c, str))
        return f"[image: {alt}]" if alt else "[image]"
    if kind == "code_inline":
        return ["code", node.content]
    if kind == "inline":
        return tuple(_children(node))
    if kind == "link":
        href = str(node.attrs.get("href", ""))
        return ["a", href if href.startswith(("https://", "http://")) else "", *_children(node)]
    tag = _TAGS.get(kind)
    if tag is None:
        return tuple(_children(node))
    if kind == "list_item":  # tight lists: the item's paragraph is hidden
        return [tag, *_unwrap(_children(node), node)]
    return [tag, *_children(node)]


def _unwrap(children: list[Any], node: SyntaxTreeNode) -> list[Any]:
    hidden = all(getattr(c, "hidden", False) for c in node.children if c.type == "paragraph")
    if not hidden:
        return children
    out: list[Any] = []
    for child in children:
        out.extend(child[1:] if isinstance(child, list) and child[0] == "p" else [child])
    return out


def tree_leaves(tree: Tree) -> list[str]:
    """The texts of a tree as the page holds them, one per text node, in order
    (a link's address left out): what the find box counts and marks in, a match
    never spanning two of them (the HTML report's ``mdLeaves`` reads the same)."""
    out: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, str):
            out.append(node)
            return
        for child in node[2 if node[0] == "a" else 1:]:
            visit(child)

    for block in tree:
        visit(block)
    return out


def tree_text(tree: Tree) -> str:
    """The text of a tree (what a search reads)."""
    parts: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, str):
            parts.append(node)
            return
        start = 2 if node[0] == "a" else 1
        for child in node[start:]:
            visit(child)
        if node[0] in ("p", "li", "pre", "tr", "h1", "h2", "h3"):
            parts.append("\n")

    for block in tree:
        visit(block)
    return "".join(parts).strip()


def tree_html(tree: Tree, mark: Marker | None = None) -> str:
    """The tree as HTML: only :data:`TAGS`, every text escaped, links to http(s) only;
    what ``mark`` matches in its texts inside ``<mark>`` (a text found in the page)."""
    return "".join(_html(node, mark) for node in tree)


def marked_html(text: str, mark: Marker | None) -> str:
    """``text`` escaped, what ``mark`` matches in it inside ``<mark>``."""
    return "".join(f"<mark>{escape(piece)}</mark>" if hit else escape(piece)
                   for piece, hit in segments(text, mark))


def segments(text: str, mark: Marker | None) -> list[tuple[str, bool]]:
    """``text`` cut into ``(piece, matched)`` pieces, in order (the whole text,
    unmarked, when ``mark`` is None or matches nothing)."""
    if mark is None:
        return [(text, False)]
    out: list[tuple[str, bool]] = []
    at = 0
    for start, end in mark.spans(text):
        if start > at:
            out.append((text[at:start], False))
        if end > start:
            out.append((text[start:end], True))
        at = end
    if at < len(text) or not out:
        out.append((text[at:], False))
    return out


def _html(node: Any, mark: Marker | None = None) -> str:
    if isinstance(node, str):
        return marked_html(node, mark)
    tag = node[0]
    if tag not in TAGS:
        return "".join(_html(child, mark) for child in node[1:])
    if tag == "a":
        inner = "".join(_html(child, mark) for child in node[2:])
        if not node[1]:
            return inner
        href = escape(node[1], quote=True)
        return f'<a href="{href}" rel="noopener noreferrer nofollow" target="_blank">{inner}</a>'
    if tag in ("hr", "br"):
        return f"<{tag}>"
    if tag == "pre":
        return f"<pre><code>{marked_html(node[1], mark)}</code></pre>"
    return f"<{tag}>" + "".join(_html(child, mark) for child in node[1:]) + f"</{tag}>"


__all__ = ["LIMIT", "TAGS", "Marker", "Tree", "markdown_tree", "marked_html", "segments",
           "tree_html", "tree_leaves", "tree_text"]
