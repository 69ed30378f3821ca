"""The dashboards/ stack, checked without Docker.

Docker cannot run here, so the compose setup is validated statically: every YAML
file parses, the services, ports and job names the configs name agree with each
other, every dashboard uses the provisioned datasource uids, and every metric and
label in every panel's PromQL (and every span attribute in its TraceQL) is one
claudetrace actually emits.  "Actually emits" is computed from code, not listed:
the store endpoint's names come from :mod:`claudetrace.promexport`; the OTLP names
come from the telemetry instruments, the measurements and spans built from the
real-CLI recordings in ``tests/fixtures/telemetry``, and the pinned collector's
Prometheus name translation (:func:`prometheus_name`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from claudetrace import promexport
from claudetrace.cassette import read_cassette
from claudetrace.store import info_from_header
from claudetrace.telemetry.metrics import INSTRUMENTS, Instrument, measurements
from claudetrace.telemetry.spans import build_spans

ROOT = Path(__file__).resolve().parent.parent
DASHBOARDS = ROOT / "dashboards"
TELEMETRY_CASSETTES = sorted((Path(__file__).parent / "fixtures" / "telemetry").glob("*.ndjson"))
DASHBOARD_FILES = sorted((DASHBOARDS / "grafana" / "dashboards").glob("*.json"))

#: Labels Prometheus attaches to every scraped series (the collector maps
#: service.name / service.instance.id onto them, honored by the scrape config).
TARGET_LABELS = frozenset({"job", "instance"})


def load_yaml(relative: str) -> Any:
    return yaml.safe_load((DASHBOARDS / relative).read_text(encoding="utf-8"))


@cache
def compose() -> dict[str, Any]:
    return load_yaml("docker-compose.yml")


def service(name: str) -> dict[str, Any]:
    return compose()["services"][name]


def mount_target(svc: str, source: str) -> str:
    """Where ``source`` (a path relative to dashboards/) is mounted in ``svc``."""
    for volume in service(svc).get("volumes", []):
        src, target, *_ = volume.split(":")
        if src == source:
            return target
    raise AssertionError(f"{svc} does not mount {source}")


def published_ports(svc: str) -> set[int]:
    return {int(str(p).split(":")[-1]) for p in service(svc).get("ports", [])}


def host_port(endpoint: str) -> tuple[str, int]:
    """``host:port`` out of ``http://host:port/path`` or ``host:port``."""
    match = re.fullmatch(r"(?:\w+://)?([^:/]+):(\d+)(?:/.*)?", endpoint)
    assert match, endpoint
    return match.group(1), int(match.group(2))


# --------------------------------------------------------------------------- the collector's
# Prometheus name translation, as in pkg/translator/prometheus of
# opentelemetry-collector-contrib 0.111.0 (normalize_name.go / normalize_label.go)
# with add_metric_suffixes: true.

_UNITS = {"s": "seconds", "ms": "milliseconds", "By": "bytes", "1": ""}


def _tokens(text: str) -> list[str]:
    return [t for t in re.split(r"[^0-9A-Za-z]+", text) if t]


def prometheus_name(instrument: Instrument) -> str:
    """The metric name the collector's prometheus exporter gives an instrument."""
    tokens = _tokens(instrument.name)
    unit = instrument.unit.split("/", 1)[0].strip()
    if unit and "{" not in unit and "}" not in unit:
        prom_unit = "_".join(_tokens(_UNITS.get(unit, unit)))
        if prom_unit and prom_unit not in tokens:
            tokens.append(prom_unit)
    if instrument.kind == "counter":
        tokens = [t for t in tokens if t != "total"] + ["total"]
    return "_".join(tokens)


def prometheus_label(key: str) -> str:
    """An attribute key as a Prometheus label name."""
    return re.sub(r"[^0-9A-Za-z_]", "_", key)


def test_translation_matches_the_contract_examples() -> None:
    by_name = {i.name: prometheus_name(i) for i in INSTRUMENTS}
    assert by_name["gen_ai.client.token.usage"] == "gen_ai_client_token_usage"
    assert by_name["gen_ai.client.operation.duration"] == "gen_ai_client_operation_duration_seconds"
    assert by_name["claudetrace.session.cost"] == "claudetrace_session_cost_USD_total"
    assert by_name["claudetrace.tool.calls"] == "claudetrace_tool_calls_total"
    assert by_name["claudetrace.permission.wait"] == "claudetrace_permission_wait_seconds"
    assert prometheus_label("gen_ai.tool.name") == "gen_ai_tool_name"


