"""Public test helpers: drive the real ``claude`` CLI offline.

- :mod:`claudetrace.testing.fakeapi` — a scripted fake Anthropic Messages API
  (:class:`FakeAPI` and the reply helpers :func:`text`, :func:`tool_use`,
  :func:`thinking`, :func:`reply`, :func:`error`);
- :mod:`claudetrace.testing.harness` — the bundled CLI's path and the
  environment that makes it start fast, offline and isolated.
"""

from __future__ import annotations

from .fakeapi import (
    FakeAPI,
    RecordedRequest,
    Reply,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    error,
    reply,
    text,
    thinking,
    tool_use,
)

__all__ = [
    "FakeAPI",
    "RecordedRequest",
    "Reply",
    "TextBlock",
    "ThinkingBlock",
    "ToolUseBlock",
    "error",
    "reply",
    "text",
    "thinking",
    "tool_use",
]
