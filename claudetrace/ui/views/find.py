"""The session page's find box (``&find=``): a text looked for in the session's
conversation, tool inputs and results and span tree (:mod:`claudetrace.ui.find`),
how many matches in which turns, items and spans, a link to each, and the
matched text marked where the page draws it.

A link to a match on the part of the page shown is an anchor (``#find-i12``, the
browser scrolls to it); a match in another part or tab opens that part with the
anchor, and the conversation's anchors are Streamlit headings, which scroll
themselves into view when the page's address names them.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from urllib.parse import urlencode

import streamlit as st

from claudetrace.model import Session
from claudetrace.store import Recording
from claudetrace.ui import find
from claudetrace.ui.conversation import Item
from claudetrace.ui.markdown import marked_html
from claudetrace.ui.present import TraceRow
from claudetrace.ui.views.common import int_param, param, plain, set_params

#: Matches listed with a link (all are counted).
LISTED = 200

_STYLE = """<style>
.ct-find-list{font-size:13px;margin:0;padding-left:1.4em;max-height:320px;overflow:auto}
.ct-find-list li{margin:1px 0}.ct-find-list .w{color:#6b7079}
mark{background:#ffe066;color:inherit;padding:0 1px;border-radius:2px}
pre.ct-found{white-space:pre-wrap;word-break:break-word;font-size:13px;margin:0}
.ct-bad pre.ct-found{color:#c62828}
[class*="st-key-ctfind"] h3{font-size:.8rem;font-weight:600;padding:.2rem 0;color:#8a6d00}
.ct-trace tr.found td{background:rgba(255,224,102,.25)}
</style>"""


class Finder:
    """The session's find state: the text looked for, its pattern, what it found,
    and where the page shows what (to link to a match on the same page or not)."""

    def __init__(self, found: find.Found, rec: Recording, *, tab: str, conv_start: int,
                 conv_end: int | None, trace_part: int, trace_page: int) -> None:
        self.found = found
        self.mark = find.pattern(found.query)
        self.rec = rec
        self.anchors = found.anchors()
        self._tab, self._start, self._end = tab, conv_start, conv_end
        self._part, self._page = trace_part, trace_page
        self._numbers = {m.anchor: n for n, m in enumerate(found.matches, 1)}

    def href(self, match: find.Match) -> str:
        """A link to ``match``: the anchor alone when the page shows it, else the
        page's address for the part that holds it, with the anchor."""
        if match.kind == "item":
            here = self._tab == "conversation" and self._start <= match.top_seq and (
                self._end is None or match.top_seq < self._end)
            params: dict[str, object] = {"tab": None, "from": match.top_seq or None}
        else:
            part = match.row // self._page + 1
            here = self._tab == "trace" and part == self._part
            params = {"tab": "trace", "tpart": part if part > 1 else None}
            if not here and match.ref:
                # Opened in the span pane, under a heading that scrolls into view
                # (a row of the table cannot: the browser looks for it before
                # Streamlit has drawn it).
                params["span"] = match.ref
                return self._url(params) + f"#{pane_anchor(match.row)}"
        if here:
            return f"#{match.anchor}"
        return self._url(params) + f"#{match.anchor}"

    def _url(self, params: dict[str, object]) -> str:
        query = {k: v for k, v in st.query_params.items()
                 if k not in ("tab", "from", "tpart", "span", "find")}
        query.update({k: str(v) for k, v in params.items() if v is not None})
        query["find"] = self.found.query
        return "?" + urlencode(query)

    def pane_heading(self, rows: list[TraceRow], ref: str) -> bool:
        """Above the span pane showing ``ref``, when that span holds a match: an
        anchor heading saying which match it is; True if it does."""
        index = next((i for i, r in enumerate(rows) if r.ref == ref), None)
        if index is None or find.span_anchor(index) not in self.anchors:
            return False
        number = self._numbers[find.span_anchor(index)]
        match = self.found.matches[number - 1]
        with st.container(key="ctfind_pane"):
            # A tool's name is recorded text: escaped, as every Markdown element here.
            st.subheader(f"match {number} of {len(self.found.matches)} · "
                         f"{plain(match.label, 200)}", anchor=pane_anchor(index))
        return True

    def heading(self, item: Item) -> None:
        """Above a conversation item that holds a match: an anchor heading saying
        which match it is (Streamlit scrolls a heading the address names into view)."""
        anchor = find.item_anchor(item.seq)
        number = self._numbers.get(anchor)
        if number is None:
            return
        match = self.found.matches[number - 1]
        with st.container(key=f"ctfind_{item.seq}"):
            times = f" · {match.count} occurrences" if match.count > 1 else ""
            st.subheader(
                f"match {number} of {len(self.found.matches)} · {plain(match.label, 200)}{times}",
                anchor=anchor)

    def holds(self, item: Item) -> bool:
        return find.item_anchor(item.seq) in self.anchors

    def html(self, text: str) -> str:
        """``text`` as a block of escaped, wrapped text with the matches marked."""
        return f'<pre class="ct-found">{marked_html(text, self.mark)}</pre>'


def pane_anchor(index: int) -> str:
    """The anchor of the span pane's heading when it shows row ``index``'s span."""
    return f"find-p{index}"


def box(rec: Recording, read: Callable[[], tuple[list[Item], list[TraceRow], Session]],
        *, tab: str, conv_start: int, conv_end: int | None, trace_page: int
        ) -> Finder | None:
    """The find box, and what the text in it (``&find=``) found among what ``read()``
    returns (the whole conversation, the span tree's rows, the session)."""
    query = st.text_input(
        "Find in this session", value=param("find"), key="find_box",
        placeholder="Find a text in the conversation, tool inputs and results, spans",
        help="Case ignored, the text as typed (no wildcards); matches are marked.")
    query = find.query_text(query)
    set_params(find=query or None)
    if not query:
        return None
    found = _found(rec.id, rec.event_count, query, read)
    finder = Finder(found, rec, tab=tab, conv_start=conv_start, conv_end=conv_end,
                    trace_part=int_param("tpart", 1) or 1,
                    trace_page=trace_page)
    st.html(_STYLE)
    with st.container(key="find_results"):
        st.caption(f"Find “{plain(query, 80)}”: {plain(found.summary(), 300)}")
        if found.matches:
            with st.expander(f"Matches ({len(found.matches):,})", expanded=True):
                st.html(_list_html(finder))
    return finder


def _list_html(finder: Finder) -> str:
    rows = []
    for m in finder.found.matches[:LISTED]:
        where = (f"line {m.seq}" if m.kind == "item" else f"span {m.row}") + (
            f" · turn {m.turn}" if m.turn else "")
        before, hit, after = m.excerpt
        rows.append(
            f'<li data-kind="{m.kind}" data-anchor="{m.anchor}">'
            f'<a href="{escape(finder.href(m), quote=True)}">{escape(where)} · '
            f"{escape(m.label)}</a>"
            f'{f" · {m.count} occurrences" if m.count > 1 else ""} <span class="w">{escape(before)}'
            f"<mark>{escape(hit)}</mark>{escape(after)}</span></li>")
    more = len(finder.found.matches) - LISTED
    tail = f"<p>… and {more:,} more</p>" if more > 0 else ""
    return f'<ol class="ct-find-list">{"".join(rows)}</ol>{tail}'


@st.cache_resource(show_spinner="Finding…", max_entries=16)
def _found(recording_id: str, event_count: int, query: str,
           _read: Callable[[], tuple[list[Item], list[TraceRow], Session]]) -> find.Found:
    """What ``query`` found in a recording (once per recording, line count and text)."""
    items, rows, session = _read()
    return find.find(query, items, rows, session)


__all__ = ["Finder", "box"]
