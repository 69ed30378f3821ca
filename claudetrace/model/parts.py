"""The parts of a :class:`~claudetrace.model.session.Session`: turns, model calls,
tool calls, control round trips, subagents, and the status with its reason.

Plain records the fold in :mod:`.session` fills in; views read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .protocol import answer_verdict, opt_str
from .usage import Usage

Status = Literal["running", "ok", "interrupted", "error", "incomplete", "killed"]
#: Every status, in the order lists and dashboards show them.
STATUSES: Final[tuple[Status, ...]] = (
    "running", "ok", "interrupted", "error", "incomplete", "killed",
)
#: Statuses that are a failure (red in every view, an ERROR root span).
FAILED: Final = frozenset({"error", "incomplete", "killed"})

Initiator = Literal["host", "cli"]
ControlOutcome = Literal["success", "error", "unanswered", "cancelled"]
UsageSource = Literal["stream", "message", "result", "unobserved"]



@dataclass(slots=True, eq=False)
class ControlRoundTrip:
    """A control request and its answer (either direction).  Times are ns offsets."""

    request_id: str
    subtype: str
    initiator: Initiator
    request_seq: int
    request_ns: int
    turn: int | None = None
    response_seq: int | None = None
    response_ns: int | None = None
    outcome: ControlOutcome = "unanswered"
    error: str | None = None
    #: Answered before it was asked (the proxy reads the two directions apart).
    reordered: bool = False
    tool_use_id: str | None = None
    tool_name: str | None = None
    #: ``allow``/``deny`` for ``can_use_tool``; a hook's ``permissionDecision``.
    decision: str | None = None
    hook_event: str | None = None
    callback_id: str | None = None
    mcp_server: str | None = None
    mcp_method: str | None = None
    #: ``set_model``'s model, ``set_permission_mode``'s mode.
    model: str | None = None
    mode: str | None = None
    request: dict[str, Any] = field(default_factory=dict, repr=False)
    answer: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def kind(self) -> str:
        """``permission``, ``hook``, ``mcp`` or ``control``."""
        if self.initiator == "cli":
            if self.subtype == "can_use_tool":
                return "permission"
            if self.subtype == "hook_callback":
                return "hook"
            if self.subtype == "mcp_message":
                return "mcp"
        return "control"

    @property
    def answered(self) -> bool:
        return self.response_ns is not None

    @property
    def verdict(self) -> str:
        """What the answer decided, in a word: ``pending`` until answered, ``error``,
        ``cancelled``; for a permission or hook, :func:`~.protocol.answer_verdict`
        (``allow``, ``deny``, ``continue``, ``stop`` …); else ``success``."""
        if self.outcome in ("unanswered", "error", "cancelled"):
            return "pending" if self.outcome == "unanswered" else self.outcome
        if self.kind in ("permission", "hook"):
            return answer_verdict(self.subtype, self.answer)
        return "success"

    @property
    def duration_ns(self) -> int | None:
        if self.response_ns is None:
            return None
        return 0 if self.reordered else max(0, self.response_ns - self.request_ns)


@dataclass(slots=True, eq=False)
class ToolCall:
    """A ``tool_use`` and its ``tool_result``, with the round trips about it."""

    id: str
    name: str
    lane: str | None
    turn: int
    start_seq: int
    start_ns: int
    input: Any = None
    end_seq: int | None = None
    end_ns: int | None = None
    is_error: bool = False
    #: The user stopped it (its error result is the interrupt's, not a failure:
    #: not counted in :attr:`~claudetrace.model.Session.tool_errors`).
    interrupted: bool = False
    permission: ControlRoundTrip | None = None
    hooks: list[ControlRoundTrip] = field(default_factory=list)

    @property
    def outcome(self) -> str:
        """``ok``, ``error`` or ``unfinished`` (no result seen)."""
        if self.end_ns is None:
            return "unfinished"
        return "error" if self.is_error else "ok"

    @property
    def duration_ns(self) -> int | None:
        return None if self.end_ns is None else max(0, self.end_ns - self.start_ns)

    @property
    def subagent_type(self) -> str | None:
        return opt_str(self.input.get("subagent_type")) if isinstance(self.input, dict) else None


@dataclass(frozen=True, slots=True)
class ApiError:
    """An API error Claude Code gave up on and wrote as an assistant message of its
    own (model ``<synthetic>``): no model call, no tokens."""

    seq: int
    t_ns: int
    turn: int
    lane: str | None
    #: What the line names: ``server_error``, ``api_error`` (a transcript's mark)…
    error: str
    #: ``529 overloaded_error`` (the HTTP status and error type), or ``""``.
    status: str
    #: What the CLI said (``API Error: 529 Overloaded. …``).
    text: str

    @property
    def label(self) -> str:
        """``API error 529 overloaded_error``."""
        return f"API error {self.status or self.error}"


@dataclass(slots=True, eq=False)
class ModelCall:
    """One API message (``message_start``…``message_stop`` or assistant lines of one id)."""

    id: str
    model: str | None
    lane: str | None
    turn: int
    start_seq: int
    start_ns: int
    end_ns: int
    streamed: bool
    usage: Usage = field(default_factory=Usage)
    #: Where :attr:`usage` comes from: a ``message_delta`` (``stream``), the
    #: assistant message only (``message``, provisional), the turn's result
    #: (``result``), or the result alone for a call the host never saw.
    usage_source: UsageSource = "message"
    #: When the line that last raised :attr:`usage` was seen, for a message
    #: written as assistant lines (ccusage counts the message at the time of the
    #: line whose usage it keeps); None: at :attr:`start_ns`.
    usage_ns: int | None = None
    #: The wall clock of that line (of the call's first line until then), as its
    #: event has it (0: none): what dates the call's usage, as ccusage dates each
    #: entry by its own timestamp, a clock that stepped back included.
    wall_ns: int = 0
    stop_reason: str | None = None
    error: str | None = None
    stopped: bool = False
    interrupted: bool = False

    @property
    def observed(self) -> bool:
        return self.usage_source != "unobserved"

    @property
    def final(self) -> bool:
        """True once :attr:`usage` will not change any more."""
        return self.usage_source in ("stream", "result", "unobserved")


@dataclass(slots=True, eq=False)
class Turn:
    """A user message (or output with none before it) to its ``result``."""

    number: int
    start_seq: int
    start_ns: int
    implicit: bool = False
    end_seq: int | None = None
    end_ns: int | None = None
    interrupted: bool = False
    result_subtype: str | None = None
    #: The result's ``is_error``, authoritative whatever its subtype says
    #: (``subtype: success`` with ``is_error: true`` happens).
    is_error: bool = False
    #: The API error the turn's main agent was left with: an ``assistant`` line
    #: that is an API error (its ``error``, a transcript's ``isApiErrorMessage``)
    #: or a ``system/api_error`` line, not followed by an answer that is not.
    api_error: str | None = None
    #: The CLI's ``num_turns`` for this turn (API round trips).
    num_turns: int | None = None
    #: The result's ``stop_reason``: how the turn's last model call stopped (the
    #: CLI's assistant lines say null when partial messages are off).
    stop_reason: str | None = None
    #: The result's ``usage`` (the main agent's tokens, as the CLI printed them).
    result_usage: Usage | None = None
    #: ``total_cost_usd`` of the result: the CLI's running total.
    total_cost_usd: float | None = None
    usage_by_model: dict[str, Usage] = field(default_factory=dict)
    cost_by_model: dict[str, float] = field(default_factory=dict)
    calls: list[ModelCall] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.end_ns is not None

    @property
    def cost_usd(self) -> float:
        return sum(self.cost_by_model.values())

    @property
    def errored(self) -> bool:
        """The CLI said the turn is an error (``is_error``), or it ended on an API error."""
        return self.is_error or self.api_error is not None

    @property
    def failed(self) -> bool:
        """The status rule for a turn: it :attr:`errored`, and not because the
        user interrupted it.  Every view (``show``, ``sessions``, ``tail``, the
        spans, the UI, Prometheus through the stored status) reads this."""
        return self.errored and not self.interrupted

    @property
    def ended_with(self) -> str:
        """What the turn ended with, in words: ``success``, ``error_max_turns``,
        ``an error (is_error with subtype success)``, ``an API error
        (rate_limit)``, ``no result`` …; never ``success`` for an error."""
        subtype = self.result_subtype
        if self.api_error is not None:
            return f"an API error ({self.api_error})"
        if self.is_error:
            if subtype and subtype.startswith("error"):
                return subtype
            return f"an error (is_error with subtype {subtype})" if subtype else "an error"
        if not self.done:
            return "interrupted" if self.interrupted else "no result"
        return subtype or "a result"


@dataclass(slots=True, eq=False)
class Subagent:
    """Work delegated through an Agent/Task tool use (``parent_tool_use_id`` lane)."""

    tool_use_id: str
    turn: int
    start_ns: int
    subagent_type: str | None = None
    task_id: str | None = None
    status: str | None = None
    end_ns: int | None = None


#: Where a session's cost comes from: the CLI's ``result`` lines, the price
#: table (:mod:`claudetrace.pricing`), or nowhere (a model the table does not know).
CostSource = Literal["cli", "estimate", "unknown"]
COST_SOURCES: Final[tuple[CostSource, ...]] = ("cli", "estimate", "unknown")


@dataclass(frozen=True, slots=True)
class Cost:
    """What a session cost and how that is known (:meth:`Session.cost`).

    ``usd`` is None when ``source`` is ``unknown``; ``by_model`` holds a price
    for each model that has one (None for a model without).  ``by_call``: the
    price table's price of each call (by id) where the calls were priced for
    it, so that the calls' rows (:func:`~.summary.usage_rows`) do not price
    them again; not part of the value (compared and shown without it).
    """

    usd: float | None
    source: CostSource
    by_model: dict[str, float | None] = field(default_factory=dict)
    by_call: dict[str, float | None] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Outcome:
    """A session's status and why (the reason is empty for ``ok``)."""

    status: Status
    reason: str = ""

    @property
    def failed(self) -> bool:
        return self.status in FAILED


def signal_name(signal: int) -> str:
    """``SIGKILL`` for 9 (``signal N`` for a number this system does not name)."""
    import signal as signals

    try:
        return signals.Signals(signal).name
    except ValueError:
        return f"signal {signal}"
