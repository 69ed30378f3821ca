"""pytest plugin: cassette-backed ``claude`` executables for tests of SDK applications.

A test asks for ``claude_cli`` and passes it as the SDK's ``cli_path``::

    @pytest.mark.claude_cassette(record_mode="once")
    async def test_greets(claude_cli):
        options = ClaudeAgentOptions(cli_path=claude_cli)
        ...

Each test has one cassette, ``<claude_cassette_dir>/<module>/<test>.ndjson``
(ini option ``claude_cassette_dir``, default ``tests/cassettes`` under the
rootdir; the marker's ``path=`` overrides it, relative to that directory).
``claude_cli`` is a shim written into the test's temporary directory that either

- replays the cassette (``claudetrace replay``): a divergence fails the test with
  the replay engine's report as the failure message, or
- records through ``claudetrace proxy`` to the real CLI (``$CLAUDETRACE_REAL_CLI``,
  else ``claude`` on PATH) into a throw-away store; when the test passes, the
  session is exported as a sanitised cassette (:mod:`claudetrace.sanitize`).

Which of the two is decided by the record mode (:mod:`claudetrace.recordmode`):
``--claude-record-mode``, else the marker's ``record_mode=``, else the ini option
``claude_record_mode``, else ``none`` under CI and ``once`` elsewhere.
``--claude-cassettes-unused`` lists cassettes under the cassette directory that
no test of the run used.  ``claude_fake_api`` is a running scripted fake
Anthropic API, for recording cassettes in CI without an API key.  Matching,
redaction and fault settings come from the marker and ini options
(:mod:`claudetrace.replay.settings`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Final

import pytest

from .cassette import Cassette, read_cassette
from .recordmode import BadRecordMode, RecordMode, choose_mode, plan
from .replay.settings import BadSetting, ReplaySettings, flag, settings_from

#: The marker a test uses to configure its cassette.
MARKER: Final = "claude_cassette"
DEFAULT_DIR: Final = "tests/cassettes"
SUFFIX: Final = ".ndjson"
#: How long to wait, after a recorded test, for the proxy to finish its recording.
SETTLE_TIMEOUT_S: Final = 10.0
#: Default bound (seconds) on a recording's wait for an unreachable or failing API
#: (ini ``claude_record_timeout``), and the retries the CLI gets within it.
RECORD_TIMEOUT_S: Final = 120.0
RECORD_RETRIES: Final = 2

_CASSETTE_KEY = pytest.StashKey["ClaudeCassette"]()
_REPORTS_KEY = pytest.StashKey[dict[str, pytest.TestReport]]()
_USED_KEY = pytest.StashKey[set[Path]]()
_RERECORDED_KEY = pytest.StashKey[list[tuple[str, "ClaudeCassette"]]]()
#: Under pytest-xdist, what each worker's tests used and re-recorded, as the
#: controller (which writes the summary) received it from the workers.
_WORKERS_KEY = pytest.StashKey[dict[str, list[Any]]]()
#: The key of this plugin's part of an xdist worker's ``workeroutput``.
WORKER_OUTPUT: Final = "claudetrace_cassettes"


# -- pure helpers ------------------------------------------------------------------


def cassette_name(nodeid: str) -> str:
    """The file name of a test's cassette: its name inside the module, made file-safe.

    ``tests/test_app.py::TestX::test_y[a-1]`` → ``TestX.test_y-a-1.ndjson``.
    """
    return _safe_name(nodeid).strip("-") + SUFFIX


def _safe_name(nodeid: str) -> str:
    inner = ".".join(nodeid.split("::")[1:]) or nodeid
    return re.sub(r"[^A-Za-z0-9_.\-]+", "-", inner).strip(".")


def legacy_cassette_name(nodeid: str) -> str:
    """The name claudetrace gave a parametrized test's cassette before 0.x
    (``test_y-a-1-.ndjson``): found and used when it is there."""
    return _safe_name(nodeid) + SUFFIX


def cassette_path(
    cassette_dir: Path, module_path: Path, nodeid: str, explicit: str | None = None
) -> Path:
    """Where a test's cassette lives: ``explicit`` (relative to the directory) or the default."""
    if explicit:
        path = Path(explicit).expanduser()
        return path if path.is_absolute() else cassette_dir / path
    return cassette_dir / module_path.stem / cassette_name(nodeid)


