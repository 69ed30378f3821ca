"""The proxy's start-up: the child first, read without click, nothing about the store
in the way (claudetrace.cli.launch, claudetrace.spawn)."""

from __future__ import annotations

import hashlib
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace import capture as cap
from claudetrace.cli import cli, record
from claudetrace.cli import launch as launch_mod
from claudetrace.interrupts import HeldInterrupts
from claudetrace.spawn import launch, start_child

pytestmark = pytest.mark.usefixtures("ct_env")

PY = sys.executable


def click_reads(args: list[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any] | None:
    """What the click command passes to run_and_exit for ``proxy ARGS`` (None: an error)."""
    seen: list[dict[str, Any]] = []

    def fake(argv: list[str], **kw: Any) -> None:
        seen.append({"argv": argv, **kw})

    monkeypatch.setattr(record, "run_and_exit", fake)
    result = CliRunner().invoke(cli, ["proxy", *args])
    return seen[0] if result.exit_code == 0 and seen else None


@pytest.mark.parametrize("args", [
    ["--", "claude", "--verbose"],
    ["--db", "x.db", "--", "claude", "--", "-v"],
    ["--db=x.db", "--name", "n", "--tag", "a=1", "--tag", " b =2=3", "--", "c"],
    ["--name", "--", "--", "c"],
    ["--otel-endpoint", "http://h:4318", "--otel-protocol", "grpc", "--otel-content", "--", "c"],
    ["--no-otel-content", "--otel-protocol=http/protobuf", "--", "c", "--db", "y"],
    ["--db", "a", "--db", "b", "--", "c"],
])
def test_the_fast_reading_agrees_with_click(args: list[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    fast = launch_mod.parse_proxy_args(args)
    assert fast is not None
    assert fast == click_reads(args, monkeypatch)


def test_the_environment_names_the_database_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDETRACE_DB", "env.db")
    args = ["--", "c"]
    assert launch_mod.parse_proxy_args(args) == click_reads(args, monkeypatch)
    assert launch_mod.parse_proxy_args(args)["db"] == "env.db"  # type: ignore[index]


@pytest.mark.parametrize("args", [
    ["claude"],  # no --: click decides what is an option
    ["--help"],
    ["--verbose", "--", "c"],
    ["--tag", "novalue", "--", "c"],
    ["--otel-protocol", "carrier-pigeon", "--", "c"],
    ["--db", "x.db", "--"],
    ["--db"],
])
def test_anything_else_is_left_to_click(args: list[str]) -> None:
    assert launch_mod.parse_proxy_args(args) is None


def test_the_fast_reading_knows_every_option_of_the_command() -> None:
    names = {opt for param in record.proxy.params for opt in (*param.opts, *param.secondary_opts)
             if opt.startswith("--")}
    assert names == set(launch_mod.VALUE_OPTIONS) | set(launch_mod.FLAGS)


#: Modules none of the ways in may load before the child starts (``signal``, with
#: ``enum``, must: the forwarding handlers are installed before the spawn, and its
#: C half ``_signal`` is private).
HEAVY = {"click", "sqlalchemy", "typing", "subprocess", "dataclasses", "re", "json",
         "pathlib", "shutil", "runpy", "claudetrace.capture", "claudetrace.store",
         "claudetrace.proxy", "claudetrace.telemetry.config", "claudetrace.model.events",
         "opentelemetry"}


def loaded_when_the_child_starts(tmp_path: Path, call: str, **env: str) -> set[str]:
    """The modules loaded when the child is started, seen from inside the proxy that
    ``call`` (Python, with ``main`` imported) runs."""
    seen = tmp_path / "modules"
    code = textwrap.dedent(f"""
        import sys
        import claudetrace.spawn as spawn
        real = spawn.start_child
        def start_child(argv, env):
            with open({str(seen)!r}, "w") as out:
                out.write("\\n".join(sorted(sys.modules)))
            return real(argv, env)
        spawn.start_child = start_child
        from claudetrace.cli import main
        {call}
    """)
    done = subprocess.run([PY, "-c", code], capture_output=True, timeout=60, check=False,
                          stdin=subprocess.DEVNULL, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return set(seen.read_text().split())


def test_nothing_heavy_is_imported_before_the_child_starts(tmp_path: Path) -> None:
    argv = ["proxy", "--db", str(tmp_path / "t.db"), "--", "true"]
    loaded = loaded_when_the_child_starts(tmp_path, f"main({argv!r})")
    assert not loaded & HEAVY, loaded & HEAVY
    assert "hashlib" not in loaded


@pytest.mark.parametrize("flags, env", [
    (["--otel-endpoint", "http://127.0.0.1:9"], {}),
    ([], {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_SERVICE_NAME": "x"}),
])
def test_nor_with_live_telemetry_which_only_adds_the_trace_context(
    tmp_path: Path, flags: list[str], env: dict[str, str]
) -> None:
    # The CLI gets the recording's TRACEPARENT, so the recording's id and the
    # exporters' settings come first; the SDK, the settings in full and the
    # proxy's own modules come after.
    argv = ["proxy", "--db", str(tmp_path / "t.db"), *flags, "--", "true"]
    loaded = loaded_when_the_child_starts(tmp_path, f"main({argv!r})", **env)
    assert not loaded & HEAVY, loaded & HEAVY
    assert {"claudetrace.ids", "claudetrace.telemetry.context"} <= loaded


def test_nor_as_claude_through_a_symlink(tmp_path: Path) -> None:
    # argv[0] dispatch finds the real CLI on PATH (passing over itself) first.
    real = tmp_path / "bin" / "claude"
    real.parent.mkdir()
    real.write_text("#!/bin/sh\nexit 0\n")
    real.chmod(0o755)
    call = "sys.argv = ['claude', '-p']; main()"
    loaded = loaded_when_the_child_starts(
        tmp_path, call, PATH=f"{real.parent}{os.pathsep}{os.environ['PATH']}",
        CLAUDETRACE_DB=str(tmp_path / "t.db"))
    assert not loaded & HEAVY, loaded & HEAVY


def proxy(db: str, *child: str, **kw: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen([PY, "-m", "claudetrace", "proxy", "--db", db, "--", *child],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kw)


@pytest.mark.parametrize("url", ["nosuchdialect://x", "postgresql+psycopg://u@127.0.0.1:1/ct"])
def test_a_bad_or_unreachable_database_never_stops_the_child(url: str) -> None:
    # The child starts and forwarding goes on; the problem is one line on stderr
    # while the session runs, and the recording waits in its capture file.
    env = {**os.environ, "CLAUDETRACE_FLUSH_TIMEOUT": "0"}
    with proxy(url, "cat", env=env) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(b'{"type":"user"}\n')
        proc.stdin.flush()
        assert proc.stdout.readline() == b'{"type":"user"}\n'
        ready, _, _ = select.select([proc.stderr], [], [], 60)
        assert ready, "no word about the database"
        line = proc.stderr.readline().decode()
        assert line.startswith("claudetrace: cannot open the store") and "kept in" in line
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        assert "Traceback" not in proc.stderr.read().decode()
    [capture] = cap.capture_files(url)
    assert capture.exists()


def test_the_command_is_looked_up_on_path_as_execvp_does(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "tool").write_text("#!/bin/sh\necho first\n")  # not executable: passed over
    (second / "tool").write_text("#!/bin/sh\necho second\n")
    (second / "tool").chmod(0o755)
    (first / "only").write_text("#!/bin/sh\n")
    env = {"PATH": f"{first}{os.pathsep}{second}"}
    child = start_child(["tool"], env)
    try:
        os.close(child.stdin)
        assert os.read(child.stdout, 100) == b"second\n"
        assert child.wait() == 0
    finally:
        os.close(child.stdout)
        os.close(child.stderr)
    with pytest.raises(PermissionError):
        start_child(["only"], env)
    with pytest.raises(FileNotFoundError):
        start_child(["nowhere"], env)


def test_the_child_gets_sigpipe_at_its_default(tmp_path: Path) -> None:
    # Python ignores SIGPIPE in itself; a child writing to a closed pipe must die
    # of it, as under a shell, not get EPIPE errors.
    child = start_child(["sh", "-c", "sleep 0.2; exec yes"], os.environ)
    os.close(child.stdout)
    os.close(child.stdin)
    try:
        assert child.wait() == -13
    finally:
        os.close(child.stderr)


def test_captures_left_by_earlier_builds_for_a_server_database_are_still_found(
    ct_env: Path,
) -> None:
    # Earlier builds named a server database's capture folder by SQLAlchemy's
    # rendering of its URL; the proxy now names it without SQLAlchemy.
    from sqlalchemy.engine import make_url

    # (An encoded space, which SQLAlchemy writes as ``+``: the two names differ.)
    url = "postgresql+psycopg://u:secret@db.example:5432/ct?sslmode=require&a=b%20c"
    old = hashlib.sha256(make_url(url).render_as_string(hide_password=True).encode())
    folder = ct_env / "capture" / old.hexdigest()[:16]
    folder.mkdir(parents=True)
    left = folder / f"01ABC{cap.SUFFIX}"
    left.write_bytes(cap.MAGIC)
    assert folder not in cap.capture_dirs(url)
    assert cap.capture_files(url) == [left]
    assert cap.capture_dirs(url)[0] == cap.capture_dirs(url.replace("secret", "other"))[0]


def test_a_signal_whose_handler_could_not_interrupt_the_wait_still_reaches_the_child() -> None:
    # Python runs a handler between bytecodes: a SIGINT that lands just before
    # the main thread's wait system call (or that the kernel gives another
    # thread) is only noted, and a plain waitpid slept on until the child ended
    # by itself (CI saw the proxy exit 0 after a Ctrl-C).  A SIGINT sent to
    # another thread is handled the same way, reliably: the wait must wake for it.
    started = launch(["sleep", "30"], os.environ)
    assert started.child is not None
    timer = threading.Timer(0.2, lambda: signal.pthread_kill(threading.get_ident(), signal.SIGINT))
    try:
        timer.start()
        assert started.child.wait() == -signal.SIGINT
    finally:
        timer.cancel()
        started.forwarder.restore()
        started.child.send_signal(signal.SIGKILL)
        for fd in (started.child.stdin, started.child.stdout, started.child.stderr):
            os.close(fd)


def test_a_ctrl_c_while_the_proxy_starts_is_noted_for_the_child_not_raised() -> None:
    # Python's own handler raises KeyboardInterrupt at the next bytecode; raised
    # in a callback the interpreter runs by itself (a module lock's weakref
    # callback in an import) it is printed and dropped, and the Ctrl-C was lost:
    # the child ran to its end (one start in a few hundred, on a loaded machine).
    # Raised in such a callback here, it would be dropped the same way.
    import weakref

    # Whatever handled SIGINT before (Python's own, or SIG_IGN when pytest was
    # started in the background, as a shell starts an asynchronous command).
    before = signal.getsignal(signal.SIGINT)
    held = HeldInterrupts()
    try:
        class Thing:
            pass

        thing = Thing()
        watch = weakref.ref(thing, lambda _ref: os.kill(os.getpid(), signal.SIGINT))
        del thing
        assert watch() is None
        assert held.signals == [signal.SIGINT]
        started = launch(["sleep", "30"], os.environ, held)
        assert started.child is not None and held.signals == []
        assert started.child.wait() == -signal.SIGINT  # the noted Ctrl-C, delivered
        started.forwarder.restore()
        assert signal.getsignal(signal.SIGINT) is before
        for fd in (started.child.stdin, started.child.stdout, started.child.stderr):
            os.close(fd)
    finally:
        held.release()
        signal.signal(signal.SIGINT, before)


def test_click_gets_a_ctrl_c_noted_before_it_read_the_command_line(tmp_path: Path) -> None:
    # No forwarder when the fast reading leaves the command line to click: the
    # handler is put back, and a Ctrl-C noted meanwhile ends the command with 130.
    before = signal.getsignal(signal.SIGINT)  # as in the test above
    held = HeldInterrupts()
    try:
        assert held.release() is False
        assert signal.getsignal(signal.SIGINT) is before
        held = HeldInterrupts()
        os.kill(os.getpid(), signal.SIGINT)
        assert held.release() is True
        assert signal.getsignal(signal.SIGINT) is before
    finally:
        signal.signal(signal.SIGINT, before)
