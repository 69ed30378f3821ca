"""Causal matching of a live host against a recording (pure: no processes, no I/O).

A recording is compiled into a :class:`Script`: its ``in`` lines (what the host
sent) become templates grouped in correlation *lanes*, its ``out`` and ``err``
lines become ready-to-write bytes.  A :class:`Matcher` then follows one live run:

- each live host line is matched against the next unmatched recorded line of its
  lane (strict order inside a lane, free interleaving between lanes, so the Nth
  identical message matches the Nth recorded one);
- recorded output is released in recorded order, each line once every recorded
  input that preceded it has been matched — causality, not a single cursor;
- host-generated ids are bound to their live values on first sight and
  substituted in everything released afterwards.

Lanes: a response to a CLI request is in the lane of that request's id (this
covers control, permission, hook callback and MCP JSON-RPC round trips, whose ids
ride in the request id); a host control request is in the lane of its subtype; user
messages share one lane; anything else is in the lane of its type.

Recordings are taken by two threads, so a host response can be stamped a hair
before the request it answers; such a response gates output only from its request
on, which keeps matching free of cycles.
"""

from __future__ import annotations

import bisect
import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..cassette import Cassette
from ..model.events import Event, LineFields
from .normalize import Bindings, Change, PathMap, Templater, VolatileSpec, substitution_regex, unify
from .report import (
    MAX_CANDIDATES,
    MAX_NEXT,
    Candidate,
    Divergence,
    DivergenceKind,
    Upcoming,
    lane_name,
    summarize,
)
from .rules import MatchRules

Lane = tuple[str, ...]

USER_LANE: Final[Lane] = ("user",)

#: A host line stamped at most this long before an answer it may have waited for
#: is treated as sent after it (the recorder sees the two streams from two threads).
RACE_WINDOW_NS: Final = 5_000_000

#: At most this many pending inputs are compared when listing candidates.
_CANDIDATE_SCAN: Final = 200


def lane_of(fields: LineFields) -> Lane:
    """The correlation lane of a host line."""
    if not fields.is_json:
        return ("text",)
    kind = fields.type or "?"
    if kind == "control_response":
        return ("response", fields.request_id or "?")
    if kind == "control_request":
        return ("control", fields.subtype or "?")
    if kind == "user":
        return USER_LANE
    return (kind,)


@dataclass(slots=True)
class RecordedInput:
    """One recorded host line, compiled for matching."""

    pos: int
    event: Event
    lane: Lane
    template: Any
    gate: int
    turn: int
    markers: tuple[int, ...]


@dataclass(slots=True)
class OutputLine:
    """One recorded CLI line (stdout or stderr), ready to write."""

    pos: int
    seq: int
    t_ns: int
    stderr: bool
    data: bytes
    substitute: bool


@dataclass
class Script:
    """A recording compiled for replay (immutable once built; share it freely)."""

    events: list[Event]
    inputs: list[RecordedInput]
    outputs: list[OutputLine]
    by_gate: list[int]
    values: list[str]
    subst_regex: Any
    header: dict[str, Any]
    session_id: str | None
    version: str | None
    paths: PathMap

    @property
    def argv(self) -> list[str]:
        argv = self.header.get("argv")
        return [str(a) for a in argv] if isinstance(argv, list) else []

    @property
    def signal(self) -> int | None:
        """The signal that ended the recorded CLI, if one did."""
        sig = self.header.get("signal")
        return sig if isinstance(sig, int) and not isinstance(sig, bool) and sig > 0 else None

    @property
    def exit_code(self) -> int:
        code = self.header.get("exit_code")
        return code if isinstance(code, int) and not isinstance(code, bool) else 0

    @property
    def died(self) -> bool:
        """The recorded CLI ended on its own accord: killed, or a failing exit status."""
        return self.signal is not None or self.exit_code != 0


_HOME_HINT: Final = re.compile(rb'"(/[^"\\]*?)/\.claude/')


def _recorded_paths(cassette: Cassette) -> dict[str, str | None]:
    """The recording's working and home directories: from the header, else the stream.

    The CLI names its cwd in ``system/init`` and paths under ``~/.claude/`` in
    several lines (transcript paths, memory and output-style folders).
    """
    header = cassette.header
    cwd = header.get("cwd") if isinstance(header.get("cwd"), str) else None
    home = header.get("home") if isinstance(header.get("home"), str) else None
    for event in cassette.events:
        if cwd is not None and home is not None:
            break
        if event.direction != "out":
            continue
        if cwd is None and b'"init"' in event.data:
            msg = event.message
            if msg and msg.get("type") == "system" and isinstance(msg.get("cwd"), str):
                cwd = msg["cwd"]
        if home is None and b"/.claude/" in event.data:
            found = _HOME_HINT.search(event.data)
            if found:
                home = found.group(1).decode("utf-8", errors="replace")
    return {"cwd": cwd, "home": home}


