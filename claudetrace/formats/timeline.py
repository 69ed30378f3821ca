"""A Claude Code session's entries in time order, over all its files.

The main thread is read in its own order (its clock can step back by a few ms
between an entry and its attachments), over the files of a resumed session
(entries they repeat taken once); each side chain (a subagent's file, or CLI
1.0.x's ``isSidechain`` lines in the main file) is merged in by time.  Each
entry comes with its time: its ``timestamp``, else the one before it (at the
start of a file, the first one after).  Everything is read as a stream: one
entry of each file at a time.
"""

from __future__ import annotations

import datetime as dt
import heapq
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..model.content import blocks
from .jsonl import JsonlFile, parse_object

#: The latest time the store keeps: ns since the epoch in a signed 64-bit integer
#: (2262-04-11).  Times before the epoch are not kept either: no transcript was
#: written then, so such a timestamp is a damaged one.
LATEST_NS = 2**63 - 1


def timestamp_ns(value: Any) -> int | None:
    """An entry's ISO 8601 ``timestamp`` in ns since the epoch (UTC when unzoned);
    None when it has none, or one that is not a time or out of range
    (:func:`out_of_range`)."""
    if not isinstance(value, str):
        return None
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    ns = int(when.timestamp() * 1_000_000) * 1000
    return ns if 0 <= ns <= LATEST_NS else None


def out_of_range(value: Any) -> bool:
    """Whether ``value`` is an ISO 8601 time the store cannot keep (before 1970, after
    2262-04-11): a damaged timestamp, not a missing one."""
    if not isinstance(value, str):
        return False
    if "1970" < value[:4] < "2262" and value[:4].isdigit():
        return False  # whatever its zone, within range: not parsed a second time
    try:
        dt.datetime.fromisoformat(value)
    except ValueError:
        return False
    return timestamp_ns(value) is None



#: An entry with its time (None: its file has no timestamp at all yet) and side chain.
Item = tuple[int | None, dict[str, Any], str | None]


def timed(entries: Iterable[dict[str, Any]], chain: str | None = None) -> Iterator[Item]:
    """Entries with their times: a line without a timestamp takes the one before it;
    lines before the first timestamp (a ``summary``) take the first one."""
    held: list[dict[str, Any]] = []
    last: int | None = None
    for entry in entries:
        when = timestamp_ns(entry.get("timestamp"))
        if when is None:
            if last is None:
                held.append(entry)
                continue
            when = last
        last = when
        if held:
            for early in held:
                yield when, early, chain
            held = []
        yield when, entry, chain
    for early in held:
        yield None, early, chain


def main_items(files: Iterable[Iterable[dict[str, Any]]]) -> Iterator[Item]:
    """The main thread's entries over its files (a resumed session's files repeat
    earlier entries: each uuid is taken once, and a ``system/resume`` entry,
    :func:`resume_marker`, says where the copy ends); lines marked ``isSidechain`` (CLI
    1.0.x wrote its subagents' lines into the main file) are put in side chains."""
    seen: set[str] = set()
    root: dict[str, str] = {}
    for entries in files:
        copied = 0
        # A later file's lines before its first new entry (a resumed session's
        # ``summary``) go where the copy ends.
        held: list[Item] | None = [] if seen else None
        for when, entry, _chain in timed(entries):
            uid = entry.get("uuid")
            if isinstance(uid, str):
                if uid in seen:
                    copied += 1
                    continue
                seen.add(uid)
            if held is not None:
                if entry.get("type") not in _ENTRIES:
                    held.append((when, entry, None))
                    continue
                if copied:
                    # A resumed session's file: where the copy of the earlier entries ends.
                    yield when, resume_marker(entry, copied), None
                for early in held:
                    yield when, early[1], None
                held = None
            chain = None
            if entry.get("isSidechain") is True:
                agent = entry.get("agentId")
                up = entry.get("parentUuid")
                if isinstance(agent, str):
                    chain = f"agent-{agent}"
                elif isinstance(up, str) and up in root:
                    chain = root[up]
                else:
                    chain = f"chain-{uid}"
                if isinstance(uid, str):
                    root[uid] = chain
            yield when, entry, chain
        yield from held or ()


#: The entries of a conversation (not bookkeeping lines: summaries, snapshots …).
_ENTRIES = frozenset({"user", "assistant", "system", "attachment"})


def resume_marker(entry: dict[str, Any], copied: int) -> dict[str, Any]:
    """The ``system/resume`` entry put where a resumed session's file goes on from
    its copy of ``copied`` earlier entries, naming the session id it goes on as
    and the CLI version that wrote it (which tells a fork from a resume:
    :func:`claudetrace.store.links.is_fork`)."""
    marker: dict[str, Any] = {"type": "system", "subtype": "resume", "copied_entries": copied}
    sid = entry.get("sessionId")
    if isinstance(sid, str):
        marker["resumed_as"] = sid
    version = entry.get("version")
    if isinstance(version, str):
        marker["version"] = version
    if "timestamp" in entry:
        marker["timestamp"] = entry["timestamp"]
    return marker


def merged(main: Iterable[Item], sides: Sequence[Iterable[Item]]) -> Iterator[Item]:
    """The main thread in its own order (its clock can step back by a few ms between
    an entry and its attachments), the side chains merged in by time."""
    never = 1 << 62
    side = heapq.merge(*sides, key=lambda item: -1 if item[0] is None else item[0])
    pending = next(side, None)
    for item in main:
        at = never if item[0] is None else item[0]
        while pending is not None and (pending[0] or -1) < at:
            yield pending
            pending = next(side, None)
        yield item
    while pending is not None:
        yield pending
        pending = next(side, None)


def agent_links(paths: Iterable[Path]) -> dict[str, str]:
    """Subagent id → the tool use that started it, from the tool results' metadata
    (only the lines that can say so are parsed)."""
    links: dict[str, str] = {}
    for path in paths:
        reader = JsonlFile(path)
        for _number, raw in reader.lines():
            if b'"agentId"' not in raw or b'"toolUseResult"' not in raw:
                continue
            entry = parse_object(raw)
            extra = entry.get("toolUseResult") if entry else None
            if not entry or entry.get("type") != "user" or not isinstance(extra, dict):
                continue
            agent, msg = extra.get("agentId"), entry.get("message")
            if isinstance(agent, str) and isinstance(msg, dict):
                for block in blocks(msg.get("content")):
                    if block.kind == "tool_result":
                        links[agent] = str(block.id)
    return links


def first_time(path: Path) -> int:
    reader = JsonlFile(path)
    for _number, obj in reader.objects():
        when = timestamp_ns(obj.get("timestamp"))
        if when is not None:
            return when
    return 1 << 62


__all__ = ["Item", "agent_links", "first_time", "main_items", "merged", "out_of_range",
           "resume_marker", "timed", "timestamp_ns"]
