"""claudetrace: record, replay and observe Claude Code CLI stream-json traffic.

The public pieces are re-exported here; see the README for the command line.
"""

from __future__ import annotations

# A constant, not importlib.metadata: the proxy starts for every session and
# looking the distribution up costs it tens of milliseconds.
from ._version import __version__
from .cassette import Cassette, read_cassette, write_cassette
from .errors import ClaudeTraceError
from .events import Event, LineFields, ToolRef

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
