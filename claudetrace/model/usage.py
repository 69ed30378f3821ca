"""Token usage and cost: the four token types, read from the CLI's usage objects.

Anthropic reports uncached input separately from cache reads and cache writes;
:class:`Usage` keeps the four apart (``input`` excludes the cache) and
:attr:`Usage.input_total` gives the GenAI conventions' ``input_tokens`` (their
sum).  The CLI writes usage in two spellings: the API's snake case
(``input_tokens``, in ``message``, ``message_delta`` and a result's ``usage``)
and its own camel case (``inputTokens``, in a result's ``modelUsage``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

#: The token types, in the order every view lists them.
TOKEN_TYPES: Final = ("input", "output", "cache_read", "cache_creation")

_SNAKE: Final = {
    "input": "input_tokens",
    "output": "output_tokens",
    "cache_read": "cache_read_input_tokens",
    "cache_creation": "cache_creation_input_tokens",
}
_CAMEL: Final = {
    "input": "inputTokens",
    "output": "outputTokens",
    "cache_read": "cacheReadInputTokens",
    "cache_creation": "cacheCreationInputTokens",
}


def count(value: Any) -> int:
    """``value`` if it is a JSON integer (``true`` is not one), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


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

    @classmethod
    def from_api(cls, usage: Any) -> Usage:
        """From an API usage object (``input_tokens`` …); missing fields count 0."""
        if not isinstance(usage, dict):
            return cls()
        get = usage.get
        return cls(count(get("input_tokens")), count(get("output_tokens")),
                   count(get("cache_read_input_tokens")),
                   count(get("cache_creation_input_tokens")))

    @classmethod
    def from_model_usage(cls, usage: Any) -> Usage:
        """From one model's entry of a result's ``modelUsage`` (``inputTokens`` …)."""
        if not isinstance(usage, dict):
            return cls()
        return cls(*(count(usage.get(_CAMEL[t])) for t in TOKEN_TYPES))

    def update_from_api(self, usage: dict[str, Any]) -> None:
        """Take the fields a partial usage object (``message_delta``) carries."""
        for kind in TOKEN_TYPES:
            key = _SNAKE[kind]
            if key in usage:
                setattr(self, kind, count(usage[key]))

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

    def minus(self, other: Usage) -> Usage:
        """``self - other`` per type (may be negative)."""
        return Usage(self.input - other.input, self.output - other.output,
                     self.cache_read - other.cache_read,
                     self.cache_creation - other.cache_creation)

    def copy(self) -> Usage:
        return Usage(self.input, self.output, self.cache_read, self.cache_creation)

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
