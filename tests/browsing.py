"""Headless Chromium for the browser tests (the session browser, the HTML report).

Playwright cannot download its own browser here, so the tests use Debian's
``chromium`` package with the flags it needs to run headless in a container.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from claudetrace.ui.bench import CHROMIUM_ARGS as BENCH_CHROMIUM_ARGS
from claudetrace.ui.bench import serving

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = list(BENCH_CHROMIUM_ARGS)

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


@contextmanager
def ui_server(db_url: str, workdir: Path) -> Iterator[str]:
    """``claudetrace ui`` on ``db_url`` at a free localhost port; yields its base URL."""
    with ExitStack() as stack:
        try:
            base = stack.enter_context(serving(db_url, workdir))
        except RuntimeError as exc:
            pytest.fail(str(exc))
        yield base
