"""``claudetrace bench import``: a ``~/.claude/projects`` tree imported, side by side
with a naive loop and ccusage.

:func:`write_tree` makes a tree of Claude Code transcripts shaped like a real one
(per session a main file and subagents under ``<session>/subagents/``, messages
written as several lines with growing usage, tool results of a few KB), about
``size`` bytes over ``sessions`` sessions.  :func:`run_import_bench` times, in
fresh processes, taking turns:

- ``claudetrace import TREE`` into a fresh SQLite file, and again unchanged;
- a naive loop (:data:`NAIVE_LOOP`): ``json.loads`` of every line, the usage of
  each API message id summed per model, nothing stored;
- ``ccusage daily --json --offline`` on the same tree (``CLAUDE_CONFIG_DIR``),
  where ``npx`` is on PATH: installed from npm into a cache folder first, off the
  clock.

Each row is the median wall time of its runs, with its peak RSS (``wait4``).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..formats.unfolded import FOLD_ENV
from ..shim import self_command
from . import compile_bytecode

#: The naive loop: every line parsed, each message id's last usage summed per model.
NAIVE_LOOP = """
import json, pathlib, sys
last = {}
for path in pathlib.Path(sys.argv[1]).rglob("*.jsonl"):
    for raw in path.open("rb"):
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        msg = line.get("message") if isinstance(line, dict) else None
        if line.get("type") == "assistant" and isinstance(msg, dict) and "usage" in msg:
            last[msg.get("id")] = (msg.get("model"), msg["usage"])
totals = {}
for model, usage in last.values():
    into = totals.setdefault(model, [0, 0, 0, 0])
    for i, key in enumerate(("input_tokens", "output_tokens", "cache_read_input_tokens",
                             "cache_creation_input_tokens")):
        into[i] += usage.get(key) or 0
