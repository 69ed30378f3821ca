"""A team's store on PostgreSQL at 1M to 10M events (``claudetrace bench store --events N``).

The store is built as a team's grows: 5,000 sessions spread over 60 days, their
lines a CLI's with partial messages on (per API message a ``message_start``,
text deltas, ``message_stop``, then the assistant line; a tool call and its
result, an answer, a ``result`` with usage and cost each turn).  About fifty
*template* sessions of varied lengths are stored through the real writer
(``Store.import_cassette``, as ``claudetrace import`` stores them), with one
old session alone saying a rare word and one of 20,000 lines; the templates are
then copied in bulk (:mod:`.replicate`) until the store holds ``sessions``
sessions and about ``events`` events.  A few copies are checked against their
templates before anything is timed (:func:`check_copies`), and the store's
footprint beside its lines' raw bytes is measured as built (:mod:`.footprint`).

What is timed (:func:`measure`), each against the target of issue 37:

- the first scrape of a ``claudetrace metrics serve`` just started and its
  next one; ``claudetrace metrics dump`` in a new process; a new exporter in
  this process;
- ``claudetrace search WORD`` of the rare word in a new process (beside
  ``claudetrace --version``, the floor of a new process) and in this one; the
  UI's search box with a word and a phrase every session says;
- the session list (the newest 50, and by tag), a page of the 20k-line session
  (its recording, the conversation's first part as the UI reads it, the raw
  tab's middle page), the Stats page's queries, each part apart (the first
  look, which reads the latency samples stored at ingest, beside the first look
  on a store stored without them, which folds the newest sessions' latencies
  and keeps them, and the later ones), and its tool table and latencies as
  they were read before;
- ``claudetrace prune --older-than 30d --yes`` while a proxy records bursts
  one after another: a burst's time to be listed complete before and during
  the prune, the session list read meanwhile, anyone waiting for a lock, what
  prune said, and the rows left without their recording (or event) after it
  and after a ``DELETE FROM recordings`` by hand.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model.events import Event
from ..store import Store, open_store, retention
from ..telemetry.latency import LatencyFold
from . import replicate
from .store import median_table, timed

DAY_NS = 86_400 * 1_000_000_000
RARE = "quetzalcoatl"
COMMON = "deploy"
MODELS = ("claude-opus-4-5", "claude-sonnet-4-5", "claude-haiku-4-5")
#: Lines of the one big session (a page of it is timed).
BIG_LINES = 20_000
#: Template sessions of ordinary lengths (each copied ``sessions / TEMPLATES`` times).
TEMPLATES = 48
#: Seconds between two lines of a session.
STEP_NS = 20_000_000
_VOCABULARY = (
    "the a of to and in that is for it with as on was by this are from or at an file "
    "function value line test error change return output input store event session "
    "model tool result message stream index query table column row release export "
    "import replay proxy writer reader capture record because which when then while "
    "parse write read open close count order first last next every each other "
)
_WORDS = _VOCABULARY.split()
_BASE62 = replicate._BASE62


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


class _Lines:
    """A CLI session's lines, made with ids of the CLI's shapes."""

    def __init__(self, rng: random.Random, model: str) -> None:
        self.rng, self.model = rng, model
        self.session = self.uuid()
        self.lines: list[tuple[str, bytes]] = []
        self.cost = 0.0
        self.usage = {"inputTokens": 0, "outputTokens": 0, "cacheReadInputTokens": 0,
                      "cacheCreationInputTokens": 0, "costUSD": 0.0}

    def uuid(self) -> str:
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{h[16:20]}-{h[20:32]}"

    def api_id(self, prefix: str) -> str:
        return prefix + "_01" + "".join(self.rng.choice(_BASE62) for _ in range(22))

    def words(self, count: int) -> str:
        return " ".join(self.rng.choice(_WORDS) for _ in range(count))

    def out(self, obj: dict[str, Any], direction: str = "out") -> None:
        self.lines.append((direction, _dumps(obj)))

    def envelope(self) -> dict[str, Any]:
        return {"parent_tool_use_id": None, "session_id": self.session, "uuid": self.uuid()}

    def init(self) -> None:
        self.out({"type": "system", "subtype": "init", "cwd": "/home/dev/project",
                  "session_id": self.session, "tools": ["Bash", "Read", "Edit", "Grep"],
                  "mcp_servers": [], "model": self.model, "permissionMode": "default",
                  "apiKeySource": "ANTHROPIC_API_KEY", "claude_code_version": "2.1.330",
                  "output_style": "default", "uuid": self.uuid()})

    def message(self, content: list[dict[str, Any]], deltas: int, usage: dict[str, int]) -> None:
        mid = self.api_id("msg")
        env = {"type": "stream_event", "session_id": self.session, "parent_tool_use_id": None}

        def stream(event: dict[str, Any]) -> None:
            self.out({**env, "event": event, "uuid": self.uuid()})

        stream({"type": "message_start", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}})
        stream({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}})
        for _ in range(deltas):
            stream({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": self.words(
                        self.rng.randrange(8, 30)) + " "}})
        stream({"type": "content_block_stop", "index": 0})
        stream({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": usage["output_tokens"]}})
        stream({"type": "message_stop"})
        self.out({"type": "assistant", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": self.model,
            "content": content, "stop_reason": None, "usage": usage}, **self.envelope()})

    def turn(self, n: int, deltas: int, *, rare: bool = False) -> None:
        prompt = f"turn {n}: {COMMON} the service, then {self.words(12)}"
        if rare:
            prompt += f" ({RARE})"
        self.out({"type": "user", "message": {"role": "user", "content": prompt},
                  "parent_tool_use_id": None, "session_id": self.session}, "in")
        tool = self.api_id("toolu")
        usage = {"input_tokens": 3 + n, "output_tokens": 40 + deltas,
                 "cache_read_input_tokens": 12_000 + 300 * n,
                 "cache_creation_input_tokens": 250}
        self.message([{"type": "text", "text": self.words(12)},
                      {"type": "tool_use", "id": tool, "name": "Bash",
                       "input": {"command": f"./{COMMON}.sh --step {n}",
                                 "description": self.words(5)}}],
                     deltas // 2, usage)
        output = f"{COMMON}ed step {n}: " + self.words(self.rng.randrange(20, 120))
        self.out({"type": "user", "message": {"role": "user", "content": [
            {"tool_use_id": tool, "type": "tool_result", "content": output, "is_error": False}]},
            **self.envelope(), "tool_use_result": {"stdout": output, "stderr": "",
                                                   "interrupted": False}})
        self.message([{"type": "text", "text": self.words(40)}], deltas - deltas // 2, usage)
        cost = 0.0004 * usage["output_tokens"] + 0.0000003 * usage["cache_read_input_tokens"]
        self.cost += cost
        for key, value in (("inputTokens", 2 * usage["input_tokens"]),
                           ("outputTokens", 2 * usage["output_tokens"]),
                           ("cacheReadInputTokens", 2 * usage["cache_read_input_tokens"]),
                           ("cacheCreationInputTokens", 2 * usage["cache_creation_input_tokens"]),
                           ("costUSD", cost)):
            self.usage[key] += value
        self.out({"type": "result", "subtype": "success", "is_error": False,
                  "duration_ms": 2 * deltas * 40, "duration_api_ms": 2 * deltas * 35,
                  "num_turns": 2, "result": self.words(40), "session_id": self.session,
                  "total_cost_usd": round(self.cost, 6), "usage": usage,
                  "modelUsage": {self.model: dict(self.usage)}, "permission_denials": [],
                  "uuid": self.uuid()})


def session_lines(seed: int, lines: int, model: str, *,
                  rare: bool = False) -> list[tuple[str, bytes]]:
    """A session of about ``lines`` lines (whole turns; at least one)."""
    made = _Lines(random.Random(seed), model)
    made.init()
    n = 0
    while n == 0 or len(made.lines) < lines:
        made.turn(n, made.rng.randrange(16, 48), rare=rare and n == 0)
        n += 1
    return made.lines


def _import(store: Store, lines: list[tuple[str, bytes]], started: int, name: str,
            tags: dict[str, str]) -> str:
    header = {"claudetrace": "cassette", "version": 1,
              "argv": ["claude", "--output-format", "stream-json", "--verbose",
                       "--input-format", "stream-json", "--include-partial-messages"],
              "started_ns": started, "ended_ns": started + (len(lines) + 1) * STEP_NS,
              "exit_code": 0, "name": name, "tags": tags}
    # As ``claudetrace import`` stores a cassette: the Stats page's latency
    # samples folded as the lines are stored (and copied with the row).
    return store.import_cassette((header, [
        Event(seq, d, (seq + 1) * STEP_NS, data, True,  # type: ignore[arg-type]
              started + (seq + 1) * STEP_NS) for seq, (d, data) in enumerate(lines)]),
        fold=LatencyFold)


@dataclass
class Built:
    """What :func:`build` made."""

    sessions: int
    events: int
    templates_s: float
    copies_s: float
    rare_id: str
    big_id: str
    #: (template id, copy number, copy id) of a few copies, for :func:`check_copies`.
    samples: list[tuple[str, int, str]] = field(default_factory=list)


def build(url: str, *, events: int, sessions: int = 5000, now_ns: int | None = None,
          say: Callable[[str], None] = lambda _: None) -> Built:
    """Fill the (empty) PostgreSQL database ``url`` with ``sessions`` sessions and
    about ``events`` events (see the module's text)."""
    import psycopg

    from ..store.postgres import plain_url

    rng = random.Random(37)
    now = time.time_ns() if now_ns is None else now_ns
    ordinary = sessions - 2
    mean = max(20, (events - BIG_LINES - 100) // max(1, ordinary))
    # Lengths from a quarter to twice and a half the mean (their mean the mean).
    spread = [0.25 + 2.25 * i / (TEMPLATES - 1) for i in range(TEMPLATES)]
    scale = sum(spread) / len(spread)
    store = open_store(url)
    started_at: dict[str, int] = {}
    began = time.perf_counter()
    try:
        rare_start = now - 60 * DAY_NS
        rare_id = _import(store, session_lines(0, 100, MODELS[0], rare=True), rare_start,
                          "team-rare", {"team": "infra"})
        big_start = now - DAY_NS
        big_id = _import(store, session_lines(1, BIG_LINES, MODELS[1]), big_start,
                         "team-big", {"team": "web"})
        templates = []
        for i, share in enumerate(spread):
            start = now - rng.randrange(59 * DAY_NS)
            rid = _import(store, session_lines(100 + i, int(mean * share / scale),
                                               MODELS[i % 3]),
                          start, f"team-{i}", {"team": ("infra", "web", "data")[i % 3]})
            templates.append(rid)
            started_at[rid] = start
        say(f"{len(templates) + 2} templates stored through the writer in "
            f"{time.perf_counter() - began:.1f} s")
    finally:
        store.close()
    templates_s = time.perf_counter() - began
    copies = []
    for k in range(ordinary - len(templates)):
        template = templates[k % len(templates)]
        target = now - rng.randrange(59 * DAY_NS)
        shift = round((target - started_at[template]) / replicate.HOUR_NS) * replicate.HOUR_NS
        copies.append(replicate.Copy(template, shift, k + 1))
    copies.sort(key=lambda c: started_at[c.template] + c.shift_ns)
    conninfo = plain_url(url)
    if conninfo is None:
        raise ValueError(f"not a postgresql+psycopg:// URL: {url}")
    began = time.perf_counter()
    with psycopg.connect(conninfo) as conn:
        tables = replicate.load_templates(conn, templates)
        copied = replicate.replicate(
            conn, tables, started_at, copies,
            progress=lambda done: say(f"  {done:,} of {len(copies):,} copies")
            if done % 1000 < 50 else None, pack=_line_packer(conn, templates))
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE")
        total = conn.execute("SELECT sum(event_count) FROM recordings").fetchone()
    copies_s = time.perf_counter() - began
    samples = [(c.template, c.number, replicate.copy_id(c.template, started_at[c.template], c))
               for c in copies[:: max(1, len(copies) // 4)][:4]]
    del copied
    return Built(sessions, int(total[0] if total else 0), templates_s, copies_s, rare_id,
                 big_id, samples)


def _line_packer(conn: Any, templates: list[str]) -> Callable[[bytes], tuple[bytes, int]] | None:
    """What packs the copies' lines as the indexer's writer packs a recording's
    (the templates, stored as ``import`` stores, keep theirs as recorded): against
    a dictionary trained on the templates' lines, stored as the writer stores
    one; None when there are too few to train on."""
    from ..store.packing import (
        POSTGRES_COMPRESSES_FROM,
        TRAIN_LINES,
        TRAIN_PREFIX,
        LinePacker,
        train_zstd,
    )

    lines = [bytes(row[0]) for row in conn.execute(
        "SELECT substr(data, 1, %s) FROM events WHERE rec IN "
        "(SELECT num FROM recordings WHERE id = ANY(%s)) LIMIT %s",
        (TRAIN_PREFIX, templates, TRAIN_LINES))]
    zdict = train_zstd(lines)
    if zdict is None:
        return None
    row = conn.execute("INSERT INTO line_dictionaries (data, created_ns) VALUES (%s, %s) "
                       "RETURNING id", (zdict, time.time_ns())).fetchone()
    conn.commit()
    return LinePacker(int(row[0]), zdict, keep_from=POSTGRES_COMPRESSES_FROM)


def _mapped(value: Any, number: int, template: str, copy_rid: str) -> Any:
    """``value`` of a template's as the copy numbered ``number`` should have it."""
    if isinstance(value, str):
        if value == template:
            return copy_rid
        return replicate.ID_PATTERN.sub(lambda m: replicate.new_id(m.group(), number), value)
    if isinstance(value, dict):
        return {k: _mapped(v, number, template, copy_rid) for k, v in value.items()}
    if isinstance(value, list):
        return [_mapped(v, number, template, copy_rid) for v in value]
    return value


#: ``sessions --json`` fields a copy has of its own: its id and times.
_OWN = {"id", "started_at", "started_ns", "ended_ns"}


def check_copies(url: str, built: Built) -> list[str]:
    """Each sample copy against its template: what ``sessions --json`` says of it
    (but its id and times), its summary folded again from its stored lines, its
    lines, its usage (``usage session``'s figures) and its search index rows.
    Returns what differs (nothing: the copies are as if recorded)."""
    from ..formats.facts import session_record
    from ..model import Session
    from ..model.summary import summary_columns
    from ..store.usage import store_reader
    from ..usage import recording_totals

    problems: list[str] = []
    store = open_store(url)
    try:
        for template, number, rid in built.samples:
            t, c = store.get(template), store.get(rid)
            want = {k: _mapped(v, number, template, rid)
                    for k, v in session_record(t).items() if k not in _OWN}
            got = {k: v for k, v in session_record(c).items() if k not in _OWN}
            if want != got:
                problems.append(f"{rid}: sessions --json differs from its template's: "
                                f"{sorted(k for k in want if want[k] != got.get(k))}")
            shift = c.started_ns - t.started_ns
            if (c.ended_ns or 0) - (t.ended_ns or 0) != shift or shift % replicate.HOUR_NS:
                problems.append(f"{rid}: times not shifted by whole hours alike")
            session = Session()
            lines_t = [ev.data for ev in store.iter_events(template)]
            for ev in store.iter_events(rid):
                session.add(ev)
            folded = summary_columns(session)
            stored = {k: getattr(c, k) for k in folded if hasattr(c, k)}
            if {k: folded[k] for k in stored} != stored:
                problems.append(f"{rid}: its lines fold to another summary than stored")
            lines_c = [ev.data for ev in store.iter_events(rid)]
            if [_mapped(x.decode(), number, template, rid).encode() for x in lines_t] != lines_c:
                problems.append(f"{rid}: its lines are not its template's with new ids")
            reader = store_reader(store)
            a, b = recording_totals(reader, template), recording_totals(reader, rid)
            if (a.input, a.output, a.cache_read, a.cache_creation, a.calls, round(a.cost, 9)) != \
                    (b.input, b.output, b.cache_read, b.cache_creation, b.calls, round(b.cost, 9)):
                problems.append(f"{rid}: usage differs from its template's")
            counts = [store.rows_per_table(r)[table]
                      for table in ("event_search", "event_tools", "usage_calls",
                                    "usage_hours", "usage_models") for r in (template, rid)]
            if counts[0::2] != counts[1::2]:
                problems.append(f"{rid}: rows per table {counts[1::2]}, template {counts[0::2]}")
    finally:
        store.close()
    return problems


@dataclass
class Figures:
    """The figures of one size: seconds per row (each the median of its runs), and notes."""

    built: Built
    rows: dict[str, list[float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def lines_out(self) -> list[str]:
        b = self.built
        out = [f"team store on PostgreSQL: {b.sessions:,} sessions, {b.events:,} events; "
               f"built in {b.templates_s + b.copies_s:.1f} s ({b.templates_s:.1f} s the "
               f"templates through the writer, {b.copies_s:.1f} s the copies by COPY)", ""]
        return [*out, *median_table(self.rows), "", *self.notes]


def _command(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "claudetrace", *args, "--db", url],
                          capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"claudetrace {' '.join(args)} failed: {done.stderr.strip()[-500:]}")
    return done


def _scrapes(url: str) -> tuple[float, float]:
    """Seconds of the first scrape of a ``claudetrace metrics serve`` just started
    (once it listens), and of the next one."""
    import urllib.request

    server = subprocess.Popen([sys.executable, "-m", "claudetrace", "metrics", "serve",
                               "--port", "0", "--db", url], stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        said = server.stderr.readline()
        if "serving store metrics on " not in said:
            raise RuntimeError(f"metrics serve did not start: {said.strip()}")
        address = said.rsplit(" ", 1)[1].strip()
        times = []
        for _ in range(2):
            start = time.perf_counter()
            with urllib.request.urlopen(address, timeout=600) as answer:
                answer.read()
            times.append(time.perf_counter() - start)
        return times[0], times[1]
    finally:
        server.terminate()
        server.wait(timeout=60)
        if server.stderr is not None:
            server.stderr.close()


def _burst(url: str, source: Path, lines: int) -> float:
    """Seconds from a ``proxy -- cat`` of ``source``'s lines starting until its
    recording is listed complete (both directions stored)."""
    from .proxy import _check_stored

    start = time.perf_counter()
    with source.open("rb") as given:
        subprocess.run([sys.executable, "-m", "claudetrace", "proxy", "--db", url, "--name",
                        "team-burst", "--", "cat"], stdin=given, stdout=subprocess.DEVNULL,
                       check=True, timeout=600)
    return time.perf_counter() - start + _check_stored(url, 2 * lines)


def stats_queries(store: Store, rows: dict[str, list[float]] | None = None) -> int:
    """What the Stats page asks the store (:mod:`claudetrace.ui.views.stats`):
    sessions and failures per day, the usage layer's days, tools' calls and
    failures, and the latency samples of the newest 20 sessions (their rows
    listed first; the samples kept of each, or folded from its lines and kept the
    first time: :func:`~claudetrace.telemetry.latency.recent_latencies`); returns
    the days counted.  Each part is timed into ``rows`` when given."""
    from ..store import browse
    from ..store.usage import store_reader
    from ..telemetry.latency import recent_latencies
    from ..ui.sessions import Filters
    from ..ui.stats import daily_usage, usage_days

    parts: dict[str, list[float]] = {} if rows is None else rows
    recordings = timed(parts, "  Stats: the newest 20 sessions' rows",
                       lambda: browse.list_sessions(store, Filters(), limit=20))
    per_day = timed(parts, "  Stats: sessions and failures per day",
                    lambda: browse.sessions_per_day(store))
    daily_usage(per_day)
    timed(parts, "  Stats: the usage layer's days", lambda: usage_days(store_reader(store)))
    timed(parts, "  Stats: the tool table", lambda: browse.tool_usage(store))
    timed(parts, "  Stats: latency samples of the newest 20 sessions",
          lambda: recent_latencies(store, recordings))
    return len(per_day)


def folded_latencies(store: Store) -> int:
    """The Stats page's latency samples of the newest 20 sessions folded from
    their lines, as the page computed them on every look before they were kept;
    how many samples."""
    from ..store import browse
    from ..telemetry.latency import fold_latencies, merge_samples
    from ..ui.sessions import Filters

    newest = browse.list_sessions(store, Filters(), limit=20)
    samples = merge_samples(fold_latencies(store, r.id) for r in newest if r.ended_ns is not None)
    return sum(len(v) for v in samples.values())


def session_page(store: Store, recording_id: str, length: int) -> int:
    """What a session's page reads (:mod:`claudetrace.ui.views.session`): its
    recording, the conversation's first part (lines read 1,000 at a time until
    its 100 items are complete), and the raw tab's middle page of 200 lines."""
    from ..store.browse import raw_page
    from ..ui.conversation import LazyConversation

    store.get(recording_id)
    lazy = LazyConversation(
        lambda start, limit: list(store.iter_events(recording_id, start_seq=start, limit=limit)),
        step=1000)
    items, _following = lazy.part(0, 100)
    raw_page(store, recording_id, offset=length // 2, limit=200)
    return len(items)


def measure(url: str, built: Built, *, repeat: int = 3, burst_lines: int = 20_000,
            workdir: str | None = None, prune: bool = True) -> Figures:
    """Time each target on the built store (see the module's text); the prune last
    (it deletes about half the store)."""
    from ..promexport import StoreMetrics
    from ..store import aggregate
    from ..store.browse import Filters, _tool_usage_from_events, list_sessions
    from ..store.search import recordings_saying, search
    from .shapes import shape_lines, write_input

    figures = Figures(built)
    rows = figures.rows
    store = open_store(url)
    try:
        everyone = [r.id for r in store.list_recordings()]
        for _ in range(repeat):
            first, later = _scrapes(url)
            rows.setdefault("/metrics, first scrape of a metrics serve just started",
                            []).append(first)
            rows.setdefault("/metrics, its next scrape", []).append(later)
            timed(rows, "metrics dump, a new process (interpreter start included)",
                  lambda: _command(url, "metrics", "dump"))
            timed(rows, "/metrics, cold, a new exporter in this process",
                  lambda: StoreMetrics(store).exposition())
            found = timed(rows, f"claudetrace search {RARE} (one old session), a new process",
                          lambda: _command(url, "search", RARE).stdout)
            if built.rare_id not in found:
                raise RuntimeError(f"search did not find {RARE!r} in {built.rare_id}")
            timed(rows, "claudetrace --version, a new process (the floor of the two above)",
                  lambda: subprocess.run([sys.executable, "-m", "claudetrace", "--version"],
                                         check=True, capture_output=True))
            hits = timed(rows, f"search {RARE!r} in this process", lambda: search(store, RARE))
            if [h.recording_id for h in hits] != [built.rare_id]:
                raise RuntimeError(f"search found {RARE!r} in {len(hits)} lines")
            timed(rows, f"UI search box {COMMON!r} (every session)",
                  lambda: recordings_saying(store, COMMON))
            timed(rows, f"UI search box {COMMON + ' the'!r} (a phrase every session says)",
                  lambda: recordings_saying(store, f"{COMMON} the"))
            timed(rows, "session list, newest 50", lambda: list_sessions(store, Filters(),
                                                                          limit=50))
            timed(rows, "session list by tag, newest 50",
                  lambda: list_sessions(store, Filters(tags=("team=infra",)), limit=50))
            timed(rows, f"{BIG_LINES // 1000}k-line session's page (conversation)",
                  lambda: session_page(store, built.big_id, BIG_LINES))
            # The first look, cold: the samples as stored on the way in (read),
            # then as a store of an earlier version had none (folded and kept).
            timed(rows, "Stats page's queries, the first look (samples stored at ingest)",
                  lambda: stats_queries(store))
            aggregate.forget_latencies(store, [r.id for r in list_sessions(
                store, Filters(), limit=20)])
            timed(rows, "Stats page's queries, the first look on a store without them "
                  "(folded, kept: as before)", lambda: stats_queries(store))
            timed(rows, "Stats page's queries", lambda: stats_queries(store, rows))
            timed(rows, "its latencies folded from the newest 20 sessions' lines (as before)",
                  lambda: folded_latencies(store))
            timed(rows, "its tool table from every tool row and result line (as before)",
                  lambda: _tool_usage_from_events(store, everyone))
        if not prune:
            return figures
        with tempfile.TemporaryDirectory(prefix="claudetrace-team-", dir=workdir) as tmp:
            source = Path(tmp) / "burst.ndjson"
            write_input(source, shape_lines("deltas", burst_lines))
            for _ in range(repeat):
                timed(rows, f"a {burst_lines // 1000}k-line burst listed complete, before prune",
                      lambda: _burst(url, source, burst_lines))
            figures.notes += _prune_during_bursts(url, store, source, burst_lines, rows)
    finally:
        store.close()
    return figures


def _prune_during_bursts(url: str, store: Store, source: Path, lines: int,
                         rows: dict[str, list[float]]) -> list[str]:
    """``prune --older-than 30d --yes`` in a process of its own, with bursts recorded
    and the session list read while it runs; what it said."""
    from ..store.browse import Filters, list_sessions

    size = store.tables_bytes()
    began = time.perf_counter()
    pruning = subprocess.Popen([sys.executable, "-m", "claudetrace", "prune", "--older-than",
                                "30d", "--yes", "--db", url], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    reads: list[float] = []
    stop = threading.Event()

    waits: list[int] = []

    def read() -> None:
        while not stop.is_set():
            start = time.perf_counter()
            list_sessions(store, Filters(), limit=50)
            reads.append(time.perf_counter() - start)
            waits.append(retention.waiting_locks(store))  # anyone waiting for a lock, now
            stop.wait(0.2)

    reader = threading.Thread(target=read)
    reader.start()
    bursts = 0
    try:
        time.sleep(1.0)
        while pruning.poll() is None:
            timed(rows, f"a {lines // 1000}k-line burst listed complete, during prune",
                  lambda: _burst(url, source, lines))
            bursts += 1
        out, err = pruning.communicate()
    finally:
        stop.set()
        reader.join()
    took = time.perf_counter() - began
    if pruning.returncode != 0:
        raise RuntimeError(f"prune failed: {err.strip()}")
    if reads:
        rows["session list during prune (slowest read)"] = [max(reads)]
        rows["session list during prune (median read)"] = [statistics.median(reads)]
    rows["prune --older-than 30d (whole command)"] = [took]
    return [f"prune ({bursts} bursts recorded meanwhile, {len(reads)} list reads; store "
            f"{size / 1e9:.2f} GB before, {store.tables_bytes() / 1e9:.2f} GB after; "
            f"a lock waited for in {sum(1 for w in waits if w)} of {len(waits)} looks):",
            *("  " + line for line in out.strip().splitlines()),
            f"rows left without their recording or event: {retention.orphans(store) or 'none'}",
            f"after a DELETE FROM recordings by hand: {_delete_by_hand(store) or 'none'}"]


def _delete_by_hand(store: Store) -> dict[str, int]:
    """Delete the oldest recording as a person in ``psql`` would (one statement);
    the rows it left behind (:func:`~claudetrace.store.retention.orphans`)."""
    oldest = store.list_recordings(limit=1, newest_first=False)
    if oldest:
        retention.delete_row_by_hand(store, oldest[0].id)
    return retention.orphans(store)


def run_team_bench(url: str, *, events: int, sessions: int = 5000, repeat: int = 3,
                   burst_lines: int = 20_000,
                   say: Callable[[str], None] = lambda _: None) -> list[str]:
    """Build the team's store in the empty PostgreSQL database ``url``, check a few
    copies, time the targets; the report's lines.  The database is left filled
    (less what the prune deleted): drop it after."""
    from ..errors import StoreError
    from ..store.postgres import plain_url

    if plain_url(url) is None:
        raise StoreError(f"bench store --events needs a postgresql+psycopg:// URL, not {url}")
    store = open_store(url)
    try:
        if store.list_recordings(limit=1):
            raise StoreError("bench store --events fills an empty database; this one holds "
                             "recordings (make one for the bench: CREATE DATABASE …)")
    finally:
        store.close()
    built = build(url, events=events, sessions=sessions, say=say)
    problems = check_copies(url, built)
    if problems:
        raise StoreError("copies differ from their templates: " + "; ".join(problems))
    say(f"{len(built.samples)} copies checked against their templates: sessions --json, "
        "their lines, their summary folded again, usage, index rows alike")
    import psycopg

    from . import footprint

    with psycopg.connect(plain_url(url) or "") as conn:
        stored = footprint.measure(conn)
    figures = measure(url, built, repeat=repeat, burst_lines=burst_lines)
    figures.notes[:0] = [*stored.lines_out(), ""]
    return figures.lines_out()
