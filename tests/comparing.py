"""Real sessions recorded through the proxy, to compare other records of them with.

The importers (Claude Code transcripts, claude-trace logs) are judged against
the proxied recording of the same session: :func:`proxied_sessions` runs
scenarios with the bundled CLI through a recording shim, :func:`same_figures`
compares the recordings' summary columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from claudetrace.store import Store
from claudetrace.testing.harness import make_home
from tests.record_fixtures import claudetrace, newest_recording, recording_ids
from tests.scenarios import run_scenario

#: Summary columns an imported session must share with its proxied recording.
FIGURES = (
    "turns",
    "tool_calls",
    "tool_errors",
    "model",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_creation_tokens",
)


def proxied_sessions(
    root: Path,
    api: Any,
    real_claude: Path,
    names: Sequence[str],
    *,
    around: Callable[[str], AbstractContextManager[dict[str, str]]] | None = None,
) -> tuple[Path, dict[str, str]]:
    """Run ``names`` through the proxy; the database and each scenario's recording id.

    Each scenario runs with the home ``root/home-NAME``; ``around(name)`` (a
    context manager yielding extra CLI environment) wraps its run.
    """
    db = root / "proxied.db"
    shim = root / "claude"
    claudetrace("shim", str(shim), "--real", str(real_claude), "--db", str(db))
    ids: dict[str, str] = {}
    for name in names:
        with (around or (lambda _: nullcontext({})))(name) as env:
            known = recording_ids(db)
            run_scenario(name, shim, api, home=make_home(root / f"home-{name}"), env=env)
            ids[name] = newest_recording(db, known)
    return db, ids


def same_figures(want: Any, got: Any, name: str, columns: Sequence[str] = FIGURES) -> None:
    """Assert that two recordings of one session agree on ``columns``."""
    for column in columns:
        assert getattr(got, column) == getattr(want, column), (name, column)


def tool_names(store: Store, rid: str) -> list[str]:
    """The names of the session's own tool calls, in order (subagents' left out)."""
    return list(_tool_names(store, rid))


def _tool_names(store: Store, rid: str) -> Iterator[str]:
    for ev in store.iter_events(rid):
        if ev.direction == "out" and ev.type == "assistant" and not ev.fields.parent_tool_use_id:
            yield from (ref.name or "" for ref in ev.fields.tools if ref.kind == "use")
