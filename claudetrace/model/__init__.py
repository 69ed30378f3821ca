"""The session model: what a recording's events mean, computed once for every view.

:mod:`.events` parses a line once; :mod:`.protocol` reads what a line says;
:mod:`.session` folds events into a :class:`Session` (turns, model calls with
usage, tool calls with their permission and hook round trips, subagents,
control round trips, system events, status), made of the records in
:mod:`.parts`; :mod:`.usage` reads token usage; :mod:`.summary` turns a session
into the ``recordings`` summary columns.
Pure: no I/O, no database, no OpenTelemetry.

The names below are loaded on first use: a reader of lines alone
(:mod:`.events`, :mod:`.protocol`: ``claudetrace search``) does not load the
session fold.  The liveness of a session is
:func:`claudetrace.model.liveness.liveness` (the package's ``liveness`` is that
module).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .liveness import LIVENESS_STATES, Liveness
    from .session import (
        COST_SOURCES,
        FAILED,
        STATUSES,
        ControlRoundTrip,
        Cost,
        CostSource,
        ModelCall,
        Outcome,
        Session,
        Status,
        Subagent,
        ToolCall,
        Turn,
        fold,
    )
    from .usage import TOKEN_TYPES, Usage

__all__ = [
    "COST_SOURCES",
    "FAILED",
    "LIVENESS_STATES",
    "STATUSES",
    "TOKEN_TYPES",
    "ControlRoundTrip",
    "Cost",
    "CostSource",
    "Liveness",
    "ModelCall",
    "Outcome",
    "Session",
    "Status",
    "Subagent",
    "ToolCall",
    "Turn",
    "Usage",
    "fold",
]


#: Each name's module: :mod:`.session` but for these.
_FROM = {name: "session" for name in __all__} | {
    "LIVENESS_STATES": "liveness",
    "Liveness": "liveness",
    "TOKEN_TYPES": "usage",
    "Usage": "usage",
}


def __getattr__(name: str) -> Any:
    module = _FROM.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