print(json.dumps(totals))
"""
_MODELS = ("claude-opus-4-5-20251101", "claude-sonnet-4-5-20250929")
_SUB_MODEL = "claude-haiku-4-5-20251001"
_WORDS = ("the", "checkout", "module", "refund", "test", "import", "returns", "value",
          "function", "because", "config", "order", "client", "path", "error", "build")


@dataclass
class Tree:
    """What :func:`write_tree` wrote."""

    root: Path
    sessions: int
    files: int = 0
    lines: int = 0
    bytes: int = 0


class _Writer:
    def __init__(self, rng: random.Random, sid: str, start: float) -> None:
        self.rng = rng
        self.sid = sid
        self.clock = start
        self.parent: str | None = None
        self.n = 0

    def text(self, words: int) -> str:
        return " ".join(self.rng.choice(_WORDS) for _ in range(words))

    def entry(self, kind: str, body: dict[str, object], **extra: object) -> str:
        self.n += 1
        self.clock += self.rng.uniform(0.2, 4.0)
        uid = f"{self.sid[:8]}-{self.n:06d}"
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.clock))
        line = {"parentUuid": self.parent, "isSidechain": False, "userType": "external",
                "cwd": "/home/dev/project", "sessionId": self.sid, "version": "2.1.12",
                "gitBranch": "main", **extra, "type": kind, **body, "uuid": uid,
                "timestamp": f"{stamp}.{int(self.clock * 1000) % 1000:03d}Z"}
        self.parent = uid
        return json.dumps(line, separators=(",", ":"))

    def message(self, model: str, blocks: list[dict[str, object]], **extra: object) -> list[str]:
        """One API message as the CLI writes it: a line per block, usage growing."""
        mid = f"msg_{self.rng.getrandbits(64):016x}"
        base = [self.rng.randint(1, 30), self.rng.randint(0, 4000), self.rng.randint(0, 60000)]
        out = []
        output = 0
        for block in blocks:
            # Never shrinking, as the CLI writes it: a tree whose usage shrank
            # within a message gave ccusage a larger output count than the last
            # value per message id that claudetrace counts.
            output += self.rng.randint(1, 50)
            usage = {"input_tokens": base[0], "cache_creation_input_tokens": base[1],
                     "cache_read_input_tokens": base[2],
                     "output_tokens": output,
                     "service_tier": "standard"}
            msg = {"id": mid, "type": "message", "role": "assistant", "model": model,
                   "content": [block], "stop_reason": None, "usage": usage}
            out.append(self.entry("assistant", {"message": msg}, requestId=f"req_{mid}",
                                  **extra))
        return out


def _session(rng: random.Random, folder: Path, sid: str, size: int, agents: int) -> Tree:
    tree = Tree(folder, 1)
    main = _Writer(rng, sid, 1_790_000_000 + rng.uniform(0, 5e6))
    lines: list[str] = []
    model = rng.choice(_MODELS)
    side_files: list[tuple[str, list[str]]] = []
    while sum(map(len, lines)) < size * 0.45:
        lines.append(main.entry("user", {"message": {"role": "user", "content": main.text(30)}}))
        for _ in range(rng.randint(1, 4)):
            tid = f"toolu_{rng.getrandbits(64):016x}"
            agent = len(side_files) < agents and rng.random() < 0.5
            use: dict[str, object] = {
                "type": "tool_use", "id": tid, "name": "Task" if agent else "Read",
                "input": {"prompt": main.text(20)} if agent else {"file_path": "/x.py"}}
            lines += main.message(model, [{"type": "thinking", "thinking": main.text(60),
                                           "signature": "sig"},
                                          {"type": "text", "text": main.text(40)}, use])
            extra: dict[str, object] = {}
            if agent:
                aid = f"{rng.getrandbits(32):08x}"
                side_files.append((aid, _side(rng, sid, aid, main.clock, size // 30)))
                extra = {"toolUseResult": {"status": "completed", "agentId": aid}}
            result = {"type": "tool_result", "tool_use_id": tid, "content": main.text(250)}
            lines.append(main.entry("user", {"message": {"role": "user", "content": [result]}},
                                    **extra))
        lines += main.message(model, [{"type": "text", "text": main.text(80)}])
    _write(folder / f"{sid}.jsonl", lines, tree)
    for aid, side in side_files:
        _write(folder / sid / "subagents" / f"agent-{aid}.jsonl", side, tree)
    return tree


def _side(rng: random.Random, sid: str, aid: str, start: float, size: int) -> list[str]:
    side = _Writer(rng, sid, start)
    extra = {"isSidechain": True, "agentId": aid}
    lines = [side.entry("user", {"message": {"role": "user", "content": side.text(20)}},
                        **extra)]
    while sum(map(len, lines)) < size:
        tid = f"toolu_{rng.getrandbits(64):016x}"
        lines += side.message(_SUB_MODEL, [{"type": "tool_use", "id": tid, "name": "Grep",
                                            "input": {"pattern": "x"}}], **extra)
        result = {"type": "tool_result", "tool_use_id": tid, "content": side.text(150)}
        lines.append(side.entry("user", {"message": {"role": "user", "content": [result]}},
                                **extra))
    lines += side.message(_SUB_MODEL, [{"type": "text", "text": side.text(40)}], **extra)
    return lines


def _write(path: Path, lines: list[str], tree: Tree) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(data)
    tree.files += 1
    tree.lines += len(lines)
    tree.bytes += len(data)


def write_tree(root: Path, *, sessions: int = 200, size: int = 100 << 20,
               agents: int = 16, seed: int = 0) -> Tree:
    """A ``projects`` tree of ``sessions`` sessions, about ``size`` bytes, with up to
    ``agents`` subagent files each, spread over 10 project folders."""
    rng = random.Random(seed)
    tree = Tree(root, sessions)
    for n in range(sessions):
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        made = _session(rng, root / f"-home-dev-project{n % 10}", sid, size // sessions, agents)
        tree.files += made.files
        tree.lines += made.lines
        tree.bytes += made.bytes
    return tree


@dataclass
class Row:
    """One tool's runs: wall seconds each, and the peak RSS (MiB) of the slowest."""

    name: str
    seconds: list[float] = field(default_factory=list)
    peak_mib: float = 0.0
    note: str = ""
    #: CPU seconds (user + system) of each run, where the row keeps them.
    cpu: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds) if self.seconds else float("nan")


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """Run ``argv`` (output discarded): wall seconds, peak RSS in MiB, exit status."""
    seconds, peak, status, _cpu = timed_cpu(argv, env)
    return seconds, peak, status


def timed_cpu(argv: list[str], env: dict[str, str] | None = None
              ) -> tuple[float, float, int, float]:
    """:func:`timed`, and the CPU seconds (user + system) the process took."""
    with open(os.devnull, "wb") as sink:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=sink, stderr=sink, env=env)
        _pid, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return seconds, usage.ru_maxrss / 1024, proc.returncode, usage.ru_utime + usage.ru_stime


