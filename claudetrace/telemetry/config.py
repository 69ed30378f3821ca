"""Where telemetry goes: OTLP settings from flags and the standard ``OTEL_*`` variables.

Pure (no OpenTelemetry import), so the proxy can decide that telemetry is off
without paying for the SDK.  Precedence: a flag, then the signal-specific
variable (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, used as given), then the
generic one (``OTEL_EXPORTER_OTLP_ENDPOINT``, a base URL to which
``/v1/traces`` / ``/v1/metrics`` are appended for http/protobuf).  The protocol
defaults to ``http/protobuf`` as the OTLP exporter specification says.
Telemetry is off when no endpoint is configured, when ``OTEL_SDK_DISABLED=true``,
or per signal when ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` is ``none``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal
from urllib.parse import unquote

from ..errors import TelemetryError
from ..recording import RecordingInfo
from .content import ContentPolicy
from .records import traceparent

PROTOCOLS: Final = ("grpc", "http/protobuf")
COMPRESSIONS: Final = ("gzip", "deflate", "none")
DEFAULT_PROTOCOL: Final = "http/protobuf"
DEFAULT_SERVICE_NAME: Final = "claudetrace"
_PATHS: Final = {"traces": "/v1/traces", "metrics": "/v1/metrics"}
_SIGNAL_PREFIX: Final = {"traces": "TRACES_", "metrics": "METRICS_"}
#: Seconds one export request may take, retries included, unless
#: ``OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]TIMEOUT`` says otherwise.  The SDK's
#: default is 10 s; ours is shorter so that a session's last export does not hold
#: its indexer for long after a collector has gone.
DEFAULT_EXPORT_TIMEOUT_S: Final = 5.0
#: How metric points add up between exports (``lowmemory`` means delta for our instruments).
Temporality = Literal["cumulative", "delta"]


@dataclass(frozen=True)
class Batching:
    """When the exporter sends: the SDK's ``OTEL_BSP_*`` and metric reader settings."""

    schedule_delay_s: float = 5.0
    max_export_batch_size: int = 512
    max_queue_size: int = 65536
    metric_interval_s: float = 60.0
    temporality: Temporality = "cumulative"


@dataclass(frozen=True)
class OtelSettings:
    """Resolved export settings; an endpoint of ``None`` turns that signal off."""

    protocol: str
    traces_endpoint: str | None
    metrics_endpoint: str | None
    resource: dict[str, str] = field(default_factory=dict)
    content: ContentPolicy = field(default_factory=ContentPolicy)
    batching: Batching = field(default_factory=Batching)
    #: Seconds one export request of each signal may take, retries included.
    traces_timeout_s: float = DEFAULT_EXPORT_TIMEOUT_S
    metrics_timeout_s: float = DEFAULT_EXPORT_TIMEOUT_S

    @property
    def enabled(self) -> bool:
        """True when at least one signal will be exported."""
        return bool(self.traces_endpoint or self.metrics_endpoint)

    @property
    def service_name(self) -> str:
        return self.resource.get("service.name", DEFAULT_SERVICE_NAME)


def parse_key_values(value: str) -> dict[str, str]:
    """``k=v,k2=v2`` (percent-encoded) as a dict: ``OTEL_RESOURCE_ATTRIBUTES``, the
    exporters' ``OTEL_EXPORTER_OTLP_*HEADERS``."""
    attrs: dict[str, str] = {}
    for item in value.split(","):
        key, sep, val = item.partition("=")
        if sep and key.strip():
            attrs[unquote(key.strip())] = unquote(val.strip())
    return attrs


def _exporter_variable(environ: Mapping[str, str], signal: str, name: str) -> tuple[str, str]:
    """(variable, value): ``OTEL_EXPORTER_OTLP_{SIGNAL}_{NAME}`` when it is set, else
    ``OTEL_EXPORTER_OTLP_{NAME}``."""
    specific = f"OTEL_EXPORTER_OTLP_{_SIGNAL_PREFIX[signal]}{name}"
    value = environ.get(specific, "").strip()
    if value:
        return specific, value
    generic = f"OTEL_EXPORTER_OTLP_{name}"
    return generic, environ.get(generic, "").strip()


def exporter_setting(environ: Mapping[str, str], signal: str, name: str) -> str:
    """``OTEL_EXPORTER_OTLP_{SIGNAL}_{NAME}``, else ``OTEL_EXPORTER_OTLP_{NAME}``."""
    return _exporter_variable(environ, signal, name)[1]


def compression(environ: Mapping[str, str], signal: str) -> str:
    """The signal's ``…COMPRESSION``: gzip, deflate or none (raises for anything else)."""
    value = (exporter_setting(environ, signal, "COMPRESSION") or "none").lower()
    if value not in COMPRESSIONS:
        raise TelemetryError(f"unsupported OTLP compression {value!r} (use gzip, deflate or none)")
    return value


