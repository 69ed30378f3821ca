"""User matching rules: volatile JSON paths, paths matched by regex, a matcher callable.

Paths use the spelling of divergence reports: ``$`` is the host line, ``.key``
a key, ``[3]`` a list item, ``["odd key"]`` any other key.  ``*`` stands for any
one key and ``[*]`` for any list item, so ``$.message.content[*].text`` names
the text of every block of a user message.  A rule applies to every host line
that has the path.

- a **volatile** path is not compared at all (its value may be anything, or
  absent on either side) — for a date or a random id in a prompt, or for a field
  an SDK upgrade added to the ``initialize`` request;
- a **regex** path (``PATH=REGEX``) matches when the live value (a string, or
  the JSON text of any other value) fully matches REGEX;
- a **matcher** is a function ``match(recorded, live) -> bool`` called with the
  two messages (parsed JSON) when they still differ; returning true accepts the
  live line, raising ``AssertionError`` rejects it with the assertion's text
  (as vcrpy's custom matchers do).  It is named ``module:function`` or
  ``path/to/file.py:function`` so that the fake CLI process can import it.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..errors import ReplayError
from ..pattern import BadPattern, linear_regex

UserMatcher = Callable[[Any, Any], object]

_SEGMENT: Final = re.compile(r'\.(?:\*|[A-Za-z_][A-Za-z0-9_\-]*)|\[(?:\*|\d+|"(?:[^"\\]|\\.)*")\]')


_PLAIN: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class BadRule(ReplayError):
    """A matching rule (path, regex, matcher reference) that cannot be used."""

    exit_code = 2

    def __init__(self, message: str, *, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


def compile_path(path: str) -> re.Pattern[str]:
    """A regex matching the report paths that ``path`` (with wildcards) names."""
    text = path.strip()
    if not text.startswith("$"):
        raise BadRule(
            f"bad JSON path {path!r}: it must start with '$' (e.g. $.message.content)", rule=path
        )
    out = [re.escape("$")]
    pos = 1
    while pos < len(text):
        found = _SEGMENT.match(text, pos)
        if found is None:
            raise BadRule(
                f'bad JSON path {path!r} at {text[pos:]!r}: use .key, [N], ["key"], .* or [*]',
                rule=path,
            )
        segment = found.group()
        if segment == ".*":
            out.append(r'(?:\.[A-Za-z_][A-Za-z0-9_]*|\["(?:[^"\\]|\\.)*"\])')
        elif segment == "[*]":
            out.append(r"\[\d+\]")
        elif segment.startswith(".") and not _PLAIN.fullmatch(segment[1:]):
            # Reports spell such keys ["a-b"], as unify does.
            out.append(re.escape(f"[{json.dumps(segment[1:])}]"))
        else:
            out.append(re.escape(segment))
        pos = found.end()
    return re.compile("".join(out))


def parse_regex_rule(rule: str) -> tuple[str, str]:
    """``PATH=REGEX`` split and checked (the regex compiles)."""
    path, eq, regex = rule.partition("=")
    if not eq or not path.strip():
        raise BadRule(f"bad regex rule {rule!r}: expected PATH=REGEX", rule=rule)
    compile_path(path)
    try:
        linear_regex(regex, what="regex")
    except BadPattern as exc:
        raise BadRule(f"bad regex in rule {rule!r}: {exc}", rule=rule) from None
    return path.strip(), regex


def load_matcher(reference: str) -> UserMatcher:
    """Import the callable ``module:function`` or ``path/to/file.py:function``."""
    target, colon, name = reference.rpartition(":")
    if not colon or not target or not name:
        raise BadRule(
            f"bad matcher {reference!r}: expected module:function or file.py:function",
            rule=reference,
        )
    try:
        module = _import_file(Path(target)) if target.endswith(".py") else None
        if module is None:
            module = importlib.import_module(target)
        func = module
        for part in name.split("."):
            func = getattr(func, part)
    except Exception as exc:  # the user's module may fail in any way
        raise BadRule(f"cannot load matcher {reference!r}: {exc}", rule=reference) from None
    if not callable(func):
        raise BadRule(f"matcher {reference!r} is not callable", rule=reference)
    matcher: UserMatcher = func
    return matcher


def _import_file(path: Path) -> Any:
    """Import a module by its file, as pytest's default (prepend) import mode does.

    The file's package (the folders above it with an ``__init__.py``) is imported
    by its dotted name from the first folder that is not a package, so that the
    module's own imports (``from tests.helpers import …``, ``from host import …``)
    work as they do under pytest.
    """
    if not path.is_file():
        raise ImportError(f"no such file {path}")
    path = path.absolute()
    parts = [path.stem]
    root = path.parent
    while (root / "__init__.py").is_file():
        parts.insert(0, root.name)
        root = root.parent
    for folder in {str(root), str(path.parent)}:
        if folder not in sys.path:
            sys.path.insert(0, folder)
    name = ".".join(parts)
    try:
        return importlib.import_module(name)
    except ImportError:
        spec = importlib.util.spec_from_file_location(f"_claudetrace_matcher_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


def matcher_reference(func: object) -> str:
    """How a fake CLI process finds ``func``: ``file.py:qualname``.

    Only functions defined at the top level of a module (or as methods reached
    from it) can be found again; a lambda or a nested function cannot.
    """
    name = getattr(func, "__qualname__", None)
    module = getattr(func, "__module__", None)
    if not callable(func) or not name or "<" in name or not module:
        raise BadRule(
            f"match= must be a function defined at the top level of a module, not {func!r}",
            rule=repr(func),
        )
    source = getattr(sys.modules.get(module), "__file__", None)
    if source and source.endswith(".py"):
        return f"{Path(source).absolute()}:{name}"
    return f"{module}:{name}"


@dataclass
class MatchRules:
    """Volatile paths, regex paths and a user matcher, ready to apply."""

    volatile_paths: tuple[str, ...] = ()
    regex_paths: tuple[tuple[str, str], ...] = ()
    matcher: UserMatcher | None = None
    _ignored: re.Pattern[str] | None = field(default=None, init=False, repr=False)
    _regexes: list[tuple[re.Pattern[str], Any]] = field(
        default_factory=list, init=False, repr=False
    )

    def __post_init__(self) -> None:
        if self.volatile_paths:
            self._ignored = re.compile(
                "|".join(f"(?:{compile_path(p).pattern})" for p in self.volatile_paths)
            )
        self._regexes = [(compile_path(p), linear_regex(r, what="regex"))
                         for p, r in self.regex_paths]

    @classmethod
    def build(
        cls,
        *,
        volatile_paths: Iterable[str] = (),
        regex_rules: Iterable[str] | Mapping[str, str] = (),
        matcher: str | UserMatcher | None = None,
    ) -> MatchRules:
        """Rules from their textual forms (``PATH=REGEX`` rules, a matcher reference)."""
        if isinstance(regex_rules, Mapping):
            pairs = [parse_regex_rule(f"{p}={r}") for p, r in regex_rules.items()]
        else:
            pairs = [parse_regex_rule(rule) for rule in regex_rules]
        func = load_matcher(matcher) if isinstance(matcher, str) else matcher
        return cls(tuple(volatile_paths), tuple(pairs), func)

    def __bool__(self) -> bool:
        return bool(self.volatile_paths or self.regex_paths or self.matcher)

    @property
    def has_path_rules(self) -> bool:
        return bool(self.volatile_paths or self.regex_paths)

    def ignored(self, path: str) -> bool:
        """Whether the value at ``path`` is volatile (not compared)."""
        return self._ignored is not None and self._ignored.fullmatch(path) is not None

    def regex(self, path: str) -> Any:
        """The regex (RE2, :mod:`claudetrace.pattern`) the value at ``path`` must
        match, if a rule names the path; else ``None``."""
        for where, pattern in self._regexes:
            if where.fullmatch(path):
                return pattern
        return None

    def accepts(self, recorded: Any, live: Any) -> tuple[bool, str | None]:
        """Ask the user matcher; ``(accepted, reason for rejecting)``."""
        if self.matcher is None:
            return False, None
        try:
            verdict = self.matcher(recorded, live)
        except AssertionError as exc:
            return False, f"matcher rejected it: {exc}" if str(exc) else "matcher rejected it"
        except Exception as exc:  # a bug in the user's matcher is reported, not raised
            return False, f"matcher raised {type(exc).__name__}: {exc}"
        return bool(verdict), None if verdict else "matcher returned false"


__all__ = [
    "BadRule",
    "MatchRules",
    "UserMatcher",
    "compile_path",
    "load_matcher",
    "matcher_reference",
    "parse_regex_rule",
]
