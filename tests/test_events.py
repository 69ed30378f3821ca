"""Line framing and field extraction (claudetrace.model.events)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from claudetrace.model.events import (
    Event,
    LineSplitter,
    _without_lone_surrogates,
    extract_fields,
    iter_lines,
    parse_json,
)

# Streams rich in the bytes that matter to framing: newlines, CR, invalid UTF-8.
streams = st.lists(
    st.one_of(st.just(b"\n"), st.just(b"\r\n"), st.just(b"\xff"), st.binary(max_size=40)),
    max_size=40,
).map(b"".join)


def _cuts(data: bytes) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, len(data)), max_size=20).map(sorted)


@given(st.data())
def test_splitter_gives_back_the_exact_stream_for_any_chunking(data: st.DataObject) -> None:
    stream = data.draw(streams)
    cuts = data.draw(_cuts(stream))
    splitter = LineSplitter()
    lines: list[bytes] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        lines.extend(splitter.feed(stream[start:cut]))
        start = cut
    rest = splitter.finish()
    rebuilt = b"".join(line + b"\n" for line in lines) + (rest or b"")
    assert rebuilt == stream
    assert lines == stream.split(b"\n")[:-1]
    assert rest == (stream.split(b"\n")[-1] or None)
    assert splitter.pending == 0


@given(streams)
def test_iter_lines_marks_only_the_unterminated_tail(stream: bytes) -> None:
    pairs = list(iter_lines(stream))
    assert all(eol for _, eol in pairs[:-1])
    if pairs:
        assert pairs[-1][1] == stream.endswith(b"\n")
    assert b"".join(line + (b"\n" if eol else b"") for line, eol in pairs) == stream


def test_splitter_keeps_pending_count_and_empty_lines() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"ab") == []
    assert splitter.pending == 2
    assert splitter.feed(b"c\n\n\nd") == [b"abc", b"", b""]
    assert splitter.pending == 1
    assert splitter.finish() == b"d"
    assert splitter.finish() is None


def _stdlib_parse(data: bytes) -> object:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


_json_texts = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=8,
).map(json.dumps)


@given(
    st.one_of(
        st.binary(max_size=40),
        _json_texts.map(lambda t: t.encode("utf-8")),
        st.tuples(
            st.sampled_from(["utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32",
                             "utf-32-le", "utf-32-be"]),
            _json_texts,
        ).map(lambda pair: pair[1].encode(pair[0])),
        # Space around a value, two values, a value cut short: json.loads decides.
        st.tuples(st.sampled_from(["", " ", "\t", "\r", "\ufeff", "x", "1", "{}", "]"]),
                  _json_texts,
                  st.sampled_from(["", " ", "\r", "\t\n", "x", "1", "{}", ",", "]"]),
                  st.integers(0, 3))
        .map(lambda t: (t[0] + (t[1][:-t[3]] if t[3] else t[1]) + t[2]).encode("utf-8")),
    )
)
def test_parse_json_agrees_with_json_loads_on_any_bytes(data: bytes) -> None:
    # parse_json skips json.loads' encoding guess for plain UTF-8: same results,
    # including for byte order marks, UTF-16/32 and bytes that are not text.
    assert parse_json(data) == _stdlib_parse(data) if data else parse_json(data) is None


def test_parse_json_never_raises() -> None:
    assert parse_json(b"") is None
    assert parse_json(b"\xff\xfe") is None
    assert parse_json(b"{not json") is None
    assert parse_json(b"[" * 100_000) is None  # recursion depth
    assert parse_json(b'{"a": 1}') == {"a": 1}


def test_non_json_event_is_flagged_and_keeps_raw_bytes() -> None:
    ev = Event(0, "out", 0, b"\xffnot json")
    assert ev.fields.is_json is False
    assert ev.obj is None and ev.message is None
    assert ev.data == b"\xffnot json"
    assert not ev.valid_utf8
    assert ev.text.startswith("\ufffd")


def test_json_scalars_are_json_without_fields() -> None:
    fields = extract_fields(42)
    assert fields.is_json and fields.type is None


def test_control_response_request_id_comes_from_inside() -> None:
    line = {"type": "control_response", "response": {"subtype": "success", "request_id": "req_1"}}
    fields = Event(0, "out", 0, json.dumps(line).encode()).fields
    assert (fields.type, fields.subtype, fields.request_id) == (
        "control_response",
        "success",
        "req_1",
    )


def test_tool_refs_from_assistant_user_permission_hook_and_stream_event() -> None:
    assistant = {
        "type": "assistant",
        "session_id": "s1",
        "parent_tool_use_id": "toolu_parent",
        "message": {
            "content": [{"type": "text"}, {"type": "tool_use", "id": "toolu_1", "name": "Bash"}]
        },
    }
    user = {
        "type": "user",
        "message": {"content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
    }
    permission = {
        "type": "control_request",
        "request_id": "r1",
        "request": {"subtype": "can_use_tool", "tool_name": "Bash", "tool_use_id": "toolu_1"},
    }
    hook = {
        "type": "control_request",
        "request_id": "r2",
        "request": {
            "subtype": "hook_callback",
            "tool_use_id": "toolu_1",
            "input": {"tool_name": "Bash"},
        },
    }
    stream = {
        "type": "stream_event",
        "event": {
            "type": "content_block_start",
            "content_block": {"type": "tool_use", "id": "toolu_2", "name": "Read"},
        },
    }
    got = [extract_fields(obj) for obj in (assistant, user, permission, hook, stream)]
    assert [(r.tool_use_id, r.name, r.kind) for f in got for r in f.tools] == [
        ("toolu_1", "Bash", "use"),
        ("toolu_1", None, "result"),
        ("toolu_1", "Bash", "permission"),
        ("toolu_1", "Bash", "hook"),
        ("toolu_2", "Read", "use"),
    ]
    assert got[0].session_id == "s1" and got[0].parent_tool_use_id == "toolu_parent"
    assert got[2].subtype == "can_use_tool" and got[2].request_id == "r1"
    assert got[4].subtype == "content_block_start"


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "type",
                        "subtype",
                        "request",
                        "response",
                        "message",
                        "content",
                        "event",
                        "id",
                        "tool_use_id",
                        "request_id",
                        "input",
                        "content_block",
                        "x",
                    ]
                ),
                inner,
                max_size=4,
            )
        ),
        max_leaves=20,
    )
)
def test_extract_fields_accepts_any_json_shape(obj: object) -> None:
    fields = extract_fields(obj)
    assert fields.is_json == (obj is not None)
    for name in ("type", "subtype", "request_id", "uuid", "session_id", "parent_tool_use_id"):
        assert getattr(fields, name) is None or isinstance(getattr(fields, name), str)


def test_an_events_repr_shows_the_line_not_what_was_parsed_of_it() -> None:
    event = Event(3, "out", 7, b'{"type":"result","secret":1}', True, 9)
    assert event.obj == {"type": "result", "secret": 1}
    assert event.fields.type == "result"
    assert repr(event) == ("Event(seq=3, direction='out', t_ns=7, "
                           """data=b'{"type":"result","secret":1}', eol=True, wall_ns=9)""")


@pytest.mark.parametrize(("depth", "kept"), [(150, True), (199, True), (250, False)])
def test_line_fields_takes_a_deeply_nested_line_for_text_as_parse_json_does(
    depth: int, kept: bool,
) -> None:
    from claudetrace.model.events import line_fields

    line = b'{"type":"user","x":' + b"[" * depth + b"]" * depth + b"}"
    assert line_fields(line) == extract_fields(parse_json(line))
    assert (line_fields(line).type == "user") is kept


@pytest.mark.parametrize(("depth", "said", "kept"), [
    (199, "text", True), (250, "text", False),
    # Brackets in a string nest nothing, but more than MAX_DEPTH of them send the
    # line the general way, which reads it.
    (3, "[{" * 150, True), (3, "{" * 100 + "[" * 96, True),
])
@pytest.mark.parametrize("size", [600, 2000, 5000, 3 << 20])
def test_a_long_lines_brackets_are_found_as_they_are_counted(
    depth: int, said: str, kept: bool, size: int,
) -> None:
    """A line past _FIND_BRACKETS_FROM has its brackets found one by one: the
    same lines go the general way as when they were counted, short or long."""
    from claudetrace.model.events import _FIND_BRACKETS_FROM, line_fields, may_nest_too_deep

    head = b'{"type":"user","x":' + b"[" * depth + b"]" * depth + b',"said":"' + said.encode()
    line = head + b"a" * max(0, size - len(head) - 2) + b'"}'
    assert (len(line) >= _FIND_BRACKETS_FROM) == (size > 600)
    assert may_nest_too_deep(line) == (line.count(b"[") + line.count(b"{") > 200)
    assert line_fields(line) == extract_fields(parse_json(line))
    assert (line_fields(line).type == "user") is kept


@given(st.lists(st.sampled_from([b"[", b"{", b"]", b"x" * 700, b"\\"]), max_size=400))
def test_the_brackets_found_are_those_counted(parts: list[bytes]) -> None:
    from claudetrace.model.events import _brackets_past_depth

    line = b"".join(parts)
    assert _brackets_past_depth(line) == (line.count(b"[") + line.count(b"{") > 200)


_numbers = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers().map(str),
    st.tuples(st.integers(-(10**30), 10**30), st.integers(0, 10**25), st.integers(-400, 400))
    .map(lambda t: f"{t[0]}.{t[1]}e{t[2]}"),
    st.sampled_from(["1e400", "-1e400", "NaN", "Infinity", "-Infinity", "1E+2", "-0", "-0.0",
                     "2.2250738585072011e-308", "4.9e-324", "1.7976931348623157e308"]),
)


@given(st.lists(_numbers, max_size=6), st.text(max_size=6))
def test_parse_json_reads_numbers_and_strings_as_json_loads_does(
    numbers: list[str], text: str,
) -> None:
    """msgspec decodes a line first (parse_json's fast path): every number and
    string it takes it reads as json.loads does, and what it refuses (NaN,
    1e400, a lone surrogate) json.loads still decides."""
    line = ('{"n":[' + ",".join(numbers) + '],"t":' + json.dumps(text) + ',"r":'
            + json.dumps(text, ensure_ascii=False) + ',"n":0}')
    for data in (line.encode("utf-8", "surrogatepass"), line.encode("utf-8", "replace")):
        expected = _stdlib_parse(data)
        # a lone surrogate is written as its escape (text_of), as parse_json always did
        assert repr(parse_json(data)) == repr(_without_lone_surrogates(expected))


def test_parse_json_takes_what_msgspec_refuses_from_json_loads() -> None:
    assert repr(parse_json(b'{"a":NaN,"b":1e400}')) == "{'a': nan, 'b': inf}"
    assert parse_json(b'{"a":1,"a":2}') == {"a": 2}
    assert parse_json(b"123456789012345678901234567890") == 123456789012345678901234567890
    assert parse_json(b'"\\ud800"') == "\\ud800"  # the lone surrogate's escape
    assert parse_json(b" [1] ") == [1]
