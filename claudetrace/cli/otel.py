"""``claudetrace otel``: export stored recordings as OTLP traces and metrics (backfill)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import click

from ..display import say
from ..errors import TelemetryError
from ._common import db_option, read_store, reports_errors, since_option_ns


@click.command()
@click.argument("sessions", nargs=-1, metavar="[SESSION]...")
@click.option("--all", "all_", is_flag=True, help="Export every recording in the store.")
@click.option("--since", metavar="WHEN",
              help="Export recordings started since WHEN: a duration ago (30m, 2h, 7d) "
                   "or an ISO date.")
@click.option("--endpoint", metavar="URL",
              help="OTLP endpoint [env: OTEL_EXPORTER_OTLP_ENDPOINT]; for http/protobuf the "
                   "base URL, /v1/traces and /v1/metrics are appended.  Every other "
                   "setting is the OpenTelemetry SDK's OTEL_* variables "
                   "(OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER=none for a traces-only "
                   "backend, headers, compression, timeouts…).")
@click.option("--protocol", type=click.Choice(["grpc", "http/protobuf"]),
              help="OTLP protocol [env: OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]PROTOCOL; "
                   "default: http/protobuf].")
@click.option("--content/--no-content", default=None,
              help="Put prompts, outputs and tool inputs/results on spans "
                   "[env: CLAUDETRACE_OTEL_CAPTURE_CONTENT; default: off].")
@click.option("--tree", is_flag=True, help="Print the span trees instead of exporting.")
@click.option("--metrics-again", is_flag=True,
              help="Send the metrics of recordings whose live export delivered them too "
                   "(by default only their spans are sent: a collector would count them twice).")
@db_option
@reports_errors
def otel(
    sessions: tuple[str, ...],
    all_: bool,
    since: str | None,
    endpoint: str | None,
    protocol: str | None,
    content: bool | None,
    tree: bool,
    metrics_again: bool,
    db_url: str | None,
) -> None:
    """Export stored recordings as OpenTelemetry traces and metrics over OTLP.

    The spans are the ones the proxy exports live (same ids, names, attributes
    and recorded times), so backfilling a recording that was already exported
    live replaces nothing and adds nothing new to a trace backend.  Metrics are
    not deduplicated by a collector: those of a recording whose live export
    delivered them are not sent again unless --metrics-again.  Exits 0 when
    the traces were delivered (a metrics endpoint that refuses is a warning),
    1 when they were not.
    """
    from ..telemetry.backfill import backfill, recording_spans, select_recordings
    from ..telemetry.config import resolve_settings
    from ..telemetry.records import render_tree

    if not sessions and not all_ and since is None:
        raise click.UsageError("name at least one SESSION, or use --all or --since")
    settings = resolve_settings(endpoint=endpoint, protocol=protocol, capture_content=content)
    store = read_store(db_url)
    since_ns = since_option_ns(since)
    ids = select_recordings(store, sessions, all_=all_, since_ns=since_ns)
    if tree and not ids:
        click.echo("no recordings matched", err=True)
        return
    if tree:
        for rid, source in _whole(store, ids):
            say(f"# {rid}")
            # Span names carry recorded model and tool names: each line escaped.
            tree_text = render_tree(recording_spans(source, rid, content=settings.content))
            for line in tree_text.splitlines():
                say(line)
        return
    if not settings.enabled:
        raise TelemetryError(
            "no exporter: pass --endpoint, or set OTEL_EXPORTER_OTLP_ENDPOINT "
            "(or OTEL_TRACES_EXPORTER=console)"
        )
    if not ids:
        click.echo("no recordings to export", err=True)
        return
    from ..telemetry.export import Telemetry

    _check_reachable(settings)
    if settings.content.enabled:
        click.echo("note: content spans keep the ids of a plain export: a backend that keeps "
                   "the first copy of a span (Phoenix) shows no content for spans it already "
                   "has; export into a fresh project to see it", err=True)

    def warn(message: str, signal: str | None) -> None:
        say(f"claudetrace: warning: {message}", err=True)

    from ..progress import track

    exporter = Telemetry(settings, warn=warn, block=True)  # a backfill waits, never drops
    live: list[str] = []
    count = 0
    with track(ids, "exporting spans", total=len(ids), unit="recordings") as shown:
        for rid, source in _whole(store, shown):
            count += backfill(source, [rid], exporter, content=settings.content,
                              metrics_of_live=metrics_again, live_metrics=live)
    delivered = exporter.shutdown(timeout_s=30.0)
    traces = exporter.deliveries.get("traces")
    metrics = exporter.deliveries.get("metrics")
    if not delivered:
        why = traces.first_error if traces is not None and traces.first_error else "timed out"
        raise TelemetryError(f"traces were not delivered: {why}")
    if not settings.traces.enabled and metrics is not None and not metrics.ok:
        # Metrics alone were asked for (OTEL_TRACES_EXPORTER=none): they are what failed.
        raise TelemetryError(f"metrics were not delivered: {metrics.first_error}")
    if live and exporter.meter_provider is not None:
        click.echo(f"the metrics of {len(live)} recording(s) went out live and are not sent "
                   "again (--metrics-again sends them)", err=True)
    if traces is not None:
        click.echo(f"exported {count} spans from {len(ids)} recording(s) to {traces.where}",
                   err=True)
    elif metrics is not None:
        click.echo(f"exported the metrics of {len(ids)} recording(s) to {metrics.where}",
                   err=True)
    else:
        click.echo(f"exported {count} spans from {len(ids)} recording(s)", err=True)


#: How long the check that the traces' endpoint listens may wait: an address
#: nothing answers at fails in seconds, not after the exporter's retries.
CONNECT_TIMEOUT_S = 2.0


def _check_reachable(settings: Any) -> None:
    """Fail in one line when nothing listens where the traces go."""
    import os
    import socket

    from ..telemetry.config import otlp_address

    if not settings.traces.otlp:
        return
    where = settings.traces.where(os.environ, "traces")
    address = otlp_address(where, settings.traces.protocol)
    if address is None:
        return
    try:
        socket.create_connection(address, timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (
            os.strerror(exc.errno) if exc.errno else str(exc))
        raise TelemetryError(f"cannot reach the OTLP endpoint {where}: {reason}") from None


def _whole(store: Any, ids: Iterable[str]) -> Iterator[tuple[str, Any]]:
    """Each of ``ids`` with the store to read it from: a recording an import stored
    usage first and did not fold yet is folded first, as ``show`` folds it (in
    memory, in a store of its own closed after, when ``store`` cannot be written:
    :func:`~claudetrace.formats.unfolded.whole`), so it is exported whole."""
    from ..formats.unfolded import whole
    from ..store.unfolded import pending

    waiting = set(pending(store))
    for rid in ids:
        source = whole(store, store.get(rid))[0] if rid in waiting else store
        try:
            yield rid, source
        finally:
            if source is not store:
                source.close()
