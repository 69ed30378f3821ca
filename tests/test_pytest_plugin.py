"""The pytest plugin, driven through ``pytester`` across all record modes.

Recording goes through the real proxy to a fake "real CLI" (a small script that
speaks enough stream-json); replay goes through the real replay engine.  The
inner tests drive the CLI as an SDK host would: initialize, one user turn, EOF.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

import claudetrace
from claudetrace.cassette import read_cassette
from claudetrace.pytest_plugin import SUFFIX, cassette_name, cassette_path, format_divergence
from claudetrace.replay import Divergence, DivergenceKind

pytest_plugins = ["pytester"]

FAKE_KEY = "sk-ant-api03-plugintestsecret0123"

FAKE_CLAUDE = """\
#!{python}
import json, os, sys

if sys.argv[1:] in (["-v"], ["--version"]):
    print("9.9.9 (Claude Code)")
    sys.exit(0)

def send(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\\n")
    sys.stdout.flush()

home = os.environ.get("HOME", "")
for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] == "control_request":
        send({{"type": "control_response", "response": {{"subtype": "success",
              "request_id": msg["request_id"], "response": {{}}}}}})
    elif msg["type"] == "user":
        prompt = msg["message"]["content"]
        send({{"type": "system", "subtype": "init", "session_id": "s-1", "cwd": os.getcwd(),
              "model": "fake", "memory": home + "/.claude/memory",
              "key": os.environ.get("FAKE_API_KEY", "")}})
        send({{"type": "assistant", "session_id": "s-1",
              "message": {{"role": "assistant", "content": [{{"type": "text",
              "text": "echo: " + prompt}}]}}}})
        send({{"type": "result", "subtype": "success", "is_error": False,
              "session_id": "s-1", "result": "echo: " + prompt}})
if os.environ.get("FAKE_LINGER"):
    import time
    time.sleep(float(os.environ["FAKE_LINGER"]))
sys.stderr.write("fake claude: bye\\n")
"""

HOST = """\
import json, os, secrets, subprocess


def run_host(cli, cwd):
    \"\"\"Drive `cli` like an SDK host; returns the parsed stdout messages.\"\"\"
    prompt = os.environ.get("PLUGIN_TEST_PROMPT", "hello")
    extra = json.loads(os.environ.get("PLUGIN_TEST_ARGS", "[]"))
    proc = subprocess.Popen(
        [cli, "--output-format", "stream-json", "--verbose", "--input-format", "stream-json",
         *extra],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
    )
    def send(obj):
        proc.stdin.write((json.dumps(obj) + "\\n").encode())
        proc.stdin.flush()
    def read_until(kind):
        out = []
        while True:
            line = proc.stdout.readline()
            if not line:
                return out
            out.append(json.loads(line))
            if out[-1]["type"] == kind:
                return out
    req = "req_1_" + secrets.token_hex(4)
    send({"type": "control_request", "request_id": req,
          "request": {"subtype": "initialize", "hooks": None}})
    messages = read_until("control_response")
    assert messages[-1]["response"]["request_id"] == req, messages
    send({"type": "user", "session_id": "",
          "message": {"role": "user", "content": prompt}, "parent_tool_use_id": None})
    messages += read_until("result")
    proc.stdin.close()
    messages += [json.loads(line) for line in proc.stdout]
    proc.stderr.read()
    proc.wait(timeout=10)
    proc.stdout.close()
    proc.stderr.close()
    return messages, proc.returncode
"""

TEST_APP = """\
import os
import pytest
from host import run_host


@pytest.mark.claude_cassette{marker}
def test_echo(claude_cli, tmp_path):
    messages, code = run_host(claude_cli, tmp_path)
    result = messages[-1]
    assert result["type"] == "result", messages
    assert not result["is_error"], result
    init = next(m for m in messages if m.get("subtype") == "init")
    # The recorded cwd (a placeholder in the cassette) is the live one on replay.
    assert init["cwd"] == str(tmp_path)
    assert result["result"] == "echo: " + os.environ.get("PLUGIN_TEST_PROMPT", "hello")
    assert os.environ.get("PLUGIN_TEST_FAIL") != "1", "asked to fail"
