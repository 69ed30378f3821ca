"""The session model: what a recording's events mean, computed once for every view.

:mod:`.events` parses a line once; :mod:`.protocol` reads what a line says;
:mod:`.session` folds events into a :class:`Session` (turns, model calls with
usage, tool calls with their permission and hook round trips, subagents,
control round trips, system events, status), made of the records in
:mod:`.parts`; :mod:`.usage` reads token usage; :mod:`.summary` turns a session
into the ``recordings`` summary columns.
Pure: no I/O, no database, no OpenTelemetry.
"""

from __future__ import annotations

from .liveness import LIVENESS_STATES, Liveness, liveness
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
    "liveness",
]