def compile_script(
    cassette: Cassette,
    *,
    live_paths: dict[str, str] | None = None,
    spec: VolatileSpec | None = None,
) -> Script:
    """Compile a cassette for replay; ``live_paths`` maps its cwd/home to live ones."""
    events = cassette.events
    paths = PathMap.build(_recorded_paths(cassette), live_paths or {})
    templater = Templater(spec, paths)
    for event in events:
        if event.direction == "in" and event.fields.is_json:
            templater.collect(event.obj)
    values = list(templater.values)
    subst_regex = substitution_regex(templater.substitutable())
    path_bytes = paths.bytes_replacer()

    outputs: list[OutputLine] = []
    request_pos: dict[str, int] = {}
    answers: list[tuple[int, int, str | None]] = []
    session_id: str | None = None
    version = cassette.header.get("claude_code_version")
    version = version if isinstance(version, str) else None
    for pos, event in enumerate(events):
        if event.direction == "in":
            continue
        data = event.data
        if event.direction == "out":
            # Parse only the few lines whose fields matter here: output can be
            # large and most of it is streamed deltas.
            if b'"control_request"' in data and event.fields.type == "control_request":
                if event.fields.request_id:
                    request_pos.setdefault(event.fields.request_id, pos)
            elif b'"control_response"' in data and event.fields.type == "control_response":
                answers.append((pos, event.t_ns, event.fields.request_id))
            elif b'"result"' in data and event.fields.type == "result":
                answers.append((pos, event.t_ns, None))
            elif (session_id is None or version is None) and b'"init"' in data:
                msg = event.message
                if msg and msg.get("type") == "system" and msg.get("subtype") == "init":
                    sid, ver = msg.get("session_id"), msg.get("claude_code_version")
                    session_id = session_id or (sid if isinstance(sid, str) else None)
                    version = version or (ver if isinstance(ver, str) else None)
        if path_bytes is not None:
            data = _map_bytes(data, *path_bytes)
        outputs.append(
            OutputLine(
                pos=pos,
                seq=event.seq,
                t_ns=event.t_ns,
                stderr=event.direction == "err",
                data=data + b"\n" if event.eol else data,
                substitute=subst_regex is not None and subst_regex.search(data) is not None,
            )
        )

    inputs: list[RecordedInput] = []
    turn = 0
    for pos, event in enumerate(events):
        if event.direction != "in":
            continue
        fields = event.fields
        lane = lane_of(fields)
        if lane == USER_LANE:
            turn += 1
        gate = pos
        if lane[0] == "response":
            gate = max(pos, request_pos.get(lane[1], pos))
        if fields.is_json:
            template = templater.template(event.obj)
        else:
            template = paths.text(event.text) if paths else event.text
        inputs.append(
            RecordedInput(
                pos=pos,
                event=event,
                lane=lane,
                template=template,
                gate=gate,
                turn=turn,
                markers=tuple(sorted(_markers(template))),
            )
        )
    _defer_raced_inputs(inputs, answers)
    by_gate = sorted(range(len(inputs)), key=lambda i: (inputs[i].gate, inputs[i].pos))
    return Script(
        events=events,
        inputs=inputs,
        outputs=outputs,
        by_gate=by_gate,
        values=values,
        subst_regex=subst_regex,
        header=cassette.header,
        session_id=session_id,
        version=version,
        paths=paths,
    )


def _defer_raced_inputs(
    inputs: list[RecordedInput], answers: list[tuple[int, int, str | None]]
) -> None:
    """Let an answer the host waits for go out before host lines stamped just before it.

    A host sends its next line only after the answer it waits for (the response
    to its control request, the turn's ``result``); when the recorder stamped that
    line a hair before the answer, honouring the recorded order would make both
    sides wait for each other.  Such lines gate output only from the answer on.
    """
    if not inputs or not answers:
        return
    positions = [rec.pos for rec in inputs]
    host_request_pos = {
        rec.event.fields.request_id: rec.pos
        for rec in inputs
        if rec.lane[0] == "control" and rec.event.fields.request_id
    }
    for pos, t_ns, request_id in answers:
        floor = -1
        if request_id is not None:
            if request_id not in host_request_pos:
                continue
            floor = host_request_pos[request_id]
        before = bisect.bisect_left(positions, pos)
        index = before - 1
        while index >= 0:
            rec = inputs[index]
            if rec.pos <= floor or t_ns - rec.event.t_ns > RACE_WINDOW_NS:
                break
            # A line that raced the answer is stamped just before it, with no CLI
            # output in between; output in between answered the line (a turn's
            # prompt and its result), or another answer preceded it.
            if pos - rec.pos - 1 > before - 1 - index:
                break
            rec.gate = max(rec.gate, pos)
            index -= 1


