"""Find within a session (claudetrace.ui.find) on real-CLI recordings and the
showcase sessions, without a browser: what is searched, the counts, turns and
anchors, a literal case-insensitive text, and the marks escaped."""

from __future__ import annotations

from pathlib import Path

import pytest

from claudetrace.cassette import read_cassette
from claudetrace.store import open_store
from claudetrace.ui import find, present
from claudetrace.ui.conversation import Conversation, walk
from claudetrace.ui.markdown import markdown_tree, marked_html, segments, tree_html
from tests.showcase import seed

CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"


def folded(events: object) -> tuple[Conversation, list[present.TraceRow]]:
    conv = Conversation()
    conv.feed_many(events)  # type: ignore[arg-type]
    conv.settle(conv.items)
    tree = present.trace_tree(conv.session, end_ns=None, status="ok")
    return conv, present.trace_rows(tree, 0)


def found_in(name: str, query: str) -> find.Found:
    conv, rows = folded(read_cassette(CASSETTES / f"{name}.ndjson").events)
    return find.find(query, conv.items, rows, conv.session)


def test_a_tool_input_and_the_prompt_are_found_case_ignored() -> None:
    found = found_in("permission_deny", "TOUCH")
    assert [(m.kind, m.label, m.turn) for m in found.matches] == [
        ("item", "user · text", 1), ("item", "tool Bash · input", 1)]
    assert found.total == 2 and found.turns() == [1]
    assert found.summary() == "2 matches · 2 items, 0 spans · turn 1"
    before, hit, after = found.matches[1].excerpt
    assert hit == "touch" and before.endswith('"command": "') and "\n" not in after
    assert [m.anchor for m in found.matches] == [find.item_anchor(m.seq) for m in found.matches]


def test_a_span_is_found_by_its_name_and_detail() -> None:
    found = found_in("permission_deny", "permission deny")
    spans = found.spans()
    assert [(m.label, m.turn, m.ref.split(":")[0]) for m in spans] == [
        ("tool Bash · detail", 1, "tool")]
    assert spans[0].anchor == find.span_anchor(spans[0].row)


def test_a_subagent_item_is_found_under_the_call_that_holds_it() -> None:
    found = found_in("subagent", "count the words")
    nested = [m for m in found.items() if m.seq != m.top_seq]
    assert nested, found.matches
    tool = next(m for m in found.items() if m.label.startswith("tool Agent"))
    assert all(m.top_seq == tool.seq for m in nested)


def test_the_text_is_literal_never_a_pattern() -> None:
    assert find.pattern("  ") is None
    needle = find.pattern("a.c(")
    assert needle is not None
    assert list(needle.spans("abc( a.c( A.C(")) == [(5, 9), (10, 14)]
    assert found_in("permission_deny", ".*").matches == []
    assert found_in("permission_deny", "").summary() == "no match"


#: Texts whose case a regular expression's IGNORECASE folds otherwise than a
#: browser's toLowerCase (what the HTML report's find counts by): a final sigma,
#: a long s, a dotless i, a dotted capital I (two characters lowercased).
SIGMA, FINAL, CAPITAL = "\u03c3", "\u03c2", "\u03a3"
LONG_S, DOTLESS, DOTTED, KELVIN = "\u017f", "\u0131", "\u0130", "\u212a"
ODOS = "\u039f\u0394\u039f" + CAPITAL
FOLDS = [(f"{ODOS} {CAPITAL}\u039f{CAPITAL}", SIGMA, [CAPITAL]), (ODOS, FINAL, [CAPITAL]),
         (f"{LONG_S}top stop", "s", ["s"]), (f"{DOTLESS}i", "I", ["i"]),
         (f"{DOTTED}stanbul", "i\u0307", [DOTTED]), (f"{DOTTED}stanbul", "I", [DOTTED]),
         (f"x {DOTTED}{DOTTED} y", "i\u0307i\u0307", [DOTTED * 2]),
         (f"{KELVIN} k", "K", [KELVIN, "k"])]


@pytest.mark.parametrize(("text", "query", "marked"), FOLDS)
def test_case_is_folded_as_the_browser_lowercases(text: str, query: str,
                                                  marked: list[str]) -> None:
    needle = find.pattern(query)
    assert needle is not None
    assert [piece for piece, hit in segments(text, needle) if hit] == marked
    assert "".join(piece for piece, _ in segments(text, needle)) == text


