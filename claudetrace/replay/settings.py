"""Replay settings as a test declares them: checked, merged, turned into replay flags.

The pytest plugin reads them from the ``claude_cassette`` marker and from ini
options; :meth:`ReplaySettings.replay_args` spells them as ``claudetrace
replay`` options, so the marker, the ini file and the command line mean the
same thing.  Like vcrpy's record-mode check, a key or value that is not
understood is an error that lists what is accepted, never silently ignored.

Marker keys (and the ini option that sets the same for every test):

- ``path``: the cassette file (also the marker's first argument);
- ``record_mode``: none, once, new_episodes, all, rewrite (``claude_record_mode``);
- ``redact``: regexes hidden when saving, and in live host lines before they are
  compared (``claude_cassette_redact``);
- ``volatile_paths``: JSON paths not compared (``claude_volatile_paths``);
- ``match_regex``: ``{PATH: REGEX}`` or ``PATH=REGEX`` strings (``claude_match_regex``);
- ``match``: a function ``match(recorded, live) -> bool``, or ``"module:function"``
  (``claude_matcher``);
- ``match_argv``: compare the CLI options that change behaviour (``claude_match_argv``);
- ``ignore_argv``: options not compared, e.g. ``model`` (``claude_ignore_argv``);
- ``fault``: fault SPECs injected by the replay (``crash@3``, ``hang@0`` …);
- ``volatile_keys`` / ``volatile_patterns``: keys, or whole-string regexes, whose
  values the host generates afresh on each run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import ClaudeTraceError
from .argv import canonical
from .faults import Fault, parse_faults
from .rules import compile_path, load_matcher, matcher_reference, parse_regex_rule

#: Every key the ``claude_cassette`` marker accepts.
MARKER_KEYS: Final = (
    "path",
    "record_mode",
    "redact",
    "volatile_paths",
    "match_regex",
    "match",
    "match_argv",
    "ignore_argv",
    "fault",
    "volatile_keys",
    "volatile_patterns",
)


class BadSetting(ClaudeTraceError):
    """A marker key, ini value or option that the replay does not understand."""

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


def _strings(key: str, value: Any) -> tuple[str, ...]:
    """A string or a list/tuple of strings, as a tuple."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(v for v in value if v.strip())
    raise BadSetting(
        f"claude_cassette {key}= must be a string or a list of strings, not {value!r}", key=key
    )


def _regexes(key: str, values: Iterable[str]) -> tuple[str, ...]:
    """``values`` checked: each compiles in RE2, the linear-time engine every user
    pattern runs in (:mod:`claudetrace.pattern`)."""
    from ..pattern import linear_regex

    out = tuple(values)
    what = "redaction pattern" if key == "redact" else "regex"
    for pattern in out:
        _checked(lambda p: linear_regex(p, what=what), key, pattern)
    return out


#: How a yes/no setting may be spelled (in an ini file, say).
_TRUE: Final = ("true", "yes", "on", "1")
_FALSE: Final = ("false", "no", "off", "0")


def flag(value: Any, *, key: str, where: str | None = None) -> bool:
    """A yes/no setting: a bool, or one of its usual spellings in a string.

    Anything else is a :class:`BadSetting` naming the setting (``where``,
    default the marker's ``key=``) and the valid values.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE:
        return True
    if isinstance(value, str) and value.strip().lower() in _FALSE:
        return False
    name = where or f"claude_cassette {key}="
    raise BadSetting(
        f"{name} must be True or False (or one of {', '.join(_TRUE + _FALSE)}), not {value!r}",
        key=key,
    )


@dataclass
class ReplaySettings:
    """How one test's cassette is matched and which faults its replay injects."""

    redact: tuple[str, ...] = ()
    volatile_paths: tuple[str, ...] = ()
    match_regex: tuple[str, ...] = ()
    matcher: str | None = None
    match_argv: bool = True
    ignore_argv: tuple[str, ...] = ()
    faults: tuple[Fault, ...] = ()
    volatile_keys: tuple[str, ...] = ()
    volatile_patterns: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def replay_args(self) -> list[str]:
        """The same settings as ``claudetrace replay`` options."""
        args: list[str] = []
        for flag, values in (
            ("--redact", self.redact),
            ("--volatile-path", self.volatile_paths),
            ("--match-regex", self.match_regex),
            ("--ignore-argv", self.ignore_argv),
            ("--volatile-key", self.volatile_keys),
            ("--volatile-pattern", self.volatile_patterns),
        ):
            for value in values:
                args += [flag, value]
        if self.matcher:
            args += ["--matcher", self.matcher]
        if not self.match_argv:
            args.append("--no-match-argv")
        for fault in self.faults:
            args += ["--fault", fault.spec()]
        return args


