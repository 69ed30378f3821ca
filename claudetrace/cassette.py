"""Cassette files, version 1: a recording as diff-friendly NDJSON.

The first line is a header object (``{"claudetrace": "cassette", "version": 1,
"argv": [...], "exit_code": 0, ...}``); every following line is one event::

    {"seq": 0, "t": 0.001106, "dir": "in", "line": "..."}

``line`` is the exact text of the line without its newline; a line that is not
valid UTF-8 carries ``line_b64`` instead, and a last line that had no newline
carries ``"eol": false``.  Readers ignore header fields they do not know.
Writing uses the same JSON spelling as the reference recordings
(``ensure_ascii=False``, default separators), so reading a cassette and writing it
back reproduces its event lines byte for byte.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import json
import math
import os
import stat
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from json.encoder import encode_basestring
from pathlib import Path
from typing import IO, Annotated, Any, Final, Literal, TypeVar

import msgspec

from .errors import CassetteError
from .model.events import DIRECTIONS, Event

_T = TypeVar("_T")

MAGIC: Final = "cassette"
VERSION: Final = 1


@dataclass
class Cassette:
    """A header plus the events of one recording."""

    header: dict[str, Any]
    events: list[Event] = field(default_factory=list)

    @property
    def argv(self) -> list[str]:
        argv = self.header.get("argv")
        return list(argv) if isinstance(argv, list) else []

    @property
    def exit_code(self) -> int | None:
        code = self.header.get("exit_code")
        return code if isinstance(code, int) else None


def new_header(**fields: Any) -> dict[str, Any]:
    """A cassette header with the two required keys first, then ``fields``."""
    header: dict[str, Any] = {"claudetrace": MAGIC, "version": VERSION}
    header.update(fields)
    return header


def t_seconds(t_ns: int) -> float:
    """Seconds for a cassette's ``t`` from nanoseconds (exact for ≤ 9 decimals)."""
    return t_ns / 1e9


def event_record(event: Event) -> dict[str, Any]:
    """The JSON object of one cassette event line."""
    record: dict[str, Any] = {"seq": event.seq, "t": t_seconds(event.t_ns), "dir": event.direction}
    try:
        record["line"] = event.data.decode("utf-8")
    except UnicodeDecodeError:
        record["line_b64"] = base64.b64encode(event.data).decode("ascii")
    if not event.eol:
        record["eol"] = False
    return record


def dumps_record(record: dict[str, Any]) -> str:
    """One cassette line (without newline) in the canonical spelling."""
    return json.dumps(record, ensure_ascii=False)


def event_line(seq: int, direction: str, t_ns: int, data: bytes, eol: bool = True) -> str:
    """``dumps_record(event_record(event))`` and its newline, from an event's values.

    Spelled out, as ``json.dumps`` spells that object (its own string encoder,
    ``repr`` of the numbers), without the dict and the encoder's calls: export
    writes one of these per recorded line.
    """
    try:
        line = data.decode("utf-8")
    except UnicodeDecodeError:
        record = event_record(Event(seq, direction, t_ns, data, eol))  # type: ignore[arg-type]
        return dumps_record(record) + "\n"
    end = "}\n" if eol else ', "eol": false}\n'
    return f'{{"seq": {seq}, "t": {t_ns / 1e9!r}, "dir": "{direction}", "line": ' \
           f'{encode_basestring(line)}{end}'


def event_lines(seqs: Sequence[int], directions: Sequence[str], times: Sequence[int],
                datas: Sequence[bytes], eols: Sequence[bool]) -> list[str]:
    """:func:`event_line` of each of a page of events given as columns, with no
    call a line (the lines of a recording that is all UTF-8, as nearly all are)."""
    ends = ("}\n", ', "eol": false}\n')
    try:
        return [f'{{"seq": {seq}, "t": {t_ns / 1e9!r}, "dir": "{direction}", "line": '
                f'{encode_basestring(data.decode("utf-8"))}{ends[not eol]}'
                for seq, direction, t_ns, data, eol
                in zip(seqs, directions, times, datas, eols, strict=True)]
    except UnicodeDecodeError:
        return list(map(event_line, seqs, directions, times, datas, eols))


def write_cassette(
    target: str | os.PathLike[str] | IO[str], header: dict[str, Any], events: Iterable[Event]
) -> int:
    """Write a cassette to a path or text stream; returns the number of events."""
    lines = (event_line(e.seq, e.direction, e.t_ns, e.data, e.eol) for e in events)
    return write_cassette_lines(target, header, lines)


