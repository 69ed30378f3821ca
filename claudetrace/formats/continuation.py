"""Which session a compacted session's file goes on from.

Resuming (or forking) a session after a compaction writes a file that does not
begin with a copy of the whole conversation, so it is not joined to the file it
resumes (:mod:`.layout`): it begins with the compaction itself, a
``system/compact_boundary`` (its ``logicalParentUuid`` the earlier conversation's
last entry) and the compaction's summary, a ``user`` line with
``isCompactSummary`` whose text says where the earlier conversation is ("read the
full transcript at: …/<session id>.jsonl", CLI 2.1).  :func:`continues` reads
that; the link is certain when the named file is beside it and holds the same
compaction entry (its uuid), else it is only what the summary says.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any, Final

from .jsonl import JsonlFile

#: How far into a file its compaction and summary are looked for.
_LINES: Final = 40
_NAMED: Final = re.compile(r"read the full transcript at: (\S+?\.jsonl)")


def continues(path: Path) -> dict[str, Any] | None:
    """``{"session_id": …, "certain": bool}`` of the session the main file
    ``path`` goes on from, when its first conversation entry is a compaction
    and its summary names the earlier transcript; else None."""
    boundary: str | None = None
    for _number, obj in itertools.islice(JsonlFile(path).objects(), _LINES):
        kind = obj.get("type")
        if boundary is None:
            if kind in ("user", "assistant"):
                return None  # a conversation that begins with a prompt
            if kind == "system":
                if obj.get("subtype") != "compact_boundary" or not isinstance(
                        obj.get("logicalParentUuid"), str):
                    return None
                uid = obj.get("uuid")
                boundary = uid if isinstance(uid, str) and uid else ""
            continue
        if kind == "user" and obj.get("isCompactSummary"):
            found = _NAMED.search(_text(obj.get("message")))
            if found is None:
                return None
            sid = Path(found.group(1)).stem
            if sid == path.stem:
                return None
            earlier = path.with_name(f"{sid}.jsonl")
            return {"session_id": sid, "certain": bool(boundary) and _holds(earlier, boundary)}
    return None


def _text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def _holds(path: Path, uuid: str) -> bool:
    """Whether the transcript ``path`` has an entry ``uuid`` (read a line at a time)."""
    needle = f'"uuid":"{uuid}"'.encode()
    try:
        with path.open("rb") as handle:
            return any(needle in line.replace(b'": "', b'":"') for line in handle)
    except OSError:
        return False
