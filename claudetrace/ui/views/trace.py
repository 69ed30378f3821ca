"""The session page's Trace tab: the span tree of the presentation model
(:func:`claudetrace.ui.present.trace_tree`), drawn as an HTML table whose recorded
texts are escaped: agent → turn → model call / tool → subagent, each with its
wall-clock and relative start, duration bar, tokens, cost and detail."""

from __future__ import annotations

import streamlit as st

from claudetrace.store import Recording, Store
from claudetrace.ui import present
from claudetrace.ui.views import common

#: Nodes of the span tree drawn per page.
TRACE_PAGE = 400


def read_rows(db: Store, rec: Recording) -> list[present.TraceRow]:
    """The span tree of ``rec`` as rows, the session folded as far as it is stored."""
    folded = common.folded(db, rec)
    return _tree_rows(folded, rec.id, rec.event_count, rec.status,
                      rec.started_ns, rec.duration_ns)


@st.cache_resource(show_spinner=False, max_entries=4)
def _tree_rows(
    _folded: common.Folded, recording_id: str, event_count: int, status: str,
    started_ns: int, duration_ns: int | None,
) -> list[present.TraceRow]:
    """The span tree of a recording as rows (once per recording, line count and status)."""
    tree = present.trace_tree(
        _folded.session, end_ns=duration_ns, status=status)
    return present.trace_rows(tree, started_ns)


def _trace_html(rows: list[present.TraceRow]) -> str:
    """The rows as an HTML table: every recorded text escaped."""
    from html import escape

    end = max((r.end_ns or r.start_ns for r in rows), default=0) or 1
    out = ['<table class="ct-trace"><thead><tr><th>span</th><th>start (UTC)</th>'
           '<th>since start</th><th>duration</th><th></th><th>tokens</th><th>cost</th>'
           "<th>detail</th></tr></thead><tbody>"]
    for r in rows:
        left = 100 * r.start_ns / end
        width = 100 * max(0, (r.end_ns if r.end_ns is not None else end) - r.start_ns) / end
        out.append(
            f'<tr class="s-{escape(r.status)}" data-kind="{escape(r.kind)}" '
            f'data-status="{escape(r.status)}">'
            f'<td style="padding-left:{8 + 16 * r.depth}px">'
            f'<span class="kind k-{escape(r.kind)}">{escape(r.kind)}</span>{escape(r.label)}</td>'
            f"<td>{escape(r.clock)}</td><td class=n>{escape(r.offset)}</td>"
            f"<td class=n>{escape(r.duration)}</td>"
            f'<td><div class="track"><div class="bar" style="left:{left:.2f}%;'
            f'width:{width:.2f}%"></div></div></td>'
            f"<td class=n>{escape(r.tokens)}</td><td class=n>{escape(r.cost)}</td>"
            f'<td class="detail">{escape(r.detail)}</td></tr>'
        )
    out.append("</tbody></table>")
    return "".join(out)


def tab(db: Store, rec: Recording) -> None:
    """The Trace tab: the span tree, a part of it at a time."""
    rows = read_rows(db, rec)
    if len(rows) <= 1:
        st.info("No turns yet.")
        return
    part = common.pager(len(rows), TRACE_PAGE, "tpart", "spans", "trace_part")
    errors = sum(1 for r in rows if r.status == "error")
    st.caption(
        f"{len(rows):,} spans: agent → turn → model call / tool → subagent"
        + (f" · {errors} in error (red)" if errors else "")
        + " · times in UTC and since the start"
    )
    common.style()
    st.html(_trace_html(rows[(part - 1) * TRACE_PAGE : part * TRACE_PAGE]))
