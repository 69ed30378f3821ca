"""``claudetrace metrics``: fleet aggregates from the store for Prometheus."""

from __future__ import annotations

import sys

import click

from ..errors import ClaudeTraceError
from ..promexport import DEFAULT_PORT
from ._common import db_option, read_store, reports_errors


@click.group()
def metrics() -> None:
    """Prometheus metrics computed from the recording store.

    Names are prefixed claudetrace_store_; dashboards/ has a Prometheus config that
    scrapes `claudetrace metrics serve` and Grafana panels that chart it.
    """


@metrics.command()
@db_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=DEFAULT_PORT,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on (0 picks a free one).",
)
@reports_errors
def serve(db_url: str | None, host: str, port: int) -> None:
    """Serve GET /metrics until interrupted (Prometheus text, or OpenMetrics to a
    scraper that asks for it).

    Prometheus in a container reaches the host through host.docker.internal, which
    is not 127.0.0.1: use --host 0.0.0.0 (or the docker bridge address) for the
    compose setup in dashboards/.
    """
    from ..promexport import StoreMetrics, make_server

    store = read_store(db_url)
    try:
        server = make_server(StoreMetrics(store), host, port)
    except OSError as exc:
        raise ClaudeTraceError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    url = f"http://{host}:{server.server_port}/metrics"
    click.echo(f"claudetrace: serving store metrics on {url}", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        store.close()


@metrics.command()
@db_option
@click.option("--openmetrics", is_flag=True,
              help="OpenMetrics 1.0 instead of the Prometheus text format.")
@reports_errors
def dump(db_url: str | None, openmetrics: bool) -> None:
    """Print the metrics exposition once and exit."""
    from ..display import for_terminal
    from ..promexport import StoreMetrics

    store = read_store(db_url)
    try:
        text = StoreMetrics(store).exposition(openmetrics=openmetrics)
        # Label values are recorded model names: on a terminal they are escaped
        # as every view escapes them; a pipe gets the exposition exactly (which
        # click.echo, dropping ESC [...m there, would not give).
        for_terminal(sys.stdout).write(text)
        sys.stdout.flush()
    finally:
        store.close()
