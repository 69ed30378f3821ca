"""Record every scenario through the proxy into ``tests/fixtures/cassettes/``.

Run from the repository root::

    python -m tests.record_fixtures              # all scenarios
    python -m tests.record_fixtures plain hooks  # some of them

Each scenario of :mod:`tests.scenarios` runs against the bundled CLI and the
fake API through a recording shim (``claudetrace shim``) into a temporary
SQLite store; the recording is exported with ``claudetrace export --format
cassette``, sanitised (:func:`claudetrace.sanitize.sanitize_cassette`: the
temporary home becomes ``/home/dev``, the working directory
``/home/dev/project``, secrets are redacted, machine fields dropped) and the
real CLI's path in ``argv`` becomes ``claude``, as in the reference samples.
The cassettes feed the telemetry, replay and UI unit tests.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from claudetrace.cassette import read_cassette, write_cassette
from claudetrace.indexer import open_settled_store
from claudetrace.sanitize import sanitize_cassette
from claudetrace.testing import FakeAPI
from claudetrace.testing.harness import bundled_cli, make_home
from tests.scenarios import SCENARIOS, check_scenario, run_scenario

#: Where the recorded cassettes are committed.
FIXTURES = Path(__file__).parent / "fixtures" / "cassettes"


def claudetrace(*args: str) -> str:
    """Run a claudetrace command; its stdout, or SystemExit with its stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "claudetrace", *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"claudetrace {args[0]} failed: {done.stderr.strip()}")
    return done.stdout


def newest_recording(db: Path, known: set[str], timeout: float = 15.0) -> str:
    """The id of the recording made since ``known``, once the proxy has finished it."""
    store = open_settled_store(str(db))
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            new = [r for r in store.list_recordings() if r.id not in known]
            if len(new) == 1 and new[0].ended_ns is not None:
                return new[0].id
            time.sleep(0.05)
    finally:
        store.close()
    raise SystemExit("the proxy did not finish its recording")


def recording_ids(db: Path) -> set[str]:
    store = open_settled_store(str(db))
    try:
        return {r.id for r in store.list_recordings()}
    finally:
        store.close()


def record(names: Sequence[str], out_dir: Path = FIXTURES) -> list[Path]:
    """Record ``names`` and write one sanitised cassette per scenario."""
    out_dir.mkdir(parents=True, exist_ok=True)
    real = bundled_cli()
    written: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="ct-fixtures-") as tmp, FakeAPI() as api:
        root = Path(tmp)
        db = root / "claudetrace.db"
        shim = root / "claude"
        claudetrace("shim", str(shim), "--real", str(real), "--db", str(db))
        for name in names:
            home = make_home(root / f"home-{name}")
            known = recording_ids(db)
            result = run_scenario(name, shim, api, home=home)
            check_scenario(result)
            recording = newest_recording(db, known)
            exported = root / f"{name}.export.ndjson"
            claudetrace("export", recording, "--db", str(db), "-o", str(exported))
            cassette = sanitize_cassette(read_cassette(exported), home=str(home))
            argv = list(cassette.header.get("argv") or [])
            if argv:
                argv[0] = "claude"
            header = {**cassette.header, "argv": argv, "scenario": name}
            target = out_dir / f"{name}.ndjson"
            write_cassette(target, header, cassette.events)
            written.append(target)
            print(f"{target.name}: {len(cassette.events)} events", file=sys.stderr)
    return written


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: record the named scenarios (all by default)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO", help=", ".join(SCENARIOS))
    parser.add_argument("-o", "--out", type=Path, default=FIXTURES, help="output directory")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.scenarios) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}")
    record(args.scenarios or sorted(SCENARIOS), args.out)


if __name__ == "__main__":
    main()
