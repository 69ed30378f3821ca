"""``claudetrace bench usage``: ``usage`` reports against ccusage on the same transcripts.

A tree of made-up Claude Code transcripts (:mod:`claudetrace.testing.transcripts`)
is read by ccusage (``daily --offline --json``: the copy found, and a release
installed from npm off the clock, 20.0.24 unless told) and by
``claudetrace usage daily --import TREE`` into a fresh store (import, then the
report); then each report runs again on the filled store.  Every figure is the
median of ``repeat`` runs of the command as a user runs it (a process each, its
start-up included), taking turns, so ccusage and claudetrace run side by side.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..testing.transcripts import random_corpus, write_transcript


@dataclass
class Row:
    """One command's median time (and median CPU time, where measured)."""

    what: str
    seconds: float
    #: User and system CPU seconds of the command's process (its children's too).
    cpu: float | None = None


def find_ccusage(given: str | None) -> str | None:
    """ccusage: ``given``, else on PATH, else the copy the tests install in a checkout."""
    if given:
        return given
    found = shutil.which("ccusage")
    if found:
        return found
    checkout = Path(__file__).resolve().parents[2] / "tests" / "ccusage" / "node_modules" / ".bin"
    return str(checkout / "ccusage") if (checkout / "ccusage").exists() else None


def _timed(argv: list[str], env: dict[str, str]) -> float:
    return _run(argv, env)[0]


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user and system, of the process and what it waited
    for) of running ``argv``: on a loaded machine the CPU time is the steadier."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


#: The ccusage release installed from npm for the side-by-side row (the newest
#: that runs on Node 18; later ones need a newer Node).
CCUSAGE_NPM: Final = "20.0.24"


