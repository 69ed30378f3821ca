"""Keeping secrets out of the store: redaction of argv and the environment.

The environment snapshot keeps every variable *name* (useful when debugging a
host) but a value only for an allow-list of harmless variables, and even those
values go through :func:`redact_text`.  argv is redacted by pattern and by the
value following flags that take secrets.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from itertools import accumulate
from typing import Final

REDACTED: Final = "[REDACTED]"

#: Environment variables whose values are kept (after pattern redaction).
ENV_VALUE_ALLOWLIST: Final = frozenset(
    {
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_MODEL",
        "CLAUDE_CODE_ENTRYPOINT",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "CLAUDE_AGENT_SDK_VERSION",
        "DISABLE_TELEMETRY",
        # Not secret, and needed to map the child's home and temp dir out of
        # cassettes saved for tests (see claudetrace.sanitize).
        "HOME",
        "TMPDIR",
        # The host's trace context: the recording's spans join that trace.
        "TRACEPARENT",
        "LANG",
        "LC_ALL",
        "OTEL_SERVICE_NAME",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_TRACES_EXPORTER",
        "OTEL_METRICS_EXPORTER",
        "PWD",
        "SHELL",
        "TERM",
        "TZ",
        "USER",
        "VIRTUAL_ENV",
    }
)

# Well-known secret shapes: Anthropic/OpenAI keys, GitHub and Slack tokens, AWS ids,
# JWTs, bearer tokens, and key=value pairs whose key says "secret".
_PATTERNS: Final = [
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/\-]{12,}=*"),
    re.compile(
        r"(?i)((?:api[_-]?key|token|secret|password|passwd|auth|credential)[A-Za-z_]*[=:]\s*)"
        r"[^\s&\"']{4,}"
    ),
]

#: What every match of :data:`_PATTERNS` starts with, in lower case, and what
#: must follow it in the match (None: anything): see :func:`may_hold_secret`.
_KEY_TAIL: Final = re.compile(r"[a-z_]*[=:]")
_HINTS: Final = (
    *((word, None) for word in ("sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
                                "xox", "akia", "eyj", "bearer")),
    ("api", re.compile(r"[_-]?key[a-z_]*[=:]")),
    *((word, _KEY_TAIL) for word in ("token", "secret", "passw", "auth", "credential")),
)
#: Characters case-insensitive matching takes for an ASCII letter that lower()
#: does not turn into it (U+0130 and U+0131 for i, U+017F for s).
_CASE_TWINS: Final = ("\u0130", "\u0131", "\u017f")


def may_hold_secret(text: str) -> bool:
    """False when :func:`redact_text` certainly finds nothing in ``text``, nor in
    any string a JSON text holds written without ``\\u`` escapes.

    Each pattern's match starts with letters, digits, ``-``, ``_``, ``=`` or ``:``,
    which JSON writes as themselves; looking for those starts with ``str.find``
    is many times faster than running the patterns (a regular expression that
    may start with any of a dozen words is tried at every position).
    """
    if not text.isascii() and any(twin in text for twin in _CASE_TWINS):
        return True
    low = text.lower()
    for word, tail in _HINTS:
        at = low.find(word)
        while at >= 0:
            if tail is None or tail.match(low, at + len(word)):
                return True
            at = low.find(word, at + 1)
    return False


#: :data:`_HINTS` as patterns over ASCII text in lower case, each matching where
#: a hint's word stands followed by its tail.  ``re`` looks for a pattern's first
#: letter at the speed of ``find`` and tries the rest only there, so each pattern
#: starts with the rarest letter of its words in a session's text (``k``, not the
#: ``t`` of ``token``), the letters before it in a look-behind: seven passes over
#: the text where the words one by one took thirteen.
_TAIL: Final = rb"[a-z_]*[=:]"
_HINT_PATTERNS: Final = tuple(re.compile(pattern) for pattern in (
    rb"k(?:(?<=sk)-|(?<=ak)ia|(?:(?<=apik)|(?<=api[_-]k))ey" + _TAIL
    + rb"|(?<=tok)en" + _TAIL + rb")",                               # sk- akia api…key token
    rb"j(?<=eyj)",                                                    # eyj
    rb"xox",                                                          # xox
    rb"w(?<=passw)" + _TAIL,                                          # passw
    rb"b(?:(?<=github)_pat_|earer)",                                  # github_pat_ bearer
    rb"h(?:(?<=gh)[pousr]_|(?<=auth)" + _TAIL + rb")",                # gh?_ auth
    rb"r(?:(?<=secr)et|(?<=cr)edential)" + _TAIL,                     # secret credential
))


class LineBatch:
    """Lines of ASCII text joined by newlines: one search over all of them tells
    which lines hold what, instead of a search a line (whose own cost, not the
    text's length, is most of the time of a short line).

    A match of a pattern that cannot match a newline (nor look behind one) lies
    inside one line and sees nothing of another, so :meth:`lines_matching` gives
    exactly the lines the pattern matches in — a line that holds a newline of
    its own too: a line's place is counted from the lengths of those before it.
    """

    def __init__(self, lines: Sequence[bytes]) -> None:
        self.lines = lines
        self.text = b"\n".join(lines)
        self._lower: bytes | None = None
        self._starts: list[int] | None = None

    @property
    def lower(self) -> bytes:
        """The text with ASCII letters in lower case (offsets as in :attr:`text`)."""
        if self._lower is None:
            self._lower = self.text.lower()
        return self._lower

    def lines_matching(self, pattern: re.Pattern[bytes], *, lower: bool = False) -> Iterator[int]:
        """Indices of the lines in which ``pattern`` (which must not match a
        newline) matches, in order; searched in :attr:`lower` if ``lower``."""
        text = self.lower if lower else self.text
        search = pattern.search
        found = search(text)
        while found is not None:
            if self._starts is None:
                self._starts = [0, *accumulate(len(line) + 1 for line in self.lines)]
            index = bisect_right(self._starts, found.start()) - 1
            yield index
            found = search(text, self._starts[index + 1])


def lines_may_hold_secret(batch: LineBatch) -> set[int]:
    """The indices of the lines of ``batch`` whose text :func:`may_hold_secret`
    holds for: a line is ASCII (no case twins), its ``lower()`` is its part of
    :attr:`LineBatch.lower`, and each of :data:`_HINT_PATTERNS` matches there
    where a hint's word is followed by its tail — none of which is a newline.
    """
    found: set[int] = set()
    for pattern in _HINT_PATTERNS:
        found.update(batch.lines_matching(pattern, lower=True))
    return found


_SECRET_FLAG: Final = re.compile(
    r"(?i)^--?[a-z0-9-]*(api-?key|token|secret|password|passwd|credential|auth)[a-z0-9-]*$"
)
_SECRET_NAME: Final = re.compile(r"(?i)(key|token|secret|password|passwd|credential|auth|cookie)")


def redact_text(text: str) -> str:
    """Replace every secret-looking substring of ``text`` with ``[REDACTED]``."""
    for pattern in _PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


def redact_argv(argv: list[str]) -> list[str]:
    """argv with secret values hidden (``--api-key X``, ``--token=X``, key shapes)."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if "=" in arg and arg.startswith("-"):
            flag, _, _value = arg.partition("=")
            if _SECRET_FLAG.match(flag):
                out.append(f"{flag}={REDACTED}")
                continue
        elif _SECRET_FLAG.match(arg):
            hide_next = True
        out.append(redact_text(arg))
    return out


def secret_values(env: Mapping[str, str], *, min_length: int = 8) -> list[str]:
    """Values of variables whose names look secret (``*_API_KEY``, ``*TOKEN``…).

    For scrubbing text where a secret may appear verbatim in a shape no pattern
    knows; short values are skipped so that ``TOKEN=1`` does not blank every ``1``.
    """
    values = {
        value
        for name, value in env.items()
        if _SECRET_NAME.search(name) and len(value) >= min_length and value != REDACTED
    }
    return sorted(values, key=len, reverse=True)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Every variable name; the value only for allow-listed, non-secret names."""
    snapshot: dict[str, str] = {}
    for name in sorted(env):
        if name in ENV_VALUE_ALLOWLIST and not _SECRET_NAME.search(name):
            snapshot[name] = redact_text(env[name])
        else:
            snapshot[name] = REDACTED
    return snapshot
