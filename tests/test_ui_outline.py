"""The trace header, per-prompt figures, rewind branches and span input/output
(claudetrace.ui.outline) on the showcase sessions, without a browser."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from claudetrace.pricing import cost_text
from claudetrace.store import open_store
from claudetrace.ui import outline, present
from claudetrace.ui.conversation import Conversation, Item, walk
from tests.showcase import seed


@pytest.fixture(scope="module")
def folded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("outline")
    store = open_store(str(folder / "x.db"))
    out = {}
    try:
        for name, rid in seed(store, folder).items():
            rec = store.get(rid)
            conv = Conversation()
            conv.feed_many(store.iter_events(rid))
            conv.settle(conv.items)
            tree = present.trace_tree(conv.session, end_ns=rec.duration_ns, status=rec.status)
            out[name] = (rec, conv, tree)
        out["url"] = str(folder / "x.db")
    finally:
        store.close()
    return out


def texts(io: outline.SpanIO | None) -> tuple[str, str, str, str]:
    assert io is not None
    given, said = io.texts()
    return io.input_title, given, io.output_title, said


def test_header_counts_the_tree(folded: dict[str, Any]) -> None:
    rec, conv, tree = folded["failed"]
    head = outline.trace_header(tree, status=rec.status, started="then",
                                cost_source=conv.session.cost().source)
    cells = {label: (value, bad) for label, value, bad in head.cells()}
    assert cells["calls"] == ("2", False) and cells["tools"] == ("1", False)
    assert cells["errors"] == ("2", True)  # the turn and its denied tool
    assert cells["status"] == ("error", True)
    assert cells["cost"][0] == present.money(rec.cost) + " (the CLI's)"
    assert cells["tokens"][0] == present.tokens_text(tree.usage)


def test_prompt_figures_add_up_to_the_session(folded: dict[str, Any]) -> None:
    for name in ("finished", "failed", "running", "imported"):
        _, conv, tree = folded[name]
        figures = outline.prompt_figures(conv.session, tree)
        assert len(figures) == len(conv.session.turns), name
        prompts = {i.seq for _, i in walk(conv.items) if i.kind == "user"}
        assert set(figures) <= prompts, name
        assert sum(f.calls for f in figures.values()) == sum(
            1 for _, n in present.walk(tree) if n.kind == "model"), name
        assert sum(f.usage.output for f in figures.values()) == tree.usage.output, name
    imported = outline.prompt_figures(folded["imported"][1].session, folded["imported"][2])
    assert [f.text() for f in imported.values()][1] == (
        "turn 2 · 1 call · 0 tools · 10 in · 5 out · $0.00014 (estimate) · 1.00 s")


def test_a_rewind_lists_the_prompts_it_abandoned(folded: dict[str, Any]) -> None:
    items: list[Item] = folded["imported"][1].items
    rewind = next(i for i in items if i.kind == "rewind")
    assert [p.text for p in rewind.branch] == ["Also round the tax."]
    assert all(p.abandoned for p in rewind.branch)
    later = [i for i in items if i.seq > rewind.seq]
    assert later and not any(i.abandoned for i in later)


def test_span_input_and_output(folded: dict[str, Any]) -> None:
    _, conv, tree = folded["failed"]
    spans = outline.Spans(conv.items, conv.session)
    refs = [r.ref for r in present.trace_rows(tree, 0)]
    assert refs[0] == ""  # the agent: no input/output of its own
    by_kind = {ref.partition(":")[0]: ref for ref in refs if ref}
    assert texts(spans.io("turn:1")) == ("prompt", "Create created.txt with touch.",
                                         "result (error)", "I was not allowed to.")
    title, given, out_title, said = texts(spans.io(by_kind["tool"]))
    assert (title, out_title, said) == ("input · Bash", "result (error)", "Not in this test.")
    assert '"command": "touch created.txt"' in given
    calls = [ref for ref in refs if ref.startswith("model:")]
    assert texts(spans.io(calls[0]))[::2] == ("prompt", "answer")
    assert texts(spans.io(calls[0]))[3] == "I will create the file.\n\n→ calls Bash"
    # The second call was sent the denied tool's result.
    assert texts(spans.io(calls[1]))[:2] == ("result of Bash", "Not in this test.")
    assert spans.io("turn:9") is None and spans.io("tool:nope") is None
    _, running, _ = folded["running"]
    assert texts(outline.Spans(running.items, running.session).io("turn:1"))[3] == "(none yet)"


def test_a_running_session_s_header_says_its_cost_as_the_tile_does(
        folded: dict[str, Any]) -> None:
    # It said "— (no model calls)" where the tile (pricing.cost_text) says this.
    from claudetrace.model.events import Event

    rec, _, _ = folded["running"]
    assert rec.status == "running" and cost_text(rec) == "not yet reported"
    conv = Conversation()  # its first prompt sent, no model call yet
    conv.feed_many([Event(0, "in", 1, b'{"type":"user","message":{"role":"user","content":"x"}}')])
    tree = present.trace_tree(conv.session, end_ns=None, status="running")
    head = outline.trace_header(tree, status="running", started="", cost_source="")
    assert head.cost == "not yet reported"


def test_the_report_refers_to_conversation_rows(folded: dict[str, Any]) -> None:
    """The report's span panes and branch lists name conversation rows by their path
    (the texts are held once): each path leads to the item the model chose."""
    from claudetrace.formats.html import report_data

    rec, _, _ = folded["failed"]
    store = open_store(folded["url"])
    try:
        data = report_data(rec, list(store.iter_events(rec.id)))
    finally:
        store.close()

    def at(path: list[int]) -> list[Any]:
        row = data["conv"][path[0]]
        for i in path[1:]:
            row = row[4]["ch"][i]
        return row

    given_title, given, out_title, said, bad = data["io"]["turn:1"]
    assert (given_title, out_title, bad) == ("prompt", "result (error)", 1)
    assert [at(p)[2] for p, part in given] == ["Create created.txt with touch."]
    # The result repeats the answer: the turn's output is that answer, held once.
    assert [(at(p)[0], part) for p, part in said] == [("assistant", "text")]
    assert at(said[0][0])[2] == "I was not allowed to."
    tool = next(v for k, v in data["io"].items() if k.startswith("tool:"))
    assert [(at(p)[0], part) for p, part in tool[1] + tool[3]] == [("tool", "input"),
                                                                  ("tool", "result")]
    assert [label for label, _, _ in data["th"]][-3:] == ["calls", "tools", "errors"]
    assert any("pf" in row[4] for row in data["conv"] if len(row) > 4)


def test_the_figures_of_some_prompts_are_those_of_the_whole_tree(
    folded: dict[str, Any]
) -> None:
    """A page shows a few prompts: their tree alone gives them the same figures."""
    rec, conv, tree = folded["imported"]
    whole = outline.prompt_figures(conv.session, tree)
    for picked in ({2}, {1, 3}):
        part = outline.prompt_figures(conv.session, present.trace_tree(
            conv.session, end_ns=rec.duration_ns, status=rec.status, turns=picked))
        assert {f.turn for f in part.values()} == picked
        assert all(whole[seq] == figures for seq, figures in part.items())


def test_a_turn_whose_cli_crashed_is_cut_short_not_under_way(tmp_path: Path) -> None:
    """``claudetrace proxy -- claudetrace replay … --fault crash@2``: the session is
    ``error``; its turn, without a result, was drawn running ("under way", no
    duration) with ``ERRORS 0`` in the header, in the UI and the HTML export."""
    from tests.test_replay_faults import cassette, user

    db = tmp_path / "x.db"
    done = subprocess.run(
        [sys.executable, "-m", "claudetrace", "proxy", "--db", str(db), "--",
         sys.executable, "-m", "claudetrace", "replay", str(cassette(tmp_path)),
         "--no-match-argv", "--fault", "crash@2"],
        input=json.dumps(user("hi")).encode() + b"\n", capture_output=True, timeout=120,
        check=False)
    assert done.returncode == 1, done.stderr
    from claudetrace.indexer import open_settled_store

    store = open_settled_store(str(db))
    try:
        rec = store.resolve("latest")
        assert rec.status == "error"
        conv = Conversation()
        conv.feed_many(store.iter_events(rec.id))
        conv.settle(conv.items)
        tree = present.trace_tree(conv.session, end_ns=rec.duration_ns, status=rec.status)
    finally:
        store.close()
    (turn,) = [n for n in tree.children if n.kind == "turn"]
    assert (turn.status, turn.detail) == ("error", "cut short · no result")
    assert turn.end_ns == rec.duration_ns
    header = outline.trace_header(tree, status=rec.status, started="", cost_source="")
    assert header.errors == 1 and ("errors", "1", True) in header.cells()
    (figures,) = outline.prompt_figures(conv.session, tree).values()
    assert figures.duration != "under way"
    out = tmp_path / "x.html"
    exported = subprocess.run([sys.executable, "-m", "claudetrace", "export", rec.id, "--db",
                               str(db), "-o", str(out)], capture_output=True, check=False)
    assert exported.returncode == 0, exported.stderr
    assert "under way" not in out.read_text() and "cut short" in out.read_text()
