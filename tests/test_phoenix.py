"""Traces in a real Arize Phoenix, started by the suite on 127.0.0.1: a live session of
the real CLI over OTLP/HTTP and backfills over HTTP and gRPC, with nothing set but
``OTEL_EXPORTER_OTLP_ENDPOINT`` (and the protocol for gRPC).

Phoenix is a test extra installed in a virtualenv of its own (its dependencies are
many): ``.ci/run`` makes ``.ci/phoenix``; elsewhere point ``CLAUDETRACE_TEST_PHOENIX``
at a ``phoenix`` executable.  Without either these tests are skipped, saying so.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from claudetrace.cassette import read_cassette
from claudetrace.indexer import open_settled_store
from claudetrace.telemetry.records import trace_id_for
from claudetrace.testing.serving import NotAnswering, wait_until_answering

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "telemetry"
PHOENIX_ENV = "CLAUDETRACE_TEST_PHOENIX"
START_S = 180.0


@dataclass
class Phoenix:
    http_port: int
    grpc_port: int

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def spans(self, recording_id: str) -> list[dict[str, Any]]:
        """Every span Phoenix stored of one recording's trace."""
        url = (f"{self.endpoint}/v1/projects/default/spans?limit=1000"
               f"&trace_id={trace_id_for(recording_id):032x}")
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                data: list[dict[str, Any]] = json.load(response)["data"]
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code == 404:  # no project yet: nothing arrived
                return []
            raise
        return data

    def wait_for(self, recording_id: str, count: int, timeout: float = 60.0) -> list[Any]:
        """The recording's spans once at least ``count`` have arrived (Phoenix inserts
        in the background), and a moment longer, so that extra ones would show."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans(recording_id)
            if len(spans) >= count or time.monotonic() > deadline:
                time.sleep(1.0)
                return self.spans(recording_id)
            time.sleep(0.5)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _executable() -> Path | None:
    given = os.environ.get(PHOENIX_ENV)
    found = Path(given) if given else ROOT / ".ci" / "phoenix" / "bin" / "phoenix"
    return found if found.exists() else None


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    executable = _executable()
    if executable is None:
        pytest.skip(f"Phoenix is not installed: .ci/run installs arize-phoenix in "
                    f".ci/phoenix, or set {PHOENIX_ENV} to a phoenix executable")
    work = tmp_path_factory.mktemp("phoenix")
    server = Phoenix(_free_port(), _free_port())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))}
    env.update(PHOENIX_WORKING_DIR=str(work), PHOENIX_HOST="127.0.0.1",
               PHOENIX_PORT=str(server.http_port), PHOENIX_GRPC_PORT=str(server.grpc_port))
    with open(work / "phoenix.log", "wb") as log:
        proc = subprocess.Popen([str(executable), "serve"], env=env, stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL)
    try:
        try:
            wait_until_answering(f"{server.endpoint}/healthz", proc, timeout=START_S)
        except NotAnswering as exc:
            tail = (work / "phoenix.log").read_text(errors="replace")[-2000:]
            pytest.fail(f"Phoenix did not start ({exc}):\n{tail}")
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _otel(db: Path, recording_id: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [sys.executable, "-m", "claudetrace", "otel", recording_id, "--db", str(db)],
        env={**clean, **env}, capture_output=True, text=True, timeout=120)


def _result_totals(db: Path, recording_id: str) -> tuple[int, int]:
    """(input tokens with the cached ones, output tokens) the CLI's result lines report."""
    store = open_settled_store(str(db))
    try:
        prompt = completion = 0
        for event in store.iter_events(recording_id):
            message = event.message if event.direction == "out" else None
            if message and message.get("type") == "result":
                usage = message.get("usage") or {}
                prompt += sum(int(usage.get(k) or 0) for k in (
                    "input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))
                completion += int(usage.get("output_tokens") or 0)
        return prompt, completion
    finally:
        store.close()


def _check(spans: list[dict[str, Any]], totals: tuple[int, int]) -> dict[str, set[str]]:
    """What Phoenix shows right of every trace: one root, no orphan, every kind, token
    sums equal to the CLI's, the model's output; the kinds by span name."""
    ids = {s["context"]["span_id"] for s in spans}
    assert len(ids) == len(spans)  # no duplicate
    roots = [s for s in spans if s["parent_id"] is None]
    assert len(roots) == 1 and roots[0]["name"] == "invoke_agent claude-code"
    assert all(s["parent_id"] in ids for s in spans if s["parent_id"] is not None)
    kinds: dict[str, set[str]] = {}
    for span in spans:
        kinds.setdefault(span["name"].split(" ")[0], set()).add(span["span_kind"])
    llm = [s for s in spans if s["span_kind"] == "LLM"]
    prompt = sum(int(s["attributes"].get("llm.token_count.prompt", 0)) for s in llm)
    completion = sum(int(s["attributes"].get("llm.token_count.completion", 0)) for s in llm)
    assert (prompt, completion) == totals
    for span in llm:  # Phoenix read our gen_ai.output.messages (it drops what fails its schema)
        attributes = span["attributes"]
        assert any(k.startswith("llm.output_messages.0.message.") for k in attributes), span
    return kinds


@pytest.mark.slow
def test_a_live_session_and_its_backfill_in_phoenix(
    phoenix: Phoenix, tmp_path: Path, db_path: Path, real_claude: Path, fake_api: Any
) -> None:
    from tests.capture_rig import write_shim
    from tests.scenarios import check_scenario, run_scenario

    shim = write_shim(tmp_path / "claude", real_claude, db_path)
    result = run_scenario("mcp_tool", shim, fake_api, env={
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.endpoint,
        "CLAUDETRACE_OTEL_CAPTURE_CONTENT": "true", "CLAUDETRACE_INDEXER_PRIORITY": "normal",
    })
    check_scenario(result)
    store = open_settled_store(str(db_path))
    try:
        info = store.resolve("latest")  # once its indexer (and telemetry worker) finished
    finally:
        store.close()
    # Phoenix refuses OTLP metrics: that is no warning of the session's.
    assert "warnings" not in info.extra, info.extra
    live = phoenix.wait_for(info.id, 8)
    kinds = _check(live, _result_totals(db_path, info.id))
    assert kinds["invoke_agent"] == {"AGENT"} and kinds["chat"] == {"LLM"}
    assert kinds["execute_tool"] == {"TOOL"}
    assert kinds["tools/call"] == {"CHAIN"}  # not a second TOOL span of the same call
    done = _otel(db_path, info.id, OTEL_EXPORTER_OTLP_ENDPOINT=phoenix.endpoint,
                 CLAUDETRACE_OTEL_CAPTURE_CONTENT="true")
    assert done.returncode == 0, done.stderr
    assert f"exported {len(live)} spans" in done.stderr
    again = phoenix.wait_for(info.id, len(live) + 1, timeout=5)
    assert sorted(s["context"]["span_id"] for s in again) == sorted(
        s["context"]["span_id"] for s in live)  # a backfill adds no duplicate


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_backfilled_permission_and_hook_round_trips_are_not_tools(
    phoenix: Phoenix, db_path: Path, protocol: str
) -> None:
    store = open_settled_store(str(db_path))
    try:
        ids = [store.import_cassette(read_cassette(FIXTURES / f"{name}.cassette.ndjson"))
               for name in ("hooks", "permission_allow")]
    finally:
        store.close()
    kinds: dict[str, set[str]] = {}
    for rid in ids:
        if protocol == "grpc":  # an endpoint without a scheme: plaintext on 127.0.0.1
            env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"127.0.0.1:{phoenix.grpc_port}",
                   "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
        else:
            env = {"OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.endpoint}
        done = _otel(db_path, rid, CLAUDETRACE_OTEL_CAPTURE_CONTENT="true", **env)
        assert done.returncode == 0, done.stderr
        count = int(done.stderr.split("exported ", 1)[1].split(" ", 1)[0])
        spans = phoenix.wait_for(rid, count)
        assert len(spans) == count
        for name, found in _check(spans, _result_totals(db_path, rid)).items():
            kinds.setdefault(name, set()).update(found)
    assert kinds["can_use_tool"] == {"CHAIN"} and kinds["hook_callback"] == {"CHAIN"}
    assert kinds["execute_tool"] == {"TOOL"}
