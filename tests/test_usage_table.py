"""The usage tables: written line by line (:class:`~claudetrace.cli.usage_grid.Grid`),
as Rich's ``Table`` prints them, and the team bench that times them at scale."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console
from rich.table import Table
from rich.text import Text

from claudetrace.bench.usage import TEAM_REPORTS, report_lines, run_team_bench, seed_team
from claudetrace.cli import cli
from claudetrace.cli.usage_grid import Grid, _pad, _wrap, show


def _fill(table: Table | Grid) -> None:
    table.add_row("2026-01-01", "a, b, some-long-model-name, another-model-name-here", "1,234")
    cost = Text("~$1.0")
    cost.append(" + ?", style="yellow")
    table.add_row("", "└ mödel 日本", cost, style="dim")
    table.add_row("x", Text("gap", style="dim"))
    table.add_section()
    table.add_row(Text("Total", style="bold"), "", "9")
    table.caption = Text("~ estimated\n? no price for x")


@pytest.mark.parametrize("colour", [False, True])
@pytest.mark.parametrize("width", [200, 60, 40])
def test_the_grid_prints_what_rich_s_table_prints(colour: bool, width: int) -> None:
    rich = Table(header_style="bold")
    for name, justify in [("day", "left"), ("models", "left"), ("n", "right")]:
        rich.add_column(name, justify=justify)  # type: ignore[arg-type]
    grid = Grid([("day", "left"), ("models", "left"), ("n", "right")])
    out = []
    for table in (rich, grid):
        _fill(table)
        console = Console(width=width, file=io.StringIO(), force_terminal=colour,
                          color_system="standard" if colour else None)
        console.print(table)
        out.append(console.file.getvalue())  # type: ignore[attr-defined]
    assert out[1] == out[0]
    assert ("\x1b[" in out[1]) == colour


def _fill_counts(table: Table | Grid) -> None:
    # A Grid takes counts as numbers (its format writes their commas).
    count: Any = (lambda n: n) if isinstance(table, Grid) else (lambda n: f"{n:,}")
    table.add_row("2026-01-01", "a, b, some-long-model-name, another-model-name-here",
                  count(1234), "$1.00")
    table.add_row("2026-01-02", "a", count(7), "~$0.0010")
    cost = Text("~$1.0")
    cost.append(" + ?", style="yellow")
    table.add_row("", "└ mödel 日本", count(0), cost, style="dim")
    table.add_row("", "└ model", count(1234567), "$0.50", style="dim")
    table.add_row("", "└ some-long-model-name, another-model-name-here", count(5), "$0.50",
                  style="dim")
    table.add_row("x", Text("gap", style="dim"))
    table.add_section()
    table.add_row(Text("Total", style="bold"), "", count(9), Text("?", style="yellow"))
    table.caption = Text("~ estimated\n? no price for x")


@pytest.mark.parametrize("colour", [False, True])
@pytest.mark.parametrize("width", [200, 60])
def test_the_grid_s_lines_with_counts_are_what_rich_prints(colour: bool, width: int) -> None:
    """Counts written by the rows' format, and :func:`show`'s lines (with the
    styles' codes in colour, without Rich's segments), as Rich's ``Table``."""
    rich = Table(header_style="bold")
    columns = [("day", "left"), ("models", "left"), ("n", "right"), ("cost", "right")]
    for name, justify in columns:
        rich.add_column(name, justify=justify)  # type: ignore[arg-type]
    grid = Grid(columns)
    out = []
    for table in (rich, grid, grid):
        if table is not grid or not out[1:]:
            _fill_counts(table)
        console = Console(width=width, file=io.StringIO(), force_terminal=colour,
                          color_system="standard" if colour else None)
        if out[1:]:  # the grid's lines, written without Rich's segments
            show(console, grid)
        else:
            console.print(table)
        out.append(console.file.getvalue())  # type: ignore[attr-defined]
    assert out[1] == out[0]
    assert out[2] == out[0]
    assert ("\x1b[" in out[1]) == colour


