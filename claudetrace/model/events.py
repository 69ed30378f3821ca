"""The event model: one line seen on one stream, parsed once.

Everything in claudetrace consumes :class:`Event`: the store writes it, the span
builder and the replay engine read it, the UI shapes it.  A line is parsed at most
once (lazily, on first use of :attr:`Event.obj` or :attr:`Event.fields`), and the
fields every consumer needs are extracted by :func:`extract_fields` and nowhere
else.

Directions are named from the CLI's point of view, as in cassettes:

- ``in``  — host → CLI (the CLI's stdin)
- ``out`` — CLI → host (the CLI's stdout)
- ``err`` — the CLI's stderr
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal

import msgspec

Direction = Literal["in", "out", "err"]
DIRECTIONS: Final[tuple[Direction, ...]] = ("in", "out", "err")

#: The content block types that call a tool (the one place they are spelled).
TOOL_USE_TYPES: Final = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


def is_tool_result_type(kind: Any) -> bool:
    """Whether a content block type carries a tool's result (``tool_result``,
    ``mcp_tool_result``, ``web_search_tool_result`` …)."""
    return isinstance(kind, str) and kind.endswith("tool_result")


#: Kinds of tool references found in a line (see :class:`ToolRef`).
ToolRefKind = Literal["use", "result", "permission", "hook"]


@dataclass(frozen=True, slots=True)
class ToolRef:
    """A tool use id mentioned by a line, with the tool name when the line names it.

    ``use`` is a ``tool_use`` block (or its ``content_block_start``), ``result`` a
    ``tool_result`` block, ``permission`` a ``can_use_tool`` request and ``hook`` a
    ``hook_callback`` request about that tool use.  ``is_error``: a result block's
    ``is_error`` (as a truth value), so that the session model learns how a tool
    ended from the fields, without parsing the whole line (its output, often
    kilobytes, echoed twice).
    """

    tool_use_id: str
    name: str | None
    kind: ToolRefKind
    is_error: bool = False


class LineFields(msgspec.Struct, frozen=True, gc=False):
    """The fields extracted once from a JSON line (all ``None`` for other lines).

    ``subtype`` is the line's own ``subtype``; for ``control_request`` it is
    ``request.subtype``, for ``control_response`` ``response.subtype``
    (``success``/``error``) and for ``stream_event`` the inner ``event.type``.
    ``request_id`` is the top-level one or, for responses, ``response.request_id``.

    Immutable, compared and hashed by value.  One is made for every line
    recorded: a frozen struct is made in C, several times faster than a frozen
    dataclass's ``__init__`` (a ``object.__setattr__`` call per field); it holds
    only text and tool references, never a cycle, so the collector skips it.
    """

    is_json: bool
    type: str | None = None
    subtype: str | None = None
    request_id: str | None = None
    uuid: str | None = None
    session_id: str | None = None
    parent_tool_use_id: str | None = None
    tools: tuple[ToolRef, ...] = ()


NOT_JSON: Final = LineFields(is_json=False)

_UNSET: Final[Any] = object()
#: Not parsed yet either, but known not to nest too deeply: :func:`line_fields`
#: read its fields the quick way, which only a line without that many brackets
#: goes (so :attr:`Event.obj` does not count them again).
_SHALLOW: Final[Any] = object()


class Event(msgspec.Struct, eq=False, gc=False):
    """One line (or final partial line) on one stream of one recording.

    ``data`` is the exact bytes without the trailing newline; ``eol`` is False for
    a last line that had none.  ``t_ns`` is monotonic nanoseconds since the child
    started; ``wall_ns`` is the wall clock (Unix epoch, ns) when it was read.

    Compared by identity.  One is made for every line recorded: a struct is made
    in C, at a third of the cost of a slotted dataclass's ``__init__``.  It holds
    bytes, numbers and the parsed line, never itself, so the collector skips it.
    """

    seq: int
    direction: Direction
    t_ns: int
    data: bytes
    eol: bool = True
    wall_ns: int = 0
    _obj: Any = _UNSET
    _fields: LineFields | None = None

    def __repr__(self) -> str:
        # The line's fields, not the parsed copies cached beside them.
        return (f"Event(seq={self.seq!r}, direction={self.direction!r}, t_ns={self.t_ns!r}, "
                f"data={self.data!r}, eol={self.eol!r}, wall_ns={self.wall_ns!r})")

    @property
    def t(self) -> float:
        """Seconds since the child started."""
        return self.t_ns / 1e9

    @property
    def text(self) -> str:
        """The line as text; bytes that are not UTF-8 become U+FFFD."""
        return self.data.decode("utf-8", errors="replace")

    @property
    def obj(self) -> Any:
        """The parsed JSON value, or ``None`` when the line is not JSON."""
        obj = self._obj
        if obj is _UNSET:
            obj = self._obj = parse_json(self.data)
        elif obj is _SHALLOW:
            obj = self._obj = _parse_json(self.data, False)
        return obj

    @property
    def fields(self) -> LineFields:
        """Fields extracted from the line (parsed on first use, then cached).

        When the whole object has not been parsed yet, only the fields are read
        (:func:`line_fields`), which is many times faster.
        """
        if self._fields is None:
            if self._obj is _UNSET:
                self._fields, self._obj = _line_fields(self.data)
            else:
                self._fields = extract_fields(self.obj)
        return self._fields

    def whole_fields(self) -> LineFields:
        """:attr:`fields`, for a line whose parsed value is wanted as well
        (:attr:`obj`): when neither is known yet, the whole line is parsed and
        the fields taken from it, one decoding of the line rather than two
        (the fields' own, then the whole line's)."""
        if self._fields is None:
            self._fields = extract_fields(self.obj)
        return self._fields

    @property
    def type(self) -> str | None:
        return self.fields.type

    @property
    def subtype(self) -> str | None:
        return self.fields.subtype

    @property
    def request_id(self) -> str | None:
        return self.fields.request_id

    @property
    def message(self) -> dict[str, Any] | None:
        """The JSON object of the line, when it is a JSON object."""
        obj = self.obj
        return obj if isinstance(obj, dict) else None

    def forget_parsed(self) -> None:
        """Drop the cached parsed JSON (keeping :attr:`fields`) to save memory.

        The recorder holds events until they are stored; their parsed objects
        would double what a batch costs.  :attr:`obj` parses again if asked.
        """
        if self._fields is None:
            self.fields  # noqa: B018 - keep the extracted fields
        if self._obj is not _SHALLOW:
            self._obj = _UNSET

    @property
    def valid_utf8(self) -> bool:
        try:
            self.data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True


def parsed_event(seq: int, direction: Direction, t_ns: int, data: bytes, obj: Any, *,
                 wall_ns: int = 0) -> Event:
    """An event whose line was written from ``obj`` (a converter's), so that
    reading it does not parse the line again: ``obj`` must be what
    :func:`parse_json` reads from ``data``."""
    return Event(seq, direction, t_ns, data, wall_ns=wall_ns, _obj=obj)


def forget_all_parsed(events: Iterable[Event]) -> None:
    """:meth:`Event.forget_parsed` for each of ``events``, called only for those
    that hold a parsed object or no fields yet (the indexer's every line)."""
    for event in events:
        obj = event._obj
        if event._fields is None or (obj is not _UNSET and obj is not _SHALLOW):
            event.forget_parsed()


#: First bytes after which ``json.loads`` would guess an encoding other than
#: UTF-8 (a byte order mark, or the NUL bytes of UTF-16 and UTF-32).
_NOT_PLAIN_UTF8_START: Final = frozenset({0x00, 0xEF, 0xFE, 0xFF})


#: The decoder ``json.loads`` uses, with its default settings: its public
#: ``raw_decode`` parses one value from the start of a text and says where it ended.
_DECODER: Final = json.JSONDecoder()


def parse_json(data: bytes) -> Any:
    """Parse one line as JSON; ``None`` when it is empty, not UTF-8 or not JSON.

    The same results as ``json.loads`` (which every line of a recording goes
    through), faster: plain UTF-8 is decoded by msgspec (:data:`_decode_any`);
    what it refuses by the standard decoder, UTF-8 without its encoding guess (a
    sizeable share of the parse of a short line), and a line that is one JSON
    value with no space around it in one call of the decoder's public
    ``raw_decode``, without the whitespace matches ``json.loads`` makes on the
    way.  Anything else is left to ``json.loads``.
    """
    return _parse_json(data, True)


def _parse_json(data: bytes, deep: bool) -> Any:
    """:func:`parse_json`; ``deep`` False for a line known to hold too few
    brackets to nest too deeply (:func:`may_nest_too_deep`): they are not
    counted again."""
    if not data:
        return None
    try:
        value = _parse(data)
        # Deeper than any protocol line, and than the recursive code reading
        # values (views, replay, redaction) can walk: text, not JSON.
        if (deep and may_nest_too_deep(data) and isinstance(value, (list, dict))
                and _deeper_than(value, MAX_DEPTH)):
            return None
        # A lone surrogate (an escaped ``\ud800``, or its raw UTF-8 form) is valid
        # JSON but no Unicode text: no database, terminal or exporter takes it.
        # Only lines that may hold one are looked through.
        if (b"\\u" in data or b"\xed" in data) and _SURROGATE.search(data):
            value = _without_lone_surrogates(value)
        return value
    except (ValueError, RecursionError):
        return None


#: The deepest nesting a line may have to be taken for JSON (see :func:`parse_json`).
MAX_DEPTH: Final = 200
#: The shortest JSON nested deeper than :data:`MAX_DEPTH` (that many brackets
#: opened and closed, and one more pair): a shorter line (most are) is not
#: searched for brackets.
_SHORTEST_TOO_DEEP: Final = 2 * (MAX_DEPTH + 1)


#: The length from which a line's brackets are found one by one (``find``, which
#: skips to the next at ``memchr``'s speed) rather than counted (``count``, a
#: byte at a time): a long line is mostly text, with a few brackets (a tool's
#: output, a file read whole), and the two counts of a 2 MB line took longer
#: than msgspec's decoding of it.  A shorter line's counts cost less than the
#: calls of a search: below about 1 KB (a 30-word text delta, 0.56 against 0.78
#: µs); from 1 KB the search wins on a tool's result (1-2 KB: 1.15 against 1.59
#: µs; 3-4 KB: 1.27 against 3.09), the tool-heavy shape's every other line, read
#: in both directions (was 4096: the two counts cost as much as its decoding).
_FIND_BRACKETS_FROM: Final = 1024


def may_nest_too_deep(data: bytes) -> bool:
    """Whether a line may nest deeper than :data:`MAX_DEPTH`: it is as long as
    :data:`_SHORTEST_TOO_DEEP` and holds more brackets than that depth (a quick
    parser that takes any depth leaves such a line to :func:`parse_json`)."""
    return len(data) >= _SHORTEST_TOO_DEEP and (
        data.count(b"[") + data.count(b"{") > MAX_DEPTH if len(data) < _FIND_BRACKETS_FROM
        else _brackets_past_depth(data))


def _brackets_past_depth(data: bytes) -> bool:
    """``data.count(b"[") + data.count(b"{") > MAX_DEPTH``, the brackets found one
    by one, up to the first past that depth."""
    find = data.find
    left = MAX_DEPTH
    for bracket in b"{[":
        at = find(bracket)
        while at >= 0:
            if not left:
                return True
            left -= 1
            at = find(bracket, at + 1)
    return False


def _deeper_than(value: Any, limit: int) -> bool:
    """True when ``value`` nests lists/objects more than ``limit`` deep (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, (list, dict)))
    return False


#: msgspec's decoder of any JSON value: the values ``json.loads`` gives (objects
#: as dicts, a key given twice keeping its last value, integers of any size),
#: at about 2.5 times its speed; what it refuses, ``json.loads`` may still read
#: (``NaN``, ``1e400``, a lone surrogate, a byte order mark), and decides.
_decode_any: Final = msgspec.json.Decoder().decode


def _parse(data: bytes) -> Any:
    if data[0] in _NOT_PLAIN_UTF8_START or (len(data) > 1 and not data[1]):
        return json.loads(data)
    try:
        return _decode_any(data)
    except (ValueError, RecursionError):  # msgspec.DecodeError is a ValueError
        pass
    text = data.decode("utf-8", "surrogatepass")
    try:
        value, end = _DECODER.raw_decode(text)
    except ValueError:  # space before the value, or no JSON: json.loads decides
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


#: An escaped surrogate code point, or one encoded raw (``surrogatepass``).
_SURROGATE: Final = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")


def text_of(value: str) -> str:
    """``value`` with each lone surrogate written as its escape (``\\ud800``): the
    exact line stays in the event's bytes; this is the text every view shows."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _without_lone_surrogates(value: Any) -> Any:
    """A parsed JSON value whose strings (keys too) are :func:`text_of` theirs."""
    if isinstance(value, str):
        return text_of(value)
    if isinstance(value, list):
        return [_without_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {text_of(key): _without_lone_surrogates(item) for key, item in value.items()}
    return value


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _content_tool_refs(message: Any, refs: list[ToolRef]) -> None:
    if not isinstance(message, dict):
        return
    content = message.get("content")
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in TOOL_USE_TYPES:
            tid = _str(block.get("id"))
            if tid:
                refs.append(ToolRef(tid, _str(block.get("name")), "use"))
        elif is_tool_result_type(kind):
            tid = _str(block.get("tool_use_id"))
            if tid:
                refs.append(ToolRef(tid, None, "result", bool(block.get("is_error"))))


def extract_fields(obj: Any) -> LineFields:
    """Extract the indexed fields from a parsed line (see :class:`LineFields`)."""
    if not isinstance(obj, dict):
        return NOT_JSON if obj is None else LineFields(is_json=True)
    mtype = _str(obj.get("type"))
    subtype = _str(obj.get("subtype"))
    request_id = _str(obj.get("request_id"))
    refs: list[ToolRef] = []
    if mtype == "control_request":
        request = obj.get("request")
        if isinstance(request, dict):
            subtype = subtype or _str(request.get("subtype"))
            tid = _str(request.get("tool_use_id"))
            if tid and subtype == "can_use_tool":
                refs.append(ToolRef(tid, _str(request.get("tool_name")), "permission"))
            elif tid and subtype == "hook_callback":
                hook_input = request.get("input")
                name = _str(hook_input.get("tool_name")) if isinstance(hook_input, dict) else None
                refs.append(ToolRef(tid, name, "hook"))
    elif mtype == "control_response":
        response = obj.get("response")
        if isinstance(response, dict):
            subtype = subtype or _str(response.get("subtype"))
            request_id = request_id or _str(response.get("request_id"))
    elif mtype == "stream_event":
        event = obj.get("event")
        if isinstance(event, dict):
            subtype = subtype or _str(event.get("type"))
            block = event.get("content_block")
            if isinstance(block, dict) and block.get("type") in TOOL_USE_TYPES:
                tid = _str(block.get("id"))
                if tid:
                    refs.append(ToolRef(tid, _str(block.get("name")), "use"))
    elif mtype in ("assistant", "user"):
        _content_tool_refs(obj.get("message"), refs)
    return LineFields(
        is_json=True,
        type=mtype,
        subtype=subtype,
        request_id=request_id,
        uuid=_str(obj.get("uuid")),
        session_id=_str(obj.get("session_id")),
        parent_tool_use_id=_str(obj.get("parent_tool_use_id")),
        tools=tuple(refs),
    )


def line_fields(data: bytes) -> LineFields:
    """``extract_fields(parse_json(data))``, without building the whole object.

    msgspec decodes the line straight into the few members :func:`extract_fields`
    reads, skipping (while still checking) everything else: most lines are
    read at a few times the speed of ``json.loads`` alone.  A line it does not
    take — not a JSON object, a member of another type than those fields have
    in the protocol, a value ``json.loads`` reads but strict JSON does not
    (``NaN``), text that is not strict UTF-8 — goes the general way, so the
    result is that of :func:`extract_fields`.  So does a line with more brackets
    than :data:`MAX_DEPTH` (it may be nested too deeply to be JSON; a shorter
    line than :data:`_SHORTEST_TOO_DEEP` cannot be, if it is JSON at all).
    """
    return _line_fields(data)[0]


def _line_fields(data: bytes) -> tuple[LineFields, Any]:
    """:func:`line_fields`, and what :attr:`Event._obj` may hold after: ``_SHALLOW``
    when the line was read the quick way (its brackets were counted: too few
    to nest too deeply), else ``_UNSET``."""
    try:
        # msgspec checks the UTF-8 of the strings it keeps, not of those it skips.
        if not data.isascii():
            data.decode("utf-8")
        # may_nest_too_deep, spelled out: it is asked of every line of 402 bytes
        # or more (a text delta of 30 words is one), and the call cost as much
        # as its two counts.
        if len(data) >= _SHORTEST_TOO_DEEP and (
                data.count(b"[") + data.count(b"{") > MAX_DEPTH
                if len(data) < _FIND_BRACKETS_FROM else _brackets_past_depth(data)):
            return extract_fields(parse_json(data)), _UNSET
        return _from_fast(_decode_line(data)), _SHALLOW
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        # refused: the general way decides
        return extract_fields(parse_json(data)), _UNSET




class _Said(msgspec.Struct, gc=False):
    """What :func:`said_parts` decodes of a line: the members the readable text
    is made of, as any JSON value."""

    type: Any = None
    message: Any = None
    result: Any = None


_decode_said: Final = msgspec.json.Decoder(_Said).decode


def said_parts(data: bytes) -> Any:
    """What :func:`claudetrace.model.protocol.searchable_text` reads of a line: a
    dict of its ``type``, ``message`` and ``result`` (None where missing) as
    :func:`parse_json` reads them, without building the rest: a tool's output
    the CLI echoes in ``tool_use_result`` is checked and skipped, not made into
    Python strings.  A line msgspec does not take as :func:`line_fields` does
    not (not a JSON object, ``NaN``, not strict UTF-8, maybe nested too deep), or
    that may hold a lone surrogate, is parsed whole by :func:`parse_json`, so the
    text made of it is the same."""
    try:
        if not data.isascii():
            data.decode("utf-8")  # msgspec checks the strings it keeps only
        if (may_nest_too_deep(data)
                or ((b"\\u" in data or b"\xed" in data) and _SURROGATE.search(data))):
            return parse_json(data)
        said = _decode_said(data)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return parse_json(data)
    return {"type": said.type, "message": said.message, "result": said.result}


def _from_fast(line: _Line) -> LineFields:
    """:func:`extract_fields` over what :func:`line_fields` decoded (the same rules;
    the most common lines, stream events, looked at first)."""
    mtype, subtype, request_id = line.type, line.subtype, line.request_id
    tools: tuple[ToolRef, ...] = ()
    if mtype == "stream_event":
        event = line.event
        if event is not None:
            subtype = subtype or event.type
            block = event.content_block
            if block is not None and block.type in TOOL_USE_TYPES and block.id:
                tools = (ToolRef(block.id, block.name, "use"),)
    elif mtype == "control_request":
        request = line.request
        if request is not None:
            subtype = subtype or request.subtype
            tid = request.tool_use_id
            if tid and subtype == "can_use_tool":
                tools = (ToolRef(tid, request.tool_name, "permission"),)
            elif tid and subtype == "hook_callback":
                hook_input = request.input
                tools = (ToolRef(tid, hook_input.tool_name if hook_input else None, "hook"),)
    elif mtype == "control_response":
        response = line.response
        if response is not None:
            subtype = subtype or response.subtype
            request_id = request_id or response.request_id
    elif mtype in ("assistant", "user"):
        message = line.message
        if message is not None and isinstance(message.content, list):
            refs: list[ToolRef] = []
            for block in message.content:
                kind = block.type
                if kind in TOOL_USE_TYPES:
                    if block.id:
                        refs.append(ToolRef(block.id, block.name, "use"))
                elif block.tool_use_id and is_tool_result_type(kind):
                    refs.append(ToolRef(block.tool_use_id, None, "result",
                                        bool(block.is_error)))
            tools = tuple(refs)
    return LineFields(True, mtype, subtype, request_id, line.uuid, line.session_id,
                      line.parent_tool_use_id, tools)


# What :func:`line_fields` decodes: the members :func:`extract_fields` reads, each
# with the type the protocol gives it.  A line where one has another type (a
# number where a string belongs, a block that is not an object…) is refused and
# goes the general way.  Made and dropped for every line, and holding no cycle,
# they are kept out of the collector's sight (``gc=False``).


class _Block(msgspec.Struct, gc=False):
    type: str | None = None
    id: str | None = None
    name: str | None = None
    tool_use_id: str | None = None
    # Any JSON value, read as a truth value as the general way reads it.
    is_error: Any = None


class _Message(msgspec.Struct, gc=False):
    content: str | list[_Block] | None = None


class _StreamEvent(msgspec.Struct, gc=False):
    type: str | None = None
    content_block: _Block | None = None


class _HookInput(msgspec.Struct, gc=False):
    tool_name: str | None = None


class _Request(msgspec.Struct, gc=False):
    subtype: str | None = None
    tool_use_id: str | None = None
    tool_name: str | None = None
    input: _HookInput | None = None


class _Response(msgspec.Struct, gc=False):
    subtype: str | None = None
    request_id: str | None = None


class _Line(msgspec.Struct, gc=False):
    type: str | None = None
    subtype: str | None = None
    request_id: str | None = None
    uuid: str | None = None
    session_id: str | None = None
    parent_tool_use_id: str | None = None
    event: _StreamEvent | None = None
    request: _Request | None = None
    response: _Response | None = None
    message: _Message | None = None


_decode_line: Final = msgspec.json.Decoder(_Line).decode


class LineSplitter:
    """Splits a byte stream into lines, keeping every byte.

    ``feed`` returns the complete lines (without their ``\\n``) that the chunk
    finishes; ``finish`` returns the trailing partial line, if any.  ``\\r`` and
    every other byte stay in the line: the split is exact, so joining the lines
    with ``\\n`` (plus the partial tail) gives back the stream.
    """

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        if b"\n" not in chunk:
            self._buf += chunk
            return []
        parts = chunk.split(b"\n")
        if self._buf:
            self._buf += parts[0]
            parts[0] = bytes(self._buf)
            self._buf.clear()
        tail = parts.pop()
        if tail:
            self._buf += tail
        return parts

    @property
    def pending(self) -> int:
        """Bytes held for a line not yet finished."""
        return len(self._buf)

    def finish(self) -> bytes | None:
        if not self._buf:
            return None
        rest = bytes(self._buf)
        self._buf.clear()
        return rest


def iter_lines(data: bytes) -> Iterator[tuple[bytes, bool]]:
    """Split a whole stream into ``(line, eol)`` pairs (used by tests and imports)."""
    splitter = LineSplitter()
    for line in splitter.feed(data):
        yield line, True
    rest = splitter.finish()
    if rest is not None:
        yield rest, False
