"""Live telemetry: the indexer exports a proxied session over OTLP while it stores it.

The sessions here are real processes: ``claudetrace proxy`` over a scripted
child that plays the CLI side of a fixture recording, exporting over real OTLP
HTTP and gRPC to a receiver on 127.0.0.1.  The indexer may finish after the
proxy has exited, so the tests wait on the receiver (or on ``open_store``,
which waits for the indexer), never on the proxy alone.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace import capture as cap
from claudetrace.cassette import read_cassette
from claudetrace.cli import cli
from claudetrace.indexer import open_settled_store
from claudetrace.recording import RecordingInfo
from claudetrace.telemetry.config import resolve_settings
from claudetrace.telemetry.live import LiveTelemetry, child_env, live_sink
from claudetrace.telemetry.records import traceparent
from tests.otlp_receiver import OtlpReceiver, wire_metrics, wire_spans

FIXTURES = Path(__file__).parent / "fixtures" / "telemetry"
CASSETTE = FIXTURES / "mcp_tool.cassette.ndjson"
#: Generous: the machine running the tests may be busy.
WAIT_S = 60.0


def _records(cassette: Path = CASSETTE) -> list[dict[str, Any]]:
    lines = cassette.read_text(encoding="utf-8").splitlines()[1:]
    return [json.loads(line) for line in lines]


def _host_input(cassette: Path = CASSETTE) -> bytes:
    """What the SDK host said in the recording: the proxy's stdin."""
    return "".join(r["line"] + "\n" for r in _records(cassette) if r["dir"] == "in").encode()


def _session_events(cassette: Path = CASSETTE) -> int:
    """How many events a replayed session stores (host and CLI lines; no stderr)."""
    return sum(r["dir"] in ("in", "out") for r in _records(cassette))


FAKE_CLI = """\
import json, os, sys
cassette, seen, status = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(seen, "w", encoding="utf-8") as out:
    out.write(os.environ.get("TRACEPARENT", "<none>"))
records = [json.loads(line) for line in open(cassette, encoding="utf-8")][1:]
for rec in records:
    if rec["dir"] == "in":
        sys.stdin.readline()
    elif rec["dir"] == "out":
        sys.stdout.write(rec["line"] + "\\n")
        sys.stdout.flush()
sys.stdin.read()  # like the CLI: run until the host closes our stdin
sys.exit(status)
"""


@pytest.fixture
def fake_cli(tmp_path: Path) -> Callable[..., list[str]]:
    """argv of a child that plays the CLI side of a recording and exits with ``status``.

    It writes the ``TRACEPARENT`` it was given (``<none>``) to ``tmp_path/traceparent``.
    """
    script = tmp_path / "fake_claude.py"
    script.write_text(FAKE_CLI, encoding="utf-8")

    def argv(status: int = 0, cassette: Path = CASSETTE) -> list[str]:
        return [sys.executable, str(script), str(cassette), str(tmp_path / "traceparent"),
                str(status)]

    return argv


