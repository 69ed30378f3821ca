"""Cassette v1 reading and writing (claudetrace.cassette)."""

from __future__ import annotations

import io
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claudetrace.cassette import (
    dumps_record,
    event_line,
    event_lines,
    event_record,
    iter_cassette,
    new_header,
    parse_record,
    read_cassette,
    write_cassette,
)
from claudetrace.errors import CassetteError
from claudetrace.model.events import Event

SAMPLES = sorted((Path(__file__).parent / "fixtures" / "samples").glob("*.cassette.ndjson"))

line_bytes = st.one_of(
    st.binary(max_size=60),
    st.text(max_size=60).map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.just(b""),
    st.just(b"\xff\xfe\x00"),
).filter(lambda b: b"\n" not in b)


@st.composite
def event_lists(draw: st.DrawFn) -> list[Event]:
    datas = draw(st.lists(line_bytes, max_size=12))
    events: list[Event] = []
    t_ns = 0
    for seq, data in enumerate(datas):
        t_ns += draw(st.integers(0, 10**10))
        direction = draw(st.sampled_from(["in", "out", "err"]))
        events.append(Event(seq, direction, t_ns, data, eol=True))
    if events and draw(st.booleans()):
        events[-1].eol = False
    return events


def _dump(header: dict[str, object], events: list[Event]) -> str:
    out = io.StringIO()
    write_cassette(out, header, events)
    return out.getvalue()


@settings(max_examples=60, deadline=None)
@given(event_lists())
def test_write_read_write_is_exact(
    tmp_path_factory: pytest.TempPathFactory, events: list[Event]
) -> None:
    path = tmp_path_factory.mktemp("c") / "x.cassette.ndjson"
    header = new_header(argv=["claude", "-p"], exit_code=0)
    write_cassette(path, header, events)
    back = read_cassette(path)
    assert [(e.seq, e.direction, e.t_ns, e.data, e.eol) for e in back.events] == [
        (e.seq, e.direction, e.t_ns, e.data, e.eol) for e in events
    ]
    assert _dump(back.header, back.events) == path.read_text(encoding="utf-8")


def test_non_utf8_uses_line_b64_and_missing_eol_is_marked() -> None:
    text = _dump(
        new_header(),
        [Event(0, "out", 5, b"\xff\x00ok", eol=True), Event(1, "err", 6, b"x", eol=False)],
    )
    records = [json.loads(line) for line in text.splitlines()[1:]]
    assert records[0] == {"seq": 0, "t": 5e-09, "dir": "out", "line_b64": "/wBvaw=="}
    assert records[1] == {"seq": 1, "t": 6e-09, "dir": "err", "line": "x", "eol": False}


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_samples_round_trip_byte_for_byte(sample: Path) -> None:
    original = sample.read_text(encoding="utf-8").splitlines()
    cassette = read_cassette(sample)
    again = _dump(cassette.header, cassette.events).splitlines()
    assert again[1:] == original[1:]
    assert json.loads(again[0]) == json.loads(original[0])


