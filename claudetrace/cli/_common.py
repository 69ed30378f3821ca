"""Options and error handling shared by the command modules."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..errors import ClaudeTraceError

F = TypeVar("F", bound=Callable[..., Any])

db_option = click.option(
    "--db",
    "db_url",
    envvar="CLAUDETRACE_DB",
    metavar="URL",
    help="Database: SQLAlchemy URL or SQLite file path [env: CLAUDETRACE_DB; "
    "default: claudetrace.db in the user data directory].",
)


def fail(message: str, code: int = 1) -> None:
    """Print one line to stderr and exit with ``code``."""
    click.echo(f"claudetrace: {message}", err=True)
    sys.exit(code)


def reports_errors(func: F) -> F:
    """Turn a ClaudeTraceError into one stderr line and its exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ClaudeTraceError as exc:
            fail(str(exc), exc.exit_code)
        except BrokenPipeError:
            sys.exit(141)

    return wrapper  # type: ignore[return-value]
