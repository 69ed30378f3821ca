"""Whether telemetry is on, and which exporters each signal gets, from flags and ``OTEL_*``.

Pure (no OpenTelemetry import), so the proxy can decide that telemetry is off
without paying for the SDK.  Everything about *how* an exporter sends (endpoint
paths, headers, compression, timeouts, certificates, ``OTEL_EXPORTER_OTLP_INSECURE``,
batching, temporality, sampling) is left to the OpenTelemetry SDK, which reads
the standard variables itself.  Decided here (the exporters and protocols by
:func:`.context.exported`, light enough for the proxy to read before it starts
the CLI), as the SDK's own auto-configuration decides it:

- the exporters of each signal: ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER``,
  a comma-separated list (default ``otlp``; ``none`` turns the signal off;
  ``console`` prints; any other name is an exporter registered by an installed
  package under the SDK's entry point groups);
- the OTLP protocol of each signal: ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` /
  ``…_METRICS_PROTOCOL``, else ``OTEL_EXPORTER_OTLP_PROTOCOL``, else
  ``http/protobuf``; the ``--otel-protocol`` flag overrides all three;
- ``OTEL_SDK_DISABLED=true`` turns everything off.

Unlike the SDK, claudetrace exports nothing unless asked: the ``otlp`` exporter of
a signal counts only when an endpoint is configured for it (the ``--otel-endpoint``
flag, ``OTEL_EXPORTER_OTLP_ENDPOINT`` or the signal's own ``…_ENDPOINT``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from ..recording import RecordingInfo
from .content import ContentPolicy
from .context import DEFAULT_PROTOCOL, exported, host_parent, traceparent

DEFAULT_SERVICE_NAME: Final = "claudetrace"
#: Variable naming a ``module:function`` that gets the tracer provider and the list
#: of metric readers before telemetry starts (see :mod:`.export`).
HOOK_ENV: Final = "CLAUDETRACE_OTEL_HOOK"


@dataclass(frozen=True)
class SignalSettings:
    """One signal's exporters: names as in ``OTEL_*_EXPORTER`` (``otlp`` included only
    when an endpoint is configured), and the OTLP protocol and flag endpoint."""

    exporters: tuple[str, ...] = ()
    protocol: str = DEFAULT_PROTOCOL
    #: The ``--otel-endpoint`` flag, a base URL as ``OTEL_EXPORTER_OTLP_ENDPOINT``
    #: (None: the SDK reads the variables).
    endpoint: str | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.exporters)

    @property
    def otlp(self) -> bool:
        return "otlp" in self.exporters

    def where(self, environ: Mapping[str, str], signal: str) -> str:
        """Where this signal's OTLP exporter sends, for messages (as configured)."""
        if self.endpoint:
            return self.endpoint
        specific = f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT"
        for name in (specific, "OTEL_EXPORTER_OTLP_ENDPOINT"):
            value = environ.get(name, "").strip()
            if value:
                return value
        return "the default OTLP endpoint"


@dataclass(frozen=True)
class OtelSettings:
    """Resolved settings: each signal's exporters, and the content policy."""

    traces: SignalSettings = field(default_factory=SignalSettings)
    metrics: SignalSettings = field(default_factory=SignalSettings)
    content: ContentPolicy = field(default_factory=ContentPolicy)
    #: ``module:function`` from :data:`HOOK_ENV`, or None.
    hook: str | None = None

    @property
    def enabled(self) -> bool:
        """True when at least one signal will be exported."""
        return self.traces.enabled or self.metrics.enabled

    def signal(self, name: str) -> SignalSettings:
        return self.traces if name == "traces" else self.metrics


def otlp_address(where: str, protocol: str) -> tuple[str, int] | None:
    """The host and port an OTLP exporter sending to ``where`` (a
    :meth:`SignalSettings.where`) connects to, for a quick check that something
    listens there; None when that cannot be told."""
    from urllib.parse import urlsplit

    default_port = 4317 if protocol == "grpc" else 4318
    if where == "the default OTLP endpoint":
        return ("localhost", default_port)
    parts = urlsplit(where if "://" in where else f"//{where}")
    try:
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    scheme_port = {"http": 80, "https": 443}.get(parts.scheme) if protocol != "grpc" else None
    return parts.hostname, port or scheme_port or default_port


def resolve_settings(
    *,
    endpoint: str | None = None,
    protocol: str | None = None,
    capture_content: bool | None = None,
    environ: Mapping[str, str] | None = None,
) -> OtelSettings:
    """Settings from flags (``None`` = not given) and ``environ`` (default: ``os.environ``).

    Raises :class:`~claudetrace.errors.TelemetryError` for an unknown protocol, so
    the proxy reports it at start.  The result may be disabled
    (see :attr:`OtelSettings.enabled`).
    """
    env = os.environ if environ is None else environ
    content = ContentPolicy.from_env(env, capture_content)
    hook = env.get(HOOK_ENV, "").strip() or None
    signals = {signal: SignalSettings(names, chosen, endpoint)
               for signal, (names, chosen) in exported(env, endpoint, protocol).items()}
    return OtelSettings(signals["traces"], signals["metrics"], content, hook)


def child_env(info: RecordingInfo, settings: OtelSettings) -> dict[str, str]:
    """The CLI's ``TRACEPARENT`` for a recording, when its traces are exported (as
    :func:`.context.child_env` decides it before the proxy starts the CLI)."""
    if not settings.traces.enabled:
        return {}
    return {"TRACEPARENT": traceparent(info.id, host_parent(info.env))}
