"""Seed a large database and time the session browser on it (``claudetrace bench ui``).

The seed is built from a real recording (shipped with the package tests or the
built-in template below): ``sessions`` small recordings spread over 30 days
with varied models, costs and outcomes, and one recording of ``lines`` lines
made of repeated tool-using turns.  Pages are timed with Streamlit's
``AppTest`` (the server side of a page view: queries, shaping, element
serialisation) or, with ``browser``, as a person sees them: ``claudetrace ui``
serving headless Chromium, from the navigation to the first thing the page
shows and to the page finished (the script done and the view's last element
drawn).
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ClaudeTraceError
from ..model import Session
from ..model.events import Event
from ..model.summary import outcome_columns, summary_columns
from ..recording import RecordingInfo, new_recording_id
from ..store import Store, open_store
from ..store.rows import event_rows, info_columns
from ..testing.serving import NotAnswering, wait_until_answering

DAY_NS = 86_400_000_000_000
MODELS = ("claude-opus-4-5", "claude-sonnet-4-5", "claude-haiku-4-5")


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def template_turn(prompt: str, n: int) -> list[tuple[str, bytes]]:
    """One realistic tool-using turn (shaped as CLI 2.1.330 emits them), ids unique by ``n``."""
    tid = f"toolu_{n:08d}"
    rid = f"hook-{n:08d}"
    msg = f"msg_{n:08d}"
    usage = {"input_tokens": 120, "output_tokens": 24, "cache_read_input_tokens": 900}
    lines: list[tuple[str, dict[str, Any]]] = [
        (
            "in",
            {
                "type": "user",
                "message": {"role": "user", "content": prompt},
                "parent_tool_use_id": None,
                "session_id": "default",
            },
        ),
        ("out", {"type": "system", "subtype": "status", "status": "requesting", "session_id": "s"}),
        (
            "out",
            {"type": "stream_event", "event": {"type": "message_start", "message": {"id": msg}}},
        ),
    ]
    for k in range(6):
        lines.append(
            (
                "out",
                {
                    "type": "stream_event",
                    "event": {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "input_json_delta", "partial_json": f'{{"a": {k}'},
                    },
                },
            )
        )
    lines += [
        (
            "out",
            {
                "type": "assistant",
                "message": {
                    "id": msg,
                    "model": MODELS[0],
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": tid,
                            "name": "mcp__calc__add",
                            "input": {"a": n, "b": 40},
                        }
                    ],
                },
                "parent_tool_use_id": None,
                "session_id": "s",
            },
        ),
        (
            "out",
            {
                "type": "control_request",
                "request_id": rid,
                "request": {
                    "subtype": "hook_callback",
                    "callback_id": "hook_0",
                    "tool_use_id": tid,
                    "input": {"hook_event_name": "PreToolUse", "tool_name": "mcp__calc__add"},
                },
            },
        ),
        (
            "in",
            {
                "type": "control_response",
                "response": {
                    "subtype": "success",
                    "request_id": rid,
                    "response": {"continue": True},
                },
            },
        ),
        ("out", {"type": "stream_event", "event": {"type": "message_stop"}}),
        (
            "out",
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": tid,
                            "content": [{"type": "text", "text": str(n + 40)}],
                        }
                    ],
                },
                "parent_tool_use_id": None,
                "session_id": "s",
            },
        ),
        (
            "out",
            {
                "type": "stream_event",
                "event": {"type": "message_start", "message": {"id": msg + "b"}},
            },
        ),
        (
            "out",
            {
                "type": "assistant",
                "message": {
                    "id": msg + "b",
                    "model": MODELS[0],
                    "role": "assistant",
                    "content": [{"type": "text", "text": f"The sum is {n + 40}."}],
                    "usage": usage,
                },
                "parent_tool_use_id": None,
                "session_id": "s",
            },
        ),
        ("out", {"type": "stream_event", "event": {"type": "message_stop"}}),
        (
            "out",
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "duration_ms": 420,
                "num_turns": 2,
                "result": f"The sum is {n + 40}.",
                "total_cost_usd": 0.002 * (n + 1),
                "usage": usage,
                "session_id": "s",
            },
        ),
    ]
    return [(d, _line(o)) for d, o in lines]


def _init_lines(model: str) -> list[tuple[str, bytes]]:
    return [
        (
            "in",
            _line(
                {
                    "type": "control_request",
                    "request_id": "req_1_0001",
                    "request": {"subtype": "initialize", "hooks": {}},
                }
            ),
        ),
        (
            "out",
            _line(
                {
                    "type": "control_response",
                    "response": {
                        "subtype": "success",
                        "request_id": "req_1_0001",
                        "response": {"commands": []},
                    },
                }
            ),
        ),
        (
            "out",
            _line(
                {
                    "type": "system",
                    "subtype": "init",
                    "model": model,
                    "claude_code_version": "2.1.330",
                    "permissionMode": "default",
                    "session_id": "s",
                    "tools": ["Bash", "mcp__calc__add"],
                }
            ),
        ),
    ]


def _events(lines: list[tuple[str, bytes]], start_ns: int, step_ns: int) -> list[Event]:
    return [
        Event(seq, d, (seq + 1) * step_ns, data, True, start_ns + (seq + 1) * step_ns)  # type: ignore[arg-type]
        for seq, (d, data) in enumerate(lines)
    ]


def _finished(info: RecordingInfo, events: list[Event]) -> dict[str, Any]:
    """The columns of a recording of ``events`` that has ended (as the indexer
    would leave them), observing the stream into ``info``."""
    session = Session()
    for ev in events:
        session.add(ev)
        info.observe(ev)
    end = info.started_ns + (events[-1].t_ns if events else 0)
    return {
        **info_columns(info),
        # With the calls' usage rows, so the Stats page's figures have calls to sum.
        **summary_columns(session, started_ns=info.started_ns),
        **outcome_columns(session.outcome(ended=True, exit_code=info.exit_code)),
        "ended_ns": end,
        "last_seen_ns": end,
    }


def _store_recording(
    store: Store, info: RecordingInfo, events: list[Event], *, batch: int = 5000
) -> None:
    store.create_recording(info)
    for start in range(0, len(events), batch):
        store.write_batch(info.id, events[start : start + batch])
    columns = _finished(info, events)
    store.write_rows(info.id, [], [], {k: v for k, v in columns.items() if k != "id"})


#: Small recordings stored a transaction (one insert of their rows, one COPY or
#: batched insert of their lines).
SEED_BATCH = 1000


def seed(store: Store, *, sessions: int, lines: int, now_ns: int | None = None) -> str:
    """Fill ``store`` with small recordings and one of ``lines`` lines; returns the big
    one's id.  The small ones go in :data:`SEED_BATCH` at a time
    (:meth:`Store.add_recordings`)."""
    rng = random.Random(5)
    now = time.time_ns() if now_ns is None else now_ns
    pending: list[tuple[dict[str, Any], Any, Any]] = []
    for i in range(sessions):
        started = now - rng.randrange(30 * DAY_NS)
        model = MODELS[i % len(MODELS)]
        body = _init_lines(model) + template_turn(f"task {i}: add {i} and 40", i)
        info = RecordingInfo(
            id=new_recording_id(started),
            argv=["claude", "--output-format", "stream-json"],
            started_ns=started,
            name=f"bench-{i}",
            tags={"bench": "1", "batch": str(i % 7)},
            source="import",
            exit_code=1 if rng.random() < 0.05 else 0,
        )
        events = _events(body, started, rng.randrange(1, 40) * 1_000_000)
        pending.append((_finished(info, events), *event_rows(info.id, events)))
        if len(pending) == SEED_BATCH or i == sessions - 1:
            store.add_recordings(pending)
            pending = []
    body = _init_lines(MODELS[0])
    n = 0
    while len(body) < lines:
        body += template_turn(f"big turn {n}", n)
        n += 1
    info = RecordingInfo(
        id=new_recording_id(now),
        argv=["claude"],
        started_ns=now,
        name="bench-big",
        source="import",
        exit_code=0,
    )
    _store_recording(store, info, _events(body[:lines], now, 2_000_000))
    return info.id


def _timed(at: Any, timeout: float) -> float:
    start = time.perf_counter()
    at.run(timeout=timeout)
    elapsed = time.perf_counter() - start
    if at.exception:
        raise RuntimeError(f"page failed: {at.exception[0].value}")
    return elapsed


def measure(
    db_url: str, big_id: str, *, repeat: int = 3, find: str = ""
) -> dict[str, list[float]]:
    """Seconds per run of: the session list, and each tab of the big session.

    One untimed run first pays the process's one-off costs (imports, opening the
    store), as a running ``claudetrace ui`` server has before anyone looks.  The
    first timed run of each view is cold for its own caches (the trace's span tree).
    No browser draws anything here, so no page waits for one to draw its header
    (:func:`.views.common.drawn_first`): what is timed is the server's work.
    """
    from streamlit.testing.v1 import AppTest

    from .views.common import METRICS_DRAWN

    app = str(Path(__file__).with_name("app.py"))
    os.environ["CLAUDETRACE_DB"] = db_url
    warm = AppTest.from_file(app, default_timeout=120)
    warm.query_params["session"] = "none-such"
    _timed(warm, 120)
    out: dict[str, list[float]] = {}
    for label, params in _views(big_id, find).items():
        times = []
        for _ in range(repeat):
            at = AppTest.from_file(app, default_timeout=120)
            for key, value in params.items():
                at.query_params[key] = value
            at.session_state[METRICS_DRAWN] = True
            if label in _PAGES:
                # The page's script run alone (AppTest runs the entry script first,
                # which only routes): the navigation's run, untimed, then the page's.
                _timed(at, 120)
                at.switch_page(f"views/{_PAGES[label]}.py")
            times.append(_timed(at, 120))
        out[label] = times
    return out


def _views(big_id: str, find: str = "") -> dict[str, dict[str, str]]:
    """The views timed, as query parameters (``find``: what the find view looks for,
    :data:`FIND_TEXT` by default)."""
    return {
        _FLOOR: {"session": "none-such"},
        "session list": {},
        "big session: conversation": {"session": big_id},
        "big session: trace": {"session": big_id, "tab": "trace"},
        # A text in one prompt of the big session, found over all of its lines
        # (the whole recording read and folded on the first run).
        "big session: find": {"session": big_id, "find": find or FIND_TEXT},
        "big session: raw": {"session": big_id, "tab": "raw"},
        "big session: control plane": {"session": big_id, "tab": "control"},
        "stats": {},
    }


#: What the find view looks for: one prompt of the big session's (its 778th turn).
FIND_TEXT = "big turn 777"


def find_text(big_lines: int) -> str:
    """What the find view looks for in a big session of ``big_lines`` lines:
    :data:`FIND_TEXT`, or where the session has fewer turns than that, the prompt of
    the turn seven tenths of the way in (so the view always has one match to draw:
    no turn's number has it as a prefix)."""
    turns = max(1, (big_lines - len(_init_lines(MODELS[0]))) // len(template_turn("", 0)))
    return FIND_TEXT if turns > 777 else f"big turn {turns * 7 // 10}"


#: Views that are a page of their own (its URL path), not the sessions page's.
_PAGES = {"stats": "stats"}


#: What a view shows first, and the element it draws last (CSS selectors).
_FLOOR = "no such session (floor)"
_FIRST = {"session list": "[data-testid='stMetric']", _FLOOR: "[data-testid='stAlert']",
          "stats": ".ct-bars .ct-bar"}
_LAST = {
    _FLOOR: "[data-testid='stAlert']",
    "session list": "[data-testid='stDataFrame']",
    "big session: conversation": "[data-testid='stChatMessage']",
    "big session: trace": "table.ct-trace",
    "big session: find": ".ct-find-list",
    "big session: raw": "[data-testid='stDataFrame']",
    "big session: control plane": "[data-testid='stDataFrame'], [data-testid='stAlert']",
    "stats": "[data-testid='stDataFrame']",
}
#: Chromium's flags to run headless in a container (no sandbox, no GPU, no network).
CHROMIUM_ARGS = (
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
)
#: Watches the page from its first frame: the time (ms since the navigation began)
#: the first content is drawn, and the time the script is done and the last
#: element drawn; checked every animation frame, so the times are the page's own.
_WATCH_JS = """
(() => {
  const first = %s, last = %s;
  const seen = window.__claudetrace = {first: null, done: null};
  const look = () => {
    if (seen.first === null && document.querySelector(first)) seen.first = performance.now();
    const app = document.querySelector("[data-testid='stApp']");
    if (seen.first !== null && app && document.querySelector(last)
        && app.getAttribute("data-test-script-state") === "notRunning") {
      seen.done = performance.now();
      return;
    }
    requestAnimationFrame(look);
  };
  requestAnimationFrame(look);
})();
"""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(db_url: str, workdir: str | os.PathLike[str]) -> Iterator[str]:
    """``claudetrace ui`` on ``db_url`` at a free localhost port, once it answers; yields
    its base URL and stops it afterwards.  Its output goes to ``server.log`` in
    ``workdir`` (also its ``HOME``, so Streamlit's config stays out of the way)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "CLAUDETRACE_DB"}
    env["HOME"] = os.fspath(workdir)
    log = Path(workdir) / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "claudetrace", "ui", "--db", db_url, "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            try:
                wait_until_answering(f"{base}/_stcore/health", proc)
            except NotAnswering as exc:
                tail = log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"claudetrace ui did not start ({exc}):\n{tail}") from None
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


#: Seconds a timed view may take before the bench gives up on it.
VIEW_TIMEOUT = 300


def measure_browser(
    db_url: str, big_id: str, *, repeat: int = 3, chromium: str = "/usr/bin/chromium",
    views: Sequence[str] | None = None, find: str = "",
) -> dict[str, list[tuple[float, float]]]:
    """Per view, ``(first, done)`` seconds from the navigation: to the first content
    the view shows (the header's figures), and to the page finished (the script
    done and the view's last element drawn), in headless Chromium.

    One untimed view first pays the server's one-off costs (imports, opening the
    store) and loads Streamlit's scripts into the browser's cache, as for a person
    who has the browser open; each timed run is a new page (a new Streamlit
    session).  The first run of each view is cold for the server's caches.
    ``views`` names the views to time (all by default).
    """
    from playwright.sync_api import TimeoutError as PageTimeout
    from playwright.sync_api import sync_playwright

    workdir = tempfile.mkdtemp(prefix="claudetrace-ui-bench-")
    out: dict[str, list[tuple[float, float]]] = {}
    with serving(db_url, workdir) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium, args=list(CHROMIUM_ARGS), headless=True)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        warm = context.new_page()
        warm.add_init_script(_WATCH_JS % (json.dumps(_FIRST[_FLOOR]),
                                          json.dumps(_LAST[_FLOOR])))
        warm.goto(f"{base}/?session=none-such")
        warm.wait_for_function("window.__claudetrace.done !== null", timeout=120_000)
        warm.close()
        for label, params in _views(big_id, find).items():
            if views is not None and label not in views:
                continue
            query = _PAGES.get(label, "") + "?" + "&".join(f"{k}={v}" for k, v in params.items())
            watch = _WATCH_JS % (json.dumps(_FIRST.get(label, "[data-testid='stMetric']")),
                                 json.dumps(_LAST[label]))
            times = []
            for _ in range(repeat):
                page = context.new_page()
                page.add_init_script(watch)
                page.goto(f"{base}/{query}", wait_until="commit")
                try:
                    page.wait_for_function("window.__claudetrace.done !== null",
                                           timeout=VIEW_TIMEOUT * 1000)
                except PageTimeout:
                    raise ClaudeTraceError(
                        f"bench ui: the view {label!r} did not finish in {VIEW_TIMEOUT} s "
                        f"(no {_LAST[label]} drawn; see {Path(workdir) / 'server.log'})"
                    ) from None
                seen = page.evaluate("window.__claudetrace")
                times.append((seen["first"] / 1000, seen["done"] / 1000))
                page.close()
            out[label] = times
        browser.close()
    return out


def run_bench(
    db_url: str | None, *, sessions: int, lines: int, repeat: int, browser: str | None = None
) -> Iterator[str]:
    """Seed (unless the database holds the bench data already), measure, report lines of text.

    ``browser`` is a Chromium executable: the views are timed in it (see
    :func:`measure_browser`) instead of server-side.
    """
    tmp = None
    if db_url is None:
        tmp = tempfile.mkdtemp(prefix="claudetrace-ui-bench-")
        db_url = os.path.join(tmp, "bench.db")
    store = open_store(db_url)
    url = store.url
    big = [r for r in store.list_recordings(limit=50) if r.name == "bench-big"]
    if big and store.count_recordings() >= sessions + 1:
        big_id, big_lines = big[0].id, big[0].event_count
        yield f"reusing seeded database {url}"
    else:
        start = time.perf_counter()
        big_id, big_lines = seed(store, sessions=sessions, lines=lines), lines
        took = time.perf_counter() - start
        yield f"seeded {sessions:,} sessions + one of {lines:,} lines in {took:.1f} s ({url})"
    store.close()
    if browser is not None:
        yield "in headless Chromium: seconds to the first content / to the page finished"
        for label, pairs in measure_browser(url, big_id, repeat=repeat, chromium=browser,
                                            find=find_text(big_lines)).items():
            runs = " ".join(f"{a:.2f}/{b:.2f}" for a, b in pairs)
            best = min(pairs, key=lambda p: p[1])
            yield (f"{label:<28} first run {pairs[0][0]:5.2f} / {pairs[0][1]:5.2f} s   "
                   f"best {best[0]:5.2f} / {best[1]:5.2f} s   (runs: {runs})")
        return
    for label, times in measure(db_url, big_id, repeat=repeat,
                                   find=find_text(big_lines)).items():
        runs = " ".join(f"{t:.2f}" for t in times)
        yield f"{label:<28} first {times[0]:5.2f} s   best {min(times):5.2f} s   (runs: {runs})"
