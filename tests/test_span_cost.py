"""The span tree's costs are ``claudetrace usage``'s: each model call's is the cost
its ``usage_calls`` row holds (:func:`claudetrace.model.summary.call_cost`), and a
turn's and the session's are their calls' added up, leaving out the calls another
recording counts (a message two recordings hold counts once).  So the trace's
root, in the UI's Trace tab and in the HTML report, says what ``usage session``,
``sessions``, ``show`` and the list say.

The store is the session browser's (``ui_db``: every real-CLI fixture cassette;
the ``subagent`` recording's messages are partly counted in another recording).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from claudetrace.formats.html import report_data
from claudetrace.indexer import open_settled_store
from claudetrace.model import Session
from claudetrace.model.summary import usage_rows
from claudetrace.store import Store
from claudetrace.store.usage import store_reader
from claudetrace.ui import present
from claudetrace.ui.views.trace import elsewhere_of, tree_rows
from claudetrace.usage import costed, counted_elsewhere, recording_totals
from tests.test_ui_present import session_of, without_cli_cost

CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"


@pytest.mark.parametrize("cli_cost", [True, False], ids=["cli cost", "priced"])
@pytest.mark.parametrize("path", sorted(CASSETTES.glob("*.ndjson")), ids=lambda p: p.stem)
def test_each_call_costs_what_its_usage_row_says(path: Path, cli_cost: bool) -> None:
    session = session_of(path.stem) if cli_cost else without_cli_cost(path.stem)
    rows = {row[0]: (row[7], row[8]) for row in usage_rows(session, 0)}
    figures = present.call_figures(session)
    assert {cid: (f.cost_usd, f.cost_source) for cid, f in figures.items()
            if cid in rows} == rows
    tree = present.trace_tree(session, end_ns=10**9)
    priced = [cost for cost, _ in rows.values()]
    if rows and None not in priced:
        assert tree.cost_usd == pytest.approx(sum(c for c in priced if c is not None))


@pytest.fixture
def store(ui_db: dict[str, str]) -> Store:
    return open_settled_store(ui_db["url"])


def trace_of(store: Store, recording_id: str) -> list[present.TraceRow]:
    rec = store.get(recording_id)
    session = Session()
    for event in store.iter_events(recording_id):
        session.add(event)
    return tree_rows(session, rec.status, rec.started_ns, rec.duration_ns,
                     elsewhere_of(store, rec))[1]


def report_trace(store: Store, recording_id: str) -> list[list[Any]]:
    rec = store.get(recording_id)
    reader = store_reader(store)
    data = report_data(rec, store.iter_events(recording_id),
                       usage=recording_totals(reader, recording_id),
                       elsewhere=counted_elsewhere(reader, recording_id))
    trace: list[list[Any]] = data["trace"]
    return trace


def test_a_session_partly_counted_elsewhere_says_usage_s_cost(
        store: Store, ui_db: dict[str, str]) -> None:
    rid = ui_db["subagent"]
    (shown,) = costed(store_reader(store), [store.get(rid)])
    # The CLI reported 0.002952 $; usage counts 0.000984 $ here (the other
    # messages are counted in another recording).
    assert shown.cost == pytest.approx(0.000984)
    elsewhere = counted_elsewhere(store_reader(store), rid)
    assert elsewhere
    rows = trace_of(store, rid)
    assert rows[0].kind == "agent" and rows[0].cost == present.money(shown.cost)
    repeated = [r for r in rows if r.kind == "model" and r.ref[len("model:"):] in elsewhere]
    assert repeated and all(present.ELSEWHERE in r.detail for r in repeated)
    assert all(present.ELSEWHERE not in r.detail for r in rows
               if r.kind == "model" and r not in repeated)
    # The HTML report draws the same tree.
    report = report_trace(store, rid)
    assert report[0][10] == rows[0].cost
    assert [row[11] for row in report] == [r.detail for r in rows]


def test_every_stored_session_s_trace_says_usage_s_cost(
        store: Store, ui_db: dict[str, str]) -> None:
    checked = 0
    for stem, rid in ui_db.items():
        if stem in ("url", "running", "malformed"):
            continue
        (shown,) = costed(store_reader(store), [store.get(rid)])
        if shown.cost is None:
            continue
        assert trace_of(store, rid)[0].cost == present.money(shown.cost), stem
        checked += 1
    assert checked >= 5
