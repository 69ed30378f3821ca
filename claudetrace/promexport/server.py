"""The HTTP side: ``prometheus_client``'s WSGI app over a :class:`~.store.StoreMetrics`.

The client negotiates the format (Prometheus text, or OpenMetrics when the scraper
asks for it) and compression; a store that cannot be read answers 500 with the
reason, so Prometheus records a failed scrape (``up == 0``) and the server goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from ..errors import ClaudeTraceError
from .exposition import registry
from .store import StoreMetrics

#: Port of ``claudetrace metrics serve`` (the one dashboards/prometheus.yml scrapes).
DEFAULT_PORT: Final = 9464

StartResponse = Callable[..., Any]


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        # Prometheus scrapes every few seconds: one access line each would drown
        # the terminal, so requests are not logged.
        return


def metrics_app(metrics: StoreMetrics) -> Callable[[dict[str, Any], StartResponse],
                                                   Iterable[bytes]]:
    """The WSGI app: the store's families on every path but ``/favicon.ico``."""
    app = make_wsgi_app(registry(metrics.collect))

    def serve(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        try:
            body: Iterable[bytes] = app(environ, start_response)
        except ClaudeTraceError as exc:
            start_response("500 Internal Server Error",
                           [("Content-Type", "text/plain; charset=utf-8")])
            return [f"{exc}\n".encode()]
        return body

    return serve


def make_server(
    metrics: StoreMetrics, host: str = "127.0.0.1", port: int = DEFAULT_PORT
) -> WSGIServer:
    """An HTTP server answering scrapes (port 0 picks a free port); ``serve_forever``
    runs it, ``shutdown`` and ``server_close`` stop it."""
    server = ThreadingWSGIServer((host, port), _QuietHandler)
    server.set_app(metrics_app(metrics))
    return server
