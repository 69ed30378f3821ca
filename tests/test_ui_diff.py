"""Turn-by-turn diff of two real-CLI recordings."""

from __future__ import annotations

from pathlib import Path

import pytest

from claudetrace.cassette import read_cassette
from claudetrace.ui.diff import align, first_divergence, turn_summaries

CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"


def turns(name: str) -> list:
    return turn_summaries(read_cassette(CASSETTES / f"{name}.ndjson").events)


def test_turns_of_a_multi_turn_session() -> None:
    summary = turns("multi_turn")
    assert [t.sent[-1] for t in summary] == [
        "First question.",
        "Second question.",
        "Third question.",
    ]
    assert [t.result for t in summary] == ["First answer.", "Second answer.", "Third answer."]
    # total_cost_usd is cumulative: per-turn costs are its increments.
    assert sum(t.cost_usd for t in summary) == pytest.approx(0.00096 + 0.000984 + 0.001008)


def test_interrupted_turn_keeps_its_own_result() -> None:
    summary = turns("interrupt")
    assert [t.result_subtype for t in summary] == ["error_during_execution", "success"]
    assert summary[0].sent[-1] == "[control interrupt]"
    assert summary[1].received == ["After the interrupt."]


def test_same_recording_has_no_divergence() -> None:
    pairs = align(turns("hooks"), turns("hooks"))
    assert first_divergence(pairs) is None
    assert pairs[0].cost_delta == 0 and pairs[0].duration_delta == 0


def test_allow_versus_deny_diverges_in_output_not_input() -> None:
    pairs = align(turns("permission_allow"), turns("permission_deny"))
    assert first_divergence(pairs) == 0
    (pair,) = pairs
    assert pair.same_sent and pair.same_tools and not pair.same_received
    row = pair.as_dict()
    assert row["tools A"] == row["tools B"] == "Bash"


def test_extra_turns_pair_with_nothing() -> None:
    pairs = align(turns("plain"), turns("multi_turn"))
    assert [p.a is None for p in pairs] == [False, True, True]
    assert pairs[2].as_dict()["tools A"] == "—"
    assert pairs[1].cost_delta is None


def test_a_cost_not_reported_is_unknown_never_zero() -> None:
    # A turn whose result named no cost was counted as $0 in the difference.
    a, b = turns("plain"), turns("plain")
    b[0].cost_usd = None
    row = align(a, b)[0].as_dict()
    assert (row["cost A"], row["cost B"], row["Δ cost"]) == ("$0.00096", "unknown", "unknown")
    assert row["Δ time"] == "+0 ms" and row["time A"].endswith(" ms")
    missing = align(turns("plain"), turns("multi_turn"))[1].as_dict()
    assert (missing["cost A"], missing["Δ cost"], missing["time A"]) == ("—", "—", "—")
    assert missing["cost B"].startswith("$")


def test_a_turn_whose_result_names_no_cost_costs_what_its_calls_cost() -> None:
    # An imported transcript's results name no cost: the session page says its
    # turns' calls priced (an estimate); the diff said "unknown".
    import json

    from claudetrace.model.events import Event

    events = []
    for e in read_cassette(CASSETTES / "plain.ndjson").events:
        line = json.loads(e.data)
        if line.get("type") == "result":
            line.pop("total_cost_usd", None)
            line.pop("modelUsage", None)
        events.append(Event(e.seq, e.direction, e.t_ns, json.dumps(line).encode()))
    (turn,) = turn_summaries(events)
    assert turn.cost_usd == pytest.approx(0.00096)  # the price table's, as the CLI's
    assert align([turn], [turn])[0].as_dict()["cost A"] == "$0.00096"