def check_marker_keys(kwargs: Mapping[str, Any]) -> None:
    """Fail on marker keys that are not in :data:`MARKER_KEYS`, naming the valid ones."""
    unknown = sorted(set(kwargs) - set(MARKER_KEYS))
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        raise BadSetting(
            f"unknown claude_cassette marker key(s) {names} (valid keys: {', '.join(MARKER_KEYS)})",
            key=unknown[0],
        )


def settings_from(
    marker: Mapping[str, Any],
    ini: Mapping[str, Any],
) -> ReplaySettings:
    """Settings from a marker's keyword arguments over the ini options (both checked).

    ``ini`` holds the ini options under the marker's key names (``redact``,
    ``volatile_paths``, ``match_regex``, ``match``, ``match_argv``,
    ``ignore_argv``); list options add to each other, the marker wins for
    single values.
    """
    check_marker_keys(marker)

    def both(key: str) -> tuple[str, ...]:
        return (*_strings(key, ini.get(key)), *_strings(key, marker.get(key)))

    volatile_paths = both("volatile_paths")
    for path in volatile_paths:
        _checked(compile_path, "volatile_paths", path)
    rules = [*_strings("match_regex", ini.get("match_regex"))]
    regex_value = marker.get("match_regex")
    if isinstance(regex_value, Mapping):
        rules += [f"{path}={regex}" for path, regex in regex_value.items()]
    else:
        rules += _strings("match_regex", regex_value)
    for rule in rules:
        _checked(parse_regex_rule, "match_regex", rule)
    matcher = marker.get("match", ini.get("match"))
    reference: str | None = None
    if isinstance(matcher, str):
        reference = matcher.strip() or None
        if reference and ":" not in reference:
            raise BadSetting(
                f"claude_cassette match={matcher!r}: name a function as module:function",
                key="match",
            )
        if reference:  # imported now, so a typo fails at setup, not in the fake CLI
            _checked(load_matcher, "match", reference)
    elif matcher is not None:
        reference = _checked(matcher_reference, "match", matcher)
    match_argv = flag(marker.get("match_argv", ini.get("match_argv", True)), key="match_argv")
    ignore_argv = tuple(canonical(k) for k in both("ignore_argv"))
    faults = tuple(_checked(parse_faults, "fault", _strings("fault", marker.get("fault"))))
    return ReplaySettings(
        redact=_regexes("redact", both("redact")),
        volatile_paths=volatile_paths,
        match_regex=tuple(rules),
        matcher=reference,
        match_argv=match_argv,
        ignore_argv=ignore_argv,
        faults=faults,
        volatile_keys=_strings("volatile_keys", marker.get("volatile_keys")),
        volatile_patterns=_regexes(
            "volatile_patterns", _strings("volatile_patterns", marker.get("volatile_patterns"))
        ),
    )


def _checked(check: Callable[[Any], Any], key: str, value: Any) -> Any:
    try:
        return check(value)
    except ClaudeTraceError as exc:
        raise BadSetting(f"claude_cassette {key}: {exc}", key=key) from None


__all__ = [
    "MARKER_KEYS",
    "BadSetting",
    "ReplaySettings",
    "check_marker_keys",
    "flag",
    "settings_from",
]