def write_cassette_lines(
    target: str | os.PathLike[str] | IO[str], header: dict[str, Any], lines: Iterable[str]
) -> int:
    """:func:`write_cassette` for event lines already spelled by :func:`event_line`
    (a reader with rows, not events, at hand); returns the number of lines."""
    lines = iter(lines)
    # One write a thousand lines.
    return write_cassette_pages(target, header, iter(lambda: list(islice(lines, 1000)), []))


def write_cassette_pages(
    target: str | os.PathLike[str] | IO[str], header: dict[str, Any],
    pages: Iterable[Sequence[str]],
) -> int:
    """:func:`write_cassette_lines` for lines that come in pages (each written at
    once, with no step of its own a line); returns the number of lines."""
    if not isinstance(target, (str, os.PathLike)):
        return _write(target, header, pages)
    try:
        return replace_file(target, lambda out: _write(out, header, pages))
    except OSError as exc:
        raise CassetteError(
            f"cannot write cassette: {exc.strerror or exc}", path=str(target)
        ) from exc


def replace_file(path: str | os.PathLike[str], write: Callable[[IO[str]], _T], *,
                 mode: int = 0o600) -> _T:
    """``write`` the new content of ``path`` (UTF-8 text, owner only unless ``mode``
    says otherwise) beside it, then rename it over ``path``: a write that fails
    (a full disk), a Ctrl-C, or a SIGTERM or SIGHUP meanwhile leaves what was there
    whole and no file of its own behind; the failure is raised (the signal is
    acted on once that file is gone: the process ends as it would have).  Returns
    what ``write`` returns."""
    with _signals_unwind():
        tmp: Path | None = None
        try:
            real = file_to_replace(path)
            if real is None:
                # /dev/null, a FIFO, /dev/stdout: written into, never replaced by a
                # file (as root, the rename below put a regular file in /dev/null's place).
                with open(path, "w", encoding="utf-8", newline="\n") as out:
                    return write(out)
            tmp = real.with_name(f".{real.name}.tmp{os.getpid()}")
            with private_file(tmp, mode) as out:
                result = write(out)
            os.replace(tmp, real)
        except BaseException:
            if tmp is not None:
                tmp.unlink(missing_ok=True)
            raise
        return result


class _Stopped(BaseException):
    """A SIGTERM or SIGHUP that came while a file was being written beside its place."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _signals_unwind() -> Iterator[None]:
    """SIGTERM and SIGHUP, where they would kill the process outright (their
    default action), raise :class:`_Stopped` inside: the code being left cleans
    up (its ``except``/``finally``), then the process is killed by the same
    signal.  Handlers someone set (or ignoring) stay; off the main thread,
    nothing changes."""
    import signal

    taken: list[signal.Signals] = []
    previous: list[Any] = []

    def stop(signum: int, _frame: object) -> None:
        raise _Stopped(signum)

    try:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_DFL:
                previous.append(signal.signal(sig, stop))
                taken.append(sig)
    except ValueError:  # not the main thread: signals are not ours to take
        pass
    try:
        yield
    except _Stopped as stopped:
        for sig in taken:
            signal.signal(sig, signal.SIG_DFL)
        taken.clear()
        os.kill(os.getpid(), stopped.signum)
        raise  # the signal is delivered before kill returns; this is not reached
    finally:
        for sig, handler in zip(taken, previous, strict=False):
            signal.signal(sig, handler)


def file_to_replace(path: str | os.PathLike[str]) -> Path | None:
    """The regular file that writing ``path`` beside and renaming over it replaces:
    ``path`` with its symlinks resolved, so that a symlink keeps pointing where it
    did and its target gets the content (``/dev/stdout`` → ``/proc/self/fd/1`` → a
    file the shell redirected to); None when ``path`` leads to something there that
    is no regular file (``/dev/null``, a FIFO, a terminal, a directory), which is
    written into instead, or refused.  Raises :class:`OSError` for a symlink loop.
    """
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
    except OSError:  # not there yet (a dangling symlink: its target is created), or
        pass  # not to be looked at: writing says why
    real = Path(os.path.realpath(path))
    if real.is_symlink():  # realpath gives up on a loop
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path))
    return real


def private_file(path: str | os.PathLike[str], mode: int = 0o600) -> IO[str]:
    """``path`` opened to write UTF-8 text, made readable by its owner only (a
    recording's content may be secret) unless ``mode`` (less the umask) says
    otherwise; an existing file keeps its mode."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    return open(fd, "w", encoding="utf-8", newline="\n")


def _write(out: IO[str], header: dict[str, Any], pages: Iterable[Sequence[str]]) -> int:
    if header.get("claudetrace") != MAGIC or header.get("version") != VERSION or isinstance(
            header.get("version"), bool):
        header = {**new_header(), **header, "claudetrace": MAGIC, "version": VERSION}
    out.write(dumps_record(header) + "\n")
    count = 0
    for page in pages:
        out.write("".join(page))
        count += len(page)
    return count


def _json_reason(exc: ValueError) -> str:
    """Why a line is not JSON, with where in it (``Unterminated string starting at
    column 12``: the decoder's message alone ends on "at"); the int digit limit's
    ValueError says its own."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}".replace(" at at ", " at ")
    return str(exc)


def parse_header(text: str, *, path: str | None = None) -> dict[str, Any]:
    """Parse and validate a cassette's first line."""
    try:
        header = json.loads(text)
    except RecursionError as exc:
        raise CassetteError("header is nested too deeply", path=path, line=1) from exc
    except ValueError as exc:
        raise CassetteError(f"header is not JSON ({_json_reason(exc)})", path=path,
                            line=1) from exc
    if not isinstance(header, dict) or header.get("claudetrace") != MAGIC:
        raise CassetteError(
            'not a claudetrace cassette (first line lacks "claudetrace": "cassette")',
            path=path,
            line=1,
        )
    version = header.get("version")
    if version != VERSION or isinstance(version, bool):  # true == 1 in Python
        raise CassetteError(
            f"unsupported cassette version {version!r} (this claudetrace reads version 1)",
            path=path,
            line=1,
        )
    for key in ("started_ns", "ended_ns"):
        value = header.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or not 0 <= value <= MAX_NS):
            raise CassetteError(f'"{key}" must be a time in nanoseconds, not {_short(value)}',
                                path=path, line=1)
    argv = header.get("argv")
    if argv is not None and not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        # Read as no argv, replay would skip its check of the host's arguments.
        raise CassetteError(f'"argv" must be a list of strings, not {_short(argv)}',
                            path=path, line=1)
    for key in ("exit_code", "signal"):
        value = header.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or not -MAX_SEQ - 1 <= value <= MAX_SEQ):
            raise CassetteError(f'"{key}" must be an integer or null, not {_short(value)}',
                                path=path, line=1)
    return header


