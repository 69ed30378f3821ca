"""The session page's Trace tab: the span tree of the presentation model
(:func:`claudetrace.ui.present.trace_tree`), drawn as an HTML table whose recorded
texts are escaped: agent → turn → model call / tool → subagent, each with its
wall-clock and relative start, duration bar, tokens, cost and detail."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from claudetrace.display import visible_text
from claudetrace.model import Session
from claudetrace.store import Recording, Store
from claudetrace.store.usage import store_reader
from claudetrace.ui import outline, present
from claudetrace.ui.conversation import Item
from claudetrace.ui.find import span_anchor
from claudetrace.ui.markdown import markdown_tree, marked_html, tree_html
from claudetrace.ui.views import common
from claudetrace.ui.views.common import param, plain, set_params
from claudetrace.ui.views.find import Finder
from claudetrace.usage import costed, counted_elsewhere

#: Nodes of the span tree drawn per page.
TRACE_PAGE = 400


def read_rows(db: Store, rec: Recording) -> list[present.TraceRow]:
    """The span tree of ``rec`` as rows, the session folded as far as it is stored."""
    return read_tree(db, rec)[1]


def read_tree(db: Store, rec: Recording) -> tuple[present.TraceNode, list[present.TraceRow]]:
    """The span tree of ``rec`` and its rows, the session folded as far as it is stored."""
    folded = common.folded(db, rec)
    return _tree_rows(folded, rec.id, rec.event_count, rec.status,
                      rec.started_ns, rec.duration_ns, elsewhere_of(db, rec), title_of(rec),
                      rec.status_reason)


def title_of(rec: Recording) -> str:
    """The span tree's root: the recording's name (as the HTML report names it)."""
    return str(rec.name or "claude-code")


def elsewhere_of(db: Store, rec: Recording) -> frozenset[str]:
    """The ids of ``rec``'s calls another recording counts (left out of the span
    tree's sums, as ``usage`` leaves them out)."""
    return counted_elsewhere(store_reader(db), rec.id)


@st.cache_resource(show_spinner=False, max_entries=4)
def _tree_rows(
    _folded: common.Folded, recording_id: str, event_count: int, status: str,
    started_ns: int, duration_ns: int | None, elsewhere: frozenset[str], title: str,
    reason: str,
) -> tuple[present.TraceNode, list[present.TraceRow]]:
    """The span tree of a recording and its rows (once per recording, line count,
    status and why, calls counted elsewhere and name)."""
    return tree_rows(_folded.session, status, started_ns, duration_ns, elsewhere, title,
                     reason)


def tree_rows(session: Session, status: str, started_ns: int, duration_ns: int | None,
              elsewhere: frozenset[str] = frozenset(), title: str = "claude-code",
              reason: str = "") -> tuple[present.TraceNode, list[present.TraceRow]]:
    """The span tree of ``session`` (a recording's, with its status, start and
    duration; ``elsewhere``: :func:`elsewhere_of`; ``title``: :func:`title_of`;
    ``reason``: why it has its status) and its rows, as the tab draws them."""
    tree = present.trace_tree(session, title=title, end_ns=duration_ns, status=status,
                              elsewhere=elsewhere, reason=reason)
    return tree, present.trace_rows(tree, started_ns)


def _header_html(head: outline.TraceHeader) -> str:
    """The trace header as a strip of labelled figures (texts escaped)."""
    from html import escape

    cells = "".join(
        f'<div class="f{" bad" if bad else ""}" data-label="{escape(label)}">'
        f"<span>{escape(label)}</span>{escape(value)}</div>"
        for label, value, bad in head.cells())
    return f'<div class="ct-head">{cells}</div>'


def _trace_html(rows: list[present.TraceRow], finder: Finder | None = None,
                first: int = 0) -> str:
    """The rows as an HTML table: every recorded text escaped; the rows holding the
    find box's text (``first``: the index of ``rows[0]`` in the tree) marked, each
    with its anchor."""
    from html import escape

    mark = finder.mark if finder is not None else None
    anchors = finder.anchors if finder is not None else set()

    end = max((r.end_ns or r.start_ns for r in rows), default=0) or 1
    # In a box of its own that scrolls sideways on a narrow page: the table never
    # runs past the page's column (its right-hand cells cut off), and the details
    # keep room to read (they were squeezed to a word a line).
    out = ['<div class="ct-scroll"><table class="ct-trace"><thead><tr><th>span</th>'
           '<th>start (UTC)</th><th>since start</th><th>duration</th><th></th>'
           "<th>tokens</th><th>cost</th><th>detail</th></tr></thead><tbody>"]
    for at, r in enumerate(rows, first):
        left = 100 * r.start_ns / end
        width = 100 * max(0, (r.end_ns if r.end_ns is not None else end) - r.start_ns) / end
        anchor = span_anchor(at)
        hit = anchor in anchors
        found = f' id="{anchor}"' if hit else ""
        out.append(
            f'<tr class="s-{escape(r.status)}{" found" if hit else ""}"{found} '
            f'data-kind="{escape(r.kind)}" data-status="{escape(r.status)}">'
            f'<td style="padding-left:{8 + 16 * r.depth}px">'
            f'<span class="kind k-{escape(r.kind)}">{escape(r.kind)}</span>'
            f"{marked_html(r.label, mark if hit else None)}</td>"
            f"<td>{escape(r.clock)}</td><td class=n>{escape(r.offset)}</td>"
            f"<td class=n>{escape(r.duration)}</td>"
            f'<td><div class="track"><div class="bar" style="left:{left:.2f}%;'
            f'width:{width:.2f}%"></div></div></td>'
            f'<td class="n tok">{escape(r.tokens)}</td><td class=n>{escape(r.cost)}</td>'
            f'<td class="detail">{marked_html(r.detail, mark if hit else None)}</td></tr>'
        )
    out.append("</tbody></table></div>")
    return "".join(out)


