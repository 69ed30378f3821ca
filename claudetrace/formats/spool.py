"""A converted recording's events on their way to the store, in a file.

:class:`Spool` takes each event as the converter makes it: folds it into the
session model, lets the recording's metadata observe it, and writes it to a
temporary file with what the store would read the line again for: its fields
(:class:`~claudetrace.model.events.LineFields`, which the fold made) and its
words for the search index (:func:`~claudetrace.store.textindex.line_words`),
worked out while the converter holds the parsed line.  Memory holds a line at a
time, whatever the session's size; :meth:`Spool.read` gives the events back,
as :class:`~claudetrace.store.textindex.Said`, for the store to write a batch at
a time without parsing a line again.

Spool files live in a folder of the importing process's own
(:func:`spool_folder`: ``claudetrace-spool-HOST-PID-START-…`` in the temporary
folder, named with the process's mark, :mod:`.owner`), which it removes when it
ends; its converting process (``convert_child``) writes into the same folder.
A process killed (SIGKILL, a crash) leaves its folder behind: the next import
(whatever it imports, an unchanged tree too) removes every such folder whose
process is gone (:func:`~.owner.sweep_spools`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Final

import msgspec

from ..model import Session as SessionModel
from ..model.events import Direction, Event, LineFields
from ..recording import RecordingInfo
from ..store.textindex import Said, line_words
from .owner import FOLDER_PREFIX, start_time, sweep_spools

_folder: str | None = None
#: The spool file's buffer, both ways (bytes).  With the default (the file
#: system's block, 4 KiB) about every other event of a few KB took a ``write``
#: or ``read`` system call of its own: 57,000 writes and 44,000 reads for
#: ``bench import``'s tree, a few hundred now.
_BUFFER: Final = 1 << 20


class _Seen:
    """What a recording's events say of it (the CLI's ``init``), gathered as they pass."""

    def __init__(self) -> None:
        self.info = RecordingInfo(id="", argv=[], started_ns=0)

    def observe_into(self, info: RecordingInfo) -> None:
        for attr in ("cli_session_id", "claude_code_version", "model", "permission_mode"):
            value = getattr(self.info, attr)
            if value is not None and (attr != "cli_session_id" or info.cli_session_id is None):
                setattr(info, attr, value)


class Spool:
    """A converted recording's events, folded into the session model as they come and
    kept in a temporary file until stored: memory holds a line at a time."""

    _encode = msgspec.msgpack.Encoder().encode

    def __init__(self) -> None:
        self.session = SessionModel()
        self.seen = _Seen()
        # Closed by close() or discard(); read again by name.  The file itself,
        # not NamedTemporaryFile's wrapper, whose every write goes through a
        # Python-level __getattr__ (a twentieth of a conversion's time).
        handle, self.name = tempfile.mkstemp(prefix="claudetrace-import-", dir=spool_folder())
        self.file = open(handle, "wb", buffering=_BUFFER)  # noqa: SIM115
        self._write = self.file.write

    def add(self, event: Event) -> None:
        self.session.add(event)
        self.seen.info.observe(event)
        body = self._encode((event.seq, event.direction, event.t_ns, event.data, event.wall_ns,
                             event.fields, line_words(event)))
        self._write(len(body).to_bytes(4, "little"))
        self._write(body)

    def close(self) -> None:
        self.file.close()

    def discard(self) -> None:
        self.file.close()
        os.unlink(self.name)

    @staticmethod
    def read(name: str) -> Iterator[Said]:
        """The events of the spool file ``name``, from the start."""
        decode = msgspec.msgpack.Decoder(
            tuple[int, Direction, int, bytes, int, LineFields, str | None]).decode
        with open(name, "rb", buffering=_BUFFER) as handle:
            while head := handle.read(4):
                body = handle.read(int.from_bytes(head, "little"))
                seq, direction, t_ns, data, wall_ns, fields, words = decode(body)
                yield Said(seq, direction, t_ns, data, wall_ns=wall_ns, _fields=fields,
                           words=words)


def spool_folder() -> str:
    """This process's folder of spool files: the one its importer named
    (:func:`use_folder`), else one made now (removed when this process ends),
    after removing those of processes that are gone (:func:`sweep`)."""
    global _folder
    if _folder is None or not os.path.isdir(_folder):
        sweep()
        pid = os.getpid()
        host = os.uname().nodename.replace(os.sep, "_")
        _folder = tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{host}-{pid}-{start_time(pid) or 0}-")
        atexit.register(shutil.rmtree, _folder, ignore_errors=True)
    return _folder


def use_folder(folder: str) -> None:
    """Spool into ``folder`` (the importing process's, in its converting process)."""
    global _folder
    _folder = folder


def sweep(where: str | None = None) -> list[str]:
    """:func:`~.owner.sweep_spools`, this process's own folder kept."""
    return sweep_spools(where, keep=_folder)


__all__ = ["FOLDER_PREFIX", "Spool", "spool_folder", "sweep", "use_folder"]