def unused_cassettes(cassette_dir: Path, used: Iterable[Path]) -> list[Path]:
    """Cassette files under ``cassette_dir`` that are not in ``used`` (sorted)."""
    if not cassette_dir.is_dir():
        return []
    seen = {p.resolve() for p in used}
    return sorted(p for p in cassette_dir.rglob(f"*{SUFFIX}") if p.resolve() not in seen)


def format_divergence(report: Mapping[str, Any], cassette: Path | str | None = None) -> str:
    """The failure message for a divergence, from the replay engine's ``--report`` JSON."""
    from .replay.report import render_report

    doc = dict(report)
    if cassette is not None:
        doc["source"] = str(cassette)
    return render_report(
        doc,
        title=f"claude cassette divergence ({report.get('kind', 'divergence')})",
        origin="cassette",
    )


# -- the per-test state --------------------------------------------------------------


@dataclass
class ClaudeCassette:
    """One test's cassette: where it is, the mode, and what the fixture did with it."""

    path: Path
    mode: RecordMode
    action: str
    nodeid: str
    workdir: Path
    cli_path: Path | None = None
    report_path: Path | None = None
    db_path: Path | None = None
    redact: tuple[str, ...] = ()
    basetemp: Path | None = None
    settings: ReplaySettings = field(default_factory=ReplaySettings)
    #: The cassette before a re-recording replaces it (re-recording keeps what did not change).
    previous: Cassette | None = None
    #: Set once a recording has been saved to :attr:`path`.
    saved: bool = False
    _divergence: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def recording(self) -> bool:
        """True when the shim records against the real CLI (else it replays)."""
        return self.action == "record"

    def divergence(self) -> dict[str, Any] | None:
        """The replay engine's divergence report, once it has written one."""
        if self._divergence is None and self.report_path is not None:
            try:
                text = self.report_path.read_text(encoding="utf-8")
                self._divergence = json.loads(text)
            except (OSError, ValueError):
                return None
        return self._divergence

    def rerecord_hint(self) -> str:
        return f"pytest '{self.nodeid}' --claude-record-mode=rewrite"


# -- hooks ---------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("claudetrace", "claude CLI cassettes (claudetrace)")
    group.addoption(
        "--claude-record-mode",
        metavar="MODE",
        default=None,
        help="Record mode for claude cassettes: none, once, new_episodes, all, rewrite "
        "[default: ini claude_record_mode, else none under CI, else once].",
    )
    group.addoption(
        "--claude-cassettes-unused",
        action="store_true",
        default=False,
        help="List cassettes under claude_cassette_dir that no test of this run used.",
    )
    parser.addini("claude_cassette_dir", "Directory of claude cassettes.", default=DEFAULT_DIR)
    parser.addini("claude_record_mode", "Default record mode for claude cassettes.", default="")
    parser.addini(
        "claude_cassette_redact",
        "Regular expressions redacted from recorded cassettes and from live host lines "
        "before they are compared (one a line).",
        type="linelist",
        default=[],
    )
    parser.addini(
        "claude_volatile_paths",
        "JSON paths of host lines not compared on replay (one a line, e.g. $.message.content).",
        type="linelist",
        default=[],
    )
    parser.addini(
        "claude_match_regex",
        "PATH=REGEX rules: host values at PATH must fully match REGEX (one a line).",
        type="linelist",
        default=[],
    )
    parser.addini(
        "claude_matcher",
        "A function match(recorded, live) -> bool (module:function) for host lines that differ.",
        default="",
    )
    parser.addini(
        "claude_match_argv",
        "Compare the CLI options that change behaviour with the recording: true (default) "
        "or false.",
        default="",
    )
    parser.addini(
        "claude_ignore_argv",
        "CLI options not compared on replay (one a line, e.g. model).",
        type="linelist",
        default=[],
    )
    parser.addini(
        "claude_record_timeout",
        "Seconds a recording may wait on an unreachable or failing API before the CLI "
        f"gives up (default {RECORD_TIMEOUT_S:g}).",
        default="",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(path=None, record_mode=None, redact=(), volatile_paths=(), match_regex={{}}, "
        "match=None, match_argv=True, ignore_argv=(), fault=()): the claude cassette of this "
        "test (see the claudetrace pytest plugin).",
    )
    option = config.getoption("--claude-record-mode", default=None)
    if option:
        try:
            RecordMode.parse(option)
        except BadRecordMode as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[_USED_KEY] = set()
    config.stash[_RERECORDED_KEY] = []
    config.stash[_WORKERS_KEY] = {"used": [], "rerecorded": []}


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On a pytest-xdist worker, hand what the summary needs to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is None:
        return
    workeroutput[WORKER_OUTPUT] = {
        "used": sorted(str(path) for path in session.config.stash.get(_USED_KEY, set())),
        "rerecorded": [
            [nodeid, cassette.saved]
            for nodeid, cassette in session.config.stash.get(_RERECORDED_KEY, [])
        ],
    }


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """On the pytest-xdist controller, keep what a finished worker handed over."""
    output = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT)
    workers = node.config.stash.get(_WORKERS_KEY, None)
    if output is None or workers is None:
        return
    workers["used"] += output["used"]
    workers["rerecorded"] += output["rerecorded"]


