"""``claudetrace ui`` / ``bench ui`` command lines (no server started here)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from claudetrace.cli import cli
from claudetrace.cli.ui import streamlit_argv
from claudetrace.store import open_store
from claudetrace.ui.bench import seed, template_turn


def test_help_lists_the_options() -> None:
    result = CliRunner().invoke(cli, ["ui", "--help"])
    assert result.exit_code == 0
    assert "--db" in result.output and "--host" in result.output and "--port" in result.output
    assert "ui" in CliRunner().invoke(cli, ["bench", "--help"]).output.split("Commands:")[1]


def test_streamlit_command_binds_where_asked() -> None:
    argv = streamlit_argv(Path("app.py"), "127.0.0.1", 8600, headless=True)
    assert argv[1:4] == ["-m", "streamlit", "run"]
    assert argv[argv.index("--server.address") + 1] == "127.0.0.1"
    assert argv[argv.index("--server.port") + 1] == "8600"
    assert argv[argv.index("--browser.gatherUsageStats") + 1] == "false"
    assert "--server.port" not in streamlit_argv(Path("app.py"), "127.0.0.1", None, headless=True)


def test_unusable_database_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = CliRunner().invoke(cli, ["ui", "--db", str(blocker / "x.db")])
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert result.output.startswith("claudetrace: ") and result.output.count("\n") == 1


def test_seed_builds_what_the_benchmark_measures(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "bench.db"))
    big = seed(store, sessions=5, lines=300, now_ns=1_800_000_000_000_000_000)
    assert store.count_recordings() == 6
    assert store.count_events(big) == 300
    rec = store.get(big)
    assert rec.turns > 10 and rec.tool_calls == rec.turns and rec.status == "ok"
    small = [r for r in store.list_recordings() if r.id != big]
    assert {r.event_count for r in small} == {3 + len(template_turn("x", 0))}
