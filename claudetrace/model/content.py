"""A message's content, read one way: text, thinking, tool calls and their results,
images, and blocks nobody knows yet (kept, never dropped).

The ``message.content`` of a ``user`` or ``assistant`` line is a string (a plain
prompt) or a list of content blocks; a ``tool_result``'s own ``content`` is the
same.  :func:`blocks` reads either into :class:`Block` s, and every view (the
conversation, the diff, ``show``'s transcript, ``tail``, the spans' message
content, search) reads those instead of walking the JSON itself, so that a new
tool-use variant or an image is shown the same way everywhere.

Mistyped fields read as absent, as everywhere in :mod:`claudetrace.model`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Final, Literal

import msgspec

from .events import TOOL_USE_TYPES, Event, is_tool_result_type

BlockKind = Literal["text", "thinking", "tool_use", "tool_result", "image", "other"]

#: The block types of thinking (the one place they are spelled).
THINKING_TYPES: Final = frozenset({"thinking", "redacted_thinking"})


class Block(msgspec.Struct, frozen=True):
    """One content block.

    ``kind`` is what it is for a reader; ``type`` the block's own type as recorded
    (``server_tool_use``, ``redacted_thinking``, ``mcp_tool_result`` …; ``text`` for
    a plain string).  ``text`` is the text of a text or thinking block and of a
    tool result (:func:`content_text` of its content), else empty.  ``id`` is a
    tool use's id, or the ``tool_use_id`` a result answers.  ``raw`` is the block
    as recorded.

    A frozen :class:`msgspec.Struct` rather than a frozen dataclass, whose
    ``__init__`` sets each field through ``object.__setattr__``: made in C, a
    block takes an eighth of the time (0.25 µs against 2.0), and an import
    reads about two blocks a line.
    """

    kind: BlockKind
    type: str
    text: str = ""
    id: str | None = None
    name: str | None = None
    input: Any = None
    is_error: bool = False
    raw: Any = None

    @property
    def redacted(self) -> bool:
        """A thinking block whose text the API withheld."""
        return self.type == "redacted_thinking"

    @property
    def label(self) -> str:
        """``[image]``, ``[document]`` …: how a block without text is named in text."""
        return f"[{self.type}]"


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def read_block(block: Any) -> Block:
    """One content block (any JSON value) as a :class:`Block`."""
    if isinstance(block, str):
        return Block("text", "text", block, raw=block)
    if not isinstance(block, dict):
        return Block("other", type(block).__name__ if block is not None else "null", raw=block)
    kind = block.get("type")
    name = kind if isinstance(kind, str) else "block"
    if kind == "text":
        return Block("text", name, _str(block.get("text")) or "", raw=block)
    if kind in THINKING_TYPES:
        return Block("thinking", name, _str(block.get("thinking")) or "", raw=block)
    if kind in TOOL_USE_TYPES:
        return Block("tool_use", name, id=_str(block.get("id")), name=_str(block.get("name")),
                     input=block.get("input"), raw=block)
    if is_tool_result_type(kind):
        return Block("tool_result", name, content_text(block.get("content")),
                     id=_str(block.get("tool_use_id")), is_error=bool(block.get("is_error")),
                     raw=block)
    if kind == "image":
        return Block("image", name, raw=block)
    return Block("other", name, raw=block)


def blocks(content: Any) -> list[Block]:
    """The blocks of a ``content`` value: one text block for a string, none for
    ``None``, each element of a list, and anything else as one ``other`` block."""
    if content is None:
        return []
    if isinstance(content, list):
        return [read_block(block) for block in content]
    return [read_block(content)]


def message_content(event: Event) -> Any:
    """The ``message.content`` of a ``user`` or ``assistant`` line (``None`` when missing).

    A string for a plain prompt, else a list of content blocks.
    """
    message = (event.message or {}).get("message")
    return message.get("content") if isinstance(message, dict) else None


def message_blocks(event: Event) -> list[Block]:
    """The content blocks of a ``user`` or ``assistant`` line."""
    return blocks(message_content(event))


def content_text(content: Any, sep: str = "\n") -> str:
    """What a person reads in a ``content`` value: the text of its text blocks and tool
    results, and the label of any other block (``[image]``), joined by ``sep``.

    Thinking is left out: it is not what the message says.
    """
    if isinstance(content, str):
        return content
    parts = []
    for block in blocks(content):
        if block.kind in ("text", "tool_result"):
            parts.append(block.text)
        elif block.kind != "thinking":
            parts.append(block.label if isinstance(block.raw, dict) else _json(block.raw))
    return sep.join(parts)


def find_block(found: Iterable[Block], kind: BlockKind, block_id: str) -> Block | None:
    """The ``tool_use`` (by its id) or ``tool_result`` (by the id it answers) among ``found``."""
    return next((b for b in found if b.kind == kind and b.id == block_id), None)


def find_content_block(content: Any, kind: Literal["tool_use", "tool_result"],
                       block_id: str) -> Block | None:
    """``find_block(blocks(content), kind, block_id)``, reading only the block
    found: the session model looks up a block or two of a line, and the text of
    every tool result of it (:func:`content_text`) is not made for that."""
    if content is None:
        return None
    for block in content if isinstance(content, list) else (content,):
        if not isinstance(block, dict):
            continue
        if kind == "tool_use":
            if block.get("type") not in TOOL_USE_TYPES or block.get("id") != block_id:
                continue
        elif not is_tool_result_type(block.get("type")) or block.get("tool_use_id") != block_id:
            continue
        return read_block(block)
    return None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