def ccusage_command(cache: Path, version: str = "latest") -> tuple[list[str] | None, str]:
    """``ccusage daily --json --offline``, installed from npm into ``cache`` first:
    the command, or None and why not (no npm, the install or the program fails)."""
    npm = shutil.which("npm")
    if npm is None:
        return None, "no npm on PATH"
    install = subprocess.run(
        [npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund",
         f"ccusage@{version}"], capture_output=True, timeout=600, check=False)
    program = cache / "node_modules" / ".bin" / "ccusage"
    if install.returncode != 0 or not program.exists():
        return None, _first_line(install.stderr) or "npm install failed"
    tried = subprocess.run([str(program), "--version"], capture_output=True, timeout=120,
                           check=False)
    if tried.returncode != 0:
        return None, _first_line(tried.stderr or tried.stdout) or "it does not run"
    return [str(program), "daily", "--json", "--offline"], tried.stdout.decode().strip()


def _first_line(data: bytes) -> str:
    return (data.decode(errors="replace").strip().splitlines() or [""])[0]


def run_import_bench(*, sessions: int, size: int, repeat: int, tree_path: Path | None = None,
                     ccusage: str | None = "latest") -> tuple[Tree, list[Row]]:
    """Write the tree (or use ``tree_path``'s) and time each row ``repeat`` times;
    ``ccusage``: the version of ccusage to run beside (None: none)."""
    compile_bytecode()
    work = Path(tempfile.mkdtemp(prefix="claudetrace-bench-import-"))
    try:
        if tree_path is None:
            tree = write_tree(work / "claude" / "projects", sessions=sessions, size=size)
        else:
            tree = Tree(tree_path, sessions, bytes=sum(
                p.stat().st_size for p in tree_path.rglob("*.jsonl")))
        python = sys.executable
        # What the user waits for: the import's return (its usage stored first),
        # then the report; the pass that folds the sessions after it runs here in
        # the foreground, off those rows, its CPU time a row of its own.
        rows = [Row("claudetrace import"), Row("  then usage daily"),
                Row("  import + usage daily"), Row("  the pass after it (CPU)"),
                Row("  re-import, unchanged"), Row("import --wait (converting)"),
                Row("naive loop")]
        ccu, said = ccusage_command(work / "npm", ccusage) if ccusage else (None, "")
        if ccu is not None:
            rows.append(Row(f"ccusage {said} daily"))
        elif ccusage:
            rows.append(Row(f"ccusage@{ccusage}", note=f"not run: {said}"))
        env_cc = {**os.environ, "CLAUDE_CONFIG_DIR": str(tree.root.parent)}
        later = {**os.environ, FOLD_ENV: "later"}
        for run in range(repeat):
            db = work / f"run{run}.db"
            waited = work / f"run{run}-wait.db"
            cmd = [*self_command(), "import", str(tree.root), "--db", str(db)]
            report = [*self_command(), "usage", "daily", "--json", "--db", str(db)]
            fold = [python, "-m", "claudetrace.formats.unfolded", str(db)]
            for row, argv, env in (
                (rows[0], cmd, later), (rows[1], report, later), (rows[3], fold, None),
                (rows[4], cmd, later),
                (rows[5], [*self_command(), "import", "--wait", str(tree.root), "--db",
                           str(waited)], None),
                (rows[6], [python, "-c", NAIVE_LOOP, str(tree.root)], None),
                *([(rows[7], ccu, env_cc)] if ccu is not None else []),
            ):
                seconds, peak, status, cpu = timed_cpu(argv, env)
                row.seconds.append(cpu if row is rows[3] else seconds)
                row.cpu.append(cpu)
                row.peak_mib = max(row.peak_mib, peak)
                if status not in (0, 1):
                    row.note = f"exit status {status}"
            rows[2].seconds.append(rows[0].seconds[-1] + rows[1].seconds[-1])
            rows[2].peak_mib = max(rows[0].peak_mib, rows[1].peak_mib)
            for path in (db, waited):
                path.unlink(missing_ok=True)
        return tree, rows
    finally:
        shutil.rmtree(work, ignore_errors=True)


__all__ = ["NAIVE_LOOP", "Row", "Tree", "ccusage_command", "run_import_bench", "timed",
           "write_tree"]
