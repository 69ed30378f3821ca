"""A claude-trace stand-in for tests: an HTTP recorder between the CLI and the fake API.

claude-trace patches the CLI's HTTP client and appends one object per API call
to a JSONL log (``apps/claude-trace/src/interceptor.ts`` in badlogic/lemmy):
``{"request": {"timestamp", "method", "url", "headers", "body"}, "response":
{"timestamp", "status_code", "headers", "body" | "body_raw"}, "logged_at"}``,
timestamps in seconds, the request body parsed, a JSON response parsed into
``body`` and a server-sent-event stream kept as text in ``body_raw``, secret
headers shortened.  The bundled CLI is a compiled binary that claude-trace's
Node.js preload cannot patch, so this recorder writes the same log from the
traffic it forwards::

    with ClaudeTraceRecorder(api.base_url, log_path) as recorder:
        run_scenario(name, cli, api, env={"ANTHROPIC_BASE_URL": recorder.base_url})
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_SECRET_HEADERS = ("authorization", "x-api-key", "cookie", "set-cookie")
_HOP_BY_HOP = ("connection", "transfer-encoding", "content-length", "keep-alive")


def _shorten(headers: dict[str, str]) -> dict[str, str]:
    out = {}
    for key, value in headers.items():
        if any(secret in key.lower() for secret in _SECRET_HEADERS) and len(value) > 14:
            value = f"{value[:10]}...{value[-4:]}"
        out[key.lower()] = value
    return out


class ClaudeTraceRecorder:
    """Forwards to ``upstream`` and logs every call as claude-trace does."""

    def __init__(self, upstream: str, log: Path) -> None:
        self.upstream = urllib.parse.urlsplit(upstream)
        self.log = log
        self._lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                recorder.forward(self)

            def do_GET(self) -> None:
                recorder.forward(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ClaudeTraceRecorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def forward(self, handler: BaseHTTPRequestHandler) -> None:
        sent = time.time()
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP_BY_HOP}
        upstream = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port)
        try:
            upstream.request(handler.command, handler.path, body=raw, headers=headers)
            reply = upstream.getresponse()
            answered = time.time()
            reply_headers = {k: v for k, v in reply.getheaders()}
            data = reply.read()
        finally:
            upstream.close()
        handler.send_response(reply.status)
        for key, value in reply_headers.items():
            if key.lower() not in _HOP_BY_HOP:
                handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(data)
        handler.close_connection = True
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        response: dict[str, Any] = {
            "timestamp": answered,
            "status_code": reply.status,
            "headers": _shorten(reply_headers),
        }
        text = data.decode("utf-8", "replace")
        if "application/json" in reply_headers.get("Content-Type", ""):
            response["body"] = json.loads(text)
        else:
            response["body_raw"] = text
        pair = {
            "request": {
                "timestamp": sent,
                "method": handler.command,
                "url": f"{self.base_url}{handler.path}",
                "headers": _shorten(dict(headers)),
                "body": body,
            },
            "response": response,
            "logged_at": dt.datetime.now(dt.timezone.utc).isoformat().replace("+00:00", "Z"),
        }
        with self._lock, self.log.open("a", encoding="utf-8") as out:
            out.write(json.dumps(pair, separators=(",", ":"), ensure_ascii=False) + "\n")
