"""Ways a session leaves or enters the store besides the proxy.

- :mod:`.html` — the self-contained HTML report (``export --format html``);
- :mod:`.facts` — the summary of a recording as labelled values (``show``, the report);
- :mod:`.imports` — ``import``: cassettes, transcripts and claude-trace logs told apart
  by content, stored idempotently, ``--watch``;
- :mod:`.claude_code` — Claude Code's session transcripts read as recordings;
- :mod:`.claude_trace` — claude-trace's request/response logs read as recordings.
"""
