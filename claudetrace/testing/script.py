"""Replies chosen by prompt: the fake API's script for recording cassettes without a key.

A :class:`Rule` answers the conversations whose prompt (the text of the last
user message that is not only tool results) matches a regular expression.  Its
replies are the steps of that answer: the first for the prompt itself, the
second once the CLI sends the first step's tool results back, and so on; the
last reply repeats if the conversation goes on.  The order of requests cannot
shift the answers, so a recording is the same on every run::

    api.when(r"weather in (\\w+)", tool_use("Bash", {"command": "curl wttr.in"}), text("Sunny."))

A script file (JSON) holds the same for ``python -m claudetrace.testing.fakeapi``
and ``claudetrace fakeapi``::

    {"rules": [{"prompt": "weather", "replies": [
                  {"tool_use": {"name": "Bash", "input": {"command": "curl wttr.in"}}},
                  {"text": "Sunny."}]},
               {"prompt": "fail", "replies": [{"error": {"status": 529,
                                                          "type": "overloaded_error"}}]}],
     "fallback": {"text": "OK."}}

A reply object is one of ``{"text": …}``, ``{"tool_use": {"name", "input",
"say"?, "id"?}}``, ``{"thinking": …, "then": …}``, ``{"error": {"status"?,
"type"?, "message"?}}``, optionally with ``stop_reason``, ``model`` and
``delay`` (seconds before each streamed event).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..errors import ClaudeTraceError
from ..pattern import BadPattern, linear_regex
from .fakeapi import Reply, error, text, thinking, tool_use

_OPTIONS: Final = ("stop_reason", "model", "delay")


class BadScript(ClaudeTraceError):
    """A fake API script that cannot be read."""

    exit_code = 2

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


@dataclass(frozen=True)
class Rule:
    """Answer prompts matching ``pattern`` (a regex, searched) with ``replies`` in turn."""

    pattern: Any  # RE2 (claudetrace.pattern)
    replies: tuple[Reply, ...]

    def reply(self, step: int) -> Reply:
        """The reply for the ``step``-th request of one prompt (the last one repeats)."""
        return self.replies[min(step, len(self.replies) - 1)]


def rule(pattern: str, *replies: Reply) -> Rule:
    """A :class:`Rule`; ``pattern`` is searched in the prompt text."""
    if not replies:
        raise BadScript(f"the rule for {pattern!r} has no replies")
    try:
        return Rule(linear_regex(pattern, what="prompt pattern"), tuple(replies))
    except BadPattern as exc:
        raise BadScript(str(exc)) from None


def reply_from_json(obj: Any) -> Reply:
    """A :class:`~claudetrace.testing.fakeapi.Reply` from its script-file form."""
    if not isinstance(obj, dict):
        raise BadScript(f"a reply is an object, not {obj!r}")
    options = {key: obj[key] for key in _OPTIONS if key in obj}
    unknown = set(obj) - {"text", "tool_use", "thinking", "then", "error", *_OPTIONS}
    if unknown:
        raise BadScript(f"unknown reply field(s) {sorted(unknown)} in {obj!r}")
    for key in ("text", "thinking", "then"):
        if key in obj and not isinstance(obj[key], str):
            raise BadScript(f"a reply's {key!r} is a string, not {obj[key]!r}")
    try:
        if "error" in obj:
            spec = obj["error"] if isinstance(obj["error"], dict) else {}
            return error(
                int(spec.get("status", 500)),
                str(spec.get("type", "api_error")),
                str(spec.get("message", "fake API error")),
            )
        if "tool_use" in obj:
            spec = obj["tool_use"]
            return tool_use(
                str(spec["name"]),
                dict(spec.get("input", {})),
                say=spec.get("say"),
                id=spec.get("id"),
                **options,
            )
        if "thinking" in obj:
            return thinking(str(obj["thinking"]), str(obj.get("then", "")), **options)
        if "text" in obj:
            return text(str(obj["text"]), **options)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BadScript(f"bad reply {obj!r}: {exc}") from None
    raise BadScript(f"a reply needs text, tool_use, thinking or error: {obj!r}")


@dataclass
class Script:
    """Rules and the fallback reply for prompts no rule matches."""

    rules: list[Rule]
    fallback: Reply | None = None


def load_script(path: str | Path) -> Script:
    """Read a JSON script file (see the module docstring)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadScript(
            f"cannot read script {path}: {exc.strerror or exc}", path=str(path)
        ) from None
    except ValueError as exc:
        raise BadScript(f"script {path} is not JSON: {exc}", path=str(path)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rules", []), list):
        raise BadScript(
            f'script {path}: expected {{"rules": [...], "fallback": ...}}', path=str(path)
        )
    rules: list[Rule] = []
    for entry in doc.get("rules", []):
        if not isinstance(entry, dict) or not isinstance(entry.get("prompt"), str):
            raise BadScript(
                f"script {path}: a rule needs a prompt pattern: {entry!r}", path=str(path)
            )
        replies: Sequence[Any] = entry.get("replies") or (
            [entry["reply"]] if "reply" in entry else []
        )
        rules.append(rule(entry["prompt"], *(reply_from_json(r) for r in replies)))
    fallback = doc.get("fallback")
    return Script(rules, reply_from_json(fallback) if fallback is not None else None)


def prompt_and_step(body: Any) -> tuple[str, int]:
    """The prompt of a Messages request and how many answers it has had since.

    The prompt is the text of the last user message that carries text and no
    tool results (the CLI adds reminders as text beside tool results); the step
    is the number of assistant messages after it.
    """
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return "", 0
    step = 0
    for message in reversed(messages):
        if not isinstance(message, dict):
            continue
        if message.get("role") == "assistant":
            step += 1
            continue
        if message.get("role") != "user":
            continue  # the CLI sends its environment as a trailing system message
        content = message.get("content")
        if isinstance(content, str):
            return content, step
        if isinstance(content, list) and not any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        ):
            texts = [
                b["text"]
                for b in content
                if isinstance(b, dict)
                and b.get("type") == "text"
                and isinstance(b.get("text"), str)
            ]
            if texts:
                return "\n".join(texts), step
    return "", step


__all__ = [
    "BadScript",
    "Rule",
    "Script",
    "load_script",
    "prompt_and_step",
    "reply_from_json",
    "rule",
]
