"""A team's store: many sessions, and what reading them costs (``claudetrace bench store``).

The bench fills a store (a new SQLite file, or a database named with ``--db``)
with ``sessions`` recordings of a few CLI-shaped turns each (a prompt, an
assistant's tool call and its result, an answer, a result with usage and cost),
spread over 60 days, imported as ``claudetrace import`` stores them (so with
their summary columns, their Prometheus records and their words in the search
index).  One old session alone says a rare word.  Then, each the median of
``repeat`` rounds, through the same functions the commands use:

- the session list (the newest 50, the UI's and ``sessions``' query), and the
  list narrowed by a tag and a status;
- ``claudetrace search`` of the rare word and of a word every session says (the
  first 50 lines), and the UI's search box (every session saying the word);
- a cold ``/metrics`` scrape (a new exporter), a later one, and a cold scrape of
  the same store as it was before migration 0006 stored the records of each
  recording's figures (they are removed at the end, after the other rows): every
  ended recording folded from its events again, as on main before.

Recordings made in a database the user named are deleted at the end.
"""

from __future__ import annotations

import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model.events import Event
from ..store import Store, open_store

DAY_NS = 86_400 * 1_000_000_000
#: The word one old session alone says.
RARE = "quetzalcoatl"
#: A word every session says.
COMMON = "deploy"
MODELS = ("claude-opus-4-5", "claude-sonnet-4-5", "claude-haiku-4-5")


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def session_lines(n: int, turns: int, model: str, *, rare: bool = False) -> list[tuple[str, bytes]]:
    """A session's lines, ``(direction, line)``: the CLI's init, then ``turns`` turns."""
    sid = f"sess-{n:08d}"
    lines = [("out", _line({"type": "system", "subtype": "init", "session_id": sid,
                            "model": model, "tools": ["Bash"], "cwd": "/work",
                            "claude_code_version": "2.1.330", "permissionMode": "default"}))]
    for t in range(turns):
        tool = f"toolu_{n:08d}_{t}"
        prompt = f"turn {t} of task {n}: {COMMON} the service and check its logs"
        if rare and t == 0:
            prompt += f" ({RARE})"
        usage = {"input_tokens": 100 + t, "output_tokens": 20, "cache_read_input_tokens": 800}
        lines += [
            ("in", _line({"type": "user", "session_id": sid, "parent_tool_use_id": None,
                          "message": {"role": "user", "content": prompt}})),
            ("out", _line({"type": "assistant", "session_id": sid, "parent_tool_use_id": None,
                           "message": {"id": f"msg_{n}_{t}a", "role": "assistant", "model": model,
                                       "content": [{"type": "tool_use", "id": tool, "name": "Bash",
                                                    "input": {"command": f"./{COMMON}.sh {n}"}}],
                                       "usage": usage}})),
            ("out", _line({"type": "user", "session_id": sid, "parent_tool_use_id": None,
                           "message": {"role": "user", "content": [
                               {"type": "tool_result", "tool_use_id": tool,
                                "content": f"{COMMON}ed build {n}.{t}: 42 files, 0 errors",
                                "is_error": False}]}})),
            ("out", _line({"type": "assistant", "session_id": sid, "parent_tool_use_id": None,
                           "message": {"id": f"msg_{n}_{t}b", "role": "assistant", "model": model,
                                       "content": [{"type": "text",
                                                    "text": f"Done: build {n}.{t} is out."}],
                                       "usage": usage}})),
            ("out", _line({"type": "result", "subtype": "success", "is_error": False,
                           "session_id": sid, "num_turns": 2, "duration_ms": 1200,
                           "result": f"Done: build {n}.{t} is out.",
                           "total_cost_usd": 0.0123, "usage": usage,
                           "modelUsage": {model: {"inputTokens": 100, "outputTokens": 40,
                                                  "cacheReadInputTokens": 1600,
                                                  "cacheCreationInputTokens": 0,
                                                  "costUSD": 0.0123}}})),
        ]
    return lines


