"""The HTTP side: ``GET /metrics`` served from a :class:`~.store.StoreMetrics`."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from ..errors import ClaudeTraceError
from .exposition import CONTENT_TYPE
from .store import StoreMetrics

#: Port of ``claudetrace metrics serve`` (the one dashboards/prometheus.yml scrapes).
DEFAULT_PORT: Final = 9464


class _Handler(BaseHTTPRequestHandler):
    metrics: StoreMetrics  # set on the subclass made by make_server

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            try:
                body = self.metrics.exposition().encode("utf-8")
            except ClaudeTraceError as exc:
                # Prometheus records a failed scrape (up == 0); the server goes on.
                self._reply(500, "text/plain; charset=utf-8", f"{exc}\n".encode())
                return
            self._reply(200, CONTENT_TYPE, body)
        elif path == "/":
            body = b'claudetrace store metrics: <a href="/metrics">/metrics</a>\n'
            self._reply(200, "text/html; charset=utf-8", body)
        else:
            self._reply(404, "text/plain; charset=utf-8", b"not found\n")

    def _reply(self, code: int, content_type: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        # Prometheus scrapes every few seconds: one access line each would drown
        # the terminal, so requests are not logged.
        return


def make_server(
    metrics: StoreMetrics, host: str = "127.0.0.1", port: int = DEFAULT_PORT
) -> ThreadingHTTPServer:
    """An HTTP server answering ``/metrics`` (port 0 picks a free port)."""
    handler = type("MetricsHandler", (_Handler,), {"metrics": metrics})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server
