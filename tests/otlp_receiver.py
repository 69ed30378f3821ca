"""A minimal OTLP receiver for tests: real HTTP and real gRPC on 127.0.0.1.

Decodes ``ExportTraceServiceRequest`` / ``ExportMetricsServiceRequest`` with
``opentelemetry-proto`` and keeps them, so a test can check what arrived::

    with OtlpReceiver("http") as receiver:
        ...export to receiver.endpoint...
        receiver.wait_for(lambda: len(receiver.spans()) >= 3)
        assert wire_spans(receiver) == ...
"""

from __future__ import annotations

import gzip
import ssl
import threading
import time
import zlib
from collections.abc import Callable
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def any_value(value: AnyValue) -> Any:
    """A Python value from an OTLP ``AnyValue``."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(any_value(v) for v in value.array_value.values)
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def attrs(key_values: Any) -> dict[str, Any]:
    """OTLP attributes as a dict."""
    return {kv.key: any_value(kv.value) for kv in key_values}


def wire_spans(receiver: OtlpReceiver) -> dict[str, dict[str, Any]]:
    """Received spans by hex span id, as comparable dicts (ids, names, times, attributes)."""
    out = {}
    for span in receiver.spans():
        out[span.span_id.hex()] = {
            "name": span.name,
            "trace": span.trace_id.hex(),
            "parent": span.parent_span_id.hex(),
            "start": span.start_time_unix_nano,
            "end": span.end_time_unix_nano,
            "attributes": attrs(span.attributes),
            "status": span.status.code,
            "events": [(e.name, e.time_unix_nano, attrs(e.attributes)) for e in span.events],
        }
    return out


def wire_metrics(receiver: OtlpReceiver) -> dict[tuple[str, frozenset[Any]], Any]:
    """The latest value of every received metric series: (name, attributes) -> value.

    Sums give their value, histograms ``(count, sum, bucket counts)``; with
    cumulative temporality the latest export holds the totals, whenever and
    however often the exporter sent them.
    """
    out: dict[tuple[str, frozenset[Any]], Any] = {}
    for metric in receiver.metrics():
        kind = metric.WhichOneof("data")
        for point in getattr(metric, kind).data_points:
            key = (metric.name, frozenset(attrs(point.attributes).items()))
            if kind == "histogram":
                out[key] = (point.count, point.sum, tuple(point.bucket_counts))
            else:
                out[key] = getattr(point, point.WhichOneof("value"))
    return out


class OtlpReceiver:
    """Collects OTLP traces and metrics sent over ``protocol`` (grpc or http)."""

    def __init__(self, protocol: str = "http", *, refuse: dict[str, int] | None = None) -> None:
        self.protocol = protocol
        self.trace_requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.metric_requests: list[metrics_service_pb2.ExportMetricsServiceRequest] = []
        self.paths: list[str] = []
        #: Headers of every HTTP request, in arrival order.
        self.headers: list[dict[str, str]] = []
        #: HTTP statuses to answer the next requests with (then 200 again), and a
        #: ``Retry-After`` to send with them.
        self.fail_with: list[int] = []
        self.retry_after: str | None = None
        #: HTTP status for every request to a path (``{"/v1/metrics": 405}``: a
        #: traces-only backend); over gRPC, a signal in it is not served at all.
        self.refuse: dict[str, int] = dict(refuse or {})
        #: ``(certfile, keyfile)``: serve HTTPS instead of HTTP.
        self.tls: tuple[str, str] | None = None
        self._cond = threading.Condition()
        self._http: ThreadingHTTPServer | None = None
        self._grpc: Any = None
        self.port = 0

    # -- collected data ------------------------------------------------------------

    def _add(self, kind: str, request: Any) -> None:
        with self._cond:
            (self.trace_requests if kind == "traces" else self.metric_requests).append(request)
            self._cond.notify_all()

    def spans(self) -> list[Any]:
        """Every span received so far (``opentelemetry.proto.trace.v1.Span``)."""
        with self._cond:
            return [
                span
                for request in self.trace_requests
                for rs in request.resource_spans
                for ss in rs.scope_spans
                for span in ss.spans
            ]

    def metrics(self) -> list[Any]:
        """Every metric received so far (``opentelemetry.proto.metrics.v1.Metric``)."""
        with self._cond:
            return [
                metric
                for request in self.metric_requests
                for rm in request.resource_metrics
                for sm in rm.scope_metrics
                for metric in sm.metrics
            ]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 15.0) -> bool:
        """Wait until ``predicate()`` holds; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    # -- servers -----------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def __enter__(self) -> OtlpReceiver:
        if self.protocol == "grpc":
            self._start_grpc()
        else:
            self._start_http()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._grpc is not None:
            self._grpc.stop(grace=None).wait()

    def _start_http(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.paths.append(self.path)
                receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                refused = receiver.refuse.get(self.path)
                if receiver.fail_with or refused:
                    self.send_response(refused or receiver.fail_with.pop(0))
                    if receiver.retry_after is not None:
                        self.send_header("Retry-After", receiver.retry_after)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                encoding = self.headers.get("Content-Encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                if self.path == "/v1/traces":
                    request: Any = trace_service_pb2.ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    receiver._add("traces", request)
                    reply: Any = trace_service_pb2.ExportTraceServiceResponse()
                elif self.path == "/v1/metrics":
                    request = metrics_service_pb2.ExportMetricsServiceRequest()
                    request.ParseFromString(body)
                    receiver._add("metrics", request)
                    reply = metrics_service_pb2.ExportMetricsServiceResponse()
                else:
                    self.send_error(404)
                    return
                data = reply.SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if self.tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self.tls)
            self._http.socket = context.wrap_socket(self._http.socket, server_side=True)
        self.port = self._http.server_address[1]
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    def _start_grpc(self) -> None:
        import grpc

        receiver = self

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                receiver._add("traces", request)
                return trace_service_pb2.ExportTraceServiceResponse()

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                receiver._add("metrics", request)
                return metrics_service_pb2.ExportMetricsServiceResponse()

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        if "/v1/traces" not in self.refuse:
            trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
        if "/v1/metrics" not in self.refuse:
            metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
        self.port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._grpc = server
