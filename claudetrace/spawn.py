"""Starting the proxied command: the first thing ``claudetrace proxy`` does.

Every SDK ``query()`` starts a fresh CLI through the proxy, so whatever the
proxy does before its child runs is paid on every session.  This module starts
the child with little loaded beyond what the interpreter itself loads at
start-up (``os``, ``time``): :mod:`signal`, whose handlers must be in place
before the child starts (its enums bring ``enum``, ``functools`` and
``collections``: about 4 ms, which the proxy would load a little later anyway;
the C module under it is private), and no click, no :mod:`subprocess` (which
imports ``locale`` and ``re`` as well), no store, no telemetry.  Everything
recording needs is imported and set up afterwards
(:func:`claudetrace.proxy.run_proxy`) while the child starts; what it writes
meanwhile waits in its pipes, and the host's first lines wait in ours.

The child is started with ``posix_spawn``: its stdin, stdout and stderr are
pipes to us; it gets the signals Python ignores in itself (``SIGPIPE``…) at
their defaults, as :mod:`subprocess` gives them; descriptors the host passed us
to inherit, it inherits, as ``claude`` started directly would (ours are all
close-on-exec).
"""

from __future__ import annotations

import errno
import os
import signal
import time

from .interrupts import HeldInterrupts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Signals Python ignores in its own process, which a child gets at their defaults.
_DEFAULT_IN_CHILD = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name)
)


class Child:
    """A started child: its pid and our ends of its stdin, stdout and stderr pipes.

    ``returncode`` follows :class:`subprocess.Popen`: the exit code, or ``-N``
    when signal N killed it.
    """

    def __init__(self, pid: int, stdin: int, stdout: int, stderr: int) -> None:
        self.pid = pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None

    def wait(self) -> int:
        """Wait for the child to exit, running signal handlers meanwhile."""
        if self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(_wait_for(self.pid))
        return self.returncode

    def send_signal(self, signum: int) -> None:
        """Signal the child, unless it has been reaped (its pid may be someone else's)."""
        if self.returncode is None:
            try:  # noqa: SIM105 - contextlib is one import more before the child starts
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass


class Started:
    """The outcome of :func:`launch`: the child, or why it could not start."""

    def __init__(
        self,
        child: Child | None,
        error: str | None,
        forwarder: SignalForwarder,
        t0_ns: int,
        wall_ns: int,
    ) -> None:
        self.child = child
        self.error = error
        self.forwarder = forwarder
        #: ``time.monotonic_ns()`` just before the child started: recorded times count from it.
        self.t0_ns = t0_ns
        #: ``time.time_ns()`` read next to ``t0_ns``: the recording's start on the wall
        #: clock, so that ``started_ns + t`` is when a line was seen.
        self.wall_ns = wall_ns


def launch(argv: Sequence[str], env: Mapping[str, str],
           held: HeldInterrupts | None = None) -> Started:
    """Install the signal forwarding and start ``argv``; never raises for a bad command.

    The handlers come first: a signal that arrives while the child starts is
    delivered to it once it runs, instead of killing the proxy.  ``held``: the
    Ctrl-Cs noted since the command began, for the child too.
    """
    forwarder = SignalForwarder(held)
    # The wall clock first: a line's time (monotonic, from t0) added to it is
    # then never earlier than the wall clock read when the line came.
    wall = time.time_ns()
    t0 = time.monotonic_ns()
    try:
        child = start_child(argv, env)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        name = argv[0] if argv else ""
        return Started(None, f"cannot start {name!r}: {reason}", forwarder, t0, wall)
    forwarder.attach(child)
    return Started(child, None, forwarder, t0, wall)