def test_the_query_is_trimmed_and_cut_as_the_browser_does() -> None:
    assert find.query_text("\ufeff x \u3000") == "x"
    assert find.query_text("\x85x\x1c") == "\x85x\x1c"
    # 200 UTF-16 units: 100 emoji, the 101st halved and so left out.
    assert find.query_text("😀" * 150) == "😀" * 100
    assert find.query_text("a" + "😀" * 150) == "a" + "😀" * 99


def test_marks_are_escaped_and_keep_the_text() -> None:
    mark = find.pattern("<b>")
    text = 'x <B> <script>alert("<b>")</script>'
    assert "".join(piece for piece, _ in segments(text, mark)) == text
    assert [piece for piece, hit in segments(text, mark) if hit] == ["<B>", "<b>"]
    html = marked_html(text, mark)
    assert html.count("<mark>") == 2 and "<script>" not in html and "&lt;B&gt;" in html
    tree = markdown_tree("**bold** and `code` with <b>")
    assert tree is not None
    assert tree_html(tree, find.pattern("bold")) == tree_html(tree).replace(
        "bold", "<mark>bold</mark>", 1)


def test_the_showcase_sessions_say_where_their_matches_are(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "x.db"))
    try:
        ids = seed(store, tmp_path)
        conv, rows = folded(store.iter_events(ids["imported"]))
    finally:
        store.close()
    found = find.find("round", conv.items, rows, conv.session)
    # Prompts of turns 1 and 2, a TodoWrite input, a subagent's prompt and answer,
    # the compaction summary and answers (a result that repeats its answer is not
    # counted again).
    assert found.turns() == [1, 2]
    assert found.total == 8 and len(found.items()) == 7
    labels = [m.label for m in found.matches]
    assert "tool TodoWrite · input" in labels and "tool Task · input, result" in labels
    assert len(found.anchors()) == len(found.matches)


@pytest.mark.parametrize("query", ["round", "ROUND_TOTAL", "cart.py"])
def test_counts_equal_the_occurrences_in_the_texts_searched(query: str) -> None:
    conv, rows = folded(read_cassette(CASSETTES / "subagent.ndjson").events)
    found = find.find(query, conv.items, rows, conv.session)
    needle = find.pattern(query)
    assert needle is not None
    expected = sum(needle.count(text) for _, item in walk(conv.items)
                   for _, text in find.item_texts(item))
    expected += sum(needle.count(text) for row in rows for _, text in find.row_texts(row))
    assert found.total == expected


def test_a_summary_names_a_dozen_turns_and_counts_the_rest() -> None:
    found = find.Found("x", [find.Match("item", find.item_anchor(n), "user · text", 1,
                                        ("", "x", ""), n, seq=n) for n in range(1, 31)])
    assert found.summary() == (
        "30 matches · 30 items, 0 spans · turns 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12… (30 turns)")


#: Tool inputs: those a browser's JSON writes as input_text does, and those it does
#: not (the report then carries input_text's own text).
INPUTS = [
    {"command": "ls -la", "description": "List"}, "a text", ["x", 1, True, None],
    {"nested": {"deep": [1, 2, {"k": "é ü 中 \U0001f600 \u2028"}]}, "empty": {}, "none": []},
    {"esc": "tab\tnew\nline \"q\" \\ \x1b\x7f"}, {"big": 2**53 - 1}, {},
    {"float": 1.0}, {"float": 0.1}, {"tiny": 1e-7}, {"huge": 1e21}, {"big": 2**60},
    {"2": "b", "1": "a"}, {"nan": float("nan")},
]


def test_an_input_reads_the_same_in_the_report_as_on_the_page() -> None:
    import json
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    # What a browser makes of each value the report carries (JSON.parse of the
    # page's data, then JSON.stringify(value, null, 2), as the report's json()).
    script = ("const vs = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
              "process.stdout.write(JSON.stringify(vs.map(v => typeof v === 'string' ? v"
              " : JSON.stringify(v, null, 2))));")
    data = json.dumps(INPUTS, allow_nan=True).replace("NaN", "null")
    written = json.loads(subprocess.run([node, "-e", script], input=data, text=True,
                                        capture_output=True, check=True).stdout)
    for value, browser in zip(INPUTS, written, strict=True):
        if not find.js_differs(value):
            assert browser == find.input_text(value), value
    assert [find.js_differs(v) for v in INPUTS].count(True) == 7
    # Each of these a browser writes otherwise (1, 1e-7, a rounded 2**60, "1"
    # first, null): the report carries the page's text for them.
    for at in (7, 9, 11, 12, 13):
        assert find.js_differs(INPUTS[at]), INPUTS[at]
        assert written[at] != find.input_text(INPUTS[at]), INPUTS[at]