def tab(db: Store, rec: Recording, items_through: Callable[[int], list[Item]],
        finder: Finder | None = None) -> None:
    """The Trace tab: the header, the span tree a part of it at a time, and the input
    and output of the span picked (``items_through(seq)``: the conversation's items
    read as far as line ``seq``)."""
    tree, rows = read_tree(db, rec)
    if len(rows) <= 1:
        st.info("No turns yet.")
        return
    session = common.folded(db, rec).session
    common.style()
    # The cost usage gives it once it has calls there; before (a running session's
    # first turn), the tree's as it is folded.
    (priced,) = costed(store_reader(db), [rec])
    st.html(_header_html(outline.trace_header(
        tree, status=rec.status, started=present.moment(rec.started_ns),
        cost_source=session.cost().source, rec=None if priced is rec else priced)))
    part = common.pager(len(rows), TRACE_PAGE, "tpart", "spans", "trace_part")
    errors = sum(1 for r in rows if r.status == "error")
    st.caption(
        f"{len(rows):,} spans: agent → turn → model call / tool → subagent"
        + (f" · {errors} in error (red)" if errors else "")
        + " · times in UTC and since the start"
    )
    shown = rows[(part - 1) * TRACE_PAGE : part * TRACE_PAGE]
    _io_pane(session, shown, items_through, finder, rows)
    st.html(_trace_html(shown, finder, (part - 1) * TRACE_PAGE))


def _span_seq(session: Session, ref: str) -> int:
    """The last line of the span ``ref`` the session model knows (0: none)."""
    kind, _, key = ref.partition(":")
    if kind == "tool" and key in session.tools:
        tool = session.tools[key]
        return tool.end_seq if tool.end_seq is not None else tool.start_seq
    if kind == "model" and key in session.calls:
        return session.calls[key].start_seq
    if kind == "turn" and key.isdigit() and 0 < int(key) <= len(session.turns):
        turn = session.turns[int(key) - 1]
        return turn.end_seq if turn.end_seq is not None else turn.start_seq
    return 0


def _io_pane(session: Session, rows: list[present.TraceRow],
             items_through: Callable[[int], list[Item]], finder: Finder | None = None,
             every: list[present.TraceRow] | None = None) -> None:
    """Phoenix's input/output pane: the span picked (``?span=``), its input and its
    output side by side, answers' Markdown rendered as in the conversation."""
    labels = {r.ref: f"{r.kind} · {r.label} · {r.offset}" for r in rows if r.ref}
    wanted = param("span")
    picked = st.selectbox(
        "Input and output of a span", list(labels), format_func=labels.__getitem__,
        index=list(labels).index(wanted) if wanted in labels else None,
        placeholder="Pick a span (a turn, a model call, a tool) to see its input and output",
        key="trace_span")
    set_params(span=picked)
    if picked is None:
        return
    if finder is not None and not finder.pane_heading(every or rows, picked):
        finder = None
    io = outline.Spans(items_through(_span_seq(session, picked)), session).io(picked)
    if io is None:
        st.caption("No input or output recorded for this span.")
        return
    left, right = st.columns(2)
    given, answered = io.texts()
    with left.container(border=True, key="span_input"):
        st.caption(plain(io.input_title, 80))
        if finder is not None:
            st.html(finder.html(visible_text(given)))
        else:
            st.text(visible_text(given))
    with right.container(border=True, key="span_output"):
        st.caption(plain(io.output_title, 80))
        tree = markdown_tree(visible_text(answered)) if io.outputs and all(
            item.kind in ("assistant", "result") for item, _ in io.outputs) else None
        if tree is not None:
            mark = finder.mark if finder is not None else None
            st.html(f'<div class="ct-md">{tree_html(tree, mark)}</div>')
        elif finder is not None:  # marked; an error's text red as st.error's
            st.html(f'<div class="{"ct-bad" if io.is_error else ""}">'
                    f"{finder.html(visible_text(answered))}</div>")
        elif io.is_error:
            st.error(plain(answered, 2000))
        else:
            st.text(visible_text(answered))
