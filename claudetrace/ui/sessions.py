"""The session list: filters, table rows and summary tiles, from summary columns.

Rows are built from :class:`~claudetrace.store.Recording` summary columns only,
so listing 10,000 recordings never reads an event.  Filters are a plain value
(:class:`Filters`) that round-trips through URL query parameters, so a filtered
list is a link.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ..display import visible_text
from ..model import FAILED
from ..store.browse import Filters as Filters  # the list's filters are a query
from ..store.browse import Tiles as Tiles
from ..store.browse import percentile as percentile
from ..store.browse import tiles_of as tiles_of
from ..store.models import Recording
from ..store.waiting import BEING_INDEXED
from .present import cost_text, exit_text


def started_at(started_ns: int) -> dt.datetime:
    """A recording's start as an aware UTC datetime."""
    return dt.datetime.fromtimestamp(started_ns / 1e9, tz=dt.timezone.utc)


#: The session table's columns, in order: status and why it failed, the first
#: prompt, the start, tools and failed tools first after the link, so they show
#: without scrolling at 1280 px (the exit code, which the reason says in words,
#: after them); wide, rarely read ones last.
TABLE_COLUMNS = (
    "open", "status", "reason", "first prompt", "started", "duration (s)", "tool calls",
    "tool errors", "exit", "model", "turns", "tokens", "cost", "cost source", "now", "name",
    "tags", "project", "source", "links", "lines", "CLI", "id",
)


#: U+2007 FIGURE SPACE: as wide as a digit, and ordered before every sign, digit
#: and letter by Unicode's collation, which the browser's sort of a text column
#: follows (spaces, punctuation, symbols, digits, letters).
FIGURE_SPACE = "\u2007"


def sortable_amounts(texts: list[str]) -> list[str]:
    """A table page's cost cells as they read (``$0.0019``, ``unknown``, ``—``,
    ``not yet``), each amount led by figure spaces up to the widest amount's whole
    part, so that a click on the column's header orders them by amount, before the words.

    The grid sorts a text column as text, a character at a time: ``$10.0000``
    came before ``$2.0000``.  A number column sorts numbers but draws every
    missing value with one word (its ``None``), where a cost that is no amount
    has three; a pandas Styler's display texts cost the server ~0.5 s a page.
    Padded, amounts of one whole-part width compare digit by digit and a shorter
    one sorts first; the words follow every amount; the column is right-aligned,
    so the padding does not show.  The widest gets one too: Chromium orders a
    dash (``—``) between figure spaces and ``$``."""
    wholes = [len(t.split(".", 1)[0]) for t in texts if t.startswith("$")]
    widest = max(wholes, default=0) + 1
    return [FIGURE_SPACE * (widest - len(t.split(".", 1)[0])) + t if t.startswith("$") else t
            for t in texts]


def session_row(rec: Recording) -> dict[str, Any]:
    """One row of the session table (only summary columns are read)."""
    duration = rec.duration_ns
    status = rec.status
    tags = ", ".join(f"{k}={v}" for k, v in sorted((rec.tags or {}).items()))
    # Status and exit come first: the columns people look for (visible at 1280 px).
    row = {
        "id": rec.id,
        "status": status,
        # As the session's page says it: "unknown" for a transcript (was None).
        "exit": exit_text(rec),
        "started": started_at(rec.started_ns),
        "duration (s)": None if duration is None else round(duration / 1e9, 2),
        "name": rec.name or "",
        "model": rec.model or "",
        # Stored usage first and not folded yet: not known yet (empty), not 0.
        "turns": None if rec.indexing else rec.turns,
        "tool calls": None if rec.indexing else rec.tool_calls,
        "tool errors": None if rec.indexing else rec.tool_errors,
        "tokens": rec.input_tokens
        + rec.output_tokens
        + rec.cache_read_tokens
        + rec.cache_creation_tokens,
        # As every view says it (never None, never $0 for unknown): the amount,
        # "unknown" (a model without a price), "—" (no model call), "not yet".
        "cost": cost_text(rec, cell=True),
        "cost source": rec.cost_origin,
        "tags": tags,
        "reason": rec.status_reason or (BEING_INDEXED if rec.indexing else ""),
        "error": status in FAILED,
        "lines": None if rec.indexing else rec.event_count,
        "CLI": rec.claude_code_version or "",
        "session_id": rec.cli_session_id or "",
        "project": rec.cwd or "",
        "source": rec.source,
        # Filled in for the rows shown: the first prompt, a running session's
        # liveness, the sessions it is linked to.
        "first prompt": "",
        "now": "",
        "links": "",
    }
    # Recorded and user-given text as every page shows it (bidi controls escaped).
    return {k: visible_text(v) if isinstance(v, str) else v for k, v in row.items()}
