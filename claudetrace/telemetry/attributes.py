"""Span attributes read out of protocol lines: errors, MCP requests, exit reasons.

Pure helpers for the span builder; each takes parsed JSON (never raw bytes) and
tolerates missing or mistyped fields, since the CLI's output evolves.  Facts that
other consumers need too (permission decisions, failed tool results) are read by
:mod:`claudetrace.model.protocol` instead.
"""

from __future__ import annotations

from typing import Any

from ..model.protocol import error_text as error_text
from ..model.protocol import opt_str
from ..recording import RecordingInfo
from . import conventions as c
from .records import Attributes


def mcp_request(request: dict[str, Any]) -> tuple[str, Attributes]:
    """Span name and attributes of an ``mcp_message`` request (MCP conventions)."""
    server = opt_str(request.get("server_name")) or "unknown"
    message = request.get("message")
    message = message if isinstance(message, dict) else {}
    method = opt_str(message.get("method")) or "unknown"
    attrs: Attributes = {c.MCP_METHOD_NAME: method, c.MCP_SERVER: server}
    if "id" in message and message["id"] is not None:
        attrs[c.JSONRPC_REQUEST_ID] = str(message["id"])
    if isinstance(message.get("jsonrpc"), str) and message["jsonrpc"] != "1.0":
        attrs[c.JSONRPC_PROTOCOL_VERSION] = message["jsonrpc"]
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    if isinstance(params.get("protocolVersion"), str):
        attrs[c.MCP_PROTOCOL_VERSION] = params["protocolVersion"]
    if method == "tools/call":
        # Not gen_ai.operation.name execute_tool: the tool call is its execute_tool
        # span already, and this round trip is one step of it, not a second one.
        if isinstance(params.get("name"), str):
            attrs[c.GEN_AI_TOOL_NAME] = params["name"]
        meta = params.get("_meta")
        if isinstance(meta, dict) and isinstance(meta.get("claudecode/toolUseId"), str):
            attrs[c.GEN_AI_TOOL_CALL_ID] = meta["claudecode/toolUseId"]
    return f"{method} {server}", attrs


def mcp_error(mcp_response: Any, attrs: Attributes) -> str | None:
    """The error of a JSON-RPC response, recording its code; ``None`` on success."""
    if not isinstance(mcp_response, dict):
        return None
    error = mcp_response.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        if code is not None:
            attrs[c.RPC_RESPONSE_STATUS_CODE] = str(code)
            attrs[c.ERROR_TYPE] = str(code)
        return opt_str(error.get("message")) or "JSON-RPC error"
    result = mcp_response.get("result")
    if isinstance(result, dict) and result.get("isError") is True:
        attrs[c.ERROR_TYPE] = "tool_error"
        return "tool_error"
    return None


def exit_reason(info: RecordingInfo) -> str:
    if info.ended_ns is None:
        return "recording ended without the process exit (proxy died?)"
    if info.signal:
        return f"process killed by signal {info.signal}"
    if info.exit_code is not None:
        return f"process exited (exit code {info.exit_code})"
    return "process exited"
