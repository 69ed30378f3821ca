"""The ``replay`` and ``bench replay`` commands through click's CliRunner."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from claudetrace.cli import cli

SAMPLE = Path(__file__).parent / "fixtures" / "samples" / "basic.cassette.ndjson"


def test_replay_help_documents_exit_codes() -> None:
    result = CliRunner().invoke(cli, ["replay", "--help"])
    assert result.exit_code == 0
    assert "81 unmatched" in result.output and "83 recorded input never sent" in result.output
    assert "84 a CLI option" in result.output and "--fault SPEC" in result.output


def test_speed_and_realtime_exclude_each_other() -> None:
    result = CliRunner().invoke(cli, ["replay", str(SAMPLE), "--speed", "2", "--realtime"])
    assert result.exit_code == 2
    assert "exclude each other" in result.output


def test_bad_cassette_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"not": "a cassette"}\n')
    result = CliRunner().invoke(cli, ["replay", str(bad), "--", "-v"])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "not a claudetrace cassette" in result.output


def test_bench_replay_measures_the_engine() -> None:
    result = CliRunner().invoke(cli, ["bench", "replay", "--lines", "2000", "--sdk-lines", "0"])
    assert result.exit_code == 0, result.output
    assert "lines/s" in result.output and "sdk:" not in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fault", "crash"], "bad fault 'crash'"),
        (["--volatile-path", "message.content"], "must start with '$'"),
        (["--match-regex", "$.a"], "expected PATH=REGEX"),
        (["--match-regex", "$.a=("], "bad regex in rule"),
        (["--matcher", "no_such_module_xyz:match"], "cannot load matcher"),
        (["--redact", "("], "redaction pattern '(' is not one the linear-time engine"),
        (["--redact", "(?<=a)b"], "(RE2) takes: invalid perl operator: (?<="),
    ],
)
def test_bad_matching_options_are_one_line(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["replay", str(SAMPLE), *args, "--", "-p", "x"])
    assert result.exit_code in (1, 2), result.output
    assert result.output.count("\n") == 1 and message in result.output, result.output


def test_a_report_that_does_not_fit_is_said_and_leaves_no_half_file(tmp_path: Path) -> None:
    # A file size limit smaller than the divergence report: no half report is
    # left, stderr says so in one line, and the host still gets the divergence's
    # exit code (it was 1, with half a report and "cannot write: File too large").
    import os
    import resource
    import subprocess
    import sys

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))

    report = tmp_path / "out" / "report.json"
    report.parent.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "claudetrace", "replay", str(SAMPLE), "--report", str(report)],
        input=b'{"type":"user","message":{"role":"user","content":"different"}}\n',
        capture_output=True, preexec_fn=small_files, timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
    )
    err = done.stderr.decode()
    assert done.returncode == 84, err
    assert f"claudetrace replay: cannot write the report {report}: File too large" in err
    assert list(report.parent.iterdir()) == []


@pytest.mark.parametrize("args", [
    ["usage", "blocks", "--live", "--interval", "-1"],
    ["usage", "blocks", "--live", "--interval", "nan"],
    ["usage", "blocks", "--live", "--interval", "1e300"],
    ["import", "--watch", "--interval", "1e300", "."],
    ["tail", "--interval", "nan"],
    ["replay", str(SAMPLE), "--speed", "1e-300", "--", "-v"],
    ["replay", str(SAMPLE), "--speed", "nan", "--", "-v"],
    ["replay", str(SAMPLE), "--speed", "inf", "--", "-v"],
])
def test_intervals_and_speeds_are_range_checked(args: list[str], tmp_path: Path) -> None:
    # Each was a traceback at time.sleep or select.select, or taken silently.
    result = CliRunner().invoke(cli, [*args, "--db", str(tmp_path / "t.db")])
    assert result.exit_code == 2, result.output
    assert "is not a number from" in result.output and "Traceback" not in result.output
