"""End to end with a Go host: Go program → shim → proxy → real CLI → fake API, then replay.

``tests/go`` is a Go host of the CLI (``main.go``, module pinned in ``go.mod`` and
``go.sum``): it starts the CLI as the Go Agent SDKs do (``CLAUDE_CODE_ENTRYPOINT=sdk-go``,
``--setting-sources ""``, ``--input-format stream-json`` last), answers every
control request on its own goroutine, serves an in-process SDK MCP server through
``mcp_message`` requests, and prints what the application sees as JSON lines.
With an SDK MCP server the CLI answers the host's ``initialize`` only after the
host has answered the server's MCP ``initialize`` (CLI 2.1.330; the rest of the
set-up follows); the recording keeps that order and the replay reproduces it,
whatever order the Go host's answers leave in (``-jitter`` shuffles them on purpose).

The host is built with ``go build`` into ``.ci/go/bin`` with its module downloads
and build cache in ``.ci/go`` (``.ci/run`` builds it first); without ``go`` the
tests skip.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from claudetrace.cassette import read_cassette, write_cassette
from claudetrace.indexer import open_settled_store
from claudetrace.replay import write_replay_shim
from claudetrace.shim import self_command
from claudetrace.store import Store
from claudetrace.testing import FakeAPI, reply, text, tool_use
from claudetrace.testing.fakeapi import ToolUseBlock
from claudetrace.testing.harness import PROJECT_DIR, bundled_cli_version, make_home, subprocess_env
from tests.capture_rig import (
    HostRun,
    Rig,
    assert_causal_order,
    make_rig,
    stream_bytes,
    wait_for_recording,
)

pytestmark = [pytest.mark.slow, pytest.mark.go_sdk]

REPO = Path(__file__).resolve().parent.parent
GO_DIR = REPO / "tests" / "go"
#: Module downloads, build cache and the built host; .ci/run fills it first.
GO_CACHE = REPO / ".ci" / "go"
#: go.mod's go line.
MIN_GO = (1, 26)
#: Below pytest-timeout's 300 s, so a stuck build fails with its own message.
BUILD_TIMEOUT = 240
HOST_TIMEOUT = 90

MCP_PROMPT = "Add 2 and 40 with the calc tool."
DENY_PROMPT = "Make a file named made-by-go."
PLAIN_PROMPT = "Say hello in Go."
PARALLEL_PROMPT = "Add 2 and 40, and 1 and 1, at once."


def go_env() -> dict[str, str]:
    """The go command's environment: every cache under ``.ci/go``, the pinned sums only."""
    env = dict(os.environ)
    env.update(
        GOPATH=str(GO_CACHE),
        GOMODCACHE=str(GO_CACHE / "mod"),
        GOCACHE=str(GO_CACHE / "build"),
        # -modcacherw: a clean checkout can delete the cache; -mod=readonly: go.sum
        # is the whole truth, nothing is resolved afresh; -buildvcs=false: the same
        # binary whatever the state of the work tree.
        GOFLAGS="-modcacherw -mod=readonly -buildvcs=false",
        GOTOOLCHAIN="local",
    )
    return env


def go_version(go: str) -> tuple[int, ...]:
    done = subprocess.run(
        [go, "env", "GOVERSION"], capture_output=True, text=True, check=True, env=go_env()
    )
    return tuple(int(part) for part in re.findall(r"\d+", done.stdout)[:2])


