"""The shim file and argv[0] dispatch (claudetrace.shim), with a fake `claude`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from claudetrace.shim import ShimError, find_real_cli, self_command, shim_script, write_shim

pytestmark = pytest.mark.usefixtures("ct_env")

FAKE_CLAUDE = """#!/bin/sh
# A stand-in for the claude CLI: a version answer, else echo stdin.
if [ "$1" = "-v" ] || [ "$1" = "--version" ]; then
  echo "2.1.330 (Claude Code)"
  exit 0
fi
echo "args: $*" >&2
cat
exit 3
"""


@pytest.fixture
def fake_claude(tmp_path: Path) -> Path:
    folder = tmp_path / "real-bin"
    folder.mkdir()
    path = folder / "claude"
    path.write_text(FAKE_CLAUDE)
    path.chmod(0o755)
    return path


def sessions(db: Path) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-m", "claudetrace", "sessions", "--json", "--db", str(db)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def console_script() -> Path:
    script = Path(sys.executable).parent / "claudetrace"
    if not script.exists():
        pytest.skip("the claudetrace console script is not installed next to the interpreter")
    return script


def test_shim_is_executable_answers_version_unrecorded_and_records_runs(
    tmp_path: Path, db_path: Path, fake_claude: Path
) -> None:
    out = tmp_path / "shims" / "claude-shim"
    out.parent.mkdir()
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "claudetrace",
            "shim",
            str(out),
            "--real",
            str(fake_claude),
            "--db",
            str(db_path),
            "--name",
            "via-shim",
            "--tag",
            "k=v",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == str(out)
    assert os.access(out, os.X_OK)
    assert "claudetrace shim" in out.read_text()

    version = subprocess.run([str(out), "-v"], capture_output=True, text=True, timeout=30)
    assert (version.returncode, version.stdout) == (0, "2.1.330 (Claude Code)\n")
    assert not db_path.exists() or sessions(db_path) == []

    run = subprocess.run(
        [str(out), "--output-format", "stream-json"],
        input=b'{"type":"user"}\n',
        capture_output=True,
        timeout=60,
    )
    assert run.returncode == 3
    assert run.stdout == b'{"type":"user"}\n'
    assert run.stderr == b"args: --output-format stream-json\n"
    [rec] = sessions(db_path)
    assert rec["argv"] == [str(fake_claude), "--output-format", "stream-json"]
    assert rec["name"] == "via-shim" and rec["tags"] == {"k": "v"} and rec["exit_code"] == 3
    assert rec["events"] == 3  # in, out, err


def test_shim_refuses_a_missing_real_cli_a_directory_and_a_pipe(tmp_path: Path) -> None:
    missing = subprocess.run(
        [
            sys.executable,
            "-m",
            "claudetrace",
            "shim",
            str(tmp_path / "s"),
            "--real",
            str(tmp_path / "nope"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1 and "is not an executable file" in missing.stderr
    assert len(missing.stderr.splitlines()) == 1
    empty = subprocess.run([sys.executable, "-m", "claudetrace", "shim", str(tmp_path / "s"),
                            "--real", ""], capture_output=True, text=True, timeout=60)
    assert empty.returncode == 1 and empty.stderr == (  # was "pass --real PATH"
        "claudetrace: the real claude CLI path given is empty: name the real claude\n")
    # A folder that does not exist is not made (a typo would leave folders behind).
    nowhere = tmp_path / "no" / "such" / "dir" / "claude-rec"
    made = subprocess.run([sys.executable, "-m", "claudetrace", "shim", str(nowhere),
                           "--real", sys.executable], capture_output=True, text=True, timeout=60)
    assert made.returncode == 1 and made.stderr.count("\n") == 1, made.stderr
    assert "no folder" in made.stderr and not (tmp_path / "no").exists()
    # A pipe or a device (/dev/null) is never replaced by a shim.
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ShimError, match="is not a regular file"):
        write_shim(fifo, ["true"])
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_shim_written_through_a_symlink_goes_to_its_target(tmp_path: Path) -> None:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    target = folder / "claude-shim"
    target.write_text("old\n")
    link = tmp_path / "claude"
    link.symlink_to(target)
    assert write_shim(link, ["true"], force=True) == link
    assert link.is_symlink() and link.readlink() == target
    assert target.read_text().startswith("#!") and os.access(target, os.X_OK)
    assert [p.name for p in folder.iterdir()] == ["claude-shim"]  # no temporary left
    # A symlink to a pipe is refused like the pipe, and both stay.
    fifo = folder / "pipe"
    os.mkfifo(fifo)
    to_fifo = tmp_path / "to-pipe"
    to_fifo.symlink_to(fifo)
    with pytest.raises(ShimError, match="is not a regular file"):
        write_shim(to_fifo, ["true"])
    assert to_fifo.is_symlink() and stat.S_ISFIFO(fifo.stat().st_mode)


def test_shim_script_quotes_paths() -> None:
    text = shim_script(["/opt/my tools/python", "-m", "claudetrace"], real="/x y/claude")
    assert "'/opt/my tools/python' -m claudetrace \"$@\"" in text
    assert "exec '/x y/claude' \"$@\"" in text


def test_the_shims_python_runs_claudetrace_without_runpy(tmp_path: Path) -> None:
    # A shim runs for every session: ``python -m`` would load runpy (and importlib.util,
    # contextlib, collections, functools) before the proxy could start the CLI.
    # -X importtime, not PYTHONPROFILEIMPORTTIME: the indexer the proxy starts
    # (``python -m claudetrace.indexer``, off the critical path) would inherit the
    # variable, and its imports reach the proxy's stderr while the session runs.
    python, *rest = self_command()
    command = [python, "-X", "importtime", *rest, "proxy", "--db", str(tmp_path / "t.db"),
               "--", "true"]
    done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    imported = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert "claudetrace.spawn" in imported and "runpy" not in imported
    assert self_command()[0] == sys.executable


def _symlinked_claude(tmp_path: Path) -> Path:
    folder = tmp_path / "shim-bin"
    folder.mkdir()
    link = folder / "claude"
    link.symlink_to(console_script())
    return link


def test_argv0_dispatch_with_claudetrace_real_cli(
    tmp_path: Path, db_path: Path, fake_claude: Path
) -> None:
    link = _symlinked_claude(tmp_path)
    env = {**os.environ, "CLAUDETRACE_REAL_CLI": str(fake_claude), "CLAUDETRACE_DB": str(db_path)}
    version = subprocess.run(
        [str(link), "--version"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert version.stdout == "2.1.330 (Claude Code)\n"
    run = subprocess.run(
        [str(link), "-p"], input=b"hello\n", capture_output=True, env=env, timeout=60
    )
    assert (run.returncode, run.stdout) == (3, b"hello\n")
    [rec] = sessions(db_path)
    assert rec["argv"] == [str(fake_claude), "-p"]


def test_argv0_dispatch_finds_the_next_claude_on_path(
    tmp_path: Path, db_path: Path, fake_claude: Path
) -> None:
    link = _symlinked_claude(tmp_path)
    path = os.pathsep.join([str(link.parent), str(fake_claude.parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "CLAUDETRACE_DB": str(db_path)}
    run = subprocess.run(["claude", "--x"], input=b"hi\n", capture_output=True, env=env, timeout=60)
    assert (run.returncode, run.stdout, run.stderr) == (3, b"hi\n", b"args: --x\n")
    [rec] = sessions(db_path)
    assert rec["argv"] == [str(fake_claude), "--x"]


def test_argv0_dispatch_without_a_real_claude_is_exit_127(tmp_path: Path) -> None:
    link = _symlinked_claude(tmp_path)
    env = {**os.environ, "PATH": str(link.parent)}
    run = subprocess.run(
        [str(link)], capture_output=True, text=True, env=env, timeout=30, stdin=subprocess.DEVNULL
    )
    assert run.returncode == 127
    assert run.stderr.startswith("claudetrace: cannot find the real claude CLI")
    assert len(run.stderr.splitlines()) == 1


def test_argv0_dispatch_refuses_itself_as_the_real_cli(tmp_path: Path, db_path: Path) -> None:
    # ``export CLAUDETRACE_REAL_CLI=$(command -v claude)`` once the link is first
    # on PATH names the link: each claude ran the next, a chain of proxies
    # (and indexers) growing until something killed it.
    link = _symlinked_claude(tmp_path)
    for named in (str(link), "claude"):
        env = {**os.environ, "CLAUDETRACE_REAL_CLI": named, "CLAUDETRACE_DB": str(db_path),
               "PATH": os.pathsep.join([str(link.parent), os.environ.get("PATH", "")])}
        with subprocess.Popen([str(link), "-p"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env,
                              start_new_session=True) as proc:
            try:
                _out, err = proc.communicate("hi\n", timeout=60)
            finally:  # a chain of claudes must not outlive the test
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        assert proc.returncode == 127, (named, err)
        [line] = err.splitlines()
        assert line.startswith("claudetrace: the real claude CLI") and "is claudetrace" in line
    assert not db_path.exists() or not sessions(db_path)
    with pytest.raises(ShimError, match="is claudetrace itself"):
        find_real_cli(str(link))


def test_find_real_cli_skips_itself_and_other_shims(
    tmp_path: Path, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shim_dir = tmp_path / "other-shim"
    shim_dir.mkdir()
    other = shim_dir / "claude"
    other.write_text(shim_script(["claudetrace", "proxy", "--", str(fake_claude)]))
    other.chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(shim_dir), str(fake_claude.parent)]))
    assert find_real_cli() == str(fake_claude)
    monkeypatch.setenv("PATH", str(shim_dir))
    with pytest.raises(ShimError):
        find_real_cli()
    monkeypatch.setenv("CLAUDETRACE_REAL_CLI", str(tmp_path / "missing"))
    with pytest.raises(ShimError, match="not an executable file"):
        find_real_cli()


SAMPLE = Path(__file__).parent / "fixtures" / "samples" / "basic.cassette.ndjson"


def test_replay_shim_answers_the_recorded_version_and_replays(tmp_path: Path) -> None:
    out = tmp_path / "claude-replay"
    made = subprocess.run(
        [sys.executable, "-m", "claudetrace", "shim", str(out), "--replay", str(SAMPLE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    assert os.access(out, os.X_OK)
    version = subprocess.run([str(out), "-v"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0
    assert version.stdout.strip() == "2.1.330 (Claude Code)"
    # Play the host's side of the recording (each line once the CLI lines it
    # waited for are out), with a fresh request id for the host's initialize: the
    # replay answers with the live id and ends with the recorded result.
    from claudetrace.cassette import read_cassette
    from claudetrace.demo import host_steps

    recorded = read_cassette(SAMPLE)
    steps = host_steps(recorded)
    received: list[dict[str, object]] = []
    with subprocess.Popen(
        # The host passes the options it was recorded with (others diverge).
        [str(out), *recorded.header["argv"][1:]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as run:
        assert run.stdin is not None and run.stdout is not None
        for number, step in enumerate(steps):
            while len(received) < step.after:
                received.append(json.loads(run.stdout.readline()))
            data = step.data
            if number == 0:
                data = data.replace(b"req_1_9c3ad989", b"req_1_feedbeef")
            run.stdin.write(data + b"\n")
            run.stdin.flush()
        run.stdin.close()
        received += [json.loads(line) for line in run.stdout]
        assert run.wait(timeout=60) == 0
    answers = [m for m in received if m.get("type") == "control_response"]
    assert answers[0]["response"]["request_id"] == "req_1_feedbeef"  # type: ignore[index]
    assert received[-2]["type"] == "result" and received[-2]["subtype"] == "success"


def test_a_replay_shim_injects_faults_and_checks_them_first(tmp_path: Path) -> None:
    out = tmp_path / "claude-crash"
    made = subprocess.run(
        [*self_command(), "shim", str(out), "--replay", str(SAMPLE), "--fault", "crash@0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    assert "--fault crash@0" in out.read_text()
    crashed = subprocess.run(
        [str(out), "--output-format", "stream-json"], input=b"", capture_output=True, timeout=60
    )
    assert crashed.returncode == 1 and crashed.stdout == b""
    assert b"injected crash after 0 line(s)" in crashed.stderr
    bad = subprocess.run(
        [
            *self_command(),
            "shim",
            str(tmp_path / "x"),
            "--replay",
            str(SAMPLE),
            "--fault",
            "boom@1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown fault kind" in bad.stderr
    )
    assert not (tmp_path / "x").exists()
    alone = subprocess.run(
        [*self_command(), "shim", str(tmp_path / "y"), "--fault", "crash@1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert alone.returncode == 2 and "--fault needs --replay" in alone.stderr


def test_shim_prints_the_path_it_wrote(tmp_path: Path) -> None:
    # click.echo dropped an ESC [...m from the path in a pipe: the path printed
    # was not the shim's.
    from click.testing import CliRunner

    from claudetrace.cli import cli

    out = tmp_path / "claude\x1b[2Jrec"
    done = CliRunner().invoke(cli, ["shim", str(out), "--real", sys.executable])
    assert done.exit_code == 0, done.output
    assert done.stdout == f"{out}\n" and os.access(out, os.X_OK)


def test_a_shim_is_not_written_over_the_real_cli(tmp_path: Path, fake_claude: Path) -> None:
    # ``claudetrace shim "$(command -v claude)"`` replaced the real CLI by a shim
    # that ran itself: the CLI gone, and every run a chain of proxies.
    before = fake_claude.read_bytes()
    with pytest.raises(ShimError, match="is the real claude CLI"):
        write_shim(fake_claude, ["true"], real=str(fake_claude))
    done = subprocess.run([sys.executable, "-m", "claudetrace", "shim", str(fake_claude)],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": str(fake_claude.parent)})
    assert done.returncode == 1 and "is the real claude CLI" in done.stderr, done.stderr
    assert fake_claude.read_bytes() == before
    # A replaying shim runs no CLI: it may stand as the real one.
    replaying = tmp_path / "replaying"
    write_shim(replaying, [*self_command(), "replay", "x.ndjson"])
    assert find_real_cli(str(replaying)) == str(replaying)


def test_a_shim_that_does_not_fit_leaves_no_file_behind(tmp_path: Path) -> None:
    # A file size limit (`ulimit -f`) smaller than the shim: the command says it
    # cannot write it, and neither a half shim nor its temporary file is left.
    import resource

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))

    real = tmp_path / "claude"
    real.write_text("#!/bin/sh\n")
    real.chmod(0o755)
    out = tmp_path / "out" / "my-claude"
    out.parent.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "claudetrace", "shim", str(out), "--real", str(real)],
        capture_output=True, text=True, preexec_fn=small_files, timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
    )
    assert done.returncode != 0
    assert done.stderr.startswith("claudetrace: cannot write shim"), done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert list(out.parent.iterdir()) == []


def test_a_file_claudetrace_did_not_write_is_not_replaced_without_force(tmp_path: Path) -> None:
    # ``claudetrace shim victim.py --real /bin/cat`` replaced the script, exit 0.
    victim = tmp_path / "victim.py"
    victim.write_text("print('mine')\n")

    def shim(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "claudetrace", "shim", str(victim),
                               "--real", "/bin/cat", *extra],
                              capture_output=True, text=True, timeout=60)

    refused = shim()
    assert refused.returncode == 1 and refused.stdout == "", refused.stderr
    assert refused.stderr == (f"claudetrace: {victim} exists and is not a shim claudetrace "
                              "wrote: give another name, or --force to replace it\n")
    assert victim.read_text() == "print('mine')\n"
    with pytest.raises(ShimError, match="not a shim claudetrace wrote"):
        write_shim(victim, ["true"])
    assert victim.read_text() == "print('mine')\n"
    # --force replaces it; a shim (ours) and an empty file are replaced as before.
    assert shim("--force").returncode == 0
    assert victim.read_text().startswith("#!/bin/sh\n# claudetrace shim:")
    assert shim().returncode == 0
    empty = tmp_path / "empty"
    empty.touch()
    assert write_shim(empty, ["true"]) == empty and os.access(empty, os.X_OK)