def fill(store: Store, sessions: int, turns: int, *, now_ns: int | None = None) -> int:
    """Import ``sessions`` recordings into ``store`` (the oldest says :data:`RARE`);
    returns how many events were stored."""
    rng = random.Random(37)
    now = time.time_ns() if now_ns is None else now_ns
    events = 0
    for n in range(sessions):
        started = now - DAY_NS * 60 if n == 0 else now - rng.randrange(59 * DAY_NS)
        lines = session_lines(n, turns, MODELS[n % len(MODELS)], rare=n == 0)
        header = {"claudetrace": "cassette", "version": 1, "argv": ["claude", "-p"],
                  "started_ns": started, "ended_ns": started + len(lines) * 10_000_000,
                  "exit_code": 0, "name": f"bench-store-{n}",
                  "tags": {"bench": "store", "team": ("infra", "web", "data")[n % 3]}}
        store.import_cassette((header, [
            Event(seq, d, (seq + 1) * 10_000_000, data, True,  # type: ignore[arg-type]
                  started + (seq + 1) * 10_000_000) for seq, (d, data) in enumerate(lines)]))
        events += len(lines)
    return events


@dataclass
class StoreReport:
    """The figures of one run."""

    sessions: int
    events: int
    fill_s: float
    rows: dict[str, list[float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def lines_out(self) -> list[str]:
        out = [f"store: {self.sessions:,} sessions, {self.events:,} events, filled in "
               f"{self.fill_s:.1f} s (through the store's import); each row the median of "
               f"{len(next(iter(self.rows.values()), [0]))}", ""]
        return [*out, *median_table(self.rows), "", *self.notes]


def median_table(rows: dict[str, list[float]]) -> list[str]:
    """A row's name and the median of its runs (seconds), a line each, under a heading."""
    width = max(len(name) for name in rows)
    return [f"{'':<{width}}   seconds",
            *(f"{name:<{width}}   {statistics.median(runs):7.3f}" for name, runs in rows.items())]


def timed(rows: dict[str, list[float]], name: str, work: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    result = work()
    rows.setdefault(name, []).append(time.perf_counter() - start)
    return result


def run_store_bench(*, sessions: int = 5000, turns: int = 4, repeat: int = 3,
                    db: str | None = None, workdir: str | None = None) -> StoreReport:
    """Fill a store and time reading it (see the module's text)."""
    from ..promexport import StoreMetrics
    from ..store.browse import Filters, list_sessions
    from ..store.retention import Criteria, matching, prune
    from ..store.search import recordings_saying, search

    with tempfile.TemporaryDirectory(prefix="claudetrace-bench-", dir=workdir) as tmp:
        store = open_store(db or str(Path(tmp) / "store.db"))
        try:
            start = time.perf_counter()
            events = fill(store, sessions, turns)
            report = StoreReport(sessions, events, time.perf_counter() - start)
            rows = report.rows
            infra = Filters(tags=("team=infra",), statuses=("ok",))
            for _ in range(repeat):
                listed = timed(rows, "session list (newest 50)",
                               lambda: list_sessions(store, Filters(), limit=50))
                timed(rows, "list by tag and status (newest 50)",
                      lambda: list_sessions(store, infra, limit=50))
                rare = timed(rows, f"search {RARE!r} (one old session)",
                             lambda: search(store, RARE))
                timed(rows, f"search {COMMON!r} (every session; first 50 lines)",
                      lambda: search(store, COMMON))
                saying = timed(rows, f"UI search box {COMMON + ' the'!r} (every session)",
                               lambda: recordings_saying(store, f"{COMMON} the"))
                timed(rows, "/metrics, cold (a new exporter)",
                      lambda: StoreMetrics(store).exposition())
            warm = StoreMetrics(store)
            warm.exposition()
            for _ in range(repeat):
                timed(rows, "/metrics, a later scrape", warm.exposition)
            if len(listed) < min(50, sessions) or len(rare) != 1 or len(saying) < sessions:
                raise RuntimeError("the store does not hold what the bench stored")
            for rec in list_sessions(store, Filters(tags=("bench=store",))):
                store.update_recording(rec.id, figures=None)  # as before migration 0006
            for _ in range(repeat):
                timed(rows, "/metrics, cold, every recording folded (before 0006)",
                      lambda: StoreMetrics(store).exposition())
            if db is not None:
                mine = matching(store, Criteria(tags={"bench": "store"}))
                prune(store, [r.id for r in mine.recordings])
                report.notes.append(f"deleted the bench's {len(mine.recordings)} recordings "
                                    "from the database named")
        finally:
            store.close()
    return report
