"""A database with no room to write (a full disk, a file size limit) is one line
naming its file, exit 1, and nothing stored lost; an import finding nothing says
where Claude Code keeps its transcripts.  Real processes under ``RLIMIT_FSIZE``
on real SQLite files."""

from __future__ import annotations

import json
import resource
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

TRANSCRIPTS = Path(__file__).parent / "fixtures" / "transcripts"

#: Past SQLite's shared-memory file (32 KiB), short of what an import writes.
SMALL = 40_000


def run(limit: int | None, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``claudetrace ARGS`` with no file allowed past ``limit`` bytes."""

    def cap() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return subprocess.run([sys.executable, "-m", "claudetrace", *args], capture_output=True,
                          text=True, timeout=180, preexec_fn=cap, cwd=cwd)


def recordings(db: Path) -> list[tuple[str, int]]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT r.id, (SELECT count(*) FROM events e WHERE "
                            "e.rec = r.num) FROM recordings r ORDER BY r.id").fetchall()


@pytest.fixture
def seeded(db_path: Path) -> Path:
    """A database holding one imported session, its side files gone (SQLite
    removes them when the last process closes it)."""
    assert run(None, "import", "--db", str(db_path), str(TRANSCRIPTS / "forked")).returncode == 0
    assert recordings(db_path)
    assert not Path(f"{db_path}-shm").exists()
    return db_path


def one_no_room_line(done: subprocess.CompletedProcess[str], db: Path, *, opening: bool) -> None:
    assert done.returncode == 1, done.stderr
    said = [line for line in done.stderr.splitlines() if ": skipped: " not in line]
    assert len(said) == 1 and said[0].startswith("claudetrace: "), done.stderr
    line = said[0]
    assert f"cannot write database {db}," in line
    assert "disk is full or a file size limit (ulimit -f)" in line
    assert "Error" not in line and "disk I/O error" not in line
    assert ("even to open it" in line) == opening


@pytest.mark.parametrize("args", [
    ("export", "{id}"), ("sessions",), ("usage",), ("db", "pack"),
    ("prune", "--older-than", "0d", "-y"), ("import", str(TRANSCRIPTS)),
], ids=lambda a: a[0] if a[0] != "db" else "pack")
def test_opening_with_no_room_is_one_line_naming_the_file(seeded: Path,
                                                         args: tuple[str, ...]) -> None:
    # Was "cannot open database sqlite:///…: disk I/O error": SQLite writes its
    # shared-memory file even for a reader.
    before = recordings(seeded)
    args = tuple(a.replace("{id}", before[0][0]) for a in args)
    one_no_room_line(run(0, *args, "--db", str(seeded)), seeded, opening=True)
    assert recordings(seeded) == before


@pytest.mark.parametrize("args", [
    ("import", str(TRANSCRIPTS)), ("usage", "--import", str(TRANSCRIPTS)),
], ids=["import", "usage --import"])
def test_writing_with_no_room_is_one_line_and_keeps_what_is_stored(
        seeded: Path, args: tuple[str, ...]) -> None:
    # Was "import failed: disk I/O error" (a line per transcript, and exit 0 for
    # usage --import, its report printed over the half-done import).
    before = recordings(seeded)
    done = run(SMALL, *args, "--db", str(seeded))
    one_no_room_line(done, seeded, opening=False)
    assert done.stdout == ""
    assert recordings(seeded) == before
    # Room again: the same import goes through.
    again = run(None, "import", "--db", str(seeded), str(TRANSCRIPTS))
    assert again.returncode in (0, 1), again.stderr
    assert len(recordings(seeded)) > len(before), again.stderr[-3000:]


def test_an_import_finding_nothing_says_where_transcripts_are(tmp_path: Path,
                                                              db_path: Path) -> None:
    # Was "import: 0 imported, 0 updated, 0 unchanged" and exit 0.
    empty = tmp_path / "empty"
    (empty / "notes").mkdir(parents=True)
    (empty / "README.md").write_text("hello\n")
    done = run(None, "import", "--db", str(db_path), str(empty))
    assert done.returncode == 1
    last = done.stderr.splitlines()[-1]
    assert last == (f"claudetrace: no Claude Code transcript, cassette or claude-trace log in "
                    f"{empty} (Claude Code keeps its transcripts in ~/.claude/projects)")
    # A folder with something to import says nothing of the kind.
    done = run(None, "import", "--db", str(db_path), str(TRANSCRIPTS / "forked"))
    assert done.returncode == 0 and "~/.claude/projects" not in done.stderr
    done = run(None, "import", "--db", str(db_path), str(TRANSCRIPTS / "forked"))  # unchanged
    assert done.returncode == 0 and "~/.claude/projects" not in done.stderr


def test_the_proxy_with_no_room_forwards_everything_and_keeps_the_capture(
        db_path: Path, tmp_path: Path) -> None:
    # The recording is not the session: the host gets every byte, the capture
    # what fitted, and the next command with room stores it.
    assert run(None, "import", "--db", str(db_path), str(TRANSCRIPTS / "forked")).returncode == 0
    data = "".join(json.dumps({"type": "user", "message": {"role": "user",
                                                           "content": f"{i} " + "x" * 200}}) + "\n"
                   for i in range(400))

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (SMALL, resource.RLIM_INFINITY))

    done = subprocess.run([sys.executable, "-m", "claudetrace", "proxy", "--db", str(db_path),
                           "--", "cat"], input=data, capture_output=True, text=True,
                          timeout=180, preexec_fn=cap, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == data
    assert "forwarded but not recorded" in done.stderr
    # The indexer, out of room once the proxy has gone, gives up at once and the
    # next command does not wait out its 30 s of retries (CLAUDETRACE_FLUSH_TIMEOUT).
    started = time.monotonic()
    listed = run(None, "sessions", "--json", "--db", str(db_path))
    assert time.monotonic() - started < 20
    assert listed.returncode == 0, listed.stderr
    proxied = [r for r in json.loads(listed.stdout) if r.get("lost_bytes")]
    assert proxied and proxied[0]["status"] == "incomplete"
    assert len(recordings(db_path)) == 2


def tables(db: Path) -> list[str]:
    with closing(sqlite3.connect(db)) as conn:
        return [row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]


@pytest.mark.parametrize("limit", [150_000, 300_000])
def test_a_first_migration_with_no_room_leaves_no_half_made_store(db_path: Path,
                                                                  limit: int) -> None:
    # Was: the tables kept and alembic_version empty, then every command (db
    # upgrade, sessions, doctor) "has claudetrace tables but no migration history".
    one_no_room_line(run(limit, "db", "upgrade", "--db", str(db_path)), db_path, opening=True)
    assert "recordings" not in tables(db_path)
    again = run(None, "db", "upgrade", "--db", str(db_path))
    assert again.returncode == 0, again.stderr
    listed = run(None, "sessions", "--db", str(db_path))
    assert listed.returncode == 0, listed.stderr


@pytest.mark.parametrize("made", ["0001", "head"])
def test_a_half_made_first_migration_is_made_again_and_data_is_never_touched(
        db_path: Path, made: str) -> None:
    # What an earlier claudetrace left on a full disk: the first migration's tables
    # (or all of them), no row in any, alembic_version among them and empty.
    from alembic import command
    from sqlalchemy import create_engine

    from claudetrace.store.engine import alembic_config

    engine = create_engine(f"sqlite:///{db_path}")
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), made)
    engine.dispose()
    with closing(sqlite3.connect(db_path)) as conn, conn:
        conn.execute("DELETE FROM alembic_version")
    listed = run(None, "sessions", "--db", str(db_path))
    assert listed.returncode == 0, listed.stderr
    with closing(sqlite3.connect(db_path)) as conn:
        assert conn.execute("SELECT count(*) FROM alembic_version").fetchone() == (1,)
    # A row anywhere: refused as before, and left as it is.
    assert run(None, "import", "--db", str(db_path), str(TRANSCRIPTS / "forked")).returncode == 0
    before = recordings(db_path)
    with closing(sqlite3.connect(db_path)) as conn, conn:
        conn.execute("DELETE FROM alembic_version")
    for args in (("sessions",), ("db", "upgrade")):
        done = run(None, *args, "--db", str(db_path))
        assert done.returncode == 1
        assert "no migration history" in done.stderr
    assert recordings(db_path) == before
