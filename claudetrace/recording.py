"""What a recording is, apart from its events: ids and metadata.

:class:`RecordingInfo` is the storage-free description of one recording that the
proxy creates, the store persists and the span builder and replay engine read.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .ids import new_recording_id as new_recording_id  # re-exported

if TYPE_CHECKING:
    from .model.events import Event


#: A recording whose heartbeat (its indexer's, every second) is older than this,
#: and which has no end, is no longer being written: ``incomplete``.
STALE_AFTER_NS = 5_000_000_000

#: How late the heartbeat of a recording whose proxy lives on this host may be
#: while it is still ``running``: an idle-priority indexer on a loaded machine
#: misses beats, and the proxy's process says the session goes on; one silent
#: this long is taken for gone.
LATE_AFTER_NS = 600_000_000_000


#: ``source`` of recordings imported from Claude Code transcripts.
TRANSCRIPT_SOURCE = "transcript"


def unended_reason(source: str | None) -> str:
    """Why a recording with no end is ``incomplete``: a proxied CLI's recording
    stopped before the CLI exited; a transcript has no recording nor CLI exit, it
    ends before an answer to the last prompt (every view says this one line)."""
    if source == TRANSCRIPT_SOURCE:
        return "the transcript ends before an answer to the last prompt"
    return "the recording stopped before the CLI exited"


#: How much later than its recording's start a proxy's process may seem to have
#: started (the boot time it is counted from is given in whole seconds).
_START_SLACK_NS = 2_000_000_000


def proxy_lives(*, host: str | None, pid: int | None, source: str | None,
                started_ns: int) -> bool | None:
    """Whether a recording's proxy, a process on this host (by ``pid``), lives:
    False when it is gone; True when it lives and started no later than the
    recording; None when this host cannot tell (another host's recording, an
    import, or a pid that names a process started after the recording: a pid
    reused, as pids wrap at 32,768 by default)."""
    if host != os.uname().nodename or pid is None or source != "proxy":
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    started = process_started_ns(pid)
    if started is None or started <= started_ns + _START_SLACK_NS:
        return True
    return None


def recorder_alive(*, host: str | None, pid: int | None, source: str | None,
                   last_seen_ns: int | None, started_ns: int,
                   now_ns: int | None = None) -> bool:
    """Whether a recording that has not ended is ``running`` (the status every
    view shows, counted alike in SQL: ``store.models.status_expression``): its
    heartbeat is fresh (:data:`STALE_AFTER_NS`) and its proxy, when on this
    host, has not gone (:func:`proxy_lives`); or that proxy lives and the
    heartbeat is only late (:data:`LATE_AFTER_NS`)."""
    lives = proxy_lives(host=host, pid=pid, source=source, started_ns=started_ns)
    if lives is None:
        return _beating(last_seen_ns, started_ns, now_ns)
    return lives and _beating(last_seen_ns, started_ns, now_ns, LATE_AFTER_NS)


def _beating(last_seen_ns: int | None, started_ns: int, now_ns: int | None,
             within_ns: int = STALE_AFTER_NS) -> bool:
    """Whether a recording's heartbeat is younger than ``within_ns``."""
    now = time.time_ns() if now_ns is None else now_ns
    return now - (last_seen_ns or started_ns) < within_ns


