"""Options and error handling shared by the command modules."""

from __future__ import annotations

import functools
import math
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import click

from ..display import say
from ..errors import NO_ROOM_ERRNOS, ClaudeTraceError

F = TypeVar("F", bound=Callable[..., Any])

class Positive(click.ParamType[float]):
    """A positive finite number from ``least`` to ``most`` (seconds between
    refreshes, a replay's speed): nan, inf, 0 and negatives are refused, and so
    is a value so small or large that the sleep or the select it feeds overflows."""

    name = "number"

    def __init__(self, *, least: float = 0.001, most: float = 86400.0) -> None:
        self.least, self.most = least, most

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not (math.isfinite(number) and self.least <= number <= self.most):
            self.fail(f"{value} is not a number from {self.least:g} to {self.most:g}", param, ctx)
        return number


#: Seconds between two looks or refreshes (a millisecond to a day).
INTERVAL = Positive()


class Limit(click.IntRange):
    """How many rows at most, 0 for all: a number past what a database's integer
    holds (SQLite's INTEGER, PostgreSQL's BIGINT: 2**63 - 1) is all as well, since
    no store has that many, rather than an overflow in the query."""

    def __init__(self) -> None:
        super().__init__(min=0)

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        return 0 if number > 2**63 - 1 else number


#: The type of every ``-n/--limit``.
LIMIT = Limit()


def no_empty_path(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """A path option's or argument's value (or values), an empty one refused in one
    line: ``Path("")`` is the current folder, which a command would then import,
    or write a file as."""
    if value == "" or (isinstance(value, tuple) and "" in value):
        name = max(param.opts, key=len) if isinstance(param, click.Option) else (
            param.human_readable_name.rstrip("…"))
        fail(f"{name}: empty path", 2)
    return value


def since_option_ns(value: str | None) -> int | None:
    """A ``--since`` (a duration ago or an ISO date) as Unix ns; a bad one is a usage
    mistake: one line, exit 2, as ``usage --since`` and click's own usage errors."""
    if value is None:
        return None
    from ..telemetry.backfill import parse_since

    try:
        return parse_since(value)
    except ClaudeTraceError as exc:
        fail(str(exc), 2)
        return None  # (fail exits)


db_option = click.option(
    "--db",
    "db_url",
    envvar="CLAUDETRACE_DB",
    callback=no_empty_path,
    metavar="URL",
    help="Database: SQLAlchemy URL or SQLite file path [env: CLAUDETRACE_DB; "
    "default: claudetrace.db in the user data directory].",
)


def read_store(db_url: str | None) -> Any:
    """The store for a command that reads it, with waiting recordings stored first.

    A SQLite file named by --db / $CLAUDETRACE_DB that does not exist is an error
    naming it (a mistyped path must not look like an empty store); only the
    default database is made on first use.  Every read command opens the store
    here."""
    from ..indexer import open_settled_store

    return open_settled_store(db_url, create=False)


def echo_json(data: Any) -> None:
    """``data`` as indented JSON on stdout, written by msgspec in C (json's indenting
    encoder is Python: 8 s of 19 for 100,000 sessions), with what could control a
    terminal escaped as ``json.dumps`` escapes it (:func:`~..display.visible_json`).

    An object's members are made one at a time, and a value it holds twice (the
    same list under two names: ``usage session``'s entries as ccusage 18 and 20
    name them) is encoded and indented once: the bytes of the whole at once."""
    import msgspec

    encode, indented = msgspec.json.encode, msgspec.json.format
    if not isinstance(data, dict) or not data:
        _write_json(indented(encode(data), indent=2) + b"\n")
        return
    made: dict[int, bytes] = {}
    lead = b"{\n  "
    for key, value in data.items():
        raw = made.get(id(value))
        if raw is None:  # one level down: each line indented once more
            raw = made[id(value)] = indented(encode(value), indent=2).replace(b"\n", b"\n  ")
        _write_json(lead + encode(key) + b": ")
        _write_json(raw)
        lead = b",\n  "
    _write_json(b"\n}\n")


def echo_json_array(chunks: Iterable[list[Any]]) -> None:
    """The items of ``chunks`` as one JSON array on stdout, the bytes
    :func:`echo_json` writes of their list, written a chunk at a time as it
    comes: memory holds one chunk, never the whole array."""
    import msgspec

    first = True
    for chunk in chunks:
        if not chunk:
            continue
        # The chunk as a list, its brackets taken off: its items as they stand
        # in the whole array (indented once), to be joined by ",\n".
        raw = msgspec.json.format(msgspec.json.encode(chunk), indent=2)[2:-2]
        _write_json((b"[\n" if first else b",\n") + raw)
        first = False
    _write_json(b"[]\n" if first else b"\n]\n")


def _write_json(raw: bytes) -> None:
    """JSON text from msgspec on stdout, escaped as :func:`echo_json` says (char by
    char: any piece of a document can be written alone)."""
    from ..display import visible_json

    out = getattr(sys.stdout, "buffer", None)
    if out is not None and raw.isascii() and b"\x7f" not in raw:
        # Nothing to escape: the bytes as they are (a report of 10,000 sessions
        # is 18 MB, decoded and encoded again for nothing).
        sys.stdout.flush()
        out.write(raw)
        out.flush()
        return
    sys.stdout.write(visible_json(raw.decode()))
    sys.stdout.flush()


def fail(message: str, code: int = 1) -> None:
    """Print one line to stderr and exit with ``code``; what the message quotes
    (a path, a session, a recorded text) is escaped as every view escapes it."""
    say(f"claudetrace: {message}", err=True)
    sys.exit(code)


def reports_errors(func: F) -> F:
    """Turn a ClaudeTraceError into one stderr line and its exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ClaudeTraceError as exc:
            _no_room(exc, kwargs)
            fail(str(exc), exc.exit_code)
        except BrokenPipeError:
            sys.exit(141)
        except OSError as exc:
            if exc.errno not in NO_ROOM_ERRNOS:
                _no_room(exc, kwargs)
                raise
            # Output into a full disk: what did not fit would fail again at exit.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            fail(f"cannot write{f' {exc.filename}' if exc.filename else ''}: {exc.strerror}")
        except Exception as exc:
            _no_room(exc, kwargs)  # a database error no layer put into words
            raise

    return wrapper  # type: ignore[return-value]


def _no_room(exc: BaseException, kwargs: dict[str, Any]) -> None:
    """When the database found no room to write (the disk full, a file size limit),
    or could not be written at all (read-only), say so in one line naming it, and
    exit 1; else return.  Only the store's own
    errors are looked at: another's message may quote recorded text."""
    from ..errors import StoreError

    if not isinstance(exc, StoreError) and not _is_database_error(exc):
        return
    from ..config import resolve_url
    from ..store.engine import is_out_of_room, is_read_only, out_of_room_line, read_only_line

    if is_out_of_room(exc):
        fail(out_of_room_line(resolve_url(kwargs.get("db_url")),
                              opening="cannot open database" in str(exc)))
    if not isinstance(exc, StoreError) and is_read_only(exc):
        fail(read_only_line(resolve_url(kwargs.get("db_url")), exc))


def _is_database_error(exc: BaseException) -> bool:
    """An error of SQLite, SQLAlchemy or psycopg (told without importing them)."""
    return type(exc).__module__.split(".")[0] in ("sqlite3", "sqlalchemy", "psycopg")