def _env(**extra: str) -> dict[str, str]:
    """The test's environment without OTEL_* and TRACEPARENT, plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OTEL_") and k != "TRACEPARENT"}
    # What is exported does not depend on the indexer's scheduling class; on a
    # busy test machine an idle-class indexer could wait a long time for a core.
    env["CLAUDETRACE_INDEXER_PRIORITY"] = "normal"
    env.update(extra)
    return env


def _proxy(db: Path, child: list[str], *flags: str) -> list[str]:
    return [sys.executable, "-m", "claudetrace", "proxy", "--db", str(db), *flags, "--", *child]


def _backfill(db: Path, rid: str, kind: str) -> tuple[dict[str, Any], dict[Any, Any]]:
    """Spans and metrics ``claudetrace otel`` sends for a stored recording (its
    metrics even when they went out live, to compare them)."""
    protocol = "grpc" if kind == "grpc" else "http/protobuf"
    with OtlpReceiver(kind) as receiver:
        result = CliRunner().invoke(cli, [
            "otel", rid, "--db", str(db), "--endpoint", receiver.endpoint, "--protocol", protocol,
            "--metrics-again",
        ])
        assert result.exit_code == 0, result.output
        assert receiver.wait_for(lambda: bool(receiver.metrics()), WAIT_S)
        return wire_spans(receiver), wire_metrics(receiver)


def _latest(db: Path) -> Any:
    """The newest recording, once its indexer has finished (open_store settles)."""
    store = open_settled_store(str(db))
    try:
        info = store.resolve("latest")
        return info, store.count_events(info.id)
    finally:
        store.close()


def _root(spans: Mapping[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    roots = [(sid, s) for sid, s in spans.items() if s["parent"] == ""]
    assert len(roots) == 1, roots
    return roots[0]


@pytest.mark.parametrize("kind", ["http", "grpc"])
def test_proxied_session_exports_what_backfill_sends(
    db_path: Path, tmp_path: Path, fake_cli: Callable[..., list[str]], kind: str
) -> None:
    with OtlpReceiver(kind) as live:
        if kind == "grpc":  # the flags ...
            argv = _proxy(db_path, fake_cli(), "--otel-endpoint", live.endpoint,
                          "--otel-protocol", "grpc")
            env = _env()
        else:  # ... and the standard variables
            argv = _proxy(db_path, fake_cli())
            env = _env(OTEL_EXPORTER_OTLP_ENDPOINT=live.endpoint,
                       OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf")
        proc = subprocess.run(argv, input=_host_input(), capture_output=True, env=env,
                              timeout=WAIT_S)
        assert proc.returncode == 0, proc.stderr.decode()
        assert b"warning" not in proc.stderr, proc.stderr.decode()
        info, stored = _latest(db_path)
        assert stored == _session_events()
        spans, metrics = _backfill(db_path, info.id, kind)
        # The indexer may still be flushing: wait for what the backfill sent.
        assert live.wait_for(lambda: len(live.spans()) >= len(spans), WAIT_S), wire_spans(live)
        assert live.wait_for(lambda: wire_metrics(live).keys() >= metrics.keys(), WAIT_S)
        assert len(live.spans()) == len(spans)  # nothing sent twice
        assert wire_spans(live) == spans
        assert wire_metrics(live) == metrics
    names = sorted(s["name"] for s in spans.values())
    assert "tools/call calc" in names and "invoke_agent claude-code" in names
    root_id, root = _root(spans)
    # The CLI was told where its own spans belong: under our root span.
    assert (tmp_path / "traceparent").read_text() == traceparent(info.id)
    assert traceparent(info.id) == f"00-{root['trace']}-{root_id}-01"


def test_backfill_does_not_count_again_the_metrics_that_went_out_live(
    db_path: Path, fake_cli: Callable[..., list[str]]
) -> None:
    with OtlpReceiver("http") as live, OtlpReceiver("http", refuse={"/v1/metrics": 503}) as no:
        for collector in (live, no):  # one session's metrics delivered, one's refused
            env = _env(OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
                       OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf")
            proc = subprocess.run(_proxy(db_path, fake_cli()), input=_host_input(),
                                  capture_output=True, env=env, timeout=WAIT_S)
            assert proc.returncode == 0, proc.stderr.decode()
        store = open_settled_store(str(db_path))
        try:
            delivered, refused = [r.id for r in store.list_recordings(newest_first=False)]
            assert store.get(delivered).extra["live_metrics"] == live.endpoint
            assert "live_metrics" not in store.get(refused).extra
        finally:
            store.close()

    def backfilled(*args: str) -> tuple[str, set[str], dict[Any, Any]]:
        with OtlpReceiver("http") as receiver:
            result = CliRunner().invoke(
                cli, ["otel", *args, "--db", str(db_path), "--endpoint", receiver.endpoint])
            assert result.exit_code == 0, result.output
            assert receiver.wait_for(lambda: bool(receiver.metrics()), WAIT_S)
            traces = {s["trace"] for s in wire_spans(receiver).values()}
            return result.stderr, traces, wire_metrics(receiver)

    _, _, one = backfilled(refused)  # the metrics of one session (the two are alike)
    note = "the metrics of 1 recording(s) went out live and are not sent again"
    said, traces, metrics = backfilled("--all")
    assert note in said, said
    assert len(traces) == 2  # every span: a trace backend keeps one copy of each
    assert metrics == one  # only the refused recording's metrics
    said, traces, metrics = backfilled("--all", "--metrics-again")
    assert note not in said and len(traces) == 2
    assert metrics != one and metrics.keys() == one.keys()  # both sessions counted


def test_no_traceparent_when_telemetry_is_off(
    db_path: Path, tmp_path: Path, fake_cli: Callable[..., list[str]]
) -> None:
    proc = subprocess.run(_proxy(db_path, fake_cli(status=3)), input=_host_input(),
                          capture_output=True, env=_env(), timeout=WAIT_S)
    assert proc.returncode == 3, proc.stderr.decode()
    assert proc.stderr == b""
    assert (tmp_path / "traceparent").read_text() == "<none>"
    info, stored = _latest(db_path)
    assert (stored, info.exit_code) == (_session_events(), 3)


#: A W3C example: the trace a host (a Go program with OpenTelemetry) started the CLI in.
HOST_TRACE, HOST_SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


@pytest.mark.parametrize("given, joined", [
    (f"00-{HOST_TRACE}-{HOST_SPAN}-01", True),
    (f" 00-{HOST_TRACE.upper()}-{HOST_SPAN}-00 ", True),  # not sampled by the host: still its trace
    (f"01-{HOST_TRACE}-{HOST_SPAN}-01-later-fields", True),  # a later version may add fields
    (f"00-{HOST_TRACE}-{HOST_SPAN}-01-extra", False),
    (f"ff-{HOST_TRACE}-{HOST_SPAN}-01", False),
    (f"00-{'0' * 32}-{HOST_SPAN}-01", False),
    (f"00-{HOST_TRACE}-{'0' * 16}-01", False),
    (f"00-{HOST_TRACE[:-1]}g-{HOST_SPAN}-01", False),
    ("garbage", False),
])
def test_a_host_s_trace_is_joined_live_and_in_a_backfill(given: str, joined: bool) -> None:
    from claudetrace.telemetry import context
    from claudetrace.telemetry.records import span_id_for, trace_id_for
    from claudetrace.telemetry.spans import build_spans

    info = RecordingInfo(id="01JHOSTTRACE", argv=[], started_ns=0, env={"TRACEPARENT": given})
    on = resolve_settings(endpoint="http://127.0.0.1:4318", environ={})
    root_span = f"{span_id_for(info.id, 'root'):016x}"
    trace_id = HOST_TRACE if joined else f"{trace_id_for(info.id):032x}"
    expected = {"TRACEPARENT": f"00-{trace_id}-{root_span}-01"}
    # What the proxy gives the CLI before it starts, and what the live sink says.
    assert context.child_env(info.id, info.env, {"endpoint": on.traces.endpoint}) == expected
    assert child_env(info, on) == expected
    # Every span is in that trace; the root is the host's span's child.
    spans = build_spans(info, read_cassette(FIXTURES / "plain.cassette.ndjson").events)
    assert {s.trace_id for s in spans} == {int(trace_id, 16)}
    (root,) = [s for s in spans if s.key == "root"]
    assert root.parent_id == (int(HOST_SPAN, 16) if joined else None)


def test_traceparent_only_when_traces_are_exported() -> None:
    info = RecordingInfo(id="01JTRACEPARENT", argv=[], started_ns=0)
    on = resolve_settings(endpoint="http://127.0.0.1:4318", environ={})
    assert child_env(info, on) == {"TRACEPARENT": traceparent(info.id)}
    metrics_only = resolve_settings(endpoint="http://127.0.0.1:4318",
                                    environ={"OTEL_TRACES_EXPORTER": "none"})
    assert metrics_only.enabled and child_env(info, metrics_only) == {}
    assert child_env(info, resolve_settings(environ={})) == {}
    disabled = {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}
    assert child_env(info, resolve_settings(environ=disabled)) == {}


# -- telemetry off costs nothing ---------------------------------------------------------------

#: A script's start: argv DB CASSETTE OTEL, the cassette written as a finished
#: capture file (``writer``); what follows reads it, then prints the OpenTelemetry
#: modules it loaded.
_WRITE_A_CAPTURE = """\
import json, sys, time
from pathlib import Path
from claudetrace import capture as cap
from claudetrace.recording import RecordingInfo

