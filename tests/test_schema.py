"""A new SQLite store made from the schema script (claudetrace.store.schema).

The script must be what the migrations make (a migration without its script
fails here), a store made from it must be the one Alembic makes, object for
object, row for row and pragma for pragma, and making it must hold when two
processes make one file at once.  Older files still go through Alembic; a
file that is not a database still gets its one-line error.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace.cli import cli
from claudetrace.store import open_store
from claudetrace.store.engine import alembic_config, create_store_engine, head_revision
from claudetrace.store.plain import SCHEMA_HEAD
from claudetrace.store.schema import SCRIPT, alembic_made, generated, make_if_new, make_new

#: The pragmas a store's file keeps (not a connection's settings).
PRAGMAS = ("page_size", "auto_vacuum", "journal_mode", "user_version", "application_id",
           "encoding")


#: The tables FTS5 makes for a full-text table (its "shadow" tables).
SHADOWS = ("_config", "_content", "_data", "_docsize", "_idx")


def _shadow_quotes(name: str, sql: str | None) -> str | None:
    if sql is None or not name.endswith(SHADOWS):
        return sql
    return sql.replace(f'"{name}"', f"'{name}'", 1)


def picture(path: Path) -> dict[str, Any]:
    """What a SQLite file holds, to compare two: its objects' statements, the rows of
    every table (a full-text table's own ones too), its pragmas, its integrity."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        # FTS5 names its own tables 'so' when it makes them, "so" once its table has
        # been renamed (0021_phrases renames one it made): the same statement.
        objects = sorted((kind, name, table, _shadow_quotes(name, sql)) for kind, name, table, sql
                         in conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
        tables = [name for kind, name, _, sql in objects
                  if kind == "table" and not (sql or "").upper().startswith("CREATE VIRTUAL")]
        rows = {name: sorted(map(repr, conn.execute(f'SELECT * FROM "{name}"')))
                for name in tables}
        pragmas = {name: conn.execute(f"PRAGMA {name}").fetchone()[0] for name in PRAGMAS}
        check = conn.execute("PRAGMA integrity_check").fetchall()
    return {"objects": objects, "rows": rows, "pragmas": pragmas, "integrity": check}


@pytest.fixture(scope="module")
def alembic_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new store made by running every migration, as before the script."""
    path = tmp_path_factory.mktemp("alembic") / "head.db"
    alembic_made(path)
    return path


def test_the_script_is_what_the_migrations_make() -> None:
    assert SCRIPT.read_text(encoding="utf-8") == generated(), (
        "claudetrace/store/schema.sql is not what the migrations make now: "
        "run python -m claudetrace.store.schema --write")
    assert f"INSERT INTO \"alembic_version\" VALUES ('{head_revision()}');" in \
        SCRIPT.read_text(encoding="utf-8")
    assert head_revision() == SCHEMA_HEAD


def test_the_check_command_says_when_the_script_is_stale(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from claudetrace.store import schema

    stale = tmp_path / "schema.sql"
    stale.write_text(SCRIPT.read_text(encoding="utf-8").replace(
        "CREATE INDEX ix_usage_calls_t_ns ON usage_calls (t_ns);\n", ""), encoding="utf-8")
    monkeypatch.setattr(schema, "SCRIPT", stale)
    assert schema.main(["--check"]) == 1
    assert schema.main(["--write"]) == 0
    assert schema.main(["--check"]) == 0
    assert stale.read_text(encoding="utf-8") == SCRIPT.read_text(encoding="utf-8")


def test_a_script_made_store_is_the_alembic_made_one(tmp_path: Path, alembic_file: Path) -> None:
    made = tmp_path / "made.db"
    assert make_new(made) is True
    assert picture(made) == picture(alembic_file)
    assert picture(made)["pragmas"]["page_size"] == 16384
    assert picture(made)["integrity"] == [("ok",)]
    assert made.stat().st_mode & 0o777 == 0o600


def test_open_store_makes_a_new_file_from_the_script_without_alembic(
        tmp_path: Path, alembic_file: Path) -> None:
    path = tmp_path / "opened.db"
    code = (
        "import sys\n"
        "from claudetrace.store import open_store\n"
        f"open_store({str(path)!r}).close()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
    assert picture(path) == picture(alembic_file)


def test_the_plain_paths_make_a_new_file_without_sqlalchemy(
        tmp_path: Path, alembic_file: Path, ct_env: Path) -> None:
    """The writer's and ``usage``'s plain paths on a database not made yet."""
    path = tmp_path / "plain.db"
    code = (
        "import sys\n"
        "from claudetrace.store.writer import _open_writes\n"
        "writes = _open_writes(5.0)\n"
        "print(type(writes).__name__)\n"
        "writes.close()\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'sqlalchemy', 'alembic'}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "CLAUDETRACE_DB": str(path)}).stdout
    assert out.split() == ["SqliteWrites", "[]"]
    assert picture(path) == picture(alembic_file)
    # usage on the default database, not made yet: made, and read, plainly.
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "claudetrace", "usage",
                          "daily", "--json"], capture_output=True, text=True, check=True)
    assert '"daily": []' in run.stdout
    loaded = [line for line in run.stderr.splitlines() if "sqlalchemy" in line or "alembic" in line]
    assert loaded == []
    assert picture(ct_env / "claudetrace.db")["objects"] == picture(alembic_file)["objects"]


def test_usage_does_not_make_a_named_file(tmp_path: Path, ct_env: Path) -> None:
    missing = tmp_path / "typo.db"
    result = CliRunner().invoke(cli, ["usage", "--json", "--db", str(missing)])
    assert result.exit_code == 1
    assert f"no database at {missing}" in result.output
    assert not missing.exists()
    assert make_if_new(f"sqlite:///{missing}", create=False) is False
    assert not missing.exists()


_RACER = """
import sys, time
from pathlib import Path
from claudetrace.store import open_store
from claudetrace.store.schema import make_new
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
if sys.argv[3] == "script":
    print(make_new(Path(sys.argv[1])))
else:
    open_store(sys.argv[1]).close()
    print("store")
"""


@pytest.mark.parametrize("how", [["script"] * 4, ["script", "store", "script", "store"]])
def test_processes_making_one_file_at_once(tmp_path: Path, alembic_file: Path,
                                           ct_env: Path, how: list[str]) -> None:
    path, go = tmp_path / "raced.db", tmp_path / "go"
    racers = [subprocess.Popen([sys.executable, "-c", _RACER, str(path), str(go), kind],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for kind in how]
    time.sleep(3.0)  # every one started (its modules loaded) and waiting
    go.touch()
    said = [racer.communicate(timeout=120) for racer in racers]
    assert [racer.returncode for racer in racers] == [0] * len(how), said
    outs = [out.strip() for out, _ in said]
    # One made it (by the script: the store's path takes it too); the others found it made.
    made = outs.count("True")
    assert made <= 1 and made + outs.count("False") == how.count("script")
    assert picture(path) == picture(alembic_file)


def test_a_file_at_an_older_revision_upgrades_through_alembic(
        tmp_path: Path, alembic_file: Path) -> None:
    from alembic import command

    path = tmp_path / "old.db"
    engine = create_store_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0019_pgwords")
    engine.dispose()
    open_store(str(path)).close()
    assert picture(path)["objects"] == picture(alembic_file)["objects"]
    assert picture(path)["rows"]["alembic_version"] == [repr((SCHEMA_HEAD,))]


def test_a_script_made_file_upgrades_from_its_revision(tmp_path: Path, alembic_file: Path,
                                                       ct_env: Path) -> None:
    """Taken one revision down, a script-made file comes back by Alembic (``db
    upgrade``), from there: what a newer migration will do to it."""
    from alembic import command
    from alembic.script import ScriptDirectory

    path = tmp_path / "made.db"
    make_new(path)
    engine = create_store_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        config = alembic_config(conn)
        below = ScriptDirectory.from_config(config).get_revision(SCHEMA_HEAD).down_revision
        command.downgrade(config, "-1")
    engine.dispose()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(below,)]
    assert make_new(path) is False  # not empty: left to Alembic
    result = CliRunner().invoke(cli, ["db", "upgrade", "--db", str(path)])
    assert result.exit_code == 0, result.output
    assert f"upgraded from {below} to {SCHEMA_HEAD}" in result.output
    assert picture(path)["objects"] == picture(alembic_file)["objects"]


def test_an_empty_file_is_made_from_the_script(tmp_path: Path, alembic_file: Path,
                                               ct_env: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch(mode=0o600)
    result = CliRunner().invoke(cli, ["usage", "--json", "--db", str(path)])
    assert result.exit_code == 0, result.output
    assert picture(path) == picture(alembic_file)


@pytest.mark.parametrize("content", [b"not a database, a note\n" * 200, "damaged"])
def test_a_file_sqlite_cannot_use_keeps_its_one_line_error(
        tmp_path: Path, ct_env: Path, content: Any, alembic_file: Path) -> None:
    path = tmp_path / "odd.db"
    if content == "damaged":  # a SQLite header, then pages of noise
        data = bytearray(alembic_file.read_bytes())
        data[100:] = bytes((i * 7) % 251 for i in range(len(data) - 100))
        content = bytes(data)
    path.write_bytes(content)
    for args in (["usage", "--json"], ["sessions"], ["db", "upgrade"]):
        result = CliRunner().invoke(cli, [*args, "--db", str(path)])
        assert result.exit_code == 1, (args, result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in result.output, (args, result.output)
        assert "database" in lines[0] and str(path) in lines[0], (args, lines)
    assert path.read_bytes() == content
    with pytest.raises(sqlite3.DatabaseError):
        make_new(path)
    assert path.read_bytes() == content


def test_a_newer_migration_takes_a_script_made_file_from_its_revision(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A throw-away migration after the head: a script-made file is migrated by
    Alembic from the script's revision, keeping what it holds."""
    import shutil

    from claudetrace.store import engine as store_engine

    migrations = tmp_path / "migrations"
    shutil.copytree(store_engine.migrations_dir(), migrations,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (migrations / "versions" / "0021_extra.py").write_text(
        '"""A throw-away migration."""\n'
        "from alembic import op\n\n"
        'revision = "0021_extra"\n'
        f"down_revision = {SCHEMA_HEAD!r}\n"
        "branch_labels = None\n"
        "depends_on = None\n\n\n"
        "def upgrade() -> None:\n"
        '    op.execute("CREATE TABLE extra_table (x INTEGER)")\n\n\n'
        "def downgrade() -> None:\n"
        '    op.execute("DROP TABLE extra_table")\n', encoding="utf-8")
    path = tmp_path / "made.db"
    assert make_new(path) is True
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("INSERT INTO recordings (id, tags, argv, cwd, host, env, "
                     "claudetrace_version, source, started_ns, event_count, byte_count, turns,"
                     " tool_calls, tool_errors, input_tokens, output_tokens, cache_read_tokens,"
                     " cache_creation_tokens, cost_usd, is_error, extra) VALUES ('kept', '{}',"
                     " '[]', '', '', '{}', '', 'proxy', 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '{}')")
    monkeypatch.setattr(store_engine, "migrations_dir", lambda: migrations)
    monkeypatch.setattr(store_engine, "SCHEMA_HEAD", "0021_extra")  # as its commit would
    open_store(str(path)).close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == \
            [("0021_extra",)]
        assert conn.execute("SELECT count(*) FROM extra_table").fetchone() == (0,)
        assert conn.execute("SELECT id, num FROM recordings").fetchall() == [("kept", 1)]
