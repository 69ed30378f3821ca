"""Values every engine can hold, whatever a host or the CLI sent.

A recorded line is stored as its exact bytes; the values *derived* from it (the
indexed fields, the summary figures) must fit the columns of SQLite and
PostgreSQL alike, or one strange line would make a whole recording unstorable.
Text loses what no engine takes (PostgreSQL refuses NUL, neither takes a lone
surrogate) by writing it as its JSON escape; numbers out of a column's range
are clamped, and those that are no number at all (NaN, infinities) become 0.
"""

from __future__ import annotations

import math
from typing import Any, Final

#: The range of a ``BIGINT`` (SQLite's INTEGER too).
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1


def text(value: str | None, size: int | None = None) -> str | None:
    """``value`` as text both engines store: NUL and lone surrogates escaped
    (``\\u0000``, ``\\ud800``), then cut to ``size`` characters."""
    if value is None:
        return None
    if "\x00" in value:
        value = value.replace("\x00", "\\u0000")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value if size is None or len(value) <= size else value[:size]


def ident(value: str | None, size: int) -> str | None:
    """An id as :func:`text` stores it, but one longer than ``size`` is cut to
    make room for a digest of the whole (``…~`` and 16 hex digits): ids that
    differ only past ``size`` stay apart (two calls whose message ids shared
    their first 128 characters were one row, and the import failed on it) and
    the same id is cut the same way wherever it is stored."""
    kept = text(value)
    if kept is None or len(kept) <= size:
        return kept
    import hashlib

    digest = hashlib.sha256(kept.encode("utf-8")).hexdigest()[:16]
    return f"{kept[:size - 17]}~{digest}"


def needs_care(value: str | None, size: int) -> bool:
    """True when :func:`text` would change ``value`` (too long, or a NUL in it;
    lone surrogates never reach here: :func:`claudetrace.events.parse_json`
    escapes them)."""
    return value is not None and (len(value) > size or "\x00" in value)


def number(value: Any) -> Any:
    """An int clamped to 64 bits, a float made finite; anything else unchanged."""
    if type(value) is int and INT64_MIN <= value <= INT64_MAX:  # most: one test
        return value
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return min(max(value, INT64_MIN), INT64_MAX)
    if isinstance(value, float):
        return value if math.isfinite(value) else 0.0
    return value


def storable(value: Any) -> Any:
    """``value`` (a column value, or JSON made of dicts, lists, text and numbers)
    with every string :func:`text` and every number :func:`number`."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {text(str(k)): storable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [storable(v) for v in value]
    return number(value)


def storable_columns(columns: dict[str, Any]) -> dict[str, Any]:
    """Column values (summary figures, metadata from the command line and the
    stream) as every engine takes them: :func:`storable` each."""
    return {name: storable(value) for name, value in columns.items()}
