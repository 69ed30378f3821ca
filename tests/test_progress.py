"""Progress bars: drawn on a terminal (a real pseudo-terminal here), absent in pipes."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from claudetrace.indexer import open_settled_store
from claudetrace.progress import count_lines, track
from claudetrace.ui.bench import seed
from tests.terminal_rig import read_terminal

LINES = 20_000


def run(args: list[str], *, tty: bool) -> tuple[int, bytes]:
    """Run ``claudetrace ARGS``; its exit status and what it wrote on stderr.

    With ``tty`` stderr is a pseudo-terminal, as when a person runs the command.
    """
    env = {
        k: v for k, v in os.environ.items() if k not in ("CLAUDETRACE_DB", "CLAUDETRACE_PROGRESS")
    }
    env.update(PYTHONPATH=os.pathsep.join(sys.path), TERM="xterm-256color", COLUMNS="120")
    cmd = [sys.executable, "-m", "claudetrace", *args]
    if not tty:
        done = subprocess.run(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, check=False
        )
        return done.returncode, done.stderr
    leader, follower = os.openpty()
    try:
        with subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower, env=env
        ) as proc:
            os.close(follower)
            follower = -1
            seen = read_terminal(leader, proc)
            return proc.wait(timeout=60), seen
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A store with one session of 20,000 lines and a few small ones; (path, big id)."""
    path = tmp_path_factory.mktemp("progress") / "big.db"
    store = open_settled_store(str(path))
    try:
        rid = seed(store, sessions=5, lines=LINES)
    finally:
        store.close()
    yield path, rid


def test_track_is_silent_off_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CLAUDETRACE_PROGRESS", "0")
    items = iter(range(5))
    with track(items, "x", total=5) as shown:
        assert list(shown) == [0, 1, 2, 3, 4]
    assert capfd.readouterr() == ("", "")


def test_count_lines(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"a\nb\n" * 300_000 + b"tail")
    assert count_lines(path) == 600_000


@pytest.mark.slow
def test_export_and_import_show_counts_and_rate_on_a_terminal_only(
    big: tuple[Path, str], tmp_path: Path
) -> None:
    db, rid = big
    out = tmp_path / "big.ndjson"
    code, seen = run(["export", rid, "--db", str(db), "-o", str(out)], tty=True)
    assert code == 0, seen
    assert b"exporting" in seen and b"events/s" in seen and f"{LINES}/{LINES}".encode() in seen
    code, quiet = run(["export", rid, "--db", str(db), "-o", str(out)], tty=False)
    assert code == 0
    assert quiet == f"wrote {LINES} events of {rid} to {out}\n".encode()

    fresh = tmp_path / "fresh.db"
    code, seen = run(["import", str(out), "--db", str(fresh)], tty=True)
    assert code == 0, seen
    assert b"importing big.ndjson" in seen and b"events/s" in seen
    assert f"{LINES}/{LINES}".encode() in seen
    code, quiet = run(["import", str(out), "--db", str(tmp_path / "fresh-pipe.db")], tty=False)
    # No bar in a pipe: the run's one-line summary alone.
    assert code == 0 and quiet == b"import: 1 imported, 0 updated, 0 unchanged\n"

    html = tmp_path / "big.html"
    code, seen = run(
        ["export", rid, "--db", str(db), "--format", "html", "-o", str(html)], tty=True
    )
    assert code == 0 and b"events/s" in seen


@pytest.mark.slow
def test_otel_all_and_db_upgrade_show_progress(big: tuple[Path, str], tmp_path: Path) -> None:
    from alembic import command

    from claudetrace.store.engine import alembic_config, create_store_engine
    from tests.otlp_receiver import OtlpReceiver

    db, _ = big
    with OtlpReceiver("http") as receiver:
        code, seen = run(
            ["otel", "--all", "--db", str(db), "--endpoint", receiver.endpoint], tty=True
        )
    assert code == 0, seen
    assert b"exporting spans" in seen and b"recordings/s" in seen and b"6/6" in seen

    # A store at the first revision holding the same recordings: the upgrade
    # summarises every one of them again.
    old = tmp_path / "old.db"
    engine = create_store_engine(f"sqlite:///{old}")
    try:
        with engine.connect() as conn:
            command.upgrade(alembic_config(conn), "0001")
            conn.commit()
    finally:
        engine.dispose()
    with contextlib.closing(sqlite3.connect(old)) as conn:
        conn.execute("ATTACH DATABASE ? AS big", (str(db),))
        for table in ("recordings", "events", "event_tools"):
            # The columns both have (0009_footprint dropped the events' uuid and
            # session_id, which the first revision's rows leave empty).
            # Since 0020_recnum a recording's rows name it by its number (``rec``):
            # the first revision's by its id, read from the recording.
            theirs = {row[1] for row in conn.execute(f"PRAGMA big.table_info({table})")}
            wanted = [row[1] for row in conn.execute(f"PRAGMA main.table_info({table})")
                      if row[1] in theirs or (row[1] == "recording_id" and "rec" in theirs)]
            taken = ", ".join("r.id" if c not in theirs else f"t.{c}" for c in wanted)
            joined = " JOIN big.recordings r ON r.num = t.rec" if "rec" in theirs else ""
            conn.execute(f"INSERT INTO main.{table} ({', '.join(wanted)}) "
                         f"SELECT {taken} FROM big.{table} t{joined}")
        conn.commit()
    code, seen = run(["db", "upgrade", "--db", str(old)], tty=True)
    assert code == 0, seen
    assert b"summarising recordings" in seen and b"6/6" in seen
    # Summarised again, the recordings have the figures they had before.
    figures = []
    for path in (db, old):
        opened = open_settled_store(str(path), migrate=False)
        try:
            figures.append(
                [(r.id, r.turns, r.num_turns, r.models) for r in opened.list_recordings()]
            )
        finally:
            opened.close()
    assert figures[0] == figures[1]
