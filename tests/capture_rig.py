"""The recording rig of the end-to-end tests, shared by the Python and TypeScript SDK tests.

A rig is a database and two recording shims made by the real ``claudetrace shim``
command: one in front of the real CLI, and one in front of a capture wrapper that
runs the CLI with its stdin, stdout and stderr teed to files.  What the proxy
stored must be exactly those bytes, in order, each with its direction: the
capture is the independent witness of the recording.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claudetrace.model.events import Event
from claudetrace.store import Store

#: Runs the CLI with its three streams teed to files in $CT_CAPTURE.  Version
#: checks go straight through (tee would wait on a stdin nobody closes).
CAPTURE_SCRIPT = """#!/bin/bash
if [ "$#" -eq 1 ] && [ "$1" = "-v" ]; then exec "$CT_REAL" "$@"; fi
tee "$CT_CAPTURE/in.bin" \\
  | "$CT_REAL" "$@" 2> >(tee "$CT_CAPTURE/err.bin" >&2) \\
  | tee "$CT_CAPTURE/out.bin"
"""


@dataclass
class Rig:
    """Shims and the database shared by the tests of one module."""

    root: Path
    db: Path
    shim: Path
    capture_shim: Path


@dataclass
class HostRun:
    """What a host program of another language printed, and how it ended.

    The TypeScript and Go hosts print one JSON line per event: ``{"message": …}``
    for each message the application received, ``{"callback": …}`` when one of
    its callbacks ran, ``{"error": "…"}`` when something failed.
    """

    returncode: int
    lines: list[dict[str, Any]]
    stderr: str
    capture: Path

    def messages(
        self, type_: str | None = None, subtype: str | None = None
    ) -> list[dict[str, Any]]:
        return [
            line["message"]
            for line in self.lines
            if "message" in line
            and (type_ is None or line["message"].get("type") == type_)
            and (subtype is None or line["message"].get("subtype") == subtype)
        ]

    def callbacks(self) -> list[dict[str, Any]]:
        return [line for line in self.lines if "callback" in line]

    def errors(self) -> list[str]:
        return [line["error"] for line in self.lines if "error" in line]

    def texts(self) -> list[str]:
        """The text blocks of the assistant's messages."""
        return [
            block["text"]
            for message in self.messages("assistant")
            for block in message["message"]["content"]
            if block["type"] == "text"
        ]

    @classmethod
    def parse(cls, done: subprocess.CompletedProcess[str], capture: Path) -> HostRun:
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        return cls(done.returncode, lines, done.stderr, capture)


def write_script(path: Path, text: str) -> Path:
    """Write an executable script."""
    path.write_text(text)
    path.chmod(0o755)
    return path


def write_shim(out: Path, real: Path, db: Path) -> Path:
    """Write a recording shim with the real ``claudetrace shim`` command."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "claudetrace",
            "shim",
            str(out),
            "--real",
            str(real),
            "--db",
            str(db),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out)
    return out


def make_rig(root: Path, real_claude: Path) -> Rig:
    """A database in ``root`` and the two shims (plain and capturing) recording into it."""
    db = root / "claudetrace.db"
    capture = write_script(root / "capture.sh", CAPTURE_SCRIPT)
    return Rig(
        root=root,
        db=db,
        shim=write_shim(root / "claude", real_claude, db),
        capture_shim=write_shim(root / "claude-captured", capture, db),
    )


def stream_bytes(events: list[Event], direction: str) -> bytes:
    """The byte stream of one direction, rebuilt from its events."""
    return b"".join(e.data + (b"\n" if e.eol else b"") for e in events if e.direction == direction)


def wait_for_recording(store: Store, known: set[str], timeout: float = 60.0) -> str:
    """The id of the one new recording, once it is completely stored.

    The proxy exits before its indexer has stored everything; settling waits for
    the indexer of a finished session (as every command that opens the store
    does), so the recording read afterwards is complete.
    """
    from claudetrace.indexer import settle

    deadline = time.monotonic() + timeout
    while True:
        settle(store, quiet=True)
        new = [r for r in store.list_recordings() if r.id not in known]
        if len(new) == 1 and new[0].ended_ns is not None:
            return new[0].id
        assert len(new) <= 1, f"expected one new recording, got {len(new)}"
        assert time.monotonic() < deadline, "the proxy did not finish its recording"
        time.sleep(0.05)


def assert_causal_order(events: list[Event]) -> None:
    """Every control response comes after its request, on the opposite stream."""
    requests: dict[str, Event] = {}
    for event in events:
        if event.type == "control_request" and event.request_id:
            requests[event.request_id] = event
        elif event.type == "control_response" and event.request_id in requests:
            request = requests[event.request_id]
            assert request.seq < event.seq
            assert request.direction != event.direction, event.request_id
