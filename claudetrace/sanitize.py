"""Record-time sanitising: make a cassette safe to commit and portable to another machine.

A cassette saved for tests must not carry secrets or the recording machine's
paths.  :class:`Sanitizer` rewrites every event line and the header:

- secrets: the patterns of :mod:`claudetrace.redact` (API keys, tokens, bearer
  headers, ``password=…``), literal values of secret-looking environment
  variables, and patterns the project configures, become ``[REDACTED]``;
- paths: the working directory, the home directory and the temp directory become
  stable placeholders (:data:`CWD`, :data:`HOME`, :data:`TMP`), as does the CLI's
  per-project folder name derived from the cwd (``-home-dev-project``).

The placeholders are ordinary absolute paths so that host code doing path
arithmetic on them keeps working, and the header names them as ``cwd`` and
``home``: the replay engine maps exactly those header paths to the live working
and home directories (:class:`claudetrace.replay.normalize.PathMap`), so a
sanitised cassette replays on any machine.

JSON lines are rewritten value by value, never by text substitution on the raw
line, so a replacement can never break a string's escaping.  A line with nothing
to hide keeps its exact bytes; a changed line is re-serialised in the spelling it
came in (the CLI's compact JSON or the Python SDK's spaced JSON) when that can be
recognised.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .cassette import Cassette
from .model.events import Event, parse_json
from .model.protocol import project_slug
from .pattern import linear_regex
from .redact import (
    REDACTED,
    LineBatch,
    labelled_secret,
    lines_may_hold_secret,
    may_hold_secret,
    redact_text,
    secret_values,
)

#: Placeholder for the recording's home directory (as in the reference samples).
HOME: Final = "/home/dev"
#: Placeholder for the recording's working directory.
CWD: Final = "/home/dev/project"
#: Placeholder for the temporary directory.
TMP: Final = "/tmp"

#: Header fields that describe the recording machine and are dropped.
MACHINE_FIELDS: Final = ("host", "pid", "env")

#: A character JSON writes escaped: a literal holding one may be spelled otherwise.
_ESCAPED: Final = re.compile(r'["\\\x00-\x1f]')
#: The escapes after which a JSON string's text is not spelled as itself.
_ESCAPES: Final = re.compile(rb"\\[u/]")
# A path starts where no path name precedes it ("/app" is not in "/usr/app") and
# ends where a name cannot continue; a trailing '.' ends it only when no name
# character follows ("in /x/proj." vs "/x/proj.txt").
_PATH_START: Final = r"(?<![A-Za-z0-9_.\-])"
_PATH_END: Final = r"(?![A-Za-z0-9_\-]|\.[A-Za-z0-9_])"

# JSON spellings to try when re-serialising a changed line: the CLI's
# JSON.stringify (compact, raw UTF-8) and Python's json.dumps defaults.
_STYLES: Final = (
    {"separators": (",", ":"), "ensure_ascii": False},
    {"separators": (", ", ": "), "ensure_ascii": True},
    {"separators": (", ", ": "), "ensure_ascii": False},
    {"separators": (",", ":"), "ensure_ascii": True},
)


@dataclass(frozen=True)
class Sanitizer:
    """Replaces secrets and machine paths in text, JSON values, lines and cassettes.

    ``paths`` pairs a real directory with its placeholder; ``literals`` are exact
    secret strings; ``patterns`` are extra regular expressions whose matches are
    redacted (group 1, when the pattern has groups, is kept as a prefix, like the
    built-in ``key=value`` pattern).
    """

    paths: tuple[tuple[str, str], ...] = ()
    literals: tuple[str, ...] = ()
    patterns: tuple[Any, ...] = ()  # compiled (RE2 for a user's, claudetrace.pattern)
    secrets: bool = True
    _path_re: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)
    #: Whether :meth:`_untouched` may tell a clean line from its text alone.
    _glance: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Longest first, so a cwd inside the home is replaced as a whole.
        pairs = sorted(
            {(old, new) for old, new in self.paths if len(old) > 1 and old != new},
            key=lambda pair: len(pair[0]),
            reverse=True,
        )
        object.__setattr__(self, "paths", tuple(pairs))
        if pairs:
            alternation = "|".join(re.escape(old) for old, _ in pairs)
            regex = re.compile(f"{_PATH_START}(?:{alternation}){_PATH_END}")
            object.__setattr__(self, "_path_re", regex)
        # Secrets alone (no paths, no patterns of the user's), and literals JSON
        # writes as themselves (no quote, backslash or control character).
        glance = not pairs and not self.patterns and not any(
            _ESCAPED.search(literal) for literal in self.literals)
        object.__setattr__(self, "_glance", glance)

    @classmethod
    def for_recording(
        cls,
        *,
        cwd: str | None = None,
        home: str | None = None,
        tmp: str | None = None,
        extra_paths: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
        patterns: Iterable[str | re.Pattern[str]] = (),
        secrets: bool = True,
    ) -> Sanitizer:
        """A sanitiser for a recording made in ``cwd`` with ``home`` and ``tmp``.

        ``extra_paths`` maps further real directories to placeholders; ``environ``
        contributes the values of its secret-looking variables as literals.
        """
        pairs: list[tuple[str, str]] = []
        for real, placeholder in (extra_paths or {}).items():
            pairs.append((_clean(real), placeholder))
        if tmp:
            for real in _aliases(tmp):
                pairs.append((real, TMP))
        if home:
            for real in _aliases(home):
                pairs.append((real, HOME))
        if cwd:
            # A cwd that is the home itself keeps the home's placeholder, so the
            # replay engine's cwd and home mappings agree.
            target = HOME if home and _clean(cwd) == _clean(home) else CWD
            for real in _aliases(cwd):
                pairs.append((real, target))
                pairs.append((project_slug(real), project_slug(target)))
        compiled = tuple(linear_regex(p, what="redaction pattern") if isinstance(p, str) else p
                         for p in patterns)
        literals = tuple(secret_values(environ)) if environ is not None and secrets else ()
        return cls(paths=tuple(pairs), literals=literals, patterns=compiled, secrets=secrets)

    # -- text and values -----------------------------------------------------------

    def text(self, value: str) -> str:
        """``value`` with secrets redacted and machine paths replaced."""
        for literal in self.literals:
            if literal in value:
                value = value.replace(literal, REDACTED)
        if self.secrets:
            value = redact_text(value)
        for pattern in self.patterns:
            value = _redact(pattern, value)
        if self._path_re is not None:
            table = dict(self.paths)
            value = self._path_re.sub(lambda m: table[m.group()], value)
        return value

    def value(self, obj: Any) -> Any:
        """A JSON value with every string (keys included) sanitised."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            if self.secrets:
                return {self.text(k): REDACTED if isinstance(v, str) and labelled_secret(k, v)
                        else self.value(v) for k, v in obj.items()}
            return {self.text(k): self.value(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.value(v) for v in obj]
        return obj

    def line(self, data: bytes) -> bytes:
        """One event line sanitised; the same bytes when nothing needed hiding."""
        if self._untouched(data):
            return data
        obj = parse_json(data)
        if obj is None or not isinstance(obj, (dict, list)):
            # Not JSON (stderr text, a partial line): plain text replacement.
            # surrogateescape keeps bytes that are not UTF-8 as they were.
            text = data.decode("utf-8", errors="surrogateescape")
            clean = self.text(text)
            return data if clean == text else clean.encode("utf-8", errors="surrogateescape")
        clean_obj = self.value(obj)
        if clean_obj == obj:
            return data
        return _dumps_like(data, obj, clean_obj)

    def event(self, event: Event) -> Event:
        """``event`` with its line sanitised (a new event when it changed)."""
        data = self.line(event.data)
        if data is event.data:
            return event
        return Event(event.seq, event.direction, event.t_ns, data, event.eol, event.wall_ns)

    def lines(self, lines: Sequence[bytes]) -> list[bytes]:
        """:meth:`line` of each of ``lines``; those :meth:`_untouched` holds for
        are told a batch at a time (:meth:`_suspects`) and given back as they are."""
        out = list(lines)
        for index in sorted(self._suspects(lines)):
            out[index] = self.line(lines[index])
        return out

    def _suspects(self, lines: Sequence[bytes]) -> set[int] | range:
        """Indices of ``lines`` that :meth:`_untouched` may not hold for; every
        other line it holds for.  ASCII lines (nearly all) are searched together,
        in a :class:`~claudetrace.redact.LineBatch`, for what :meth:`_untouched`
        looks for in each: the ``\\u`` and ``\\/`` escapes, the literals (ASCII
        text is its own UTF-8; none holds a newline: see ``_glance``), and the
        secrets' hints."""
        if not self._glance:
            return range(len(lines))
        batch = LineBatch(lines)
        apart: list[int] = []
        together: Sequence[int] = range(len(lines))
        if not batch.text.isascii():
            together = []
            for index, line in enumerate(lines):
                (together if line.isascii() else apart).append(index)
            batch = LineBatch([lines[index] for index in together])
        found: set[int] = set(batch.lines_matching(_ESCAPES))
        for literal in self.literals:
            found.update(batch.lines_matching(re.compile(re.escape(literal.encode()))))
        if self.secrets:
            found |= lines_may_hold_secret(batch)
        suspects = {together[index] for index in found}
        suspects.update(index for index in apart if not self._untouched(lines[index]))
        return suspects

    def _untouched(self, data: bytes) -> bool:
        """True when :meth:`line` certainly gives ``data`` back unchanged, told
        from the line's text without parsing it (most lines of a session).

        Every string in a JSON line without ``\\u`` or ``\\/`` escapes is
        written in the line's text with each letter, digit, ``-``, ``_``, ``=``
        and ``:`` as itself, so a secret pattern's match or a literal
        (see ``_glance``) found in a string would also be found, by
        :func:`~claudetrace.redact.may_hold_secret` or as itself, in the text.  A
        line that is not JSON is its text.
        """
        if not self._glance or b"\\u" in data or b"\\/" in data:
            return False
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        if self.secrets and may_hold_secret(text):
            return False
        return not any(literal in text for literal in self.literals)

    def header(self, header: Mapping[str, Any]) -> dict[str, Any]:
        """A cassette header without machine details, naming the placeholders."""
        # The recorded cwd becomes its placeholder like any other string; naming
        # the home placeholder lets the replay engine map it to the live home.
        out = {k: self.value(v) for k, v in header.items() if k not in MACHINE_FIELDS}
        argv = out.get("argv")
        if isinstance(argv, list) and argv and isinstance(argv[0], str):
            # Where the CLI was installed says nothing the replay needs (it
            # compares arguments only), but names the machine: keep the name.
            out["argv"] = [os.path.basename(argv[0]) or argv[0], *argv[1:]]
        placeholders = {new for _, new in self.paths}
        if HOME in placeholders or CWD in placeholders:
            out["home"] = HOME
        out["sanitized"] = {
            "placeholders": sorted(p for p in placeholders if p.startswith("/")),
            "secrets": self.secrets,
            "patterns": len(self.patterns),
        }
        return out

    def cassette(self, cassette: Cassette) -> Cassette:
        """A sanitised copy of ``cassette`` (the original is not changed)."""
        return Cassette(
            header=self.header(cassette.header),
            events=[self.event(event) for event in cassette.events],
        )


def _redact(pattern: Any, value: str) -> str:
    if pattern.groups:
        return str(pattern.sub(lambda m: (m.group(1) or "") + REDACTED, value))
    return str(pattern.sub(REDACTED, value))


def _clean(path: str) -> str:
    text = os.path.normpath(os.fspath(path))
    return text if text == os.sep else text.rstrip(os.sep)


def _aliases(path: str) -> list[str]:
    """A directory and its resolved form (``/tmp`` may be a symlink, as on macOS)."""
    names = [_clean(path)]
    real = os.path.realpath(path)
    if real not in names:
        names.append(real)
    return [name for name in names if len(name) > 1]


def _dumps_like(original: bytes, obj: Any, clean: Any) -> bytes:
    """Serialise ``clean`` in the JSON spelling ``original`` used for ``obj``."""
    text = original.decode("utf-8", errors="replace")
    for style in _STYLES:
        try:
            if json.dumps(obj, **style) == text:  # type: ignore[arg-type]
                return json.dumps(clean, **style).encode("utf-8")  # type: ignore[arg-type]
        except (TypeError, ValueError):  # pragma: no cover - parsed JSON always dumps
            break
    return json.dumps(clean, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def default_tmp(environ: Mapping[str, str] | None = None) -> str:
    """The temp directory of a process with ``environ`` (``$TMPDIR``, else the system's)."""
    env = os.environ if environ is None else environ
    value = env.get("TMPDIR")
    return value if value and value != REDACTED else tempfile.gettempdir()


def sanitize_cassette(
    cassette: Cassette,
    *,
    environ: Mapping[str, str] | None = None,
    home: str | None = None,
    tmp: str | None = None,
    extra_paths: Mapping[str, str] | None = None,
    patterns: Sequence[str | re.Pattern[str]] = (),
) -> Cassette:
    """Sanitise a recorded cassette for committing next to tests.

    The working directory is the header's ``cwd``; ``home`` and ``tmp`` default to
    those of ``environ`` (the recording's environment snapshot, where claudetrace
    keeps ``HOME`` and ``TMPDIR``), else of this process.
    """
    env = os.environ if environ is None else environ
    cwd = cassette.header.get("cwd")
    home = home or _usable(env.get("HOME")) or os.path.expanduser("~")
    return Sanitizer.for_recording(
        cwd=cwd if isinstance(cwd, str) and cwd else None,
        home=home,
        tmp=tmp or default_tmp(env),
        extra_paths=extra_paths,
        # The snapshot's secret values are already hidden; this process's
        # environment (which the recorded child inherited) still has them.
        environ={**os.environ, **env},
        patterns=patterns,
    ).cassette(cassette)


def _usable(value: str | None) -> str | None:
    return value if value and value != REDACTED else None


__all__ = ["CWD", "HOME", "TMP", "Sanitizer", "default_tmp", "sanitize_cassette"]
