"""The replay process loop: a fake ``claude`` on stdin/stdout/stderr.

:class:`ReplayEngine` owns the file descriptors and the clock; every decision
(what matches, what may be released, what a divergence says) is made by the pure
:class:`~claudetrace.replay.matching.Matcher`.  By default output is released as
fast as the host consumes it; ``speed`` reproduces the recorded gaps, scaled.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import select
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..cassette import Cassette, read_cassette, replace_file
from ..display import for_terminal, visible, visible_lines
from ..errors import CassetteError, ReplayError, SessionNotFound, StoreError
from ..model.events import Event, LineSplitter

if TYPE_CHECKING:
    from ..sanitize import Sanitizer
from .argv import argv_changes
from .faults import GARBAGE, Fault, FaultPlan
from .matching import RACE_WINDOW_NS, Matcher, OutputLine, Script, compile_script
from .normalize import Change, VolatileSpec, live_paths
from .report import Divergence, DivergenceKind, error_response
from .rules import MatchRules

#: Read size for the host's stdin.
_CHUNK: Final = 1 << 16

#: How long the host must stay silent before such a possible race is resolved by
#: releasing the output anyway, so that neither side waits for the other forever.
STALL_SECONDS: Final = 0.25


class CassetteMissing(ReplayError):
    """The replay SOURCE names no cassette file and no stored recording."""

    exit_code = DivergenceKind.CASSETTE_MISSING.exit_code

    def __init__(self, message: str, *, source: str) -> None:
        super().__init__(message)
        self.source = source


def load_source(source: str, db: str | None = None) -> Cassette:
    """Load a replay SOURCE: a cassette file path, or a SESSION in the store."""
    path = Path(source)
    if path.is_file():
        return read_cassette(path)
    if path.suffix in (".ndjson", ".jsonl", ".json") or os.sep in source:
        raise CassetteMissing(f"cassette not found: {source}", source=source)
    from ..indexer import open_settled_store

    try:
        store = open_settled_store(db, create=False)
    except StoreError as exc:
        raise CassetteMissing(f"{source}: no such cassette, and {exc}", source=source) from exc
    try:
        from ..formats.unfolded import whole

        folded, recording = whole(store, store.resolve(source))
        cassette: Cassette = folded.load_cassette(recording.id)
        return cassette
    except SessionNotFound as exc:
        raise CassetteMissing(
            f"{source}: no such cassette file or recorded session", source=source
        ) from exc
    finally:
        store.close()


def argv_drift(recorded: Sequence[str], live: Sequence[str]) -> list[str]:
    """Differences between recorded and live CLI arguments (empty when the same)."""
    notes: list[str] = []
    matcher = difflib.SequenceMatcher(a=list(recorded), b=list(live), autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op in ("delete", "replace"):
            notes.append("recorded " + " ".join(recorded[a0:a1]))
        if op in ("insert", "replace"):
            notes.append("live " + " ".join(live[b0:b1]))
    return notes


def version_text(script: Script) -> str:
    """What ``claude -v`` printed for the recorded CLI."""
    return f"{script.version or '0.0.0'} (Claude Code)"


@dataclass
class ReplayOptions:
    """How to replay: timing, where reports go, how to say 're-record', how to match.

    ``redact`` are extra patterns hidden from host lines before they are
    compared (those of the cassette's header are always used); ``match_argv``
    False or ``ignore_argv`` keys relax the comparison of CLI options;
    ``faults`` are injected on purpose (:mod:`claudetrace.replay.faults`).
    """

    speed: float | None = None
    report_path: str | None = None
    rerecord: str | None = None
    source_label: str | None = None
    stall_seconds: float = STALL_SECONDS
    spec: VolatileSpec | None = None
    rules: MatchRules | None = None
    redact: tuple[str, ...] = ()
    match_argv: bool = True
    ignore_argv: tuple[str, ...] = ()
    faults: tuple[Fault, ...] = ()


class _Stop(Exception):
    """A fault ends the fake CLI with ``code`` (or by ``signal``)."""

    def __init__(self, code: int, signal: int | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.signal = signal


class _Hang(Exception):
    """A fault stops the output for good."""


class ReplayEngine:
    """Serve one host from a compiled script over three file descriptors."""

    def __init__(self, script: Script, options: ReplayOptions | None = None) -> None:
        self.script = script
        self.options = options or ReplayOptions()
        #: The descriptors that are a terminal (a person running the fake CLI by hand).
        self._terminals: frozenset[int] = frozenset()
        self.sanitizer = live_sanitizer(script.header, self.options.redact)
        self.matcher = Matcher(
            script,
            source=self.options.source_label,
            rerecord=self.options.rerecord,
            rules=self.options.rules,
            redact=self.sanitizer.line,
        )
        self.faults = FaultPlan(self.options.faults)
        # A host tested with faults stops early on purpose: what it never sends
        # is not a divergence.
        self.matcher.lenient = bool(self.options.faults)
        self.divergence: Divergence | None = None
        self.released = 0
        #: Complete lines written to stdout (what fault SPECs count).
        self.written = 0
        #: The signal a fault asks the process to die of.
        self.kill_signal: int | None = None

    @classmethod
    def from_cassette(
        cls,
        cassette: Cassette,
        options: ReplayOptions | None = None,
        *,
        cwd: str | None = None,
        spec: VolatileSpec | None = None,
    ) -> ReplayEngine:
        """An engine for ``cassette`` with paths mapped to this process's cwd/home."""
        paths = live_paths(os.environ, cwd or os.getcwd())
        return cls(compile_script(cassette, live_paths=paths, spec=spec), options)

    # -- the loop --------------------------------------------------------------

    def run(
        self, stdin: int = 0, stdout: int = 1, stderr: int = 2, *, wait_eof: bool = True
    ) -> int:
        """Replay until the host closes stdin (or diverges); returns the exit code.

        ``wait_eof`` False ends as soon as the recording is exhausted, as a CLI
        started without stream-json input does.
        """
        matcher = self.matcher
        splitter = LineSplitter()
        self._terminals = frozenset(fd for fd in (stdout, stderr) if os.isatty(fd))
        speed = self.options.speed
        anchor_rec, anchor_wall = 0, time.monotonic()
        eof = False
        last_input = time.monotonic()
        try:
            if not wait_eof and matcher.argv_changes:
                return self._diverge(matcher.argv_divergence(), None, stdout, stderr)
            self._fire(self.faults.due(0, next_line=False), stdout, stderr, None)
            while True:
                timeout: float | None = None
                if speed is None:
                    batch = matcher.pop_ready()
                    if batch:
                        self._write(batch, stdout, stderr)
                else:
                    while matcher.ready():
                        line = matcher.next_output()
                        assert line is not None
                        due = anchor_wall + (line.t_ns - anchor_rec) / 1e9 / speed
                        now = time.monotonic()
                        if due > now:
                            timeout = due - now
                            break
                        self._write(matcher.pop_ready(1), stdout, stderr)
                        anchor_rec, anchor_wall = line.t_ns, max(due, anchor_wall)
                if matcher.done_output and self.faults:
                    self._fire(self.faults.remaining(), stdout, stderr, None)
                if matcher.done_output and (
                    eof or not wait_eof or (self.script.died and not matcher.owed_input())
                ):
                    # A CLI that was killed or failed is gone without waiting for the host.
                    return self._finish(stdout, stderr)
                if eof:
                    if not matcher.done_input:
                        return self._finish(stdout, stderr)
                    if timeout is not None:
                        time.sleep(timeout)
                    continue
                stall = self._stall_timeout(last_input)
                if stall is not None and (timeout is None or stall < timeout):
                    timeout = stall
                if timeout is not None:
                    readable, _, _ = select.select([stdin], [], [], max(timeout, 0.0))
                    if not readable:
                        if self._stalled(last_input):
                            forced = matcher.force_next()
                            if forced is not None:
                                self._write([forced], stdout, stderr)
                            # The next suspected race gets its own grace period.
                            last_input = time.monotonic()
                        continue
                chunk = os.read(stdin, _CHUNK)
                now = time.monotonic()
                last_input = now
                if not chunk:
                    eof = True
                    lines = []
                    rest = splitter.finish()
                    if rest is not None:
                        lines.append((rest, False))
                else:
                    lines = [(line, True) for line in splitter.feed(chunk)]
                for data, eol in lines:
                    event = Event(seq=0, direction="in", t_ns=0, data=data, eol=eol)
                    divergence = matcher.offer(event)
                    if divergence is not None:
                        return self._diverge(divergence, event, stdout, stderr)
                    if speed is not None and matcher.last_input_t_ns > anchor_rec:
                        # Recorded gaps after an input count from its live arrival.
                        anchor_rec, anchor_wall = matcher.last_input_t_ns, now
        except BrokenPipeError:
            # The host stopped reading: nothing more can be delivered.
            return self._finish(None, stderr)
        except _Stop as stop:
            self.kill_signal = stop.signal
            return stop.code
        except _Hang:
            return self._hang(stdin)

    def _hang(self, stdin: int) -> int:
        """Say nothing more; swallow the host's input until it gives up."""
        with contextlib.suppress(OSError):
            while os.read(stdin, _CHUNK):
                pass
        return 1

    def _fire(
        self, faults: list[Fault], stdout: int, stderr: int, next_line: OutputLine | None
    ) -> None:
        """Inject ``faults`` before ``next_line`` (None: at the end of the recording)."""
        for fault in faults:
            if fault.kind == "stderr":
                self._emit(stderr, f"{fault.value}\n".encode("utf-8", "surrogateescape"))
            elif fault.kind == "garbage":
                self._emit(stdout, GARBAGE)
            elif fault.kind == "delay":
                time.sleep(float(fault.value or 0))
            elif fault.kind == "crash":
                self._emit(
                    stderr,
                    f"claudetrace replay: injected crash after {self.written} line(s)\n".encode(),
                )
                raise _Stop(1)
            elif fault.kind == "exit":
                raise _Stop(int(fault.value or 0))
            elif fault.kind == "signal":
                number = int(fault.value or 0)
                raise _Stop(128 + number, number)
            elif fault.kind == "truncate":
                if next_line is not None:
                    data = self.matcher.render(next_line).rstrip(b"\n")
                    self._emit(stdout, data[: max(1, len(data) // 2)])
                raise _Stop(1)
            elif fault.kind == "hang":
                raise _Hang

    def _stall_timeout(self, last_input: float) -> float | None:
        """Seconds until a suspected recording race is resolved (None: no race)."""
        if not self._race_suspected():
            return None
        return max(0.0, last_input + self.options.stall_seconds - time.monotonic())

    def _stalled(self, last_input: float) -> bool:
        return (
            self._race_suspected() and time.monotonic() - last_input >= self.options.stall_seconds
        )

    def _race_suspected(self) -> bool:
        blocker = self.matcher.blocker()
        line = self.matcher.next_output()
        if blocker is None or line is None or not self.matcher.can_force(line):
            return False
        return line.t_ns - blocker.event.t_ns <= RACE_WINDOW_NS

    def _emit(self, fd: int, data: bytes) -> None:
        """Write ``data`` to ``fd``: exactly, as the host must get it, unless ``fd``
        is a terminal, which gets it through :func:`~claudetrace.display.visible_lines`
        (recorded stderr and C1 or bidi controls in JSON must not drive it)."""
        if fd in self._terminals:
            data = visible_lines(data.decode("utf-8", "surrogateescape")).encode("utf-8")
        _write_all(fd, data)

    def _write(self, lines: list[OutputLine], stdout: int, stderr: int) -> None:
        if self.faults:
            for line in lines:
                if not line.stderr:
                    self._fire(self.faults.due(self.written), stdout, stderr, line)
                self._emit(stderr if line.stderr else stdout, self.matcher.render(line))
                self.released += 1
                if not line.stderr:
                    self.written += 1
                    # Fire at once, not when a next line happens to come.
                    self._fire(self.faults.due(self.written, next_line=False), stdout, stderr, None)
            return
        self.written += sum(1 for line in lines if not line.stderr)
        render = self.matcher.render
        run: list[bytes] = []
        run_err = False
        for line in lines:
            if line.stderr != run_err and run:
                self._emit(stderr if run_err else stdout, b"".join(run))
                run = []
            run_err = line.stderr
            run.append(render(line))
        if run:
            self._emit(stderr if run_err else stdout, b"".join(run))
        self.released += len(lines)

    def _finish(self, stdout: int | None, stderr: int) -> int:
        divergence = self.matcher.finish()
        if divergence is None:
            return self.script.exit_code
        self.divergence = divergence
        self._report(divergence, stderr)
        if stdout is not None:
            with contextlib.suppress(BrokenPipeError):
                self._emit(stdout, self._result(divergence) + b"\n")
        return divergence.exit_code

    def _diverge(
        self, divergence: Divergence, event: Event | None, stdout: int, stderr: int
    ) -> int:
        self.divergence = divergence
        self._report(divergence, stderr)
        out = []
        msg = event.message if event is not None else None
        if msg is not None and msg.get("type") == "control_request":
            request_id = msg.get("request_id")
            if isinstance(request_id, str):
                out.append(error_response(request_id, divergence.render()) + b"\n")
        out.append(self._result(divergence) + b"\n")
        with contextlib.suppress(BrokenPipeError):
            self._emit(stdout, b"".join(out))
        return divergence.exit_code

    def _result(self, divergence: Divergence) -> bytes:
        return divergence.result_line(self.script.session_id, max(self.matcher.turns, 1))

    def _report(self, divergence: Divergence, stderr: int) -> None:
        with contextlib.suppress(BrokenPipeError):
            self._emit(stderr, (divergence.render() + "\n").encode("utf-8", "replace"))
        if self.options.report_path:
            text = json.dumps(divergence.to_json(), indent=2, ensure_ascii=False) + "\n"
            try:
                # Beside it and renamed: never half a report (a full disk, a signal).
                replace_file(self.options.report_path, lambda out: out.write(text), mode=0o666)
            except OSError as exc:
                # The host still gets its error result and the divergence's exit code.
                line = (f"claudetrace replay: cannot write the report "
                        f"{visible(str(self.options.report_path))}: {exc.strerror or exc}\n")
                with contextlib.suppress(BrokenPipeError):
                    self._emit(stderr, line.encode("utf-8", "replace"))


def live_redactor(header: dict[str, object], extra: Sequence[str] = ()) -> Callable[[bytes], bytes]:
    """What hides secrets in live host lines the way the cassette's were hidden."""
    return live_sanitizer(header, extra).line


def live_sanitizer(header: dict[str, object], extra: Sequence[str] = ()) -> Sanitizer:
    """The record-time sanitiser's secret redaction, for what the live host sends.

    The built-in secret shapes, the values of this process's secret-looking
    environment variables (the host's, which the fake CLI inherits) and the
    patterns named in the header's ``redact`` field or in ``extra``.  Paths are
    left alone: the replay maps recorded paths to live ones instead.
    """
    from ..redact import secret_values
    from ..sanitize import Sanitizer

    recorded = header.get("redact")
    patterns = [p for p in recorded if isinstance(p, str)] if isinstance(recorded, list) else []
    compiled = tuple(linear_regex(p) for p in (*patterns, *extra))
    return Sanitizer(literals=tuple(secret_values(os.environ)), patterns=compiled)


def linear_regex(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (:func:`claudetrace.pattern.linear_regex`), a
    :class:`ReplayError` if RE2 cannot take it."""
    from ..pattern import BadPattern
    from ..pattern import linear_regex as compile_linear

    try:
        return compile_linear(pattern, what="redaction pattern")
    except BadPattern as exc:
        raise ReplayError(str(exc)) from None


#: Signals whose default action stops the process or does nothing: a fake CLI
#: dying "of" one would stay alive, and its host wait for ever.
_NOT_ENDING: Final = frozenset(
    getattr(signal, name) for name in ("SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGCONT",
                                       "SIGCHLD", "SIGURG", "SIGWINCH") if hasattr(signal, name))


def check_header(header: dict[str, Any]) -> None:
    """Refuse, in one line, a header the replay cannot act on: a ``signal``
    that is not one of this system's or would not end the fake CLI, a
    ``redact`` pattern that does not compile."""
    sig = header.get("signal")
    if sig is not None and sig != 0:
        if not isinstance(sig, int) or isinstance(sig, bool):
            raise ReplayError(f"the cassette's signal {sig!r} is not a signal number")
        try:
            name = signal.Signals(sig).name
        except ValueError:
            raise ReplayError(
                f"the cassette's signal {sig} is not a signal of this system") from None
        if sig in _NOT_ENDING:
            raise ReplayError(f"the cassette's signal {sig} ({name}) would not end the fake CLI "
                              "(it stops or is ignored), and its host would wait for ever")
    live_sanitizer(header)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def run_replay(
    source: str,
    cli_args: Sequence[str],
    *,
    db: str | None = None,
    options: ReplayOptions | None = None,
) -> int:
    """What ``claudetrace replay`` does: answer ``-v`` or serve a host; the exit code."""
    cassette = load_source(source, db)
    check_header(cassette.header)
    options = options or ReplayOptions()
    if options.source_label is None:
        options.source_label = source
    if options.rerecord is None:
        options.rerecord = _rerecord_hint(cassette)
    engine = ReplayEngine.from_cassette(cassette, options, spec=options.spec)
    script = engine.script
    if ("-v" in cli_args or "--version" in cli_args) and "--output-format" not in cli_args:
        for_terminal(sys.stdout).write(version_text(script) + "\n")
        sys.stdout.flush()
        return 0
    recorded = [script.paths.text(arg) for arg in script.argv[1:]]
    if options.match_argv and script.argv:
        engine.matcher.argv_changes = _argv_changes(engine, script, list(cli_args), options)
    drift = argv_drift(recorded, list(cli_args))
    if drift and script.argv and not engine.matcher.argv_changes:
        sys.stderr.write(
            "claudetrace replay: warning: CLI arguments differ from the recording: "
            + visible("; ".join(drift))
            + "\n"
        )
        sys.stderr.flush()
    wait_eof = _streams_input(cli_args) or bool(script.inputs)
    sys.stdout.flush()
    code = engine.run(0, 1, 2, wait_eof=wait_eof)
    if engine.kill_signal is not None:
        _die_of(engine.kill_signal)
    elif engine.divergence is None and script.signal:
        # Die as the recorded CLI died, so the host sees the same end.
        _die_of(script.signal)
    return code


def _die_of(number: int) -> None:
    """Kill this process with signal ``number`` (its default action, not a handler)."""
    with contextlib.suppress(OSError, ValueError):
        signal.signal(number, signal.SIG_DFL)
    sys.stdout.flush()
    os.kill(os.getpid(), number)
    # A signal whose default action is to be ignored leaves us running: exit as
    # a shell reports a death by that signal.
    time.sleep(0.05)


def _argv_changes(
    engine: ReplayEngine, script: Script, live: list[str], options: ReplayOptions
) -> list[Change]:
    """Behaviour-changing options that differ, compared as the recording was saved.

    The recorded argv had its secrets hidden (``--api-key X``, key shapes, the
    sanitiser's patterns); the live one is compared as sent and, if that
    differs, after the same redaction, which is also what a report shows.
    """
    from ..redact import redact_argv

    def compare(args: list[str]) -> list[Change]:
        return argv_changes(
            script.argv[1:], args, ignore=options.ignore_argv, map_path=script.paths.text
        )

    changes = compare(live)
    if changes:
        changes = compare([engine.sanitizer.text(arg) for arg in redact_argv(live)])
    return changes


def _streams_input(cli_args: Sequence[str]) -> bool:
    args = list(cli_args)
    for i, arg in enumerate(args):
        if arg == "--input-format" and i + 1 < len(args):
            return args[i + 1] == "stream-json"
        if arg == "--input-format=stream-json":
            return True
    return False


def _rerecord_hint(cassette: Cassette) -> str:
    hint = cassette.header.get("rerecord")
    if isinstance(hint, str) and hint:
        return hint
    return (
        "run the host again against the real CLI through `claudetrace proxy -- claude …` "
        "(or its pytest test with --claude-record-mode=rewrite) and export the new recording"
    )


__all__ = [
    "CassetteError",
    "CassetteMissing",
    "ReplayEngine",
    "ReplayOptions",
    "argv_drift",
    "load_source",
    "run_replay",
    "version_text",
]