def start_child(argv: Sequence[str], env: Mapping[str, str]) -> Child:
    """Start ``argv`` (looked up on ``env``'s ``PATH`` as ``execvpe`` does) on three pipes."""
    if not argv:
        raise ValueError("no command given")
    ends = [_pipe() for _ in range(3)]
    theirs = (ends[0][0], ends[1][1], ends[2][1])
    actions = [(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(theirs)]
    try:
        pid = _spawn(list(argv), env, actions)
    except BaseException:
        for read_end, write_end in ends:
            os.close(read_end)
            os.close(write_end)
        raise
    for fd in theirs:
        os.close(fd)
    return Child(pid, ends[0][1], ends[1][0], ends[2][0])


def _wait_for(pid: int) -> int:
    """``pid``'s wait status, once it has exited; handlers of signals that come
    meanwhile run at once.

    A blocking ``waitpid`` is not enough: Python runs a handler only between
    bytecodes, so a signal that lands after the last check and before the
    system call (the main thread descheduled there, on a loaded machine) is
    handled only when the wait returns, and a Ctrl-C meant for the child waited
    for the child to end on its own.  Here the wait is a ``select`` on the
    child's pidfd and on a wakeup pipe the signal module writes to whenever a
    signal comes, so none slips past it.  Without pidfds (not Linux, or
    before 5.3) or outside the main thread, it is the plain ``waitpid``.
    """
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return os.waitpid(pid, 0)[1]
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    try:
        previous = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    except ValueError:  # not the main thread: no handler runs here anyway
        for fd in (pidfd, wake_r, wake_w):
            os.close(fd)
        return os.waitpid(pid, 0)[1]
    import select

    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            select.select([pidfd, wake_r], [], [])
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
    finally:
        signal.set_wakeup_fd(previous)
        for fd in (pidfd, wake_r, wake_w):
            os.close(fd)


def _pipe() -> tuple[int, int]:
    """A pipe whose ends are not 0, 1 or 2 (when the proxy was started with one of them
    closed, ``pipe()`` would hand that number out, and the child's dup2 onto it would
    keep it close-on-exec)."""
    read_end, write_end = os.pipe()
    if min(read_end, write_end) > 2:
        return read_end, write_end
    import fcntl

    moved = (fcntl.fcntl(read_end, fcntl.F_DUPFD_CLOEXEC, 3),
             fcntl.fcntl(write_end, fcntl.F_DUPFD_CLOEXEC, 3))
    os.close(read_end)
    os.close(write_end)
    return moved


def _spawn(argv: list[str], env: Mapping[str, str], actions: list[tuple[int, int, int]]) -> int:
    """``posix_spawn`` the first executable ``argv[0]`` names on ``env``'s PATH.

    The folders are searched here, not by a spawn per folder: each spawn that
    finds nothing costs a clone of the whole process.
    """
    program = argv[0]
    path = program if os.path.dirname(program) else which(program, env)
    return os.posix_spawn(path, argv, env, file_actions=actions, setsigdef=_DEFAULT_IN_CHILD)


def which(program: str, env: Mapping[str, str]) -> str:
    """The first executable file called ``program`` on ``env``'s PATH (as ``execvpe``
    looks: a file there that may not be run is the error when nothing else is found)."""
    found = None
    for folder in os.get_exec_path(env):
        path = os.path.join(folder, program)
        try:
            if os.stat(path).st_mode & 0o170000 != 0o100000:  # not a regular file
                continue
        except OSError:
            continue
        if os.access(path, os.X_OK):
            return path
        found = found or path
    if found is not None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), found)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


class SignalForwarder:
    """Forwards SIGINT/SIGTERM/SIGHUP to the child (from the main thread only).

    Signals that arrive before the child exists are held and sent as soon as it
    is attached, those ``held`` noted too; once it has been reaped they are
    ignored.
    """

    def __init__(self, held: HeldInterrupts | None = None) -> None:
        self.child: Child | None = None
        self.early: list[int] = []
        self.previous: dict[int, object] = {}
        for signum in FORWARDED_SIGNALS:
            try:
                self.previous[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread: signals are not ours to take
                break
        if held is not None:
            # What the noting stood in for is what goes back at the end.
            if held.previous is not None and signal.SIGINT in self.previous:
                self.previous[signal.SIGINT], held.previous = held.previous, None
            self.early += held.signals
            held.signals.clear()

    def _handle(self, signum: int, _frame: object) -> None:
        if self.child is None:
            self.early.append(signum)
            return
        self.child.send_signal(signum)  # a no-op once the child is reaped

    def attach(self, child: Child) -> None:
        """The child now runs: deliver what arrived while it was starting."""
        self.child = child
        early, self.early = self.early, []
        for signum in early:
            child.send_signal(signum)

    def restore(self) -> None:
        """Put the previous handlers back."""
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        self.previous = {}
