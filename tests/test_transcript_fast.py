"""The transcript's quick reading of a line (msgspec) shows what json.loads and
json.dumps would: for any line, the entries are those of the stdlib path."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claudetrace import transcript
from claudetrace.model.events import Event, parse_json
from claudetrace.transcript import Entry, _dumps, _fast_dumps, _float_free_object, entries

KINDS = ["stream_event", "keep_alive", "system", "control_request", "control_response",
         "result", "other", "user", "assistant"]


def slow_entries(lines: list[bytes], width: int) -> list[Entry]:
    """The entries with the quick path turned off: every line through parse_json."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(transcript, "_float_free_object", lambda data: None)
        return entries(_events(lines), width=width, include_deltas=True)


def _events(lines: list[bytes]) -> list[Event]:
    return [Event(n, "out", n * 1_000_000, line) for n, line in enumerate(lines)]


def check(lines: list[bytes], width: int = 300) -> None:
    assert entries(_events(lines), width=width, include_deltas=True) == slow_entries(lines, width)
    for line in lines:
        value = _float_free_object(line)
        if value is not None:
            assert value == parse_json(line)
            assert _fast_dumps(value) == _dumps(value)


EDGES = [
    b'{"type":"stream_event","a":1,"a":2,"b":{"c":1,"c":[3]}}',      # duplicate keys
    b'{"type":"stream_event","x":"a\\/b"}',                           # an escape json.dumps drops
    b'{"type":"stream_event","x":"\\u00e9\\u0041\\u001b"}',            # \u escapes
    b'{"type":"stream_event","x":"\\ud800"}', b'{"type":"stream_event","x":"\\ud83d\\ude00"}',
    b'{"type":"stream_event","x":"\xed\xa0\x80"}', b'{"type":"stream_event","x":"\xed\x9f\xbf"}',
    b'{"type":"stream_event","x":"\xff"}', b'{"type":"stream_event","x":"\x01"}',
    b'{"type":"stream_event","n":NaN}', b'{"type":"stream_event","n":Infinity}',
    b'{"type":"stream_event","n":1e999}', b'{"type":"stream_event","n":-0}',
    b'{"type":"stream_event","n":-0.0}', b'{"type":"stream_event","n":1E5}',
    b'{"type":"stream_event","n":[1.5e-7, 2]}', b'{"type":"stream_event","n":"1.5"}',
    b'{"type":"stream_event","n":123456789012345678901234567890123}',
    b'{"type":"stream_event","n":-123456789012345678901234567890123}',
    b'\xef\xbb\xbf{"type":"stream_event"}', b' {"type":"stream_event"}',
    b'{"type":"stream_event"} \t\r', b'{"type":"stream_event"}x', b'{"type":"stream_event",}',
    b'{ "type" : "stream_event" , "x" : [ 1 , { } , [ ] ] }', b'{"type":"stream_event","x":01}',
    b'{"type":"stream_event","x":"tab\\there  two\\nlines\\\\u0041"}',
    b'{"type":"stream_event","x":"\\"quoted\\" \\b\\f\\r"}',
    b'{"type":"stream_event","x":"\xe2\x80\xa8 \xc2\x85 \xe3\x80\x80 \xc2\xa0"}',
    b'{"type":"stream_event","x":' + b"[" * 199 + b"]" * 199 + b"}",
    b'{"type":"stream_event","x":' + b"[" * 200 + b"]" * 200 + b"}",
    b'{"type":"system","subtype":"init","uuid":"u","session_id":"s","model":"m","n":[1,2]}',
    b'{"type":"control_request","request_id":"r","request":{"subtype":"can_use_tool","x":1}}',
    b'{"type":"control_response","response":{"subtype":"error","request_id":"r","error":"e"}}',
    b'{"type":"result","subtype":"success","num_turns":2,"duration_ms":1500,"result":"ok"}',
    b'{"type":5,"x":true}', b'{"type":null}', b"{}", b"[]", b"null", b"", b"not json",
]


def test_edge_lines_show_as_the_stdlib_path_shows_them() -> None:
    check(EDGES)
    check(EDGES, width=5)


def test_an_ordinary_delta_takes_the_quick_path() -> None:
    # Escaped newlines and quotes, non-ASCII, integers and null: what most lines hold.
    line = json.dumps({"type": "stream_event", "event": {
        "type": "content_block_delta", "index": 3, "delta": {
            "type": "text_delta", "text": 'a "quote"\nand é'}},
        "parent_tool_use_id": None}, ensure_ascii=False, separators=(",", ":")).encode()
    assert _float_free_object(line) is not None
    check([line])


_text = st.text(st.characters(codec="utf-8") | st.characters(max_codepoint=0x7f)
                | st.sampled_from(["\ud800", "\udfff", "\u2028", "\x85", "\x7f", "\x1b"]),
                max_size=12)
_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=2**63)
    | st.floats(allow_nan=True) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=25,
)


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    obj = {"type": draw(st.sampled_from(KINDS) | _text), **draw(st.dictionaries(_text, _values,
                                                                               max_size=5))}
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()),
                      separators=draw(st.sampled_from([(",", ":"), (", ", ": "), (",", " : ")])))
    if draw(st.booleans()):  # a key written twice
        key = json.dumps(draw(st.sampled_from(["type", *obj])))
        text = text[:-1] + ("," if len(obj) else "") + f"{key}:{json.dumps(draw(_values))}}}"
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.booleans()):  # a byte changed
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
    return data


# 500 examples: each draws up to four lines of up to 25 nested leaves, so generating
# them is most of the test's time (1,500 took 145 s at load 10); EDGES hold the known
# edge cases, every run.
@settings(max_examples=500, deadline=None)
@given(st.lists(lines(), min_size=1, max_size=4), st.sampled_from([5, 60, 300]))
def test_any_line_shows_as_the_stdlib_path_shows_it(data: list[bytes], width: int) -> None:
    check(data, width)


def test_a_dumped_part_is_json_dumps_of_it() -> None:
    values: list[Any] = [{"a": ["\x00\x1f\"\\/\u2028é", 2**70, -(2**70), None, True, {}]}, [], "x"]
    for value in values:
        assert _fast_dumps(value) == json.dumps(value, ensure_ascii=False)
