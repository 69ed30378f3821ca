"""Putting claudetrace where a host expects ``claude``.

Two ways, for hosts whose ``cli_path`` takes a single executable:

- :func:`write_shim` writes a small executable script that runs the proxy (or the
  replay engine) in front of the real CLI, with the options baked in;
- argv[0] dispatch: a symlink named ``claude`` pointing at the ``claudetrace``
  executable proxies to ``$CLAUDETRACE_REAL_CLI``, else to the next ``claude`` on
  ``PATH`` that is not claudetrace itself (:func:`claudetrace.cli.launch.dispatch_as_claude`).

Version checks (``claude -v``) go straight to the real CLI, unrecorded, so the
SDK's version check sees the real answer and the session list stays clean.
"""

from __future__ import annotations

import os
import sys

from .config import REAL_CLI_ENV
from .errors import ClaudeTraceError

# The proxy started as ``claude`` (argv[0] dispatch) finds the real CLI with this
# module before it starts it: only what that needs is imported here.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

VERSION_FLAGS = ("-v", "--version")

#: How a shim's second line begins (after ``#!/bin/sh``).
SHIM_MARK = b"# claudetrace shim:"


class ShimError(ClaudeTraceError):
    """The shim cannot be written, or the real CLI cannot be found."""


def self_command() -> list[str]:
    """The argv prefix that runs this claudetrace (absolute paths, no PATH lookup).

    ``python -c``, not ``python -m claudetrace``: a shim runs it for every session,
    and ``-m`` imports :mod:`runpy` (with importlib.util, contextlib, collections,
    functools), as much work again as the proxy does before it starts the CLI.
    """
    return [sys.executable, "-c", "import sys; from claudetrace.cli import main; sys.exit(main())"]


def _on_path(program: str) -> str | None:
    """The executable ``program`` names on PATH (as :func:`shutil.which`, whose import
    would cost the ``claude`` symlink more than the rest of its start)."""
    from .spawn import which

    try:
        return which(program, os.environ)
    except OSError:
        return None