#: The largest time in nanoseconds a cassette may give (a signed 64-bit integer,
#: what the store keeps: about 292 years).
MAX_NS: Final = 2**63 - 1
#: The largest ``seq`` (the store's sequence numbers are 32-bit).
MAX_SEQ: Final = 2**31 - 1


def _short(value: Any) -> str:
    """``repr(value)``, cut short: an error message stays one readable line."""
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else (
        f"an integer of {len(str(abs(value)))} digits")
    return text if len(text) <= 60 else text[:57] + "..."


def parse_record(text: str, *, path: str | None = None, line: int | None = None) -> Event:
    """Parse one cassette event line into an :class:`Event`."""
    try:
        record = json.loads(text)
    except RecursionError as exc:
        raise CassetteError("event is nested too deeply", path=path, line=line) from exc
    except ValueError as exc:
        raise CassetteError(f"event is not JSON ({_json_reason(exc)})", path=path,
                            line=line) from exc
    if not isinstance(record, dict):
        raise CassetteError("event is not a JSON object", path=path, line=line)
    seq = record.get("seq")
    t = record.get("t")
    direction = record.get("dir")
    if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq <= MAX_SEQ:
        raise CassetteError(
            f'"seq" must be an integer from 0 to {MAX_SEQ}, not {_short(seq)}',
            path=path, line=line,
        )
    # The bound is on the nanoseconds stored: MAX_NS / 1e9 as a float (the largest
    # t accepted before) rounds to 2**63 nanoseconds, which no 64-bit column holds.
    if (not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t)
            or not 0 <= t <= MAX_NS / 1e9 or round(t * 1e9) > MAX_NS):
        raise CassetteError(
            f'"t" must be a number of seconds from 0 to {MAX_NS // 10**9}, not {_short(t)}',
            path=path, line=line,
        )
    if direction not in DIRECTIONS:
        raise CassetteError(
            f'"dir" must be in, out or err, not {direction!r}', path=path, line=line
        )
    if "line" in record:
        text_line = record["line"]
        if not isinstance(text_line, str):
            raise CassetteError('"line" must be a string', path=path, line=line)
        try:
            data = text_line.encode("utf-8")
        except UnicodeEncodeError as exc:
            # Writers give such a line as "line_b64" (it is not UTF-8).
            bad = text_line[exc.start].encode("utf-8", "backslashreplace").decode()
            raise CassetteError(
                f'"line" holds a lone surrogate ({bad}), which no UTF-8 line can; '
                'bytes that are not UTF-8 belong in "line_b64"', path=path, line=line,
            ) from exc
    elif "line_b64" in record:
        try:
            data = base64.b64decode(record["line_b64"], validate=True)
        except (binascii.Error, TypeError, ValueError) as exc:
            raise CassetteError('"line_b64" is not valid base64', path=path, line=line) from exc
    else:
        raise CassetteError('event has neither "line" nor "line_b64"', path=path, line=line)
    eol = record.get("eol", True)
    if not isinstance(eol, bool):
        raise CassetteError('"eol" must be true or false', path=path, line=line)
    return Event(seq=seq, direction=direction, t_ns=round(t * 1e9), data=data, eol=eol)


