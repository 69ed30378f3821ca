"""Entry script of the session browser: ``streamlit run claudetrace/ui/app.py``.

``claudetrace ui`` runs this with the database in ``$CLAUDETRACE_DB``.  Pages
are functions in :mod:`claudetrace.ui.views` (``st.navigation``; no ``pages/``
folder, which would switch Streamlit to its legacy multipage mode).  The
Sessions page also routes deep links: ``?session=<id>&tab=raw`` opens a session,
``?diff=a,b`` compares two.
"""

from __future__ import annotations

import streamlit as st

from claudetrace.ui.views import diff, sessions, stats

st.set_page_config(page_title="claudetrace", page_icon="🛰", layout="wide")

navigation = st.navigation(
    [
        st.Page(sessions.page, title="Sessions", url_path="sessions", default=True),
        st.Page(diff.page, title="Diff", url_path="diff"),
        st.Page(stats.page, title="Stats", url_path="stats"),
    ]
)
navigation.run()