def run_usage_bench(*, sessions: int, calls: int, db_url: str | None, ccusage: str | None,
                    repeat: int, say: Callable[[str], None],
                    npm_version: str | None = CCUSAGE_NPM) -> list[Row]:
    """Write the tree, then time ccusage and claudetrace on it (see the module's text).

    ``ccusage``: a ccusage program to run too; ``npm_version``: the release of
    ccusage to install from npm and run (None: none)."""
    from .transcripts import ccusage_command

    with tempfile.TemporaryDirectory(prefix="claudetrace-bench-usage-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        for t in random_corpus(sessions, calls=calls, seed=5):
            write_transcript(root / "projects", t)
        size = sum(p.stat().st_size for p in (root / "projects").rglob("*.jsonl"))
        say(f"{sessions} sessions, {size / 1e6:.1f} MB of transcripts written in "
            f"{time.perf_counter() - started:.1f} s")
        env = {**os.environ, "CLAUDE_CONFIG_DIR": str(root), "TZ": "UTC",
               "CLAUDETRACE_PROGRESS": "0"}
        me = [sys.executable, "-m", "claudetrace", "usage"]
        fresh = iter(range(repeat + 1))

        def store() -> str:
            return db_url or f"sqlite:///{root}/claudetrace-{next(fresh)}.db"

        filled = store()
        _timed([*me, "daily", "--json", "--db", filled, "--import", str(root / "projects")],
               env)  # the store the later reports read
        commands: dict[str, Callable[[], list[str]]] = {}
        if npm_version:
            argv, said = ccusage_command(root / "npm", npm_version)
            if argv is None:
                say(f"ccusage@{npm_version} from npm: not run ({said})")
            else:
                label = said if said.startswith("ccusage") else f"ccusage {said}"
                commands[f"{label} daily --offline --json"] = argv.copy
        if ccusage:
            version = _version_of(ccusage)
            label = version if version.startswith("ccusage") else f"ccusage {version}".strip()
            commands[f"{label} daily --offline --json"] = lambda: [
                ccusage, "daily", "--offline", "--json"]
        if db_url is None:
            commands["claudetrace usage daily --json --import TREE (fresh store)"] = lambda: [
                *me, "daily", "--json", "--db", store(), "--import", str(root / "projects")]
        for report in ("daily", "monthly", "session", "blocks"):
            argv = [*me, report, "--json", "--db", filled]
            commands[f"claudetrace usage {report} --json (filled store)"] = argv.copy
        times: dict[str, list[float]] = {what: [] for what in commands}
        for _ in range(repeat):
            for what, command in commands.items():
                times[what].append(_timed(command(), env))
        return [Row(what, statistics.median(found)) for what, found in times.items()]


def _version_of(program: str) -> str:
    """``program --version``'s first line ('' when it says nothing or fails)."""
    try:
        done = subprocess.run([program, "--version"], capture_output=True, timeout=120,
                              check=False)
    except OSError:
        return ""
    return (done.stdout.decode(errors="replace").strip().splitlines() or [""])[0]


def report_lines(rows: list[Row]) -> Iterator[str]:
    """The rows, with each claudetrace row's ratio to each ccusage row's."""
    bases = [(r.what.split(" daily")[0], r.seconds) for r in rows
             if r.what.startswith("ccusage") and r.seconds]
    for row in rows:
        ratio = ", ".join(f"{row.seconds / seconds:.2f}x {name}" for name, seconds in bases
                          ) if row.what.startswith("claudetrace") else ""
        cpu = f"  CPU {row.cpu:.3f} s" if row.cpu is not None else ""
        yield f"{row.what:<62} {row.seconds:7.3f} s{cpu}" + (f"  {ratio}" if ratio else "")


#: The team store's shape: calls a session, seconds between them, and its models.
TEAM_CALLS: Final = 35
_TEAM_GAP_S: Final = 20
_TEAM_MODELS: Final = ("claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805",
                       "claude-haiku-4-5-20251001", "claude-3-5-haiku-20241022")


def seed_team(db_url: str, sessions: int, *, calls: int = TEAM_CALLS, days: int = 60,
              seed: int = 7) -> int:
    """Fill the store at ``db_url`` with ``sessions`` recordings of ``calls`` model
    calls each, stored in bulk by :meth:`Store.add_recordings` into ``usage_calls``
    and ``usage_hours`` as the importer writes them (``calls`` calls 20 s apart,
    four models, CLI costs, one call in seven priced by the table; started over
    ``days`` days, in five projects, tagged by team).  Returns the calls written."""
    import random

    from ..store import open_store
    from ..store.rows import USAGE_CALLS

    rng = random.Random(seed)
    store = open_store(db_url, create=True)
    start = int(time.time()) - days * 86_400
    written = 0
    try:
        batch = 1000
        for first in range(0, sessions, batch):
            recordings: list[tuple[dict[str, Any], Any, Any]] = []
            for n in range(first, min(sessions, first + batch)):
                rid = f"team{n:022d}"
                t0 = (start + rng.randrange(days * 86_400)) * 1_000_000_000
                found: list[tuple[object, ...]] = []
                for c in range(calls):
                    model = _TEAM_MODELS[(n + c // 9) % len(_TEAM_MODELS)]
                    i, o = rng.randrange(1, 50), rng.randrange(10, 2000)
                    cr, cc = rng.randrange(0, 60_000), rng.randrange(0, 4000)
                    estimate = c % 7 == 6
                    # As the session model gives a recording's calls: id, time,
                    # model, the four token counts, cost, where the cost came from.
                    found.append((
                        f"msg_{n:08d}_{c:04d}",
                        t0 + c * _TEAM_GAP_S * 1_000_000_000 + rng.randrange(10**9),
                        model, i, o, cr, cc, (i * 3 + o * 15 + cr * 0.3 + cc * 3.75) / 1e6,
                        "estimate" if estimate else "cli"))
                recordings.append(({
                    "id": rid, "name": f"job-{n % 50}", "tags": {"team": f"t{n % 8}"},
                    "cwd": f"/home/dev/project-{n % 5}", "source": "transcript",
                    "started_ns": t0, "cli_session_id": f"session-{n:08d}",
                    USAGE_CALLS: found}, [], []))
                written += len(found)
            store.add_recordings(recordings)
    finally:
        store.close()
    return written


#: The team bench's reports: each as a table and ``--json``, per model, narrowed.
TEAM_REPORTS: Final = (
    *((report, *form) for report in ("daily", "weekly", "monthly", "session", "blocks")
      for form in ((), ("--json",), ("--breakdown",))),
    ("session", "--json", "--project", "project-2", "--tag", "team=t3"),
    ("daily", "--json", "--model", "claude-opus-4-1-20250805", "-z", "Europe/Paris"),
)


def run_team_bench(*, sessions: int, db_url: str | None, repeat: int,
                   say: Callable[[str], None]) -> list[Row]:
    """A team's store (:func:`seed_team`, at ``db_url`` or a fresh SQLite file; a
    store that holds its recordings already is used as it is), then each report
    of :data:`TEAM_REPORTS` timed as a user runs it (a process each, start-up
    included, ``-z UTC`` unless it names a zone), taking turns; medians of the
    wall and of the CPU time."""
    with tempfile.TemporaryDirectory(prefix="claudetrace-bench-team-") as tmp:
        url = db_url or f"sqlite:///{tmp}/team.db"
        held = _team_sessions(url)
        if held:
            say(f"{held} sessions of a team's store already at the database: used as they are")
        else:
            started = time.perf_counter()
            calls = seed_team(url, sessions)
            say(f"{sessions} sessions, {calls} calls seeded in "
                f"{time.perf_counter() - started:.1f} s")
        env = {**os.environ, "CLAUDETRACE_PROGRESS": "0"}
        commands = {" ".join(args): [sys.executable, "-m", "claudetrace", "usage", *args,
                                     *(() if "-z" in args else ("-z", "UTC")), "--db", url]
                    for args in TEAM_REPORTS}
        times: dict[str, list[tuple[float, float]]] = {what: [] for what in commands}
        for _ in range(repeat):
            for what, argv in commands.items():
                times[what].append(_run(argv, env))
        return [Row(f"claudetrace usage {what}", statistics.median(w for w, _ in found),
                    statistics.median(c for _, c in found))
                for what, found in times.items()]


def _team_sessions(url: str) -> int:
    """How many of :func:`seed_team`'s recordings the store at ``url`` holds (none:
    no store yet)."""
    from ..store import open_store

    store = open_store(url, create=True)
    try:
        return store.count_recordings(id_prefix="team")
    finally:
        store.close()