class _Record(msgspec.Struct):
    """The members of an event line :func:`parse_record` reads, as their types and
    within their ranges (checked by msgspec as it reads them)."""

    seq: Annotated[int, msgspec.Meta(ge=0, le=MAX_SEQ)]
    t: Annotated[float, msgspec.Meta(ge=0, le=MAX_NS / 1e9)]
    dir: Literal["in", "out", "err"]
    line: str | msgspec.UnsetType = msgspec.UNSET
    eol: bool = True


_decode_record: Final = msgspec.json.Decoder(_Record).decode


def read_record(raw: bytes, *, path: str | None = None, line: int | None = None) -> Event:
    """:func:`parse_record` of one line read from a file (UTF-8 bytes), faster.

    msgspec reads the few members an event line has straight into their types
    (skipping, while still checking, anything else): a line of a cassette as
    claudetrace writes it is read at several times the speed of ``json.loads``.
    A line it refuses, or one with anything unusual (``line_b64``, a value out of
    range, a lone surrogate), goes the general way, which decides and says what
    is wrong, so the result is always :func:`parse_record`'s.
    """
    try:
        record = _decode_record(raw)
    except (msgspec.DecodeError, RecursionError):
        record = None
    # (The last float below the largest time may round up to more than it.)
    if (record is not None and isinstance(text := record.line, str)
            and (t_ns := round(record.t * 1e9)) <= MAX_NS):
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            pass
        else:
            return Event(record.seq, record.dir, t_ns, data, record.eol)
    return parse_record(raw.decode("utf-8"), path=path, line=line)


class CassetteEvents(Iterator[Event]):
    """The events of an open cassette, read as they are iterated.  The file closes
    at the end, or on :meth:`close` — also before the first event was read, which
    closing a generator that never started would not do."""

    def __init__(self, handle: IO[bytes], events: Generator[Event, None, None]) -> None:
        self._handle = handle
        self._events = events

    def __next__(self) -> Event:
        return next(self._events)

    def close(self) -> None:
        self._events.close()
        self._handle.close()


def iter_cassette(path: str | os.PathLike[str]) -> tuple[dict[str, Any], CassetteEvents]:
    """Open a cassette: its header now, its events lazily (for big files).  Close the
    events (``contextlib.closing``) if they may not all be read."""
    name = os.fspath(path)
    try:
        # Binary, decoded line by line: a text decoder reads ahead, and would
        # blame a bad byte further down on the line it happens to be reading.
        handle = open(name, "rb")  # noqa: SIM115 - closed by the generator
    except OSError as exc:
        raise CassetteError(f"cannot read cassette: {exc.strerror or exc}", path=name) from exc
    try:
        first = handle.readline().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        handle.close()
        raise CassetteError(f"cannot read cassette: {exc}", path=name, line=1) from exc
    if not first.strip():
        handle.close()
        raise CassetteError("empty file, not a cassette", path=name)
    try:
        header = parse_header(first, path=name)
    except CassetteError:
        handle.close()
        raise

    def events() -> Generator[Event, None, None]:
        last_seq = -1
        with handle:
            lineno = 1
            try:
                for raw in handle:
                    lineno += 1
                    if not raw.isascii():
                        raw.decode("utf-8")  # all of it, not only what msgspec keeps
                    if raw[:1] != b"{":  # (a record as claudetrace writes it does)
                        start = raw.lstrip()[:1]
                        if not start or (start != b"{" and not raw.decode("utf-8").strip()):
                            continue  # a blank line (Unicode's white space too)
                    event = read_record(raw, path=name, line=lineno)
                    if event.seq <= last_seq:
                        raise CassetteError(
                            f'"seq" {event.seq} does not increase (previous {last_seq})',
                            path=name,
                            line=lineno,
                        )
                    last_seq = event.seq
                    yield event
            except UnicodeDecodeError as exc:
                raise CassetteError(
                    f"not UTF-8 text ({exc.reason})", path=name, line=lineno
                ) from exc

    return header, CassetteEvents(handle, events())


def read_cassette(path: str | os.PathLike[str]) -> Cassette:
    """Read a whole cassette, validating every line."""
    header, events = iter_cassette(path)
    return Cassette(header=header, events=list(events))