"""


@pytest.fixture(scope="module")
def _store_imported(tmp_path_factory: pytest.TempPathFactory) -> None:
    # pytester's in-process runs restore sys.modules afterwards; modules that the
    # plugin's store first imports inside an inner run would then be imported
    # twice, which SQLAlchemy does not survive.  Import them out here, once.
    from claudetrace.indexer import open_settled_store

    open_settled_store(str(tmp_path_factory.mktemp("warm") / "warm.db")).close()


@pytest.fixture
def app(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    _store_imported: None,
) -> Path:
    """An inner project: a host module, one cassette-backed test, a fake real CLI."""
    fake = tmp_path / "bin" / "claude"
    fake.parent.mkdir()
    fake.write_text(FAKE_CLAUDE.format(python=sys.executable), encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("CLAUDETRACE_REAL_CLI", str(fake))
    monkeypatch.setenv("FAKE_API_KEY", FAKE_KEY)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("PLUGIN_TEST_PROMPT", raising=False)
    monkeypatch.delenv("PLUGIN_TEST_FAIL", raising=False)
    monkeypatch.delenv("PLUGIN_TEST_ARGS", raising=False)
    pytester.makepyfile(host=HOST)
    write_test(pytester)
    return pytester.path / "tests" / "cassettes" / "test_app" / "test_echo.ndjson"


def write_test(pytester: pytest.Pytester, marker: str = "") -> None:
    pytester.makepyfile(test_app=TEST_APP.format(marker=marker))


#: Plugins the inner runs do not need; loading them costs about a second a run.
NOT_NEEDED = ("cacheprovider", "hypothesispytest", "anyio", "timeout")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    disabled = [arg for name in NOT_NEEDED for arg in ("-p", f"no:{name}")]
    return pytester.runpytest_inprocess(*disabled, *args)


def break_real_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Make recording impossible, to prove a run replayed."""
    monkeypatch.setenv("CLAUDETRACE_REAL_CLI", str(tmp_path / "no-such-claude"))


# -- record modes ----------------------------------------------------------------------


