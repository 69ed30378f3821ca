"""Behaviour-changing CLI options: parsing and comparison by meaning."""

from __future__ import annotations

import json

from claudetrace.replay.argv import argv_changes, parse_options

SDK = ["--output-format", "stream-json", "--verbose", "--system-prompt", ""]


def mcp(*names: str) -> str:
    return json.dumps({"mcpServers": {n: {"type": "sdk", "name": n} for n in names}})


def test_options_with_and_without_values() -> None:
    options = parse_options([*SDK, "--include-partial-messages", "--model=opus", "--add-dir", "a"])
    assert options["system-prompt"] == [""]
    assert options["include-partial-messages"] == [""]
    assert options["model"] == ["opus"]
    assert options["add-dir"] == ["a"]


def test_a_changed_model_is_a_change_transport_options_are_not() -> None:
    changes = argv_changes(
        [*SDK, "--model", "opus"],
        ["--verbose", *SDK[:2], "--model", "haiku", "--system-prompt", ""],
    )
    assert [c.describe() for c in changes] == ['argv --model: expected "opus", got "haiku"']


def test_values_are_compared_by_meaning() -> None:
    recorded = ["--allowedTools", "Read,Bash", "--mcp-config", mcp("calc")]
    same = ["--allowed-tools", "Bash", "--allowedTools", "Read", "--mcp-config", mcp("calc")]
    assert argv_changes(recorded, same) == []
    renamed = argv_changes(recorded, ["--allowedTools", "Read,Bash", "--mcp-config", mcp("calc2")])
    assert [c.path for c in renamed] == ["argv --mcp-config"]
    assert renamed[0].expected == {"calc": "sdk"} and renamed[0].actual == {"calc2": "sdk"}


def test_ignored_keys_and_path_mapping() -> None:
    recorded = ["--model", "a", "--add-dir", "/home/dev/project/sub"]
    live = ["--model", "b", "--add-dir", "/work/x/sub"]
    mapped = argv_changes(
        recorded,
        live,
        ignore=["--model"],
        map_path=lambda s: s.replace("/home/dev/project", "/work/x"),
    )
    assert mapped == []
    missing = argv_changes(["--permission-mode", "plan"], [])
    assert missing[0].describe() == 'argv --permission-mode: missing (expected "plan")'
