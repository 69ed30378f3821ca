"""bench ingest's shapes of input: deterministic, the lines the CLI writes, the
sizes they claim (nothing here is timed)."""

from __future__ import annotations

import itertools
import json

import pytest

from claudetrace.bench.shapes import SHAPES, shape_lines
from claudetrace.cli.bench import SHAPE_NAMES
from claudetrace.model.events import line_fields


def test_the_command_line_offers_every_shape() -> None:
    assert list(SHAPE_NAMES) == list(SHAPES)


@pytest.mark.parametrize("shape", ["deltas", "tools", "huge"])
def test_a_shape_is_the_same_bytes_every_time_and_json_lines(shape: str) -> None:
    first = list(shape_lines(shape, 12))
    assert first == list(shape_lines(shape, 12))
    assert len(first) == 12
    for line in first:
        assert b"\n" not in line
        obj = json.loads(line)
        assert obj["session_id"] and obj["uuid"]


def test_deltas_are_49_text_deltas_of_about_30_words_then_a_tool_call() -> None:
    lines = list(shape_lines("deltas", 100))
    kinds = [(f.type, f.subtype) for f in map(line_fields, lines)]
    assert kinds == ([("stream_event", "content_block_delta")] * 49 + [("assistant", None)]) * 2
    text = json.loads(lines[0])["event"]["delta"]["text"]
    assert len(text.split()) == 30
    assert [t.kind for t in line_fields(lines[49]).tools] == ["use"]
    # The burst: 127,500 lines of about 460 bytes (58 MB).
    size = sum(len(line) + 1 for line in lines) / len(lines)
    assert 400 < size < 520 and SHAPES["deltas"].lines == 127_500


def test_tools_pair_each_call_with_its_result() -> None:
    lines = [line_fields(line) for line in shape_lines("tools", 40)]
    uses = [t.tool_use_id for f in lines[0::2] for t in f.tools if t.kind == "use"]
    results = [t.tool_use_id for f in lines[1::2] for t in f.tools if t.kind == "result"]
    assert uses == results and len(set(uses)) == 20


def test_huge_has_a_line_of_one_to_five_megabytes_in_four() -> None:
    sizes = [len(line) for line in itertools.islice(shape_lines("huge", 8), 8)]
    assert all(1 << 20 <= s <= (5 << 20) + 4096 for s in sizes[3::4])
    assert all(s < 4096 for i, s in enumerate(sizes) if i % 4 != 3)


def test_an_unknown_shape_is_refused() -> None:
    with pytest.raises(ValueError, match="no shape 'wide'"):
        shape_lines("wide", 1)
