"""The causal matcher: lanes, gating, id binding, divergence kinds (no processes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claudetrace.cassette import Cassette, new_header, read_cassette
from claudetrace.model.events import Event
from claudetrace.replay import DivergenceKind, Matcher, compile_script, lane_of

FIXTURES = Path(__file__).parent / "fixtures" / "samples"


def line(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def cassette(*items: tuple[str, Any], **header: Any) -> Cassette:
    """A recording from ``(direction, object)`` pairs, 10 ms apart (beyond races)."""
    events = [
        Event(
            seq=i,
            direction=d,
            t_ns=(i + 1) * 10_000_000,
            data=obj if isinstance(obj, bytes) else line(obj),
        )
        for i, (d, obj) in enumerate(items)
    ]
    return Cassette(header=new_header(argv=["claude"], exit_code=0, **header), events=events)


def live(obj: Any) -> Event:
    return Event(seq=0, direction="in", t_ns=0, data=obj if isinstance(obj, bytes) else line(obj))


def init(req: str) -> dict[str, Any]:
    return {"type": "control_request", "request_id": req, "request": {"subtype": "initialize"}}


def init_ok(req: str) -> dict[str, Any]:
    return {"type": "control_response", "response": {"subtype": "success", "request_id": req}}


def user(text: str) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": text}}


def cli_request(rid: str) -> dict[str, Any]:
    return {"type": "control_request", "request_id": rid, "request": {"subtype": "hook_callback"}}


def host_response(rid: str, value: Any = None) -> dict[str, Any]:
    return {
        "type": "control_response",
        "response": {"subtype": "success", "request_id": rid, "response": {"v": value}},
    }


def result(text: str = "done") -> dict[str, Any]:
    return {"type": "result", "subtype": "success", "result": text, "session_id": "s1"}


def drain(matcher: Matcher) -> list[bytes]:
    return [matcher.render(out) for out in matcher.pop_ready()]


def test_lanes() -> None:
    assert lane_of(live(init("req_1_a")).fields) == ("control", "initialize")
    assert lane_of(live(host_response("u1")).fields) == ("response", "u1")
    assert lane_of(live(user("x")).fields) == ("user",)
    assert lane_of(live(b"not json").fields) == ("text",)


def test_output_waits_for_preceding_input_and_binds_request_id() -> None:
    script = compile_script(
        cassette(
            ("in", init("req_1_aaaa")),
            ("out", init_ok("req_1_aaaa")),
            ("in", user("hi")),
            ("out", result()),
        )
    )
    matcher = Matcher(script)
    assert drain(matcher) == []
    assert matcher.offer(live(init("req_1_beef"))) is None
    out = drain(matcher)
    assert [json.loads(o)["response"]["request_id"] for o in out] == ["req_1_beef"]
    assert matcher.offer(live(user("hi"))) is None
    assert [json.loads(o)["type"] for o in drain(matcher)] == ["result"]
    assert matcher.finish() is None and matcher.done_output


def test_response_recorded_before_its_request_does_not_deadlock() -> None:
    # Two threads record the two streams: the host's answer can be stamped first.
    script = compile_script(
        cassette(
            ("in", user("go")),
            ("in", host_response("cli-1")),
            ("out", cli_request("cli-1")),
            ("out", result()),
        )
    )
    matcher = Matcher(script)
    assert matcher.offer(live(user("go"))) is None
    assert [json.loads(o)["type"] for o in drain(matcher)] == ["control_request"]
    assert matcher.offer(live(host_response("cli-1"))) is None
    assert [json.loads(o)["type"] for o in drain(matcher)] == ["result"]


def test_basic_sample_replays_with_fresh_request_id() -> None:
    recorded = read_cassette(FIXTURES / "basic.cassette.ndjson")
    matcher = Matcher(compile_script(recorded))
    released: list[bytes] = []
    for event in recorded.events:
        if event.direction == "in":
            released += drain(matcher)
            data = event.data.replace(b"req_1_9c3ad989", b"req_1_12345678")
            assert matcher.offer(live(data)) is None
    released += drain(matcher)
    assert len(released) == sum(e.direction != "in" for e in recorded.events)
    assert b"req_1_12345678" in b"".join(released)
    assert b"req_1_9c3ad989" not in b"".join(released)


def test_nth_identical_message_matches_nth_recorded() -> None:
    script = compile_script(
        cassette(
            ("in", user("again")),
            ("out", result("one")),
            ("in", user("again")),
            ("out", result("two")),
        )
    )
    matcher = Matcher(script)
    assert matcher.offer(live(user("again"))) is None
    assert [json.loads(o)["result"] for o in drain(matcher)] == ["one"]
    assert matcher.offer(live(user("again"))) is None
    assert [json.loads(o)["result"] for o in drain(matcher)] == ["two"]


def test_unmatched_message_report() -> None:
    script = compile_script(
        cassette(("in", user("hello")), ("out", result()), ("in", user("bye")), ("out", result()))
    )
    matcher = Matcher(script, source="x.ndjson", rerecord="do it again")
    divergence = matcher.offer(live(user("HELLO")))
    assert divergence is not None
    assert divergence.kind is DivergenceKind.UNMATCHED_MESSAGE
    assert divergence.exit_code == 81
    assert (divergence.turn, divergence.lane, divergence.seq) == (1, "user", 0)
    assert [c.path for c in divergence.changes] == ["$.message.content"]
    assert divergence.candidates[0].seq == 2  # the other user message
    assert divergence.upcoming[0].seq == 1
    text = divergence.render()
    assert '$.message.content: expected "hello", got "HELLO"' in text
    assert "to re-record: do it again" in text
    report = divergence.to_json()
    assert report["where"] == {"turn": 1, "lane": "user", "seq": 0, "live_line": 1}
    assert report["diff"] == [{"path": "$.message.content", "expected": "hello", "actual": "HELLO"}]
    result_msg = json.loads(divergence.result_line("s1", 1))
    assert result_msg["is_error"] is True and result_msg["type"] == "result"


def test_candidate_explains_lane_order() -> None:
    script = compile_script(cassette(("in", user("a")), ("in", user("b")), ("out", result())))
    divergence = Matcher(script).offer(live(user("b")))
    assert divergence is not None
    assert divergence.candidates[0].seq == 1
    assert "first expects seq 0" in divergence.candidates[0].reason


def test_recording_exhausted_and_never_sent() -> None:
    script = compile_script(cassette(("in", user("a")), ("out", result())))
    matcher = Matcher(script)
    never = matcher.finish()
    assert never is not None and never.kind is DivergenceKind.INPUT_NEVER_SENT
    assert never.exit_code == 83 and never.pending[0].seq == 0
    assert matcher.offer(live(user("a"))) is None
    extra = matcher.offer(live(user("extra turn")))
    assert extra is not None and extra.kind is DivergenceKind.RECORDING_EXHAUSTED
    assert extra.exit_code == 82


def test_response_to_unknown_request_is_unmatched() -> None:
    script = compile_script(cassette(("in", user("a")), ("in", user("b")), ("out", result())))
    divergence = Matcher(script).offer(live(host_response("nope")))
    assert divergence is not None and divergence.kind is DivergenceKind.UNMATCHED_MESSAGE
    assert divergence.lane == "response:nope"


def test_paths_are_mapped_in_output_and_templates() -> None:
    hook = {
        "type": "control_request",
        "request_id": "c1",
        "request": {"subtype": "hook_callback", "input": {"cwd": "/rec/proj"}},
    }
    script = compile_script(
        cassette(
            ("in", user("x")),
            ("out", hook),
            ("in", host_response("c1", "/rec/proj/f")),
            ("out", result()),
            cwd="/rec/proj",
        ),
        live_paths={"cwd": "/live/p"},
    )
    matcher = Matcher(script)
    assert matcher.offer(live(user("x"))) is None
    (out,) = drain(matcher)
    assert json.loads(out)["request"]["input"]["cwd"] == "/live/p"
    assert matcher.offer(live(host_response("c1", "/live/p/f"))) is None


# -- properties ---------------------------------------------------------------------------


@st.composite
def concurrent_session(draw: st.DrawFn) -> tuple[Cassette, list[int]]:
    """A session with batches of concurrent CLI requests, and a host answer order."""
    batches = draw(st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=4))
    items: list[tuple[str, Any]] = [
        ("in", init("req_1_0a0a")),
        ("out", init_ok("req_1_0a0a")),
        ("in", user("go")),
    ]
    rid = 0
    for size in batches:
        ids = [f"cli-{rid + i}" for i in range(size)]
        rid += size
        items += [("out", cli_request(i)) for i in ids]
        items += [("in", host_response(i, i)) for i in ids]
        items.append(("out", {"type": "assistant", "after": ids}))
    items.append(("out", result()))
    seeds = draw(st.lists(st.integers(min_value=0, max_value=1_000), min_size=rid, max_size=rid))
    return cassette(*items), seeds


@settings(max_examples=60, deadline=None)
@given(concurrent_session(), st.text(alphabet="0123456789abcdef", min_size=4, max_size=12))
def test_any_causal_interleaving_across_lanes_replays(
    session: tuple[Cassette, list[int]], fresh_hex: str
) -> None:
    recorded, seeds = session
    matcher = Matcher(compile_script(recorded))
    live_req = f"req_1_{fresh_hex}"
    assert matcher.offer(live(init(live_req))) is None
    released = drain(matcher)
    assert matcher.offer(live(user("go"))) is None
    outstanding: list[str] = []
    picks = iter(seeds)
    while True:
        for data in drain(matcher):
            released.append(data)
            obj = json.loads(data)
            if obj["type"] == "control_request":
                outstanding.append(obj["request_id"])
        if not outstanding:
            break
        # The host answers whichever outstanding request it likes first.
        rid = outstanding.pop(next(picks) % len(outstanding))
        assert matcher.offer(live(host_response(rid, rid))) is None
    assert matcher.finish() is None and matcher.done_output
    expected = [e.data for e in recorded.events if e.direction == "out"]
    expected = [d.replace(b"req_1_0a0a", live_req.encode()) for d in expected]
    assert [d.rstrip(b"\n") for d in released] == expected


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.text(alphabet="0123456789abcdef", min_size=1, max_size=10),
        min_size=1,
        max_size=6,
        unique=True,
    )
)
def test_every_host_request_id_is_bound_and_substituted(hexes: list[str]) -> None:
    items: list[tuple[str, Any]] = []
    for n, _ in enumerate(hexes):
        rec = f"req_{n + 1}_{'0' * (n + 1)}"
        items += [
            (
                "in",
                {
                    "type": "control_request",
                    "request_id": rec,
                    "request": {"subtype": "set_model", "model": str(n)},
                },
            ),
            ("out", init_ok(rec)),
        ]
    matcher = Matcher(compile_script(cassette(*items)))
    got = []
    for n, hexed in enumerate(hexes):
        live_id = f"req_{n + 1}_{hexed}"
        assert (
            matcher.offer(
                live(
                    {
                        "type": "control_request",
                        "request_id": live_id,
                        "request": {"subtype": "set_model", "model": str(n)},
                    }
                )
            )
            is None
        )
        got += [json.loads(o)["response"]["request_id"] for o in drain(matcher)]
    assert got == [f"req_{n + 1}_{h}" for n, h in enumerate(hexes)]


def test_host_line_stamped_just_before_the_answer_it_waited_for() -> None:
    # Recorded: initialize, then the user message 1 ms before the initialize
    # response; the SDK only sends the message once it has that response.
    t = [0, 400_000_000, 401_000_000, 450_000_000]
    items = [
        ("in", init("req_1_aa")),
        ("in", user("go")),
        ("out", init_ok("req_1_aa")),
        ("out", result()),
    ]
    events = [Event(seq=i, direction=d, t_ns=t[i], data=line(o)) for i, (d, o) in enumerate(items)]
    script = compile_script(Cassette(header=new_header(argv=["claude"]), events=events))
    matcher = Matcher(script)
    assert matcher.offer(live(init("req_1_bb"))) is None
    assert [json.loads(o)["type"] for o in drain(matcher)] == ["control_response"]
    assert matcher.offer(live(user("go"))) is None
    assert [json.loads(o)["type"] for o in drain(matcher)] == ["result"]


def test_host_line_well_before_the_answer_still_gates_it() -> None:
    t = [0, 100_000_000, 401_000_000]
    items = [("in", init("req_1_aa")), ("in", user("go")), ("out", init_ok("req_1_aa"))]
    events = [Event(seq=i, direction=d, t_ns=t[i], data=line(o)) for i, (d, o) in enumerate(items)]
    matcher = Matcher(compile_script(Cassette(header=new_header(argv=["claude"]), events=events)))
    assert matcher.offer(live(init("req_1_bb"))) is None
    assert drain(matcher) == []


def test_a_fast_cli_recording_still_waits_for_each_cause() -> None:
    # A fast CLI: the whole session within a few milliseconds, closer than the
    # race window.  The answer to initialize waits for (and names) the live
    # request, and the turn's output waits for the prompt that caused it.
    stamps = [0.2226, 0.2257, 0.2259, 0.22606, 0.22606, 0.22606]
    items = [
        ("in", init("req_1_541804bb")),
        ("out", init_ok("req_1_541804bb")),
        ("in", user("hello")),
        ("out", {"type": "system", "subtype": "init"}),
        ("out", {"type": "assistant", "text": "echo: hello"}),
        ("out", result()),
    ]
    events = [
        Event(seq=i, direction=d, t_ns=int(t * 1e9), data=line(obj))
        for i, ((d, obj), t) in enumerate(zip(items, stamps, strict=True))
    ]
    matcher = Matcher(compile_script(Cassette(new_header(argv=["claude"]), events)))
    assert drain(matcher) == []
    assert matcher.offer(live(init("req_1_0000abcd"))) is None
    assert [json.loads(b)["response"]["request_id"] for b in drain(matcher)] == ["req_1_0000abcd"]
    assert drain(matcher) == []
    assert matcher.offer(live(user("hello"))) is None
    assert len(drain(matcher)) == 3


def mcp_request(rid: str, method: str, jsonrpc_id: int | None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if jsonrpc_id is not None:
        message["id"] = jsonrpc_id
    request = {"subtype": "mcp_message", "server_name": "calc", "message": message}
    return {"type": "control_request", "request_id": rid, "request": request}


def mcp_answer(rid: str, jsonrpc_id: int | None) -> dict[str, Any]:
    reply = {"jsonrpc": "2.0", "id": jsonrpc_id, "result": {}}
    body = {"subtype": "success", "request_id": rid, "response": {"mcp_response": reply}}
    return {"type": "control_response", "response": body}


SETUP = [
    ("m0", "initialize", 0),
    ("m1", "notifications/initialized", None),
    ("m2", "tools/list", 1),
]


# CLI 2.1.330 answers initialize once the server's MCP initialize is answered and
# finishes the set-up after it; the protocol notes describe all three first.
@pytest.mark.parametrize("before", [1, 3], ids=["cli-2.1.330", "all-set-up-first"])
def test_sdk_mcp_set_up_around_the_initialize_response(before: int) -> None:
    # A Go host: initialize, answer each set-up request on its own goroutine, the
    # prompt once initialize is answered; two tool calls answered in reverse order.
    setup = [(rid, mcp_request(rid, m, i), mcp_answer(rid, i)) for rid, m, i in SETUP]
    items: list[tuple[str, Any]] = [("in", init("req_1_aaaa1111"))]
    for _, request, answer in setup[:before]:
        items += [("out", request), ("in", answer)]
    items += [("out", init_ok("req_1_aaaa1111")), ("in", user("add"))]
    for _, request, answer in setup[before:]:
        items += [("out", request), ("in", answer)]
    calls = [mcp_request("c1", "tools/call", 2), mcp_request("c2", "tools/call", 3)]
    items += [("out", calls[0]), ("out", calls[1])]
    items += [("in", mcp_answer("c2", 3)), ("in", mcp_answer("c1", 2)), ("out", result("42"))]
    matcher = Matcher(compile_script(cassette(*items)))

    # Only the initialize: the CLI's set-up request, and not yet the response.
    assert matcher.offer(live(init("req_1_bbbb2222"))) is None
    out = [json.loads(data) for data in drain(matcher)]
    assert out == [setup[0][1]]
    released: list[dict[str, Any]] = []
    for index in range(before):
        assert matcher.offer(live(setup[index][2])) is None
        released = [json.loads(data) for data in drain(matcher)]
        if index + 1 < before:
            assert released == [setup[index + 1][1]]
    # The initialize response, with the live id, only after the last answer before it.
    assert released[0] == init_ok("req_1_bbbb2222")
    assert matcher.offer(live(user("add"))) is None
    released += [json.loads(data) for data in drain(matcher)]
    for _, request, answer in setup[before:]:
        assert released[-1] == request
        assert matcher.offer(live(answer)) is None
        released += [json.loads(data) for data in drain(matcher)]
    assert released[-2:] == calls
    # This time the host answers the calls in the recorded order, the other way round.
    assert matcher.offer(live(mcp_answer("c1", 2))) is None
    assert drain(matcher) == []
    assert matcher.offer(live(mcp_answer("c2", 3))) is None
    assert [json.loads(data) for data in drain(matcher)] == [result("42")]
    assert matcher.finish() is None and matcher.done_output
