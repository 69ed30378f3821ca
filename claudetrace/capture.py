"""Capture files: the proxy's durable, append-only journal of what it forwarded.

The proxy never parses or stores lines itself.  Every chunk it forwards is
appended, with its direction and timestamps, to a *capture file* beside the
database, before it is forwarded, as ``tee FILE`` does it: one ``writev`` per
chunk, or, for a chunk the proxy holds in a pipe, a header and a ``splice``.
An indexer process (:mod:`claudetrace.indexer`) follows the file, splits it into
lines, parses each once and stores the events; when it has stored everything it
deletes the file.  A capture file left behind (an indexer that was killed, a
store that was locked or unreachable) is stored by the next claudetrace command
that opens the database (:func:`claudetrace.indexer.settle`): recorded data is
never lost, only stored later.

Layout: the line :data:`MAGIC`, one JSON line with the recording's metadata,
then records of ``<kind u8, t_ns i64, wall_ns i64, length u32>`` plus ``length``
bytes.  Kinds 0, 1, 2 are chunks (``in``, ``out``, ``err``); :data:`END` carries
the exit (JSON); :data:`LOST` counts, per direction, bytes that were forwarded but
could not be written, and names those whose gap ends inside a line (JSON,
``{"out": 300, "open": ["out"]}``).  A record cut short by a crash is ignored.

Two ``flock`` locks tell readers what is going on: the proxy holds one on the
capture file while it runs (a live session: leave it to its indexer), and the
indexer holds one on ``ID.lock`` while it stores (wait for it).
"""

from __future__ import annotations

import array
import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import io
import json
import os
import select
import stat
import struct
import termios
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .config import data_dir, resolve_url
from .errors import not_regular
from .recording import RecordingInfo

if TYPE_CHECKING:
    from .model.events import Direction, Event

__all__ = ["data_dir", "resolve_url"]  # where captures and the database live: claudetrace.config

MAGIC: Final = b"claudetrace capture 1\n"
SUFFIX: Final = ".capture"
LOCK_SUFFIX: Final = ".lock"
RECORD: Final = struct.Struct("<BqqI")
CHUNK_KINDS: Final[tuple[Direction, ...]] = ("in", "out", "err")
KIND_CODE: Final[dict[str, int]] = {"in": 0, "out": 1, "err": 2}
END: Final = 3
LOST: Final = 4


def _sqlite_file(url: str) -> Path | None:
    """The database file of a SQLite URL (None for other databases and memory)."""
    scheme, sep, rest = url.partition(":///")
    if not sep or scheme.split("+", 1)[0] != "sqlite":
        return None
    path = rest.split("?", 1)[0]
    if not path or path == ":memory:" or path.startswith("file:"):
        return None
    return Path(path).absolute()


def _url_key(url: str) -> str:
    """A short stable directory name for a database (its URL without the password).

    Worked out without SQLAlchemy: the proxy opens its capture file before it
    forwards a byte, and importing SQLAlchemy would hold its first lines up.
    The query's parameters are taken decoded and sorted, as SQLAlchemy renders
    them (``?port=5432&host=/run/pg`` and ``?host=%2Frun%2Fpg&port=5432`` are one
    database): the proxy keys by the URL as given, a command by the store's.
    """
    db_file = _sqlite_file(url)
    if db_file is not None:
        name = str(db_file)
    else:
        from urllib.parse import parse_qsl, urlsplit, urlunsplit

        name = url
        with contextlib.suppress(ValueError):  # not parseable: the URL as it is
            parts = urlsplit(url)
            if parts.query:
                pairs = sorted(parse_qsl(parts.query, keep_blank_values=True))
                parts = parts._replace(query="&".join(f"{k}={v}" for k, v in pairs))
            if parts.password is not None:
                userinfo, _, hostport = parts.netloc.rpartition("@")
                parts = parts._replace(netloc=f"{userinfo.partition(':')[0]}:***@{hostport}")
            name = urlunsplit(parts)
    return hashlib.sha256(name.encode()).hexdigest()[:16]


