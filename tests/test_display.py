"""The one escaping of recorded and user-given text (:mod:`claudetrace.display`)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from claudetrace.display import UNSAFE, markup, say, visible, visible_lines

#: Every bidi control and line separator the escaping names.
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029"


def test_controls_are_written_as_hex_and_text_stays() -> None:
    assert visible("plain é 日本 👩‍💻") == "plain é 日本 👩‍💻"  # ZWJ emoji untouched
    assert visible("a\x1b]0;pwned\x07b") == "a\\x1b]0;pwned\\x07b"
    assert visible("\x1b]52;c;ZXZpbA==\x1b\\") == "\\x1b]52;c;ZXZpbA==\\x1b\\"
    assert visible("\x9b2J\x9d8;;x\x9c\x90q\x9c") == "\\x9b2J\\x9d8;;x\\x9c\\x90q\\x9c"
    assert visible("line\r\nnext\t\x7f") == "line\\x0d\\x0anext\\x09\\x7f"


def test_bidi_controls_and_lone_surrogates_are_written_as_u_escapes() -> None:
    shown = visible(f"x{BIDI}y")
    assert shown == "x" + "".join(f"\\u{ord(c):04x}" for c in BIDI) + "y"
    assert not UNSAFE.search(shown)
    broken = b"ok \xff".decode("utf-8", "surrogateescape")
    assert visible(broken) == "ok \\udcff"
    visible(broken).encode("utf-8")  # a stream takes it


@pytest.mark.parametrize("code", [*range(0x20), *range(0x7F, 0xA0), *map(ord, BIDI)])
def test_no_unsafe_character_survives(code: int) -> None:
    text = f"a{chr(code)}b"
    assert chr(code) not in visible(text)
    assert visible(text).startswith("a\\") and visible(text).endswith("b")


def test_visible_lines_keeps_newlines_only() -> None:
    assert visible_lines("one\x1b[2J\ntwo\u202e") == "one\\x1b[2J\ntwo\\u202e"


def test_markup_prints_brackets_literally() -> None:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    for text in ("[/]", "[link=https://x]click[/link]", "[bold]m[/bold]", "a[/]\x1b[31m"):
        console.print(markup(text))
        assert console.file.getvalue().splitlines()[-1] == visible(text)  # type: ignore[attr-defined]


def test_say_writes_one_visible_line(capsys: pytest.CaptureFixture[str]) -> None:
    say("file \x1b]0;t\x07.jsonl\nnext")
    say("err \u202egnp", err=True)
    out, err = capsys.readouterr()
    assert out == "file \\x1b]0;t\\x07.jsonl\\x0anext\n"
    assert err == "err \\u202egnp\n"
