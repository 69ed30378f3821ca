"""The offline CLI harness (every scenario against the real bundled CLI, with no proxy, is
checked in tests/test_e2e_proxy.py, beside the proxied runs that share those runs)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from claudetrace.cassette import read_cassette
from claudetrace.testing.harness import (
    FAKE_API_KEY,
    PROJECT_DIR,
    bundled_cli_version,
    cli_env,
    make_home,
    subprocess_env,
)
from tests.scenarios import SCENARIOS


def test_cli_env_points_at_the_fake_api_and_isolates_home(tmp_path: Path) -> None:
    env = cli_env("http://127.0.0.1:9", tmp_path, base={"PATH": "/bin"})
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert env["ANTHROPIC_API_KEY"] == FAKE_API_KEY
    assert env["HOME"] == str(tmp_path)
    assert env["XDG_CONFIG_HOME"].startswith(str(tmp_path))
    assert env["DISABLE_TELEMETRY"] == env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert "PATH" not in env  # overrides only: the SDK merges them over os.environ


def test_cli_env_blanks_inherited_credentials_and_redirections(tmp_path: Path) -> None:
    base = {"ANTHROPIC_AUTH_TOKEN": "secret", "HTTPS_PROXY": "http://proxy:3128", "LANG": "C"}
    env = cli_env("http://127.0.0.1:9", tmp_path, base=base, extra={"FOO": "1"})
    assert env["ANTHROPIC_AUTH_TOKEN"] == ""
    assert env["HTTPS_PROXY"] == ""
    assert "LANG" not in env
    assert env["FOO"] == "1"
    # Variables the caller does not have are not invented.
    assert "CLAUDE_CONFIG_DIR" not in env


def test_subprocess_env_is_complete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "/somewhere/else")
    env = subprocess_env("http://127.0.0.1:9", tmp_path)
    assert env["PATH"] == os.environ["PATH"]
    assert env["CLAUDE_CONFIG_DIR"] == ""
    assert env["HOME"] == str(tmp_path)


def test_make_home_creates_the_project_dir(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    assert (home / PROJECT_DIR).is_dir()


def test_bundled_cli_is_executable(real_claude: Path) -> None:
    assert os.access(real_claude, os.X_OK)
    assert bundled_cli_version().count(".") == 2


FIXTURE_CASSETTES = sorted((Path(__file__).parent / "fixtures" / "cassettes").glob("*.ndjson"))


def test_every_scenario_has_a_recorded_fixture() -> None:
    assert {p.stem for p in FIXTURE_CASSETTES} == set(SCENARIOS)


@pytest.mark.parametrize("path", FIXTURE_CASSETTES, ids=lambda p: p.stem)
def test_fixture_cassettes_are_portable(path: Path) -> None:
    cassette = read_cassette(path)
    assert cassette.header["scenario"] == path.stem
    assert cassette.argv[0] == "claude"
    assert cassette.header["cwd"] == "/home/dev/project"
    assert [e.seq for e in cassette.events] == list(range(len(cassette.events)))
    text = path.read_text(encoding="utf-8")
    # Only placeholders: the recording machine's temp home must not leak.
    assert "ct-home-" not in text and "ct-fixtures-" not in text
    assert FAKE_API_KEY not in text