def export_timeout(environ: Mapping[str, str], signal: str) -> float:
    """The signal's ``…TIMEOUT`` in seconds (the variables hold milliseconds, as the
    OTLP exporter specification says); raises for anything but a positive number."""
    name, value = _exporter_variable(environ, signal, "TIMEOUT")
    if not value:
        return DEFAULT_EXPORT_TIMEOUT_S
    try:
        milliseconds = float(value)
    except ValueError:
        milliseconds = math.nan
    if not 0 < milliseconds < math.inf:
        raise TelemetryError(f"{name}={value!r} is not a positive number of milliseconds")
    return milliseconds / 1000


def _positive_int(environ: Mapping[str, str], name: str, default: int) -> int:
    value = environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = int(float(value))
    except ValueError:
        raise TelemetryError(f"{name}={value!r} is not a number") from None
    if number <= 0:
        raise TelemetryError(f"{name}={value!r} must be positive")
    return number


def _batching(environ: Mapping[str, str]) -> Batching:
    name = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"
    temporality = environ.get(name, "").strip().lower() or "cumulative"
    if temporality not in ("cumulative", "delta", "lowmemory"):
        raise TelemetryError(f"{name}={temporality!r} (use cumulative, delta or lowmemory)")
    batch = _positive_int(environ, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)
    return Batching(
        schedule_delay_s=_positive_int(environ, "OTEL_BSP_SCHEDULE_DELAY", 5000) / 1000,
        max_export_batch_size=batch,
        max_queue_size=max(batch, _positive_int(environ, "OTEL_BSP_MAX_QUEUE_SIZE", 65536)),
        metric_interval_s=_positive_int(environ, "OTEL_METRIC_EXPORT_INTERVAL", 60000) / 1000,
        temporality="cumulative" if temporality == "cumulative" else "delta",
    )


def _exporters(environ: Mapping[str, str], name: str) -> set[str]:
    value = environ.get(name, "otlp").strip().lower() or "otlp"
    return {part.strip() for part in value.split(",")}


def _signal_endpoint(
    signal: str, flag: str | None, protocol: str, environ: Mapping[str, str]
) -> str | None:
    if flag:
        return _with_path(flag, signal, protocol)
    specific = environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip()
    if specific:
        return specific
    generic = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return _with_path(generic, signal, protocol) if generic else None


def _with_path(base: str, signal: str, protocol: str) -> str:
    if protocol != "http/protobuf":
        return base
    return base.rstrip("/") + _PATHS[signal]


def resolve_settings(
    *,
    endpoint: str | None = None,
    protocol: str | None = None,
    capture_content: bool | None = None,
    environ: Mapping[str, str] | None = None,
) -> OtelSettings:
    """Export settings from flags (``None`` = not given) and ``environ``.

    Raises :class:`~claudetrace.errors.TelemetryError` for an unknown protocol
    or a batching, compression or timeout setting it cannot use (so the proxy reports it
    at start).  The result may be disabled (see :attr:`OtelSettings.enabled`).
    """
    env = os.environ if environ is None else environ
    chosen = (
        protocol
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip()
        or env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "").strip()
        or DEFAULT_PROTOCOL
    )
    if chosen not in PROTOCOLS:
        raise TelemetryError(
            f"unsupported OTLP protocol {chosen!r} (use grpc or http/protobuf)"
        )
    disabled = env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    traces = metrics = None
    if not disabled:
        if "none" not in _exporters(env, "OTEL_TRACES_EXPORTER"):
            traces = _signal_endpoint("traces", endpoint, chosen, env)
        if "none" not in _exporters(env, "OTEL_METRICS_EXPORTER"):
            metrics = _signal_endpoint("metrics", endpoint, chosen, env)
    resource = parse_key_values(env.get("OTEL_RESOURCE_ATTRIBUTES", ""))
    service = env.get("OTEL_SERVICE_NAME", "").strip()
    if service:
        resource["service.name"] = service
    resource.setdefault("service.name", DEFAULT_SERVICE_NAME)
    timeouts = dict.fromkeys(("traces", "metrics"), DEFAULT_EXPORT_TIMEOUT_S)
    for signal, endpoint in (("traces", traces), ("metrics", metrics)):
        if endpoint:
            compression(env, signal)
            timeouts[signal] = export_timeout(env, signal)
    return OtelSettings(
        protocol=chosen,
        traces_endpoint=traces,
        metrics_endpoint=metrics,
        resource=resource,
        content=ContentPolicy.from_env(env, capture_content),
        batching=_batching(env) if traces or metrics else Batching(),
        traces_timeout_s=timeouts["traces"],
        metrics_timeout_s=timeouts["metrics"],
    )


def child_env(info: RecordingInfo, settings: OtelSettings) -> dict[str, str]:
    """The CLI's ``TRACEPARENT`` for a recording, when its traces are exported."""
    if not settings.enabled or not settings.traces_endpoint:
        return {}
    return {"TRACEPARENT": traceparent(info.id)}
