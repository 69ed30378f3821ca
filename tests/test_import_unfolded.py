"""``import`` stores usage first and folds after (claudetrace.formats.unfolded).

Each test imports the same trees twice: once converting every session before
the command returns (``CLAUDETRACE_FOLD=now``, as the rest of the suite does)
and once usage first.  ``usage`` must say the same at once; once folded (by
the pass, or by a reader that needs the whole recording) every table must hold
what the converting import stored (rows compared without SQLite's rowids,
which the fold's rewrite of a recording's lines moves).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from claudetrace.bench.transcripts import write_tree
from claudetrace.cli import cli
from claudetrace.formats import folding as folding_pass
from claudetrace.formats import unfolded as folding
from claudetrace.store import open_store
from claudetrace.store.unfolded import pending
from tests.test_store_sqlite import _read_only_mount_works

FIXTURES = Path(__file__).parent / "fixtures"
#: What a recording keeps of its files' metadata (tests/test_import_dump.py).
_STAT = re.compile(r'"fingerprint": "[0-9a-f]+"|"peeked": \{[^{}]*\}')
#: SQLite's full-text index keeps the lines' rowids in its own tables.
_ROWID_TABLES = ("event_search_content", "event_search_data", "event_search_docsize",
                 "event_search_idx")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "in"
    write_tree(root / "bench" / "projects", sessions=8, size=2 << 20, agents=3)
    shutil.copytree(FIXTURES / "transcripts", root / "fixtures")
    return root


def _import(db: str, *paths: str, fold: str | None = "later",
            monkeypatch: pytest.MonkeyPatch) -> str:
    with monkeypatch.context() as patch:
        if fold is None:
            patch.delenv(folding.FOLD_ENV, raising=False)
        else:
            patch.setenv(folding.FOLD_ENV, fold)
        done = CliRunner().invoke(cli, ["import", *paths, "--db", db])
    assert done.exit_code in (0, 1), done.output
    return done.output


def _usage(db: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    monkeypatch.setenv("TZ", "UTC")
    got = {}
    for report in ("daily", "monthly", "session"):
        done = CliRunner().invoke(cli, ["usage", report, "--json", "--db", db,
                                        "--timezone", "UTC"])
        assert done.exit_code == 0, done.output
        got[report] = json.loads(done.output)
    return got


def _rows(db: Path, root: Path) -> dict[str, list[str]]:
    conn = sqlite3.connect(db)
    try:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'alembic_version'"
            " ORDER BY name")]
        # event_tools' id is a surrogate key too, given in the order rows were written.
        return {name: sorted(_STAT.sub("<stat>", repr(row[1:] if name == "event_tools" else row)
                                       .replace(str(root), "<root>"))
                             for row in conn.execute(f'SELECT * FROM "{name}"'))
                for name in names if name not in _ROWID_TABLES}
    finally:
        conn.close()


def _search_words(db: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    try:
        return sorted(conn.execute(
            "SELECT e.rec, e.seq, s.words FROM event_search s JOIN events e "
            "ON e.rowid = s.rowid").fetchall())
    finally:
        conn.close()


def _fold_all(url: str) -> int:
    store = open_store(url)
    try:
        return folding.fold_all(store)
    finally:
        store.close()


def test_usage_at_once_and_every_table_after_the_pass(
        tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    direct, first = tmp_path / "direct.db", tmp_path / "first.db"
    said = _import(str(direct), str(tree), fold="now", monkeypatch=monkeypatch)
    assert _import(str(first), str(tree), monkeypatch=monkeypatch).splitlines()[-1] == \
        said.splitlines()[-1]  # the same summary line
    store = open_store(str(first))
    waiting = pending(store)
    store.close()
    assert len(waiting) > 8
    assert _usage(str(first), monkeypatch) == _usage(str(direct), monkeypatch)
    assert _rows(first, tree) != _rows(direct, tree)  # not folded: the lines as they are
    assert _fold_all(str(first)) == len(waiting)
    assert _rows(first, tree) == _rows(direct, tree)
    assert _search_words(first) == _search_words(direct)
    assert _usage(str(first), monkeypatch) == _usage(str(direct), monkeypatch)


def test_a_reimport_is_a_no_op_and_a_grown_file_stays_consistent(
        tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    direct, first = tmp_path / "direct.db", tmp_path / "first.db"
    _import(str(first), str(tree), monkeypatch=monkeypatch)
    again = _import(str(first), str(tree), monkeypatch=monkeypatch)
    assert re.search(r"import: 0 imported, 0 updated, \d+ unchanged", again), again
    grown = next(p for p in sorted((tree / "bench").rglob("*.jsonl"))
                 if "subagents" not in p.parts)
    lines = grown.read_bytes().splitlines(keepends=True)
    grown.write_bytes(b"".join(lines[: len(lines) // 2]))
    # Stored usage first, folded, then grown: usage first again, then folded again.
    _fold_all(str(first))
    grown.write_bytes(b"".join(lines))
    assert ", 1 updated," in _import(str(first), str(tree), monkeypatch=monkeypatch)
    _import(str(direct), str(tree), fold="now", monkeypatch=monkeypatch)
    assert _usage(str(first), monkeypatch) == _usage(str(direct), monkeypatch)
    _fold_all(str(first))
    assert _rows(first, tree) == _rows(direct, tree)


def test_readers_fold_first_or_say_so(tree: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    direct, first = tmp_path / "direct.db", tmp_path / "first.db"
    _import(str(direct), str(tree), fold="now", monkeypatch=monkeypatch)
    _import(str(first), str(tree), monkeypatch=monkeypatch)
    store = open_store(str(first))
    waiting = pending(store)
    store.close()
    runner = CliRunner()
    # search, the session list's search and doctor say so, one line each.
    said = (f"{len(waiting)} imported sessions still being indexed: their lines are not "
            "searched yet\n")
    for argv in (["search", "hello"], ["sessions", "--search", "hello"],
                 ["sessions", "--search", "hello", "--json"], ["sessions"]):
        found = runner.invoke(cli, [*argv, "--db", str(first)])
        assert found.stderr.count(said) == ("hello" in argv), argv
    doctor = runner.invoke(cli, ["doctor", "--db", str(first)])
    assert f"{waiting[0]}  still being indexed" in doctor.output
    # prune leaves them (as a session still being imported).
    pruned = runner.invoke(cli, ["prune", "--db", str(first), "--source", "claude-code",
                                 "--yes"])
    assert pruned.exit_code == 0, pruned.output
    store = open_store(str(first))
    assert pending(store) == waiting
    store.close()
    # show, export and otel fold the one they read.
    rid = waiting[0]
    shown = runner.invoke(cli, ["show", rid, "--db", str(first)])
    want = runner.invoke(cli, ["show", rid, "--db", str(direct)])
    assert shown.exit_code == 0 and shown.output == want.output
    rid = waiting[1]
    exported = runner.invoke(cli, ["export", rid, "--no-redact", "--db", str(first)])
    want = runner.invoke(cli, ["export", rid, "--no-redact", "--db", str(direct)])
    assert exported.exit_code == 0 and exported.output == want.output
    store = open_store(str(first))
    assert pending(store) == waiting[2:]
    store.close()


def test_a_fold_stopped_half_way_is_done_again(
        tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    direct, first = tmp_path / "direct.db", tmp_path / "first.db"
    _import(str(direct), str(tree), fold="now", monkeypatch=monkeypatch)
    _import(str(first), str(tree), monkeypatch=monkeypatch)
    store = open_store(str(first))
    rid = pending(store)[0]
    from claudetrace.store.api import Batch

    def killed(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(Batch, "commit", killed)
        with pytest.raises(KeyboardInterrupt):
            folding.fold(store, rid)
    assert rid in pending(store)
    assert folding.fold(store, rid) and not folding.fold(store, rid)
    store.close()
    _fold_all(str(first))
    assert _rows(first, tree) == _rows(direct, tree)


def _wait_folded(url: str, seconds: float = 240.0) -> None:
    store = open_store(url)
    try:
        deadline = time.monotonic() + seconds
        while pending(store):
            assert time.monotonic() < deadline, "the pass did not finish"
            time.sleep(0.2)
    finally:
        store.close()


@pytest.mark.slow
def test_two_imports_and_their_passes_at_once_then_a_killed_pass(
        tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    direct, first = tmp_path / "direct.db", tmp_path / "first.db"
    _import(str(direct), str(tree), fold="now", monkeypatch=monkeypatch)
    env = {k: v for k, v in os.environ.items() if k != folding.FOLD_ENV}
    command = [sys.executable, "-m", "claudetrace", "import", str(tree), "--db", str(first)]
    runs = [subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE) for _ in range(2)]
    for run in runs:
        _out, err = run.communicate(timeout=240)
        assert run.returncode in (0, 1), err.decode()
    _wait_folded(str(first))
    assert _rows(first, tree) == _rows(direct, tree)
    # Stored usage first again (every file grown by nothing but its stat: a rewrite),
    # then a pass killed at once and one let run.
    second = tmp_path / "second.db"
    _import(str(second), str(tree), monkeypatch=monkeypatch)
    killed = subprocess.Popen([sys.executable, "-m", "claudetrace.formats.unfolded",
                               str(second)], env=env)
    time.sleep(1.0)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert _fold_all(str(second)) >= 0
    assert _rows(second, tree) == _rows(direct, tree)


@pytest.mark.slow
def test_import_starts_the_pass(tree: Path, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    direct, first = tmp_path / "direct.db", tmp_path / "first.db"
    _import(str(direct), str(tree), fold="now", monkeypatch=monkeypatch)
    _import(str(first), str(tree), fold=None, monkeypatch=monkeypatch)
    _wait_folded(str(first))
    assert _rows(first, tree) == _rows(direct, tree)


@pytest.fixture
def pg_store(pg_server: str) -> Iterator[str]:
    import psycopg

    from tests.test_store_postgres import fresh_database

    yield fresh_database(pg_server, "m_import_unfolded")
    admin = pg_server.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS m_import_unfolded WITH (FORCE)")


def _pg_rows(url: str) -> dict[str, object]:
    store = open_store(url)
    try:
        out: dict[str, object] = {}
        for rid in sorted(r.id for r in store.list_recordings()):
            rec = store.get(rid)
            columns = {c: getattr(rec, c) for c in (
                "started_ns", "ended_ns", "event_count", "byte_count", "turns", "model_calls",
                "tool_calls", "tool_errors", "input_tokens", "output_tokens", "cost_usd",
                "cost_source", "is_error", "outcome", "models", "figures")}
            out[rid] = ([(e.seq, e.direction, e.t_ns, e.data, e.eol, e.fields.type)
                         for e in store.iter_events(rid)], columns)
        return out
    finally:
        store.close()


def _run(*argv: str, fold: str = "later") -> str:
    """The command in a process of its own (a PostgreSQL store's connections go with it)."""
    env = {**os.environ, folding.FOLD_ENV: fold, "TZ": "UTC"}
    done = subprocess.run([sys.executable, "-m", "claudetrace", *argv], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode in (0, 1), done.stderr
    return done.stdout


def _usage_of(db: str) -> list[object]:
    return [json.loads(_run("usage", report, "--json", "--timezone", "UTC", "--db", db))
            for report in ("daily", "monthly", "session")]


@pytest.mark.usefixtures("ct_env")
def test_on_postgres(tree: Path, tmp_path: Path, pg_store: str) -> None:
    direct = str(tmp_path / "direct.db")
    _run("import", str(tree), "--db", direct, fold="now")
    _run("import", str(tree), "--db", pg_store)
    # Told through psycopg alone: an unchanged tree's import opens no store for it.
    assert folding_pass._waiting(pg_store, lambda: pytest.fail("the store was opened"))
    store = open_store(pg_store)
    waiting = pending(store)
    store.close()
    assert waiting
    assert _usage_of(pg_store) == _usage_of(direct)
    assert _run("show", waiting[0], "--db", pg_store) == _run("show", waiting[0], "--db", direct)
    assert _fold_all(pg_store) == len(waiting) - 1
    assert not folding_pass._waiting(pg_store, lambda: pytest.fail("the store was opened"))
    assert _usage_of(pg_store) == _usage_of(direct)
    assert _pg_rows(pg_store) == _pg_rows(f"sqlite:///{direct}")


def test_metrics_count_a_recording_once_it_is_folded(
        tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from claudetrace.promexport.store import StoreMetrics

    direct, first = tmp_path / "direct.db", tmp_path / "first.db"
    _import(str(direct), str(tree), fold="now", monkeypatch=monkeypatch)
    _import(str(first), str(tree), monkeypatch=monkeypatch)
    stores = [open_store(str(direct)), open_store(str(first))]
    try:
        want = stores[0] and StoreMetrics(stores[0]).exposition()
        metrics = StoreMetrics(stores[1])
        before = metrics.exposition()  # a scrape before the pass: tool figures to come
        assert "claudetrace_store_tokens_total" in before
        folding.fold_all(stores[1])
        # The same collector (it remembers what it counted) after the pass.
        assert _sorted_samples(metrics.exposition()) == _sorted_samples(want)
    finally:
        for store in stores:
            store.close()


def _sorted_samples(text: str) -> list[str]:
    return sorted(line for line in text.splitlines()
                  if line and not line.startswith("#") and "_created" not in line
                  and "scrape_duration" not in line)


def test_usage_import_stores_usage_first(tree: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    direct, first = tmp_path / "direct.db", tmp_path / "first.db"
    _import(str(direct), str(tree), fold="now", monkeypatch=monkeypatch)
    monkeypatch.setenv(folding.FOLD_ENV, "later")
    done = CliRunner().invoke(cli, ["usage", "daily", "--json", "--timezone", "UTC", "--import",
                                    str(tree), "--db", str(first)])
    assert done.exit_code in (0, 1), done.output
    store = open_store(str(first))
    assert pending(store)
    store.close()
    assert _usage(str(first), monkeypatch) == _usage(str(direct), monkeypatch)


def test_a_recording_deleted_by_hand_takes_its_mark_along(
        tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite with foreign keys off (the ``sqlite3`` shell's default) and PostgreSQL's
    ``TRUNCATE recordings`` (its children have no foreign key) both leave no row of
    ``unfolded`` behind: a trigger takes it, as it takes the recording's other rows."""
    db = tmp_path / "store.db"
    _import(str(db), str(tree), monkeypatch=monkeypatch)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA foreign_keys").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM unfolded").fetchone()[0] > 0
        with conn:
            conn.execute("DELETE FROM recordings")
        assert conn.execute("SELECT count(*) FROM unfolded").fetchone() == (0,)


@pytest.mark.usefixtures("ct_env")
def test_truncating_recordings_by_hand_empties_unfolded_on_postgres(
        tree: Path, pg_store: str) -> None:
    import psycopg

    from claudetrace.store.postgres import plain_url

    _run("import", str(tree), "--db", pg_store)
    conninfo = plain_url(pg_store)
    assert conninfo is not None
    with psycopg.connect(conninfo, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM unfolded").fetchone()[0] > 0
        conn.execute("TRUNCATE recordings")  # refused while unfolded had a foreign key
        assert conn.execute("SELECT count(*) FROM unfolded").fetchone() == (0,)


#: What ``sessions --json`` says is not known before the pass (null, with
#: ``"indexing": true``): what only the converted session tells.
_FOLDED_FIELDS = ("turns", "num_turns", "tool_calls", "tool_errors", "events", "bytes")
#: The /metrics series that count a recording once it is folded (its converted
#: lines, turns and tool calls).
_FOLDED_SERIES = ("claudetrace_store_events_total", "claudetrace_store_bytes_total",
                  "claudetrace_store_turns_total", "claudetrace_store_tool_")


def _sessions(db: str) -> dict[str, dict[str, object]]:
    done = CliRunner().invoke(cli, ["sessions", "--json", "-n", "0", "--db", db])
    assert done.exit_code == 0, done.output
    return {s["id"]: s for s in json.loads(done.output)}


def _write_shapes(folder: Path) -> None:
    """Sessions of the shapes whose status, end or warnings only their turns tell:
    an interrupt the session went on after, a last turn waiting on a tool, an API
    error retried and one the turn ended on, a damaged line and a time out of
    range, a last prompt with no answer."""
    def user(sid: str, n: int, at: str, content: object) -> dict[str, object]:
        return {"parentUuid": None, "isSidechain": False, "type": "user", "sessionId": sid,
                "cwd": "/home/dev/hand", "version": "2.1.330", "uuid": f"{sid}-u{n}",
                "timestamp": f"2025-03-01T10:00:{at}Z",
                "message": {"role": "user", "content": content}}

    def answer(sid: str, n: int, at: str, content: list[object], *,
               model: str = "claude-opus-4-5-20251101", **more: object) -> dict[str, object]:
        usage = {"input_tokens": 0 if more else 10, "output_tokens": 0 if more else 20}
        return {"parentUuid": None, "isSidechain": False, "type": "assistant",
                "sessionId": sid, "cwd": "/home/dev/hand", "version": "2.1.330",
                "uuid": f"{sid}-a{n}", "timestamp": f"2025-03-01T10:00:{at}Z",
                "message": {"id": f"msg_{sid[:8]}_{n}", "role": "assistant", "model": model,
                            "content": content, "usage": usage}, **more}

    text = [{"type": "text", "text": "done"}]
    bash = [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]
    ids = [f"aaaa000{n}-0000-4000-8000-00000000000{n}" for n in range(1, 6)]
    shapes: list[list[object]] = [
        [user(ids[0], 0, "00.000", "go"), answer(ids[0], 0, "01.000", bash),
         user(ids[0], 1, "05.000", [{"type": "tool_result", "tool_use_id": "toolu_1",
                                     "content": "Interrupted", "is_error": True}]),
         user(ids[0], 2, "05.100", [{"type": "text",
                                     "text": "[Request interrupted by user for tool use]"}]),
         user(ids[0], 3, "10.000", "something else"), answer(ids[0], 3, "11.000", text)],
        [user(ids[1], 0, "00.000", "hi"), answer(ids[1], 0, "01.000", text),
         user(ids[1], 1, "10.000", "run ls"), answer(ids[1], 1, "11.000", bash)],
        [user(ids[2], 0, "00.000", "hi"),
         {"type": "system", "subtype": "api_error", "level": "error", "sessionId": ids[2],
          "error": {"status": 529}, "uuid": f"{ids[2]}-s", "isSidechain": False,
          "timestamp": "2025-03-01T10:00:00.500Z"},
         answer(ids[2], 0, "01.000", text), user(ids[2], 1, "10.000", "again"),
         answer(ids[2], 1, "11.000", [{"type": "text", "text": "API Error: 500"}],
                model="<synthetic>", isApiErrorMessage=True, error="unknown")],
        [user(ids[3], 0, "00.000", "hi"), '{"type":"assistant","torn',
         {**user(ids[3], 1, "00.000", "far"), "timestamp": "9999-03-04T10:00:00Z"},
         answer(ids[3], 0, "01.000", text)],
        [user(ids[4], 0, "00.000", "hi"), answer(ids[4], 0, "01.000", text),
         user(ids[4], 1, "10.000", "are you there")],
    ]
    folder.mkdir(parents=True)
    for sid, lines in zip(ids, shapes, strict=True):
        (folder / f"{sid}.jsonl").write_text("".join(
            (line if isinstance(line, str) else json.dumps(line, separators=(",", ":")))
            + "\n" for line in lines))


def _metrics(db: str) -> list[str]:
    done = CliRunner().invoke(cli, ["metrics", "dump", "--db", db])
    assert done.exit_code == 0, done.output
    return _sorted_samples(done.output)


def test_sessions_usage_and_metrics_say_the_same_before_and_after_the_pass(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every field of ``sessions --json`` (but the turns, tool calls and lines, not
    known yet) and of ``usage --json``, and every /metrics series (but those that
    count folded recordings only) say at once what they say after the pass."""
    from claudetrace.testing.transcripts import random_corpus, write_transcript

    tree = tmp_path / "projects"
    for t in random_corpus(20, calls=40):  # sessions of many models, a turn or more each
        write_transcript(tree / "random", t)
    write_tree(tree / "bench", sessions=3, size=1 << 19, agents=2)  # subagents
    shutil.copytree(FIXTURES / "transcripts", tree / "fixtures")  # resumed, damaged …
    _write_shapes(tree / "shapes" / "-home-dev-hand")
    db = str(tmp_path / "first.db")
    _import(db, str(tree), monkeypatch=monkeypatch)
    before, usage, metrics = _sessions(db), _usage(db, monkeypatch), _metrics(db)
    store = open_store(db)
    waiting = pending(store)
    store.close()
    assert len(waiting) > 20
    assert _fold_all(db) == len(waiting)
    after = _sessions(db)
    assert before.keys() == after.keys()
    # The shapes a status, an end or a warning comes from are there.
    statuses = {s["status"] for s in after.values()}
    assert {"ok", "error", "interrupted", "incomplete"} <= statuses
    assert any(s["warnings"] for s in after.values())
    assert any(s["links"]["resumed_as"] for s in after.values())  # type: ignore[index]
    for rid in waiting:
        was, now = before[rid], after[rid]
        # Not known until the pass (null, and said so), then the pass's figures.
        assert was["indexing"] is True and now["indexing"] is False
        for name in _FOLDED_FIELDS:
            assert was[name] is None and isinstance(now[name], int)
        assert now["turns"] > 0  # type: ignore[operator]
        # Each model's turns too; the rest of each model's figures at once.
        for figures in was["models"].values():  # type: ignore[attr-defined]
            assert figures.pop("turns") is None
        for figures in now["models"].values():  # type: ignore[attr-defined]
            assert isinstance(figures.pop("turns"), int)
    differ = [(before[k]["session_id"], name, before[k].get(name), after[k].get(name))
              for k in before for name in {*before[k], *after[k]}
              if name not in (*_FOLDED_FIELDS, "indexing")
              and before[k].get(name) != after[k].get(name)]
    assert not differ
    assert _usage(db, monkeypatch) == usage
    now_metrics = _metrics(db)
    assert [m for m in metrics if not m.startswith(_FOLDED_SERIES)] == \
        [m for m in now_metrics if not m.startswith(_FOLDED_SERIES)]
    # Lines and bytes count the folded recordings only (the transcript's lines
    # before the pass, the converted session's after: a counter went down).
    for name, field in (("claudetrace_store_events_total", "events"),
                        ("claudetrace_store_bytes_total", "bytes")):
        was, now = (float(next(m for m in got if m.startswith(name + " ")).split()[1])
                    for got in (metrics, now_metrics))
        assert was == sum(s[field] for k, s in before.items() if k not in waiting)  # type: ignore[misc]
        assert now == sum(s[field] for s in after.values())  # type: ignore[misc]


def test_the_lists_say_turns_and_tools_are_not_known_before_the_pass(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from claudetrace.store.browse import Filters, list_sessions
    from claudetrace.testing.transcripts import random_corpus, write_transcript
    from claudetrace.ui.sessions import session_row

    tree = tmp_path / "projects"
    for t in random_corpus(3, calls=6):
        write_transcript(tree, t)
    db = str(tmp_path / "first.db")
    _import(db, str(tree), monkeypatch=monkeypatch)

    def lists() -> tuple[list[list[str]], list[dict[str, object]]]:
        done = CliRunner().invoke(cli, ["sessions", "-n", "0", "--db", db])
        assert done.exit_code == 0, done.output
        cells = [re.split(r"\s{2,}", line.strip()) for line in done.output.splitlines()[1:]]
        store = open_store(db)
        try:
            return cells, [session_row(r) for r in list_sessions(store, Filters())]
        finally:
            store.close()

    cells, rows = lists()
    assert len(cells) == len(rows) == 3
    # The table's turns and tools cells (after the model's) say "not yet", never 0.
    assert all(row[row.index("ok") + 2:row.index("ok") + 4] == ["not yet", "not yet"]
               for row in cells)
    assert all(row["turns"] is None and row["tool calls"] is None
               and "still being indexed" in row["reason"] for row in rows)
    _fold_all(db)
    cells, rows = lists()
    assert not any("not yet" in row for row in cells)
    assert all(isinstance(row["turns"], int) and row["turns"] > 0 and row["reason"] == ""
               for row in rows)


_COMPACTED = "c5ed8d29-b1bb-4659-9aa4-538bd822c1a6"
_CHAIN = FIXTURES / "transcripts" / "resumed" / "projects" / "-home-dev-chain"
_S1, _S2 = (f"5e550001-0000-4000-8000-00000000000{n}" for n in (1, 2))


def _compacted(count: int) -> str:
    path = FIXTURES / "transcripts" / "compacted" / "projects" / "-home-dev-project"
    return "".join((path / f"{_COMPACTED}.jsonl").read_text().splitlines(keepends=True)[:count])


def _backup_copy(root: Path) -> Iterator[Path]:
    """``A`` holds the first 9 lines of ``B``'s session file (a backup taken earlier)."""
    for folder, count in (("A", 9), ("B", 15)):
        (root / folder / "-p").mkdir(parents=True)
        (root / folder / "-p" / f"{_COMPACTED}.jsonl").write_text(_compacted(count))
        yield root / folder


def _grown(root: Path) -> Iterator[Path]:
    """One file imported, then again once it has grown."""
    path = root / "-p" / f"{_COMPACTED}.jsonl"
    path.parent.mkdir(parents=True)
    for count in (9, 15):
        path.write_text(_compacted(count))
        yield root


def _resumed(root: Path) -> Iterator[Path]:
    """A session's first file imported alone, then with its resumed file beside it."""
    (root / "-p").mkdir(parents=True)
    for name in (_S1, _S2):
        shutil.copy(_CHAIN / f"{name}.jsonl", root / "-p")
        yield root


@pytest.mark.parametrize(("imports", "sid"), [(_backup_copy, _COMPACTED),
                                              (_grown, _COMPACTED), (_resumed, _S1)])
def test_a_reimport_folded_later_equals_one_folded_at_once(
        imports: Callable[[Path], Iterator[Path]], sid: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each import's files, folded later or at once, make the same recording: a
    copy of a file imported before is that file, not a resume of it."""
    exported = {}
    for fold in ("later", "now"):
        root, db = tmp_path / fold, str(tmp_path / f"{fold}.db")
        for folder in imports(root):
            _import(db, str(folder), fold=fold, monkeypatch=monkeypatch)
        out = tmp_path / f"{fold}.jsonl"
        done = CliRunner().invoke(cli, ["export", sid, "--db", db, "-o", str(out)])
        assert done.exit_code == 0, done.output
        exported[fold] = out.read_bytes().replace(str(root).encode(), b"<root>")
    assert (rb'\"subtype\":\"resume\"' in exported["now"]) == (imports is _resumed)
    assert exported["later"] == exported["now"]


@pytest.mark.usefixtures("ct_env")
def test_an_import_and_the_pass_at_once_take_their_locks_in_one_order(
        tmp_path: Path, pg_store: str) -> None:
    """A re-import storing a session usage first (its row, then its mark) while a pass
    folds it (its mark, then its row) on PostgreSQL: both wait, neither is killed
    as a deadlock."""
    import threading

    from claudetrace.formats.imports import Planner, import_units
    from claudetrace.testing.transcripts import random_corpus, write_transcript

    root = tmp_path / "projects"
    paths = [write_transcript(root, t) for t in random_corpus(8, calls=20)]
    importing, passing = open_store(pg_store), open_store(pg_store)
    failed: list[BaseException] = []

    def run(work: Callable[[], object]) -> None:
        try:
            work()
        except BaseException as exc:  # said by the test
            failed.append(exc)

    try:
        units, _skipped = Planner().plan([root])
        list(import_units(importing, units, usage_first=True, parallel=False))
        for _round in range(6):
            for path in paths:  # each session grown by a line: stored again
                with open(path, "ab") as f:
                    f.write(path.read_bytes().splitlines(keepends=True)[-1])
            again, _skipped = Planner().plan([root])
            threads = [threading.Thread(target=run, args=(work,)) for work in (
                lambda units=again: list(import_units(importing, units, usage_first=True,
                                                      parallel=False)),
                lambda: folding.fold_all(passing))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert not failed, failed
        folding.fold_all(passing)
        assert not pending(passing)
    finally:
        importing.close()
        passing.close()


@pytest.mark.parametrize("usage_first", [True, False], ids=["usage-first", "converting"])
def test_a_session_stored_by_another_import_meanwhile_is_unchanged(
        usage_first: bool, tmp_path: Path, ct_env: Path) -> None:
    """Two imports of one folder at once: the second finds each session stored by the
    first after it looked (its index of what was stored is stale: it holds the first
    session alone) and says, and stores, what a second import says: unchanged, on
    either path (the converting one, ``import --wait``, stored each again)."""
    from claudetrace.formats.imports import Planner, import_units, stored_sessions
    from claudetrace.testing.transcripts import random_corpus, write_transcript

    root = tmp_path / "projects"
    for t in random_corpus(6):
        write_transcript(root, t)
    db = tmp_path / "db.sqlite"
    store = open_store(str(db))
    try:
        units, _skipped = Planner().plan([root])
        assert [done.action for done in import_units(store, units[:1], usage_first=True,
                                                     parallel=False)] == ["imported"]
        stale = stored_sessions(str(db), lambda: store)
        assert len(stale) == 1
        first = list(import_units(store, units, usage_first=True, parallel=False))
        assert [done.action for done in first] == ["unchanged"] + ["imported"] * 5
        waiting = pending(store)
        again = list(import_units(store, units, index=stale, usage_first=usage_first,
                                  parallel=False))
        assert [done.action for done in again] == ["unchanged"] * len(units)
        assert pending(store) == waiting  # not stored again
    finally:
        store.close()


def test_the_pass_is_given_the_database_in_its_environment_not_its_argv(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Any local user reads a process's argv (``ps``): a password there is shown to all."""
    from claudetrace.config import DB_ENV
    from claudetrace.formats.folding import start_pass

    monkeypatch.delenv(folding.FOLD_ENV, raising=False)
    import socket

    # A server that takes the connection and never answers: the pass waits there.
    with socket.create_server(("127.0.0.1", 0)) as server:
        url = f"postgresql://postgres:s3cretpw@127.0.0.1:{server.getsockname()[1]}/ct"
        pid = start_pass(url)
        assert pid is not None
        try:
            # The spawner resumes as soon as the child's exec has begun: its new
            # argv is there a moment later (an empty cmdline till then).
            deadline = time.monotonic() + 60
            while not (argv := Path(f"/proc/{pid}/cmdline").read_bytes()):
                assert time.monotonic() < deadline, "the pass never showed its argv"
                time.sleep(0.01)
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        finally:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    assert b"claudetrace.formats.unfolded" in argv
    assert b"s3cretpw" not in argv
    assert f"{DB_ENV}={url}".encode() in environ


def test_import_wait_folds_what_earlier_imports_left_and_doctor_says_how(
        tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    direct, db = tmp_path / "direct.db", tmp_path / "db.db"
    _import(str(direct), str(tree), fold="now", monkeypatch=monkeypatch)
    _import(str(db), str(tree), monkeypatch=monkeypatch)  # no pass (killed, say)
    doctor = CliRunner().invoke(cli, ["doctor", "--db", str(db)])
    assert "no pass folding them: `claudetrace import --wait PATH`" in doctor.output
    with monkeypatch.context() as patch:
        patch.delenv(folding.FOLD_ENV, raising=False)
        done = CliRunner().invoke(cli, ["import", "--wait", str(tree), "--db", str(db)])
    assert done.exit_code in (0, 1), done.output
    assert "unchanged" in done.output.splitlines()[-1]
    assert pending(open_store(str(db))) == []
    assert _rows(db, tree) == _rows(direct, tree)


def _pass_ended(db: Path, seconds: float = 240.0) -> None:
    from claudetrace.config import resolve_url
    from claudetrace.formats.folding import pass_running

    deadline = time.monotonic() + seconds
    while pass_running(resolve_url(str(db))):
        assert time.monotonic() < deadline, "the pass did not finish"
        time.sleep(0.2)


@pytest.mark.slow
def test_an_import_of_nothing_new_starts_a_pass_when_the_last_one_was_killed(
        tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from claudetrace.config import resolve_url
    from claudetrace.formats.folding import start_pass

    direct, db = tmp_path / "direct.db", tmp_path / "db.db"
    _import(str(direct), str(tree), fold="now", monkeypatch=monkeypatch)
    _import(str(db), str(tree), monkeypatch=monkeypatch)
    monkeypatch.delenv(folding.FOLD_ENV, raising=False)
    pid = start_pass(resolve_url(str(db)))
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert pending(open_store(str(db)))
    said = _import(str(db), str(tree), fold=None, monkeypatch=monkeypatch)
    assert "unchanged" in said.splitlines()[-1]
    _wait_folded(str(db))
    assert _rows(db, tree) == _rows(direct, tree)


@pytest.mark.slow
def test_a_recording_the_pass_cannot_fold_is_said_in_its_log_and_by_doctor(
        tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "db.db"
    _import(str(db), str(tree), monkeypatch=monkeypatch)
    broken = pending(open_store(str(db)))[0]
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE unfolded SET layout = ? WHERE rec = (SELECT num FROM recordings"
                     " WHERE id = ?)", (json.dumps({"files": [["main", "x.jsonl", 1 << 30]]}),
                                        broken))
    _import(str(db), str(tree), fold=None, monkeypatch=monkeypatch)
    _pass_ended(db)
    assert pending(open_store(str(db))) == [broken]  # the others are folded
    doctor = CliRunner().invoke(cli, ["doctor", "--db", str(db)]).output
    assert any("the last pass said: " in line and f"cannot fold {broken}: StopIteration" in line
               for line in doctor.splitlines()), doctor


def _passes_over(db: Path) -> frozenset[str]:
    """The passes over ``db``'s store running now (their database is in their environment)."""
    found = set()
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if b"claudetrace.formats.unfolded" in (proc / "cmdline").read_bytes() and \
                    str(db).encode() in (proc / "environ").read_bytes():
                found.add(proc.name)
    return frozenset(found)


class _Overlaps:
    """How long the same passes ran at once, the longest (a pass that let the lock go
    and found nothing more may take a moment to end, at idle priority, as the next
    one starts: that is no second pass folding)."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.since: dict[frozenset[str], float] = {}
        self.longest = 0.0

    def look(self) -> None:
        now, running = time.monotonic(), _passes_over(self.db)
        self.since = {running: self.since.get(running, now)} if len(running) > 1 else {}
        for when in self.since.values():
            self.longest = max(self.longest, now - when)


@pytest.mark.slow
def test_import_watch_runs_one_pass_at_a_time_and_leaves_nothing_unfolded(
        tmp_path: Path) -> None:
    staged, watched, db = tmp_path / "staged", tmp_path / "watched", tmp_path / "db.db"
    write_tree(staged, sessions=20, size=40 << 20, agents=2)
    watched.mkdir()
    env = {k: v for k, v in os.environ.items() if k != folding.FOLD_ENV}
    watch = subprocess.Popen([sys.executable, "-m", "claudetrace", "import", "--watch",
                              "--interval", "0.3", str(watched), "--db", str(db)],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    overlaps = _Overlaps(db)
    try:
        for project in sorted(staged.iterdir()):  # a project's sessions appear at a time
            project.rename(watched / project.name)
            deadline = time.monotonic() + 0.8
            while time.monotonic() < deadline:
                overlaps.look()
                time.sleep(0.05)
        deadline = time.monotonic() + 240
        while True:  # every session stored, and folded
            assert time.monotonic() < deadline, "not all stored and folded"
            overlaps.look()
            if db.exists():
                with contextlib.closing(sqlite3.connect(db)) as conn, \
                        contextlib.suppress(sqlite3.Error):
                    stored, left = conn.execute(
                        "SELECT (SELECT count(*) FROM recordings),"
                        " (SELECT count(*) FROM unfolded)").fetchone()
                    if stored == 20 and left == 0:
                        break
            time.sleep(0.1)
    finally:
        watch.terminate()
        watch.wait(timeout=60)
    assert overlaps.longest < 1.0


def _zombies_of(pid: int) -> list[str]:
    """The children of ``pid`` that have ended and not been reaped."""
    found = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            # pid (comm) STATE PPID ...: the command may hold spaces and parentheses.
            state, ppid = (proc / "stat").read_text().rpartition(")")[2].split()[:2]
            if state == "Z" and int(ppid) == pid:
                found.append(proc.name)
    return found


def test_import_watch_reaps_the_passes_it_started(tmp_path: Path) -> None:
    """Each look that stored a session starts a pass; one that has ended is reaped
    at the next look, not left a zombie until the watch ends."""
    from claudetrace.testing.transcripts import random_corpus, write_transcript

    staged, watched, db = tmp_path / "staged", tmp_path / "watched", tmp_path / "db.db"
    for t in random_corpus(9):
        write_transcript(staged, t)
    watched.mkdir()
    env = {k: v for k, v in os.environ.items() if k != folding.FOLD_ENV}
    watch = subprocess.Popen([sys.executable, "-m", "claudetrace", "import", "--watch",
                              "--interval", "0.2", str(watched), "--db", str(db)],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        stored = 0
        for project in sorted(staged.iterdir()):  # a pass for each project that appears
            project.rename(watched / project.name)
            stored += sum(1 for _ in (watched / project.name).glob("*.jsonl"))
            deadline = time.monotonic() + 120
            while True:  # stored and folded: that project's pass has let its lock go
                assert time.monotonic() < deadline, "not stored and folded"
                if db.exists():
                    with contextlib.closing(sqlite3.connect(db)) as conn, \
                            contextlib.suppress(sqlite3.Error):
                        if conn.execute("SELECT (SELECT count(*) FROM recordings),"
                                        " (SELECT count(*) FROM unfolded)").fetchone() \
                                == (stored, 0) and not _passes_over(db):
                            break
                time.sleep(0.05)
        deadline = time.monotonic() + 30
        while zombies := _zombies_of(watch.pid):  # the next looks reap them
            assert time.monotonic() < deadline, f"passes left unreaped: {zombies}"
            time.sleep(0.1)
    finally:
        watch.terminate()
        watch.wait(timeout=60)


def _read_only_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A store of the transcript fixtures imported usage first, copied into a folder
    of its own (to be mounted read-only), then folded: the folded store and the copy."""
    root = tmp_path / "in"
    shutil.copytree(FIXTURES / "transcripts", root)
    stored = tmp_path / "stored.db"
    _import(str(stored), str(root), monkeypatch=monkeypatch)
    folder = tmp_path / "backup"
    folder.mkdir()
    db = folder / "claudetrace.db"
    with contextlib.closing(sqlite3.connect(stored)) as source, \
            contextlib.closing(sqlite3.connect(db)) as copy:
        source.backup(copy)
    _fold_all(str(stored))
    return stored, db


def _read_only(db: Path, commands: str, env: dict[str, str]) -> None:
    """Run the shell ``commands`` with ``db``'s folder mounted read-only."""
    script = (f"mount --bind {db.parent} {db.parent} && "
              f"mount -o remount,bind,ro {db.parent} || exit 99\n{commands}")
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True,
                          text=True, timeout=600, check=False, env=env)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(not _read_only_mount_works(), reason="needs unshare -m (root)")
def test_a_read_only_store_is_read_with_its_recordings_folded_in_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README says a read-only store is read as it is: its recordings not folded
    yet are folded for the reader, in memory, as a stored fold would read."""
    stored, db = _read_only_copy(tmp_path, monkeypatch)
    waiting = pending(open_store(str(db)))
    assert len(waiting) >= 2
    env = {**os.environ, "TZ": "UTC"}
    wanted = {rid: subprocess.run([sys.executable, "-m", "claudetrace", "export", rid,
                                   "--db", str(stored)], env=env, capture_output=True,
                                  check=True, timeout=300).stdout for rid in waiting[:2]}
    script = ""
    for rid in waiting[:2]:
        script += (f"{sys.executable} -m claudetrace show {rid} --db {db} > /dev/null "
                   f"|| exit 1\n{sys.executable} -m claudetrace export {rid} --db {db} "
                   f"> {tmp_path / rid}.out || exit 1\n")
    _read_only(db, script, env)
    for rid, exported in wanted.items():
        assert (tmp_path / f"{rid}.out").read_bytes() == exported
    assert pending(open_store(str(db))) == waiting  # nothing stored


@pytest.mark.skipif(not _read_only_mount_works(), reason="needs unshare -m (root)")
def test_otel_reads_a_read_only_store_with_its_recordings_folded_in_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``otel`` (``--tree`` and an export) folds in memory too, as ``show`` does: the
    spans of a store that cannot be written are those of its stored fold."""
    stored, db = _read_only_copy(tmp_path, monkeypatch)
    before = pending(open_store(str(db)))
    waiting = before[:2]
    assert len(waiting) == 2
    env = {**os.environ, "TZ": "UTC", "OTEL_TRACES_EXPORTER": "console",
           "OTEL_METRICS_EXPORTER": "none"}

    def otel(at: Path, *argv: str) -> str:
        return (f"{sys.executable} -m claudetrace otel {' '.join(waiting)} {' '.join(argv)}"
                f" --db {at}")

    _read_only(db, f"{otel(stored, '--tree')} > {tmp_path}/wanted.tree || exit 1\n"
                   f"{otel(db, '--tree')} > {tmp_path}/got.tree || exit 1\n"
                   f"{otel(stored)} > /dev/null 2> {tmp_path}/wanted.said || exit 1\n"
                   f"{otel(db)} > /dev/null 2> {tmp_path}/got.said || exit 1\n", env)
    tree = (tmp_path / "wanted.tree").read_text()
    assert tree.count("# ") == 2 and len(tree.splitlines()) > 4, tree
    assert (tmp_path / "got.tree").read_text() == tree
    said = (tmp_path / "wanted.said").read_text().splitlines()[-1]
    assert said.startswith("exported ") and " spans from 2 recording(s)" in said, said
    assert (tmp_path / "got.said").read_text().splitlines()[-1] == said
    assert pending(open_store(str(db))) == before  # nothing stored
