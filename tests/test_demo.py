"""``claudetrace demo``: the shipped session recorded through the real proxy, offline."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from claudetrace.cassette import Cassette, read_cassette
from claudetrace.cli import cli
from claudetrace.demo import DEMO_CASSETTE, DemoError, HostStep, host_steps, next_steps, run_demo
from claudetrace.indexer import open_settled_store
from claudetrace.model.events import Event


def test_shipped_cassette_is_a_real_cli_session() -> None:
    cassette = read_cassette(DEMO_CASSETTE)
    assert cassette.header.get("claude_code_version")
    assert cassette.header.get("sanitized")
    kinds = {e.fields.type for e in cassette.events}
    assert {"control_request", "control_response", "user", "assistant", "result"} <= kinds


def _ev(seq: int, direction: str, data: bytes) -> Event:
    return Event(seq, direction, seq * 1000, data, True)  # type: ignore[arg-type]


def test_host_steps_wait_for_the_request_an_answer_answers() -> None:
    init = b'{"type":"control_request","request_id":"req_1_aa","request":{"subtype":"initialize"}}'
    early = b'{"type":"control_response","response":{"subtype":"success","request_id":"u-1"}}'
    ask = b'{"type":"control_request","request_id":"u-1","request":{"subtype":"mcp_message"}}'
    ok = b'{"type":"control_response","response":{"subtype":"success","request_id":"req_1_aa"}}'
    user = b'{"type":"user","message":{"role":"user","content":"hi"}}'
    events = [
        _ev(0, "in", init),
        _ev(1, "in", early),
        _ev(2, "out", ask),
        _ev(3, "out", ok),
        _ev(4, "err", b"noise"),
        _ev(5, "in", user),
    ]
    cassette = Cassette({"claudetrace": "cassette", "version": 1}, events)
    assert host_steps(cassette) == [HostStep(0, init), HostStep(1, early), HostStep(2, user)]


def test_next_steps_carry_the_database_option() -> None:
    assert next_steps("01ABC") == [
        "claudetrace sessions",
        "claudetrace show 01ABC",
        "claudetrace ui",
    ]
    assert next_steps("01ABC", "x.db")[1] == "claudetrace show 01ABC --db x.db"
    # No command prints a database password: the demo's next steps printed it.
    assert next_steps("01ABC", "postgresql+psycopg://me:s3cret@db/traces")[0] == (
        "claudetrace sessions --db postgresql+psycopg://me:***@db/traces")


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """One demo run into a fresh database: (db path, CLI output)."""
    db = str(tmp_path_factory.mktemp("demo") / "demo.db")
    result = CliRunner().invoke(cli, ["demo", "--db", db])
    assert result.exit_code == 0, result.output
    return db, result.output


def test_demo_records_the_shipped_session_through_the_proxy(demo_db: tuple[str, str]) -> None:
    db, output = demo_db
    shipped = read_cassette(DEMO_CASSETTE)
    store = open_settled_store(db)
    try:
        (recording,) = store.list_recordings()
        events = list(store.iter_events(recording.id))
    finally:
        store.close()
    assert recording.source == "proxy"
    assert recording.name == "demo"
    assert recording.exit_code == 0
    assert recording.status == "ok"
    assert recording.cli_session_id == shipped.header["session_id"]
    # Every line went through the proxy: the host's exactly as recorded, the
    # CLI's replayed (with paths mapped to this machine).  The interleaving may
    # differ: the recording stamped one answer before its question.
    for direction in ("in", "out", "err"):
        live = [e for e in events if e.direction == direction]
        assert len(live) == len([e for e in shipped.events if e.direction == direction])
    assert [e.data for e in events if e.direction == "in"] == [
        e.data for e in shipped.events if e.direction == "in"
    ]
    assert f"claudetrace show {recording.id} --db {db}" in output
    assert "claudetrace ui" in output


def test_show_displays_the_demo_recording(demo_db: tuple[str, str]) -> None:
    db, _ = demo_db
    result = CliRunner().invoke(cli, ["show", "latest", "--db", db])
    assert result.exit_code == 0, result.output
    assert "mcp__calc__add" in result.output


def test_a_failing_session_is_one_clear_error(tmp_path: Path) -> None:
    failing = tmp_path / "failing.ndjson"
    lines = [
        '{"claudetrace": "cassette", "version": 1, "argv": ["claude"], "exit_code": 3}',
        '{"seq": 0, "t": 0.1, "dir": "in", "line": "{\\"type\\": \\"user\\"}"}',
        '{"seq": 1, "t": 0.2, "dir": "err", "line": "boom: the CLI gave up"}',
    ]
    failing.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DemoError, match="exited with status 3: boom: the CLI gave up"):
        run_demo(str(tmp_path / "x.db"), cassette_path=failing, timeout=10)
