"""The pytest plugin as a team relies on it in CI: redaction, matching settings, CLI
options, faults and stable re-recording, through ``pytester`` runs.

The inner project is the one of ``test_pytest_plugin.py`` (a host module driving
the CLI as an SDK does, a fake "real CLI" for recording); each test here is one
of the problems of issue 21 and fails on the plugin without its fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_pytest_plugin import _store_imported, app, run, write_test

pytest_plugins = ["pytester"]

__all__ = ["_store_imported", "app"]  # fixtures used from test_pytest_plugin


def record(pytester: pytest.Pytester, *args: str) -> None:
    run(pytester, "--claude-record-mode=once", *args).assert_outcomes(passed=1)


def echo_is_recorded(pytester: pytest.Pytester, marker: str = "") -> None:
    """The inner test, accepting the recorded echo (redacted, or of another prompt)."""
    write_test(pytester, marker)
    source = (pytester.path / "test_app.py").read_text()
    exact = 'assert result["result"] == "echo: " + os.environ.get("PLUGIN_TEST_PROMPT", "hello")'
    assert exact in source
    pytester.makepyfile(
        test_app=source.replace(exact, 'assert result["result"].startswith("echo: ")')
    )


# -- 1. redaction ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("marker", "prompt"),
    [
        (r'(redact=[r"ORDER-\d+"])', "ship ref ORDER-12345 today"),
        ("", "key sk-ant-api03-abcdefghijklmnop0123 inside"),
    ],
)
def test_a_sanitised_cassette_replays_green(
    pytester: pytest.Pytester,
    app: Path,
    monkeypatch: pytest.MonkeyPatch,
    marker: str,
    prompt: str,
) -> None:
    echo_is_recorded(pytester, marker)
    monkeypatch.setenv("PLUGIN_TEST_PROMPT", prompt)
    record(pytester)
    text = app.read_text(encoding="utf-8")
    assert "12345" not in text and "abcdefghijklmnop" not in text
    run(pytester, "--claude-record-mode=none").assert_outcomes(passed=1)


def test_a_redacted_divergence_never_shows_the_secret(
    pytester: pytest.Pytester, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_test(pytester, r'(redact=[r"ORDER-\d+"])')
    monkeypatch.setenv("PLUGIN_TEST_PROMPT", "ref ORDER-1 a")
    record(pytester)
    monkeypatch.setenv("PLUGIN_TEST_PROMPT", "ref ORDER-777 b")
    result = run(pytester, "--claude-record-mode=none")
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert '$.message.content: expected "ref [REDACTED] a", got "ref [REDACTED] b"' in output
    assert "ORDER-777" not in output


# -- 2. matching from the marker and the ini file ---------------------------------------------


def test_unknown_marker_keys_and_bad_values_are_errors(
    pytester: pytest.Pytester, app: Path
) -> None:
    record(pytester)
    write_test(pytester, '(record_modes="none")')
    result = run(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*unknown claude_cassette marker key(s) 'record_modes' (valid keys: path, record_mode*"]
    )
    write_test(pytester, '(record_mode="sometimes")')
    result = run(pytester, "--claude-record-mode=none")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*unknown claude record mode 'sometimes'*"])
    # An ini value is checked the same way: one line naming the option and its values.
    write_test(pytester)
    pytester.makeini("[pytest]\nclaude_match_argv = maybe\n")
    result = run(pytester, "--claude-record-mode=none")
    result.assert_outcomes(errors=1)
    line = ("ini option claude_match_argv must be True or False "
            "(or one of true, yes, on, 1, false, no, off, 0), not 'maybe'")
    result.stdout.fnmatch_lines([line])
    assert result.stdout.str().count(line) == 1, result.stdout.str()
    assert "Traceback" not in result.stdout.str() and "UsageError" not in result.stdout.str()
    pytester.makeini("[pytest]\nclaude_match_argv = no\n")
    run(pytester, "--claude-record-mode=none").assert_outcomes(passed=1)


def test_volatile_paths_from_the_marker_and_the_ini_file(
    pytester: pytest.Pytester, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    echo_is_recorded(pytester)
    record(pytester)
    # The app now puts a run id in its prompt (the echoed answer is the recorded one).
    monkeypatch.setenv("PLUGIN_TEST_PROMPT", "hello run-4711")
    run(pytester, "--claude-record-mode=none").assert_outcomes(failed=1)
    pytester.makeini("[pytest]\nclaude_volatile_paths =\n    $.message.content\n")
    run(pytester, "--claude-record-mode=none").assert_outcomes(passed=1)
    pytester.makeini("[pytest]\n")
    run(pytester, "--claude-record-mode=none").assert_outcomes(failed=1)
    source = (pytester.path / "test_app.py").read_text()
    pytester.makepyfile(
        test_app=source.replace(
            "@pytest.mark.claude_cassette",
            "def same_greeting(recorded, live):\n"
            "    return live['message']['content'].startswith(recorded['message']['content'])\n\n\n"
            "@pytest.mark.claude_cassette(match=same_greeting)",
        )
    )
    run(pytester, "--claude-record-mode=none").assert_outcomes(passed=1)


# -- 3. CLI options ----------------------------------------------------------------------------


def test_a_changed_model_fails_with_the_argv_difference_first(
    pytester: pytest.Pytester, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLUGIN_TEST_ARGS", json.dumps(["--model", "claude-opus-5-5"]))
    record(pytester)
    monkeypatch.setenv("PLUGIN_TEST_ARGS", json.dumps(["--model", "claude-haiku-9"]))
    result = run(pytester, "--claude-record-mode=none")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*claude cassette divergence (argv-mismatch): the host started the CLI with "
            "different options: --model*",
            '*argv --model: expected "claude-opus-5-5", got "claude-haiku-9"*',
        ]
    )
    write_test(pytester, "(match_argv=False)")
    run(pytester, "--claude-record-mode=none").assert_outcomes(passed=1)
    write_test(pytester, '(ignore_argv=["model"])')
    run(pytester, "--claude-record-mode=none").assert_outcomes(passed=1)


# -- 4. faults ---------------------------------------------------------------------------------

FAULT_TEST = """\
import json, subprocess
import pytest

