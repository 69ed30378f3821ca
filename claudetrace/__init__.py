"""claudetrace: record, replay and observe Claude Code CLI stream-json traffic.

The public pieces are re-exported here; see the README for the command line.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("claudetrace")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

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
