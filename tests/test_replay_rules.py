"""Matching the way a team configures it: redaction, volatile and regex paths, user
matchers, candidate lists, settings from a marker (no processes)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from claudetrace.cassette import Cassette, new_header
from claudetrace.model.events import Event
from claudetrace.replay import Matcher, MatchRules, compile_script
from claudetrace.replay.engine import live_redactor
from claudetrace.replay.rules import BadRule, compile_path
from claudetrace.replay.settings import MARKER_KEYS, BadSetting, settings_from


def ev(i: int, direction: str, obj: Any) -> Event:
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return Event(seq=i, direction=direction, t_ns=(i + 1) * 10_000_000, data=data)


def user(text: Any) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": text}}


def one_turn(prompt: Any, **header: Any) -> Cassette:
    events = [ev(0, "in", user(prompt)), ev(1, "out", {"type": "result", "result": "ok"})]
    return Cassette(header=new_header(argv=["claude"], exit_code=0, **header), events=events)


def live(obj: Any) -> Event:
    return Event(seq=0, direction="in", t_ns=0, data=json.dumps(obj).encode())


# -- 1. redaction ---------------------------------------------------------------------------


def test_a_cassette_sanitised_with_a_pattern_matches_the_live_line_redacted() -> None:
    recorded = one_turn("ship ref [REDACTED] today", redact=[r"ORDER-\d+"])
    matcher = Matcher(compile_script(recorded), redact=live_redactor(recorded.header))
    assert matcher.offer(live(user("ship ref ORDER-12345 today"))) is None
    # Without the cassette's redaction (the old behaviour) it diverges.
    assert Matcher(compile_script(recorded)).offer(live(user("ship ref ORDER-12345 today")))


def test_secret_values_of_the_environment_and_key_shapes_are_hidden(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-0123456789abcdef")
    recorded = one_turn("use [REDACTED] and [REDACTED]")
    matcher = Matcher(compile_script(recorded), redact=live_redactor(recorded.header))
    assert (
        matcher.offer(live(user("use tok-0123456789abcdef and sk-ant-api03-abcdefghijkl"))) is None
    )


def test_a_report_shows_redacted_values_never_the_secret() -> None:
    recorded = one_turn("ref [REDACTED] please")
    matcher = Matcher(compile_script(recorded), redact=live_redactor({}, [r"ORDER-\d+"]))
    divergence = matcher.offer(live(user("ref ORDER-999 now sk-ant-api03-supersecretvalue")))
    assert divergence is not None
    text = divergence.render() + json.dumps(divergence.to_json())
    assert "ORDER-999" not in text and "supersecretvalue" not in text
    assert "[REDACTED]" in text


# -- 2. volatile paths, regex paths, user matchers ----------------------------------------------


def test_a_volatile_path_is_not_compared_even_when_absent() -> None:
    recorded = one_turn("today is 2026-01-01")
    rules = MatchRules.build(volatile_paths=["$.message.content", "$.extra"])
    matcher = Matcher(compile_script(recorded), rules=rules)
    assert matcher.offer(live({**user("today is 2027-05-05"), "extra": {"a": 1}})) is None
    strict = Matcher(compile_script(recorded))
    assert strict.offer(live(user("today is 2027-05-05"))) is not None


def test_an_sdk_upgrade_adding_an_initialize_field_is_absorbed_by_a_volatile_path() -> None:
    init = {
        "type": "control_request",
        "request_id": "req_1_ab12cd34",
        "request": {"subtype": "initialize"},
    }
    ok = {
        "type": "control_response",
        "response": {"subtype": "success", "request_id": "req_1_ab12cd34"},
    }
    recorded = Cassette(new_header(argv=["claude"]), [ev(0, "in", init), ev(1, "out", ok)])
    upgraded = {
        **init,
        "request_id": "req_1_ffff0000",
        "request": {"subtype": "initialize", "agents": {}},
    }
    assert Matcher(compile_script(recorded)).offer(live(upgraded)) is not None
    rules = MatchRules.build(volatile_paths=["$.request.agents"])
    assert Matcher(compile_script(recorded), rules=rules).offer(live(upgraded)) is None


def test_a_regex_path_accepts_matching_values_only() -> None:
    recorded = one_turn([{"type": "text", "text": "id 5f3a"}])
    rules = MatchRules.build(regex_rules={"$.message.content[*].text": r"id [0-9a-f]{4}"})
    assert (
        Matcher(compile_script(recorded), rules=rules).offer(
            live(user([{"type": "text", "text": "id 9b9b"}]))
        )
        is None
    )
    divergence = Matcher(compile_script(recorded), rules=rules).offer(
        live(user([{"type": "text", "text": "id zzzz"}]))
    )
    assert divergence is not None
    assert divergence.changes[0].describe() == (
        '$.message.content[0].text: expected "/id [0-9a-f]{4}/", got "id zzzz"'
    )


def same_words(recorded: Any, live: Any) -> bool:
    assert recorded["type"] == live["type"], "types differ"
    return bool(recorded["message"]["content"].lower() == live["message"]["content"].lower())


def test_a_user_matcher_accepts_or_rejects_with_its_reason() -> None:
    recorded = one_turn("Hello")
    rules = MatchRules.build(matcher=f"{__name__}:same_words")
    assert Matcher(compile_script(recorded), rules=rules).offer(live(user("HELLO"))) is None
    divergence = Matcher(compile_script(recorded), rules=rules).offer(live(user("bye")))
    assert divergence is not None and "matcher returned false" in divergence.message
    other = Matcher(compile_script(recorded), rules=rules).offer(live({"type": "user2"}))
    assert other is not None


@pytest.mark.parametrize(
    ("path", "spelled"),
    [
        ("$.a.b", "$.a.b"),
        ("$.a[*].c", "$.a[12].c"),
        ("$.*.x", '$["odd key"].x'),
        ("$.a-b", '$["a-b"]'),
    ],
)
def test_paths_use_the_report_spelling(path: str, spelled: str) -> None:
    assert compile_path(path).fullmatch(spelled)


@pytest.mark.parametrize("bad", ["message.content", "$.a..b", "$[x]"])
def test_bad_paths_are_errors(bad: str) -> None:
    with pytest.raises(BadRule):
        compile_path(bad)


# -- 3. nearest candidates ----------------------------------------------------------------------


def test_candidates_come_from_the_same_lane_or_message_type_only() -> None:
    req = "req_1_aa00bb11"
    answers = [
        {
            "type": "control_response",
            "response": {"subtype": "success", "request_id": f"cli-{i}", "response": {"ok": i}},
        }
        for i in range(3)
    ]
    events = [ev(0, "in", user("first")), *[ev(i + 1, "in", a) for i, a in enumerate(answers)]]
    events.append(
        ev(
            5,
            "in",
            {"type": "control_request", "request_id": req, "request": {"subtype": "interrupt"}},
        )
    )
    recorded = Cassette(new_header(argv=["claude"]), events)
    matcher = Matcher(compile_script(recorded))
    divergence = matcher.offer(live(user("second")))
    assert divergence is not None
    assert [c.lane for c in divergence.candidates] == []  # no other user line is pending
    divergence = Matcher(compile_script(recorded)).offer(
        live(
            {
                "type": "control_response",
                "response": {"subtype": "success", "request_id": "cli-9", "response": {"ok": 7}},
            }
        )
    )
    assert divergence is not None
    # Answers to other requests that differ in more than their id are listed, the
    # user line and the interrupt request never are.
    assert {c.lane.split(":")[0] for c in divergence.candidates} == {"response"}


# -- settings from a marker ------------------------------------------------------------------


def test_unknown_marker_keys_are_errors_listing_the_valid_ones() -> None:
    with pytest.raises(BadSetting) as caught:
        settings_from({"record_modes": "none"}, {})
    message = str(caught.value)
    assert "'record_modes'" in message and ", ".join(MARKER_KEYS) in message


@pytest.mark.parametrize(
    ("marker", "why"),
    [
        ({"volatile_paths": "message.content"}, "must start with '$'"),
        ({"match_regex": ["$.a"]}, "expected PATH=REGEX"),
        ({"match_regex": {"$.a": "("}}, "bad regex"),
        ({"match": lambda a, b: True}, "top level of a module"),
        ({"match_argv": "maybe"}, "True or False"),
        ({"fault": "crash"}, "KIND[=VALUE]@N"),
        ({"redact": 5}, "a string or a list of strings"),
    ],
)
def test_bad_marker_values_are_errors(marker: dict[str, Any], why: str) -> None:
    with pytest.raises(BadSetting) as caught:
        settings_from(marker, {})
    assert why in str(caught.value)


def test_settings_become_replay_flags() -> None:
    settings = settings_from(
        {"volatile_paths": "$.x", "match": same_words, "fault": ["crash@2"], "match_argv": False},
        {"redact": [r"ORDER-\d+"], "ignore_argv": ["--model"], "match_regex": ["$.y=a+"]},
    )
    args = settings.replay_args()
    assert args[:2] == ["--redact", r"ORDER-\d+"]
    for flag, value in (
        ("--volatile-path", "$.x"),
        ("--match-regex", "$.y=a+"),
        ("--ignore-argv", "model"),
        ("--fault", "crash@2"),
    ):
        assert args[args.index(flag) + 1] == value
    assert "--no-match-argv" in args
    assert args[args.index("--matcher") + 1].endswith("test_replay_rules.py:same_words")


def test_a_matcher_file_inside_a_package_imports_as_under_pytest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from claudetrace.replay.rules import load_matcher

    monkeypatch.setattr(sys, "path", list(sys.path))
    package = tmp_path / "proj" / "apptests"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("def same(a, b):\n    return a == b\n")
    (package / "test_m.py").write_text(
        "from apptests.helpers import same\n\n\n"
        "def match(recorded, live):\n    return same(recorded, live)\n"
    )
    monkeypatch.delitem(sys.modules, "apptests", raising=False)
    match = load_matcher(f"{package / 'test_m.py'}:match")
    assert match(1, 1) and not match(1, 2)


def test_a_catastrophic_redaction_pattern_costs_linear_time() -> None:
    import time

    from claudetrace.replay.engine import live_sanitizer

    sanitizer = live_sanitizer({"redact": ["(a+)+$", "x(a|aa)*y"]})
    text = "a" * 5000 + "!"
    line = json.dumps({"type": "user", "text": text, "t": "x" + text}).encode()
    # CPU time, not wall time: a loaded machine does not slow it; a backtracking
    # engine would spend far more than this on 5,000 characters.
    start = time.process_time()
    assert sanitizer.line(line) == line  # neither pattern matches: the line as it was
    assert time.process_time() - start < 1
    assert b"[REDACTED]" in sanitizer.line(b'{"t": "aaaa"}')


@pytest.mark.parametrize(("signal", "message"), [
    (19, "signal 19 (SIGSTOP) would not end the fake CLI"),
    (18, "(SIGCONT) would not end"), (1000000, "not a signal of this system"),
    (-3, "not a signal of this system"), (True, "not a signal number"),
])
def test_a_header_signal_the_replay_cannot_die_of_is_refused(signal: object, message: str) -> None:
    from claudetrace.errors import ReplayError
    from claudetrace.replay.engine import check_header

    with pytest.raises(ReplayError, match=re.escape(message)):
        check_header({"signal": signal})
    check_header({"signal": 15})
    check_header({"signal": None})