def cassette_dir(config: pytest.Config) -> Path:
    """The configured cassette directory (relative to the rootdir)."""
    value = str(config.getini("claude_cassette_dir") or DEFAULT_DIR)
    path = Path(value).expanduser()
    return path if path.is_absolute() else Path(config.rootpath) / path


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep each phase's report, and fail a test whose replay diverged."""
    report: pytest.TestReport = yield
    item.stash.setdefault(_REPORTS_KEY, {})[report.when] = report
    cassette = item.stash.get(_CASSETTE_KEY, None)
    if report.when == "call" and cassette is not None and cassette.recording and report.failed:
        reason = _recording_failure(cassette)
        if reason:
            report.longrepr = (
                f"claude cassette recording failed on the API: {reason}\n\n{report.longrepr}"
            )
    if report.when == "call" and cassette is not None and not cassette.recording:
        divergence = cassette.divergence()
        if divergence is not None:
            report.outcome = "failed"
            report.longrepr = format_divergence(divergence, cassette.path)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """``new_episodes``: a test whose replay diverged is run again, recording.

    The test body runs a second time within the same call, against the real
    CLI: the cassette's ``claude`` (the same path the test was given) becomes a
    recording one, and the call's outcome is that of the second run.  The
    test's other fixtures are those of the first run (set up once, as for any
    call).  A divergence reported only after the body has ended (when the host
    closes the CLI later, at a fixture's teardown) fails the test instead.
    """
    try:
        result = yield
    except (Exception, pytest.fail.Exception):
        if not _rerecord_due(item):
            raise
    else:
        if not _rerecord_due(item):
            return result
    cassette = item.stash[_CASSETTE_KEY]
    cassette.action = "record"
    cassette.previous = _read_previous(cassette.path)
    cassette.report_path = None
    _prepare_recording(cassette, item.config)
    item.config.stash[_RERECORDED_KEY].append((item.nodeid, cassette))
    item.runtest()


def _rerecord_due(item: pytest.Item) -> bool:
    cassette = item.stash.get(_CASSETTE_KEY, None)
    return (
        cassette is not None
        and cassette.mode is RecordMode.NEW_EPISODES
        and not cassette.recording
        and cassette.divergence() is not None
    )


def _fixturenames(item: pytest.Item) -> Sequence[str]:
    return getattr(item, "fixturenames", ())


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    workers: dict[str, list[Any]] = config.stash.get(_WORKERS_KEY, {"used": [], "rerecorded": []})
    rerecorded = [
        (nodeid, cassette.saved) for nodeid, cassette in config.stash.get(_RERECORDED_KEY, [])
    ] + [(str(nodeid), bool(saved)) for nodeid, saved in workers["rerecorded"]]
    if rerecorded:
        terminalreporter.section("claude cassettes re-recorded (new_episodes)")
        for nodeid, saved in rerecorded:
            if saved:
                terminalreporter.line(f"{nodeid}: diverged from its cassette, recorded again")
            else:
                terminalreporter.line(
                    f"{nodeid}: diverged from its cassette; the new recording failed, "
                    "so the old cassette is kept"
                )
    if not config.getoption("--claude-cassettes-unused", default=False):
        return
    folder = cassette_dir(config)
    used = config.stash.get(_USED_KEY, set()) | {Path(p) for p in workers["used"]}
    unused = unused_cassettes(folder, used)
    terminalreporter.section("unused claude cassettes")
    if not unused:
        terminalreporter.line(f"every cassette under {folder} was used")
    for path in unused:
        terminalreporter.line(str(path))


# -- fixtures ------------------------------------------------------------------------