def test_plain_text_wraps_as_rich_wraps_it() -> None:
    console = Console(file=io.StringIO())
    rng = random.Random(3)
    for _ in range(5000):
        text = "".join(rng.choice("ab ,-x") for _ in range(rng.randrange(1, 40)))
        if not text.strip():
            continue
        width = rng.randrange(1, 15)
        ours = [_pad(line, width, False) for line in _wrap(console, text, width)]
        assert all(isinstance(line, str) for line in ours)  # without Rich's objects
        assert ours == [_pad(line, width, False).plain  # type: ignore[union-attr]
                        for line in _wrap(console, Text(text), width)], (text, width)


def test_a_team_s_reports_by_session_add_up_to_the_days(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/team.db"
    assert seed_team(url, 40, calls=10) == 400

    def report(*args: str) -> dict:
        out = CliRunner().invoke(cli, ["usage", *args, "--json", "-z", "UTC", "--db", url])
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)

    sessions, daily = report("session"), report("daily")
    assert len(sessions["sessions"]) == 40
    assert sessions["totals"] == daily["totals"]
    assert sum(s["totalTokens"] for s in sessions["sessions"]) == daily["totals"]["totalTokens"]
    assert daily["totals"]["costSource"] == "estimate"  # one call in seven priced by the table
    narrowed = report("session", "--project", "project-2", "--tag", "team=t3")
    assert {s["projectPath"] for s in narrowed["sessions"]} == {"/home/dev/project-2"}
    table = CliRunner().invoke(cli, ["usage", "session", "-b", "-z", "UTC", "--db", url])
    assert table.exit_code == 0 and table.stdout.count("└ ") == sum(
        len(s["modelBreakdowns"]) for s in sessions["sessions"])


@pytest.mark.slow
def test_bench_usage_team_times_every_report(tmp_path: Path) -> None:
    said: list[str] = []
    url = f"sqlite:///{tmp_path}/team.db"
    rows = run_team_bench(sessions=20, db_url=url, repeat=1, say=said.append)
    assert len(rows) == len(TEAM_REPORTS) and all(r.seconds > 0 for r in rows)
    # Each report's CPU time beside its wall time: the steadier on a loaded machine.
    assert all(r.cpu is not None and r.cpu > 0 for r in rows)
    assert all(" CPU " in line for line in report_lines(rows))
    assert said == ["20 sessions, 700 calls seeded in " + said[0].rsplit(" in ", 1)[1]]
    run_team_bench(sessions=20, db_url=url, repeat=1, say=said.append)  # seeded once
    assert said[1].startswith("20 sessions of a team's store already")


def _as_rich(grid: Grid) -> Table:
    """The same rows in Rich's ``Table`` (counts written as the grid writes them)."""
    rich = Table(header_style="bold")
    for name, justify in grid.columns:
        rich.add_column(name, justify=justify)  # type: ignore[arg-type]
    for found in grid.rows:
        if found is None:
            rich.add_section()
            continue
        cells, style = found
        rich.add_row(*[f"{c:,}" if isinstance(c, int) else c for c in cells], style=style)
    rich.caption = grid.caption
    return rich


@pytest.mark.parametrize("colour", [False, True])
@pytest.mark.parametrize("width", [200, 160])
def test_a_team_s_session_breakdown_is_what_rich_prints(
        tmp_path: Path, colour: bool, width: int) -> None:
    """``usage session --breakdown``: sessions whose models wrap, a dim row per
    model, the totals and the caption, byte for byte as Rich's ``Table``."""
    import datetime as dt

    from claudetrace import usage as reports
    from claudetrace.cli.usage_table import session_table
    from claudetrace.store.usage import UsageFilter, plain_reader

    url = f"sqlite:///{tmp_path}/team.db"
    seed_team(url, 30, calls=12)
    with plain_reader(url) as reader:
        assert reader is not None
        found = reports.session_report(reader, UsageFilter(), dt.timezone.utc)
    out = []
    for printed in ("rich", "grid"):
        grid = session_table(found, dt.timezone.utc, True)
        console = Console(width=width, file=io.StringIO(), force_terminal=colour,
                          color_system="standard" if colour else None)
        if printed == "rich":
            console.print(_as_rich(grid))
        else:
            show(console, grid)
        out.append(console.file.getvalue())  # type: ignore[attr-defined]
    assert out[1] == out[0]
    assert out[1].count("└ ") == sum(len(m) for m in found.models) > 30
    lines = out[1].splitlines()
    assert len(lines) > out[1].count("└ ") + 30 + 6  # the models' cells wrap
    assert ("\x1b[2m" in out[1]) == colour