ARGS = ["--output-format", "stream-json", "--verbose", "--input-format", "stream-json"]
INIT = json.dumps(dict(type="control_request", request_id="req_1_00ff00ff",
                       request=dict(subtype="initialize", hooks=None))) + "\\n"


@pytest.mark.claude_cassette("test_app/test_echo.ndjson", fault="{spec}")
def test_host_sees_the_fault(claude_cli, tmp_path):
    proc = subprocess.Popen([claude_cli, *ARGS], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    out, err = proc.communicate(INIT.encode(), timeout=20)
    assert proc.returncode == {code}, (proc.returncode, err)
    assert {check}
"""


@pytest.mark.parametrize(
    ("spec", "code", "check"),
    [
        ("crash@0", 1, "out == b''"),
        ("exit=9@1", 9, "len(out.splitlines()) == 1"),
        ("garbage@0", 0, "out.startswith(b'{claudetrace injected garbage')"),
    ],
)
def test_a_test_that_injects_a_fault_is_not_failed_for_input_it_never_sent(
    pytester: pytest.Pytester, app: Path, spec: str, code: int, check: str
) -> None:
    record(pytester)
    pytester.makepyfile(test_fault=FAULT_TEST.format(spec=spec, code=code, check=check))
    run(pytester, "test_fault.py", "--claude-record-mode=none").assert_outcomes(passed=1)


def test_a_fault_never_records(pytester: pytest.Pytester, app: Path) -> None:
    pytester.makepyfile(test_fault=FAULT_TEST.format(spec="crash@0", code=1, check="True"))
    result = run(pytester, "test_fault.py", "--claude-record-mode=once")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fault= replays an existing cassette*"])


# -- 5. re-recording -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["all", "rewrite"])
def test_re_recording_an_unchanged_app_leaves_the_cassette_byte_identical(
    pytester: pytest.Pytester, app: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    record(pytester)
    before = app.read_bytes()
    run(pytester, f"--claude-record-mode={mode}").assert_outcomes(passed=1)
    assert app.read_bytes() == before
    # A real change shows as a change of the lines it touches, and only those.
    monkeypatch.setenv("PLUGIN_TEST_PROMPT", "changed")
    run(pytester, f"--claude-record-mode={mode}").assert_outcomes(passed=1)
    old_lines = before.decode().splitlines()
    new_lines = app.read_text().splitlines()
    changed = [i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b]
    assert changed and len(changed) <= 4, changed
    assert all("changed" in new_lines[i] for i in changed)


def test_new_episodes_says_when_it_kept_the_old_cassette(
    pytester: pytest.Pytester, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record(pytester, "--claude-record-mode=new_episodes")
    before = app.read_bytes()
    monkeypatch.setenv("PLUGIN_TEST_PROMPT", "again")
    monkeypatch.setenv("PLUGIN_TEST_FAIL", "1")
    result = run(pytester, "--claude-record-mode=new_episodes")
    result.assert_outcomes(failed=1)
    assert app.read_bytes() == before
    result.stdout.fnmatch_lines(
        [
            "*test_echo: diverged from its cassette; the new recording failed, "
            "so the old cassette is kept*"
        ]
    )
    assert "recorded again" not in result.stdout.str()


# -- the real SDK and the real CLI against the fake API ----------------------------------------


@pytest.mark.slow
def test_re_recording_with_the_real_sdk_and_cli_is_a_zero_line_diff(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, _store_imported: None
) -> None:
    from claudetrace.testing.harness import bundled_cli
    from tests.test_pytest_plugin import SDK_TEST

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("CLAUDETRACE_REAL_CLI", str(bundled_cli()))
    monkeypatch.setenv("PLUGIN_TEST_API", "1")
    pytester.makepyfile(test_sdk=SDK_TEST)
    run(pytester, "--claude-record-mode=once").assert_outcomes(passed=1)
    cassette = pytester.path / "tests" / "cassettes" / "test_sdk" / "test_hello.ndjson"
    before = cassette.read_text(encoding="utf-8").splitlines()
    run(pytester, "--claude-record-mode=all").assert_outcomes(passed=1)
    after = cassette.read_text(encoding="utf-8").splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=False) if a != b]
    assert len(before) == len(after) and changed == []
    monkeypatch.setenv("PLUGIN_TEST_API", "0")
    monkeypatch.setenv("CLAUDETRACE_REAL_CLI", str(pytester.path / "no-such-claude"))
    run(pytester, "--claude-record-mode=none").assert_outcomes(passed=1)


UNREACHABLE_TEST = """\
import asyncio
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient
from claudetrace.testing.harness import cli_env, make_home


async def app(cli, home):
    env = cli_env("http://127.0.0.1:9", home)  # nothing listens there
    options = ClaudeAgentOptions(cli_path=cli, cwd=str(home / "project"), env=env)
    async with ClaudeSDKClient(options) as client:
        await client.query("Say hello.")
        async for message in client.receive_response():
            assert not getattr(message, "is_error", False), message.result


def test_hello(claude_cli, tmp_path):
    asyncio.run(app(claude_cli, make_home(tmp_path / "home")))
"""


@pytest.mark.slow
def test_recording_against_an_unreachable_api_fails_fast_with_a_reason(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, _store_imported: None
) -> None:
    import time

    from claudetrace.testing.harness import bundled_cli

    monkeypatch.delenv("CI", raising=False)
    for name in ("CLAUDE_CODE_MAX_RETRIES", "API_TIMEOUT_MS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLAUDETRACE_REAL_CLI", str(bundled_cli()))
    pytester.makepyfile(test_down=UNREACHABLE_TEST)
    pytester.makeini("[pytest]\nclaude_record_timeout = 20\n")
    started = time.monotonic()
    result = run(pytester, "--claude-record-mode=once")
    elapsed = time.monotonic() - started
    result.assert_outcomes(failed=1)
    assert elapsed < 30
    result.stdout.fnmatch_lines(
        ["*claude cassette recording failed on the API: API Error: Connection refused*"]
    )
    assert not (pytester.path / "tests" / "cassettes" / "test_down").exists()


FIXTURE_TEST = """\
import asyncio, os
from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ClaudeSDKClient, TextBlock
from claudetrace.testing import text, tool_use
from claudetrace.testing.harness import cli_env, make_home


async def app(cli, home, url):
    options = ClaudeAgentOptions(cli_path=cli, cwd=str(home / "project"), env=cli_env(url, home),
                                 allowed_tools=["Bash"])
    texts = []
    async with ClaudeSDKClient(options) as client:
        await client.query("What is the date? Use the shell.")
        async for msg in client.receive_response():
            if isinstance(msg, AssistantMessage):
                texts += [b.text for b in msg.content if isinstance(b, TextBlock)]
    return texts


def test_date(claude_cli, claude_fake_api, tmp_path):
    claude_fake_api.when(r"the date", tool_use("Bash", {"command": "echo 2026-01-01"}),
                         text("It is 2026-01-01."))
    texts = asyncio.run(app(claude_cli, make_home(tmp_path / "home"), claude_fake_api.url))
    assert texts == ["It is 2026-01-01."], [r.last_user_text for r in claude_fake_api.requests]
    if os.environ.get("EXPECT_REPLAY") == "1":
        assert claude_fake_api.requests == []
"""


@pytest.mark.slow
def test_the_fake_api_fixture_records_a_cassette_without_a_key(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, _store_imported: None
) -> None:
    from claudetrace.testing.harness import bundled_cli

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("EXPECT_REPLAY", raising=False)
    monkeypatch.setenv("CLAUDETRACE_REAL_CLI", str(bundled_cli()))
    pytester.makepyfile(test_fixture=FIXTURE_TEST)
    run(pytester, "--claude-record-mode=once").assert_outcomes(passed=1)
    cassette = pytester.path / "tests" / "cassettes" / "test_fixture" / "test_date.ndjson"
    assert b"It is 2026-01-01." in cassette.read_bytes()
    monkeypatch.setenv("EXPECT_REPLAY", "1")
    monkeypatch.setenv("CLAUDETRACE_REAL_CLI", str(pytester.path / "no-such-claude"))
    run(pytester, "--claude-record-mode=none").assert_outcomes(passed=1)
