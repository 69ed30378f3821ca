"""Entry script of the session browser: ``streamlit run claudetrace/ui/app.py``.

``claudetrace ui`` runs this with the database in ``$CLAUDETRACE_DB``.  Pages
are the scripts in ``views/`` run by ``st.navigation`` (each also importable,
with a ``page()``); not a ``pages/`` folder, which would switch Streamlit to
its legacy multipage mode.  The
Sessions page also routes deep links: ``?session=<id>&tab=raw`` opens a session,
``?diff=a,b`` compares two.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

VIEWS = Path(__file__).resolve().parent / "views"

st.set_page_config(page_title="claudetrace", layout="wide")

navigation = st.navigation(
    [
        st.Page(VIEWS / "sessions.py", title="Sessions", url_path="sessions", default=True),
        st.Page(VIEWS / "diff.py", title="Diff", url_path="diff"),
        st.Page(VIEWS / "stats.py", title="Stats", url_path="stats"),
    ]
)
navigation.run()
