"""Attribute, span and metric names claudetrace emits, in one place.

We follow the OpenTelemetry semantic conventions **v1.44.0** (the schema that the
``opentelemetry-semantic-conventions`` 0.66b package ships): the GenAI
conventions (``gen_ai.*``, development status) for agents, chat calls and tools,
and the MCP conventions (``mcp.*``, ``jsonrpc.*``) for ``mcp_message`` round
trips.  Names are plain strings here, not imports from that package, so the pure
span builder never imports OpenTelemetry (the proxy must not pay for it when
telemetry is off).  Our own attributes live under ``claudetrace.*``.
"""

from __future__ import annotations

from typing import Final

#: The semantic conventions version the names below follow.
SEMCONV_VERSION: Final = "1.44.0"
SCHEMA_URL: Final = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
#: Instrumentation scope name for spans and metrics.
SCOPE_NAME: Final = "claudetrace"

PROVIDER: Final = "anthropic"
AGENT_NAME: Final = "claude-code"

# --- GenAI -------------------------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
ERROR_TYPE: Final = "error.type"

OP_CHAT: Final = "chat"
OP_INVOKE_AGENT: Final = "invoke_agent"
OP_EXECUTE_TOOL: Final = "execute_tool"

# --- MCP / JSON-RPC ------------------------------------------------------------
MCP_METHOD_NAME: Final = "mcp.method.name"
MCP_PROTOCOL_VERSION: Final = "mcp.protocol.version"
JSONRPC_REQUEST_ID: Final = "jsonrpc.request.id"
JSONRPC_PROTOCOL_VERSION: Final = "jsonrpc.protocol.version"
RPC_RESPONSE_STATUS_CODE: Final = "rpc.response.status_code"

# --- claudetrace ---------------------------------------------------------------
RECORDING_ID: Final = "claudetrace.recording.id"
RECORDING_NAME: Final = "claudetrace.recording.name"
CLAUDE_CODE_VERSION: Final = "claudetrace.claude_code.version"
PERMISSION_MODE: Final = "claudetrace.permission_mode"
EXIT_CODE: Final = "claudetrace.exit_code"
SIGNAL: Final = "claudetrace.signal"
SESSION_OUTCOME: Final = "claudetrace.session.outcome"
SESSION_OUTCOME_REASON: Final = "claudetrace.session.outcome_reason"
INTERRUPTED: Final = "claudetrace.interrupted"
#: Where a model call's usage comes from (stream, result, unobserved: see claudetrace.model).
USAGE_SOURCE: Final = "claudetrace.usage.source"
TURN_NUMBER: Final = "claudetrace.turn.number"
TURN_IMPLICIT: Final = "claudetrace.turn.implicit"
COST_USD: Final = "claudetrace.cost_usd"
#: Where the root span's cost comes from: ``cli``, ``estimate`` (the price table) or
#: ``unknown`` (no cost attribute then); also on the session cost metric.
COST_SOURCE: Final = "claudetrace.cost.source"
RESULT_SUBTYPE: Final = "claudetrace.result.subtype"
IS_ERROR: Final = "claudetrace.is_error"
NUM_TURNS: Final = "claudetrace.num_turns"
PERMISSION_DECISION: Final = "claudetrace.permission.decision"
HOOK_EVENT: Final = "claudetrace.hook.event"
HOOK_CALLBACK_ID: Final = "claudetrace.hook.callback_id"
HOOK_PERMISSION_DECISION: Final = "claudetrace.hook.permission_decision"
CONTROL_SUBTYPE: Final = "claudetrace.control.subtype"
CONTROL_INITIATOR: Final = "claudetrace.control.initiator"
CONTROL_OUTCOME: Final = "claudetrace.control.outcome"
CONTROL_REQUEST_ID: Final = "claudetrace.control.request_id"
MCP_SERVER: Final = "claudetrace.mcp.server"
TOOL_OUTCOME: Final = "claudetrace.tool.outcome"
EVENT_SEQ: Final = "claudetrace.event.seq"
EVENT_DIRECTION: Final = "claudetrace.event.direction"
EVENT_TYPE: Final = "claudetrace.event.type"
EVENT_SUBTYPE: Final = "claudetrace.event.subtype"
EVENT_LINE: Final = "claudetrace.event.line"
EVENT_SIZE: Final = "claudetrace.event.size"
#: ``system/thinking_tokens`` progress lines, coalesced onto the model call (or
#: turn) span instead of one span event each: how many, and the last estimate.
THINKING_UPDATES: Final = "claudetrace.thinking.updates"
THINKING_ESTIMATED_TOKENS: Final = "claudetrace.thinking.estimated_tokens"

# --- metrics (see the metric names contract; do not rename) ---------------------
METRIC_TOKEN_USAGE: Final = "gen_ai.client.token.usage"
METRIC_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
METRIC_SESSION_COST: Final = "claudetrace.session.cost"
METRIC_SESSION_COUNT: Final = "claudetrace.session.count"
METRIC_TOOL_CALLS: Final = "claudetrace.tool.calls"
METRIC_TOOL_DURATION: Final = "claudetrace.tool.duration"
METRIC_CONTROL_DURATION: Final = "claudetrace.control.duration"
METRIC_PERMISSION_DECISIONS: Final = "claudetrace.permission.decisions"
METRIC_PERMISSION_WAIT: Final = "claudetrace.permission.wait"

#: Bucket boundaries the GenAI conventions recommend for the two client histograms.
TOKEN_BUCKETS: Final = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)
DURATION_BUCKETS: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)