def build_go_host(go: str) -> Path:
    """``go build`` the host into ``.ci/go/bin`` (a no-op when the build cache is warm).

    Several test sessions may share the working tree, so the build runs under an
    advisory lock of its own (not on ``go.sum``: the go command locks that file
    itself while it reads it).  A first build (no host built yet) downloads the
    modules and compiles them: 8 minutes at load 19, past the tests' timeout.  Not
    done within :data:`BUILD_TIMEOUT`, it goes on in the background and the tests
    skip saying so; the next run finds it done.  A build over a built host that
    takes that long (CI built it first) fails.
    """
    binary = GO_CACHE / "bin" / "gohost"
    GO_CACHE.mkdir(parents=True, exist_ok=True)
    built_before = binary.exists()
    log, status = GO_CACHE / "build.log", GO_CACHE / "build.status"
    with open(GO_CACHE / "build.lock", "wb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        status.unlink(missing_ok=True)
        # In the background of a shell that exits at once, so that a build this
        # session stops waiting for is not a child it leaves running.
        subprocess.run(
            ["sh", "-c", '("$1" build -o "$2" . > "$3" 2>&1; echo $? > "$4.new"; '
             'mv "$4.new" "$4") &', "sh", go, str(binary), str(log), str(status)],
            cwd=GO_DIR, env=go_env(), start_new_session=True, check=True,
        )
        deadline = time.monotonic() + BUILD_TIMEOUT
        while not status.exists():
            if time.monotonic() > deadline:
                if built_before:
                    pytest.fail(f"go build in tests/go took more than {BUILD_TIMEOUT} s "
                                "over a host built before")
                pytest.skip(f"the first go build of tests/go was not done after "
                            f"{BUILD_TIMEOUT} s; it goes on into .ci/go (its output in "
                            ".ci/go/build.log) and the next run uses it")
            time.sleep(0.1)
    if status.read_text().strip() != "0":
        pytest.fail(f"go build in tests/go failed:\n{log.read_text()[-3000:]}")
    return binary


@dataclass
class GoRig(Rig):
    """The built Go host, the shims and the database shared by this module."""

    host: Path


def comparable(run: HostRun) -> list[dict[str, Any]]:
    """The host's lines with its run's home folder (the CLI's cwd, its paths) made neutral.

    A replay reports the live run's folders where the recording had its own, the
    project's folder also in the form the CLI names its memory folder by.
    """
    project = run.capture / "home" / PROJECT_DIR
    shown = json.dumps(run.lines)
    shown = shown.replace(re.sub(r"[^A-Za-z0-9]", "-", str(project)), "<project-slug>")
    shown = shown.replace(str(run.capture / "home"), "<home>")
    return list(json.loads(shown))


@pytest.fixture(scope="module")
def go(tmp_path_factory: pytest.TempPathFactory, real_claude: Path) -> GoRig:
    go = shutil.which("go")
    if go is None:
        pytest.skip("the go command is needed for the Go host tests (Go >= 1.26)")
    if go_version(go) < MIN_GO:
        pytest.skip(f"Go {go_version(go)} is too old for tests/go (>= 1.26)")
    host = build_go_host(go)
    rig = make_rig(tmp_path_factory.mktemp("e2e-go"), real_claude)
    return GoRig(**vars(rig), host=host)


@pytest.fixture
def store(go: GoRig) -> Iterator[Store]:
    opened = open_settled_store(str(go.db))
    yield opened
    opened.close()


def run_host(
    go: GoRig,
    api: FakeAPI,
    name: str,
    cli: Path,
    scenario: str,
    prompt: str,
    *,
    jitter: str = "0s",
    delay: str = "0s",
    otel: bool = False,
    real: Path | None = None,
    extra_env: dict[str, str] | None = None,
) -> HostRun:
    """Run the Go host with ``cli`` as its CLI, in a fresh home."""
    capture = go.root / name
    home = make_home(capture / "home")
    extra = {"CT_CAPTURE": str(capture)}
    if real is not None:
        extra["CT_REAL"] = str(real)
    extra.update(extra_env or {})
    flags = ["-jitter", jitter, "-delay", delay, "-timeout", "60s", *(["-otel"] if otel else [])]
    done = subprocess.run(
        [str(go.host), "-cli", str(cli), "-scenario", scenario, "-prompt", prompt, *flags],
        cwd=home / PROJECT_DIR,
        env=subprocess_env(api.url, home, extra=extra),
        capture_output=True,
        text=True,
        timeout=HOST_TIMEOUT,
        check=False,
    )
    return HostRun.parse(done, capture)


#: The replay cases: the host's scenario and prompt.  In "parallel" the model
#: calls the (read-only) calc tool twice at once: the CLI asks for both hooks,
#: permissions and calls concurrently and the Go host answers in any order.
CASES = {
    "mcp": ("mcp", MCP_PROMPT),
    "parallel": ("mcp", PARALLEL_PROMPT),
    "deny": ("deny", DENY_PROMPT),
    "plain": ("plain", PLAIN_PROMPT),
}


def script(api: FakeAPI, case: str) -> None:
    """The fake API's replies for one case."""
    if case == "mcp":
        api.reset(tool_use("mcp__calc__add", {"a": 2, "b": 40}), text("The sum is 42."))
    elif case == "parallel":
        calls = [ToolUseBlock("mcp__calc__add", {"a": 2, "b": 40})]
        calls.append(ToolUseBlock("mcp__calc__add", {"a": 1, "b": 1}))
        api.reset(reply(*calls), text("42 and 2."))
    elif case == "deny":
        command = {"command": "touch made-by-go", "description": "Make a file"}
        api.reset(tool_use("Bash", command), text("The host said no."))
    else:
        api.reset(text("Hello from Go."))


def control(events: list[Any], direction: str, subtype: str) -> list[Any]:
    return [
        e
        for e in events
        if e.direction == direction
        and e.type == "control_request"
        and e.obj["request"]["subtype"] == subtype
    ]


def answers_to(events: list[Any], requests: list[Any]) -> list[Any]:
    ids = {r.request_id for r in requests}
    return [e for e in events if e.type == "control_response" and e.request_id in ids]


def test_go_host_with_an_sdk_mcp_server_through_the_proxy(
    go: GoRig, store: Store, fake_api: FakeAPI, real_claude: Path
) -> None:
    script(fake_api, "mcp")
    known = {r.id for r in store.list_recordings()}
    run = run_host(go, fake_api, "mcp", go.capture_shim, "mcp", MCP_PROMPT, real=real_claude)

    # The application's view: the server connected, hook, permission and tool ran.
    assert run.returncode == 0, (run.errors(), run.stderr[-2000:])
    assert run.errors() == []
    (init,) = run.messages("system", "init")
    assert init["claude_code_version"] == bundled_cli_version()
    assert {"name": "calc", "status": "connected"}.items() <= next(
        s for s in init["mcp_servers"] if s["name"] == "calc"
    ).items()
    assert "mcp__calc__add" in init["tools"]
    assert run.callbacks() == [
        {"callback": "hook", "id": "hook_0", "event": "PreToolUse", "tool": "mcp__calc__add"},
        {"callback": "can_use_tool", "tool": "mcp__calc__add", "input": {"a": 2, "b": 40}},
        {"callback": "add", "args": {"a": 2, "b": 40}},
    ]
    assert run.texts() == ["The sum is 42."]
    (result,) = run.messages("result")
    assert (result["subtype"], result["is_error"], result["result"]) == (
        "success",
        False,
        "The sum is 42.",
    )
    assert run.lines[-1] == {"cli_exit": 0}

    # The recording: complete, the Go host's command line, in order.
    rec = store.get(wait_for_recording(store, known))
    events = list(store.iter_events(rec.id))
    assert [e.seq for e in events] == list(range(len(events)))
    assert (rec.exit_code, rec.status) == (0, "ok")
    assert rec.cli_session_id == init["session_id"]
    assert rec.env["CLAUDE_CODE_ENTRYPOINT"] == "sdk-go"
    argv = rec.argv[1:]
    assert argv[argv.index("--setting-sources") + 1] == ""
    assert argv[-2:] == ["--input-format", "stream-json"]
    config = json.loads(argv[argv.index("--mcp-config") + 1])
    assert config == {"mcpServers": {"calc": {"type": "sdk", "name": "calc"}}}
    assert_causal_order(events)

    # The SDK MCP ordering: the CLI answers the host's initialize only once the
    # host has answered the server's MCP initialize; the rest of the set-up
    # (initialized, tools/list) is answered before the session's init message.
    (initialize,) = control(events, "in", "initialize")
    (init_answer,) = answers_to(events, [initialize])
    mcp = control(events, "out", "mcp_message")
    methods = [m.obj["request"]["message"]["method"] for m in mcp]
    assert methods == ["initialize", "notifications/initialized", "tools/list", "tools/call"]
    assert initialize.seq < mcp[0].seq < answers_to(events, mcp[:1])[0].seq < init_answer.seq
    (system_init,) = [e for e in events if e.type == "system" and e.subtype == "init"]
    assert all(a.seq < system_init.seq for a in answers_to(events, mcp[:3]))
    calls = [m for m in mcp if m.obj["request"]["message"]["method"] == "tools/call"]
    (call_answer,) = answers_to(events, calls)
    reply = call_answer.obj["response"]["response"]["mcp_response"]
    assert reply["result"]["content"] == [{"type": "text", "text": "42"}]

    # Byte for byte what the capture wrapper saw below the proxy.
    for direction, file in (("in", "in.bin"), ("out", "out.bin"), ("err", "err.bin")):
        witnessed = (run.capture / file).read_bytes()
        assert stream_bytes(events, direction) == witnessed, direction
        assert witnessed or direction == "err", f"the capture saw no {direction} bytes"

    # Every message the host got is a stored CLI line, in the same order.
    outs = [e.obj for e in events if e.direction == "out" and e.obj is not None]
    shown = iter(o for o in outs if o.get("type") not in ("control_request", "control_response"))
    assert all(message in shown for message in run.messages()), "host saw lines not stored"


def test_go_host_permission_callback_denies_a_tool(
    go: GoRig, store: Store, fake_api: FakeAPI, real_claude: Path
) -> None:
    script(fake_api, "deny")
    known = {r.id for r in store.list_recordings()}
    run = run_host(go, fake_api, "deny", go.shim, "deny", DENY_PROMPT)

    assert run.returncode == 0, (run.errors(), run.stderr[-2000:])
    assert run.callbacks() == [
        {
            "callback": "can_use_tool",
            "tool": "Bash",
            "input": {"command": "touch made-by-go", "description": "Make a file"},
        }
    ]
    (denied,) = [
        block
        for message in run.messages("user")
        for block in message["message"]["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert denied["is_error"] is True
    assert "The Go host denies Bash." in json.dumps(denied["content"])
    assert not (run.capture / "home" / PROJECT_DIR / "made-by-go").exists()
    assert run.texts() == ["The host said no."]

    rec = store.get(wait_for_recording(store, known))
    events = list(store.iter_events(rec.id))
    asks = control(events, "out", "can_use_tool")
    (answer,) = answers_to(events, asks)
    assert answer.direction == "in"
    assert answer.obj["response"]["response"]["behavior"] == "deny"


# -- replay: the same Go host, offline, from the cassette ----------------------------------------


@pytest.fixture(scope="module")
def cassettes(
    go: GoRig, fake_api: FakeAPI, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Path, HostRun]]:
    """One cassette per scenario, recorded through the shim, with the run that made it."""
    out = tmp_path_factory.mktemp("go-cassettes")
    made: dict[str, tuple[Path, HostRun]] = {}
    store = open_settled_store(str(go.db))
    try:
        for case, (scenario, prompt) in CASES.items():
            script(fake_api, case)
            known = {r.id for r in store.list_recordings()}
            # Recorded with the answers shuffled too: their order is the Go scheduler's.
            # In "parallel" each answer waits a quarter second more, so the CLI has
            # both calls out before either is answered, however it schedules them.
            delay = "250ms" if case == "parallel" else "0s"
            run = run_host(
                go,
                fake_api,
                f"to-replay-{case}",
                go.shim,
                scenario,
                prompt,
                jitter="40ms",
                delay=delay,
            )
            assert run.returncode == 0, (run.errors(), run.stderr[-2000:])
            cassette = store.load_cassette(wait_for_recording(store, known))
            path = out / f"{case}.ndjson"
            write_cassette(path, cassette.header, cassette.events)
            made[case] = (path, run)
    finally:
        store.close()
    return made


def first_difference(a: Any, b: Any, path: str = "$") -> str | None:
    """Where two JSON values first differ, for a readable failure."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(a.keys() | b.keys()):
            if key not in a or key not in b:
                return f"{path}.{key}: only on one side"
            found = first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for index, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_difference(x, y, f"{path}[{index}]")
            if found:
                return found
        return None if len(a) == len(b) else f"{path}: {len(a)} items against {len(b)}"
    return None if a == b else f"{path}: {a!r} against {b!r}"


def replay_shim(go: GoRig, cassette: Path, name: str) -> Path:
    """``claudetrace shim OUT --replay CASSETTE``, the command a user runs."""
    shim = go.root / f"replay-{name}"
    made = subprocess.run(
        [*self_command(), "shim", str(shim), "--replay", str(cassette)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    return shim


@pytest.mark.parametrize("case", sorted(CASES))
def test_go_host_replayed_offline_sees_the_same_session(
    case: str, go: GoRig, cassettes: dict[str, tuple[Path, HostRun]], fake_api: FakeAPI
) -> None:
    cassette, recorded = cassettes[case]
    scenario, prompt = CASES[case]
    shim = replay_shim(go, cassette, case)
    original = comparable(recorded)
    if case == "parallel":
        # The CLI had both calls out before the host answered either.
        events = read_cassette(cassette).events
        calls = [
            e
            for e in control(events, "out", "mcp_message")
            if e.obj["request"]["message"]["method"] == "tools/call"
        ]
        assert len(calls) == 2
        assert calls[1].seq < min(a.seq for a in answers_to(events, calls))
    # Answering promptly, then with the Go host's answers shuffled, twice.
    for jitter in ("0s", "40ms", "40ms"):
        fake_api.reset()
        run = run_host(
            go, fake_api, f"replayed-{case}-{len(jitter)}", shim, scenario, prompt, jitter=jitter
        )
        assert run.returncode == 0, (run.errors(), run.stderr[-2000:])
        assert fake_api.message_requests() == [], "a replay must not reach the API"
        replayed = comparable(run)
        # The messages, in order, exactly; the callbacks in order where the CLI
        # asks one at a time, as a set where it asks concurrently.
        shown, expected = messages_only(replayed), messages_only(original)
        assert shown == expected, (jitter, first_difference(shown, expected))
        if case == "parallel":
            assert sorted(map(json.dumps, run.callbacks())) == sorted(
                map(json.dumps, recorded.callbacks())
            )
            assert len(run.callbacks()) == 6
        else:
            assert run.callbacks() == recorded.callbacks()
        assert run.lines[-1] == {"cli_exit": 0}


def messages_only(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if "callback" not in line]


def test_go_host_with_a_changed_prompt_is_told_where(
    go: GoRig, cassettes: dict[str, tuple[Path, HostRun]], fake_api: FakeAPI, tmp_path: Path
) -> None:
    import time

    cassette, _ = cassettes["mcp"]
    report = tmp_path / "report.json"
    shim = write_replay_shim(tmp_path / "claude", cassette, report=report)
    fake_api.reset()
    started = time.monotonic()
    run = run_host(go, fake_api, "diverged", shim, "mcp", MCP_PROMPT.replace("40", "41"))
    elapsed = time.monotonic() - started

    # Generous for a loaded machine: a host left waiting would wait out its 60 s.
    assert elapsed < 30, elapsed
    assert fake_api.message_requests() == []
    doc = json.loads(report.read_text())
    assert (doc["kind"], doc["exit_code"]) == ("unmatched-message", 81)
    assert doc["diff"][0]["path"] == "$.message.content"
    assert [c["callback"] for c in run.callbacks()] == []
    (result,) = run.messages("result")
    assert result["is_error"] is True
    assert run.lines[-1] == {"cli_exit": 81}
    assert run.returncode == 1
    # The fake CLI's report reaches the host's stderr (the Go host passes the CLI's on).
    assert "unmatched-message" in run.stderr
    assert 'expected "Add 2 and 40 with the calc tool.", got "Add 2 and 41' in run.stderr


# -- one trace: the Go host's span, claudetrace's spans and the CLI's own ------------------------


def test_go_host_trace_holds_claudetrace_s_spans_and_the_cli_s(
    go: GoRig, store: Store, fake_api: FakeAPI
) -> None:
    from tests.otlp_receiver import OtlpReceiver, wire_spans

    script(fake_api, "mcp")
    known = {r.id for r in store.list_recordings()}
    with OtlpReceiver("http") as receiver:
        telemetry = {
            # Read by the Go host's SDK, by claudetrace's proxy (live export) and by the CLI.
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
            "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
            "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA": "1",
            "CLAUDETRACE_INDEXER_PRIORITY": "normal",
        }
        run = run_host(
            go, fake_api, "traced", go.shim, "mcp", MCP_PROMPT, otel=True, extra_env=telemetry
        )
        assert run.returncode == 0, (run.errors(), run.stderr[-2000:])
        (host,) = [line["trace"] for line in run.lines if "trace" in line]

        def names() -> set[str]:
            return {span["name"] for span in wire_spans(receiver).values()}

        wanted = {
            "gohost session",
            "invoke_agent claude-code",
            "claude_code.interaction",
            "claude_code.llm_request",
            "tools/call calc",
        }
        assert receiver.wait_for(lambda: wanted <= names(), 30), names()
    spans = wire_spans(receiver)
    by_name = {span["name"]: (span_id, span) for span_id, span in spans.items()}

    # One trace, the Go host's: its span is the parent of claudetrace's root span,
    # and the CLI's own spans nest below that root.
    assert {span["trace"] for span in spans.values()} == {host["trace_id"]}
    host_id, host_span = by_name["gohost session"]
    assert host_id == host["span_id"] and host_span["parent"] == ""
    root_id, root = by_name["invoke_agent claude-code"]
    assert root["parent"] == host_id
    rec = store.get(wait_for_recording(store, known))
    assert root["attributes"]["claudetrace.recording.id"] == rec.id

    def ancestors(span_id: str) -> list[str]:
        chain = []
        while spans.get(span_id, {}).get("parent"):
            span_id = spans[span_id]["parent"]
            chain.append(span_id)
        return chain

    for name in ("claude_code.interaction", "claude_code.llm_request", "tools/call calc"):
        assert root_id in ancestors(by_name[name][0]), name
    assert rec.env["TRACEPARENT"] == f"00-{host['trace_id']}-{host['span_id']}-01"