@pytest.fixture
def claude_cassette(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClaudeCassette]:
    """This test's cassette, with ``cli_path`` a ``claude`` that replays or records it."""
    item = request.node
    config = request.config
    marker = item.get_closest_marker(MARKER)
    kwargs = dict(marker.kwargs) if marker is not None else {}
    problem: str | None = _marker_problem(kwargs, marker.args if marker is not None else ())
    if marker is not None and marker.args:
        kwargs.setdefault("path", marker.args[0])
    try:
        if problem is not None:
            raise BadSetting(problem, key="path")
        settings = settings_from(kwargs, _ini_settings(config))
        if kwargs.get("record_mode") is not None:
            RecordMode.parse(kwargs["record_mode"])  # a typo fails even when overridden
        mode = choose_mode(
            option=config.getoption("--claude-record-mode", default=None),
            marker=kwargs.get("record_mode"),
            ini=str(config.getini("claude_record_mode") or ""),
        )
    except (BadRecordMode, BadSetting) as exc:
        problem = str(exc)
    if problem is not None:  # raised outside the handler: one line, no chained exception
        pytest.fail(problem, pytrace=False)
    folder = cassette_dir(config)
    nodeid = _cassette_nodeid(item)
    path = cassette_path(folder, Path(str(item.path)), nodeid, kwargs.get("path"))
    if kwargs.get("path") is None and not path.is_file():
        legacy = path.with_name(legacy_cassette_name(nodeid))
        path = legacy if legacy.is_file() else path
    config.stash[_USED_KEY].add(path)
    action = plan(mode, path.is_file())
    if action == "missing":
        pytest.fail(
            f"claude cassette {path} does not exist and the record mode is 'none' "
            "(record it with --claude-record-mode=once)",
            pytrace=False,
        )
    if settings.faults and action == "record":
        # A fault is injected by the replay; the real CLI cannot be told to crash.
        pytest.fail(
            f"claude_cassette fault= replays an existing cassette, and {path} is "
            f"{'being re-recorded' if path.is_file() else 'missing'} (mode {mode}): record it "
            "with a test without fault= (share it with path=)",
            pytrace=False,
        )
    cassette = ClaudeCassette(
        path=path,
        mode=mode,
        action=action,
        nodeid=item.nodeid,
        workdir=tmp_path_factory.mktemp("claude-cassette"),
        redact=settings.redact,
        basetemp=tmp_path_factory.getbasetemp(),
        settings=settings,
    )
    if action == "record" or mode is RecordMode.NEW_EPISODES:
        _check_writable(path, mode)
    if action == "record":
        # Nothing is deleted, in rewrite mode neither: a new recording replaces
        # the cassette once it is saved (a recording that cannot start, or a
        # failing test, leaves it as it was).
        _prepare_recording(cassette, config)
        cassette.previous = _read_previous(path)
    else:
        _check_cassette(path)
        _prepare_replay(cassette)
    item.stash[_CASSETTE_KEY] = cassette
    yield cassette
    if cassette.recording:
        reports = item.stash.get(_REPORTS_KEY, {})
        call = reports.get("call")
        if call is not None and call.passed:
            _save_recording(cassette)
    elif cassette.divergence() is not None:
        call = item.stash.get(_REPORTS_KEY, {}).get("call")
        if call is not None and call.passed:
            # The report arrived after the test body ended (at the host's exit).
            pytest.fail(format_divergence(cassette.divergence() or {}, path), pytrace=False)


def _marker_problem(kwargs: Mapping[str, Any], args: Sequence[Any]) -> str | None:
    """What is wrong with the marker's path, told before anything is done."""
    if len(args) > 1:
        return (f"claude_cassette takes one positional argument, the cassette's path; "
                f"got {len(args)}: {', '.join(repr(a) for a in args)}")
    if args and kwargs.get("path") is not None:
        return "claude_cassette: give the cassette's path once, as path= or positionally"
    for key, kinds in (("path", (str, PurePath)), ("record_mode", (str,))):
        value = args[0] if key == "path" and args else kwargs.get(key)
        if value is not None and not isinstance(value, kinds):
            what = "a string or a path" if key == "path" else "a string"
            return f"claude_cassette {key}= must be {what}, not {value!r}"
    return None


