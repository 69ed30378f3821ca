"""Headless Chromium for the browser tests (the session browser, the HTML report).

Playwright cannot download its own browser here, so the tests use Debian's
``chromium`` package with the flags it needs to run headless in a container.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

#: Marks a test that needs the browser (skipped without Debian's chromium).
needs_chromium = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="needs Debian's chromium package"
)


@contextmanager
def launched() -> Iterator[Any]:
    """A headless Chromium, closed afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def ui_server(db_url: str, workdir: Path) -> Iterator[str]:
    """``claudetrace ui`` on ``db_url`` at a free localhost port; yields its base URL."""
    port = free_port()
    log = workdir / "server.log"
    env = {k: v for k, v in os.environ.items() if k != "CLAUDETRACE_DB"}
    env["HOME"] = str(workdir)  # keep Streamlit's config and credentials prompt away
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "claudetrace", "ui", "--db", db_url, "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as resp:
                        if resp.status == 200:
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"claudetrace ui did not start:\n{log.read_text()[-2000:]}")
                time.sleep(0.3)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
