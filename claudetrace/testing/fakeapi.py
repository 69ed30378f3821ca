"""A scripted fake of the Anthropic Messages API, for driving the real CLI offline.

:class:`FakeAPI` is a small threaded HTTP server on ``127.0.0.1`` that answers
``POST /v1/messages`` (the CLI posts to ``/v1/messages?beta=true``) from a queue
of scripted :class:`Reply` objects, streamed as server-sent events exactly like
the real API (``message_start``, ``content_block_start/delta/stop`` for text,
thinking and tool use blocks, ``message_delta`` with the stop reason and usage,
``message_stop``), or as one JSON body when the request is not streaming::

    with FakeAPI(fallback=text("Hello.")) as api:
        api.script(tool_use("Bash", {"command": "touch x"}), text("Done."))
        ...  # run the CLI with ANTHROPIC_BASE_URL=api.url
        assert api.requests[0].streaming

Ids are deterministic (``msg_fake_00000``, ``toolu_msg_fake_00000_0`` …) so
recordings made against it diff cleanly.  With ``ids="session"`` (the standalone
server's choice) they are numbered per CLI session instead,
``msg_fake_<first 8 hex of the session id>_00000``, from the session id the CLI
sends with each request: usage counts a message id once across a store, so
sessions recorded one after another against one server must not share ids.
Usage numbers are deterministic too: ``input_tokens`` is 100 plus the message
number, with 50 cache-read and 10 cache-creation tokens, and ``output_tokens``
is 25 plus the message number.

Which requests consume the script is decided by :attr:`FakeAPI.scripted`: by
default only streaming requests do, because the CLI's side requests (session
titles, for instance) are not streamed and would otherwise steal a scripted
answer at a timing that differs from run to run.  Side requests get
:attr:`FakeAPI.side_reply`.

A reply can also misbehave: ``delay`` sleeps before each SSE event (so an
interrupt can land mid-stream), ``hang`` stops after ``message_start`` and keeps
the connection open until the server closes, ``hold`` waits there until the test
releases it, ``drop_after`` closes the connection after that many events, and
``status`` answers with an API error.
Every request is recorded in :attr:`FakeAPI.requests`; requests for paths the
fake does not know are answered 404 and listed in :attr:`FakeAPI.unknown`.

Replies can also be chosen by prompt content (:meth:`FakeAPI.when`, and script
files: :mod:`claudetrace.testing.script`), so that a team records cassettes in
CI without an API key; run it standalone with ``python -m
claudetrace.testing.fakeapi --script FILE`` (or ``claudetrace fakeapi``).
"""

from __future__ import annotations

import json
import re
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from .script import Rule

#: The model the fake reports when a request does not name one.
DEFAULT_MODEL: Final = "claude-opus-5-5"

#: Number of delta events a text or thinking block is split into (at most).
TEXT_CHUNKS: Final = 5
#: The largest request body the fake API reads (a real request is a few MiB).
MAX_BODY: Final = 64 * 1024 * 1024

#: How message ids are numbered: one sequence for the server's life (``sequence``,
#: what the suite's committed fixtures hold) or one per CLI session (``session``).
Ids = Literal["sequence", "session"]
#: The header the CLI names its session in (CLI 2.1.330).
SESSION_HEADER: Final = "x-claude-code-session-id"
#: The session id in ``metadata.user_id``: a JSON string with ``session_id`` in
#: CLI 2.1.330, ``…_session_<uuid>`` in older CLIs.
_METADATA_SESSION = re.compile(r'session(?:_id"\s*:\s*"|_)([0-9a-fA-F]{8})-')
_SESSION_ID = re.compile(r"([0-9a-fA-F]{8})-")


@dataclass(frozen=True)
class TextBlock:
    """A text content block."""

    text: str


@dataclass(frozen=True)
class ThinkingBlock:
    """An extended-thinking block with its signature."""

    thinking: str
    signature: str = "sig_fake"


@dataclass(frozen=True)
class ToolUseBlock:
    """A tool use block; ``id`` defaults to ``toolu_<message id>_<index>``."""

    name: str
    input: dict[str, Any]
    id: str | None = None


Block = TextBlock | ThinkingBlock | ToolUseBlock