db, cassette, otel = sys.argv[1], sys.argv[2], sys.argv[3]
info = RecordingInfo.start(["claude", "--output-format", "stream-json"])
writer = cap.CaptureWriter.create(cap.resolve_url(db), info)
for line in open(cassette, encoding="utf-8").readlines()[1:]:
    rec = json.loads(line)
    writer.feed(rec["dir"], (rec["line"] + "\\n").encode())
writer.close({"exit_code": 0, "ended_ns": time.time_ns()})
"""
_PRINT_OPENTELEMETRY_MODULES = """
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")))
"""

INDEX_A_CAPTURE = _WRITE_A_CAPTURE + """
from claudetrace.indexer import main
assert main([str(writer.path), "--db", db] + (["--otel", otel] if otel else [])) == 0
""" + _PRINT_OPENTELEMETRY_MODULES


@pytest.mark.parametrize("protocol", [None, "http/protobuf", "grpc"])
def test_the_indexer_never_imports_opentelemetry(db_path: Path, protocol: str | None) -> None:
    """Live telemetry runs in a worker process of its own: the indexer stores, that is all."""
    with OtlpReceiver("grpc" if protocol == "grpc" else "http") as receiver:
        otel = json.dumps({"endpoint": receiver.endpoint, "protocol": protocol}) if protocol else ""
        proc = subprocess.run(
            [sys.executable, "-c", INDEX_A_CAPTURE, str(db_path), str(CASSETTE), otel],
            capture_output=True, env=_env(), timeout=WAIT_S,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        assert json.loads(proc.stdout) == []
        if protocol:  # the worker sent them
            assert receiver.spans() and receiver.metrics()
    _, stored = _latest(db_path)
    assert stored == _session_events()


FOLLOW_A_CAPTURE = _WRITE_A_CAPTURE + """
from claudetrace.telemetry.worker import run
assert run(Path(writer.path), json.loads(otel), None)["warnings"] == []
""" + _PRINT_OPENTELEMETRY_MODULES


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_the_worker_exports_through_the_sdk(db_path: Path, protocol: str) -> None:
    """The SDK's tracer provider, processors and the protocol's OTLP exporters."""
    with OtlpReceiver("grpc" if protocol == "grpc" else "http") as receiver:
        otel = json.dumps({"endpoint": receiver.endpoint, "protocol": protocol})
        proc = subprocess.run(
            [sys.executable, "-c", FOLLOW_A_CAPTURE, str(db_path), str(CASSETTE), otel],
            capture_output=True, env=_env(), timeout=WAIT_S,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        loaded = json.loads(proc.stdout)
        assert "opentelemetry.sdk.trace.export" in loaded
        wire = "grpc" if protocol == "grpc" else "http"
        assert f"opentelemetry.exporter.otlp.proto.{wire}.trace_exporter" in loaded
        assert receiver.spans() and receiver.metrics()


RUN_A_PROXY = """\
import json, sys
from claudetrace.proxy import ProxyOptions, run_proxy
status, _ = run_proxy(ProxyOptions(argv=[sys.executable, "-c", "print('{}')"], db=sys.argv[1]))
assert status == 0
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")))
"""


def test_the_proxy_never_imports_opentelemetry(db_path: Path) -> None:
    """Not even with telemetry on: it computes TRACEPARENT itself; the indexer exports."""
    with OtlpReceiver("http") as receiver:
        proc = subprocess.run(
            [sys.executable, "-c", RUN_A_PROXY, str(db_path)], stdin=subprocess.DEVNULL,
            capture_output=True, env=_env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint),
            timeout=WAIT_S,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        assert json.loads(proc.stdout.splitlines()[-1]) == []
        _latest(db_path)
        assert receiver.wait_for(lambda: bool(receiver.spans()), WAIT_S)


# -- failures cost one warning, never the session ----------------------------------------------


class Session:
    """A proxied session whose stdin the test closes when it chooses."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self.stdout: list[bytes] = []
        self.stderr: list[bytes] = []
        self._cond = threading.Condition()
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.stdout), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, pipe: Any, into: list[bytes]) -> None:
        for line in pipe:
            with self._cond:
                into.append(line)
                self._cond.notify_all()

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def wait_for_stderr(self, text: bytes, timeout: float = WAIT_S) -> bool:
        """Wait until a line containing ``text`` is on the proxy's stderr."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not any(text in line for line in self.stderr):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def finish(self) -> tuple[int, str]:
        """Close stdin, wait for the proxy; (exit status, its stderr)."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        status = self.proc.wait(WAIT_S)
        for reader in self._readers:
            reader.join(WAIT_S)
        return status, b"".join(self.stderr).decode(errors="replace")

    def close(self) -> None:
        """Kill the proxy if it still runs; close our ends of its pipes."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for reader in self._readers:
            reader.join(WAIT_S)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


def _run_until_a_warning(argv: list[str], env: dict[str, str]) -> tuple[int, str, Session]:
    """Run a proxied session that must warn while it runs; (status, stderr, session)."""
    session = Session(argv, env)
    try:
        session.send(_host_input())
        assert session.wait_for_stderr(b"warning"), session.stderr
        status, err = session.finish()
    finally:
        session.close()
    return status, err, session


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections (bound, never listening)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.mark.parametrize("kind", ["http", "grpc"])
def test_an_unreachable_collector_costs_one_warning(
    db_path: Path, fake_cli: Callable[..., list[str]], refusing_port: int, kind: str
) -> None:
    env = _env(
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{refusing_port}",
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc" if kind == "grpc" else "http/protobuf",
        OTEL_BSP_SCHEDULE_DELAY="50",  # export the first spans during the session
        # Each export retries a refused connection until its timeout (10 s by
        # default, waited out by the flush at the end): shorter, as a user may set it.
        OTEL_EXPORTER_OTLP_TIMEOUT="1.5",  # seconds, for the Python SDK
    )
    # The collector's failure is reported while the session runs.
    status, err, session = _run_until_a_warning(_proxy(db_path, fake_cli(status=7)), env)
    assert status == 7, err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1, err
    assert f"127.0.0.1:{refusing_port}" in warnings[0]
    assert len(session.stdout) == sum(r["dir"] == "out" for r in _records())
    info, stored = _latest(db_path)
    assert (stored, info.exit_code) == (_session_events(), 7)


def test_a_failure_after_the_proxy_has_gone_is_kept_with_the_recording(
    db_path: Path, fake_cli: Callable[..., list[str]], refusing_port: int
) -> None:
    # A short session exports nothing before its end (the batch delay is long), so
    # the collector fails the final flush, when the proxy may have exited already
    # and the indexer's stderr reaches no one: the warning is stored instead.
    endpoint = f"http://127.0.0.1:{refusing_port}"
    env = _env(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_BSP_SCHEDULE_DELAY="60000",
               OTEL_EXPORTER_OTLP_TIMEOUT="1.5")  # seconds, for the Python SDK
    proc = subprocess.run(_proxy(db_path, fake_cli()), input=_host_input(),
                          capture_output=True, env=env, timeout=WAIT_S)
    assert proc.returncode == 0, proc.stderr.decode()
    info, stored = _latest(db_path)  # once the indexer has finished
    assert stored == _session_events()
    warnings = info.extra["warnings"]
    assert len(warnings) == 1, warnings
    # Only the traces' failure: the metrics' is said on stderr, not stored.
    assert warnings[0].startswith(f"OTLP traces export to {endpoint} failed: "), warnings
    shown = CliRunner().invoke(cli, ["show", info.id, "--db", str(db_path)])
    assert shown.exit_code == 0, shown.output
    assert f"       warning  {warnings[0]}\n" in shown.output, shown.output
    listed = CliRunner().invoke(cli, ["sessions", "--json", "--db", str(db_path)])
    assert json.loads(listed.output)[0]["warnings"] == warnings


def test_a_bad_setting_costs_one_warning(
    db_path: Path, tmp_path: Path, fake_cli: Callable[..., list[str]]
) -> None:
    env = _env(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4318",
               OTEL_EXPORTER_OTLP_PROTOCOL="carrier-pigeon")
    status, err, _ = _run_until_a_warning(_proxy(db_path, fake_cli(status=5)), env)
    assert status == 5, err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "carrier-pigeon" in warnings[0], err
    assert (tmp_path / "traceparent").read_text() == "<none>"
    info, stored = _latest(db_path)
    assert (stored, info.exit_code) == (_session_events(), 5)


@pytest.mark.parametrize("name, value", [
    ("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon"),
    ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "carrier-pigeon"),
])
def test_a_bad_setting_is_reported_even_when_the_session_is_short(
    db_path: Path, name: str, value: str
) -> None:
    """The proxy does not wait for the indexer: the warning must not depend on it."""
    env = _env(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4318", **{name: value})
    proc = subprocess.run(_proxy(db_path, [sys.executable, "-c", "pass"]),
                          stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=WAIT_S)
    assert proc.returncode == 0
    err = proc.stderr.decode()
    assert err.count("warning") == 1 and value in err, err


# -- the indexer outlives the proxy ------------------------------------------------------------


def test_spans_are_exported_after_the_proxy_has_exited(
    db_path: Path, fake_cli: Callable[..., list[str]]
) -> None:
    open_settled_store(str(db_path)).close()
    # Hold the database's write lock: the indexer cannot store (so cannot finish)
    # until we let go, and by then the proxy is long gone.
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with OtlpReceiver("http") as live:
            proc = subprocess.run(
                _proxy(db_path, fake_cli()), input=_host_input(), capture_output=True,
                env=_env(OTEL_EXPORTER_OTLP_ENDPOINT=live.endpoint), timeout=WAIT_S,
            )
            assert proc.returncode == 0, proc.stderr.decode()
            assert cap.capture_files(cap.resolve_url(str(db_path))), "the indexer finished early"
            # The root span ends when the indexer has stored the session's end.
            assert not any(s.name.startswith("invoke_agent") for s in live.spans())
            blocker.rollback()
            blocker.close()
            assert live.wait_for(
                lambda: any(s.name.startswith("invoke_agent") for s in live.spans()), WAIT_S
            ), wire_spans(live)
            info, stored = _latest(db_path)
            spans, _ = _backfill(db_path, info.id, "http")
            assert live.wait_for(lambda: len(live.spans()) >= len(spans), WAIT_S)
            assert wire_spans(live) == spans
    finally:
        blocker.close()
    assert stored == _session_events()
    assert not cap.capture_files(cap.resolve_url(str(db_path)))


# -- the real CLI ---------------------------------------------------------------------------

#: Notes the TRACEPARENT of every invocation (the SDK may ask for ``-v`` first), then
#: runs the real CLI.
TRACEPARENT_WITNESS = """#!/bin/sh
printf '%s %s\\n' "${TRACEPARENT:-<none>}" "$*" >> "$CT_SEEN"
exec "$CT_REAL" "$@"
"""


@pytest.mark.slow
def test_a_real_cli_session_exports_what_backfill_sends(
    tmp_path: Path, db_path: Path, real_claude: Path, fake_api: Any
) -> None:
    from tests.capture_rig import write_script, write_shim
    from tests.scenarios import check_scenario, run_scenario

    witness = write_script(tmp_path / "claude-witness", TRACEPARENT_WITNESS)
    shim = write_shim(tmp_path / "claude", witness, db_path)
    seen = tmp_path / "seen"
    with OtlpReceiver("http") as live:
        result = run_scenario("mcp_tool", shim, fake_api, env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": live.endpoint, "CT_REAL": str(real_claude),
            "CT_SEEN": str(seen), "CLAUDETRACE_INDEXER_PRIORITY": "normal",
        })
        check_scenario(result)
        info, stored = _latest(db_path)
        assert stored > 0
        spans, metrics = _backfill(db_path, info.id, "http")
        assert live.wait_for(lambda: len(live.spans()) >= len(spans), WAIT_S), wire_spans(live)
        assert live.wait_for(lambda: wire_metrics(live).keys() >= metrics.keys(), WAIT_S)
        assert wire_spans(live) == spans
        assert wire_metrics(live) == metrics
    assert any(s["name"] == "tools/call calc" for s in spans.values())
    sessions = [line for line in seen.read_text().splitlines() if "stream-json" in line]
    assert len(sessions) == 1 and sessions[0].startswith(traceparent(info.id) + " ")


@pytest.mark.slow
def test_a_subagent_s_model_calls_are_named_after_its_own_model(
    tmp_path: Path, db_path: Path, real_claude: Path, fake_api: Any
) -> None:
    """The real CLI runs the counter agent on Haiku under a session on the default
    model: the collector receives the subagent's chat span named after Haiku, the
    model the CLI asked the API for on the subagent's behalf."""
    from tests.capture_rig import write_shim
    from tests.scenarios import check_scenario, run_scenario, subagent_on

    shim = write_shim(tmp_path / "claude", real_claude, db_path)
    with OtlpReceiver("http") as live:
        result = run_scenario("subagent", shim, fake_api, func=subagent_on("haiku"), env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": live.endpoint,
            "CLAUDETRACE_INDEXER_PRIORITY": "normal",
        })
        check_scenario(result)
        asked = [r.model for r in fake_api.message_requests()]
        assert live.wait_for(
            lambda: any(s.name == "invoke_agent claude-code" for s in live.spans()), WAIT_S
        ), wire_spans(live)
        spans = wire_spans(live)
    main, sub = asked[0], asked[1]
    assert main and sub and "haiku" in sub and main != sub, asked
    agent = next(i for i, s in spans.items() if s["name"] == "invoke_agent counter")
    chats = [s for s in spans.values()
             if s["parent"] == agent and s["attributes"].get("gen_ai.operation.name") == "chat"]
    assert [s["name"] for s in chats] == [f"chat {sub}"], chats
    assert chats[0]["attributes"]["gen_ai.request.model"] == sub
    outside = {s["name"] for s in spans.values()
               if s["name"].startswith("chat ") and s["parent"] != agent}
    assert outside == {f"chat {main}"}


