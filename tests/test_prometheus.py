"""Every PromQL expression of the Prometheus-backed dashboards, evaluated by a real
Prometheus (Debian's ``prometheus``; ``.ci/run`` installs it) over real scrapes.

- The store dashboard: Prometheus scrapes ``claudetrace metrics serve`` while
  recordings are imported into the store.
- The overview dashboard (the OTLP path): the SDK pipelines export the recordings'
  metrics over OTLP/HTTP to a stand-in for the OpenTelemetry Collector that applies
  what the pipeline in ``dashboards/otel-collector.yaml`` documents — the
  ``deltatocumulative`` processor, then the ``prometheus`` exporter's name
  translation (``tests/test_dashboards.py``: :func:`prometheus_name`) with
  ``service.name`` / ``service.instance.id`` as ``job`` / ``instance`` — and
  Prometheus scrapes it.  Two rounds of short sessions, as a user's sessions come:
  the second adds to the long-lived series the first made.

Each expression must return data, and a value that is not NaN, but for the few
listed in :data:`NO_DATA` with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler

import pytest
from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from claudetrace.cassette import read_cassette
from claudetrace.indexer import open_settled_store
from claudetrace.promexport import StoreMetrics, make_server
from claudetrace.store import Store, info_from_header
from claudetrace.telemetry.config import resolve_settings
from claudetrace.telemetry.export import Telemetry
from claudetrace.telemetry.metrics import INSTRUMENTS
from claudetrace.telemetry.spans import build_spans
from tests.otlp_receiver import OtlpReceiver, attrs
from tests.test_dashboards import (
    DASHBOARDS,
    TELEMETRY_CASSETTES,
    iter_targets,
    load_dashboard,
    prometheus_label,
    prometheus_name,
)

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None,
    reason="needs Prometheus (Debian's prometheus; .ci/run installs it)")

DASHBOARD_DIR = DASHBOARDS / "grafana" / "dashboards"
#: Grafana's variables, as a dashboard opened on the last five minutes would set them.
VARIABLES = {"$__rate_interval": "30s", "$__range": "5m", "$model": ".*"}
#: Expressions that rightly return no data for the recorded scenarios: (dashboard,
#: expression) -> why.
NO_DATA: dict[tuple[str, str], str] = {
    ("claudetrace-overview", "sum by (claudetrace_control_subtype, claudetrace_control_outcome)"
                             " (increase(claudetrace_control_duration_seconds_count"
                             '{claudetrace_control_outcome!="success"}[30s]))'):
        "every control request of the recorded scenarios was answered with success",
}
SCRAPE_S = 1


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


# -- a real Prometheus ----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Prometheus:
    """A Prometheus server scraping ``targets`` (job -> host:port) every second."""

    def __init__(self, folder: Path, targets: dict[str, str]) -> None:
        self.port = _free_port()
        jobs = [{"job_name": job, "honor_labels": True, "scrape_interval": f"{SCRAPE_S}s",
                 "static_configs": [{"targets": [target]}]} for job, target in targets.items()]
        config = folder / "prometheus.yml"
        config.write_text(json.dumps({"global": {"scrape_interval": f"{SCRAPE_S}s"},
                                      "scrape_configs": jobs}))
        self._log = open(folder / "prometheus.log", "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self._log, stderr=self._log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not self._ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail("Prometheus did not start: "
                            + (folder / "prometheus.log").read_text(errors="replace")[-2000:])
            time.sleep(0.2)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?"
               + urllib.parse.urlencode({"query": expr}))
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        data = body["data"]
        result: list[dict[str, Any]] = data["result"]
        return result if data["resultType"] == "vector" else [{"value": result}]

    def wait_scrapes(self, n: int = 3) -> None:
        """Let ``n`` more scrapes happen, the first of them once the targets are up
        (Prometheus takes a few seconds to start scraping)."""
        deadline = time.monotonic() + 60
        while not self.query("up == 1"):
            assert time.monotonic() < deadline, "Prometheus never scraped its targets"
            time.sleep(0.2)
        time.sleep(n * SCRAPE_S + 0.5)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def _expressions(dashboard: str) -> list[str]:
    path = DASHBOARD_DIR / f"{dashboard}.json"
    exprs = []
    for _, target in iter_targets(load_dashboard(path)):
        if "expr" in target:
            expr = target["expr"]
            for name, value in VARIABLES.items():
                expr = expr.replace(name, value)
            exprs.append(expr)
    return exprs


def _check_all(prometheus: Prometheus, dashboard: str) -> list[str]:
    """Every expression of the dashboard; those that return no data (none, or only NaN)
    unless :data:`NO_DATA` excuses them, and those it excuses that do."""
    wrong = []
    exprs = _expressions(dashboard)
    assert exprs
    for expr in exprs:
        values = [float(r["value"][1]) for r in prometheus.query(expr)]
        data = any(v == v for v in values)
        if data == ((dashboard, expr) in NO_DATA):
            wrong.append(("excused, yet has data: " if data else "") + expr)
    return wrong


# -- the store dashboard --------------------------------------------------------------------


def _import(store: Store, paths: list[Path]) -> None:
    for path in paths:
        store.import_cassette(read_cassette(path))


def test_the_store_dashboard_reads_metrics_serve(tmp_path: Path, db_path: Path) -> None:
    store = open_settled_store(str(db_path))
    httpd = make_server(StoreMetrics(store), "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    prometheus = Prometheus(tmp_path, {"claudetrace-store": f"127.0.0.1:{httpd.server_port}"})
    try:
        half = len(TELEMETRY_CASSETTES) // 2
        prometheus.wait_scrapes()
        _import(store, TELEMETRY_CASSETTES[:half])
        prometheus.wait_scrapes()
        _import(store, TELEMETRY_CASSETTES[half:])  # what increase() and rate() see
        prometheus.wait_scrapes()
        assert _check_all(prometheus, "claudetrace-store") == []
    finally:
        prometheus.stop()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
        store.close()


# -- the overview dashboard: OTLP -> collector -> Prometheus ---------------------------------


class CollectorStandIn(Collector):
    """What the collector's metrics pipeline makes of the OTLP requests ``receiver``
    got: deltas added up per stream (``deltatocumulative``), exposed under the
    ``prometheus`` exporter's names, ``service.name`` as ``job`` and
    ``service.instance.id`` as ``instance``."""

    def __init__(self, receiver: OtlpReceiver) -> None:
        self.receiver = receiver
        self._kinds = {i.name: i for i in INSTRUMENTS}

    def _streams(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], Any]:
        streams: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
        for request in list(self.receiver.metric_requests):
            for rm in request.resource_metrics:
                resource = attrs(rm.resource.attributes)
                target = (("job", str(resource["service.name"])),
                          ("instance", str(resource.get("service.instance.id", ""))))
                for sm in rm.scope_metrics:
                    for metric in sm.metrics:
                        kind = metric.WhichOneof("data")
                        data = getattr(metric, kind)
                        delta = data.aggregation_temporality == 1
                        for point in data.data_points:
                            labels = tuple(sorted(
                                (prometheus_label(k), str(v))
                                for k, v in attrs(point.attributes).items())) + target
                            key = (metric.name, labels)
                            if kind == "histogram":
                                old = streams.get(key) if delta else None
                                counts = list(point.bucket_counts)
                                total, count = point.sum, point.count
                                if old is not None:
                                    counts = [a + b for a, b in zip(old[0], counts, strict=True)]
                                    total, count = old[1] + total, old[2] + count
                                streams[key] = (counts, total, count,
                                                tuple(point.explicit_bounds))
                            else:
                                value = getattr(point, point.WhichOneof("value"))
                                streams[key] = (streams.get(key, 0) if delta else 0) + value
        return streams

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for (name, labels), value in sorted(self._streams().items()):
            instrument = self._kinds[name]
            prom = prometheus_name(instrument)
            keys, values = [k for k, _ in labels], [v for _, v in labels]
            if instrument.kind == "counter":
                family = families.setdefault(prom, CounterMetricFamily(prom, name, labels=keys))
                family.add_metric(values, value)
            else:
                counts, total, _, bounds = value
                buckets, running = [], 0
                for bound, n in zip((*bounds, float("inf")), counts, strict=True):
                    running += n
                    buckets.append((floatToGoString(bound), running))
                family = families.setdefault(prom, HistogramMetricFamily(prom, name,
                                                                         labels=keys))
                family.add_metric(values, buckets, total)
        yield from families.values()


def _send(endpoint: str) -> None:
    """Each recording's metrics as its own short session sends them (one exporter each)."""
    for path in TELEMETRY_CASSETTES:
        cassette = read_cassette(path)
        telemetry = Telemetry(resolve_settings(endpoint=endpoint))
        for span in build_spans(info_from_header(cassette.header), cassette.events):
            telemetry.span_ended(span)
        assert telemetry.shutdown(10.0)


def test_the_overview_dashboard_reads_the_collectors_translation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    registry = CollectorRegistry(auto_describe=False)
    with OtlpReceiver("http") as receiver:
        registry.register(CollectorStandIn(receiver))
        httpd = ThreadingWSGIServer(("127.0.0.1", 0), _QuietHandler)
        httpd.set_app(make_wsgi_app(registry))
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        prometheus = Prometheus(tmp_path, {"otel-collector": f"127.0.0.1:{httpd.server_port}"})
        try:
            prometheus.wait_scrapes()
            _send(receiver.endpoint)
            prometheus.wait_scrapes()
            _send(receiver.endpoint)
            prometheus.wait_scrapes()
            # One long-lived series per service and host, whatever the number of sessions.
            series = prometheus.query("count(claudetrace_session_count_total)")
            assert float(series[0]["value"][1]) == len(
                {r["metric"]["claudetrace_session_outcome"]
                 for r in prometheus.query("claudetrace_session_count_total")})
            assert _check_all(prometheus, "claudetrace-overview") == []
        finally:
            prometheus.stop()
            httpd.shutdown()
            httpd.server_close()
            thread.join(5)

