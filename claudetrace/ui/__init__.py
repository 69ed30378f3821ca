"""The Streamlit session browser (``claudetrace ui``).

The app (:mod:`.app` and the page scripts in ``views/``) is thin; everything it
shows is shaped by pure functions over events and recordings, tested without
Streamlit:

- :mod:`.sessions` — the session list: table rows, summary tiles, filters
- :mod:`claudetrace.store.browse` — the bounded queries the pages run (only what is shown)
- :mod:`.conversation` — the transcript as chat items, subagents nested
- :mod:`.controlplane` — control requests paired with their responses
- :mod:`.timeline` — waterfall rows from the telemetry span builder
- :mod:`.diff` — two recordings aligned turn by turn
- :mod:`.stats` — aggregates across recordings
- :mod:`.bench` — seeding and timing a large database

Nothing here imports Streamlit except the app and its views.
"""

from __future__ import annotations
