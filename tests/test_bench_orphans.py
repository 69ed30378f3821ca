"""The benchmarks' measure of what a command leaves behind: adopted, told apart, reaped."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from claudetrace.bench.orphans import RUN_ENV, _children, adopting
from claudetrace.recording import stat_fields

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

#: A command that starts a worker in a session of its own and exits at once, as the
#: proxy leaves its indexer behind.  The worker spends ``argv[1]`` s of CPU in a child
#: of its own that it waits for (as the indexer waits for its telemetry worker), then
#: waits for its stdin to close.  The command prints the worker's pid.
LEAVER = textwrap.dedent("""
    import subprocess, sys
    burn = ("import time\\nend = time.process_time() + " + sys.argv[1] + "\\n"
            "while time.process_time() < end: pass\\n")
    worker = ("import subprocess, sys\\n"
              f"subprocess.run([sys.executable, '-c', {burn!r}])\\n"
              "sys.stdin.buffer.read()\\n")
    print(subprocess.Popen([sys.executable, "-c", worker], start_new_session=True,
                           stdout=subprocess.DEVNULL).pid)
""")


#: :data:`LEAVER` whose worker's child, once it has burnt its CPU, waits for its
#: stdin to close too (as the indexer's writer lives as long as the indexer).
HOLDER = LEAVER.replace("pass\\n\")", "pass\\nimport sys\\nsys.stdin.buffer.read()\\n\")")


def leave(burn: float, marker: str, stdin: int, command: str = LEAVER) -> int:
    """Run the command (its worker's stdin: ``stdin``) until it exits; the worker's pid."""
    done = subprocess.run([sys.executable, "-c", command, str(burn)], stdin=stdin, check=True,
                          env={**os.environ, RUN_ENV: marker}, stdout=subprocess.PIPE, text=True)
    return int(done.stdout)


def test_what_a_command_leaves_behind_is_adopted_and_its_cpu_time_counted() -> None:
    hold, release = os.pipe()
    try:
        with adopting() as orphans:
            assert orphans.enabled
            leave(0.3, "1", hold)
            leave(0.0, "2", hold)
            orphans.look()  # both workers run yet: each is told by its run's marker
            os.close(release)
            busy, idle = orphans.usage("1"), orphans.usage("2")
            assert busy is not None and idle is not None
            # the worker's own child, waited for, counts
            assert busy.cpu_seconds >= 0.3 > idle.cpu_seconds
            assert busy.peak_rss_kib > 0 and idle.peak_rss_kib > 0
            assert orphans.usage("3") is None  # no such run: unknown, not zero
    finally:
        os.close(hold)


def test_a_runs_cpu_time_is_read_while_it_runs_its_descendants_apart() -> None:
    hold, release = os.pipe()
    try:
        with adopting() as orphans:
            leave(0.3, "1", hold, HOLDER)
            # The worker's child burns its 0.3 s and waits, as the worker does.
            deadline = time.monotonic() + 30
            while (now := orphans.cpu_now("1")) is None or now.descendants < 0.29:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert now.own < 0.25  # the worker's own, its child's apart
            assert orphans.cpu_now("3") is None  # no such run
            # A worker whose child has exited, waited for: its share stays the child's.
            worker = leave(0.3, "2", hold)
            while (then := orphans.cpu_now("2")) is None or _children(worker) \
                    or then.descendants < 0.29:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert then.own < 0.25
            os.close(release)
            whole = orphans.usage("1")
            assert whole is not None and whole.cpu_seconds >= 0.3
            assert orphans.cpu_now("1") is None  # it has gone
    finally:
        os.close(hold)


def test_orphans_not_asked_for_are_reaped_on_the_way_out() -> None:
    hold, release = os.pipe()
    try:
        with adopting() as orphans:
            worker = leave(0.0, "x", hold)
            orphans.look()
            os.close(release)
        # No zombie is left: the adopted worker is no child of this process any more.
        # (Only that pid is asked about: a pytest-xdist worker, or a fixture's server,
        # has children of its own that are none of this test's business.)
        with pytest.raises(ChildProcessError):
            os.waitpid(worker, os.WNOHANG)
    finally:
        os.close(hold)


def test_orphans_are_reaped_after_an_error_too() -> None:
    hold, release = os.pipe()
    try:
        with pytest.raises(RuntimeError, match="a failed run"), adopting() as orphans:
            worker = leave(0.0, "x", hold)
            orphans.look()
            os.close(release)  # the worker ends; nothing here waits for it
            raise RuntimeError("a failed run")
        # Waited for in the background as it ends: no zombie is left for the rest of
        # the process's life.  (The bound only stops a test that would wait for ever.)
        # Looked at in /proc, not with waitpid, which would reap it here.
        deadline = time.monotonic() + 60
        while _child_of_this_process(worker):
            assert time.monotonic() < deadline, f"{worker} was never waited for"
            time.sleep(0.05)
    finally:
        os.close(hold)


def _child_of_this_process(pid: int) -> bool:
    """Whether ``pid`` is (still) a child of this process, a zombie one included."""
    fields = stat_fields(pid)
    return fields is not None and int(fields[1]) == os.getpid()  # field 4, the parent


def test_a_process_gone_before_it_was_told_counts_in_the_run_asked_for_next() -> None:
    """A tiny run's indexer may be done before its proxy exits (under load): adopted
    as a zombie, its environment (the run's marker) is gone.  The run asked for next
    (the one that left it: runs are asked for one after the other) counts it, not
    nobody (which read as no figure at all)."""
    hold, release = os.pipe()
    os.close(release)  # the worker ends as soon as it has burnt its CPU
    try:
        with adopting() as orphans:
            worker = leave(0.2, "1", hold)
            deadline = time.monotonic() + 60
            while not _zombie(worker):  # exited, not waited for: no environment left
                assert time.monotonic() < deadline
                time.sleep(0.02)
            orphans.look()
            whole = orphans.usage("1")
            assert whole is not None and whole.cpu_seconds >= 0.2
            assert orphans.usage("2") is None  # taken once
    finally:
        os.close(hold)


def _zombie(pid: int) -> bool:
    fields = stat_fields(pid)
    return fields is not None and fields[0] == b"Z"  # field 3, the state