# -- the sink in-process -----------------------------------------------------------------------


def test_an_unreachable_collector_never_blocks_the_events(
    capsys: pytest.CaptureFixture[str], refusing_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")  # seconds, for the Python SDK
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "1")  # ms: spans exported while fed
    # Exporting never blocks the events: no export (each waits out the refused
    # collector's timeout) runs on the thread that feeds them while it does.
    feeder = threading.current_thread()
    feeding = threading.Event()
    exports: list[tuple[bool, bool]] = []  # (on the feeding thread, while feeding)

    def spied(export: Callable[..., Any]) -> Callable[..., Any]:
        def export_noted(self: Any, *args: Any, **kwargs: Any) -> Any:
            exports.append((threading.current_thread() is feeder, feeding.is_set()))
            return export(self, *args, **kwargs)
        return export_noted

    for exporter in (OTLPSpanExporter, OTLPMetricExporter):
        monkeypatch.setattr(exporter, "export", spied(exporter.export))
    cassette = read_cassette(FIXTURES / "plain.cassette.ndjson")
    info = RecordingInfo(id="01UNREACHABLE", argv=[], started_ns=time.time_ns())
    sink = live_sink(info, endpoint=f"http://127.0.0.1:{refusing_port}", environ={})
    assert isinstance(sink, LiveTelemetry)
    feeding.set()
    for event in cassette.events:
        sink.on_events([event])
    feeding.clear()
    info.ended_ns, info.exit_code = time.time_ns(), 0
    sink.on_close(info)
    assert exports, "nothing was exported"
    assert (True, True) not in exports, exports
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" export to ")[0] for line in lines] == [
        "claudetrace: warning: OTLP traces", "claudetrace: warning: OTLP metrics"], lines
    assert all(f"127.0.0.1:{refusing_port}" in line for line in lines)
    # Only the traces' failure is the session's.
    assert sink.warnings == [lines[0].removeprefix("claudetrace: warning: ").removesuffix(
        "; the session continues without telemetry")]


