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
from claudetrace.pricing import dollars
from claudetrace.store import browse as queries
from claudetrace.store.links import listed_links
from claudetrace.ui import outline, present
from claudetrace.ui.sessions import TABLE_COLUMNS, Filters, session_row
from claudetrace.ui.views import common
from claudetrace.ui.views.common import money, param, plain, set_params

#: Rows per page of the session table.
PAGE_SIZE = 500
#: Running sessions of a page whose liveness is worked out (each is folded).
LIVE_ROWS = 20


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
    # The figures are counted by the database; only the page shown is read.
    summary = queries.summary(db, filters)
    c1, c2, c3, c4, c5 = st.columns(5)
    c1.metric("Sessions", f"{summary.count:,}")
    c2.metric("Total cost", money(summary.total_cost))
    c3.metric("Error rate", "—" if summary.error_rate is None else f"{summary.error_rate:.1%}")
    c4.metric(
        "p95 duration", "—" if summary.p95_duration_s is None else f"{summary.p95_duration_s:.2f} s"
    )
    c5.metric("Running", summary.running)
    common.metrics_drawn()  # a session opened from here shows its header at once
    if not summary.count:
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
    if pages > 1:
        page_no = int(
            st.number_input(
                f"Page (of {pages})", min_value=1, max_value=pages, value=page_no, key="list_page"
            )
        )
        set_params(page=page_no if page_no > 1 else None)
    recordings = queries.list_sessions(db, filters, offset=(page_no - 1) * PAGE_SIZE,
                                       limit=PAGE_SIZE)
    shown = [session_row(r) for r in recordings]
    prompts = queries.first_prompts(db, [row["id"] for row in shown])
    links = listed_links(db, [r.id for r in recordings])
    by_id = {r.id: r for r in recordings}
    running = 0
    for row in shown:
        row["open"] = f"?session={row['id']}"
        row["first prompt"] = visible_text(prompts.get(row["id"], ""))
        if row["id"] in links:
            row["links"] = visible_text(outline.link_summary(links[row["id"]]))
        if row["status"] == "running" and running < LIVE_ROWS:
            running += 1
            rec = by_id[row["id"]]
            head = present.header(rec, common.folded(db, rec).session)
            if head.liveness is not None:
                row["now"] = f"{head.liveness.state} · last event {head.last_event}"
    event = st.dataframe(
        _styled(shown),
        hide_index=True,
        on_select="rerun",
        selection_mode="multi-row",
        key="sessions_table",
        column_order=list(TABLE_COLUMNS),
        column_config={
            "open": st.column_config.LinkColumn("open", display_text="open", width="small"),
            "started": st.column_config.DatetimeColumn(
                "started (UTC)", format="YYYY-MM-DD HH:mm:ss"
            ),
            "cost ($)": st.column_config.NumberColumn(format="%.4f"),
            "status": st.column_config.TextColumn("status", width="small"),
            "exit": st.column_config.NumberColumn("exit", width="small"),
            "duration (s)": st.column_config.NumberColumn("dur (s)", width="small"),
            "turns": st.column_config.NumberColumn("turns", width="small"),
            "tool calls": st.column_config.NumberColumn("tools", width="small"),
            "tool errors": st.column_config.NumberColumn("failed tools", width="small"),
            "first prompt": st.column_config.TextColumn("first prompt", width="medium"),
        },
    )
    _selection_actions(event, shown)
    _open_by_id()


def _styled(rows: list[dict[str, Any]]) -> Any:
    """The rows as a table whose failures are red: a failed session's status, a
    session's failed tools (Styler colours are drawn by the table's canvas).  A
    page with nothing to colour stays plain rows (styling every cell of 500 rows
    costs the server 0.1-0.3 s)."""
    if not any(r["status"] in FAILED or r["status"] == "running" or r["tool errors"]
               for r in rows):
        return rows
    import pandas as pd

    frame = pd.DataFrame(rows)
    for column in TABLE_COLUMNS:
        if column not in frame:
            frame[column] = None
    red = "color: #c62828; font-weight: 600"

    def status(value: Any) -> str:
        return red if value in FAILED else ("color: #b26a00" if value == "running" else "")

    def failed(value: Any) -> str:
        return red if isinstance(value, (int, float)) and value > 0 else ""

    # A Styler's display text replaces the column configs' number formats: say them here.
    shown = frame.style.format(
        {"exit": "{:.0f}", "duration (s)": "{:.2f}",
         "cost ($)": lambda usd: dollars(usd).removeprefix("$")}, na_rep="")
    return shown.map(status, subset=["status"]).map(failed, subset=["tool errors"])


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
