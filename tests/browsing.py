"""Headless Chromium for the browser tests (the session browser, the HTML report).

Playwright cannot download its own browser here, so the tests use Debian's
``chromium`` package with the flags it needs to run headless in a container.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
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