@pytest.mark.parametrize("name, value", [
    ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "zstd"),
    ("OTEL_BSP_SCHEDULE_DELAY", "soon"),
    ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "sideways"),
    ("OTEL_EXPORTER_OTLP_TIMEOUT", "whenever"),
])
def test_a_setting_the_sdk_cannot_use_is_one_warning(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    """The SDK reads these itself, warns and goes on with its default: said once."""
    monkeypatch.setenv(name, value)
    info = RecordingInfo(id="01SDKSETTING", argv=[], started_ns=time.time_ns())
    with OtlpReceiver("http") as receiver:
        sink = live_sink(info, endpoint=receiver.endpoint)
        assert isinstance(sink, LiveTelemetry)
        for event in read_cassette(FIXTURES / "plain.cassette.ndjson").events:
            sink.on_events([event])
        info.ended_ns, info.exit_code = time.time_ns(), 0
        sink.on_close(info)
        assert receiver.spans() and sink.warnings == []
    err = capsys.readouterr().err
    assert err.count("warning") == 1 and (name in err or value in err), err


def test_a_bad_setting_is_no_sink_and_one_warning(capsys: pytest.CaptureFixture[str]) -> None:
    info = RecordingInfo(id="01BADSETTING", argv=[], started_ns=time.time_ns())
    assert live_sink(info, endpoint="http://127.0.0.1:4318", protocol="smoke-signals",
                     environ={}) is None
    err = capsys.readouterr().err
    assert err.count("warning") == 1 and "smoke-signals" in err
    assert live_sink(info, environ={}) is None  # off: no sink, nothing said
    assert capsys.readouterr().err == ""
