"""Record modes: parsing, the CI default, precedence and the first action per mode."""

from __future__ import annotations

import pytest

from claudetrace.errors import ClaudeTraceError
from claudetrace.recordmode import BadRecordMode, RecordMode, choose_mode, plan


def test_parse_accepts_values_and_dashes() -> None:
    assert RecordMode.parse("once") is RecordMode.ONCE
    assert RecordMode.parse("New-Episodes") is RecordMode.NEW_EPISODES
    assert RecordMode.parse(RecordMode.ALL) is RecordMode.ALL
    assert str(RecordMode.REWRITE) == "rewrite"


def test_parse_rejects_unknown_modes_with_the_choices() -> None:
    with pytest.raises(BadRecordMode, match="none, once, new_episodes, all, rewrite"):
        RecordMode.parse("sometimes")
    assert issubclass(BadRecordMode, ClaudeTraceError)


@pytest.mark.parametrize(
    ("env", "mode"),
    [({}, "once"), ({"CI": "true"}, "none"), ({"CI": "1"}, "none"), ({"CI": "false"}, "once")],
)
def test_default_is_none_under_ci(env: dict[str, str], mode: str) -> None:
    assert RecordMode.default(env) is RecordMode(mode)


def test_precedence_command_line_then_marker_then_ini_then_default() -> None:
    assert choose_mode(option="all", marker="none", ini="once", environ={}) is RecordMode.ALL
    assert choose_mode(marker="none", ini="once", environ={}) is RecordMode.NONE
    assert choose_mode(ini="rewrite", environ={"CI": "1"}) is RecordMode.REWRITE
    assert choose_mode(ini="  ", environ={"CI": "1"}) is RecordMode.NONE


@pytest.mark.parametrize(
    ("mode", "exists", "action"),
    [
        ("none", True, "replay"),
        ("none", False, "missing"),
        ("once", True, "replay"),
        ("once", False, "record"),
        ("new_episodes", True, "replay"),
        ("new_episodes", False, "record"),
        ("all", True, "record"),
        ("all", False, "record"),
        ("rewrite", True, "record"),
        ("rewrite", False, "record"),
    ],
)
def test_plan(mode: str, exists: bool, action: str) -> None:
    assert plan(RecordMode(mode), exists) == action
