"""``bench usage``'s rows: each claudetrace row beside every ccusage row."""

from __future__ import annotations

from claudetrace.bench.usage import Row, report_lines


def test_each_claudetrace_row_says_its_ratio_to_each_ccusage_row() -> None:
    lines = list(report_lines([
        Row("ccusage 20.0.24 daily --offline --json", 2.0),
        Row("ccusage 18.0.11 daily --offline --json", 10.0),
        Row("claudetrace usage daily --json (filled store)", 0.5),
    ]))
    assert lines[0].split() == ["ccusage", "20.0.24", "daily", "--offline", "--json", "2.000",
                                "s"]
    assert lines[2].endswith("0.500 s  0.25x ccusage 20.0.24, 0.05x ccusage 18.0.11")


def test_without_ccusage_there_is_no_ratio() -> None:
    (line,) = report_lines([Row("claudetrace usage daily --json (filled store)", 0.5)])
    assert line.endswith("0.500 s")
