"""Public test helpers: drive the real ``claude`` CLI offline.

- :mod:`claudetrace.testing.fakeapi` — a scripted fake Anthropic Messages API
  (:class:`FakeAPI` and the reply helpers :func:`text`, :func:`tool_use`,
  :func:`thinking`, :func:`reply`, :func:`error`);
- :mod:`claudetrace.testing.script` — replies chosen by prompt content
  (:meth:`FakeAPI.when`, JSON script files for ``claudetrace fakeapi``);
- :mod:`claudetrace.testing.harness` — the bundled CLI's path and the
  environment that makes it start fast, offline and isolated;
- :mod:`claudetrace.testing.serving` — wait for a server a test started (the
  session browser, Phoenix) to answer;
- :mod:`claudetrace.testing.transcripts` — Claude Code transcripts of chosen
  calls (models, times, tokens), for usage reports and ccusage comparisons.

The pytest plugin's ``claude_fake_api`` fixture is a running :class:`FakeAPI`.
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
from .script import Rule, load_script, rule

__all__ = [
    "FakeAPI",
    "RecordedRequest",
    "Reply",
    "Rule",
    "TextBlock",
    "ThinkingBlock",
    "ToolUseBlock",
    "error",
    "load_script",
    "reply",
    "rule",
    "text",
    "thinking",
    "tool_use",
]