@cache
def recorded_spans() -> tuple[Any, ...]:
    """Spans the telemetry builds from the real-CLI fixture recordings."""
    spans = []
    for path in TELEMETRY_CASSETTES:
        cassette = read_cassette(path)
        spans.extend(build_spans(info_from_header(cassette.header), cassette.events))
    return tuple(spans)


@cache
def emitted_series() -> dict[str, frozenset[str]]:
    """Sample name -> label names, for everything Prometheus can hold from claudetrace."""
    series: dict[str, frozenset[str]] = {}
    attributes: dict[str, set[str]] = {i.name: set() for i in INSTRUMENTS}
    for span in recorded_spans():
        for m in measurements(span):
            attributes[m.instrument].update(m.attributes)
    for instrument in INSTRUMENTS:
        assert attributes[instrument.name], f"no recording exercises {instrument.name}"
        labels = frozenset(map(prometheus_label, attributes[instrument.name])) | TARGET_LABELS
        name = prometheus_name(instrument)
        if instrument.kind == "histogram":
            series[f"{name}_bucket"] = labels | {"le"}
            series[f"{name}_sum"] = series[f"{name}_count"] = labels
        else:
            series[name] = labels
    for spec in promexport.METRICS:
        labels = frozenset(spec.labels) | TARGET_LABELS
        for sample in spec.sample_names:
            series[sample] = labels | {"le"} if sample.endswith("_bucket") else labels
    return series


# --------------------------------------------------------------------------- PromQL


_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "inf", "nan"})
_GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_TOKEN = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*|\{[^}]*\}|\(|\)|[^\sA-Za-z_:{}()]+")


