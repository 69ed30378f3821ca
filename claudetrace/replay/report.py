"""Divergence reports: what the host sent, what the recording expected, and why.

A :class:`Divergence` is pure data built by the matcher; this module renders it
as text for stderr, as JSON for ``--report``, and as the error ``result`` line the
fake CLI sends so that the host fails at once instead of waiting out a timeout.

The kinds and the exit codes the replay command uses for them:

============================  ====  ==================================================
kind                          exit  meaning
============================  ====  ==================================================
``cassette-missing``          80    the SOURCE cassette or recording does not exist
``unmatched-message``         81    the host sent a line that differs from the recording
``recording-exhausted``       82    the host sent a line after the recording's last input
``input-never-sent``          83    the host closed stdin before sending recorded input
``argv-mismatch``             84    a CLI option that changes behaviour differs from the
                                    recording (``--model``, ``--mcp-config`` servers …)
============================  ====  ==================================================
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final

from ..display import visible
from .normalize import Change, describe_change, plain


class DivergenceKind(str, Enum):
    """Why a replay stopped matching its recording."""

    CASSETTE_MISSING = "cassette-missing"
    UNMATCHED_MESSAGE = "unmatched-message"
    RECORDING_EXHAUSTED = "recording-exhausted"
    INPUT_NEVER_SENT = "input-never-sent"
    ARGV_MISMATCH = "argv-mismatch"

    @property
    def exit_code(self) -> int:
        """The replay command's exit status for this kind."""
        return EXIT_CODES[self]


EXIT_CODES: Final = {
    DivergenceKind.CASSETTE_MISSING: 80,
    DivergenceKind.UNMATCHED_MESSAGE: 81,
    DivergenceKind.RECORDING_EXHAUSTED: 82,
    DivergenceKind.INPUT_NEVER_SENT: 83,
    DivergenceKind.ARGV_MISMATCH: 84,
}

#: How many nearest candidates and upcoming lines a report lists.
MAX_CANDIDATES: Final = 3
MAX_NEXT: Final = 5
MAX_CHANGES: Final = 20


def lane_name(lane: tuple[str, ...]) -> str:
    """A lane key as text, e.g. ``control:initialize`` or ``response:48e8…``."""
    return ":".join(lane)


@dataclass(frozen=True)
class Candidate:
    """A recorded input the live line was compared with, and why it failed."""

    seq: int
    lane: str
    turn: int
    changes: tuple[Change, ...]
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "lane": self.lane,
            "turn": self.turn,
            "reason": self.reason,
            "diff": [c.to_json() for c in self.changes[:MAX_CHANGES]],
        }


@dataclass(frozen=True)
class Upcoming:
    """A recorded line that would have come next."""

    seq: int
    direction: str
    summary: str


@dataclass
class Divergence:
    """Everything known about one divergence, ready to render."""

    kind: DivergenceKind
    message: str
    turn: int = 0
    lane: str | None = None
    seq: int | None = None
    live_line: str | None = None
    live_index: int | None = None
    expected: Any = None
    changes: list[Change] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    upcoming: list[Upcoming] = field(default_factory=list)
    pending: list[Upcoming] = field(default_factory=list)
    rerecord: str | None = None
    source: str | None = None

    @property
    def exit_code(self) -> int:
        return self.kind.exit_code

    def to_json(self) -> dict[str, Any]:
        """The ``--report`` document."""
        return {
            "kind": self.kind.value,
            "exit_code": self.exit_code,
            "message": self.message,
            "source": self.source,
            "where": {
                "turn": self.turn,
                "lane": self.lane,
                "seq": self.seq,
                "live_line": self.live_index,
            },
            "actual": self.live_line,
            "expected": plain(self.expected),
            "diff": [c.to_json() for c in self.changes[:MAX_CHANGES]],
            "diff_more": max(0, len(self.changes) - MAX_CHANGES),
            "candidates": [c.to_json() for c in self.candidates],
            "next": [u.__dict__ for u in self.upcoming],
            "never_sent": [u.__dict__ for u in self.pending],
            "rerecord": self.rerecord,
        }

    def render(self) -> str:
        """The multi-line text written to stderr."""
        return render_report(
            self.to_json(), title=f"claudetrace replay: {self.kind.value}", origin="recording"
        )

    def result_line(self, session_id: str | None, num_turns: int) -> bytes:
        """A well-formed error ``result`` message carrying the report's first line."""
        text = f"claudetrace replay {self.kind.value}: {self.message}"
        result = {
            "type": "result",
            "subtype": "error_during_execution",
            "is_error": True,
            "duration_ms": 0,
            "duration_api_ms": 0,
            "num_turns": num_turns,
            "result": text,
            "errors": [text],
            "session_id": session_id or "claudetrace-replay",
            "total_cost_usd": 0,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return json.dumps(result, ensure_ascii=False).encode("utf-8")


def render_report(doc: Mapping[str, Any], *, title: str, origin: str) -> str:
    """The text of a divergence from its ``--report`` document.

    One rendering for the engine's stderr and for anything that reads the JSON
    later (the pytest plugin's failure message): ``title`` starts the first line,
    and the document's ``source`` is shown as ``origin``.
    """
    out = [f"{title}: {doc.get('message', '')}"]
    if doc.get("source"):
        out.append(f"  {origin}: {doc['source']}")
    where = doc.get("where") or {}
    spots = [f"turn {where.get('turn', 0)}"]
    if where.get("lane"):
        spots.append(f"lane {where['lane']}")
    if where.get("seq") is not None:
        spots.append(f"recorded seq {where['seq']}")
    if where.get("live_line") is not None:
        spots.append(f"host line {where['live_line']}")
    out.append("  where: " + ", ".join(spots))
    if doc.get("actual") is not None:
        out.append(f"  host sent: {_clip(str(doc['actual']), 300)}")
    diff = doc.get("diff") or []
    if diff:
        out.append("  diff (expected vs actual):")
        out.extend(f"    {describe_change(change)}" for change in diff)
        if doc.get("diff_more"):
            out.append(f"    … {doc['diff_more']} more")
    candidates = doc.get("candidates") or []
    if candidates:
        out.append("  nearest recorded inputs:")
        for cand in candidates:
            out.append(
                f"    seq {cand.get('seq')} (turn {cand.get('turn')}, lane {cand.get('lane')}): "
                f"{cand.get('reason')}"
            )
    never = doc.get("never_sent") or []
    if never:
        out.append("  recorded input never sent:")
        out.extend(f"    seq {u.get('seq')}: {u.get('summary')}" for u in never)
    upcoming = doc.get("next") or []
    if upcoming:
        out.append("  the recording would have continued with:")
        out.extend(
            f"    seq {u.get('seq')} {u.get('direction')}: {u.get('summary')}" for u in upcoming
        )
    if doc.get("rerecord"):
        out.append(f"  to re-record: {doc['rerecord']}")
    # Cassette lines and host lines are quoted: one escaping, line by line (a
    # terminal shows this text; the --report file keeps the exact JSON).
    return "\n".join(map(visible, out))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summarize(data: bytes, limit: int = 120) -> str:
    """A short description of a recorded line for the 'next' lists."""
    text = data.decode("utf-8", errors="replace")
    return _clip(text, limit)


def error_response(request_id: str, message: str) -> bytes:
    """A ``control_response`` error for a host request the replay cannot answer."""
    response = {
        "type": "control_response",
        "response": {"subtype": "error", "request_id": request_id, "error": message},
    }
    return json.dumps(response, ensure_ascii=False).encode("utf-8")