def _cassette_nodeid(item: pytest.Item) -> str:
    """The node id a cassette is named after: an anyio test's backend
    (``[asyncio]``, ``[trio]``) is left out, since the CLI's traffic is the same."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None and set(callspec.params) == {"anyio_backend"}:
        return item.nodeid.partition("[")[0]
    return item.nodeid


def _check_writable(path: Path, mode: RecordMode) -> None:
    """Fail the test at setup, in one line, when a recording could not be saved
    (a read-only checkout), before the real CLI is run."""
    import os

    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # made when the cassette is saved
    if os.access(folder, os.W_OK | os.X_OK):
        return
    pytest.fail(
        f"cannot record claude cassette {path} (mode {mode}): {folder} is not writable; "
        "the cassette is unchanged",
        pytrace=False,
    )


def _check_cassette(path: Path) -> None:
    """Fail the test at setup, in one line, on a cassette the replay cannot use
    (rather than as the SDK's error with the reason in the CLI's stderr)."""
    from .errors import ClaudeTraceError
    from .replay.engine import check_header

    try:
        check_header(read_cassette(path).header)
    except ClaudeTraceError as exc:
        where = "" if str(path) in str(exc) else f" {path}"
        problem = f"claude cassette{where} cannot be replayed: {exc}"
    else:
        return
    pytest.fail(problem, pytrace=False)


@pytest.fixture
def claude_fake_api() -> Iterator[Any]:
    """A running fake Anthropic API (:class:`claudetrace.testing.FakeAPI`) for this test.

    Script it by prompt (``claude_fake_api.when(r"weather", tool_use(...), text(...))``)
    or in order (``.script(...)``), and point the CLI at it with
    ``claudetrace.testing.harness.cli_env(claude_fake_api.url, home)``: recording
    cassettes then needs no API key, and re-records identically.
    """
    from .testing import FakeAPI

    with FakeAPI() as api:
        yield api


@pytest.fixture
def claude_cli(claude_cassette: ClaudeCassette) -> str:
    """Path of a ``claude`` executable for the SDK's ``cli_path``, backed by a cassette."""
    assert claude_cassette.cli_path is not None
    return str(claude_cassette.cli_path)


def _prepare_replay(cassette: ClaudeCassette) -> None:
    from .replay import write_replay_shim

    cassette.report_path = cassette.workdir / "divergence.json"
    cassette.cli_path = write_replay_shim(
        cassette.workdir / "claude",
        cassette.path,
        report=cassette.report_path,
        extra=cassette.settings.replay_args(),
    )


def _ini_settings(config: pytest.Config) -> dict[str, Any]:
    """The ini options, under the marker's key names (see :mod:`claudetrace.replay.settings`)."""
    return {
        "redact": list(config.getini("claude_cassette_redact")),
        "volatile_paths": list(config.getini("claude_volatile_paths")),
        "match_regex": list(config.getini("claude_match_regex")),
        "match": str(config.getini("claude_matcher") or "") or None,
        "match_argv": _ini_flag(config, "claude_match_argv", default=True),
        "ignore_argv": list(config.getini("claude_ignore_argv")),
    }


def _ini_flag(config: pytest.Config, name: str, *, default: bool) -> bool:
    """A yes/no ini option, checked here: pytest's own ``bool`` ini type fails with
    a traceback that names neither the option nor the values it takes."""
    value = str(config.getini(name) or "").strip()
    if not value:
        return default
    return flag(value, key=name, where=f"ini option {name}")


def _read_previous(path: Path) -> Cassette | None:
    from .errors import CassetteError

    if not path.is_file():
        return None
    try:
        return read_cassette(path)
    except CassetteError:
        return None  # a broken cassette is simply replaced


def record_env(timeout: float) -> dict[str, str]:
    """Environment defaults that bound how long the CLI waits on a failing API.

    The CLI retries a refused or failing request with backoff, by default for
    minutes.  Recording allows :data:`RECORD_RETRIES` retries, each request at
    most a third of ``timeout`` seconds, so a recording against an unreachable
    or failing API ends with the CLI's error result within about ``timeout``
    seconds.  A variable the caller sets wins.
    """
    per_try = max(1.0, timeout / (RECORD_RETRIES + 1))
    return {
        "CLAUDE_CODE_MAX_RETRIES": str(RECORD_RETRIES),
        "API_TIMEOUT_MS": str(int(per_try * 1000)),
    }


def _record_timeout(config: pytest.Config) -> float:
    value = str(config.getini("claude_record_timeout") or "").strip()
    if not value:
        return RECORD_TIMEOUT_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if seconds <= 0:
        pytest.fail(
            f"claude_record_timeout must be a number of seconds, not {value!r}", pytrace=False
        )
    return seconds