def _as_rounded(source: str, cost: float, estimated: float, sums: bool) -> str:
    """The cost cell as it was written before ``cost_text`` rounded only where it
    matters: every figure rounded to 1e-9 dollars (a session's parts first)."""
    from claudetrace.cli.usage_table import _amount

    if sums:
        cost, estimated = round(cost, 9), round(estimated, 9)
    if source == "estimate":
        cli = round(cost - estimated, 9)
        if cli > 0:
            return f"{_amount(cli)} + ~{_amount(round(estimated, 9))}"
        return "~" + _amount(round(cost, 9))
    return _amount(round(cost, 9))


def test_a_cost_cell_reads_as_its_figures_rounded_to_a_billionth() -> None:
    """Amounts on and next to every edge a rounding to 1e-9 dollars can cross: half
    a cent, half of a fourth place, a dollar, a tenth of a cent, a thousand (its
    comma), the CLI's part nothing or next to nothing; and random ones."""
    from claudetrace.cli.usage_table import cost_text

    rng = random.Random(34)
    edges = [1.125, 0.00125, 1.0, 0.001, 2.345, 1234.565, 0.12345, 0.0, 3e-10, 6e-10,
             999.0, 999.995, 1000.0, 999_999.995]
    near = [e + d for e in edges
            for d in (0.0, 4e-10, -4e-10, 5e-10, -5e-10, 6e-10, -6e-10, 1e-9, -1e-9, 2e-8)]
    near += [rng.uniform(0, 3) for _ in range(3000)] + [rng.uniform(0, 0.01) for _ in range(500)]
    near += [rng.uniform(0, 3000) for _ in range(500)]
    checked = 0
    for cost in near:
        for estimated in (0.0, cost, cost - 5e-10, 0.125 + 4e-10, rng.uniform(0, cost or 1)):
            for source in ("cli", "estimate"):
                for sums in (False, True):
                    assert cost_text(source, cost, estimated, False, sums=sums) == \
                        _as_rounded(source, cost, estimated, sums), (source, cost, estimated)
                    checked += 1
    assert checked > 40_000


def test_the_last_activity_minute_is_iso_s_in_every_zone() -> None:
    """The minute a session's last call is written at, in UTC from its day's text,
    is ``fromtimestamp``'s (its microseconds rounded) next to a minute's edge too."""
    import datetime as dt
    from zoneinfo import ZoneInfo

    from claudetrace.cli.usage_table import _minute_text

    rng = random.Random(34)
    base = 1_790_000_000 * 10**9
    times = [base + rng.randrange(10**15) for _ in range(2000)]
    times += [t - t % 60_000_000_000 + d for t in times[:50]
              for d in (0, 1, 499, 500, 501, 999_999, 10**6, -1, -499, -500, -501, -10**6)]
    times += [-10**17, 9 * 10**18]  # the years a store's times reach
    for tz in (dt.timezone.utc, dt.timezone(dt.timedelta(hours=5, minutes=30)),
               dt.timezone(dt.timedelta(hours=-3)), ZoneInfo("Europe/Paris"), None):
        minute_of = _minute_text(tz)
        for t in times:
            assert minute_of(t) == dt.datetime.fromtimestamp(t / 1e9, tz).isoformat(
                " ", "minutes")[:16], (tz, t)