def test_samples_are_present() -> None:
    assert len(SAMPLES) == 2


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("not json", "event is not JSON"),
        ('{"seq": ' + "9" * 5000 + "}", "event is not JSON (Exceeds the limit"),
        ("[1]", "not a JSON object"),
        ('{"t": 0, "dir": "in", "line": ""}', '"seq" must be'),
        ('{"seq": -1, "t": 0, "dir": "in", "line": ""}', '"seq" must be'),
        ('{"seq": true, "t": 0, "dir": "in", "line": ""}', '"seq" must be'),
        ('{"seq": 0, "dir": "in", "line": ""}', '"t" must be'),
        ('{"seq": 0, "t": -1, "dir": "in", "line": ""}', '"t" must be'),
        ('{"seq": 0, "t": NaN, "dir": "in", "line": ""}', '"t" must be'),
        # The largest t below MAX_NS / 1e9: its nanoseconds round to 2**63.
        ('{"seq": 0, "t": 9223372036.854775807, "dir": "in", "line": ""}', '"t" must be'),
        ('{"seq": 0, "t": "1", "dir": "in", "line": ""}', '"t" must be'),
        ('{"seq": 0, "t": 0, "dir": "up", "line": ""}', '"dir" must be'),
        ('{"seq": 0, "t": 0, "dir": "in"}', 'neither "line" nor "line_b64"'),
        ('{"seq": 0, "t": 0, "dir": "in", "line": 5}', '"line" must be a string'),
        ('{"seq": 0, "t": 0, "dir": "in", "line_b64": "!!"}', "not valid base64"),
        ('{"seq": 0, "t": 0, "dir": "in", "line": "", "eol": "no"}', '"eol" must be'),
    ],
)
def test_malformed_event_lines_name_file_and_line(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "bad.ndjson"
    path.write_text(json.dumps(new_header()) + "\n" + body + "\n", encoding="utf-8")
    with pytest.raises(CassetteError, match=r"bad\.ndjson:2: ") as info:
        read_cassette(path)
    assert message in str(info.value)


def test_parse_record_reads_both_encodings() -> None:
    ev = parse_record('{"seq": 3, "t": 1.5, "dir": "err", "line_b64": "/w=="}')
    assert (ev.seq, ev.t_ns, ev.direction, ev.data, ev.eol) == (
        3,
        1_500_000_000,
        "err",
        b"\xff",
        True,
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"garbage\n", "header is not JSON"),
        (b'{"version": 1}\n', "not a claudetrace cassette"),
        (b'{"claudetrace": "cassette", "version": 2}\n', "unsupported cassette version 2"),
        (b"\xff\xfe\n", "cannot read cassette"),
        # Each was read as something else: no argv (replay then skips its argv
        # check), no exit code, version 1 (and written back as true by export).
        (b'{"claudetrace": "cassette", "version": true}\n', "unsupported cassette version True"),
        (b'{"claudetrace": "cassette", "version": 1, "argv": "notalist"}\n',
         "bad.ndjson:1: \"argv\" must be a list of strings, not 'notalist'"),
        (b'{"claudetrace": "cassette", "version": 1, "argv": ["claude", 3]}\n',
         '"argv" must be a list of strings'),
        (b'{"claudetrace": "cassette", "version": 1, "exit_code": "boom"}\n',
         "\"exit_code\" must be an integer or null, not 'boom'"),
        (b'{"claudetrace": "cassette", "version": 1, "signal": true}\n',
         '"signal" must be an integer or null, not True'),
    ],
)
def test_bad_headers(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.ndjson"
    path.write_bytes(content)
    with pytest.raises(CassetteError, match=message):
        read_cassette(path)


def test_non_increasing_seq_and_non_utf8_body(tmp_path: Path) -> None:
    path = tmp_path / "bad.ndjson"
    head = json.dumps(new_header()) + "\n"
    rec = '{"seq": 1, "t": 0, "dir": "in", "line": ""}\n'
    path.write_text(head + rec + rec, encoding="utf-8")
    with pytest.raises(CassetteError, match=r":3: \"seq\" 1 does not increase"):
        read_cassette(path)
    path.write_bytes(head.encode() + b"\xff\n")
    with pytest.raises(CassetteError, match="not UTF-8"):
        read_cassette(path)


def test_missing_file_and_unwritable_target(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match="cannot read cassette"):
        iter_cassette(tmp_path / "nope.ndjson")
    with pytest.raises(CassetteError, match="cannot write cassette"):
        write_cassette(tmp_path / "no" / "dir" / "x.ndjson", new_header(), [])


def test_a_cassette_written_to_a_pipe_or_device_goes_into_it(tmp_path: Path) -> None:
    # export -o /dev/null (or a FIFO, /dev/stdout): written into, never replaced by a
    # file (as root, the write-then-rename put a regular file in /dev/null's place).
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert write_cassette(fifo, new_header(), [Event(0, "out", 0, b"x")]) == 1
    reader.join(30)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert got and got[0].endswith(b'"dir": "out", "line": "x"}\n'), got
    assert list(tmp_path.iterdir()) == [fifo]  # no temporary file left beside it


def test_a_cassette_written_through_a_symlink_goes_to_its_target(tmp_path: Path) -> None:
    # The symlink stays; a regular target is replaced (written beside it, renamed),
    # a FIFO is written into, a dangling symlink's target is created.
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    target = folder / "c.ndjson"
    target.write_text("old\n")
    dangling_target = folder / "new.ndjson"
    fifo = folder / "pipe"
    os.mkfifo(fifo)
    links = {}
    for name, to in (("file", target), ("dangling", dangling_target), ("fifo", fifo)):
        links[name] = tmp_path / f"{name}.ndjson"
        links[name].symlink_to(to)
    for name in ("file", "dangling"):
        assert write_cassette(links[name], new_header(), [Event(0, "out", 0, b"x")]) == 1
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert write_cassette(links["fifo"], new_header(), [Event(0, "out", 0, b"x")]) == 1
    reader.join(30)
    for name, to in (("file", target), ("dangling", dangling_target), ("fifo", fifo)):
        assert links[name].is_symlink() and links[name].readlink() == to, name
    for written in (target, dangling_target):
        assert [e.data for e in read_cassette(written).events] == [b"x"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert got and got[0].endswith(b'"dir": "out", "line": "x"}\n'), got
    # No temporary file left in either folder.
    assert sorted(p.name for p in folder.iterdir()) == ["c.ndjson", "new.ndjson", "pipe"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "dangling.ndjson", "elsewhere", "fifo.ndjson", "file.ndjson"]


def test_a_symlink_loop_is_one_error_and_stays(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(CassetteError, match="cannot write cassette"):
        write_cassette(loop, new_header(), [])
    assert loop.is_symlink() and list(tmp_path.iterdir()) == [loop]


def test_blank_lines_between_events_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "c.ndjson"
    path.write_text(
        json.dumps(new_header()) + "\n\n" + '{"seq": 0, "t": 0, "dir": "in", "line": "a"}\n\n',
        encoding="utf-8",
    )
    assert [e.data for e in read_cassette(path).events] == [b"a"]


@pytest.mark.parametrize("line", [
    '{"seq": 3, "t": 0.5, "dir": "out", "line": "{\\"type\\":\\"x\\"}"}',
    '{"seq": 3, "t": 1, "dir": "err", "line": "é \\u001b[2J", "eol": false, "extra": [1]}',
    '{"seq": 1, "seq": 2, "t": 0, "dir": "in", "line": "dup"}',
    '{"seq": 0, "t": 0, "dir": "in", "line_b64": "/w=="}',
    '{"seq": 0, "t": 0, "dir": "in", "line": null}',
    '{"seq": 0, "t": NaN, "dir": "in", "line": "x"}',
    '{"seq": 0, "t": 1e400, "dir": "in", "line": "x"}',
    '{"seq": 0, "t": 9223372036.854775807, "dir": "in", "line": "x"}',
    '{"seq": 0, "t": 9223372036.854774, "dir": "in", "line": "x"}',
    '{"seq": true, "t": 0, "dir": "in", "line": "x"}',
    '{"seq": 99999999999999999999999, "t": 0, "dir": "in", "line": "x"}',
    '{"seq": 0, "t": -1, "dir": "in", "line": "x"}',
    '{"seq": 2147483647, "t": 9223372036.854776, "dir": "in", "line": "x"}',
    '{"seq": 2147483648, "t": 0, "dir": "in", "line": "x"}',
    '{"seq": -1, "t": 0, "dir": "in", "line": "x"}',
    '{"seq": 0, "t": -0.0, "dir": "in", "line": "x"}',
    '{"seq": 0, "t": 9223372036.8547764, "dir": "in", "line": "x"}',
    '{"seq": 0, "t": 0, "dir": 5, "line": "x"}',
    '{"seq": 0.5, "t": 0, "dir": "in", "line": "x"}',
    '{"seq": 0, "t": 0, "dir": "up", "line": "x"}',
    '{"seq": 0, "t": 0, "dir": "in", "line": "\\ud800"}',
    '{"seq": 0, "t": 0, "dir": "in", "line": "x", "eol": 1}',
    '{"seq": 0, "t": 0, "dir": "in", "line": "x", "deep": ' + "[" * 5000 + "]" * 5000 + "}",
    '{"seq": 0, "t": 0, "dir": "in", "line": "x"}\r\n',
    "[1, 2]",
    "not json",
])
def test_reading_a_record_from_bytes_is_parsing_it(line: str) -> None:
    from claudetrace.cassette import read_record

    def outcome(read: Any) -> Any:
        try:
            event = read()
        except CassetteError as exc:
            return str(exc)
        return (event.seq, event.direction, event.t_ns, event.data, event.eol)

    fast = outcome(lambda: read_record(line.encode(), path="c", line=2))
    general = outcome(lambda: parse_record(line, path="c", line=2))
    assert fast == general


@settings(max_examples=200, deadline=None)
@given(page=st.lists(st.tuples(st.integers(0, 2**31 - 1), st.sampled_from(["in", "out", "err"]),
                               st.integers(0, 2**63 - 1), line_bytes, st.booleans()),
                     max_size=6))
def test_a_page_of_lines_is_spelled_as_each_line_alone(
    page: list[tuple[int, str, int, bytes, bool]],
) -> None:
    columns = tuple(zip(*page, strict=True)) or ((), (), (), (), ())
    lines = event_lines(*columns)
    assert lines == [event_line(*row) for row in page]
    assert lines == [dumps_record(event_record(Event(*row))) + "\n"  # type: ignore[arg-type]
                     for row in page]


def test_a_line_that_is_not_json_says_where_it_breaks() -> None:
    from claudetrace.cassette import parse_header, parse_record

    with pytest.raises(CassetteError) as info:
        parse_record('{"seq": 1, "line": "abc', line=7)
    assert str(info.value) == (
        "<cassette>:7: event is not JSON (Unterminated string starting at column 20)")
    with pytest.raises(CassetteError, match=r"header is not JSON \(Expecting value at column 16\)"):
        parse_header('{"claudetrace":')