def promql_references(expr: str) -> tuple[dict[str, set[str]], set[str]]:
    """``({metric: matcher label names}, grouping label names)`` used by ``expr``."""
    text = re.sub(r"\$\{?\w+\}?", "", expr)  # Grafana variables ($__range, $model…)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)  # string literals
    text = re.sub(r"\[[^\]]*\]", "", text)  # range selectors
    tokens = _TOKEN.findall(text)
    metrics: dict[str, set[str]] = {}
    grouping: set[str] = set()
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        following = tokens[i + 1] if i + 1 < len(tokens) else ""
        if tok in _GROUPING and following == "(":
            end = tokens.index(")", i)
            grouping.update(t for t in tokens[i + 2 : end] if t not in (",",))
            i = end + 1
            continue
        if re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", tok) and tok not in _KEYWORDS:
            if following == "(" or following in _GROUPING:
                i += 1  # a function or an aggregation (`sum by (…) (…)`)
                continue
            labels = metrics.setdefault(tok, set())
            if following.startswith("{"):
                labels.update(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", following))
                i += 1
        elif tok.startswith("{"):
            raise AssertionError(f"selector without a metric name in {expr!r}")
        i += 1
    return metrics, grouping


def test_promql_references_parses_typical_panels() -> None:
    metrics, grouping = promql_references(
        "histogram_quantile(0.95, sum by (le, gen_ai_tool_name) "
        '(rate(claudetrace_tool_duration_seconds_bucket{job="x", a=~"$model"}[$__rate_interval])))'
        " / on (job) sum(foo_total) > bool 2"
    )
    assert metrics == {"claudetrace_tool_duration_seconds_bucket": {"job", "a"}, "foo_total": set()}
    assert grouping == {"le", "gen_ai_tool_name", "job"}


# --------------------------------------------------------------------------- dashboards


def load_dashboard(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def iter_panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from iter_panels(panel.get("panels", []))


def iter_targets(dashboard: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """``(panel, target)`` pairs, each target with its effective datasource."""
    for panel in iter_panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            yield panel, {"datasource": panel.get("datasource"), **target}


@cache
def provisioned_datasources() -> dict[str, str]:
    """uid -> type of the provisioned Grafana datasources."""
    config = load_yaml("grafana/provisioning/datasources/datasources.yaml")
    return {ds["uid"]: ds["type"] for ds in config["datasources"]}


def prometheus_jobs() -> dict[str, list[str]]:
    config = load_yaml("prometheus.yml")
    return {
        job["job_name"]: [t for sc in job["static_configs"] for t in sc["targets"]]
        for job in config["scrape_configs"]
    }


def test_there_are_dashboards() -> None:
    uids = {load_dashboard(p)["uid"] for p in DASHBOARD_FILES}
    assert {"claudetrace-overview", "claudetrace-store", "claudetrace-session"} <= uids
    assert len(uids) == len(DASHBOARD_FILES)


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_dashboard_uses_only_provisioned_datasources(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert "${DS_" not in text and "__inputs" not in text
    dashboard = json.loads(text)
    sources = provisioned_datasources()
    refs = [target["datasource"] for _, target in iter_targets(dashboard)]
    refs += [p["datasource"] for p in iter_panels(dashboard["panels"]) if "datasource" in p]
    refs += [v["datasource"] for v in dashboard["templating"]["list"] if "datasource" in v]
    assert refs
    for ref in refs:
        assert ref["uid"] in sources, ref
        assert ref["type"] == sources[ref["uid"]], ref
    ids = [p["id"] for p in iter_panels(dashboard["panels"])]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_promql_names_are_emitted(path: Path) -> None:
    dashboard = load_dashboard(path)
    series = emitted_series()
    jobs = prometheus_jobs()
    exprs = [t["expr"] for _, t in iter_targets(dashboard) if "expr" in t]
    exprs += [
        v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        for v in dashboard["templating"]["list"]
        if v.get("datasource", {}).get("type") == "prometheus"
    ]
    for expr in exprs:
        label_values = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", expr)
        if label_values:  # a variable query: label_values(metric, label)
            metrics, grouping = {label_values[1]: {label_values[2]}}, set()
        else:
            metrics, grouping = promql_references(expr)
        assert metrics, expr
        for metric, labels in metrics.items():
            assert metric in series, f"{path.name}: {metric} is not emitted ({expr})"
            assert labels <= series[metric], f"{path.name}: {labels - series[metric]} on {metric}"
            assert grouping <= series[metric], (
                f"{path.name}: {grouping - series[metric]} on {metric}"
            )
        for job in re.findall(r'job="([^"]*)"', expr):
            assert job in jobs, f"{path.name}: no scrape job {job!r}"


def test_overview_and_store_dashboards_cover_the_brief() -> None:
    def referenced(uid: str) -> set[str]:
        (path,) = [p for p in DASHBOARD_FILES if load_dashboard(p)["uid"] == uid]
        exprs = [t["expr"] for _, t in iter_targets(load_dashboard(path)) if "expr" in t]
        return {m for e in exprs for m in promql_references(e)[0]}

    names = {i.name: prometheus_name(i) for i in INSTRUMENTS}
    overview = referenced("claudetrace-overview")
    for instrument in INSTRUMENTS:  # sessions, cost, tokens, errors, latencies, permissions
        assert any(m.startswith(names[instrument.name]) for m in overview), instrument.name
    store = referenced("claudetrace-store")
    for spec in promexport.METRICS:  # every family the endpoint serves is charted
        assert store & set(spec.sample_names), spec.name


# --------------------------------------------------------------------------- TraceQL


@cache
def span_vocabulary() -> tuple[frozenset[str], frozenset[str]]:
    """(span names, span attribute keys) the span builder emits on the fixtures."""
    spans = recorded_spans()
    return (
        frozenset(s.name for s in spans),
        frozenset(k for s in spans for k in s.attributes),
    )


def test_traceql_uses_emitted_span_names_and_attributes() -> None:
    names, attributes = span_vocabulary()
    (path,) = [p for p in DASHBOARD_FILES if load_dashboard(p)["uid"] == "claudetrace-session"]
    dashboard = load_dashboard(path)
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    queries = [t["query"] for _, t in iter_targets(dashboard) if t.get("queryType") == "traceql"]
    assert len(queries) >= 5
    for query in queries:
        used = set(re.findall(r"\$\{(\w+)\}|\$(\w+)", query))
        assert {a or b for a, b in used} <= variables, query
        text = re.sub(r"\$\{?\w+\}?", "", query)
        for scope, key in re.findall(r"\b(span|resource)\.([\w.]+)", text):
            assert scope == "span", f"{key}: only span attributes are emitted per span"
            assert key in attributes, f"span attribute {key} is never emitted ({query})"
        for op, value in re.findall(r"(?<![\w.])name\s*(=~|=)\s*\"([^\"]*)\"", text):
            if op == "=":
                assert value in names, f"no span is named {value!r}"
            else:
                assert any(re.fullmatch(value, n) for n in names), f"no span name matches {value!r}"


# --------------------------------------------------------------------------- compose and configs


YAML_FILES = sorted(p.relative_to(DASHBOARDS).as_posix() for p in DASHBOARDS.rglob("*.y*ml"))


@pytest.mark.parametrize("relative", YAML_FILES)
def test_yaml_parses(relative: str) -> None:
    assert isinstance(load_yaml(relative), dict)


def test_compose_images_are_pinned_and_mounts_exist() -> None:
    services = compose()["services"]
    assert {"otel-collector", "jaeger", "tempo", "prometheus", "grafana"} <= set(services)
    for name, svc in services.items():
        image = svc["image"]
        repo, _, tag = image.rpartition(":")
        assert repo and re.search(r"\d+\.\d+", tag) and tag != "latest", f"{name}: {image}"
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (DASHBOARDS / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in compose()["volumes"], f"{name}: undeclared volume {source}"


def test_collector_pipelines() -> None:
    config = load_yaml("otel-collector.yaml")
    mounted = mount_target("otel-collector", "./otel-collector.yaml")
    assert any(arg == f"--config={mounted}" for arg in service("otel-collector")["command"])
    protocols = config["receivers"]["otlp"]["protocols"]
    assert host_port(protocols["grpc"]["endpoint"])[1] == 4317
    assert host_port(protocols["http"]["endpoint"])[1] == 4318
    assert {4317, 4318} <= published_ports("otel-collector")

    pipelines = config["service"]["pipelines"]
    for pipeline in pipelines.values():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in config[kind], component
    trace_targets = {
        host_port(config["exporters"][e]["endpoint"])[0] for e in pipelines["traces"]["exporters"]
    }
    assert trace_targets == {"jaeger", "tempo"}
    assert trace_targets <= set(compose()["services"])
    tempo = load_yaml("tempo.yaml")
    tempo_grpc = tempo["distributor"]["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    tempo_exporter = next(
        e for e in pipelines["traces"]["exporters"] if "tempo" in config["exporters"][e]["endpoint"]
    )
    assert host_port(config["exporters"][tempo_exporter]["endpoint"])[1] == host_port(tempo_grpc)[1]
    assert pipelines["metrics"]["exporters"] == ["prometheus"]
    # claudetrace's metrics are deltas (one series per host and service): summed up
    # before the prometheus exporter, which wants cumulative ones.
    assert pipelines["metrics"]["processors"][0] == "deltatocumulative"
    # The dashboards' metric names assume suffixes are added (see prometheus_name).
    assert config["exporters"]["prometheus"]["add_metric_suffixes"] is True


def test_prometheus_scrapes_the_collector_and_the_store_endpoint() -> None:
    jobs = prometheus_jobs()
    collector = load_yaml("otel-collector.yaml")
    exporter_port = host_port(collector["exporters"]["prometheus"]["endpoint"])[1]
    assert jobs["otel-collector"] == [f"otel-collector:{exporter_port}"]
    assert jobs["claudetrace-store"] == [f"host.docker.internal:{promexport.DEFAULT_PORT}"]
    prom = service("prometheus")
    assert "host.docker.internal:host-gateway" in prom["extra_hosts"]
    mounted = mount_target("prometheus", "./prometheus.yml")
    assert f"--config.file={mounted}" in prom["command"]


def test_grafana_provisioning_matches_compose() -> None:
    provisioning = mount_target("grafana", "./grafana/provisioning")
    assert provisioning == "/etc/grafana/provisioning"
    dashboards_dir = mount_target("grafana", "./grafana/dashboards")
    providers = load_yaml("grafana/provisioning/dashboards/dashboards.yaml")["providers"]
    assert [p["options"]["path"] for p in providers] == [dashboards_dir]
    home = service("grafana")["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home.startswith(dashboards_dir + "/")
    assert (DASHBOARDS / "grafana" / "dashboards" / home.rsplit("/", 1)[1]).is_file()

    tempo_port = load_yaml("tempo.yaml")["server"]["http_listen_port"]
    expected = {"prometheus": ("prometheus", 9090), "tempo": ("tempo", tempo_port)}
    expected["jaeger"] = ("jaeger", 16686)
    config = load_yaml("grafana/provisioning/datasources/datasources.yaml")
    for ds in config["datasources"]:
        host, port = host_port(ds["url"])
        assert (host, port) == expected[ds["type"]], ds["name"]
        assert host in compose()["services"]
    assert sum(bool(ds.get("isDefault")) for ds in config["datasources"]) == 1
