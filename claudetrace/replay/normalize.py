"""Normalising host lines for comparison: volatile ids, path mapping, JSON diffs.

A recorded ``in`` line becomes a *template*: its JSON value with every value the
host generates afresh on each run (its control ``request_id``, a user message's
``uuid``, anything matching a declared volatile pattern or key) replaced by a
:class:`Volatile` marker.  :func:`unify` compares a template with a live line and
binds each marker to the live value the first time it is seen, so later lines
(and the ``out`` lines replayed to the host) use the live value.

Paths are mapped rather than masked: the recording's working and home
directories are replaced by the live ones in templates and in replayed output,
so a cassette recorded on one machine replays on another.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from ..model.protocol import project_slug as project_slug  # the CLI's folder naming
from ..pattern import linear_regex

#: Default shapes of host-generated ids: SDK control request ids (``req_1_9c3ad989``).
DEFAULT_VOLATILE_PATTERNS: Final = (r"req_\d+_[0-9a-f]+",)

# Only ids made of these characters are substituted in raw output bytes: their
# JSON spelling is the string itself, so a byte replace cannot break a line.
_SAFE_ID: Final = re.compile(r"[A-Za-z0-9_.:\-]+")


@dataclass(frozen=True, slots=True)
class Volatile:
    """A host-generated value in a template; ``index`` identifies the recorded value."""

    index: int


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


#: Stands for an absent key or list item in a :class:`Change`.
MISSING: Final[Any] = _Missing()


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between an expected and an actual JSON value."""

    path: str
    expected: Any
    actual: Any

    def describe(self) -> str:
        """One line such as ``$.message.content: expected 'a', got 'b'``."""
        return describe_change(self.to_json())

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form (absent sides are omitted)."""
        out: dict[str, Any] = {"path": self.path}
        if self.expected is not MISSING:
            out["expected"] = plain(self.expected)
        if self.actual is not MISSING:
            out["actual"] = plain(self.actual)
        return out


def describe_change(change: Mapping[str, Any]) -> str:
    """One line for a change in its JSON form (a ``diff`` entry of a report)."""
    path = change.get("path", "$")
    if "expected" not in change:
        return f"{path}: unexpected {_short(change.get('actual'))}"
    if "actual" not in change:
        return f"{path}: missing (expected {_short(change.get('expected'))})"
    return f"{path}: expected {_short(change['expected'])}, got {_short(change['actual'])}"


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(plain(value), ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plain(value: Any) -> Any:
    """A template with its markers spelled as text (for reports)."""
    if isinstance(value, Volatile):
        return f"<volatile #{value.index}>"
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


@dataclass
class PathMap:
    """Recorded directory strings and the live ones that replace them."""

    pairs: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def build(cls, recorded: Mapping[str, str | None], live: Mapping[str, str]) -> PathMap:
        """Pairs for each name (``cwd``, ``home``) known on both sides and different."""
        pairs = []
        for name, old in recorded.items():
            new = live.get(name)
            if old and new and old != new and len(old) > 1:
                pairs.append((old, new))
                if name == "cwd":
                    # The CLI names its per-project folder after the cwd, e.g.
                    # ~/.claude/projects/-home-dev-project/.
                    pairs.append((project_slug(old), project_slug(new)))
        # Longest first, so a working directory inside the home maps as a whole.
        pairs.sort(key=lambda pair: len(pair[0]), reverse=True)
        return cls(pairs)

    def __bool__(self) -> bool:
        return bool(self.pairs)

    def text(self, value: str) -> str:
        """``value`` with recorded directories replaced by live ones (one pass)."""
        if not self.pairs:
            return value
        table = dict(self.pairs)
        return self._text_re().sub(lambda m: table[m.group()], value)

    def _text_re(self) -> re.Pattern[str]:
        return re.compile("|".join(re.escape(old) for old, _ in self.pairs))

    def bytes_replacer(self) -> tuple[re.Pattern[bytes], dict[bytes, bytes]] | None:
        """A compiled regex and table for mapping raw JSON line bytes."""
        if not self.pairs:
            return None
        table = {_json_inner(old): _json_inner(new) for old, new in self.pairs}
        pattern = re.compile(b"|".join(re.escape(old) for old in table))
        return pattern, table

    def apply(self, value: Any) -> Any:
        """A JSON value with every string mapped."""
        if not self.pairs:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.apply(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.apply(v) for v in value]
        return value


def _json_inner(text: str) -> bytes:
    """How ``text`` is spelled inside a JSON string literal (without the quotes)."""
    return json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8")


@dataclass
class VolatileSpec:
    """What counts as host-generated: key names per message type and value patterns.

    ``keys`` maps a message ``type`` (``"*"`` for any) to top-level keys whose value
    is volatile; ``any_keys`` are volatile wherever they occur; ``patterns`` are
    regular expressions a whole string value must match.
    """

    keys: dict[str, frozenset[str]] = field(
        default_factory=lambda: {
            "control_request": frozenset({"request_id"}),
            "user": frozenset({"uuid"}),
        }
    )
    any_keys: frozenset[str] = frozenset()
    patterns: tuple[str, ...] = DEFAULT_VOLATILE_PATTERNS

    def compiled(self) -> Any:
        """One regex matching any declared pattern (``None`` when there are none):
        the built-in ones in Python's engine (ten times quicker per value), a
        user's in RE2, whose time is linear (:mod:`claudetrace.pattern`)."""
        if not self.patterns:
            return None
        joined = "|".join(f"(?:{p})" for p in self.patterns)
        if set(self.patterns) <= set(DEFAULT_VOLATILE_PATTERNS):
            return re.compile(joined)
        for pattern in self.patterns:  # the one at fault named, not the alternation
            linear_regex(pattern, what="volatile pattern")
        return linear_regex(joined, what="volatile pattern")