@dataclass(frozen=True)
class Reply:
    """One scripted answer of the fake API.

    ``stop_reason`` defaults to ``tool_use`` when a block is a tool use, else
    ``end_turn``.  ``status`` other than 200 answers with an Anthropic-style error
    body of ``error_type`` instead of a message.
    """

    blocks: tuple[Block, ...]
    stop_reason: str | None = None
    model: str | None = None
    delay: float = 0.0
    hang: bool = False
    #: Set by the test: the stream waits after ``message_start`` until it is set
    #: (or the server closes), then goes on (a turn held under way, then released).
    hold: threading.Event | None = field(default=None, compare=False)
    drop_after: int | None = None
    status: int = 200
    error_type: str = "api_error"
    error_message: str = "fake API error"

    @property
    def effective_stop_reason(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        if any(isinstance(b, ToolUseBlock) for b in self.blocks):
            return "tool_use"
        return "end_turn"


def text(content: str, **options: Any) -> Reply:
    """A reply with one text block."""
    return Reply(blocks=(TextBlock(content),), **options)


def tool_use(
    name: str,
    input: dict[str, Any],
    *,
    say: str | None = None,
    id: str | None = None,
    **options: Any,
) -> Reply:
    """A reply calling one tool, optionally after a text block ``say``."""
    blocks: tuple[Block, ...] = (ToolUseBlock(name, dict(input), id),)
    if say is not None:
        blocks = (TextBlock(say), *blocks)
    return Reply(blocks=blocks, **options)


def thinking(thought: str, then: str, *, signature: str = "sig_fake", **options: Any) -> Reply:
    """A reply that thinks ``thought`` and then says ``then``."""
    return Reply(blocks=(ThinkingBlock(thought, signature), TextBlock(then)), **options)


def reply(*blocks: Block, **options: Any) -> Reply:
    """A reply with arbitrary blocks (several tool uses, text around them …)."""
    return Reply(blocks=tuple(blocks), **options)


def error(
    status: int = 500, error_type: str = "api_error", message: str = "fake API error"
) -> Reply:
    """A reply that fails with an HTTP error (529 ``overloaded_error``, 400 …)."""
    return Reply(blocks=(), status=status, error_type=error_type, error_message=message)


@dataclass
class RecordedRequest:
    """A request the fake API received."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any
    #: The id of the message the fake answered with (None for other paths).
    message_id: str | None = None

    @property
    def streaming(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("stream"))

    @property
    def model(self) -> str | None:
        model = self.body.get("model") if isinstance(self.body, dict) else None
        return model if isinstance(model, str) else None

    @property
    def last_user_text(self) -> str:
        """Text of the last user message (strings and text blocks joined)."""
        messages = self.body.get("messages") if isinstance(self.body, dict) else None
        if not isinstance(messages, list):
            return ""
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                return content_text(message.get("content"))
        return ""

    @property
    def session_prefix(self) -> str | None:
        """First 8 hex digits of the CLI session that sent this request, if it says.

        The ``X-Claude-Code-Session-Id`` header, else the session id in the
        body's ``metadata.user_id``.
        """
        found = _SESSION_ID.match(self.headers.get(SESSION_HEADER, "").strip())
        if found is None:
            metadata = self.body.get("metadata") if isinstance(self.body, dict) else None
            user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
            found = _METADATA_SESSION.search(user_id) if isinstance(user_id, str) else None
        return found.group(1).lower() if found else None

    def tool_results(self) -> list[dict[str, Any]]:
        """The ``tool_result`` blocks of the last user message."""
        messages = self.body.get("messages") if isinstance(self.body, dict) else None
        if not isinstance(messages, list) or not messages:
            return []
        content = messages[-1].get("content") if isinstance(messages[-1], dict) else None
        if not isinstance(content, list):
            return []
        return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def content_text(content: Any) -> str:
    """The text of a message ``content`` (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") == "tool_result":
            parts.append(content_text(block.get("content")))
    return "\n".join(parts)


def chunks(value: str, count: int = TEXT_CHUNKS) -> list[str]:
    """Split ``value`` into at most ``count`` non-empty pieces of equal size."""
    if not value:
        return [""]
    size = -(-len(value) // count)
    return [value[i : i + size] for i in range(0, len(value), size)]


def usage(number: int) -> tuple[dict[str, int], int]:
    """Start usage and final output tokens of the ``number``-th message."""
    start = {
        "input_tokens": 100 + number,
        "output_tokens": 1,
        "cache_read_input_tokens": 50,
        "cache_creation_input_tokens": 10,
    }
    return start, 25 + number


def block_json(block: Block, tool_id: str) -> dict[str, Any]:
    """The finished JSON of a content block (non-streaming answers)."""
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ThinkingBlock):
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    return {"type": "tool_use", "id": block.id or tool_id, "name": block.name, "input": block.input}


def message_json(answer: Reply, message_id: str, model: str, number: int) -> dict[str, Any]:
    """The complete message of a non-streaming answer."""
    start, output = usage(number)
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [block_json(b, f"toolu_{message_id}_{i}") for i, b in enumerate(answer.blocks)],
        "stop_reason": answer.effective_stop_reason,
        "stop_sequence": None,
        "usage": {**start, "output_tokens": output},
    }


def sse_events(answer: Reply, message_id: str, model: str, number: int) -> Iterator[dict[str, Any]]:
    """The server-sent events of a streaming answer, in order."""
    start, output = usage(number)
    yield {
        "type": "message_start",
        "message": {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": start,
        },
    }
    for index, block in enumerate(answer.blocks):
        if isinstance(block, TextBlock):
            yield {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            }
            for piece in chunks(block.text):
                yield {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": piece},
                }
        elif isinstance(block, ThinkingBlock):
            yield {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            }
            for piece in chunks(block.thinking):
                yield {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "thinking_delta", "thinking": piece},
                }
            yield {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "signature_delta", "signature": block.signature},
            }
        else:
            yield {
                "type": "content_block_start",
                "index": index,
                "content_block": {
                    "type": "tool_use",
                    "id": block.id or f"toolu_{message_id}_{index}",
                    "name": block.name,
                    "input": {},
                },
            }
            for piece in chunks(json.dumps(block.input), 2):
                yield {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece},
                }
        yield {"type": "content_block_stop", "index": index}
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": answer.effective_stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": output},
    }
    yield {"type": "message_stop"}