def _legacy_url_key(url: str) -> str | None:
    """The directory name earlier builds gave a server database (the URL as
    SQLAlchemy renders it without the password), where capture files they left
    behind wait; None where it is :func:`_url_key`'s too, and for SQLite."""
    if _sqlite_file(url) is not None:
        return None
    try:
        from sqlalchemy.engine import make_url

        name = make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy reads: nothing was left there
        return None
    key = hashlib.sha256(name.encode()).hexdigest()[:16]
    return None if key == _url_key(url) else key


#: The first bytes of every SQLite database file.
SQLITE_HEADER: Final = b"SQLite format 3\x00"


def database_problem(url: str) -> str | None:
    """Why the SQLite database ``url`` cannot take a recording, told from the file
    without opening it (None: none seen, or not a SQLite URL).

    The proxy asks at once, since its indexer, which opens the store, may only
    find out after a short session has ended and nobody relays its stderr.
    """
    db_file = _sqlite_file(url)
    if db_file is None:
        return None
    try:
        mode = db_file.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None  # made on first use (a missing folder: missing_db_folder says)
    except OSError as exc:
        return f"cannot use database {db_file}: {exc.strerror or exc}"
    odd = not_regular(mode)  # before opening it: a FIFO's open blocks
    if odd:
        return f"cannot use database {db_file}: {odd}"
    try:
        with open(db_file, "rb") as file:
            header = file.read(len(SQLITE_HEADER))
    except OSError as exc:
        return f"cannot use database {db_file}: {exc.strerror or exc}"
    if header and header != SQLITE_HEADER:  # an empty file is a new database
        return f"cannot use database {db_file}: not a SQLite database"
    return None


def missing_db_folder(url: str) -> Path | None:
    """The folder of a SQLite database ``url`` when it does not exist (it is never
    made but for the default database's)."""
    db_file = _sqlite_file(url)
    if db_file is None or db_file.parent.is_dir() or db_file.parent == data_dir():
        return None
    return db_file.parent


