"""The Diff page: two sessions aligned turn by turn (``?diff=a,b``)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from claudetrace.display import visible_text
from claudetrace.errors import ClaudeTraceError
from claudetrace.model import Session
from claudetrace.pricing import known_cost
from claudetrace.store import Recording, Store
from claudetrace.store import browse as queries
from claudetrace.store.usage import store_reader
from claudetrace.ui import present
from claudetrace.ui.diff import TurnSummary, align, first_divergence, turn_summaries
from claudetrace.ui.sessions import Filters
from claudetrace.ui.views import common, trace
from claudetrace.ui.views.common import param, plain
from claudetrace.usage import costed

#: Lines read per side (deltas excluded) — far more than any real conversation.
DIFF_MAX_LINES = 20_000


def page() -> None:
    """Compare two sessions."""
    st.title("Diff")
    db = common.store()
    ids = [part.strip() for part in param("diff").split(",") if part.strip()]
    picked = _pickers(db, ids)
    if picked is None:
        return
    a, b = picked
    # Every figure from what the session page reads: each session's fold (as far
    # as it is stored) and its cost as ``usage session`` says it.
    a, b = costed(store_reader(db), [a, b])
    fold_a, fold_b = common.folded(db, a).session, common.folded(db, b).session
    turns_a = _turns(db, a, fold_a)
    turns_b = _turns(db, b, fold_b)
    pairs = align(turns_a, turns_b)
    row = common.metric_row()
    row.metric("Turns A / B", f"{len(turns_a)} / {len(turns_b)}", width="content")
    # A difference only between two amounts (an unknown cost is never taken for
    # $0); a running session's cost is what its calls so far cost, as its header says.
    head_a, head_b = present.header(a, _live(a, fold_a)), present.header(b, _live(b, fold_b))
    cost_a = known_cost(present.live(a, _live(a, fold_a)))
    cost_b = known_cost(present.live(b, _live(b, fold_b)))
    row.metric("Cost A → B", head_b.cost,
               delta=None if cost_a is None or cost_b is None
               else present.signed(cost_b - cost_a, present.money),
               delta_color="inverse", width="content")
    dur_a, dur_b = head_a.duration_ns, head_b.duration_ns
    row.metric("Duration A → B", head_b.duration,
               delta=None if dur_a is None or dur_b is None
               else present.signed((dur_b - dur_a) / 1e9, present.duration_s),
               delta_color="inverse", width="content")
    if cost_a is None or cost_b is None:
        st.caption(plain(f"cost A {head_a.cost} · B {head_b.cost}: "
                         "no difference while a cost is not an amount", 400))
    diverged = first_divergence(pairs)
    row.metric("First difference", "none" if diverged is None else f"turn {diverged + 1}",
               width="content")
    if diverged is None:
        st.success("Both sessions sent and received the same thing in every turn.")
    else:
        st.warning(f"The sessions differ from turn {diverged + 1} on.")
    if not pairs:
        st.info("Neither session has a turn.")
        return
    st.dataframe([p.as_dict() for p in pairs], hide_index=True, key="diff_table")
    for pair in pairs:
        mark = "=" if pair.identical else "≠"
        with st.expander(f"{mark} Turn {pair.index + 1}", expanded=pair.index == diverged):
            left, right = st.columns(2)
            _side(left, "A", pair.a)
            _side(right, "B", pair.b)


def _live(rec: Recording, session: Session) -> Session | None:
    """The fold the session page's header reads: a running session's only."""
    return session if rec.status == "running" else None


def _turns(db: Store, rec: Recording, session: Session) -> list[TurnSummary]:
    """``rec``'s turns, each with the cost and duration its prompt's line says
    on the session page (its span-tree node's)."""
    return turn_summaries(queries.conversation_events(db, rec.id, limit=DIFF_MAX_LINES),
                          session, status=rec.status, end_ns=rec.duration_ns,
                          elsewhere=trace.elsewhere_of(db, rec))


def _pickers(db: Store, ids: list[str]) -> tuple[Recording, Recording] | None:
    recent = queries.list_sessions(db, Filters(), limit=200)
    options: list[Any] = [r.id for r in recent]
    labels = {r.id: f"{r.id} · {r.name or r.model or ''}" for r in recent}
    resolved: list[Recording] = []
    for wanted in ids[:2]:
        try:
            rec = db.resolve(wanted)
        except ClaudeTraceError as exc:
            st.error(plain(exc, 400))
            continue
        resolved.append(rec)
        if rec.id not in labels:
            options.insert(0, rec.id)
            labels[rec.id] = rec.id
    if len(options) < 2:
        st.info("Diff needs two recorded sessions.")
        return None
    defaults = [r.id for r in resolved] + [o for o in options if o not in {r.id for r in resolved}]
    c1, c2 = st.columns(2)
    a_id = c1.selectbox(
        "Session A",
        options,
        index=options.index(defaults[0]),
        format_func=lambda i: labels.get(i, str(i)),
        key="diff_a",
    )
    b_id = c2.selectbox(
        "Session B",
        options,
        index=options.index(defaults[1]),
        format_func=lambda i: labels.get(i, str(i)),
        key="diff_b",
    )
    common.set_params(diff=f"{a_id},{b_id}")
    if a_id == b_id:
        st.info("Pick two different sessions.")
        return None
    return db.get(str(a_id)), db.get(str(b_id))


def _side(col: st.delta_generator.DeltaGenerator, label: str, turn: TurnSummary | None) -> None:
    with col:
        st.subheader(label)
        if turn is None:
            st.caption("(no such turn)")
            return
        st.caption("host sent")
        for text in turn.sent:
            st.text(visible_text(text[:5000]))
        st.caption("came back")
        for text in turn.received:
            st.text(visible_text(text[:5000]))
        if turn.tools:
            st.caption("tools: " + plain(", ".join(turn.tools), 300))
        facts = [
            f"{turn.result_subtype or 'no result'}",
            present.cost_cell(turn.cost_usd, calls=True),
            present.duration_s(turn.duration_s),
        ]
        if turn.is_error:
            st.error(plain(" · ".join(facts)))
        else:
            st.caption(plain(" · ".join(facts)))


if __name__ == "__main__":  # run by st.navigation as a page script
    page()
