"""claudetrace: record, replay and observe Claude Code CLI stream-json traffic.

The public pieces are re-exported here; see the README for the command line.
They are loaded on first use: the proxy, the indexer and the telemetry worker
start for every session and import only what they need.
"""

from __future__ import annotations

# A constant, not importlib.metadata: the proxy starts for every session and
# looking the distribution up costs it tens of milliseconds.
from ._version import __version__

# Not typing.TYPE_CHECKING: importing typing alone costs the proxy's start-up
# more than starting its child (type checkers know this spelling too).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .cassette import Cassette, read_cassette, write_cassette
    from .errors import ClaudeTraceError
    from .model.events import Event, LineFields, ToolRef

#: Each public name and the module it lives in.
_EXPORTS = {
    "Cassette": "cassette",
    "read_cassette": "cassette",
    "write_cassette": "cassette",
    "ClaudeTraceError": "errors",
    "Event": "events",
    "LineFields": "events",
    "ToolRef": "events",
}

__all__ = [
    "Cassette",
    "ClaudeTraceError",
    "Event",
    "LineFields",
    "ToolRef",
    "__version__",
    "read_cassette",
    "write_cassette",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'claudetrace' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
