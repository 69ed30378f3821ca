"""The Sessions page: filters, summary tiles and the table of recordings.

Also the router for deep links: ``?session=…`` shows one session and
``?diff=a,b`` a comparison, so every view has a URL.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import streamlit as st

from claudetrace.config import DB_ENV
from claudetrace.display import visible_text
from claudetrace.model import FAILED, STATUSES
from claudetrace.store import Store
from claudetrace.store import browse as queries
from claudetrace.store.links import listed_links
from claudetrace.store.usage import store_reader
from claudetrace.ui import outline, present
from claudetrace.ui.sessions import TABLE_COLUMNS, Filters, session_row, sortable_amounts
from claudetrace.ui.views import common
from claudetrace.ui.views.common import money, param, plain, set_params
from claudetrace.usage import costed

#: Rows per page of the session table.
PAGE_SIZE = 500


def page() -> None:
    """Route: a session, a diff, or the list."""
    if param("session"):
        from claudetrace.ui.views import session

        session.page()
    elif param("diff"):
        from claudetrace.ui.views import diff

        diff.page()
    else:
        list_page()


@st.cache_data(ttl=60, show_spinner=False)
def _choices(url: str | None) -> dict[str, list[str]]:
    """The filters' choices (tools, tags, projects, sources), read once a minute."""
    return queries.choices(common.store())


#: Seconds the tiles' figures are kept for a store that did not change (the
#: heartbeat-running count is in its key; a proxy found dead by its pid alone is
#: seen by the tiles this much later, by the table at once).
TILES_KEPT = 30.0


@st.cache_data(ttl=TILES_KEPT, max_entries=64, show_spinner=False)
def _tiles(url: str | None, filters: Filters, key: tuple[Any, ...]) -> queries.Tiles:
    """The tiles of ``filters`` while the store's ``key`` (:func:`~claudetrace.store.
    browse.summary_key`) stays the same: the tiles' query was most of what the list
    did before its first content (0.34 s against 0.05 s for the key, PostgreSQL,
    10,000 sessions, a loaded 2-core machine), done again by every new page and
    every refresh of a live list."""
    return queries.summary(common.store(), filters)


def _multi(label: str, options: list[str], current: tuple[str, ...], key: str) -> tuple[str, ...]:
    """A multiselect keeping chosen values the store no longer lists (a link's)."""
    extra = [v for v in current if v not in options]
    return tuple(st.multiselect(label, options + extra, default=list(current), key=key))


def _filters_from_widgets(current: Filters, model_options: list[str]) -> Filters:
    with st.sidebar:
        st.header("Filters")
        today = dt.datetime.now(dt.timezone.utc).date()
        picked = st.date_input(
            "Started between (UTC)",
            value=[current.since, current.until] if current.since and current.until else [],
            max_value=today + dt.timedelta(days=1),
            key="f_dates",
        )
        since = until = None
        if isinstance(picked, (list, tuple)) and len(picked) == 2:
            since, until = picked[0], picked[1]
        chosen = st.multiselect(
            "Model",
            model_options,
            default=[m for m in current.models if m in model_options],
            key="f_model",
        )
        choices = _choices(os.environ.get(DB_ENV))
        statuses = _multi("Status", list(STATUSES), current.statuses, "f_status")
        tools = _multi("Called the tool", choices["tools"], current.tools, "f_tool")
        tags = _multi("Tag", choices["tags"], current.tags, "f_tag")
        projects = _multi("Project (cwd)", choices["projects"], current.projects, "f_cwd")
        sources = _multi("Source", choices["sources"], current.sources, "f_source")
        errors_only = st.toggle("Errors only", value=current.errors_only, key="f_errors")
        col1, col2 = st.columns(2)
        min_cost = col1.number_input(
            "Min cost ($)",
            min_value=0.0,
            value=current.min_cost,
            step=0.01,
            format="%.4f",
            key="f_min",
        )
        max_cost = col2.number_input(
            "Max cost ($)",
            min_value=0.0,
            value=current.max_cost,
            step=0.01,
            format="%.4f",
            key="f_max",
        )
        text = st.text_input(
            "Search messages",
            value=current.text,
            key="f_text",
            help="Text in user, assistant and result lines of every session (words "
            "from their beginnings, case ignored).",
        )
    return Filters(
        since=since,
        until=until,
        models=tuple(chosen),
        errors_only=errors_only,
        min_cost=min_cost,
        max_cost=max_cost,
        text=text.strip(),
        tools=tools,
        tags=tags,
        statuses=statuses,
        projects=projects,
        sources=sources,
    )


