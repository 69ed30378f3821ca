"""The fake Anthropic Messages API, spoken to with plain HTTP (no CLI)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from typing import Any

import pytest

from claudetrace.testing import FakeAPI, error, reply, text, thinking, tool_use
from claudetrace.testing.fakeapi import TextBlock, ToolUseBlock, chunks


def post(
    api: FakeAPI, body: Any, path: str = "/v1/messages?beta=true"
) -> tuple[int, dict[str, str], bytes]:
    host, port = api.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def sse(data: bytes) -> list[dict[str, Any]]:
    """Parse an SSE body into its data objects, checking event names match types."""
    events = []
    for frame in data.decode().split("\n\n"):
        if not frame:
            continue
        lines = dict(line.split(": ", 1) for line in frame.split("\n"))
        event = json.loads(lines["data"])
        assert lines["event"] == event["type"]
        events.append(event)
    return events


def message_request(stream: bool = True, prompt: str = "hi", **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-test-1",
        "max_tokens": 100,
        "stream": stream,
        "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
        **extra,
    }


@pytest.fixture
def api() -> Any:
    with FakeAPI() as fake:
        yield fake


def test_streams_a_text_reply_as_the_api_does(api: FakeAPI) -> None:
    api.script(text("Hello from the fake model."))
    status, headers, body = post(api, message_request())
    assert status == 200
    assert headers["Content-Type"] == "text/event-stream"
    events = sse(body)
    assert [e["type"] for e in events] == [
        "message_start",
        "content_block_start",
        *["content_block_delta"] * 5,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start = events[0]["message"]
    assert start["id"] == "msg_fake_00000"
    assert start["model"] == "claude-test-1"
    assert start["usage"] == {
        "input_tokens": 100,
        "output_tokens": 1,
        "cache_read_input_tokens": 50,
        "cache_creation_input_tokens": 10,
    }
    deltas = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
    assert deltas == "Hello from the fake model."
    assert events[-2]["delta"]["stop_reason"] == "end_turn"
    assert events[-2]["usage"] == {"output_tokens": 25}


def test_tool_use_streams_input_json_and_stops_for_the_tool(api: FakeAPI) -> None:
    api.script(tool_use("mcp__calc__add", {"a": 2, "b": 40}, say="Adding."))
    events = sse(post(api, message_request())[2])
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert starts[0] == {"type": "text", "text": ""}
    assert starts[1] == {
        "type": "tool_use",
        "id": "toolu_msg_fake_00000_1",
        "name": "mcp__calc__add",
        "input": {},
    }
    partial = "".join(
        e["delta"]["partial_json"]
        for e in events
        if e["type"] == "content_block_delta" and e["index"] == 1
    )
    assert json.loads(partial) == {"a": 2, "b": 40}
    assert events[-2]["delta"]["stop_reason"] == "tool_use"


def test_thinking_carries_its_signature(api: FakeAPI) -> None:
    api.script(thinking("Let me think.", "Done.", signature="sig_1"))
    events = sse(post(api, message_request())[2])
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta" and e["index"] == 0]
    assert "".join(d.get("thinking", "") for d in deltas) == "Let me think."
    assert deltas[-1] == {"type": "signature_delta", "signature": "sig_1"}


def test_ids_and_usage_advance_per_message_and_reset(api: FakeAPI) -> None:
    api.script(text("one"), text("two"))
    first = sse(post(api, message_request())[2])[0]["message"]
    second = sse(post(api, message_request())[2])[0]["message"]
    assert (first["id"], second["id"]) == ("msg_fake_00000", "msg_fake_00001")
    assert second["usage"]["input_tokens"] == 101
    api.reset(text("again"))
    assert sse(post(api, message_request())[2])[0]["message"]["id"] == "msg_fake_00000"
    assert len(api.requests) == 1


SESSION_A = "4e546b9b-4e11-43b9-a21f-eb6191122376"
SESSION_B = "0badf00d-1111-4222-8333-444455556666"


def post_as(api: FakeAPI, session: str | None, how: str = "header") -> str:
    """The id of the message answering a request of CLI session ``session``, named
    the way the CLI does: a header, ``metadata.user_id`` as CLI 2.1.330 writes it
    (JSON), or as older CLIs did (``…_session_<uuid>``)."""
    host, port = api.url.removeprefix("http://").split(":")
    headers = {"Content-Type": "application/json"}
    body = message_request()
    if session is not None and how == "header":
        headers["X-Claude-Code-Session-Id"] = session
    elif session is not None and how == "json":
        user = json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": session})
        body["metadata"] = {"user_id": user}
    elif session is not None:
        body["metadata"] = {"user_id": f"user_{'d' * 64}_account__session_{session}"}
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("POST", "/v1/messages?beta=true", json.dumps(body), headers)
        return str(sse(conn.getresponse().read())[0]["message"]["id"])
    finally:
        conn.close()


def test_ids_can_be_numbered_per_cli_session() -> None:
    with FakeAPI(fallback=text("ok"), ids="session") as api:
        ids = [
            post_as(api, SESSION_A),
            post_as(api, SESSION_B, "json"),
            post_as(api, SESSION_A, "json"),
            post_as(api, SESSION_B, "user_id"),
            post_as(api, None),
            post_as(api, "not-a-session"),
        ]
        assert ids == [
            "msg_fake_4e546b9b_00000",
            "msg_fake_0badf00d_00000",
            "msg_fake_4e546b9b_00001",
            "msg_fake_0badf00d_00001",
            "msg_fake_00000",  # no session named: the one sequence
            "msg_fake_00001",
        ]
        api.reset(fallback=text("ok"))
        assert post_as(api, SESSION_A) == "msg_fake_4e546b9b_00000"


def test_the_suite_s_fake_keeps_one_sequence_whatever_the_session(api: FakeAPI) -> None:
    api.fallback = text("ok")
    assert [post_as(api, SESSION_A), post_as(api, SESSION_B)] == [
        "msg_fake_00000",
        "msg_fake_00001",
    ]


def test_non_streaming_requests_get_json_and_leave_the_script_alone(api: FakeAPI) -> None:
    api.script(text("scripted"))
    api.side_reply = text("A title")
    status, _, body = post(api, message_request(stream=False))
    assert status == 200
    message = json.loads(body)
    assert message["content"] == [{"type": "text", "text": "A title"}]
    assert message["stop_reason"] == "end_turn"
    assert message["usage"]["output_tokens"] == 25
    assert api.pending == 1
    assert api.message_requests() == []


def test_requests_are_recorded_for_assertions(api: FakeAPI) -> None:
    api.script(text("ok"))
    post(api, message_request(prompt="What is 2+2?"))
    (request,) = api.requests
    assert request.path == "/v1/messages"
    assert request.query == "beta=true"
    assert request.streaming
    assert request.model == "claude-test-1"
    assert request.last_user_text == "What is 2+2?"
    assert request.message_id == "msg_fake_00000"
    assert request.headers["content-type"] == "application/json"


def test_exhausted_script_fails_fast_without_a_fallback(api: FakeAPI) -> None:
    status, _, body = post(api, message_request())
    assert status == 400
    assert "script exhausted" in json.loads(body)["error"]["message"]
    api.fallback = text("fallback")
    events = sse(post(api, message_request())[2])
    assert events[0]["message"]["id"] == "msg_fake_00001"


def test_error_replies_use_the_api_error_shape(api: FakeAPI) -> None:
    api.script(error(529, "overloaded_error", "Overloaded"))
    status, _, body = post(api, message_request())
    assert status == 529
    assert json.loads(body) == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }


def test_unknown_paths_are_answered_404_and_listed(api: FakeAPI) -> None:
    status, _, _ = post(api, {}, path="/api/hello")
    assert status == 404
    assert [r.path for r in api.unknown] == ["/api/hello"]
    status, _, body = post(api, message_request(), path="/v1/messages/count_tokens")
    assert (status, json.loads(body)) == (200, {"input_tokens": 100})


def test_drop_after_closes_the_stream_early(api: FakeAPI) -> None:
    api.script(text("Hello there", drop_after=2))
    events = sse(post(api, message_request())[2])
    assert [e["type"] for e in events] == ["message_start", "content_block_start"]


def test_delay_paces_the_events(api: FakeAPI) -> None:
    api.script(reply(TextBlock("ab"), delay=0.02))
    started = time.monotonic()
    events = sse(post(api, message_request())[2])
    # message_start, block start, 2 deltas, block stop, message delta, stop.
    assert len(events) == 7
    assert time.monotonic() - started >= 7 * 0.02


def test_hang_holds_the_stream_until_the_client_leaves(api: FakeAPI) -> None:
    api.script(text("never", hang=True))
    host, port = api.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    body = json.dumps(message_request()).encode()
    sock.sendall(
        b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    received = b""
    while b"message_start" not in received:
        received += sock.recv(65536)
    sock.settimeout(0.3)
    with pytest.raises(TimeoutError):
        sock.recv(65536)  # nothing more comes while the client stays
    sock.close()
    # The handler notices the hang-up and finishes; the server stays usable.
    api.script(text("next"))
    assert post(api, message_request())[0] == 200


def test_close_releases_a_hanging_stream() -> None:
    api = FakeAPI(text("never", hang=True)).start()
    outcome: list[Any] = []

    def client() -> None:
        try:
            outcome.append(post(api, message_request())[0])
        except OSError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=client)
    thread.start()
    assert api.wait_for_requests(1, timeout=5)
    api.close()
    thread.join(5)
    assert not thread.is_alive()
    assert outcome == [200]


def test_wait_for_requests_times_out(api: FakeAPI) -> None:
    assert not api.wait_for_requests(1, timeout=0.05)


def test_chunks_split_evenly_and_keep_every_character() -> None:
    assert chunks("Hello from the fake model.") == ["Hello ", "from t", "he fak", "e mode", "l."]
    assert chunks("") == [""]
    assert "".join(chunks("x" * 101, 5)) == "x" * 101


def test_explicit_tool_ids_and_stop_reasons() -> None:
    answer = reply(
        ToolUseBlock("Bash", {"command": "ls"}, id="toolu_custom"), stop_reason="max_tokens"
    )
    assert answer.effective_stop_reason == "max_tokens"
    with FakeAPI(answer) as api:
        events = sse(post(api, message_request())[2])
    assert events[1]["content_block"]["id"] == "toolu_custom"
    assert events[-2]["delta"]["stop_reason"] == "max_tokens"


# -- replies chosen by prompt, script files, the standalone server ------------------------------


def turn(prompt: str, *after: dict[str, Any]) -> dict[str, Any]:
    # The CLI ends its messages with its environment, as a system message.
    environment = {"role": "system", "content": [{"type": "text", "text": "# Environment"}]}
    return {
        "stream": False,
        "messages": [{"role": "user", "content": prompt}, *after, environment],
    }


def answer_text(api: FakeAPI, body: dict[str, Any]) -> str:
    status, _, data = post(api, body)
    assert status == 200, data
    return str(
        json.loads(data)["content"][-1].get("text") or json.loads(data)["content"][-1]["name"]
    )


def test_rules_answer_by_prompt_and_step_whatever_the_order() -> None:
    with FakeAPI(fallback=text("?"), scripted=lambda r: True) as api:
        api.when(r"weather in \w+", tool_use("Bash", {"command": "curl wttr.in"}), text("Sunny."))
        api.when("hello", text("Hi!"))
        assert answer_text(api, turn("hello there")) == "Hi!"
        tool_result = {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "weather in Oslo: 20C"},
                {"type": "text", "text": "<system-reminder>x</system-reminder>"},
            ],
        }
        step_two = turn("weather in Oslo", {"role": "assistant", "content": "..."}, tool_result)
        # The second step first: the answer depends on the conversation, not on order.
        assert answer_text(api, step_two) == "Sunny."
        assert answer_text(api, turn("weather in Oslo")) == "Bash"
        assert answer_text(api, turn("something else")) == "?"


def test_a_script_file_and_its_errors(tmp_path: Any) -> None:
    from claudetrace.testing.script import BadScript, load_script

    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "prompt": "add",
                        "replies": [
                            {"tool_use": {"name": "mcp__calc__add", "input": {"a": 1}}},
                            {"text": "2"},
                        ],
                    },
                    {
                        "prompt": "busy",
                        "reply": {"error": {"status": 529, "type": "overloaded_error"}},
                    },
                ],
                "fallback": {"text": "OK."},
            }
        )
    )
    script = load_script(path)
    assert [r.pattern.pattern for r in script.rules] == ["add", "busy"]
    assert script.rules[1].reply(0).status == 529
    assert script.fallback == text("OK.")
    path.write_text('{"rules": [{"prompt": "x", "replies": [{"txt": "typo"}]}]}')
    with pytest.raises(BadScript, match="unknown reply field"):
        load_script(path)
    for bad in ('{"thinking": "hm", "then": {"text": "4"}}', '{"text": 4}', '{"thinking": []}'):
        path.write_text('{"rules": [], "fallback": ' + bad + '}')
        with pytest.raises(BadScript, match="is a string, not"):
            load_script(path)


@pytest.mark.parametrize("length", ["-5", "abc", str(10**20), "1e3", "+5"])
def test_a_bad_content_length_is_answered_400(api: FakeAPI, length: str) -> None:
    host, port = api.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(f"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: {length}"
                     "\r\n\r\n{}".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), answer
    assert b"Content-Length must be a number of bytes" in body
    assert api.requests == []  # nothing recorded, and the server goes on
    api.script(text("fine"))
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("POST", "/v1/messages", body=json.dumps({"model": "m", "messages": []}))
        response = conn.getresponse()
        response.read()
        assert response.status == 200
    finally:
        conn.close()


def test_the_standalone_server_prints_its_url_and_stops_on_sigterm(tmp_path: Any) -> None:
    import signal
    import subprocess
    import sys

    path = tmp_path / "s.json"
    path.write_text(json.dumps({"rules": [{"prompt": "ping", "reply": {"text": "pong"}}]}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "claudetrace.testing.fakeapi", "--script", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline().strip()
        assert first.startswith("ANTHROPIC_BASE_URL=http://127.0.0.1:")
        host, port = first.split("=", 1)[1].removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
        body = json.dumps({**turn("ping"), "stream": True})
        conn.request("POST", "/v1/messages?beta=true", body, {"Content-Type": "application/json"})
        events = sse(conn.getresponse().read())
        conn.close()
        deltas = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
        assert "".join(deltas) == "pong"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert "answered 1 request(s)" in proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    bad = subprocess.run(
        [sys.executable, "-m", "claudetrace", "fakeapi", "--script", str(tmp_path / "none.json")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (
        bad.returncode == 2 and bad.stderr.count("\n") == 1 and "cannot read script" in bad.stderr
    )
