"""What a protocol line says, read one way: pure accessors over parsed events.

:mod:`claudetrace.model.events` parses each line once and extracts the fields every
consumer indexes (type, subtype, request id, tool references).  The deeper facts
that several consumers need — what the host decided on a ``can_use_tool``
request, what a hook answered, which hook event a ``hook_callback`` is about,
which tool results failed — are read here, so that the span builder, the
Prometheus figures and the UI cannot disagree about them.

Every accessor takes an :class:`~claudetrace.model.events.Event` (or a piece of its
parsed JSON) and tolerates missing or mistyped fields, since the CLI's output
evolves: a field of the wrong type reads as absent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from .content import THINKING_TYPES, message_blocks
from .events import TOOL_USE_TYPES, Event, is_tool_result_type, said_parts

#: The answers to ``can_use_tool`` the SDKs define.
PERMISSION_DECISIONS = frozenset({"allow", "deny"})
#: How the user line the CLI writes when the user stops a turn begins: ``[Request
#: interrupted by user]``, ``[Request interrupted by user for tool use]``.
INTERRUPTED_BY_USER = "[Request interrupted by user"
_INTERRUPTED_BYTES = INTERRUPTED_BY_USER.encode()


def says_interrupted(event: Event) -> bool:
    """Whether a ``user`` line is the CLI's note that the user interrupted the turn
    (a text block, not a tool's output that happens to quote it)."""
    if _INTERRUPTED_BYTES not in event.data:
        return False
    return any(block.kind == "text" and block.text.lstrip().startswith(INTERRUPTED_BY_USER)
               for block in message_blocks(event))


def opt_str(value: Any) -> str | None:
    """``value`` if it is a string, else ``None``."""
    return value if isinstance(value, str) else None


def json_number(value: Any) -> float | None:
    """``value`` as a float if it is a JSON number (``true`` is not one), else ``None``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# --------------------------------------------------------------------------- control


def control_request(event: Event) -> dict[str, Any]:
    """The ``request`` object of a ``control_request`` line (empty when missing)."""
    return _object((event.message or {}).get("request"))


def control_response(event: Event) -> dict[str, Any]:
    """The ``response`` object of a ``control_response`` line (empty when missing).

    It carries ``subtype`` (``success``/``error``), ``request_id`` and either the
    answer itself under ``response`` or an ``error``.
    """
    return _object((event.message or {}).get("response"))


def hook_input(request: Mapping[str, Any]) -> dict[str, Any]:
    """The ``input`` of a ``can_use_tool`` / ``hook_callback`` request (empty when missing)."""
    return _object(request.get("input"))


def hook_event_name(request: Mapping[str, Any]) -> str | None:
    """The hook event (``PreToolUse`` …) a ``hook_callback`` request is about."""
    return opt_str(hook_input(request).get("hook_event_name"))


def request_tool_name(request: Mapping[str, Any]) -> str | None:
    """The tool a ``can_use_tool`` or ``hook_callback`` request is about.

    ``can_use_tool`` names it at the top level; a hook names it in its input.
    """
    return opt_str(request.get("tool_name")) or opt_str(hook_input(request).get("tool_name"))


def permission_behavior(answer: Any) -> str | None:
    """The ``behavior`` of the host's answer to ``can_use_tool`` (``allow``, ``deny`` …).

    ``answer`` is the answer object (``response.response`` of the control response).
    """
    return opt_str(answer.get("behavior")) if isinstance(answer, dict) else None


def permission_decision(event: Event) -> str | None:
    """``allow`` or ``deny`` from a ``control_response`` answering ``can_use_tool``."""
    behavior = permission_behavior(control_response(event).get("response"))
    return behavior if behavior in PERMISSION_DECISIONS else None


def hook_permission_decision(answer: Any) -> str | None:
    """The ``hookSpecificOutput.permissionDecision`` of a hook's answer, if it made one."""
    specific = answer.get("hookSpecificOutput") if isinstance(answer, dict) else None
    return opt_str(specific.get("permissionDecision")) if isinstance(specific, dict) else None


# --------------------------------------------------------------------------- messages


def message_id(event: Event) -> str | None:
    """The API message id of an ``assistant`` line (its ``message.id``)."""
    message = (event.message or {}).get("message")
    return opt_str(message.get("id")) if isinstance(message, dict) else None


#: The model Claude Code names on the assistant messages it writes itself rather
#: than the API's: the API error it gave up on (``API Error: 529 Overloaded…``,
#: marked ``error`` in stream-json, ``isApiErrorMessage`` in a transcript), a
#: request it cut short; zero usage, no API message.  Not a model call (ccusage
#: skips them too).
SYNTHETIC_MODEL: Final = "<synthetic>"


def is_synthetic(message: Any) -> bool:
    """Whether an assistant line's ``message`` is one Claude Code wrote itself
    (:data:`SYNTHETIC_MODEL`), not a model's answer."""
    return isinstance(message, dict) and message.get("model") == SYNTHETIC_MODEL


def api_error_status(event: Event) -> str:
    """``529 overloaded_error``: the HTTP status and error type an API-error line
    names (stream-json's ``api_error_status``, a transcript's ``apiErrorStatus``),
    or ``""``."""
    obj = event.message or {}
    status = obj.get("api_error_status", obj.get("apiErrorStatus"))
    kind = obj.get("api_error_type", obj.get("apiErrorType"))
    return " ".join(str(v) for v in (status, kind) if isinstance(v, (int, str)) and v != "")


def message_error(event: Event) -> str | None:
    """The error an ``assistant`` line reports: the line's ``error`` or its
    message's (the CLI's stream-json), or ``api_error`` for a line a transcript
    marks ``isApiErrorMessage`` without saying more."""
    obj = event.message or {}
    message = _object(obj.get("message"))
    error = obj.get("error") or message.get("error")
    if error:
        return error_text(error) or "assistant error"
    return "api_error" if obj.get("isApiErrorMessage") is True else None


def result_text(event: Event) -> str:
    """What a ``result`` line says: its ``result`` text, else its ``errors`` one a line."""
    msg = event.message or {}
    text = opt_str(msg.get("result")) or ""
    errors = msg.get("errors")
    if not text and isinstance(errors, list):
        text = "\n".join(str(e) for e in errors)
    return text


def total_cost_usd(event: Event) -> float | None:
    """The ``total_cost_usd`` of a ``result`` line.

    It is the CLI process's running total over the session, not the turn's cost
    (verified with CLI 2.1.330): a turn's cost is the difference to the previous one.
    """
    return json_number((event.message or {}).get("total_cost_usd"))


def tool_result_failed(block: Mapping[str, Any]) -> bool:
    """Whether a ``tool_result`` block reports a failed tool run (``is_error``)."""
    return bool(block.get("is_error"))


def failed_tool_ids(event: Event) -> set[str]:
    """Ids of the tool uses whose ``tool_result`` in this ``user`` line failed."""
    return {b.id for b in message_blocks(event) if b.kind == "tool_result" and b.is_error and b.id}


def answer_verdict(subtype: str, answer: Any) -> str:
    """What the host's answer to a ``can_use_tool`` or ``hook_callback`` decided, in a word.

    ``can_use_tool``: its ``behavior`` (``allow``/``deny``), else ``answered``.  A
    hook: its ``permissionDecision``, else its ``decision``, else ``stop`` when it
    stops the CLI, else ``continue``.  ``error`` when the answer is not an object.
    """
    if not isinstance(answer, dict):
        return "error"
    if subtype == "can_use_tool":
        return permission_behavior(answer) or "answered"
    decision = hook_permission_decision(answer)
    if decision is not None:
        return decision
    if isinstance(answer.get("decision"), str):
        return str(answer["decision"])
    if answer.get("continue") is False:
        return "stop"
    return "continue"


def error_text(error: Any) -> str | None:
    """A short text for an error the CLI reports (a string, or an object's type,
    message or code)."""
    if isinstance(error, str):
        return error
    if isinstance(error, dict):
        for key in ("type", "message", "code"):
            if isinstance(error.get(key), (str, int)):
                return str(error[key])
    return None


def project_slug(path: str) -> str:
    """The CLI's folder name for a project directory (non-alphanumerics as ``-``)."""
    return re.sub(r"[^A-Za-z0-9]", "-", path)


def _values(value: Any, out: list[str]) -> None:
    """The scalar values of a JSON value (not its keys), as text."""
    if isinstance(value, dict):
        for item in value.values():
            _values(item, out)
    elif isinstance(value, list):
        for item in value:
            _values(item, out)
    elif isinstance(value, str):
        out.append(value)
    elif value is not None and not isinstance(value, bool):
        out.append(str(value))


def _content_text(content: Any, out: list[str]) -> None:
    """The readable text of a ``content`` value into ``out``, as its
    :func:`~.content.blocks` read (text and thinking, a tool use's name and
    argument values, a tool result's content, nothing of other blocks), walked in
    the parsed JSON: a line's words are made without a :class:`~.content.Block`
    of each block, nor the text of a tool result's content that blocks make and
    the words read again part by part."""
    if content is None:
        return
    for block in content if isinstance(content, list) else (content,):
        if isinstance(block, str):
            if block:
                out.append(block)
            continue
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
        elif kind in THINKING_TYPES:
            text = block.get("thinking")
        elif kind in TOOL_USE_TYPES:
            name = block.get("name")
            if isinstance(name, str) and name:
                out.append(name)
            _values(block.get("input"), out)
            continue
        elif is_tool_result_type(kind):
            _content_text(block.get("content"), out)
            continue
        else:
            continue
        if isinstance(text, str) and text:
            out.append(text)


def searchable_text(event: Event) -> str:
    """What a person reads in a line: message text, tool names and arguments, results.

    Ids, JSON keys and protocol fields are left out, so a search for "fake" does
    not find every ``msg_fake_…`` id.  Empty for lines that are not messages.
    """
    return _said_text(event.fields.type, event.message)


def _said_text(kind: str | None, line: dict[str, Any] | None) -> str:
    """:func:`searchable_text` of a line of type ``kind`` whose JSON object is ``line``."""
    out: list[str] = []
    if kind in ("user", "assistant"):
        message = (line or {}).get("message")
        if isinstance(message, dict):
            _content_text(message.get("content"), out)
    elif kind == "result":
        result = (line or {}).get("result")
        if isinstance(result, str):
            out.append(result)
    return "\n".join(out)


def line_text(data: bytes) -> str:
    """:func:`searchable_text` of a stored line (its bytes), parsing only the parts
    it reads (:func:`~claudetrace.model.events.said_parts`): the search index's
    writer, the search and the session list's first prompts read lines this way."""
    # The parts alone, not an event: its fields (the type is all that is read of
    # them) were a third of the search box's time on a phrase.
    said = said_parts(data)
    if not isinstance(said, dict):
        return ""
    kind = said.get("type")
    return _said_text(kind if isinstance(kind, str) else None, said)
