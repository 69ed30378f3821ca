"""JSON Lines files read a block at a time: the lines, their numbers, the lines
skipped as too long and a torn last line are those a line at a time gives."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claudetrace.formats import jsonl
from claudetrace.formats.jsonl import JsonlFile, size_text


def line_at_a_time(data: bytes, max_line: int) -> tuple[list[tuple[int, bytes]], list[str], bool,
                                                        int]:
    """What reading ``data`` a line at a time gives: the lines, the damage said,
    whether its last line is torn, and the offset past its last whole line."""
    lines: list[tuple[int, bytes]] = []
    damaged: list[str] = []
    end = 0
    pieces = data.split(b"\n")
    for number, piece in enumerate(pieces[:-1], 1):
        raw = piece + b"\n"
        end += len(raw)
        if len(raw) > max_line + 1:
            damaged.append(f"f.jsonl:{number}: longer than {size_text(max_line)}, skipped")
        elif raw.strip():
            lines.append((number, raw))
    return lines, damaged, bool(pieces[-1]), end


def read(path: Path, max_line: int) -> tuple[list[tuple[int, bytes]], list[str], bool, int]:
    reader = JsonlFile(path, max_line=max_line)
    lines = list(reader.lines())
    return lines, reader.damaged, reader.torn, reader.end


@settings(max_examples=300, deadline=None)
@given(data=st.lists(st.sampled_from([b"a", b"{}", b"\n", b" ", b"\n\n", b"xyzxyzxyz"]),
                     max_size=40).map(b"".join),
       block=st.integers(1, 9), max_line=st.integers(1, 12))
def test_lines_across_blocks_are_those_of_a_line_at_a_time(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, block: int, max_line: int
) -> None:
    path = tmp_path_factory.mktemp("jsonl") / "f.jsonl"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jsonl, "_READ", block)
        patch.setattr(jsonl, "_NAMED", 1000)
        assert read(path, max_line) == line_at_a_time(data, max_line)


def test_a_long_line_across_many_blocks_is_held_once(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonl, "_READ", 1000)
    line = b'{"text": "' + b"w" * 100_000 + b'"}\n'
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"a": 1}\n' + line + b"x" * 250_000 + b"\n" + b'{"b": 2}')
    reader = JsonlFile(path, max_line=200_000)
    assert list(reader.lines()) == [(1, b'{"a": 1}\n'), (2, line)]
    assert reader.damaged == ["f.jsonl:3: longer than 200000 bytes, skipped"]
    assert reader.torn and reader.end == len(line) + 9 + 250_001
