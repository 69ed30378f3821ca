"""What every page shares: the store, query-parameter state, safe text, formatting.

The view state lives in the URL (``st.query_params``), so a refresh or a shared
link shows the same thing.  Recorded content is untrusted: anything that goes
through a Markdown-rendering element (labels, alerts) passes :func:`plain`
first; bodies are shown with ``st.text`` / ``st.code`` / ``st.json``.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import streamlit as st

from claudetrace.config import DB_ENV
from claudetrace.display import visible_text
from claudetrace.errors import ClaudeTraceError
from claudetrace.indexer import open_settled_store
from claudetrace.model import Session
from claudetrace.model.events import Event
from claudetrace.pauses import no_gc_pauses as no_gc_pauses  # the pages use it from here
from claudetrace.store import Recording, Store
from claudetrace.store.browse import events_since
from claudetrace.ui.present import money as money  # the one way a cost is printed

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=^])")


def plain(text: Any, limit: int = 200) -> str:
    """Text safe for a Markdown-rendering element: specials escaped, one line, bounded."""
    value = visible_text(" ".join(str(text).split()))
    if len(value) > limit:
        value = value[: limit - 1] + "…"
    return _MARKDOWN_SPECIAL.sub(r"\\\1", value)


@st.cache_resource(show_spinner=False)
def _open(url: str | None) -> Store:
    # `claudetrace ui` checked the database exists (or made the default one): one
    # deleted or renamed since is an error on the page, not a new empty store.
    return open_settled_store(url, create=False)


def store() -> Store:
    """The store of this app (opened once per process), or stop with one clear line."""
    try:
        return _open(os.environ.get(DB_ENV) or None)
    except ClaudeTraceError as exc:
        st.error(f"Cannot open the database: {plain(exc, 400)}")
        st.stop()
        raise  # unreachable: st.stop raises


def param(name: str, default: str = "") -> str:
    """A query parameter (the view state) as text."""
    value = st.query_params.get(name)
    return default if value is None else str(value)


def int_param(name: str, default: int = 0) -> int:
    try:
        return max(0, int(param(name, str(default))))
    except ValueError:
        return default


def set_params(**values: Any) -> None:
    """Update query parameters; ``None`` or ``""`` removes one."""
    for key, value in values.items():
        if value is None or value == "":
            if key in st.query_params:
                del st.query_params[key]
        elif st.query_params.get(key) != str(value):
            st.query_params[key] = str(value)


def go(**values: Any) -> None:
    """Replace the view state and rerun (a navigation)."""
    st.query_params.clear()
    set_params(**values)
    st.rerun()




def auto_refresh_toggle(key: str, *, default: bool = False) -> bool:
    """A toggle (kept in the URL) for re-running live views every few seconds."""
    on = st.toggle(
        "Auto-refresh",
        value=param("live", "1" if default else "") == "1",
        key=key,
        help="Re-read the database every 2 seconds (for sessions being recorded).",
    )
    set_params(live="1" if on else None)
    return on


def metric_row() -> Any:
    """A row for ``st.metric`` figures, each given ``width="content"``: as wide as its
    figure, the row wrapping onto another line where the page is narrow.  In
    ``st.columns`` a figure wider than its column was cut with an ellipsis
    (``16,574,…`` tokens at 1400 px, ``$0.…`` at 1024 px)."""
    return st.container(horizontal=True, gap="large")


#: How long a new browser page gets to draw a page's first figures before more
#: elements follow (seconds; see :func:`drawn_first`).
HEAD_START = 0.3
#: Session-state key: this browser page has drawn metrics (their code is loaded).
METRICS_DRAWN = "_claudetrace_metrics_drawn"


def metrics_drawn() -> None:
    """Note that this browser page has drawn ``st.metric`` elements."""
    st.session_state[METRICS_DRAWN] = True


@contextmanager
def drawn_first(seconds: float = HEAD_START) -> Iterator[None]:
    """Run the block (the reads of what comes next) while the browser draws the
    metrics just sent, then wait out the rest of ``seconds`` if this browser page
    has not drawn metrics before.

    The browser loads the code of each kind of element the first time a page shows
    one, and React holds back an element whose code has arrived while others still
    load, until half a second after it last showed a placeholder: elements streamed
    right behind the header (a table, a chart, widgets) kept the header's figures
    from showing until the whole page could (0.2-0.5 s later on a 200k-line
    session).  Once the page has drawn metrics their code is loaded: nothing waits.
    """
    start = time.monotonic()
    yield
    if st.session_state.get(METRICS_DRAWN):
        return
    metrics_drawn()
    left = start + seconds - time.monotonic()
    if left > 0:
        time.sleep(left)


class Folded:
    """A recording folded by the session model as far as it is stored, fed what is
    stored since on each look (a running session's page refreshes every 2 s)."""

    def __init__(self, read: Callable[[int], list[Event]]) -> None:
        self._read = read
        self.session = Session()
        self.next_seq = 0
        self._lock = threading.Lock()

    def update(self) -> Folded:
        """Fold what was stored since the last look."""
        with self._lock:
            while True:
                events = self._read(self.next_seq)
                if not events:
                    break
                self._add(events)
        return self

    def feed(self, events: list[Event]) -> Folded:
        """Fold ``events``, read from :attr:`next_seq` on by the caller (the
        session list reads its running sessions' new lines in one query)."""
        with self._lock:
            if events and events[0].seq >= self.next_seq:
                self._add(events)
        return self

    def _add(self, events: list[Event]) -> None:
        self.session.add_many(events)
        self.next_seq = events[-1].seq + 1


#: Recordings kept folded for the sessions open in pages (a list's running
#: sessions are kept apart: :func:`folded_many`).
FOLDED_KEPT = 32


@st.cache_resource(show_spinner=False, max_entries=FOLDED_KEPT)
def _folder(_db: Store, recording_id: str) -> Folded:
    def read(start_seq: int) -> list[Event]:
        return list(_db.iter_events(recording_id, start_seq=start_seq, limit=20_000))

    return Folded(read)


def folded(db: Store, rec: Recording) -> Folded:
    """The session model of ``rec`` as far as it is stored."""
    with no_gc_pauses():
        return _folder(db, rec.id).update()


#: Running sessions' folds the server keeps for the session list (every running
#: row of a page of 500, and of another page or filter open elsewhere).
RUNNING_KEPT = 1000


@st.cache_resource(show_spinner=False)
def _running_folds(_db: Store) -> tuple[dict[str, Folded], threading.Lock]:
    """The folds of the running sessions the session list showed, by recording
    id, oldest look first."""
    return {}, threading.Lock()


def _fed(_start_seq: int) -> list[Event]:
    """A fold of the list reads nothing itself: :func:`folded_many` feeds it."""
    return []


def folded_many(db: Store, recs: list[Recording]) -> dict[str, Folded]:
    """The session models of ``recs`` (a list page's running sessions) as far as
    they are stored, each fed what was stored since the last look, in one query
    for all of them (:func:`~claudetrace.store.browse.events_since`)."""
    kept, lock = _running_folds(db)
    with lock:
        folds = {r.id: kept.pop(r.id) if r.id in kept else Folded(_fed) for r in recs}
        kept.update(folds)  # the last looked at last
        for rid in list(kept)[: max(0, len(kept) - RUNNING_KEPT)]:
            del kept[rid]
    with no_gc_pauses():
        new = events_since(db, {rid: f.next_seq for rid, f in folds.items()})
        for rid, fold in folds.items():
            fold.feed(new[rid])
    return folds


def pager(count: int, size: int, name: str, what: str, key: str) -> int:
    """The part (from 1) of ``count`` rows in parts of ``size`` the URL's ``name`` asks
    for, with a picker when there are several."""
    pages = max(1, -(-count // size))
    part = min(int_param(name, 1) or 1, pages)
    if pages > 1:
        part = int(st.number_input(
            f"Part (of {pages}, {size} {what} each)", 1, pages, part, key=key))
        set_params(**{name: part if part > 1 else None})
    return part


#: The look of the span tree and of rendered Markdown (st.html elements; recorded
#: texts in them are escaped, see :func:`_trace_html` and ui.markdown.tree_html).
_STYLE = """<style>
.ct-trace{border-collapse:collapse;font-size:13px;width:100%}
.ct-trace th,.ct-trace td{padding:2px 8px;border-bottom:1px solid rgba(128,128,128,.2);
text-align:left;white-space:nowrap}
.ct-trace td.n{text-align:right;font-variant-numeric:tabular-nums}
.ct-trace td.detail{white-space:normal;color:#6b7079;min-width:13em}
.ct-trace td.tok{white-space:normal;min-width:7em}
.ct-scroll{overflow-x:auto}
.ct-trace .kind{font-size:11px;padding:0 5px;border-radius:6px;margin-right:4px;color:#fff}
.ct-trace .k-agent{background:#7f7f7f}.ct-trace .k-turn{background:#1f77b4}
.ct-trace .k-model{background:#9467bd}.ct-trace .k-tool{background:#2ca02c}
.ct-trace .k-subagent{background:#17becf}.ct-trace .k-error{background:#c62828}
.ct-trace tr.s-error td{color:#c62828}.ct-trace tr.s-error .kind{background:#c62828}
.ct-trace .track{position:relative;width:180px;height:10px;background:rgba(128,128,128,.15)}
.ct-trace .bar{position:absolute;top:0;height:10px;min-width:2px;background:#1f77b4}
.ct-trace tr.s-error .bar{background:#c62828}.ct-trace tr.s-running .bar{background:#b26a00}
.ct-head{display:flex;flex-wrap:wrap;gap:4px 18px;font-size:14px;margin:0 0 6px}
.ct-head .f span{display:block;font-size:11px;color:#6b7079;text-transform:uppercase}
.ct-head .f.bad{color:#c62828;font-weight:600}
.ct-md table{border-collapse:collapse}.ct-md th,.ct-md td{border:1px solid rgba(128,128,128,.4);
padding:2px 8px}.ct-md pre{background:rgba(128,128,128,.12);padding:6px;overflow:auto}
</style>"""


def style() -> None:
    """Send the page the look of the span tree and of rendered Markdown."""
    st.html(_STYLE)
