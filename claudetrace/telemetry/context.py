"""The trace context the CLI starts with, decided before it is started.

With live traces the proxy gives the CLI a W3C ``TRACEPARENT`` naming the
recording's root span, so the spans the CLI exports itself nest under the
recording.  That must be known before the child is spawned, and nothing heavy
may stand there (a telemetry session starts as fast as any other): this module
imports only :mod:`hashlib` and the errors.  Here are the two things the spawn
waits for — which exporters and OTLP protocol each signal gets from the flags
and ``OTEL_*`` (:func:`exported`; :mod:`.config` builds the full settings on
it), and the trace and span ids derived from a recording's id (the same live and
in a backfill).

A host that starts the CLI inside a trace of its own (a ``TRACEPARENT`` in the
CLI's environment, as a Go or Python host instrumented with OpenTelemetry may
set it) keeps it: the recording's root span joins the host's trace as a child
of the host's span, and the CLI is given that trace with the root span as its
parent.  The host's ``TRACEPARENT`` is part of the recording's environment, so a
backfill gives the same ids.
"""

from __future__ import annotations

import hashlib

from ..errors import TelemetryError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

PROTOCOLS = ("grpc", "http/protobuf")
DEFAULT_PROTOCOL = "http/protobuf"
SIGNALS = ("traces", "metrics")


def exported(environ: Mapping[str, str], endpoint: str | None = None,
             protocol: str | None = None) -> dict[str, tuple[tuple[str, ...], str]]:
    """Each signal's exporters (by name; none: not exported) and OTLP protocol, from
    the ``--otel-endpoint`` and ``--otel-protocol`` flags and ``environ``.

    ``OTEL_SDK_DISABLED=true`` turns every signal off.  Raises
    :class:`~claudetrace.errors.TelemetryError` for an unknown protocol.
    """
    disabled = environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    signals = {}
    for signal in SIGNALS:
        names = () if disabled else _exporters(environ, signal, endpoint)
        chosen = _protocol(environ, signal, protocol) if "otlp" in names else DEFAULT_PROTOCOL
        signals[signal] = (names, chosen)
    return signals


def _exporters(environ: Mapping[str, str], signal: str, endpoint: str | None) -> tuple[str, ...]:
    """``OTEL_<SIGNAL>_EXPORTER`` (default ``otlp``; ``none`` turns the signal
    off), with ``otlp`` kept only when an endpoint is configured for the signal:
    the ``--otel-endpoint`` flag (``endpoint``), ``OTEL_EXPORTER_OTLP_ENDPOINT``
    or the signal's own ``…_ENDPOINT``."""
    value = environ.get(f"OTEL_{signal.upper()}_EXPORTER", "").strip().lower() or "otlp"
    names = tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))
    if "none" in names:
        return ()
    has_endpoint = bool(
        endpoint
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        or environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip()
    )
    return names if has_endpoint else tuple(n for n in names if n != "otlp")


def _protocol(environ: Mapping[str, str], signal: str, flag: str | None) -> str:
    for name, value in (
        ("--otel-protocol", flag),
        (f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL", None),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", None),
    ):
        chosen = (value if name.startswith("--") else environ.get(name, "")) or ""
        chosen = chosen.strip()
        if chosen:
            if chosen not in PROTOCOLS:
                raise TelemetryError(
                    f"{name}={chosen!r}: unsupported OTLP protocol (use grpc or http/protobuf)")
            return chosen
    return DEFAULT_PROTOCOL


def child_env(recording_id: str, environ: Mapping[str, str],
              flags: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The CLI's extra environment: ``TRACEPARENT`` when the recording's traces are
    exported (``flags``: the proxy's ``--otel-endpoint`` and ``--otel-protocol`` as
    ``endpoint`` and ``protocol``), in the host's trace when its own ``TRACEPARENT``
    names one, else nothing (a ``TRACEPARENT`` the host set passes through).  Bad
    settings turn telemetry off: the proxy says why once the child runs.
    """
    flags = flags or {}
    try:
        traced, _ = exported(environ, flags.get("endpoint"), flags.get("protocol"))["traces"]
    except TelemetryError:
        return {}
    return {"TRACEPARENT": traceparent(recording_id, host_parent(environ))} if traced else {}


def _digest(text: str, size: int) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:size], "big")


def trace_id_for(recording_id: str) -> int:
    """The 128-bit trace id of a recording (never zero)."""
    return _digest(f"claudetrace/trace/{recording_id}", 16) or 1


def span_id_for(recording_id: str, key: str) -> int:
    """The 64-bit id of the span ``key`` in a recording (never zero)."""
    return _digest(f"claudetrace/span/{recording_id}/{key}", 8) or 1


def host_parent(environ: Mapping[str, str]) -> tuple[int, int] | None:
    """The trace id and span id of a valid W3C ``TRACEPARENT`` in the host's
    environment (version ``00`` or a later one, non-zero ids), else None."""
    parts = environ.get("TRACEPARENT", "").strip().lower().split("-")
    if len(parts) < 4 or [len(p) for p in parts[:4]] != [2, 32, 16, 2]:
        return None
    if parts[0] == "ff" or (parts[0] == "00" and len(parts) != 4):
        return None
    try:
        trace_id, span_id = int(parts[1], 16), int(parts[2], 16)
        int(parts[0] + parts[3], 16)
    except ValueError:
        return None
    return (trace_id, span_id) if trace_id and span_id else None


def trace_id_of(recording_id: str, parent: tuple[int, int] | None) -> int:
    """The recording's trace id: the host's trace when it gave one, else its own."""
    return parent[0] if parent else trace_id_for(recording_id)


def traceparent(recording_id: str, parent: tuple[int, int] | None = None) -> str:
    """A W3C ``traceparent`` pointing at the recording's root span (sampled), in the
    host's trace when it gave one (``parent``, :func:`host_parent`)."""
    trace_id = trace_id_of(recording_id, parent)
    return f"00-{trace_id:032x}-{span_id_for(recording_id, 'root'):016x}-01"
