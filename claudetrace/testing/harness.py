"""Run the real ``claude`` CLI offline, fast and isolated.

:func:`bundled_cli` finds the CLI that ships inside ``claude_agent_sdk``;
:func:`cli_env` builds the environment that points it at a
:class:`~claudetrace.testing.fakeapi.FakeAPI` and keeps it from reaching
anything else (telemetry, auto-update, error reporting) or reading the user's
own configuration; :func:`make_home` lays out a throw-away home directory.

Measured with CLI 2.1.330: with this environment a ``-p`` turn against the fake
API takes about a second, and the CLI's only HTTP traffic is
``POST /v1/messages?beta=true``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

#: Variables that would send the CLI elsewhere than the fake API, or make it use
#: the developer's own settings and credentials, if inherited from the caller.
#: The SDK merges its ``env`` over ``os.environ``, so they cannot be removed,
#: only blanked (the CLI treats an empty value as unset).
INHERITED_BLANKED: Final = (
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "CLAUDE_CONFIG_DIR",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
)

#: Name of the working directory :func:`make_home` creates inside the home.
PROJECT_DIR: Final = "project"

#: The API key the CLI is given; the fake API accepts anything.
FAKE_API_KEY: Final = "sk-ant-fake-key"


def bundled_cli() -> Path:
    """Path of the ``claude`` executable bundled in the installed claude_agent_sdk."""
    import claude_agent_sdk

    path = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    if not path.is_file():
        raise FileNotFoundError(f"claude_agent_sdk ships no bundled CLI at {path}")
    return path


def bundled_cli_version() -> str:
    """Version of the bundled CLI (from the SDK, without running it)."""
    from claude_agent_sdk._cli_version import __cli_version__

    return str(__cli_version__)


def make_home(root: str | os.PathLike[str]) -> Path:
    """Create an empty home under ``root`` with a ``project`` working directory.

    Returns the home; the CLI's working directory is ``home / PROJECT_DIR``.
    """
    home = Path(root)
    (home / PROJECT_DIR).mkdir(parents=True, exist_ok=True)
    return home


def cli_env(
    api_url: str,
    home: str | os.PathLike[str],
    *,
    base: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Environment overrides for running the CLI against a fake API.

    The result is meant both for ``ClaudeAgentOptions(env=...)`` (which the SDK
    merges over ``os.environ``) and, merged over ``base`` (default
    ``os.environ``), for a plain subprocess.  Inherited variables that would
    redirect the CLI or leak the developer's credentials are blanked.
    """
    base_env = os.environ if base is None else base
    home_path = os.fspath(home)
    env = {name: "" for name in INHERITED_BLANKED if base_env.get(name)}
    env.update(
        {
            "HOME": home_path,
            # The CLI reads its config below XDG dirs too; keep those in the home.
            "XDG_CONFIG_HOME": os.path.join(home_path, ".config"),
            "XDG_CACHE_HOME": os.path.join(home_path, ".cache"),
            "XDG_DATA_HOME": os.path.join(home_path, ".local", "share"),
            "ANTHROPIC_BASE_URL": api_url,
            "ANTHROPIC_API_KEY": FAKE_API_KEY,
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            # The fake API lives on 127.0.0.1: never route it through a proxy.
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
    )
    if extra:
        env.update(extra)
    return env


def subprocess_env(
    api_url: str, home: str | os.PathLike[str], *, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A complete environment (``os.environ`` plus :func:`cli_env`) for ``subprocess``."""
    env = dict(os.environ)
    env.update(cli_env(api_url, home, extra=extra))
    return env