def _map_bytes(data: bytes, pattern: re.Pattern[bytes], table: dict[bytes, bytes]) -> bytes:
    return pattern.sub(lambda m: table[m.group()], data)


def _markers(template: Any) -> set[int]:
    from .normalize import Volatile

    found: set[int] = set()
    stack = [template]
    while stack:
        value = stack.pop()
        if isinstance(value, Volatile):
            found.add(value.index)
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return found


class Matcher:
    """The state of one live replay of a :class:`Script`."""

    def __init__(
        self,
        script: Script,
        *,
        source: str | None = None,
        rerecord: str | None = None,
        rules: MatchRules | None = None,
        redact: Callable[[bytes], bytes] | None = None,
        argv: Sequence[Change] = (),
    ):
        self.script = script
        self.source = source
        self.rerecord = rerecord
        self.rules = rules if rules else None
        self._path_rules = self.rules if self.rules and self.rules.has_path_rules else None
        self.redact = redact
        #: Behaviour-changing CLI options that differ: reported at the host's first line.
        self.argv_changes = list(argv)
        #: Set when recorded input the host can no longer send is not to be reported
        #: (a fault was injected, so the host stopped early on purpose).
        self.lenient = False
        self.bindings = Bindings()
        self._matched = [False] * len(script.inputs)
        self._lanes: dict[Lane, deque[int]] = {}
        for index, rec in enumerate(script.inputs):
            self._lanes.setdefault(rec.lane, deque()).append(index)
        self._gate = 0  # index into script.by_gate of the first unmatched input
        self._next_out = 0
        self._live_count = 0
        self.turns = 0
        self._table: dict[bytes, bytes] = {}
        #: Recorded time of the latest matched input (for recorded-gap timing).
        self.last_input_t_ns = 0

    # -- host lines ----------------------------------------------------------

    def offer(self, event: Event) -> Divergence | None:
        """Match one live host line; ``None`` on success, else the divergence."""
        self._live_count += 1
        if self.argv_changes:
            return self.argv_divergence(self.redacted(event))
        lane = lane_of(event.fields)
        queue = self._lanes.get(lane)
        if not queue:
            return self._unmatched(self.redacted(event), lane, None, [])
        index = queue[0]
        rec = self.script.inputs[index]
        if event.data == rec.event.data and not self.script.paths and self._bound_to_self(rec):
            fresh = {i: self.script.values[i] for i in rec.markers if i not in self.bindings.live}
        else:
            changes, fresh = self._compare(rec, event)
            shown = event
            if changes:
                # The cassette was sanitised when saved: compare what the host
                # sent after the same redaction (and never show the secret).
                shown = self.redacted(event)
                if shown is not event:
                    changes, fresh = self._compare(rec, shown)
            reason = None
            if changes and self.rules is not None and self.rules.matcher is not None:
                accepted, reason = self.rules.accepts(rec.event.obj, shown.obj)
                if accepted:
                    changes = []
            if changes:
                return self._unmatched(shown, lane, index, changes, reason)
        for marker, value in fresh.items():
            self.bindings.bind(marker, value)
            self._table[self.script.values[marker].encode()] = value.encode()
        queue.popleft()
        self._matched[index] = True
        self.last_input_t_ns = rec.event.t_ns
        if lane == USER_LANE:
            self.turns += 1
        by_gate, matched = self.script.by_gate, self._matched
        while self._gate < len(by_gate) and matched[by_gate[self._gate]]:
            self._gate += 1
        return None

    def _compare(self, rec: RecordedInput, event: Event) -> tuple[list[Change], dict[int, str]]:
        actual = event.obj if event.fields.is_json else event.text
        return unify(rec.template, actual, self.bindings, self._path_rules)

    def redacted(self, event: Event) -> Event:
        """``event`` after the cassette's redaction (itself when nothing is hidden)."""
        if self.redact is None:
            return event
        data = self.redact(event.data)
        if data == event.data:
            return event
        return Event(event.seq, event.direction, event.t_ns, data, event.eol)

    def argv_divergence(self, event: Event | None = None) -> Divergence:
        """The divergence for behaviour-changing CLI options that differ."""
        changes, self.argv_changes = self.argv_changes, []
        options = ", ".join(c.path.removeprefix("argv ") for c in changes)
        return Divergence(
            kind=DivergenceKind.ARGV_MISMATCH,
            message=f"the host started the CLI with different options: {options}",
            lane="argv",
            live_line=event.text if event is not None else None,
            live_index=self._live_count if event is not None else None,
            changes=changes,
            rerecord=self.rerecord,
            source=self.source,
        )

    def _bound_to_self(self, rec: RecordedInput) -> bool:
        values = self.script.values
        return all(self.bindings.live.get(i, values[i]) == values[i] for i in rec.markers)

    # -- output --------------------------------------------------------------

    def ready(self) -> bool:
        """Whether the next recorded output line may be released now."""
        outputs = self.script.outputs
        if self._next_out >= len(outputs):
            return False
        if self._gate >= len(self.script.by_gate):
            return True
        blocker = self.script.inputs[self.script.by_gate[self._gate]]
        # A response gates output only from its request on (see compile_script).
        return outputs[self._next_out].pos <= blocker.gate

    def pop_ready(self, limit: int | None = None) -> list[OutputLine]:
        """Release the output lines that are ready (at most ``limit``)."""
        outputs = self.script.outputs
        start = self._next_out
        end = len(outputs) if limit is None else min(len(outputs), start + limit)
        if self._gate < len(self.script.by_gate):
            gate = self.script.inputs[self.script.by_gate[self._gate]].gate
            stop = start
            while stop < end and outputs[stop].pos <= gate:
                stop += 1
            end = stop
        self._next_out = end
        return outputs[start:end]

    def force_next(self) -> OutputLine | None:
        """Release the next output line regardless of the inputs it waits for."""
        if self._next_out >= len(self.script.outputs):
            return None
        line = self.script.outputs[self._next_out]
        self._next_out += 1
        return line

    def can_force(self, line: OutputLine) -> bool:
        """Whether ``line`` may go out early: it names no host id still unbound."""
        if not line.substitute:
            return True
        table = self._table
        return all(m.group() in table for m in self.script.subst_regex.finditer(line.data))

    def render(self, line: OutputLine) -> bytes:
        """The bytes to write for ``line``, with bound ids replaced by live ones."""
        if not line.substitute or not self._table:
            return line.data
        table = self._table
        return self.script.subst_regex.sub(  # type: ignore[no-any-return]
            lambda m: table.get(m.group(), m.group()), line.data
        )

    @property
    def done_output(self) -> bool:
        """Every recorded output line has been released."""
        return self._next_out >= len(self.script.outputs)

    @property
    def done_input(self) -> bool:
        """Every recorded input line has been matched."""
        return self._gate >= len(self.script.by_gate)

    def owed_input(self) -> bool:
        """Whether recorded input sent before the recording's last output is still unmatched."""
        last = self.script.outputs[-1].pos if self.script.outputs else -1
        inputs, matched = self.script.inputs, self._matched
        return any(not matched[i] and inputs[i].pos < last for i in range(len(inputs)))

    def blocker(self) -> RecordedInput | None:
        """The unmatched recorded input holding back the next output line."""
        if self.done_output or self.ready() or self.done_input:
            return None
        return self.script.inputs[self.script.by_gate[self._gate]]

    def next_output(self) -> OutputLine | None:
        """The next output line not yet released."""
        outputs = self.script.outputs
        return outputs[self._next_out] if self._next_out < len(outputs) else None

    # -- end of input ----------------------------------------------------------

    def finish(self) -> Divergence | None:
        """The host closed stdin: report recorded input it never sent, if any."""
        if self.argv_changes:
            return self.argv_divergence()
        if self.lenient:
            return None
        pending = [rec for rec, ok in zip(self.script.inputs, self._matched, strict=True) if not ok]
        if self.script.died:
            # Sent to a CLI that had already died: a host that saw it die sooner,
            # as it does on replay, cannot send them.
            last = self.script.outputs[-1].pos if self.script.outputs else -1
            pending = [rec for rec in pending if rec.pos < last]
        if not pending:
            return None
        first = pending[0]
        return Divergence(
            kind=DivergenceKind.INPUT_NEVER_SENT,
            message=(
                f"the host closed its input with {len(pending)} recorded line(s) never sent, "
                f"first at seq {first.event.seq} (lane {lane_name(first.lane)})"
            ),
            turn=first.turn,
            lane=lane_name(first.lane),
            seq=first.event.seq,
            expected=first.template,
            pending=[
                Upcoming(r.event.seq, "in", summarize(r.event.data)) for r in pending[:MAX_NEXT]
            ],
            upcoming=self._upcoming(first.pos),
            rerecord=self.rerecord,
            source=self.source,
        )

    # -- reports -------------------------------------------------------------

    def _unmatched(
        self,
        event: Event,
        lane: Lane,
        index: int | None,
        changes: list[Change],
        reason: str | None = None,
    ) -> Divergence:
        pending_any = not self.done_input
        if index is None and not pending_any:
            kind = DivergenceKind.RECORDING_EXHAUSTED
            message = "the host sent a line after the recording's last input"
        elif index is None:
            kind = DivergenceKind.UNMATCHED_MESSAGE
            message = f"no recorded input left in lane {lane_name(lane)}"
        else:
            kind = DivergenceKind.UNMATCHED_MESSAGE
            rec = self.script.inputs[index]
            message = (
                f"host line differs from recorded seq {rec.event.seq} "
                f"({len(changes)} difference(s), first at {changes[0].path})"
            )
            if reason:
                message += f"; {reason}"
        rec_or_none = self.script.inputs[index] if index is not None else None
        return Divergence(
            kind=kind,
            message=message,
            turn=rec_or_none.turn if rec_or_none else self.turns,
            lane=lane_name(lane),
            seq=rec_or_none.event.seq if rec_or_none else None,
            live_line=event.text,
            live_index=self._live_count,
            expected=rec_or_none.template if rec_or_none else None,
            changes=changes,
            candidates=self._candidates(event, index),
            upcoming=self._upcoming(rec_or_none.pos if rec_or_none else None),
            rerecord=self.rerecord,
            source=self.source,
        )

    def _candidates(self, event: Event, skip: int | None) -> list[Candidate]:
        """Recorded inputs still pending, nearest (fewest differences) first.

        Only inputs of the live line's lane are listed, or, when its lane has
        none pending, inputs of the same message type and subtype that differ in
        more than the request id; each says why it did not match (its
        differences, or the input its lane must receive first).
        """
        actual = event.obj if event.fields.is_json else event.text
        fields = event.fields
        inputs = self.script.inputs
        pending = [i for i, ok in enumerate(self._matched) if not ok and i != skip]
        lane = lane_of(fields)
        pool = [i for i in pending if inputs[i].lane == lane] or [
            i
            for i in pending
            if inputs[i].event.fields.type == fields.type
            and inputs[i].event.fields.subtype == fields.subtype
        ]
        scored: list[tuple[int, Candidate]] = []
        for index in pool[:_CANDIDATE_SCAN]:
            rec = inputs[index]
            changes, _ = unify(rec.template, actual, self.bindings, self._path_rules)
            if changes and all(c.path.endswith(".request_id") for c in changes):
                # Another round trip's answer: the same words for another request.
                continue
            head = self._lanes[rec.lane][0]
            if changes:
                reason = changes[0].describe()
                if len(changes) > 1:
                    reason += f" (+{len(changes) - 1} more)"
            elif head != index:
                reason = (
                    f"identical, but its lane {lane_name(rec.lane)} first expects "
                    f"seq {self.script.inputs[head].event.seq}"
                )
            else:
                reason = "identical, in another lane"
            scored.append(
                (
                    len(changes),
                    Candidate(rec.event.seq, lane_name(rec.lane), rec.turn, tuple(changes), reason),
                )
            )
        scored.sort(key=lambda item: (item[0], item[1].seq))
        return [cand for _, cand in scored[:MAX_CANDIDATES]]

    def _upcoming(self, pos: int | None) -> list[Upcoming]:
        """What the recording would have sent next (from the output cursor)."""
        out: list[Upcoming] = []
        outputs: Sequence[OutputLine] = self.script.outputs
        for line in outputs[self._next_out :]:
            if pos is not None and line.pos < pos:
                continue
            out.append(
                Upcoming(
                    line.seq, "err" if line.stderr else "out", summarize(line.data.rstrip(b"\n"))
                )
            )
            if len(out) >= MAX_NEXT:
                break
        return out
