"""Keeping secrets out of the store, exports and cassettes: what a secret is,
and redaction of text, argv and the environment.

A secret is found by detect-secrets' vendor plugins and by the few shapes below
they do not know (:func:`secret_spans`); how well is measured on a corpus of
secrets and look-alikes (``tests/fixtures/secrets``, ``tests/test_redact.py``).
:func:`may_hold_secret` tells at a glance that a text holds none, which is
nearly every line of a session: those lines are never parsed nor changed.

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
from typing import Any, Final

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

# -- what is a secret ----------------------------------------------------------------
#
# Vendor token formats come from detect-secrets (Yelp), through its plugins'
# public ``analyze_string``: each plugin is maintained upstream with its vendor's
# format.  Its keyword and high-entropy plugins are not used: tuned for source
# files, they take type annotations, prose and ids for secrets (measured on
# tests/fixtures/secrets: 9 of 58 look-alikes redacted by the keyword plugin).
# What the library does not know, or knows too narrowly for an agent's traffic,
# is below: Anthropic and OpenAI keys (its OpenAI plugin knows only the older
# keys, and its unbounded pattern takes seconds over a line of ``sk-sk-…``),
# GitHub and GitLab tokens (their plugins give the prefix, ``ghp``, for the
# token: ``analyze_string`` yields a pattern's group), credentials after
# ``Authorization:`` and ``Bearer``, passwords in URLs (an empty user too),
# values labelled as secrets, and the body of a PEM private key.
_LIBRARY_PLUGINS: Final = (
    "aws.AWSKeyDetector",
    "azure_storage_key.AzureStorageKeyDetector",
    "basic_auth.BasicAuthDetector",
    "jwt.JwtTokenDetector",
    "npm.NpmDetector",
    "pypi_token.PypiTokenDetector",
    "sendgrid.SendGridDetector",
    "slack.SlackDetector",
    "square_oauth.SquareOAuthDetector",
    "stripe.StripeDetector",
)

#: The last word of a label whose value is a secret (``DB_PASSWORD=``,
#: ``"client_secret":``, ``X-Api-Key:``, ``SecretAccessKey``); ``tokens``,
#: ``secretary``, ``passwordless`` or ``password_min_length`` are not labels.
_LABEL_WORD: Final = (
    r"(?:(?:api|access|secret|private|client|auth|account|service|master|signing"
    r"|encryption|license|app)[_\-]?(?:access[_\-]?)?key"
    r"|(?:access|refresh|auth|id|api|bearer|session|csrf)?[_\-]?token"
    r"|secret|password|passwd|pass|credentials?)"
)
#: A label: :data:`_LABEL_WORD` as a word of its own, or after ``_ - .``
#: (``DB_PASSWORD``, ``x-api-key``), whatever words come before.
_LABEL: Final = rf"(?<![A-Za-z0-9]){_LABEL_WORD}(?![A-Za-z0-9])"

#: Own patterns; the named group ``s`` is what is hidden (the whole match when
#: there is none): the label or scheme before it stays readable.  Every
#: repetition that may start again at each of a run's characters is bounded, so
#: that a long run costs a bounded amount a character, not its length.
_PATTERNS: Final = [
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,512}"),
    re.compile(r"\bsk-[A-Za-z0-9_\-]{16,512}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,255}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,255}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,255}"),
    re.compile(r"\bgl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-[A-Za-z0-9_\-]{20,1024}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(
        r"(?i)authorization[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"']?"
        r"(?:(?:basic|bearer|token|digest)[ \t]{1,4})?(?P<s>[A-Za-z0-9._~+/\-]{8,4096}=*)"),
    re.compile(r"(?i)\bbearer[ \t]{1,4}"
               r"(?P<s>(?=[A-Za-z._~+/\-]{0,512}[0-9])[A-Za-z0-9._~+/\-]{12,4096}=*)"),
    _URL_PASSWORD := re.compile(
        r"(?i)\b[a-z][a-z0-9+.\-]{0,30}://[^\s/?#@:]{0,256}:(?P<s>[^\s/?#@]{1,256})@"),
    _LABELLED_VALUE := re.compile(
        rf"(?i){_LABEL}[\"'\]]{{0,2}}[ \t]{{0,4}}(?P<op>:=|=>|[:=])[ \t]{{0,4}}"
        r"(?:\"(?P<s>[^\"\n]{4,500})\"|'(?P<q>[^'\n]{4,500})'|(?=(?P<u>[^\s\"'&,;()\[\]{}<>]{6,500}))(?P=u)(?![(\[]))"),
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?P<s>.+?)(?=-----END|\Z)",
               re.DOTALL),
]
#: Values that name a type, a constant or nothing rather than hold a secret.
_NOT_VALUES: Final = frozenset({
    "true", "false", "null", "none", "nil", "undefined", "str", "string", "bytes", "int",
    "optional", "secretstr", "required", "redacted", "[redacted]", "changeme", "example",
})


def _is_literal(value: str, *, quoted: bool) -> bool:
    """Whether a labelled ``value`` can be a secret rather than a reference to
    one (``$PASSWORD``, ``${X}``, ``{{x}}``, ``os.environ[…]``), a type, a figure
    (``max_tokens: 4096`` has no label, ``pin: 1234`` has no letter), a mask
    (``********``) or a word of prose (a value neither quoted nor assigned
    needs a digit, a capital or a sign)."""
    if value.lower() in _NOT_VALUES or value.startswith(("$", "%", "<", "{")):
        return False
    if "(" in value or "{{" in value or not any(c.isalpha() for c in value):
        return False
    if quoted:
        return True
    return not (value.isalpha() and value.islower())


_LABEL_KEY: Final = re.compile(rf"(?i){_LABEL}\Z")


def labelled_secret(key: str, value: str) -> bool:
    """Whether ``value``, stored under ``key`` in a JSON object (an MCP server's
    ``env``, a tool's input), is a secret by its label: ``{"DB_PASSWORD": …}``."""
    return (len(value) >= 4 and _LABEL_KEY.search(key) is not None
            and value != REDACTED and _is_literal(value, quoted=True))


_plugins: list[Any] | None = None


def _library_plugins() -> list[Any]:
    """The detect-secrets plugins, imported on first use: the library loads its
    whole scanning core (0.2 s), which a line without a hint never needs."""
    global _plugins
    if _plugins is None:
        from importlib import import_module

        _plugins = []
        for name in _LIBRARY_PLUGINS:
            module, _, cls = name.rpartition(".")
            _plugins.append(getattr(import_module(f"detect_secrets.plugins.{module}"), cls)())
    return _plugins


#: The library's patterns are not all bounded (a JSON Web Token's parts are
#: ``+``): they see a text a line at a time, a long line in windows of
#: :data:`_WINDOW` characters that overlap by :data:`_OVERLAP` (longer than any
#: of their secrets), so that a hostile line costs a bounded time a character.
_WINDOW: Final = 4096
_OVERLAP: Final = 1024


def _pieces(text: str) -> Iterator[tuple[int, str]]:
    """``(offset, piece)`` of ``text``: its lines, long ones in windows."""
    at = 0
    for line in text.split("\n"):
        if len(line) <= _WINDOW:
            yield at, line
        else:
            step = _WINDOW - _OVERLAP
            for start in range(0, len(line) - _OVERLAP, step):
                yield at + start, line[start:start + _WINDOW]
        at += len(line) + 1


def secret_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds secrets: sorted, non-overlapping ``(start, end)``."""
    spans: list[tuple[int, int]] = []
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            group = next((g for g in ("s", "q", "u") if g in pattern.groupindex
                          and match.group(g) is not None), None)
            start, end = match.span(group) if group else match.span()
            # A labelled value or a URL's password may be a reference to one.
            if pattern is _LABELLED_VALUE or pattern is _URL_PASSWORD:
                # An unquoted value after ``:`` may be prose ("the secret: keep
                # it short"), after ``=`` it is assigned.
                quoted = group != "u" or ("op" in pattern.groupindex and match["op"] != ":")
                if not _is_literal(text[start:end], quoted=quoted):
                    continue
            if start < end:
                spans.append((start, end))
    for start, piece in _pieces(text):
        for plugin in _library_plugins():
            for value in set(plugin.analyze_string(piece)):
                if not value or len(value) < 4:
                    continue
                at = piece.find(value)
                while at >= 0:
                    spans.append((start + at, start + at + len(value)))
                    at = piece.find(value, at + len(value))
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


# -- telling at a glance that a text holds none --------------------------------------

#: What every secret :func:`secret_spans` finds has in the text, in lower case:
#: a prefix of a vendor's format, a word of a label followed (after closing
#: quotes or brackets, which JSON may write with a backslash, and blanks) by
#: ``:`` or ``=``, a URL's user info, or a header's name.  Each is ASCII made of
#: characters JSON writes as themselves outside ``\\u`` and ``\\/`` escapes.
#: Each pattern starts with one letter, a rare one in a session's text, and
#: looks behind for the letters before it: ``re`` finds a pattern's first letter
#: at the speed of ``find`` and tries the rest only there (one alternation of
#: words that start with different letters is tried at every position, ten
#: times slower).  All but the last are searched in the text in lower case.
_TAIL: Final = rb"[\"'\]\\ \tt]{0,12}[:=]"
_HINT_SOURCES: Final = (
    rb"k(?:(?<=sk)-|_live_|(?<=tok)en" + _TAIL + rb"|(?<=[a-z_\-]k)ey" + _TAIL
    + rb"|(?<=private k)ey)",                           # sk-, Stripe, labels, PEM
    rb"g(?:ithub_pat_|h[pousr]_|(?<=sg)\.|r1348941|(?<=pypi-ag)"
    rb"|l(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-)",  # GitHub, SendGrid, GitLab, PyPI
    rb"r(?:(?<=secr)et" + _TAIL + rb"|(?<=cr)edentials?" + _TAIL + rb"|(?<=bearer))",
    rb"p(?:ass(?:word|wd)?" + _TAIL + rb"|(?<=sq0cs)p-)",  # labels, Square
    rb"/(?:(?<=:/)/[^\s/@]*:[^\s/@]*@|(?<=hooks\.slack\.com/)services)",  # URL user info
    rb"z(?<=authoriz)ation",
    rb"w(?<=aw)s",
    rb"xox",
    rb"j(?<=eyj)",
    rb"A(?:KIA|BIA|CCA|SIA|3T)",                        # AWS key ids (case matters)
)
_HINT_PATTERNS: Final = tuple(re.compile(source) for source in _HINT_SOURCES)
_HINT_TEXT: Final = tuple(re.compile(source.decode()) for source in _HINT_SOURCES)
#: Characters case-insensitive matching takes for an ASCII letter that lower()
#: does not turn into it (U+0130 and U+0131 for i, U+017F for s, U+212A for k).
_CASE_TWINS: Final = ("\u0130", "\u0131", "\u017f", "\u212a")


def may_hold_secret(text: str) -> bool:
    """False when :func:`redact_text` certainly finds nothing in ``text``, nor in
    any string a JSON text holds written without ``\\u`` or ``\\/`` escapes.

    One search a hint over the text in lower case, many times faster than the
    detectors (a session's lines nearly all lack every hint).
    """
    if not text.isascii() and any(twin in text for twin in _CASE_TWINS):
        return True
    low = text.lower()
    return (any(pattern.search(low) for pattern in _HINT_TEXT[:-1])
            or _HINT_TEXT[-1].search(text) is not None)


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
    :attr:`LineBatch.lower` (and its text its part of :attr:`LineBatch.text`),
    and no hint pattern matches a newline.
    """
    found: set[int] = set()
    for pattern in _HINT_PATTERNS[:-1]:
        found.update(batch.lines_matching(pattern, lower=True))
    found.update(batch.lines_matching(_HINT_PATTERNS[-1]))
    return found


_SECRET_FLAG: Final = re.compile(
    r"(?i)^--?[a-z0-9-]*(api-?key|token|secret|password|passwd|credential|auth)[a-z0-9-]*$"
)
_SECRET_NAME: Final = re.compile(r"(?i)(key|token|secret|password|passwd|credential|auth|cookie)")


def redact_text(text: str) -> str:
    """Replace every secret in ``text`` with ``[REDACTED]`` (a label, scheme or
    header name before it stays); ``text`` itself when it holds none."""
    if not may_hold_secret(text):
        return text
    spans = secret_spans(text)
    if not spans:
        return text
    out: list[str] = []
    at = 0
    for start, end in spans:
        out.append(text[at:start])
        out.append(REDACTED)
        at = end
    out.append(text[at:])
    return "".join(out)


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
