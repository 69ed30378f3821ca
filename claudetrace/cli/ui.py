"""``claudetrace ui`` (the Streamlit session browser) and ``claudetrace bench ui``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..errors import ClaudeTraceError
from ._common import db_option, fail, read_store, reports_errors


def streamlit_argv(app: Path, host: str, port: int | None, headless: bool) -> list[str]:
    """The ``streamlit run`` command line for the app."""
    argv = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app),
        "--server.address",
        host,
        "--server.headless",
        "true" if headless else "false",
        "--browser.gatherUsageStats",
        "false",
        "--global.developmentMode",
        "false",
        # The browser is the store's UI, not a place to upload files into.
        "--server.maxUploadSize",
        "1",
        # A browser for recordings: no "Deploy" button or developer menu.
        "--client.toolbarMode",
        "minimal",
        # No watching the app's sources for edits: after every script run the
        # watcher walked the path of every imported module (pandas, plotly,
        # SQLAlchemy...) on the server's event loop, holding back the page's
        # first elements by 0.1-0.3 s.
        "--server.fileWatcherType",
        "none",
        # No full garbage collection after every script run: it walks every
        # object alive (0.06-0.2 s with a 200k-line session's spans kept) while
        # the page's last elements wait to be sent.
        "--runner.postScriptGC",
        "false",
    ]
    if port is not None:
        argv += ["--server.port", str(port)]
    return argv


def _free_port(host: str, port: int | None) -> int:
    """``port`` if it can be listened on at ``host``, else a one-line failure,
    told before the URL is announced; without ``port``, Streamlit's 8501 or the
    next free one (which the URL then names: Streamlit would pick it silently)."""
    import socket

    def free(number: int) -> OSError | None:
        try:
            with socket.create_server((host, number), reuse_port=False) as _server:
                return None
        except OSError as exc:
            return exc

    if port is not None:
        problem = free(port)
        if problem is not None:
            reason = os.strerror(problem.errno) if problem.errno else str(problem)
            fail(f"cannot listen on {host}:{port}: {reason} "
                 "(choose another with --port)")
        return port
    for number in range(8501, 8601):
        if free(number) is None:
            return number
    fail(f"no free port on {host} from 8501 to 8600: choose one with --port")
    raise AssertionError  # fail exits


@click.command("ui")
@db_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (anything but localhost exposes your recordings).",
)
@click.option(
    "--port", type=int, default=None, help="Port (default: Streamlit's, 8501 or the next free)."
)
@click.option(
    "--headless/--open-browser",
    default=True,
    show_default=True,
    help="Do not / do open a browser window.",
)
@reports_errors
def ui(db_url: str | None, host: str, port: int | None, headless: bool) -> None:
    """Browse recordings in a Streamlit app (sessions, conversation, timeline, diff, stats)."""
    try:
        import streamlit  # noqa: F401
    except ModuleNotFoundError:
        fail("the session browser needs the ui extra: pip install 'claudetrace[ui]'")
    from ..config import resolve_url

    url = resolve_url(db_url)
    # Fail here, in one line, if the database is unusable (or named but missing).
    read_store(db_url).close()
    app = Path(__file__).resolve().parent.parent / "ui" / "app.py"
    env = {**os.environ, "CLAUDETRACE_DB": url}
    from ..store.engine import hide_password

    port = _free_port(host, port)
    click.echo(f"claudetrace ui: {hide_password(url)} on http://{host}:{port}", err=True)
    argv = streamlit_argv(app, host, port, headless)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        # Become the server rather than wait for it: a signal meant for
        # `claudetrace ui` (a service manager's SIGTERM, a closed terminal's
        # SIGHUP) then stops Streamlit too instead of leaving it listening.
        os.execve(argv[0], argv, env)
    except OSError as exc:
        raise ClaudeTraceError(f"cannot start streamlit: {exc}") from exc


@click.command("ui")
@click.option(
    "--db",
    "db_url",
    metavar="URL",
    default=None,
    help="Database to seed and measure (default: a temporary SQLite file).",
)
@click.option("--sessions", "n_sessions", type=int, default=10_000, show_default=True)
@click.option(
    "--lines", type=int, default=50_000, show_default=True, help="Lines of the big session."
)
@click.option("--repeat", type=int, default=3, show_default=True, help="Timed runs of each page.")
@reports_errors
@click.option(
    "--browser",
    "chromium",
    metavar="CHROMIUM",
    default=None,
    help="Time the pages in this headless Chromium (needs playwright), from the navigation "
    "to the first content and to the page finished, instead of server-side.",
)
def ui_bench(
    db_url: str | None, n_sessions: int, lines: int, repeat: int, chromium: str | None
) -> None:
    """Seed a database (many sessions and one big one) and time the browser's pages."""
    from ..ui.bench import run_bench

    if chromium is not None:
        try:
            import playwright  # noqa: F401
        except ModuleNotFoundError:
            fail("--browser needs playwright: pip install playwright")
        if not os.access(chromium, os.X_OK):
            fail(f"--browser: {chromium} is not an executable")
    for line in run_bench(db_url, sessions=n_sessions, lines=lines, repeat=repeat,
                          browser=chromium):
        click.echo(line)
