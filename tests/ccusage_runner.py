"""ccusage (npm), pinned in ``tests/ccusage/package.json``, run offline on a folder of
transcripts: for the comparison tests and ``claudetrace bench usage``.

That is ccusage 18, which prices every cache write at the 5-minute rate: its
comparisons use transcripts without 1-hour writes.  ccusage 20
(``tests/ccusage20/package.json``, :data:`CCUSAGE_20`) prices them at the 1-hour
rate, as claudetrace does.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent / "ccusage"
BIN = HERE / "node_modules" / ".bin" / "ccusage"
#: ccusage 20's folder (it prices 1-hour cache writes; 18 does not).
CCUSAGE_20 = Path(__file__).parent / "ccusage20"


def ccusage_bin(folder: Path = HERE) -> Path | None:
    """The ccusage executable pinned in ``folder`` (ccusage 18 unless told),
    installed on first use (``npm install`` there); None without npm or when it
    cannot be installed.

    Several test processes (pytest-xdist's workers, other sessions on the same tree)
    may ask at once: the install runs under an advisory lock on ``package.json``, and
    an install counts as done once npm has written its hidden lock file, last.
    """
    binary = folder / "node_modules" / ".bin" / "ccusage"
    done_marker = folder / "node_modules" / ".package-lock.json"
    if binary.exists() and done_marker.exists():
        return binary
    if shutil.which("npm") is None:
        return None
    with open(folder / "package.json", "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (binary.exists() and done_marker.exists()):
            subprocess.run(["npm", "install", "--no-audit", "--no-fund"], cwd=folder,
                           capture_output=True, text=True, timeout=600, check=False)
    return binary if binary.exists() and done_marker.exists() else None


def ccusage_or_skip(folder: Path = HERE) -> Path:
    """:func:`ccusage_bin`, or the test skipped saying why there is none."""
    import pytest

    found = ccusage_bin(folder)
    if found is None:
        pytest.skip(f"ccusage needs npm (tests/{folder.name}/package.json), "
                    "and it could not install")
    return found


def run_ccusage(binary: Path, config_dir: Path, *args: str) -> Any:
    """``ccusage ARGS --offline --json`` over ``config_dir/projects``, in UTC."""
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(config_dir), "TZ": "UTC"}
    done = subprocess.run([str(binary), *args, "--offline", "--json"], env=env,
                          capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout)