def still_written(*, host: str | None, pid: int | None, source: str | None,
                  last_seen_ns: int | None, started_ns: int,
                  now_ns: int | None = None) -> bool:
    """Whether a recording that has not ended may still get lines: it is running
    (:func:`recorder_alive`), or its proxy lives on this host whatever its
    heartbeat says (an idle-priority indexer on a loaded machine misses beats).
    What ``prune`` leaves alone and what a search keeps a words mark for: a live
    session taken for abandoned was deleted by prune, and its words waited for
    its end."""
    lives = proxy_lives(host=host, pid=pid, source=source, started_ns=started_ns)
    return _beating(last_seen_ns, started_ns, now_ns) if lives is None else lives


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` from the third (the state) on, so that
    field N is at N - 3; None where that cannot be read (no such process, not Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ")".
    return stat[stat.rfind(b")") + 2:].split()


def start_time(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/PID/stat``
    field 22), or None where that cannot be read (no such process, not Linux)."""
    fields = stat_fields(pid)
    try:
        return None if fields is None else int(fields[22 - 3])
    except (IndexError, ValueError):
        return None


def kill_if_same(pid: int, started: int | None, signum: int) -> bool:
    """Send ``signum`` to process ``pid`` if it is still the one that started at
    ``started`` (clock ticks, :func:`start_time`), not another that took its pid
    since; True when it was sent."""
    if started is None or start_time(pid) != started:
        return False
    try:
        os.kill(pid, signum)
    except OSError:
        return False
    return True


def process_started_ns(pid: int) -> int | None:
    """When process ``pid`` started (Unix ns, to about a second), or None where
    that cannot be told (no such process, not Linux)."""
    ticks = start_time(pid)
    if ticks is None:
        return None
    try:
        with open("/proc/stat", "rb") as handle:
            boot = next(int(line.split()[1]) for line in handle if line.startswith(b"btime "))
        per_second = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, StopIteration, IndexError):
        return None
    return boot * 1_000_000_000 + ticks * 1_000_000_000 // per_second


def importing_elsewhere(importer: Any) -> str | None:
    """Who else is importing a half-stored recording (``importer``, its mark), or
    None when nobody is: its process is gone on this host, its pid now names a
    process started at another time (a pid reused), it is this process, or the
    recording predates the mark.  One on another host cannot be checked, so it
    counts as importing."""
    if not isinstance(importer, dict) or not isinstance(importer.get("pid"), int):
        return None
    host, pid = importer.get("host"), importer["pid"]
    if host != os.uname().nodename:
        return f"process {pid} on {host}"
    if pid == os.getpid():
        return None
    started = importer.get("started")
    if isinstance(started, int):
        now = start_time(pid)
        if now is not None and now != started:
            return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except OSError:
        pass
    return f"process {pid}"


@dataclass
class RecordingInfo:
    """Metadata of one recording (the header of a cassette, a row of the store)."""

    id: str
    argv: list[str]
    started_ns: int
    cwd: str = ""
    host: str = ""
    pid: int | None = None
    name: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    claudetrace_version: str = ""
    source: str = "proxy"
    ended_ns: int | None = None
    exit_code: int | None = None
    signal: int | None = None
    error: str | None = None
    # Parsed from the stream (system/init), filled in while recording.
    cli_session_id: str | None = None
    claude_code_version: str | None = None
    model: str | None = None
    permission_mode: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: Bytes forwarded but not recorded (a full disk), with the pieces of lines such
    #: a gap cut: the recording is ``incomplete`` when any were.
    lost_bytes: int = 0

    @classmethod
    def start(cls, argv: list[str], *, id: str | None = None, started_ns: int | None = None,
              **fields: Any) -> RecordingInfo:
        """A new recording in this process (``id``: one made already, by
        :func:`new_recording_id`, else a new one; ``started_ns``: when its child
        started, on the wall clock, else now)."""
        from ._version import __version__

        now = time.time_ns() if started_ns is None else started_ns
        return cls(
            id=id or new_recording_id(now),
            argv=list(argv),
            started_ns=now,
            cwd=os.getcwd(),
            host=os.uname().nodename,
            pid=os.getpid(),
            claudetrace_version=__version__,
            **fields,
        )

    def observe(self, event: Event) -> bool:
        """Pick up the CLI's session metadata from a stream event; True if changed."""
        if event.direction != "out":
            return False
        fields = event.fields
        changed = False
        if (
            fields.session_id
            and self.cli_session_id is None
            and fields.type
            in (
                "system",
                "assistant",
                "result",
            )
        ):
            self.cli_session_id = fields.session_id
            changed = True
        if fields.type == "system" and fields.subtype == "init":
            msg = event.message or {}
            for attr, key in (
                ("claude_code_version", "claude_code_version"),
                ("model", "model"),
                ("permission_mode", "permissionMode"),
            ):
                value = msg.get(key)
                if isinstance(value, str) and value != getattr(self, attr):
                    setattr(self, attr, value)
                    changed = True
        return changed


class EventSink(Protocol):
    """A live consumer of a recording's events (live telemetry).

    Sinks run in the session's indexer process (:mod:`claudetrace.indexer`), or in
    a process it starts (live telemetry's worker), never in the proxy, so a slow
    sink delays storing but never the host or the CLI.
    A sink may also have ``warnings``, a sequence of one-line messages the indexer
    stores with the recording once the sink is closed, and ``reads_capture = True``
    when it reads the capture file itself (live telemetry's worker): the indexer
    then does not call its ``on_events``.
    """

    def child_env(self) -> dict[str, str]:
        """Variables to add to the child's environment (e.g. ``TRACEPARENT``)."""
        ...

    def on_events(self, events: Sequence[Event]) -> None:
        """The next events (a chunk's lines), in sequence order, their fields parsed."""
        ...

    def on_close(self, info: RecordingInfo) -> None:
        """The recording ended (``info`` carries exit code / signal / error)."""
        ...
