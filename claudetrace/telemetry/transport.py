"""Sending encoded OTLP requests: HTTP with the standard library, gRPC through the SDK.

:class:`HttpTransport` posts ``application/x-protobuf`` bodies with
``http.client`` on one kept-alive connection, so telemetry over OTLP/HTTP (the
default protocol) imports no OpenTelemetry package and no HTTP library.  It
follows the OTLP exporter specification: the signal's headers, compression
(``gzip``, ``deflate`` or ``none``), certificate and client key settings from
the ``OTEL_EXPORTER_OTLP_[SIGNAL_]*`` variables (the signal's own variable
wins), and retries with exponential back-off on connection errors and on 429,
502, 503 and 504 (honouring ``Retry-After``) until the export timeout.

:class:`GrpcTransport` hands the same bytes to the SDK's gRPC exporter (for its
channel, credentials, metadata, compression and retries), which is imported
only when gRPC is chosen.

``send`` returns ``None`` on success and a one-line reason otherwise; it never
raises for a network failure.
"""

from __future__ import annotations

import functools
import http.client
import random
import time
import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import urlsplit

from ..errors import TelemetryError
from .config import compression as compression_setting
from .config import exporter_setting, parse_key_values

if TYPE_CHECKING:
    import ssl

#: Status codes the OTLP specification calls retryable.
RETRYABLE: Final = frozenset({429, 502, 503, 504})
_FIRST_BACKOFF_S: Final = 1.0
#: Where the SDK's gRPC exporter logs its retries and failures.
_GRPC_LOGGER: Final = "opentelemetry.exporter.otlp"


class Transport(Protocol):
    endpoint: str

    def send(self, payload: bytes) -> str | None:
        """Send one encoded request; ``None`` when it was accepted, else why not."""
        ...

    def close(self) -> None: ...


def transport_for(
    signal: str, protocol: str, endpoint: str, environ: Mapping[str, str], timeout_s: float
) -> Transport:
    """The transport for one signal (``traces`` or ``metrics``) to ``endpoint``.

    Raises :class:`~claudetrace.errors.TelemetryError` for a setting it cannot
    use (an unknown compression, a URL that is not http or https, a certificate
    file that cannot be read).
    """
    if protocol == "grpc":
        return GrpcTransport(signal, endpoint, timeout_s)
    headers = parse_key_values(exporter_setting(environ, signal, "HEADERS"))
    return HttpTransport(
        endpoint, headers=headers, compression=compression_setting(environ, signal),
        timeout_s=timeout_s,
        certificate=exporter_setting(environ, signal, "CERTIFICATE") or None,
        client_certificate=exporter_setting(environ, signal, "CLIENT_CERTIFICATE") or None,
        client_key=exporter_setting(environ, signal, "CLIENT_KEY") or None,
    )


