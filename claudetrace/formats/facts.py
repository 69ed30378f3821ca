"""The summary of one recording as labelled values, shared by ``show`` and the HTML report.

What a recording's source cannot know is said to be unknown, never shown as zero:
a Claude Code transcript has no exit status, stderr or control plane.
"""

from __future__ import annotations

import datetime as dt
import shlex
from typing import Any

from ..display import plural as plural  # said here as everywhere
from ..display import when as when  # said here as everywhere
from ..pricing import NO_COST as NO_COST  # the report's tokens tab says it too
from ..pricing import cost_text as cost_text  # said here as everywhere
from ..pricing import dollars
from ..store.links import NO_LINKS, Links

#: Shown for a value the recording's source cannot know.
UNKNOWN = "unknown"


def duration(ns: int | None) -> str:
    """A short duration for nanoseconds."""
    if ns is None:
        return "—"
    seconds = ns / 1e9
    return f"{seconds:.1f}s" if seconds < 120 else f"{seconds / 60:.1f}m"


def latency(seconds: float) -> str:
    """A latency people read: ``412 ms``, ``3.25 s``, ``66.2 s``, ``12.5 min``
    (:func:`claudetrace.ui.present.duration`, the pages' and the report's wording)."""
    # Loaded here: an unchanged re-import imports this module's helpers and must
    # not load the presentation (and session) model.
    from ..ui.present import duration_s

    return duration_s(seconds)


#: Sources that are files written beside the CLI (no process seen), and their names.
FILE_SOURCES = {"transcript": "Claude Code transcript", "claude-trace": "claude-trace log"}


def has_process(rec: Any) -> bool:
    """Whether the recording saw the CLI process (exit status, stderr, control plane)."""
    return rec.source not in FILE_SOURCES


def exit_text(rec: Any) -> str:
    """How the CLI process ended: ``0``, ``signal 9``, ``running`` while it runs,
    ``—`` when no exit was recorded, ``unknown`` for a source with no process."""
    if not has_process(rec):
        return UNKNOWN
    if rec.signal:
        return f"signal {rec.signal}"
    if rec.exit_code is not None:
        return str(rec.exit_code)
    return "running" if rec.status == "running" else "—"


def cost_source(rec: Any) -> str:
    """Where a stored recording's cost comes from: ``cli``, ``estimate`` or ``unknown``."""
    return str(rec.cost_origin)


def cost_usd(rec: Any) -> float | None:
    """A stored recording's cost in USD, None when unknown (never 0 for unknown)."""
    cost: float | None = rec.cost
    return cost


def money(usd: float | None, source: str, *, digits: int = 4) -> str:
    """``$0.1200``, ``$0.1200 (estimate)``, or ``unknown``."""
    if usd is None or source == UNKNOWN:
        return UNKNOWN
    return dollars(usd, digits=digits) + (" (estimate)" if source == "estimate" else "")


def command_text(argv: list[str] | None) -> str:
    """A command line as a shell would take it back (``--system-prompt ''`` shows)."""
    return shlex.join(argv or [])


def facts(rec: Any, links: Links = NO_LINKS) -> list[tuple[str, str]]:
    """Label / value pairs describing ``rec`` (a stored :class:`~claudetrace.store.Recording`)
    and its ``links`` to other sessions (:func:`claudetrace.store.links.links_of`)."""
    # The presentation model is loaded only by what shows facts (an unchanged
    # re-import, which imports this module's helpers, must not load it).
    from ..ui.outline import link_rows

    process = has_process(rec)
    rows = [
        ("recording", rec.id + (f"  ({rec.name})" if rec.name else "")),
        ("status", rec.status + (f" — {rec.status_reason}" if rec.status_reason else "")),
        ("started", f"{when(rec.started_ns)}  duration {duration(rec.duration_ns)}"),
    ]
    if process:
        rows += [
            ("command", command_text(rec.argv)),
            # An imported cassette may not say its pid or host: left out, never "None".
            ("cwd / host", f"{rec.cwd or '—'}"
             + (f"  on {rec.host}" if rec.host else "")
             + (f" (pid {rec.pid})" if rec.pid is not None else "")),
        ]
    else:
        origin = (rec.extra or {}).get("source_path") or "?"
        rows += [
            ("source", f"{FILE_SOURCES[rec.source]} {origin}"),
            ("cwd", rec.cwd or UNKNOWN),
        ]
    rows += [
        ("exit", exit_text(rec)),
        ("cli session", f"{rec.cli_session_id or '—'}  claude {rec.claude_code_version or '?'}"),
        *((row.label, row.text) for row in link_rows(links)),
        ("model / mode", f"{rec.model or '—'} / {rec.permission_mode or '—'}"),
        (
            "turns / tools",
            f"{plural(rec.turns, 'turn')} (prompt to result; "
            f"{plural(rec.num_turns, 'API round trip')} by the CLI's num_turns), "
            f"{plural(rec.model_calls, 'model call')}, "
            f"{plural(rec.tool_calls, 'tool call')} ({rec.tool_errors} failed)",
        ),
        (
            "tokens",
            f"in {rec.input_tokens} (+cache read {rec.cache_read_tokens}, "
            f"cache write {rec.cache_creation_tokens}), out {rec.output_tokens}",
        ),
        ("cost", cost_text(rec)),
        *_per_model(rec),
        ("events", f"{rec.event_count} lines, {rec.byte_count} bytes"
                   + (f" ({lost} bytes lost: not recorded)"
                      if (lost := getattr(rec, "lost_bytes", 0)) else "")),
    ]
    if not process:
        rows.append(("not known", "control plane, stderr and exit status (not in this file)"))
    if rec.tags:
        rows.insert(1, ("tags", ", ".join(f"{k}={v}" for k, v in rec.tags.items())))
    rows += [("warning", warning) for warning in rec.warnings]
    return rows