def _device(path: Path) -> bool:
    """Whether ``path`` is a device, FIFO or socket (neither file nor folder)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def capture_dirs(url: str) -> list[Path]:
    """Where capture files for the database ``url`` live, preferred first.

    Beside a SQLite file (``NAME.capture/``), so every user of the file finds
    them whatever its ``HOME``; for other databases, and when that directory
    cannot be written, under the user's data directory, keyed by the database.
    Plain SQLite paths need no SQLAlchemy here, which keeps the proxy's start-up
    light.  Never beside a device, FIFO or socket (``/dev/null.capture`` in
    ``/dev``).
    """
    dirs: list[Path] = []
    db_file = _sqlite_file(url)
    if db_file is not None and db_file.name and not _device(db_file):  # ``/`` has no name
        dirs.append(db_file.with_name(db_file.name + SUFFIX))
    dirs.append(data_dir() / "capture" / _url_key(url))
    return dirs


def capture_files(url: str) -> list[Path]:
    """The capture files waiting for the database ``url``, oldest recording first."""
    found: list[Path] = []
    legacy = _legacy_url_key(url)
    folders = capture_dirs(url) + ([data_dir() / "capture" / legacy] if legacy else [])
    for folder in folders:
        with contextlib.suppress(OSError):
            found.extend(p for p in folder.iterdir() if p.name.endswith(SUFFIX))
    return sorted(found, key=lambda p: p.name)


def nothing_to_settle(url: str) -> bool:
    """True when no finished recording waits in a capture file for the database
    ``url`` (only running proxies' captures, or none): a reader may read the
    database as it is.  Worked out without SQLAlchemy: for a server database,
    whose earlier builds' folder takes SQLAlchemy to name
    (:func:`_legacy_url_key`), a finished capture waiting for any database under
    the data directory counts (False: the caller settles through the store,
    which tells them apart)."""
    found = [p for p in capture_dirs(url) for p in _captures_in(p)]
    if _sqlite_file(url) is None:
        with contextlib.suppress(OSError):
            found.extend(p for folder in (data_dir() / "capture").iterdir()
                         for p in _captures_in(folder))
    return all(writer_alive(capture) for capture in found)


def _captures_in(folder: Path) -> list[Path]:
    with contextlib.suppress(OSError):
        return [p for p in folder.iterdir() if p.name.endswith(SUFFIX)]
    return []


def lock_path(capture: Path) -> Path:
    return capture.with_name(capture.name[: -len(SUFFIX)] + LOCK_SUFFIX)


def writer_alive(capture: Path) -> bool:
    """True while a proxy is still writing ``capture`` (it holds the file's lock)."""
    try:
        fd = os.open(capture, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def open_lock(capture: Path) -> int:
    """A descriptor of ``capture``'s indexer lock file (created if needed)."""
    return os.open(lock_path(capture), os.O_RDWR | os.O_CREAT, 0o600)


def remove(capture: Path) -> None:
    """Delete a capture file once everything in it is stored, its lock file, and
    its directory when that is left empty (a proxy about to create a file there
    makes it again)."""
    for path in (capture, lock_path(capture)):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    with contextlib.suppress(OSError):  # not empty: other sessions are recording
        capture.parent.rmdir()


#: A ``*.capture.new`` file is a capture being created (it is renamed within
#: microseconds); one this old, and unlocked, was left by a proxy killed right then.
STALE_NEW_S: Final = 60.0


def remove_stale_new(url: str, now: float | None = None) -> int:
    """Delete capture files that a killed proxy left half-created; returns how many.

    They hold the recording's header at most: nothing was forwarded before the
    rename, so nothing recorded is lost with them.
    """
    removed = 0
    now = time.time() if now is None else now
    for folder in capture_dirs(url):
        with contextlib.suppress(OSError):
            for path in folder.glob(f"*{SUFFIX}.new"):
                with contextlib.suppress(OSError):
                    if now - path.stat().st_mtime > STALE_NEW_S and not writer_alive(path):
                        path.unlink()
                        removed += 1
    return removed


# -- captures set aside ---------------------------------------------------------------

#: A capture that is not one (a damaged header) is renamed ``NAME.capture.damaged``;
#: one whose recording the database refused after the indexer's retries,
#: ``NAME.capture.failed``.  Neither is tried again by itself: ``claudetrace
#: doctor`` lists them (with the reason kept in ``….reason``) and can retry them.
ASIDE_SUFFIXES: Final = (".damaged", ".failed")
REASON_SUFFIX: Final = ".reason"


def set_aside(capture: Path, suffix: str, reason: str) -> Path:
    """Rename ``capture`` out of the way (never delete it), with ``reason`` beside it."""
    target = capture.with_name(capture.name + suffix)
    with contextlib.suppress(OSError):
        fd = os.open(target.with_name(target.name + REASON_SUFFIX),
                     os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as out:
            out.write(reason + "\n")
    with contextlib.suppress(OSError):
        capture.rename(target)
        lock_path(capture).unlink(missing_ok=True)
    return target


@dataclass
class SetAside:
    """A capture set aside: where it is, why, and how big."""

    path: Path
    reason: str
    size: int

    @property
    def recording_id(self) -> str:
        return self.path.name.split(".", 1)[0]


def set_aside_files(url: str) -> list[SetAside]:
    """The captures set aside for the database ``url``, oldest recording first."""
    found: list[SetAside] = []
    for folder in capture_dirs(url):
        with contextlib.suppress(OSError):
            for path in sorted(folder.iterdir()):
                if not path.name.endswith(tuple(SUFFIX + s for s in ASIDE_SUFFIXES)):
                    continue
                try:
                    reason = path.with_name(path.name + REASON_SUFFIX).read_text(
                        encoding="utf-8", errors="replace").strip()
                except OSError:
                    reason = "no reason was kept"
                with contextlib.suppress(OSError):
                    found.append(SetAside(path, reason, path.stat().st_size))
    return found


def restore(aside: SetAside) -> Path:
    """Put a capture set aside back in line to be stored (``doctor --retry``)."""
    capture = aside.path.with_name(aside.path.name.rsplit(".", 1)[0])
    aside.path.rename(capture)
    aside.path.with_name(aside.path.name + REASON_SUFFIX).unlink(missing_ok=True)
    return capture


# -- reading -----------------------------------------------------------------------------


@dataclass
class Record:
    """One record of a capture file."""

    kind: int
    t_ns: int
    wall_ns: int
    data: bytes

    @property
    def direction(self) -> Direction:
        return CHUNK_KINDS[self.kind]

    def json(self) -> dict[str, Any] | None:
        """The JSON object an end or lost record carries; None when it is damaged."""
        try:
            value = json.loads(self.data)
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            return None
        return value if isinstance(value, dict) else None


#: The exit fields an end record may carry, and the type each must have.
_END_FIELDS: Final[dict[str, type]] = {
    "exit_code": int, "signal": int, "error": str, "ended_ns": int,
}


class RecordLines:
    """A capture's records as its lines, numbered, for whoever reads a capture through.

    Give :meth:`feed` each record in file order: a chunk record yields the lines
    it completes (in all directions, lines are numbered in file order); the end
    record sets the recording's exit on ``info`` and :attr:`ended`.  Once no
    record is left, :meth:`rests` gives the last lines that had no newline.  The
    indexer and the telemetry worker both read captures through it, so both
    number every line alike.

    A lost record (bytes forwarded but not written: a full disk) is a gap in
    its directions.  The line the gap cut — its head before the gap, its tail
    after it, up to the next newline — is not one that was sent, so neither
    piece becomes a line: both are counted in :attr:`lost_bytes` with the
    bytes the gap itself lost.  Every line given is one that was really sent.
    """

    def __init__(self, info: RecordingInfo) -> None:
        self.info = info
        #: The number the next line gets.
        self.seq = 0
        self.ended = False
        #: Bytes of the streams not given as lines: lost, or cut by a gap.
        self.lost_bytes = 0
        #: What was wrong with the capture's own records (a damaged end record…).
        self.problems: list[str] = []
        # Here, not at the top: a command that only looks for captures waiting
        # (an unchanged `import`) loads no event model.
        from .model.events import LineSplitter

        self._splitters = {d: LineSplitter() for d in CHUNK_KINDS}
        #: Directions after a gap, whose bytes up to the next newline are a tail.
        self._cut: set[str] = set()
        #: Times of the last chunk per direction: a final partial line keeps them.
        self._last_times = {d: (0, 0) for d in CHUNK_KINDS}

    def feed(self, record: Record) -> tuple[int, list[bytes]]:
        """(number of the first line, the lines ``record`` completes): none but for
        a chunk record."""
        first = self.seq
        if record.kind < len(CHUNK_KINDS):
            direction = record.direction
            self._last_times[direction] = (record.t_ns, record.wall_ns)
            data = record.data
            if self._cut and direction in self._cut:
                newline = data.find(b"\n")
                if newline < 0:
                    self.lost_bytes += len(data)
                    return first, []
                self.lost_bytes += newline + 1
                self._cut.discard(direction)
                data = data[newline + 1 :]
            lines = self._splitters[direction].feed(data)
            self.seq += len(lines)
            return first, lines
        if record.kind == LOST:
            self._lose(record)
        elif record.kind == END:
            self._end(record)
        return first, []

    def _lose(self, record: Record) -> None:
        counts = record.json()
        if counts is None:
            # Where the gaps are is not known: every direction may have one.
            self.problems.append("a record of lost bytes is damaged: how many is not known")
            counts = dict.fromkeys(CHUNK_KINDS, 0)
        # The directions whose gap ends inside a line; a writer that did not say
        # (or a damaged record) is taken to have cut every one.
        open_ = counts.get("open")
        for direction in CHUNK_KINDS:
            lost = counts.get(direction)
            if isinstance(lost, int) and not isinstance(lost, bool) and lost >= 0:
                head = self._splitters[direction].finish()
                self.lost_bytes += lost + (len(head) if head else 0)
                if not isinstance(open_, list) or direction in open_:
                    self._cut.add(direction)

    def _end(self, record: Record) -> None:
        end = record.json()
        self.ended = True
        if end is None:
            self.problems.append("the capture's end record is damaged: the exit is not known")
            self.info.error = self.info.error or "the exit was not recorded (damaged end record)"
            return
        for key, kind in _END_FIELDS.items():
            value = end.get(key)
            if key in end and (value is None or (isinstance(value, kind)
                                                 and not isinstance(value, bool))):
                setattr(self.info, key, value)

    def rests(self) -> list[Event]:
        """The final lines without a newline, as events, each complete when its last
        bytes were read."""
        from .model.events import Event

        events = []
        for direction in CHUNK_KINDS:
            rest = self._splitters[direction].finish()
            if rest is not None:
                t_ns, wall_ns = self._last_times[direction]
                events.append(Event(self.seq, direction, t_ns, rest, False, wall_ns))
                self.seq += 1
        return events


class CaptureError(Exception):
    """A file that is not a capture file."""


def info_to_json(info: RecordingInfo) -> bytes:
    return json.dumps(dataclasses.asdict(info), separators=(",", ":")).encode() + b"\n"


def info_from_json(line: bytes) -> RecordingInfo:
    fields = {f.name for f in dataclasses.fields(RecordingInfo)}
    try:
        value = json.loads(line)
        return RecordingInfo(**{k: v for k, v in value.items() if k in fields})
    except (ValueError, TypeError, AttributeError) as exc:
        raise CaptureError(f"bad capture header: {exc}") from exc


class CaptureReader:
    """Reads a capture file from the start, as far as it has been written.

    :meth:`read` returns the complete records written since the last call (a
    record still being written stays for the next call), so an indexer can
    follow a file that a proxy is still appending to.

    A record whose bytes came in more than one read is checked before it is
    given: its header is read again from the file.  A proxy whose write failed
    part way (a full disk) cuts its torn record off and writes the next records
    in its place; bytes of the torn one read before that are then not the file's
    any more, and are read again from where it began.
    """

    def __init__(self, path: Path, block_size: int = 4 * 1024 * 1024) -> None:
        self.path = path
        self._file = open(path, "rb")  # noqa: SIM115 - closed by close()
        self._block = block_size
        self._buffer = bytearray()
        #: How much of the buffer holds bytes read (the start of a record not complete yet).
        self._filled = 0
        header = self._file.readline(len(MAGIC) + 1)
        if header != MAGIC:
            self._file.close()
            raise CaptureError(f"{path.name} is not a claudetrace capture file")
        line = self._file.readline()
        if not line.endswith(b"\n"):
            self._file.close()
            raise CaptureError(f"{path.name}: the header is incomplete")
        try:
            self.info = info_from_json(line)
        except CaptureError:
            self._file.close()
            raise
        #: Where in the file the buffer's first byte is.
        self._offset = self._file.tell()
        #: The records are read without a buffer of Python's in between: one that
        #: read ahead would keep a torn record's bytes after the file dropped them.
        self._raw = io.FileIO(self._file.fileno(), closefd=False)

    def read(self, limit: int | None = None) -> list[Record]:
        """Complete records available now (at most about ``limit`` bytes of them).

        Empty only when no complete record is in the file yet: a record larger
        than a block is read on until it is complete (or the file ends).
        """
        records: list[Record] = []
        buf, size = self._buffer, RECORD.size
        while not records:
            # Read straight into the buffer, after what is left of the last read: one
            # copy of each record's bytes (into its Record), no block allocated per
            # read.  The buffer grows only as far as the file has bytes to read.
            start = self._filled
            want = min(self._block, limit or self._block,
                       os.fstat(self._raw.fileno()).st_size - self._offset - start)
            if want <= 0:
                break
            if len(buf) < start + want:
                buf.extend(bytes(start + want - len(buf)))
            with memoryview(buf) as view:
                self._raw.seek(self._offset + start)
                got = self._raw.readinto(view[start : start + want])
                if not got:
                    break
                filled = start + got
                pos = 0
                if start and filled >= size and not self._still_there(view[:size]):
                    # The bytes kept from the last read were a torn record's: read
                    # again from where it began.
                    self._filled = 0
                    continue
                while filled - pos >= size:
                    kind, t_ns, wall_ns, length = RECORD.unpack_from(buf, pos)
                    end = pos + size + length
                    if end > filled:
                        break
                    records.append(Record(kind, t_ns, wall_ns, bytes(view[pos + size : end])))
                    pos = end
            if pos:  # a record still being written moves to the front
                buf[: filled - pos] = buf[pos:filled]
            self._offset += pos
            self._filled = filled - pos
            if len(buf) > self._filled + self._block:  # a large record went: its memory too
                del buf[self._filled + self._block :]
        return records

    def _still_there(self, header: memoryview) -> bool:
        """Whether the file still holds ``header`` where the buffer begins.  Each record
        is stamped with the monotonic clock's nanoseconds as it is written; one is
        written again with the same header only when none of its bytes after the
        header were (a file that takes no ``splice``), so the bytes read are the
        file's either way."""
        return os.pread(self._raw.fileno(), len(header), self._offset) == header

    @property
    def pending_bytes(self) -> int:
        """Bytes of a record not complete yet (a torn tail after a crash)."""
        return self._filled

    def close(self) -> None:
        self._raw.close()
        self._file.close()

    def __iter__(self) -> Iterator[Record]:
        while records := self.read():
            yield from records


# -- writing (the proxy) ----------------------------------------------------------------


def _create_locked(path: Path, header: bytes) -> int:
    """Create ``path`` with ``header``, already locked by us, in one step for readers.

    The file is made under a temporary name and renamed into place once it holds
    the writer's lock and its header: a reader settling leftover captures must
    never find a new one unlocked (it would take it for a dead proxy's) or
    without a header (it would set it aside as damaged).
    """
    temp = path.with_name(path.name + ".new")
    # Not O_APPEND: splice(2) refuses files opened for appending.  Only the
    # writer's own threads write here, one record at a time under its lock,
    # so the file position is always the end.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        write_all(fd, header)
        if path.exists():
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
        os.rename(temp, path)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    return fd


def read_exactly(fd: int, length: int) -> bytes:
    """``length`` bytes from ``fd`` (a pipe known to hold them)."""
    parts = []
    while length > 0:
        part = os.read(fd, length)
        if not part:
            raise OSError(errno.EIO, "the chunk's pipe ran dry")
        parts.append(part)
        length -= len(part)
    return b"".join(parts)


def _drain(pipe: int) -> bytes:
    """Take whatever is waiting in ``pipe`` (without waiting for more)."""
    waiting = array.array("i", [0])
    with contextlib.suppress(OSError):
        fcntl.ioctl(pipe, termios.FIONREAD, waiting)
        return read_exactly(pipe, waiting[0])
    return b""


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write all of ``data`` to ``fd``, waiting while a non-blocking ``fd`` is full."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [])


@dataclass
class CaptureReport:
    """What could not be written to the capture file, for the proxy's exit message."""

    chunks: int = 0
    bytes: int = 0
    lost_chunks: int = 0
    lost_bytes: int = 0
    error: str | None = None

    def problems(self) -> list[str]:
        if not self.lost_chunks:
            return []
        why = f" ({self.error})" if self.error else ""
        return [
            f"{self.lost_chunks} chunks ({self.lost_bytes} bytes) were forwarded but "
            f"not recorded{why}"
        ]


class CaptureWriter:
    """Appends forwarded chunks to a capture file, in the forwarding threads.

    :meth:`feed` stamps the chunk and appends it with one ``writev`` (header and
    data) before the caller forwards it, as ``tee`` writes its file before its
    output: a chunk that was forwarded is in the file, whatever happens to the
    proxy next.  :meth:`feed_pipe` does the same for a chunk waiting in a pipe,
    which the kernel moves into the file (``splice``) without a copy through
    Python.  Writes go to the page cache (a few µs); a disk that stalls
    holds forwarding up as it would hold ``tee``.  The database is never waited
    for: the indexer stores the file behind us.  While writes fail (disk full)
    chunks are forwarded but counted as lost — the proxy reports the count at
    exit — and a ``LOST`` record says how many bytes as soon as writing works
    again.
    """

    def __init__(
        self,
        path: Path,
        info: RecordingInfo,
        *,
        t0_ns: int | None = None,
    ) -> None:
        self.path = path
        self.info = info
        self.t0_ns = time.monotonic_ns() if t0_ns is None else t0_ns
        self.report = CaptureReport()
        self._fd = _create_locked(path, MAGIC + info_to_json(info))
        #: End of the last complete record: after a failed write the file is cut
        #: back to it, so a torn record never sits between complete ones.
        self._size = os.fstat(self._fd).st_size
        #: Set when a torn record could not be cut off: nothing more is written.
        self._broken = False
        self._notify: int | None = None
        #: Serialises appends from the forwarding threads: file order is the
        #: order of the timestamps, hence of the stored sequence numbers.
        self._lock = threading.Lock()
        #: Bytes per direction forwarded but not written, not yet in a LOST record.
        self._lost_pending: dict[str, int] = {}
        #: Directions whose last lost chunk did not end a line (or not known to).
        self._lost_open: set[str] = set()
        #: The last byte of the chunk whose write failed last (empty: not known).
        self._failed_tail = b""
        self._closed = False
        #: False once splice(2) into this file has been refused (another system,
        #: a file system without it): chunks from pipes are then read and written.
        self._splice = hasattr(os, "splice")

    @classmethod
    def create(cls, url: str, info: RecordingInfo, **kwargs: Any) -> CaptureWriter:
        """A new capture file for ``info`` in the first usable directory for ``url``."""
        failure: OSError | None = None
        for folder in capture_dirs(url):
            for _attempt in range(2):  # an indexer may remove the folder, once empty, meanwhile
                try:
                    # Beside the database only when its folder exists: a
                    # mistyped --db path is not made (the store refuses it too).
                    if folder.is_relative_to(data_dir()):
                        data_dir().mkdir(parents=True, exist_ok=True, mode=0o700)
                        folder.parent.mkdir(exist_ok=True, mode=0o700)
                        folder.mkdir(exist_ok=True, mode=0o700)
                    else:
                        folder.mkdir(exist_ok=True, mode=0o700)
                    return cls(folder / f"{info.id}{SUFFIX}", info, **kwargs)
                except OSError as exc:
                    failure = failure or exc
                    if not isinstance(exc, FileNotFoundError):
                        break
        assert failure is not None
        raise failure

    def notify_to(self, fd: int) -> None:
        """After each write, poke ``fd`` (the indexer's wake-up pipe, non-blocking)."""
        os.set_blocking(fd, False)
        self._notify = fd

    # -- the hot path (forwarding threads) ---------------------------------------------

    def feed(self, direction: Direction, chunk: bytes) -> None:
        """Append a chunk about to be forwarded, with its timestamps."""
        self._feed(direction, chunk, None, len(chunk))

    def feed_pipe(self, direction: Direction, pipe: int, length: int) -> None:
        """Append the ``length`` bytes waiting in the pipe ``pipe``; it is empty afterwards.

        The proxy duplicates each chunk into a pipe of its own with ``tee(2)``,
        so the chunk reaches the file without ever being copied into Python.
        """
        self._feed(direction, b"", pipe, length)

    def _feed(self, direction: Direction, chunk: bytes, pipe: int | None, length: int) -> None:
        with self._lock:
            if self._closed:
                if pipe is not None:
                    _drain(pipe)
                return
            if self._lost_pending:
                self._write_lost()
            if not self._append(KIND_CODE[direction], chunk, pipe, length):
                self.report.lost_chunks += 1
                self.report.lost_bytes += length
                self._lost_pending[direction] = self._lost_pending.get(direction, 0) + length
                # Whether the gap ends a line tells the reader if the bytes after
                # it start one (else they are the tail of a line it cut).
                if self._failed_tail == b"\n":
                    self._lost_open.discard(direction)
                else:
                    self._lost_open.add(direction)
                return
            self.report.chunks += 1
            self.report.bytes += length
        self._poke()

    def _append(
        self, kind: int, data: bytes, pipe: int | None = None, length: int | None = None
    ) -> bool:
        """Append one record, stamped now, whole or not at all; False when the write failed.

        The record's bytes are ``data``, or the ``length`` bytes waiting in
        ``pipe``, which is empty afterwards either way.
        """
        length = len(data) if length is None else length
        header = RECORD.pack(kind, time.monotonic_ns() - self.t0_ns, time.time_ns(), length)
        try:
            self._check_usable()
            if pipe is None or not self._splice or not self._splice_record(header, pipe, length):
                if pipe is not None:
                    data = read_exactly(pipe, length)
                size = len(header) + length
                done = os.writev(self._fd, [header, data])
                if done < size:  # only on a full disk or a signal: finish it plainly
                    write_all(self._fd, memoryview(header + data)[done:])
        except OSError as exc:
            self.report.error = os.strerror(exc.errno) if exc.errno else str(exc)
            if pipe is not None:
                data = _drain(pipe) or data
            self._failed_tail = data[-1:]
            self._truncate(self._size)
            return False
        self._size += len(header) + length
        return True

    def _splice_record(self, header: bytes, pipe: int, length: int) -> bool:
        """Write ``header``, then splice ``length`` bytes from ``pipe`` after it.

        False, with nothing written, when the kernel refuses to splice into this
        file at all: chunks are then read and written, from now on.
        """
        write_all(self._fd, header)
        moved = 0
        while moved < length:
            try:
                step = os.splice(pipe, self._fd, length - moved)
            except OSError as exc:
                if exc.errno != errno.EINVAL or moved:
                    raise
                self._splice = False
                self._truncate(self._size)
                self._check_usable()
                return False
            if step == 0:
                raise OSError(errno.EIO, "the chunk's pipe ran dry")
            moved += step
        return True

    def _check_usable(self) -> None:
        if self._broken:
            raise OSError(errno.EIO, "an earlier write failure left the file unusable")

    def _write_lost(self) -> None:
        lost: dict[str, Any] = dict(self._lost_pending)
        lost["open"] = sorted(self._lost_open & set(lost))
        if self._append(LOST, json.dumps(lost).encode()):
            self._lost_pending = {}
            self._lost_open = set()

    def _truncate(self, size: int) -> None:
        """Cut the file back to ``size`` (the end of its last complete record)."""
        try:
            if os.fstat(self._fd).st_size != size:
                os.ftruncate(self._fd, size)
            os.lseek(self._fd, size, os.SEEK_SET)
        except OSError:
            # A torn record we cannot remove must stay the last thing in the
            # file, or readers would take what follows for its bytes.
            self._broken = True

    def _poke(self) -> None:
        notify = self._notify
        if notify is None:
            return
        try:
            os.write(notify, b"\0")
        except BlockingIOError:
            pass  # the indexer has wake-ups pending already
        except OSError as exc:
            if exc.errno in (errno.EPIPE, errno.EBADF):
                self._notify = None  # the indexer is gone; the file is kept for later

    # -- the end ----------------------------------------------------------------------------

    def close(self, end: dict[str, Any] | None) -> CaptureReport:
        """Write ``end`` (the exit) and release the file; later chunks are not recorded.

        ``end`` is None when the proxy gives up without an exit to record.
        """
        with self._lock:
            if self._lost_pending:
                self._write_lost()
            if end is not None:
                self._append(END, json.dumps(end).encode())
            self._closed = True
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._poke()
        if self._notify is not None:
            with contextlib.suppress(OSError):
                os.close(self._notify)
            self._notify = None
        return self.report
