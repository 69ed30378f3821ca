"""line_fields: the indexer's fast reading of a line's fields is extract_fields' exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import claudetrace
from claudetrace.cassette import read_cassette
from claudetrace.errors import CassetteError
from claudetrace.model.events import Event, extract_fields, line_fields, parse_json

FIXTURES = Path(__file__).parent / "fixtures"


def reference(data: bytes) -> Any:
    return extract_fields(parse_json(data))


def test_every_recorded_line_reads_the_same() -> None:
    seen = 0
    package = Path(claudetrace.__file__).parent
    paths = [*FIXTURES.rglob("*.ndjson"), *package.rglob("*.cassette.ndjson")]
    for path in sorted(paths):
        try:
            cassette = read_cassette(path)
        except CassetteError:  # not a cassette (a transcript, a golden file)
            continue
        for event in cassette.events:
            assert line_fields(event.data) == reference(event.data), event.data[:200]
            seen += 1
    assert seen > 1000


EDGES = [
    b"", b"null", b"[1]", b'"text"', b"42", b"not json", b"{", b'{"type":"a"}x',
    b'{"type":"a","type":"b"}', b'{"type":"\\ud800"}', b'{"type":"t","n":NaN}',
    b'{"type":"t","x":"\xff"}', b'{"type":"t","x":"\xed\xa0\x80"}', b'\xef\xbb\xbf{"type":"t"}',
    b' {"type":"t"} ', b'{"type":"t"}\r', b'{"type":"t","x":"\x01"}', b'{"type":"t",}',
    b'{"type":5}', b'{"type":"user","message":"plain"}',
    b'{"type":"user","message":{"content":"plain"}}',
    b'{"type":"user","message":{"content":["text",{"type":"tool_result","tool_use_id":"t"}]}}',
    b'{"type":"user","message":{"content":[{"type":"x_tool_result","tool_use_id":"t"}]}}',
    b'{"type":"user","message":{"content":[{"type":"xtool_result","tool_use_id":"t"}]}}',
    b'{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t",'
    b'"is_error":true},{"type":"tool_result","tool_use_id":"u","is_error":{"a":1}},'
    b'{"type":"tool_result","tool_use_id":"v","is_error":0}]}}',
    b'{"type":"assistant","message":{"content":[{"type":"tool_use","id":"","name":"n"}]}}',
    b'{"type":"control_request","request":{"subtype":"hook_callback","tool_use_id":"t",'
    b'"input":"no object"}}',
    b'{"type":"control_request","request":{"subtype":"hook_callback","tool_use_id":"t",'
    b'"input":{"tool_name":"Bash"}}}',
    b'{"type":"control_request","subtype":"own","request":{"subtype":"can_use_tool",'
    b'"tool_use_id":"t","tool_name":7}}',
    b'{"type":"control_response","response":{"subtype":"success","request_id":"r"}}',
    b'{"type":"stream_event","event":{"type":"content_block_start",'
    b'"content_block":{"type":"mcp_tool_use","id":"m","name":"x"}}}',
    b'{"type":"stream_event","event":[]}',
    b'{"x":' + b"[" * 300 + b"]" * 300 + b',"type":"deep"}',
    # At the depth limit, in as few bytes as it takes (shorter lines skip the search).
    b"[" * 200 + b"]" * 200, b"[" * 201 + b"]" * 201, b'{"x":' + b"[" * 199 + b"]" * 199 + b"}",
    b'{"x":' + b"[" * 200 + b"]" * 200 + b"}", b"[" * 201 + b"]" * 200,
]


def test_the_depth_limit_holds_at_its_shortest_lines() -> None:
    assert parse_json(b"[" * 200 + b"]" * 200) is not None
    assert parse_json(b"[" * 201 + b"]" * 201) is None
    assert line_fields(b'{"x":' + b"[" * 199 + b"]" * 199 + b"}").is_json
    assert not line_fields(b'{"x":' + b"[" * 200 + b"]" * 200 + b"}").is_json


def test_edge_lines_read_the_same() -> None:
    for data in EDGES:
        assert line_fields(data) == reference(data), data


def test_an_event_reads_its_fields_fast_or_from_its_parsed_object_alike() -> None:
    for data in EDGES:
        fast, parsed = Event(0, "out", 0, data), Event(0, "out", 0, data)
        parsed.obj  # noqa: B018 - parsed first: fields come from the object
        assert fast.fields == parsed.fields
        # Its fields read the quick way, the line parses as it would have.
        assert repr(fast.obj) == repr(parse_json(data)), data


# Objects built from the members extract_fields reads, each of any JSON type.
KEYS = ["type", "subtype", "request_id", "uuid", "session_id", "parent_tool_use_id", "event",
        "request", "response", "message", "content", "content_block", "id", "name",
        "tool_use_id", "tool_name", "input", "is_error", "other"]
VALUES = ["tool_use", "tool_result", "mcp_tool_use", "server_tool_use", "control_request",
          "control_response", "stream_event", "assistant", "user", "can_use_tool",
          "hook_callback", "a_tool_result", "xtool_result", "", "x"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
    | st.sampled_from(VALUES),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner,
                                                                 max_size=5),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=8))
def test_any_object_of_those_members_reads_the_same(obj: dict[str, Any]) -> None:
    data = json.dumps(obj).encode()
    assert line_fields(data) == reference(data)
