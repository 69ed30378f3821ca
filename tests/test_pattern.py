"""Every regular expression a user supplies runs in RE2 (time linear in the text).

``redact`` (record-time sanitiser, marker, cassette header, ``replay --redact``),
``match_regex`` rules, ``volatile_patterns`` and a fake API script's prompt
patterns: a pattern with catastrophic backtracking in Python's engine finishes,
and one RE2 cannot take is refused in one line when it is compiled.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from claudetrace.pattern import BadPattern, linear_regex
from claudetrace.replay.normalize import VolatileSpec
from claudetrace.replay.rules import BadRule, MatchRules
from claudetrace.replay.settings import BadSetting, settings_from
from claudetrace.sanitize import Sanitizer
from claudetrace.testing.script import BadScript, rule, text

#: ``(a+)+$`` on this takes 2**40 steps in Python's engine, a moment in RE2.
EVIL = "(a+)+$"
SUBJECT = "a" * 40 + "!"

USES = {
    "record-time redaction": (
        "from claudetrace.sanitize import Sanitizer\n"
        f"print(Sanitizer.for_recording(patterns=[{EVIL!r}]).text({SUBJECT!r}))"),
    "match_regex rule": (
        "from claudetrace.replay.rules import MatchRules\n"
        f"rules = MatchRules.build(regex_rules=['$.a={EVIL}'])\n"
        f"print(rules.regex('$.a').fullmatch({SUBJECT!r}))"),
    "volatile pattern": (
        "from claudetrace.replay.normalize import VolatileSpec\n"
        f"print(VolatileSpec(patterns=({EVIL!r},)).compiled().fullmatch({SUBJECT!r}))"),
    "fake API prompt pattern": (
        "from claudetrace.testing.script import rule, text\n"
        f"print(rule({EVIL!r}, text('x')).pattern.search({SUBJECT!r}))"),
}


@pytest.mark.parametrize("use", sorted(USES))
def test_a_backtracking_pattern_finishes_at_once(use: str) -> None:
    # In a child process, so that Python's engine hanging fails the test
    # instead of hanging the run.
    done = subprocess.run([sys.executable, "-c", USES[use]], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr


def test_redaction_by_a_user_pattern_still_redacts() -> None:
    sanitizer = Sanitizer.for_recording(patterns=[r"tok_[a-z]+", r"(id=)\d+"])
    assert sanitizer.text("a tok_secret and id=42") == "a [REDACTED] and id=[REDACTED]"


LOOK_BEHIND = "(?<=x)y"


@pytest.mark.parametrize(("build", "error"), [
    (lambda: Sanitizer.for_recording(patterns=[LOOK_BEHIND]), BadPattern),
    (lambda: MatchRules.build(regex_rules=[f"$.a={LOOK_BEHIND}"]), BadRule),
    (lambda: VolatileSpec(patterns=(LOOK_BEHIND,)).compiled(), BadPattern),
    (lambda: rule(LOOK_BEHIND, text("x")), BadScript),
    (lambda: settings_from({"volatile_patterns": [LOOK_BEHIND]}, {}), BadSetting),
    (lambda: settings_from({"match_regex": {"$.a": LOOK_BEHIND}}, {}), BadSetting),
    (lambda: settings_from({"redact": [LOOK_BEHIND]}, {}), BadSetting),
])
def test_a_pattern_re2_cannot_take_is_one_line_naming_it(build: Any, error: type) -> None:
    with pytest.raises(error) as caught:
        build()
    message = str(caught.value)
    assert "\n" not in message
    assert LOOK_BEHIND in message and "(RE2) takes: invalid perl operator: (?<" in message


def test_the_built_in_volatile_pattern_keeps_pythons_engine() -> None:
    # RE2 is ten times slower per call; the templater calls it on every string.
    import re

    assert isinstance(VolatileSpec().compiled(), re.Pattern)
    assert not isinstance(VolatileSpec(patterns=("x+",)).compiled(), re.Pattern)


def test_a_non_string_pattern_is_one_line() -> None:
    with pytest.raises(BadPattern, match="is not a string"):
        linear_regex(5)  # type: ignore[arg-type]