def _per_model(rec: Any) -> list[tuple[str, str]]:
    """One row per model when the session used several (after ``set_model``)."""
    models = rec.models or {}
    if len(models) < 2:
        return []
    rows = []
    source = cost_source(rec)
    for model, f in models.items():
        price = f.get("cost_usd")
        cost = money(None if price is None else float(price), source, digits=6)
        rows.append((
            f"  {model}",
            f"in {f.get('input', 0)} (+cache read {f.get('cache_read', 0)}, cache write "
            f"{f.get('cache_creation', 0)}), out {f.get('output', 0)}, {cost}",
        ))
    return rows


def session_record(rec: Any, links: Links = NO_LINKS,
                   cost: tuple[float | None, str] | None = None) -> dict[str, Any]:
    """A recording as the JSON object `sessions --json` prints, with its ``links``;
    ``cost``: its cost and where it comes from as the usage layer gives them
    (:func:`claudetrace.usage.recording_costs`), else the recording's own."""
    usd, source = (cost_usd(rec), cost_source(rec)) if cost is None else cost
    # Stored usage first, not folded yet: its turns, tool calls and events not known yet.
    indexing = bool(rec.indexing)
    return {
        "id": rec.id,
        "name": rec.name,
        "tags": rec.tags or {},
        "status": rec.status,
        "status_reason": rec.status_reason,
        "started_at": dt.datetime.fromtimestamp(rec.started_ns / 1e9, dt.timezone.utc).isoformat(),
        "started_ns": rec.started_ns,
        "ended_ns": rec.ended_ns,
        "duration_s": None if rec.duration_ns is None else rec.duration_ns / 1e9,
        "exit_code": rec.exit_code,
        "signal": rec.signal,
        "error": rec.error,
        "argv": rec.argv,
        "cwd": rec.cwd,
        "host": rec.host,
        "pid": rec.pid,
        "source": rec.source,
        "claudetrace_version": rec.claudetrace_version,
        "session_id": rec.cli_session_id,
        "claude_code_version": rec.claude_code_version,
        "model": rec.model,
        "permission_mode": rec.permission_mode,
        # The converted session's lines, not the transcript's: known with the fold.
        "events": None if indexing else rec.event_count,
        "bytes": None if indexing else rec.byte_count,
        "lost_bytes": rec.lost_bytes,
        "turns": None if indexing else rec.turns,
        "num_turns": None if indexing else rec.num_turns,
        "model_calls": rec.model_calls,
        "tool_calls": None if indexing else rec.tool_calls,
        "tool_errors": None if indexing else rec.tool_errors,
        "input_tokens": rec.input_tokens,
        "output_tokens": rec.output_tokens,
        "cache_read_tokens": rec.cache_read_tokens,
        "cache_creation_tokens": rec.cache_creation_tokens,
        "cost_usd": usd,
        "cost_source": source,
        "is_error": rec.is_error,
        "result_subtype": rec.result_subtype,
        "models": rec.models or {},
        "warnings": rec.warnings,
        "links": links_record(links),
        "indexing": indexing,
    }


def links_record(links: Links) -> dict[str, Any]:
    """A recording's links as `sessions --json` prints them: ``continues`` (an
    object or null), ``continued_in`` (a list), ``resumed_as`` and ``forked_as``
    (session ids joined into it); ``recording_id`` is null where the other
    session is not in the store, ``fork`` true where the later session is a
    fork of the earlier (``continues``: this one was forked from it)."""
    def other(link: Any) -> dict[str, Any]:
        return {"session_id": link.session_id, "recording_id": link.recording_id,
                "certain": link.certain, "fork": link.fork}

    return {
        "continues": None if links.continues is None else other(links.continues),
        "continued_in": [other(link) for link in links.continued_in],
        "resumed_as": list(links.resumed_as),
        "forked_as": list(links.forked_as),
    }
