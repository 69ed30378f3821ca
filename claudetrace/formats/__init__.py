"""Ways a session leaves or enters the store besides the proxy.

- :mod:`.html` — the self-contained HTML report (``export --format html``);
- :mod:`.facts` — the summary of a recording as labelled values (``show``, the report).
"""