class HttpTransport:
    """OTLP/HTTP (binary protobuf) to one URL over one kept-alive connection."""

    def __init__(
        self,
        endpoint: str,
        *,
        headers: Mapping[str, str] | None = None,
        compression: str = "none",
        timeout_s: float = 10.0,
        certificate: str | None = None,
        client_certificate: str | None = None,
        client_key: str | None = None,
    ) -> None:
        url = urlsplit(endpoint)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise TelemetryError(f"OTLP/HTTP endpoint {endpoint!r} is not an http(s):// URL")
        self.endpoint = endpoint
        self._https = url.scheme == "https"
        self._host = url.hostname
        try:
            self._port = url.port
        except ValueError as exc:
            raise TelemetryError(f"OTLP/HTTP endpoint {endpoint!r}: {exc}") from exc
        self._path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        self._compression = compression
        self._timeout = timeout_s
        self._headers = {"User-Agent": "claudetrace", **(headers or {}),
                         "Content-Type": "application/x-protobuf"}
        if compression != "none":
            self._headers["Content-Encoding"] = compression
        self._context: ssl.SSLContext | None = None
        if self._https:
            self._context = _tls_context(certificate, client_certificate, client_key)
        self._conn: http.client.HTTPConnection | None = None

    def send(self, payload: bytes) -> str | None:
        body = _compress(payload, self._compression)
        deadline = time.monotonic() + self._timeout
        backoff = _FIRST_BACKOFF_S
        while True:
            wait: float | None = None
            try:
                status, reason, retry_after = self._post(body, deadline)
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                why = f"{type(exc).__name__}: {exc}"
            else:
                if 200 <= status < 300:
                    return None
                why = f"HTTP {status} {reason}".rstrip()
                if status not in RETRYABLE:
                    return why
                wait = retry_after
            if wait is None:
                wait = backoff * random.uniform(0.8, 1.2)
                backoff *= 2
            if time.monotonic() + wait >= deadline:
                return why
            time.sleep(wait)

    def _post(self, body: bytes, deadline: float) -> tuple[int, str, float | None]:
        """One POST; (status, reason, seconds the server asked us to wait)."""
        timeout = max(0.05, deadline - time.monotonic())
        if self._conn is None:
            if self._https:
                self._conn = http.client.HTTPSConnection(
                    self._host, self._port, timeout=timeout, context=self._context)
            else:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        else:
            self._conn.timeout = timeout
            if self._conn.sock is not None:
                self._conn.sock.settimeout(timeout)
        self._conn.request("POST", self._path, body, self._headers)
        response = self._conn.getresponse()
        response.read()
        if response.will_close:
            self.close()
        return response.status, response.reason, _retry_after(response.getheader("Retry-After"))

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _compress(payload: bytes, compression: str) -> bytes:
    if compression == "gzip":
        compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return compressor.compress(payload) + compressor.flush()
    if compression == "deflate":
        return zlib.compress(payload)
    return payload


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds (a date is ignored)."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _tls_context(
    certificate: str | None, client_certificate: str | None, client_key: str | None
) -> ssl.SSLContext:
    import ssl

    try:
        context = ssl.create_default_context(cafile=certificate)
        if client_certificate:
            context.load_cert_chain(client_certificate, client_key)
    except (OSError, ssl.SSLError) as exc:
        raise TelemetryError(f"OTLP TLS settings: {exc}") from exc
    return context


@functools.cache
def _grpc_log() -> Any:
    """The handler that keeps the SDK's last gRPC warning, made and installed once
    (logging is loaded for gRPC only: OTLP/HTTP, the common case, logs nothing)."""
    import logging

    class LastMessage(logging.Handler):
        """Keeps the SDK's last warning, to explain a failed gRPC export in one line."""

        def __init__(self) -> None:
            super().__init__(logging.WARNING)
            self.last: str | None = None

        def emit(self, record: logging.LogRecord) -> None:
            try:
                self.last = record.getMessage()
            except Exception:  # a malformed log record must not break export
                self.last = str(record.msg)

    handler = LastMessage()
    logger = logging.getLogger(_GRPC_LOGGER)
    logger.addHandler(handler)
    logger.propagate = False
    return handler


class GrpcTransport:
    """OTLP/gRPC through the SDK's exporter, which sends our bytes as they are.

    The exporter logs every retry; its messages are kept off the user's terminal
    and the last one explains a failure, which is reported once, by us.
    """

    def __init__(self, signal: str, endpoint: str, timeout_s: float) -> None:
        self._log = _grpc_log()
        self.endpoint = endpoint
        # Headers, compression and certificates: the SDK reads the same variables.
        self._exporter = _raw_grpc_exporter(signal)(
            endpoint, insecure=endpoint.startswith("http://") or None, timeout=timeout_s
        )

    def send(self, payload: bytes) -> str | None:
        result: Any = self._exporter._export(_Encoded(payload))  # retries until the timeout
        if getattr(result, "name", "") == "SUCCESS":
            return None
        return self._log.last or "export failed"

    def close(self) -> None:
        self._exporter.shutdown()


class _Encoded:
    """An encoded request, where the SDK's exporter expects its own objects."""

    __slots__ = ("payload",)

    def __init__(self, payload: bytes) -> None:
        self.payload = payload


def _raw_grpc_exporter(signal: str) -> type:
    """The SDK's gRPC exporter class for ``signal``, taking encoded requests."""
    if signal == "traces":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as Base,
        )
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest as Request,
        )
    else:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (  # type: ignore[assignment]
            OTLPMetricExporter as Base,
        )
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (  # type: ignore[assignment]
            ExportMetricsServiceRequest as Request,
        )

    class RawExporter(Base):
        def _translate_data(self, data: Any) -> Any:
            return Request.FromString(data.payload)

        def _count_data(self, data: Any) -> int:
            return 1

    return RawExporter