def _is_self(path: str, *, shims: bool = True) -> bool:
    """Whether ``path`` runs claudetrace: its own executable (or a ``claude`` link
    to it), or, with ``shims``, a shim that claudetrace wrote (one that replays, or
    records another CLI, does not run itself: it may be named as the real CLI)."""
    real = os.path.realpath(path)
    ours = {os.path.realpath(sys.argv[0])} if sys.argv and sys.argv[0] else set()
    script = _on_path("claudetrace")
    if script:
        ours.add(os.path.realpath(script))
    if real in ours:
        return True
    try:
        with open(real, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    if b"claudetrace shim" in head:
        return shims
    return b"from claudetrace.cli import main" in head  # its console script


def find_real_cli(
    explicit: str | None = None, *, how: str = "set CLAUDETRACE_REAL_CLI or pass --real PATH"
) -> str:
    """The real ``claude``: explicit path, ``$CLAUDETRACE_REAL_CLI``, or PATH minus us.

    ``how`` tells, when there is none, how the caller's user names it.
    """
    if explicit is not None and not explicit.strip():
        raise ShimError("the real claude CLI path given is empty: name the real claude")
    candidate = explicit or os.environ.get(REAL_CLI_ENV)
    if candidate:
        path = (None if os.path.dirname(candidate) else _on_path(candidate)) or candidate
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise ShimError(f"the real claude CLI {candidate!r} is not an executable file")
        if _is_self(path, shims=False):
            # A ``claude`` link to claudetrace would run itself, and that one itself…
            raise ShimError(f"the real claude CLI {candidate!r} is claudetrace itself (a "
                            "claude link to it): name the real claude")
        return os.path.abspath(path)
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        path = os.path.join(folder or ".", "claude")
        if os.path.isfile(path) and os.access(path, os.X_OK) and not _is_self(path):
            return os.path.abspath(path)
    raise ShimError(f"cannot find the real claude CLI: {how}")


def shim_script(
    command: list[str],
    *,
    real: str | None = None,
    env_defaults: Mapping[str, str] | None = None,
    stamp: str | os.PathLike[str] | None = None,
) -> str:
    """The text of a shim that execs ``command`` followed by the host's arguments.

    ``env_defaults`` are exported unless the caller's environment sets them;
    ``stamp`` is a file the shim appends a line to each time it starts a session.
    """
    import shlex

    quoted = " ".join(shlex.quote(part) for part in command)
    lines = [
        "#!/bin/sh",
        SHIM_MARK.decode() + " written by `claudetrace shim`; usable as the SDK's cli_path.",
    ]
    for name, value in (env_defaults or {}).items():
        if not name.isidentifier():
            raise ShimError(f"not an environment variable name: {name!r}")
        lines.append(f": ${{{name}:={shlex.quote(value)}}}; export {name}")
    if real is not None:
        # The SDK's version check goes straight to the real CLI, unrecorded.
        lines += [
            'if [ "$#" -eq 1 ]; then',
            '  case "$1" in -v|--version) exec ' + shlex.quote(real) + ' "$@" ;; esac',
            "fi",
        ]
    if stamp is not None:
        # One line per session started through the shim (not per version check).
        lines.append(f"echo >> {shlex.quote(str(stamp))}")
    lines.append(f'exec {quoted} "$@"')
    return "\n".join(lines) + "\n"


def proxy_command(
    real: str, *, db: str | None = None, name: str | None = None, tags: dict[str, str] | None = None
) -> list[str]:
    """The argv prefix of a recording shim (the host's arguments follow)."""
    command = [*self_command(), "proxy"]
    if db:
        command += ["--db", db]
    if name:
        command += ["--name", name]
    for key, value in (tags or {}).items():
        command += ["--tag", f"{key}={value}"]
    return [*command, "--", real]


def _replaceable(path: Path) -> bool:
    """Whether the file at ``path`` may be replaced by a shim: empty, or a shim."""
    with open(path, "rb") as handle:
        head = handle.read(4096)
    return not head or head.startswith(b"#!/bin/sh\n" + SHIM_MARK)


def write_shim(
    out: str | os.PathLike[str],
    command: list[str],
    *,
    real: str | None = None,
    env_defaults: Mapping[str, str] | None = None,
    stamp: str | os.PathLike[str] | None = None,
    force: bool = False,
) -> Path:
    """Write an executable shim at ``out`` (0755) and return its path.

    A file already there is replaced only when it is empty or a shim claudetrace
    wrote, unless ``force``: ``claudetrace shim victim.py`` replaced the script."""
    import stat
    from pathlib import Path
    from typing import IO

    from .cassette import file_to_replace, replace_file

    path = Path(out).expanduser().absolute()
    if path.is_dir():
        raise ShimError(f"{path} is a directory; give the shim's file name")
    try:
        # Written beside the file and renamed over it: a symlink's target gets the
        # shim (the symlink stays); /dev/null or a FIFO would be replaced, so no.
        target = file_to_replace(path)
        if target is None:
            raise ShimError(f"{path} is not a regular file; give the shim's file name")
        if not target.parent.is_dir():
            raise ShimError(f"cannot write shim {path}: no folder {target.parent} (make it first)")
        if real is not None and target.exists() and os.path.samefile(target, real):
            # ``claudetrace shim "$(command -v claude)"``: the real CLI would be gone,
            # and the shim would run itself.
            raise ShimError(f"{path} is the real claude CLI: a shim there would replace "
                            "it; write the shim elsewhere")
        if not force and target.exists() and not _replaceable(target):
            raise ShimError(f"{path} exists and is not a shim claudetrace wrote: give another "
                            "name, or --force to replace it")
        script = shim_script(command, real=real, env_defaults=env_defaults, stamp=stamp)

        def write(out: IO[str]) -> None:
            out.write(script)
            made = os.fstat(out.fileno()).st_mode
            os.fchmod(out.fileno(),
                      made | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH | stat.S_IRUSR)

        # Beside it and renamed: a full disk or a signal leaves no half shim.
        replace_file(target, write, mode=0o666)
    except OSError as exc:
        raise ShimError(f"cannot write shim {path}: {exc.strerror or exc}") from exc
    return path