def sse_bytes(event: dict[str, Any]) -> bytes:
    """One server-sent event as sent on the wire."""
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


Selector = Callable[[RecordedRequest], bool]


def streaming_only(request: RecordedRequest) -> bool:
    """The default :attr:`FakeAPI.scripted`: only streaming requests use the script."""
    return request.streaming


class FakeAPI:
    """A scripted Anthropic Messages API on 127.0.0.1 (a context manager).

    ``fallback`` answers scripted requests once the queue is empty (``None``
    answers them with a 400 error naming the message, so a test that runs out
    of script fails visibly).  ``side_reply`` answers requests that
    :attr:`scripted` does not select.  ``ids`` numbers messages in one sequence
    (``msg_fake_00000``…) or per CLI session (``msg_fake_4e546b9b_00000``…; a
    request that names no session falls back to the sequence).
    """

    def __init__(
        self,
        *replies: Reply,
        fallback: Reply | None = None,
        side_reply: Reply | None = None,
        scripted: Selector = streaming_only,
        host: str = "127.0.0.1",
        port: int = 0,
        ids: Ids = "sequence",
    ) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque(replies)
        #: Replies chosen by prompt content (:meth:`when`), tried before the queue.
        self.rules: list[Rule] = []
        self.fallback = fallback
        self.side_reply = side_reply if side_reply is not None else text("Fake session")
        self.scripted = scripted
        self.requests: list[RecordedRequest] = []
        self.unknown: list[RecordedRequest] = []
        self.ids = ids
        #: The next message number of each session (None: the one sequence).
        self._numbers: dict[str | None, int] = {}
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer((host, port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL for ``ANTHROPIC_BASE_URL``."""
        host, port = self._server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}"

    def start(self) -> FakeAPI:
        """Serve in a background thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(
                # A short poll interval: close() waits up to one interval.
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.02},
                name="claudetrace-fakeapi",
                daemon=True,
            )
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving; hanging replies are released."""
        self._closing.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> FakeAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- script ------------------------------------------------------------------

    def script(self, *replies: Reply) -> None:
        """Append replies to the queue of scripted answers."""
        with self._lock:
            self._queue.extend(replies)

    def when(self, prompt: str, *replies: Reply) -> None:
        """Answer prompts matching the regex ``prompt`` with ``replies``, one per step.

        The first reply answers the prompt; each next one answers the CLI's next
        request of that conversation (after tool results); the last repeats.
        Rules are tried in the order given, before the queue of :meth:`script`.
        """
        from .script import rule

        made = rule(prompt, *replies)
        with self._lock:
            self.rules.append(made)

    def reset(self, *replies: Reply, fallback: Reply | None = None) -> None:
        """Forget requests, script and rules, restart ids at ``msg_fake_00000``
        (and each session's at ``_00000``)."""
        with self._lock:
            self.rules = []
            self._queue = deque(replies)
            self.fallback = fallback
            self.requests.clear()
            self.unknown.clear()
            self._numbers.clear()

    @property
    def pending(self) -> int:
        """Scripted replies not yet consumed."""
        with self._lock:
            return len(self._queue)

    def message_requests(self) -> list[RecordedRequest]:
        """The requests to ``/v1/messages`` that consumed the script."""
        with self._lock:
            return [r for r in self.requests if r.path == "/v1/messages" and self.scripted(r)]

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> bool:
        """Wait until ``count`` scripted message requests have arrived."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.message_requests()) >= count:
                return True
            time.sleep(0.01)
        return False

    def _next(self, request: RecordedRequest) -> tuple[Reply | None, str, int]:
        with self._lock:
            answer: Reply | None
            if self.scripted(request):
                answer = self._by_prompt(request)
                if answer is None:
                    answer = self._queue.popleft() if self._queue else self.fallback
            else:
                answer = self.side_reply
            session = request.session_prefix if self.ids == "session" else None
            number = self._numbers.get(session, 0)
            self._numbers[session] = number + 1
        message_id = (
            f"msg_fake_{number:05d}" if session is None else f"msg_fake_{session}_{number:05d}"
        )
        request.message_id = message_id
        return answer, message_id, number

    def _by_prompt(self, request: RecordedRequest) -> Reply | None:
        if not self.rules:
            return None
        from .script import prompt_and_step

        prompt, step = prompt_and_step(request.body)
        for candidate in self.rules:
            if candidate.pattern.search(prompt):
                return candidate.reply(step)
        return None

    def _record(self, request: RecordedRequest, known: bool) -> None:
        with self._lock:
            self.requests.append(request)
            if not known:
                self.unknown.append(request)


def _handler_for(api: FakeAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        fake = api

    return Handler


class _Handler(BaseHTTPRequestHandler):
    fake: FakeAPI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        # Tests read api.requests; stderr noise would only hide real failures.
        pass

    def _read_request(self) -> RecordedRequest | None:
        """The request, or None once it has been answered 400: a Content-Length
        that is not a number of bytes up to :data:`MAX_BODY` (``-5``, ``abc``,
        10**20) gets an HTTP answer, not a traceback and a closed socket."""
        parts = urlsplit(self.path)
        value = (self.headers.get("Content-Length") or "0").strip()
        length = int(value) if value.isdigit() and len(value) <= 12 else -1
        if not 0 <= length <= MAX_BODY:
            self.close_connection = True  # the body, if any, cannot be skipped
            self._send_json(400, _error_body(
                "invalid_request_error",
                f"fake API: Content-Length must be a number of bytes up to {MAX_BODY}, "
                f"not {value[:40]!r}"))
            return None
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", errors="replace")
        return RecordedRequest(
            method=self.command,
            path=parts.path,
            query=parts.query,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_fake")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        request = self._read_request()
        if request is None:
            return
        self.fake._record(request, known=False)
        self._send_json(404, _error_body("not_found_error", f"fake API: no GET {request.path}"))

    def do_HEAD(self) -> None:
        request = self._read_request()
        if request is None:
            return
        self.fake._record(request, known=False)
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        request = self._read_request()
        if request is None:
            return
        if request.path == "/v1/messages/count_tokens":
            self.fake._record(request, known=True)
            self._send_json(200, {"input_tokens": 100})
            return
        if request.path != "/v1/messages":
            self.fake._record(request, known=False)
            self._send_json(
                404, _error_body("not_found_error", f"fake API: no POST {request.path}")
            )
            return
        answer, message_id, number = self.fake._next(request)
        self.fake._record(request, known=True)
        if answer is None:
            # 400, not 500: the CLI retries server errors with backoff, which
            # would turn a test's missing script into a long hang.
            self._send_json(
                400,
                _error_body("invalid_request_error", f"fake API: script exhausted at {message_id}"),
            )
            return
        if answer.status != 200:
            self._send_json(answer.status, _error_body(answer.error_type, answer.error_message))
            return
        model = answer.model or request.model or DEFAULT_MODEL
        if request.streaming:
            self._stream(answer, message_id, model, number)
        else:
            self._send_json(200, message_json(answer, message_id, model, number))

    def _stream(self, answer: Reply, message_id: str, model: str, number: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("request-id", "req_fake")
        # No Content-Length: the connection ends the stream, as with the real API.
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for sent, event in enumerate(sse_events(answer, message_id, model, number)):
                if answer.drop_after is not None and sent >= answer.drop_after:
                    return
                if answer.delay and self.fake._closing.wait(answer.delay):
                    return
                self.wfile.write(sse_bytes(event))
                self.wfile.flush()
                if answer.hang and event["type"] == "message_start":
                    self._wait_for_hangup()
                    return
                if answer.hold is not None and event["type"] == "message_start":
                    while not answer.hold.wait(0.05):
                        if self.fake._closing.is_set():
                            return
        except (BrokenPipeError, ConnectionResetError):
            # The CLI hung up (interrupt, killed): nothing left to answer.
            return

    def _wait_for_hangup(self) -> None:
        # Hold the stream open until the client goes away or the fake closes.
        while not self.fake._closing.wait(0.05):
            readable, _, _ = select.select([self.connection], [], [], 0)
            if readable:
                try:
                    if not self.connection.recv(1, socket.MSG_PEEK):
                        return
                except OSError:
                    return


def _error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


if __name__ == "__main__":
    from ..cli.fakeapi import fakeapi

    fakeapi.main(prog_name="python -m claudetrace.testing.fakeapi")
