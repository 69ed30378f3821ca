"""The one reader of a message's content blocks (claudetrace.model.content)."""

from __future__ import annotations

import json
from typing import Any

from claudetrace.model.content import blocks, content_text, find_block, message_blocks
from claudetrace.model.events import Event


def line(obj: Any) -> Event:
    return Event(0, "out", 0, json.dumps(obj).encode())


def test_every_kind_of_block_is_read_and_unknown_ones_are_kept() -> None:
    content = [
        {"type": "text", "text": "Hello."},
        {"type": "thinking", "thinking": "Hmm.", "signature": "s"},
        {"type": "redacted_thinking", "data": "xyz"},
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
        {"type": "server_tool_use", "id": "t2", "name": "web_search", "input": {"q": "x"}},
        {"type": "mcp_tool_use", "id": "t3", "name": "add", "server_name": "calc", "input": {}},
        {"type": "tool_result", "tool_use_id": "t1", "is_error": True,
         "content": [{"type": "text", "text": "no"}, {"type": "image", "source": {}}]},
        {"type": "web_search_tool_result", "tool_use_id": "t2", "content": "found"},
        {"type": "image", "source": {"type": "base64", "data": "AAAA"}},
        {"type": "brand_new", "x": 1},
        "a bare string",
        7,
    ]
    read = blocks(content)
    assert [(b.kind, b.type) for b in read] == [
        ("text", "text"), ("thinking", "thinking"), ("thinking", "redacted_thinking"),
        ("tool_use", "tool_use"), ("tool_use", "server_tool_use"),
        ("tool_use", "mcp_tool_use"), ("tool_result", "tool_result"),
        ("tool_result", "web_search_tool_result"), ("image", "image"),
        ("other", "brand_new"), ("text", "text"), ("other", "int"),
    ]
    assert read[2].redacted and read[2].text == "" and not read[1].redacted
    assert (read[4].id, read[4].name, read[4].input) == ("t2", "web_search", {"q": "x"})
    assert (read[6].id, read[6].is_error, read[6].text) == ("t1", True, "no\n[image]")
    assert not read[7].is_error and read[7].text == "found"
    assert read[9].raw == {"type": "brand_new", "x": 1} and read[9].label == "[brand_new]"
    assert find_block(read, "tool_use", "t3") is read[5]
    assert find_block(read, "tool_result", "t2") is read[7]
    assert find_block(read, "tool_use", "t9") is None


def test_a_plain_prompt_and_missing_content() -> None:
    assert [(b.kind, b.text) for b in blocks("hi")] == [("text", "hi")]
    assert blocks(None) == []
    prompt = line({"type": "user", "message": {"role": "user", "content": "hi"}})
    assert [b.text for b in message_blocks(prompt)] == ["hi"]
    assert message_blocks(line({"type": "user"})) == []
    assert message_blocks(line({"type": "user", "message": "not an object"})) == []


def test_content_text_is_what_a_person_reads() -> None:
    assert content_text("plain") == "plain"
    assert content_text(None) == ""
    assert content_text([{"type": "text", "text": "a"}, {"type": "thinking", "thinking": "t"},
                         {"type": "image"}, {"type": "text", "text": "b"}], " ") == "a [image] b"
    assert content_text([3]) == "3"


#: Content of every shape a line may hold: each kind of block, odd members and
#: types, a tool result nested in a tool result, a single block not in a list.
SHAPES: list[Any] = [
    None, "", "a prompt", 7, [], {"type": "text", "text": "one block, no list"},
    [{"type": "text", "text": ""}, {"type": "text", "text": 3}, {"type": "text"},
     {"type": "thinking", "thinking": "deep"}, {"type": "redacted_thinking", "data": "x"},
     {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls", "n": [1, True,
                                                                            None, 2.5]}},
     {"type": "tool_use", "id": "t1", "name": "Again", "input": "text"},
     {"type": "server_tool_use", "id": 5, "name": None, "input": None},
     {"type": "mcp_tool_use", "id": "t3", "name": "", "input": {"a": {"b": "c"}}},
     {"type": "tool_result", "tool_use_id": "t1", "is_error": 1,
      "content": [{"type": "text", "text": "no"}, {"type": "image", "source": {}},
                  {"type": "tool_result", "tool_use_id": "in", "content": "nested"}, "bare"]},
     {"type": "web_search_tool_result", "tool_use_id": "t2", "content": {"type": "text",
                                                                        "text": "found"}},
     {"type": "tool_result", "tool_use_id": "t1", "content": "second answer"},
     {"type": "tool_result", "tool_use_id": None, "content": None},
     {"type": "image"}, {"type": None}, {"x": 1}, "bare", 8, None, ["list"]],
]


def test_a_block_is_found_in_the_content_as_among_its_blocks() -> None:
    from claudetrace.model.content import find_content_block

    for content in SHAPES:
        read = blocks(content)
        for kind in ("tool_use", "tool_result"):
            for block_id in ("t1", "t2", "t3", "in", "5", "none"):
                want = find_block(read, kind, block_id)  # type: ignore[arg-type]
                got = find_content_block(content, kind, block_id)  # type: ignore[arg-type]
                assert got == want, (content, kind, block_id)
