"""The recording store: recordings and their events in SQLite or PostgreSQL.

:func:`open_store` resolves the database (``--db``, ``$CLAUDETRACE_DB`` or the
default file), migrates it if needed and returns a :class:`Store`, the one API the
proxy, the commands, telemetry backfill, replay and the UI use (:mod:`.api`).

The package's names are loaded on first use: the indexer and its writer import
only :mod:`.rows`, :mod:`.writer` and :mod:`.sqlite`, which store a recording in
SQLite without loading SQLAlchemy (a fifth of a burst's CPU time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import Store, open_store, resolve_url
    from .ingest import info_from_header
    from .models import Base, EventRow, EventTool, Recording
    from .rows import event_rows

__all__ = ["Base", "EventRow", "EventTool", "Recording", "Store", "event_rows",
           "info_from_header", "open_store", "resolve_url"]

#: Where each of the package's names is defined.
_HOMES = {"Store": "api", "info_from_header": "ingest", "open_store": "api", "resolve_url": "api",
          "Base": "models", "EventRow": "models", "EventTool": "models", "Recording": "models",
          "event_rows": "rows"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:  # a submodule (``from claudetrace.store import browse``) is imported then
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