class Templater:
    """Turns recorded ``in`` values into templates, numbering volatile values."""

    def __init__(self, spec: VolatileSpec | None = None, paths: PathMap | None = None) -> None:
        self.spec = spec or VolatileSpec()
        self.paths = paths or PathMap()
        self._pattern = self.spec.compiled()
        #: recorded volatile value -> its index
        self.values: dict[str, int] = {}

    def _index(self, value: str) -> Volatile:
        index = self.values.get(value)
        if index is None:
            index = self.values[value] = len(self.values)
        return Volatile(index)

    def collect(self, obj: Any) -> None:
        """Register the volatile values of one recorded line (first pass)."""
        if not isinstance(obj, dict):
            return
        keys = self.spec.keys.get(str(obj.get("type")), frozenset()) | self.spec.keys.get(
            "*", frozenset()
        )
        for key in keys:
            value = obj.get(key)
            if isinstance(value, str) and value:
                self._index(value)
        self._collect_deep(obj)

    def _collect_deep(self, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key in self.spec.any_keys and isinstance(item, str) and item:
                    self._index(item)
                else:
                    self._collect_deep(item)
        elif isinstance(value, list):
            for item in value:
                self._collect_deep(item)
        elif (
            isinstance(value, str) and self._pattern is not None and self._pattern.fullmatch(value)
        ):
            self._index(value)

    def template(self, value: Any) -> Any:
        """``value`` with registered volatile strings as markers and paths mapped."""
        if isinstance(value, str):
            index = self.values.get(value)
            if index is not None:
                return Volatile(index)
            return self.paths.text(value) if self.paths else value
        if isinstance(value, dict):
            return {k: self.template(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.template(v) for v in value]
        return value

    def substitutable(self) -> list[str]:
        """Recorded volatile values safe to replace in raw output bytes."""
        return [value for value in self.values if _SAFE_ID.fullmatch(value)]


@dataclass
class Bindings:
    """Recorded volatile value index -> live value, and the reverse."""

    live: dict[int, str] = field(default_factory=dict)
    reverse: dict[str, int] = field(default_factory=dict)

    def bind(self, index: int, value: str) -> None:
        self.live[index] = value
        self.reverse[value] = index


class PathRules(Protocol):
    """User rules consulted at each JSON path (:class:`~claudetrace.replay.rules.MatchRules`)."""

    def ignored(self, path: str) -> bool: ...

    def regex(self, path: str) -> re.Pattern[str] | None: ...


def unify(
    template: Any, actual: Any, bindings: Bindings, rules: PathRules | None = None
) -> tuple[list[Change], dict[int, str]]:
    """Compare a template with a live value.

    Returns the differences (empty when they match) and the new bindings the match
    implies; ``bindings`` itself is not changed, so a failed comparison leaves no
    trace.  A marker matches the value it is bound to, or, when unbound, any string
    not already bound to another marker (consistently within one comparison).
    ``rules`` name paths that are not compared or are compared by a regex.
    """
    changes: list[Change] = []
    fresh: dict[int, str] = {}
    _unify(template, actual, "$", bindings, fresh, changes, rules)
    return changes, fresh


def _unify(
    expected: Any,
    actual: Any,
    path: str,
    bindings: Bindings,
    fresh: dict[int, str],
    changes: list[Change],
    rules: PathRules | None = None,
) -> None:
    if rules is not None:
        if rules.ignored(path):
            return
        pattern = rules.regex(path)
        if pattern is not None:
            if actual is MISSING or not pattern.fullmatch(_value_text(actual)):
                changes.append(Change(path, f"/{pattern.pattern}/", actual))
            return
    if isinstance(expected, Volatile):
        bound = bindings.live.get(expected.index, fresh.get(expected.index))
        if bound is not None:
            if actual != bound:
                changes.append(Change(path, bound, actual))
            return
        owner = bindings.reverse.get(actual) if isinstance(actual, str) else None
        if (
            not isinstance(actual, str)
            or (owner is not None and owner != expected.index)
            or (actual in fresh.values())
        ):
            changes.append(Change(path, expected, actual))
            return
        fresh[expected.index] = actual
        return
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key, value in expected.items():
            sub = f"{path}.{key}" if _PLAIN_KEY.fullmatch(key) else f"{path}[{json.dumps(key)}]"
            if key in actual:
                _unify(value, actual[key], sub, bindings, fresh, changes, rules)
            elif rules is None or not rules.ignored(sub):
                changes.append(Change(sub, value, MISSING))
        for key in actual:
            if key not in expected:
                sub = f"{path}.{key}" if _PLAIN_KEY.fullmatch(key) else f"{path}[{json.dumps(key)}]"
                if rules is None or not rules.ignored(sub):
                    changes.append(Change(sub, MISSING, actual[key]))
        return
    if isinstance(expected, list) and isinstance(actual, list):
        for i in range(max(len(expected), len(actual))):
            _unify(
                expected[i] if i < len(expected) else MISSING,
                actual[i] if i < len(actual) else MISSING,
                f"{path}[{i}]",
                bindings,
                fresh,
                changes,
                rules,
            )
        return
    if expected is MISSING or actual is MISSING:
        changes.append(Change(path, expected, actual))
        return
    # JSON distinguishes true from 1; Python's == does not.
    if (
        type(expected) is not type(actual)
        and not (
            isinstance(expected, (int, float))
            and isinstance(actual, (int, float))
            and not isinstance(expected, bool)
            and not isinstance(actual, bool)
        )
    ) or expected != actual:
        changes.append(Change(path, expected, actual))


_PLAIN_KEY: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def live_paths(environ: Mapping[str, str], cwd: str) -> dict[str, str]:
    """The live directory strings a :class:`PathMap` maps recorded ones to."""
    live = {"cwd": cwd}
    home = environ.get("HOME")
    if home:
        live["home"] = home
    return live


def substitution_regex(values: Iterable[str]) -> re.Pattern[bytes] | None:
    """A regex matching any of ``values`` in raw bytes (longest first)."""
    encoded = sorted({v.encode("utf-8") for v in values}, key=len, reverse=True)
    if not encoded:
        return None
    return re.compile(b"|".join(re.escape(v) for v in encoded))
