"""Token usage and cost: the four token types, read from the CLI's usage objects.

Anthropic reports uncached input separately from cache reads and cache writes;
:class:`Usage` keeps the four apart (``input`` excludes the cache) and
:attr:`Usage.input_total` gives the GenAI conventions' ``input_tokens`` (their
sum).  The CLI writes usage in two spellings: the API's snake case
(``input_tokens``, in ``message``, ``message_delta`` and a result's ``usage``)
and its own camel case (``inputTokens``, in a result's ``modelUsage``).

A token count that is not a whole number from 0 to :data:`MAX_TOKENS` is
damaged (a negative count, ``1e30``, a string): it counts 0, and the usage read
says how many it had (:attr:`Usage.damaged`) for the recording's warnings.  Of
the cache writes, those the API says were written for an hour
(``cache_creation.ephemeral_1h_input_tokens``) are kept apart too: they cost more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

#: The token types, in the order every view lists them.
TOKEN_TYPES: Final = ("input", "output", "cache_read", "cache_creation")

_SNAKE: Final = {
    "input": "input_tokens",
    "output": "output_tokens",
    "cache_read": "cache_read_input_tokens",
    "cache_creation": "cache_creation_input_tokens",
}


#: The largest token count believed (2^40: no API call comes near it); a larger
#: one is damaged.
MAX_TOKENS: Final = 2**40
#: Where the API splits cache writes by lifetime, and the CLI's camel case of it.
_SPLIT: Final = "cache_creation"
_HOUR: Final = "ephemeral_1h_input_tokens"
_HOUR_CAMEL: Final = "cacheCreationEphemeral1hInputTokens"


def sound(value: Any) -> bool:
    """Whether ``value`` is a token count to believe: a JSON integer (``true`` is
    not one) from 0 to :data:`MAX_TOKENS`."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS


def count(value: Any) -> int:
    """``value`` if it is a sound token count (:func:`sound`), else 0."""
    return value if sound(value) else 0


def _damaged(*values: Any) -> int:
    """How many of ``values`` are there (not None) but not sound counts."""
    return sum(1 for v in values if v is not None and not sound(v))


def _hour_of(usage: dict[str, Any]) -> Any:
    """The 1-hour cache writes of an API usage object (None when it does not say)."""
    split = usage.get(_SPLIT)
    return split.get(_HOUR) if isinstance(split, dict) else None


def number(value: Any) -> float | None:
    """``value`` as a float if it is a JSON number, else ``None``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


@dataclass(slots=True)
class Usage:
    """Tokens of one model call, one turn or one session (``input`` excludes the cache)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    #: The part of ``cache_creation`` written for an hour (not a token type of its
    #: own: priced at the 1-hour rate, counted within ``cache_creation``).
    cache_creation_1h: int = 0
    #: How many damaged counts the object read had (each read as 0); not a figure
    #: that adds up, nor compared.
    damaged: int = field(default=0, compare=False)

    @classmethod
    def from_api(cls, usage: Any) -> Usage:
        """From an API usage object (``input_tokens`` …); missing fields count 0."""
        if not isinstance(usage, dict):
            return cls()
        get = usage.get
        i, o, r, w = (get("input_tokens"), get("output_tokens"), get("cache_read_input_tokens"),
                      get("cache_creation_input_tokens"))
        split = get(_SPLIT)
        h = split.get(_HOUR) if type(split) is dict else None
        top = MAX_TOKENS
        # Every API message is read here: the sound case spelled out (type() is
        # int excludes true), a third of what a call per value costs.
        if ((i is None or (type(i) is int and 0 <= i <= top))
                and (o is None or (type(o) is int and 0 <= o <= top))
                and (r is None or (type(r) is int and 0 <= r <= top))
                and (w is None or (type(w) is int and 0 <= w <= top))
                and (h is None or (type(h) is int and 0 <= h <= top))):
            return cls(i or 0, o or 0, r or 0, w or 0, h or 0)
        return cls(count(i), count(o), count(r), count(w), count(h), _damaged(i, o, r, w, h))

    @classmethod
    def from_model_usage(cls, usage: Any) -> Usage:
        """From one model's entry of a result's ``modelUsage`` (``inputTokens`` …)."""
        if not isinstance(usage, dict):
            return cls()
        get = usage.get
        i, o, r, w, h = values = (get("inputTokens"), get("outputTokens"),
                                  get("cacheReadInputTokens"), get("cacheCreationInputTokens"),
                                  get(_HOUR_CAMEL))
        return cls(count(i), count(o), count(r), count(w), count(h), _damaged(*values))

    def update_from_api(self, usage: dict[str, Any]) -> None:
        """Take the fields a partial usage object (``message_delta``) carries
        (:attr:`damaged`: the damaged ones among them)."""
        self.damaged = 0
        for kind in TOKEN_TYPES:
            key = _SNAKE[kind]
            if key in usage:
                self.damaged += _damaged(usage[key])
                setattr(self, kind, count(usage[key]))
        hour = _hour_of(usage)
        if hour is not None:
            self.damaged += _damaged(hour)
            self.cache_creation_1h = count(hour)

    @property
    def input_total(self) -> int:
        """Input including cache reads and writes (the GenAI ``input_tokens``)."""
        return self.input + self.cache_read + self.cache_creation

    @property
    def total(self) -> int:
        return self.input_total + self.output

    def get(self, kind: str) -> int:
        return int(getattr(self, kind))

    # add, minus and __bool__ spell the four fields out: an import folds every
    # API message through them, and a loop over TOKEN_TYPES with getattr cost
    # about a tenth of it.

    def add(self, other: Usage) -> None:
        self.input += other.input
        self.output += other.output
        self.cache_read += other.cache_read
        self.cache_creation += other.cache_creation
        self.cache_creation_1h += other.cache_creation_1h

    def minus(self, other: Usage) -> Usage:
        """``self - other`` per type (may be negative)."""
        return Usage(self.input - other.input, self.output - other.output,
                     self.cache_read - other.cache_read,
                     self.cache_creation - other.cache_creation,
                     self.cache_creation_1h - other.cache_creation_1h)

    def copy(self) -> Usage:
        return Usage(self.input, self.output, self.cache_read, self.cache_creation,
                     self.cache_creation_1h)

    def as_dict(self) -> dict[str, int]:
        return {kind: self.get(kind) for kind in TOKEN_TYPES}

    def __bool__(self) -> bool:
        return bool(self.input or self.output or self.cache_read or self.cache_creation)


def apportion(total: int, weights: list[int]) -> list[int]:
    """Split ``total`` into integers proportional to ``weights`` (largest remainder).

    Equal shares when every weight is 0; the parts always add up to ``total``.
    """
    if not weights:
        return []
    if total <= 0:
        return [0] * len(weights) if total == 0 else [total] + [0] * (len(weights) - 1)
    if sum(weights) <= 0:
        weights = [1] * len(weights)
    whole = sum(weights)
    exact = [total * w / whole for w in weights]
    parts = [int(x) for x in exact]
    short = total - sum(parts)
    order = sorted(range(len(weights)), key=lambda i: (parts[i] - exact[i], -i))
    for i in order[:short]:
        parts[i] += 1
    return parts
