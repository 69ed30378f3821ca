"""ccusage (npm), pinned in ``tests/ccusage/package.json``, run offline on a folder of
transcripts: for the comparison tests and ``claudetrace bench usage``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent / "ccusage"
BIN = HERE / "node_modules" / ".bin" / "ccusage"


def ccusage_bin() -> Path | None:
    """The ccusage executable, installed on first use (``npm install`` in
    ``tests/ccusage``); None without npm or when it cannot be installed."""
    if BIN.exists():
        return BIN
    if shutil.which("npm") is None:
        return None
    done = subprocess.run(["npm", "install", "--no-audit", "--no-fund"], cwd=HERE,
                          capture_output=True, text=True, timeout=600, check=False)
    return BIN if done.returncode == 0 and BIN.exists() else None


def ccusage_or_skip() -> Path:
    """:func:`ccusage_bin`, or the test skipped saying why there is none."""
    import pytest

    found = ccusage_bin()
    if found is None:
        pytest.skip("ccusage needs npm (tests/ccusage/package.json), and it could not install")
    return found


def run_ccusage(binary: Path, config_dir: Path, *args: str) -> Any:
    """``ccusage ARGS --offline --json`` over ``config_dir/projects``, in UTC."""
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(config_dir), "TZ": "UTC"}
    done = subprocess.run([str(binary), *args, "--offline", "--json"], env=env,
                          capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout)
