"""OpenInference attributes beside the GenAI ones, so that Phoenix (and other
OpenInference readers) show every span with its kind, tokens and content.

Pure: a function of a finished :class:`~.records.SpanRecord`'s GenAI attributes,
applied by :mod:`.export` as each span leaves, so the span builder knows one
convention only.  Names follow the OpenInference semantic conventions
(``openinference-semantic-conventions`` for Python, ``SpanAttributes``):

========================  ==========  =============================================
span                      kind        beside it
========================  ==========  =============================================
invoke_agent (root, sub)  AGENT       ``session.id``
turn N                    CHAIN       ``input.value`` / ``output.value`` (content on)
chat {model}              LLM         ``llm.model_name``, ``llm.provider``,
                                      ``llm.token_count.*``, output messages
execute_tool {name}       TOOL        ``tool.name``, arguments and result as
                                      ``input.value`` / ``output.value``
can_use_tool, hook, MCP,  CHAIN       round trips of the control protocol, not
control                               tool executions (a tool call is one TOOL span)
========================  ==========  =============================================
"""

from __future__ import annotations

import json
from typing import Final

from . import conventions as c
from .records import Attributes, SpanRecord

SPAN_KIND: Final = "openinference.span.kind"
SESSION_ID: Final = "session.id"
INPUT_VALUE: Final = "input.value"
INPUT_MIME_TYPE: Final = "input.mime_type"
OUTPUT_VALUE: Final = "output.value"
OUTPUT_MIME_TYPE: Final = "output.mime_type"
LLM_MODEL_NAME: Final = "llm.model_name"
LLM_PROVIDER: Final = "llm.provider"
LLM_SYSTEM: Final = "llm.system"
TOKEN_PROMPT: Final = "llm.token_count.prompt"
TOKEN_COMPLETION: Final = "llm.token_count.completion"
TOKEN_TOTAL: Final = "llm.token_count.total"
TOKEN_CACHE_READ: Final = "llm.token_count.prompt_details.cache_read"
TOKEN_CACHE_WRITE: Final = "llm.token_count.prompt_details.cache_write"
TOOL_NAME: Final = "tool.name"
OUTPUT_MESSAGE_ROLE: Final = "llm.output_messages.0.message.role"
OUTPUT_MESSAGE_CONTENT: Final = "llm.output_messages.0.message.content"

_JSON: Final = "application/json"
_TEXT: Final = "text/plain"


def _kind(record: SpanRecord) -> str:
    operation = record.attributes.get(c.GEN_AI_OPERATION_NAME)
    if operation == c.OP_INVOKE_AGENT:
        return "AGENT"
    if operation == c.OP_CHAT:
        return "LLM"
    if operation == c.OP_EXECUTE_TOOL and record.key.startswith("tool/"):
        return "TOOL"
    return "CHAIN"


def _text(messages: object) -> str | None:
    """The text parts of GenAI messages JSON, joined: what a person reads of them."""
    if not isinstance(messages, str):
        return None
    try:
        decoded = json.loads(messages)
    except ValueError:
        return None
    texts = [str(part.get("content")) for message in decoded if isinstance(message, dict)
             for part in message.get("parts", ()) if isinstance(part, dict)
             and part.get("type") == "text"]
    return "\n".join(texts) if texts else None


def attributes(record: SpanRecord) -> Attributes:
    """The OpenInference attributes of one finished span."""
    a = record.attributes
    kind = _kind(record)
    out: Attributes = {SPAN_KIND: kind}
    session = a.get(c.GEN_AI_CONVERSATION_ID)
    if isinstance(session, str):
        out[SESSION_ID] = session
    inputs, outputs = a.get(c.GEN_AI_INPUT_MESSAGES), a.get(c.GEN_AI_OUTPUT_MESSAGES)
    if isinstance(inputs, str):
        out[INPUT_VALUE], out[INPUT_MIME_TYPE] = inputs, _JSON
    if isinstance(outputs, str):
        out[OUTPUT_VALUE], out[OUTPUT_MIME_TYPE] = outputs, _JSON
    if kind == "LLM":
        for key, name in ((c.GEN_AI_RESPONSE_MODEL, LLM_MODEL_NAME),
                          (c.GEN_AI_REQUEST_MODEL, LLM_MODEL_NAME)):
            if isinstance(a.get(key), str) and LLM_MODEL_NAME not in out:
                out[name] = a[key]
        out[LLM_PROVIDER] = out[LLM_SYSTEM] = c.PROVIDER
        prompt, completion = a.get(c.GEN_AI_USAGE_INPUT_TOKENS), a.get(c.GEN_AI_USAGE_OUTPUT_TOKENS)
        if isinstance(prompt, int):
            out[TOKEN_PROMPT] = prompt
        if isinstance(completion, int):
            out[TOKEN_COMPLETION] = completion
        if isinstance(prompt, int) or isinstance(completion, int):
            out[TOKEN_TOTAL] = (prompt if isinstance(prompt, int) else 0) + \
                (completion if isinstance(completion, int) else 0)
        for key, name in ((c.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, TOKEN_CACHE_READ),
                          (c.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, TOKEN_CACHE_WRITE)):
            if isinstance(a.get(key), int):
                out[name] = a[key]
        text = _text(outputs)
        if text is not None:
            out[OUTPUT_MESSAGE_ROLE], out[OUTPUT_MESSAGE_CONTENT] = "assistant", text
    elif kind == "TOOL":
        out[TOOL_NAME] = a.get(c.GEN_AI_TOOL_NAME, "unknown")
        arguments, result = a.get(c.GEN_AI_TOOL_CALL_ARGUMENTS), a.get(c.GEN_AI_TOOL_CALL_RESULT)
        if isinstance(arguments, str):
            out[INPUT_VALUE], out[INPUT_MIME_TYPE] = arguments, _JSON
        if isinstance(result, str):
            out[OUTPUT_VALUE], out[OUTPUT_MIME_TYPE] = result, _TEXT
    return out
