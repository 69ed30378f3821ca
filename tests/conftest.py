"""Shared fixtures (each engineer adds fixtures here with small edits)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from claudetrace.testing import FakeAPI
from claudetrace.testing.harness import bundled_cli


@pytest.fixture
def ct_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scrubbed claudetrace environment: no $CLAUDETRACE_DB, data dir under tmp.

    Returns the data directory (where unsaved-events cassettes land).
    """
    data_home = tmp_path / "xdg-data"
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    for name in ("CLAUDETRACE_DB", "CLAUDETRACE_REAL_CLI", "CLAUDETRACE_FLUSH_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    return data_home / "claudetrace"


@pytest.fixture
def db_path(tmp_path: Path, ct_env: Path) -> Path:
    """A fresh SQLite database file path (not created yet)."""
    return tmp_path / "claudetrace.db"


@pytest.fixture(scope="session")
def fake_api() -> Iterator[FakeAPI]:
    """One fake Anthropic API for the whole session (scenarios reset it before use)."""
    with FakeAPI() as api:
        yield api


@pytest.fixture(scope="session")
def real_claude() -> Path:
    """The real ``claude`` CLI bundled with claude_agent_sdk."""
    return bundled_cli()
