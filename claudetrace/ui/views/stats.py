"""The Stats page: usage over time, tools and latencies across sessions."""

from __future__ import annotations

import datetime as dt

import streamlit as st

from claudetrace.store import Store
from claudetrace.store import browse as queries
from claudetrace.store.usage import store_reader
from claudetrace.telemetry.latency import fold_latencies, recent_latencies
from claudetrace.ui import present
from claudetrace.ui.sessions import Filters
from claudetrace.ui.stats import (
    TOKEN_SERIES,
    bars_html,
    daily_usage,
    latency_table,
    model_rows,
    token_chart,
    tool_rates,
    usage_days,
    usage_rows,
    usage_total,
)
from claudetrace.ui.views import common
from claudetrace.usage import Totals


@st.cache_data(show_spinner=False, max_entries=512)
def _latency_samples(_db: Store, recording_id: str, event_count: int) -> dict[str, list[float]]:
    """Folded from the lines of an ended recording that has no samples kept yet."""
    return fold_latencies(_db, recording_id)


#: How long the page's aggregates are kept (seconds): a reload within it reads
#: nothing; a session recorded since shows after it.
AGGREGATES_TTL = 30


@st.cache_data(show_spinner=False, ttl=AGGREGATES_TTL, max_entries=4)
def _sessions_per_day(_db: Store, url: str) -> list[tuple[dt.date, int, int]]:
    return queries.sessions_per_day(_db)


@st.cache_data(show_spinner=False, ttl=AGGREGATES_TTL, max_entries=4)
def _usage_days(_db: Store, url: str) -> dict[str, Totals]:
    return usage_days(store_reader(_db))


@st.cache_data(show_spinner=False, ttl=AGGREGATES_TTL, max_entries=4)
def _tool_usage(_db: Store, url: str) -> dict[str, tuple[int, int]]:
    return queries.tool_usage(_db)


def page() -> None:
    """Aggregates across sessions."""
    st.title("Stats")
    db = common.store()
    per_day = _sessions_per_day(db, db.url)
    if not per_day:
        st.info("No recordings yet.")
        return
    days = _usage_days(db, db.url)
    daily = usage_rows(days)
    st.subheader("Cost and tokens over time (per UTC day)")
    st.caption("The figures of `claudetrace usage daily -z UTC`: each API message once, "
               "as the store's usage calls hold it (a turn still streaming is not in them).")
    st.markdown(usage_total(days))
    c1, c2 = st.columns(2)
    # Boxes of HTML, not st.bar_chart: Vega's scripts took a second or more to load and
    # compile in each new page before the first chart was drawn (bench ui --browser).
    tokens = token_chart(daily)
    c1.html(bars_html(tokens["day"], {"cost ($)": tokens["cost ($)"]},
                     unit="cost ($)", figure=present.money))
    c2.html(bars_html(tokens["day"], {k: tokens[k] for k in TOKEN_SERIES}, unit="tokens"))
    # The tables say a cost in words where it is no amount ("cost"), never None.
    st.dataframe(daily, hide_index=True, key="daily_table",
                 column_order=[k for k in daily[0] if k != "cost ($)"] if daily else None)
    models = model_rows(days)
    st.dataframe(models, hide_index=True, key="daily_models_table",
                 column_order=[k for k in models[0] if k != "cost ($)"] if models else None)
    st.caption("Sessions started and failed per UTC day")
    st.dataframe(daily_usage(per_day), hide_index=True, key="sessions_per_day_table")

    st.subheader("Tools")
    rates = tool_rates(_tool_usage(db, db.url))
    if rates:
        st.dataframe(
            rates,
            hide_index=True,
            key="tools_table",
            column_config={"failure rate": st.column_config.NumberColumn(format="percent")},
        )
    else:
        st.caption("No tool calls recorded.")

    st.subheader("Latency")
    recent = int(
        st.number_input(
            "Over the most recent sessions",
            min_value=1,
            max_value=500,
            value=common.int_param("recent", 20) or 20,
            key="recent",
        )
    )
    common.set_params(recent=recent if recent != 20 else None)
    samples = recent_latencies(db, queries.list_sessions(db, Filters(), limit=recent),
                               lambda r: _latency_samples(db, r.id, r.event_count))
    table = latency_table(samples)
    if table:
        st.dataframe(table, hide_index=True, key="latency_table")
    else:
        st.caption("No finished spans in these sessions.")


if __name__ == "__main__":  # run by st.navigation as a page script
    page()