def list_page() -> None:
    """The session list."""
    st.title("Sessions")
    db = common.store()
    params = {k: str(v) for k, v in st.query_params.items()}
    from_url = Filters.from_params(params)
    if "f_model" not in st.session_state and not params.get("live"):
        # A new browser page: the sidebar's widgets will show the URL's filters, so
        # the list is drawn first and the widgets after it (the browser loads each
        # kind of widget's code before it shows what follows it).
        _list_body(from_url)
        filters = _filters_from_widgets(from_url, queries.models(db))
        common.auto_refresh_toggle("live_list")
        if filters != from_url:
            _keep(filters)
            st.rerun()
        return
    filters = _filters_from_widgets(from_url, queries.models(db))
    _keep(filters)
    live = common.auto_refresh_toggle("live_list")
    if live:
        st.fragment(run_every=2.0)(_list_body)(filters)
    else:
        _list_body(filters)


def _keep(filters: Filters) -> None:
    """Put ``filters`` in the URL."""
    wanted = filters.to_params()
    for key in queries.PARAMS:
        set_params(**{key: wanted.get(key)})


def _list_body(filters: Filters) -> None:
    db = common.store()
    # The figures are counted by the database; only the page shown is read.  The
    # search index is asked once for both (it was asked four times a page).
    filters = queries.searched(db, filters)
    summary = _tiles(os.environ.get(DB_ENV), filters, queries.summary_key(db))
    row = common.metric_row()
    row.metric("Sessions", f"{summary.count:,}", width="content")
    row.metric("Total cost", money(summary.total_cost), width="content")
    row.metric("Error rate", "—" if summary.error_rate is None else f"{summary.error_rate:.1%}",
               width="content")
    row.metric("p95 duration", present.duration_s(summary.p95_duration_s), width="content")
    row.metric("Running", summary.running, width="content")
    if not summary.count:
        common.metrics_drawn()  # a session opened from here shows its header at once
        if db.count_recordings() == 0:
            st.info(
                "No recordings yet. Record one with `claudetrace proxy -- claude …`, "
                "or import a cassette with `claudetrace import FILE`."
            )
        else:
            st.info("No session matches these filters.")
        _open_by_id()
        return
    pages = max(1, -(-summary.count // PAGE_SIZE))
    page_no = min(common.int_param("page", 1) or 1, pages)
    with common.drawn_first():
        # The page's reads while the browser draws the tiles: a new browser page
        # loads the table's code, and React held the tiles back until the table
        # could show too when the table followed them at once.
        table, coloured, shown = _page_rows(db, filters, page_no)
    if pages > 1:
        picked = int(
            st.number_input(
                f"Page (of {pages})", min_value=1, max_value=pages, value=page_no, key="list_page"
            )
        )
        if picked != page_no:
            set_params(page=picked if picked > 1 else None)
            st.rerun()
    event = st.dataframe(
        table,
        hide_index=True,
        on_select="rerun",
        selection_mode="multi-row",
        key="sessions_table",
        column_order=list(TABLE_COLUMNS),
        column_config={
            "open": st.column_config.LinkColumn("open", display_text="open", width=50),
            # Why a session failed, beside its status (was past the 1280 px view).
            "reason": st.column_config.TextColumn("reason", width=150),
            "started": st.column_config.DatetimeColumn(
                "started (UTC)", format="YYYY-MM-DD HH:mm:ss"
            ),
            "cost": st.column_config.TextColumn("cost", alignment="right"),
            "exit": st.column_config.TextColumn("exit", width="small"),
            "duration (s)": st.column_config.NumberColumn("dur (s)", width="small"),
            "turns": st.column_config.NumberColumn("turns", width="small"),
            "tool calls": st.column_config.NumberColumn("tools", width="small"),
            "first prompt": st.column_config.TextColumn("first prompt", width=160),
            **coloured,
        },
    )
    _selection_actions(event, shown)
    _open_by_id()


def _page_rows(db: Store, filters: Filters, page_no: int
               ) -> tuple[list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]:
    """The rows of list page ``page_no`` as the table shows them, its coloured
    columns' configs, and the rows as read."""
    recordings = queries.list_sessions(db, filters, offset=(page_no - 1) * PAGE_SIZE,
                                       limit=PAGE_SIZE)
    # Each cost as ``usage session`` (and sessions, show, the report) says it: the
    # page's recordings' figures in one query.
    recordings = costed(store_reader(db), recordings)
    shown = [session_row(r) for r in recordings]
    prompts = queries.first_prompts(db, [row["id"] for row in shown])
    links = listed_links(db, [r.id for r in recordings])
    # Every running row says what it is doing and its figures so far, as its
    # page's header says them (not the summary columns, written at its end):
    # their folds fed in one query.
    running = [r for r, row in zip(recordings, shown, strict=True) if row["status"] == "running"]
    folds = common.folded_many(db, running)
    for rec, row in zip(recordings, shown, strict=True):
        row["open"] = f"?session={row['id']}"
        row["first prompt"] = visible_text(prompts.get(row["id"], ""))
        if row["id"] in links:
            row["links"] = visible_text(outline.link_summary(links[row["id"]]))
        if row["id"] in folds:
            session = folds[row["id"]].session
            head = present.header(rec, session)
            if head.liveness is not None:
                row["now"] = f"{head.liveness.state} · last event {head.last_event}"
            now = session_row(present.live(rec, session))
            row.update({key: now[key] for key in _LIVE_COLUMNS})
    table, coloured = _coloured(shown)
    return table, coloured, shown


#: The cells of a running session's row that its fold says (:func:`present.live`).
_LIVE_COLUMNS = ("turns", "tool calls", "tool errors", "tokens", "lines", "model", "cost",
                 "cost source")


#: Label colours of the status column: a failure red, a running session orange
#: (drawn by the table's canvas as coloured labels).
_RED = "#c62828"
_STATUS_COLOUR = {**dict.fromkeys(FAILED, _RED), "running": "#b26a00"}


def _coloured(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows as the table shows them, with the columns that colour a failure: a
    failed session's status and a session's failed tools are red labels; costs
    that sort by amount (:func:`~claudetrace.ui.sessions.sortable_amounts`).

    A pandas Styler coloured the cells before: its per-cell display values and CSS
    cost the server 0.29 s for a page of 500 rows (``marshall_styler``), more than
    the page's queries; a label column costs what any list column does."""
    shown = []
    for row in rows:
        row = dict(row)
        row["status"] = [row["status"]]
        errors = row["tool errors"]
        row["tool errors"] = [str(errors)] if errors else []
        shown.append(row)
    for row, cost in zip(shown, sortable_amounts([r["cost"] for r in shown]), strict=True):
        row["cost"] = cost  # sorted by amount when its header is clicked
    counts = sorted({r["tool errors"][0] for r in shown if r["tool errors"]}, key=int)
    config = {
        "status": st.column_config.MultiselectColumn(
            "status", width=96, options=list(STATUSES),
            color=[_STATUS_COLOUR.get(s, "gray") for s in STATUSES]),
        "tool errors": st.column_config.MultiselectColumn(
            "failed tools", width="small", options=counts, color=_RED),
    }
    return shown, config


def _selection_actions(event: Any, shown: list[dict[str, Any]]) -> None:
    selected = [shown[i]["id"] for i in _selected_rows(event) if i < len(shown)]
    if len(selected) == 1:
        if st.button(f"Open session {selected[0]}", type="primary", key="open_selected"):
            common.go(session=selected[0])
    elif len(selected) == 2:
        if st.button("Diff the two selected sessions", type="primary", key="diff_selected"):
            common.go(diff=",".join(selected))
    elif len(selected) > 2:
        st.caption("Select one session to open it, or two to compare them.")
    else:
        st.caption("Select a row to open it (or two rows to diff them).")


def _selected_rows(event: Any) -> list[int]:
    try:
        return list(event.selection.rows)
    except AttributeError:
        return []


def _open_by_id() -> None:
    with st.form("open_by_id", border=False):
        col1, col2 = st.columns([4, 1], vertical_alignment="bottom")
        wanted = col1.text_input(
            "Open a session by id, id prefix, CLI session id or `latest`", key="open_id"
        )
        if col2.form_submit_button("Open") and wanted.strip():
            common.go(session=wanted.strip())
    if param("q"):
        st.caption(f"Search: {plain(param('q'))}")


if __name__ == "__main__":  # run by st.navigation as a page script
    page()