def test_once_records_a_sanitised_cassette_then_replays_it(
    pytester: pytest.Pytester, app: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    result = run(pytester, "--claude-record-mode=once")
    result.assert_outcomes(passed=1)
    assert app.is_file()
    text = app.read_text(encoding="utf-8")
    assert FAKE_KEY not in text and "[REDACTED]" in text
    assert str(pytester.path) not in text and str(tmp_path) not in text
    cassette = read_cassette(app)
    assert cassette.header["cwd"] == "/home/dev/project"
    assert "--claude-record-mode=rewrite" in cassette.header["rerecord"]
    assert [e.direction for e in cassette.events].count("in") == 2
    assert any(e.direction == "err" for e in cassette.events)

    break_real_cli(monkeypatch, tmp_path)
    before = app.read_bytes()
    run(pytester, "--claude-record-mode=once").assert_outcomes(passed=1)
    assert app.read_bytes() == before


def test_none_without_cassette_fails_at_setup(pytester: pytest.Pytester, app: Path) -> None:
    result = run(pytester, "--claude-record-mode=none")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*claude cassette*does not exist and the record mode is 'none'*"])
    assert not app.exists()


def test_ci_defaults_to_none(
    pytester: pytest.Pytester, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    run(pytester).assert_outcomes(errors=1)
    pytester.makeini("[pytest]\nclaude_record_mode = once\n")
    run(pytester).assert_outcomes(passed=1)
    assert app.is_file()


def test_divergence_fails_with_the_replay_report(
    pytester: pytest.Pytester, app: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    run(pytester, "--claude-record-mode=once").assert_outcomes(passed=1)
    break_real_cli(monkeypatch, tmp_path)
    monkeypatch.setenv("PLUGIN_TEST_PROMPT", "goodbye")
    result = run(pytester, "--claude-record-mode=none")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*claude cassette divergence (unmatched-message)*",
            "*diff (expected vs actual):*",
            '*$.message.content: expected "hello", got "goodbye"*',
            "*to re-record: pytest 'test_app.py::test_echo' --claude-record-mode=rewrite*",
        ]
    )


def test_marker_sets_mode_and_command_line_overrides_it(
    pytester: pytest.Pytester, app: Path
) -> None:
    write_test(pytester, '(record_mode="none")')
    run(pytester).assert_outcomes(errors=1)
    run(pytester, "--claude-record-mode=once").assert_outcomes(passed=1)
    assert app.is_file()


def test_new_episodes_rerecords_after_divergence(
    pytester: pytest.Pytester, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(pytester, "--claude-record-mode=new_episodes").assert_outcomes(passed=1)
    assert b"hello" in app.read_bytes()
    monkeypatch.setenv("PLUGIN_TEST_PROMPT", "again")
    result = run(pytester, "--claude-record-mode=new_episodes")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*re-recorded*", "*test_echo: diverged from its cassette*"])
    data = app.read_bytes()
    assert b"echo: again" in data and b"echo: hello" not in data


def test_all_replaces_only_when_the_test_passes(
    pytester: pytest.Pytester, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(pytester, "--claude-record-mode=once").assert_outcomes(passed=1)
    original = app.read_bytes()

    monkeypatch.setenv("PLUGIN_TEST_PROMPT", "failing run")
    monkeypatch.setenv("PLUGIN_TEST_FAIL", "1")
    run(pytester, "--claude-record-mode=all").assert_outcomes(failed=1)
    assert app.read_bytes() == original

    monkeypatch.setenv("PLUGIN_TEST_FAIL", "0")
    run(pytester, "--claude-record-mode=all").assert_outcomes(passed=1)
    assert b"echo: failing run" in app.read_bytes()


def test_rewrite_replaces_the_cassette_only_with_a_new_recording(
    pytester: pytest.Pytester, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(pytester, "--claude-record-mode=once").assert_outcomes(passed=1)
    original = app.read_bytes()
    monkeypatch.setenv("PLUGIN_TEST_FAIL", "1")
    run(pytester, "--claude-record-mode=rewrite").assert_outcomes(failed=1)
    assert app.read_bytes() == original  # nothing deleted before its replacement exists
    monkeypatch.setenv("PLUGIN_TEST_FAIL", "0")
    monkeypatch.setenv("PLUGIN_TEST_PROMPT", "rewritten")
    run(pytester, "--claude-record-mode=rewrite").assert_outcomes(passed=1)
    assert b"echo: rewritten" in app.read_bytes()


@pytest.mark.parametrize("mode", ["rewrite", "all", "once"])
def test_a_recording_that_cannot_start_fails_at_setup_and_touches_nothing(
    pytester: pytest.Pytester, app: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    mode: str,
) -> None:
    if mode != "once":
        run(pytester, "--claude-record-mode=once").assert_outcomes(passed=1)
    before = app.read_bytes() if app.exists() else None
    break_real_cli(monkeypatch, tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CLAUDETRACE_REAL_CLI")
    result = run(pytester, f"--claude-record-mode={mode}")
    if mode == "once":  # replays the cassette it has; records only a missing one
        assert before is None
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*cannot find the real claude CLI: set $CLAUDETRACE_REAL_CLI*"
                                 "the cassette is unchanged*"])
    result.stdout.no_fnmatch_line("*--real*")
    assert (app.read_bytes() if app.exists() else None) == before


def _setup_error(result: pytest.RunResult, message: str) -> None:
    """The test errored at setup with ``message`` on one line, no traceback of ours."""
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*{message}*"])
    assert "Traceback" not in result.stdout.str()


def test_a_malformed_cassette_fails_at_setup_with_its_reason(
    pytester: pytest.Pytester, app: Path
) -> None:
    app.parent.mkdir(parents=True)
    app.write_text('{"claudetrace": "cassette", "version": 1}\nnot json\n')
    _setup_error(run(pytester, "--claude-record-mode=none"),
                 "cannot be replayed: *:2: event is not JSON*")


@pytest.mark.parametrize(("signal", "message"), [
    (19, "signal 19 (SIGSTOP) would not end the fake CLI*"),
    (1000000, "signal 1000000 is not a signal of this system"),
    ("TERM", "\"signal\" must be an integer or null, not 'TERM'"),
])
def test_a_cassette_whose_signal_would_hang_or_fail_the_replay_fails_at_setup(
    pytester: pytest.Pytester, app: Path, signal: object, message: str
) -> None:
    run(pytester, "--claude-record-mode=once").assert_outcomes(passed=1)
    lines = app.read_text().splitlines()
    lines[0] = json.dumps({**json.loads(lines[0]), "signal": signal})
    app.write_text("\n".join(lines) + "\n")
    _setup_error(run(pytester, "--claude-record-mode=none"), message)


@pytest.mark.parametrize(("marker", "message"), [
    ("(path=123)", "claude_cassette path= must be a string or a path, not 123"),
    ('("a.ndjson", "b.ndjson")', "claude_cassette takes one positional argument*got 2*"),
    ('("a.ndjson", path="b.ndjson")', "give the cassette's path once*"),
    ("(record_mode=1)", "claude_cassette record_mode= must be a string, not 1"),
    ('(match="no_such_module_x:f")', "claude_cassette match: cannot load matcher*"),
    ('(redact=["(a+)+$", "(?<=x)y"])', "not one the linear-time engine (RE2) takes*"),
])
def test_a_bad_marker_value_fails_at_setup_in_one_line(
    pytester: pytest.Pytester, app: Path, marker: str, message: str
) -> None:
    write_test(pytester, marker)
    _setup_error(run(pytester, "--claude-record-mode=once"), message)
    assert not app.exists()


ANYIO_TEST = """\
import pytest
from host import run_host


@pytest.mark.anyio
@pytest.mark.claude_cassette{marker}
async def test_echo(claude_cli, tmp_path):
    messages, code = run_host(claude_cli, tmp_path)
    assert messages[-1]["type"] == "result", messages
"""


@pytest.mark.parametrize("marker", ["", '(path="shared/echo.ndjson")'])
def test_an_anyio_test_s_cassette_has_a_clean_name_and_its_hint_works(
    pytester: pytest.Pytester, app: Path, marker: str
) -> None:
    pytester.makepyfile(test_app=ANYIO_TEST.format(marker=marker))
    disabled = [arg for name in NOT_NEEDED if name != "anyio" for arg in ("-p", f"no:{name}")]
    pytester.runpytest_inprocess(*disabled, "--claude-record-mode=once").assert_outcomes(passed=1)
    cassette = app if not marker else pytester.path / "tests" / "cassettes" / "shared/echo.ndjson"
    assert sorted(p.name for p in cassette.parent.iterdir()) == [cassette.name]
    hint = read_cassette(cassette).header["rerecord"]
    nodeid = re.search(r"pytest '([^']+)'", hint)
    assert nodeid is not None and "[asyncio]" in nodeid[1]
    result = pytester.runpytest_inprocess(*disabled, nodeid[1], "--claude-record-mode=rewrite")
    result.assert_outcomes(passed=1)
    assert sorted(p.name for p in cassette.parent.iterdir()) == [cassette.name]


def test_a_cassette_named_the_old_way_is_still_found(
    pytester: pytest.Pytester, app: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytester.makepyfile(test_app=TEST_APP.format(marker="").replace(
        "def test_echo(claude_cli, tmp_path):",
        "@pytest.mark.parametrize('n', [1])\ndef test_echo(claude_cli, tmp_path, n):"))
    run(pytester, "--claude-record-mode=once").assert_outcomes(passed=1)
    new = app.with_name("test_echo-1.ndjson")
    assert new.is_file()
    new.rename(app.with_name("test_echo-1-.ndjson"))
    break_real_cli(monkeypatch, tmp_path)
    run(pytester, "--claude-record-mode=none").assert_outcomes(passed=1)


def test_a_read_only_checkout_fails_at_setup_before_recording(
    pytester: pytest.Pytester, app: Path, tmp_path: Path, obeys_chmod: list[str]
) -> None:
    # The real CLI recorded, the test passed, then its teardown was a traceback
    # (PermissionError making the cassette's folder).
    disabled = [arg for name in NOT_NEEDED for arg in ("-p", f"no:{name}")]
    pytester.path.chmod(0o555)
    try:
        result = pytester.run(*obeys_chmod, sys.executable, "-m", "pytest", *disabled,
                              f"--basetemp={tmp_path / 'inner'}", "--claude-record-mode=once")
    finally:
        pytester.path.chmod(0o755)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*cannot record claude cassette {app} (mode once): "
                                 f"{pytester.path} is not writable; the cassette is unchanged"])
    assert "Traceback" not in result.stdout.str() and not app.exists()
    assert not list((tmp_path / "inner").rglob("recording.db"))  # nothing recorded


def test_failed_recording_writes_nothing(
    pytester: pytest.Pytester, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLUGIN_TEST_FAIL", "1")
    run(pytester, "--claude-record-mode=once").assert_outcomes(failed=1)
    assert not app.exists()


DETACHED_TEST = """\
import json, os


def test_detached(claude_cli):
    # A host that does not wait for the CLI to exit after its last result
    # (spawned without a Popen, which would complain about that).
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    quiet = os.open(os.devnull, os.O_WRONLY)
    argv = [claude_cli, "--output-format", "stream-json", "--input-format", "stream-json"]
    os.posix_spawn(claude_cli, argv, dict(os.environ), file_actions=[
        (os.POSIX_SPAWN_DUP2, in_r, 0), (os.POSIX_SPAWN_DUP2, out_w, 1),
        (os.POSIX_SPAWN_DUP2, quiet, 2)])
    for fd in (in_r, out_w, quiet):
        os.close(fd)
    os.write(in_w, json.dumps({"type": "user", "session_id": "", "parent_tool_use_id": None,
        "message": {"role": "user", "content": "hi"}}).encode() + b"\\n")
    os.close(in_w)
    with os.fdopen(out_r, "rb") as out:
        assert any(json.loads(line)["type"] == "result" for line in out)
"""


def test_a_cli_still_running_after_the_test_is_waited_for(
    pytester: pytest.Pytester, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The recording only reaches the store after the CLI (and so the proxy)
    # has exited: the plugin must wait for it, not report that claude never ran.
    monkeypatch.setenv("FAKE_LINGER", "1.5")
    pytester.makepyfile(test_detached=DETACHED_TEST)
    run(pytester, "test_detached.py", "--claude-record-mode=once").assert_outcomes(passed=1)
    cassette = pytester.path / "tests" / "cassettes" / "test_detached" / "test_detached.ndjson"
    events = read_cassette(cassette).events
    assert any(e.direction == "err" and e.data == b"fake claude: bye" for e in events)
    assert read_cassette(cassette).header.get("exit_code") == 0


def test_unused_cassettes_are_listed(pytester: pytest.Pytester, app: Path) -> None:
    run(pytester, "--claude-record-mode=once").assert_outcomes(passed=1)
    stale = app.parent / "test_removed.ndjson"
    stale.write_bytes(app.read_bytes())
    result = run(pytester, "--claude-record-mode=none", "--claude-cassettes-unused")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*unused claude cassettes*", f"*{stale}"])
    assert str(app) not in result.stdout.str().split("unused claude cassettes")[1]


def test_summaries_under_xdist_count_every_worker(
    pytester: pytest.Pytester, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each worker knows only its own tests: the controller, which writes the
    # summaries, hears from the workers what they used and re-recorded.
    pytester.makepyfile(test_other=TEST_APP.format(marker=""))
    run(pytester, "--claude-record-mode=once").assert_outcomes(passed=2)
    orphan = app.parent.parent / "orphan.ndjson"
    orphan.write_bytes(app.read_bytes())
    disabled = [arg for name in NOT_NEEDED for arg in ("-p", f"no:{name}")]

    result = pytester.runpytest_subprocess(
        *disabled, "-n", "2", "--claude-record-mode=none", "--claude-cassettes-unused"
    )
    result.assert_outcomes(passed=2)
    unused = result.stdout.str().split("unused claude cassettes")[1].split("passed")[0]
    assert str(orphan) in unused and SUFFIX not in unused.replace(str(orphan), "")

    monkeypatch.setenv("PLUGIN_TEST_PROMPT", "again")
    result = pytester.runpytest_subprocess(
        *disabled, "-n", "2", "--claude-record-mode=new_episodes"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*re-recorded*", "*test_echo: diverged from its cassette*"])
    assert result.stdout.str().count("diverged from its cassette, recorded again") == 2


def test_bad_record_mode_is_a_usage_error(pytester: pytest.Pytester, app: Path) -> None:
    result = run(pytester, "--claude-record-mode=sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown claude record mode 'sometimes'*"])


# -- pure helpers ----------------------------------------------------------------------


def test_cassette_names_are_file_safe() -> None:
    assert cassette_name("tests/test_a.py::test_x") == "test_x.ndjson"
    assert cassette_name("tests/test_a.py::TestX::test_y[a/b-1]") == "TestX.test_y-a-b-1.ndjson"
    base = Path("/c")
    assert cassette_path(base, Path("tests/test_a.py"), "t.py::test_x") == Path(
        "/c/test_a/test_x.ndjson"
    )
    assert cassette_path(base, Path("t.py"), "t.py::x", "shared/s.ndjson") == Path(
        "/c/shared/s.ndjson"
    )


def test_format_divergence_renders_the_engine_report() -> None:
    divergence = Divergence(
        kind=DivergenceKind.INPUT_NEVER_SENT,
        message="the host closed stdin before sending 1 recorded input",
        turn=2,
        rerecord="pytest x --claude-record-mode=rewrite",
    )
    report = json.loads(json.dumps(divergence.to_json()))
    text = format_divergence(report, "tests/cassettes/a/b.ndjson")
    assert text.splitlines()[0] == (
        "claude cassette divergence (input-never-sent): "
        "the host closed stdin before sending 1 recorded input"
    )
    assert "  where: turn 2" in text
    assert "  cassette: tests/cassettes/a/b.ndjson" in text
    assert text.endswith("to re-record: pytest x --claude-record-mode=rewrite")


def test_plugin_module_docstring_mentions_every_mode() -> None:
    import claudetrace.recordmode as recordmode

    doc = textwrap.dedent(recordmode.__doc__ or "")
    for mode in ("none", "once", "new_episodes", "all", "rewrite"):
        assert f"``{mode}``" in doc


# -- the real SDK and the real CLI ---------------------------------------------------

SDK_TEST = """\
import asyncio, os
from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ClaudeSDKClient
from claude_agent_sdk import ResultMessage, TextBlock
from claudetrace.testing import FakeAPI, text
from claudetrace.testing.harness import cli_env, make_home


async def app(cli, cwd, env):
    options = ClaudeAgentOptions(cli_path=cli, cwd=str(cwd), env=env)
    texts, result = [], None
    async with ClaudeSDKClient(options) as client:
        await client.query("Say hello.")
        async for msg in client.receive_response():
            if isinstance(msg, AssistantMessage):
                texts += [b.text for b in msg.content if isinstance(b, TextBlock)]
            if isinstance(msg, ResultMessage):
                result = msg
    return texts, result


def test_hello(claude_cli, tmp_path):
    home = make_home(tmp_path / "home")
    if os.environ.get("PLUGIN_TEST_API") == "1":
        with FakeAPI(text("Hello from the fake API")) as api:
            texts, result = asyncio.run(app(claude_cli, home / "project", cli_env(api.url, home)))
    else:  # replay: nothing listens here
        texts, result = asyncio.run(
            app(claude_cli, home / "project", cli_env("http://127.0.0.1:9", home))
        )
    assert texts == ["Hello from the fake API"]
    assert result is not None and not result.is_error
"""


def record_sdk_test(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Record ``SDK_TEST`` with the real SDK and CLI against the fake API; its cassette."""
    from claudetrace.testing.harness import bundled_cli

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("CLAUDETRACE_REAL_CLI", str(bundled_cli()))
    monkeypatch.setenv("PLUGIN_TEST_API", "1")
    pytester.makepyfile(test_sdk=SDK_TEST)
    run(pytester, "--claude-record-mode=once").assert_outcomes(passed=1)
    return pytester.path / "tests" / "cassettes" / "test_sdk" / "test_hello.ndjson"


def replay_sdk_test_offline(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run ``SDK_TEST`` again with no API and no real CLI: it must replay green."""
    monkeypatch.setenv("PLUGIN_TEST_API", "0")
    monkeypatch.setenv("CLAUDETRACE_REAL_CLI", str(pytester.path / "no-such-claude"))
    run(pytester, "--claude-record-mode=none").assert_outcomes(passed=1)


@pytest.mark.slow
def test_real_sdk_records_through_the_real_cli_then_replays_offline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, _store_imported: None
) -> None:
    cassette = record_sdk_test(pytester, monkeypatch)
    text = cassette.read_text(encoding="utf-8")
    assert str(pytester.path) not in text and "sk-ant-fake-key" not in text
    assert read_cassette(cassette).header["claude_code_version"]

    replay_sdk_test_offline(pytester, monkeypatch)


def test_the_package_uses_no_private_module_of_pytest() -> None:
    # Dependencies are used through their public API only.
    package = Path(claudetrace.__file__).parent
    offenders = [str(path.relative_to(package)) for path in sorted(package.rglob("*.py"))
                 if re.search(r"^\s*(from|import)\s+_pytest\b", path.read_text(encoding="utf-8"),
                              re.MULTILINE)]
    assert offenders == []