def _prepare_recording(cassette: ClaudeCassette, config: pytest.Config) -> None:
    from .errors import ClaudeTraceError
    from .shim import find_real_cli, proxy_command, write_shim

    problem: str | None = None
    try:
        real = find_real_cli(how="set $CLAUDETRACE_REAL_CLI to its path or put claude on PATH")
    except ClaudeTraceError as exc:
        problem = (f"cannot record claude cassette {cassette.path} (mode {cassette.mode}): "
                   f"{exc}; the cassette is unchanged")
    if problem is not None:  # raised outside the handler: one line, no chained exception
        pytest.fail(problem, pytrace=False)
    cassette.db_path = cassette.workdir / "recording.db"
    command = proxy_command(real, db=str(cassette.db_path), name=cassette.nodeid)
    cassette.cli_path = write_shim(
        cassette.workdir / "claude",
        command,
        real=real,
        env_defaults=record_env(_record_timeout(config)),
        stamp=cassette.workdir / "sessions",
    )


def api_failure(cassette: Cassette) -> str | None:
    """The CLI's own one-line reason when a recorded session failed on the API."""
    for event in cassette.events:
        if event.direction != "out" or b'"api_error' not in event.data:
            continue
        msg = event.message
        if msg and msg.get("type") == "result" and msg.get("is_error"):
            reason = msg.get("result") or msg.get("api_error") or "API error"
            return str(reason).splitlines()[0]
    return None


def _recording_failure(cassette: ClaudeCassette) -> str | None:
    """Why a failed recording failed, when the API was the cause (one line)."""
    from .errors import ClaudeTraceError
    from .indexer import open_settled_store

    if cassette.db_path is None or not cassette.db_path.exists():
        return None
    try:
        store = open_settled_store(str(cassette.db_path))
    except ClaudeTraceError:
        return None
    try:
        for recording in _settled_recordings(store, _sessions_started(cassette)):
            reason = api_failure(store.load_cassette(recording.id))
            if reason:
                return reason
    finally:
        store.close()
    return None


def _save_recording(cassette: ClaudeCassette) -> None:
    """Export the one session the test recorded as a sanitised cassette."""
    from .cassette import write_cassette
    from .indexer import open_settled_store
    from .sanitize import sanitize_cassette

    assert cassette.db_path is not None
    store = open_settled_store(str(cassette.db_path))
    try:
        recordings = _settled_recordings(store, _sessions_started(cassette))
        if not recordings:
            pytest.fail(
                f"the test passed but never ran claude_cli; no cassette written to {cassette.path}",
                pytrace=False,
            )
        if len(recordings) != 1:
            pytest.fail(
                f"a claude cassette holds one CLI session, but the test ran {len(recordings)}; "
                f"no cassette written to {cassette.path}",
                pytrace=False,
            )
        recording = recordings[0]
        recorded = store.load_cassette(recording.id)
        environ = recording.info().env
    finally:
        store.close()
    extra = {str(cassette.basetemp): "/tmp/pytest"} if cassette.basetemp else None
    clean = sanitize_cassette(
        recorded, environ=environ, extra_paths=extra, patterns=cassette.redact
    )
    clean.header["rerecord"] = cassette.rerecord_hint()
    if cassette.redact:
        # Replay hides the same patterns in live host lines before comparing.
        clean.header["redact"] = list(cassette.redact)
    if cassette.previous is not None:
        from .replay.stable import stabilize

        clean = stabilize(cassette.previous, clean)
    cassette.path.parent.mkdir(parents=True, exist_ok=True)
    write_cassette(cassette.path, clean.header, clean.events)
    cassette.saved = True


def _sessions_started(cassette: ClaudeCassette) -> int:
    """How many sessions the recording shim started (it stamps one line each)."""
    try:
        return len((cassette.workdir / "sessions").read_text().splitlines())
    except OSError:
        return 0


def _settled_recordings(store: Any, started: int = 0) -> list[Any]:
    """The store's recordings once none is still running.

    Opening the store stored every finished session; a CLI the test left
    running (a host that did not wait for it) gets a few seconds to finish, and
    its recording is settled as soon as it has.  ``started`` sessions are
    waited for even before their proxy has made its capture file (a busy
    machine can start the proxy's recording after the host has moved on).
    """
    from .capture import capture_files, writer_alive
    from .indexer import settle

    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        recordings = store.list_recordings(newest_first=False)
        running = any(r.status == "running" for r in recordings) or any(
            writer_alive(path) for path in capture_files(store.capture_url)
        )
        missing = len(recordings) < started
        if (not running and not missing) or time.monotonic() > deadline:
            return list(recordings)
        time.sleep(0.05)
        settle(store, quiet=True)
