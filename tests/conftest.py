"""Shared fixtures (each engineer adds fixtures here with small edits)."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from claudetrace.indexer import open_settled_store
from claudetrace.store import Store
from claudetrace.testing import FakeAPI
from claudetrace.testing.harness import bundled_cli

# Hypothesis times each example and its generation on the wall clock: on a loaded
# machine a test past its deadline, or generating too slowly, failed with no bug found.
# Neither is a check of the code; a test that sets its own settings keeps this for the
# rest (its decorator is built after this profile is loaded).
settings.register_profile(
    "claudetrace", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("claudetrace")

# A suite started in the background (as a shell starts an asynchronous command,
# and some CI runners do) has Ctrl-C ignored, and every process it starts would
# inherit that: the tests that stop a command with SIGINT would wait on it for
# ever.  They run as from a terminal instead, whatever started them.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def _private_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every test, and every process it starts, has a data directory of the session's
    own (``$XDG_DATA_HOME``) and no ``$CLAUDETRACE_DB``: a test without ``ct_env`` that
    keeps the price table (``prices.json``) or a capture file writes there, not into
    the user's, where pytest-xdist's workers (or another session) would race on it.

    ``import`` converts each session before it returns (``CLAUDETRACE_FOLD=now``), as a
    test that reads what it stored expects; the tests of the usage-first import and
    its pass in the background (``tests/test_import_unfolded.py``) unset it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))
        patch.delenv("CLAUDETRACE_DB", raising=False)
        patch.setenv("CLAUDETRACE_FOLD", "now")
        yield


@pytest.fixture
def ct_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scrubbed claudetrace environment: no $CLAUDETRACE_DB, data dir under tmp.

    Returns the data directory (where capture files go when they cannot be kept
    beside the database).
    """
    data_home = tmp_path / "xdg-data"
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    for name in ("CLAUDETRACE_DB", "CLAUDETRACE_REAL_CLI", "CLAUDETRACE_FLUSH_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    return data_home / "claudetrace"


@pytest.fixture(scope="session")
def obeys_chmod() -> list[str]:
    """The command prefix that runs a process to which ``chmod`` applies: none for a
    user, ``setpriv`` dropping the capabilities that let root read anything for root
    (skips when it cannot)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv to make chmod apply")
    prefix = [setpriv, "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps=-all"]
    if subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        pytest.skip("running as root and setpriv cannot drop the capabilities")
    return prefix


@pytest.fixture
def db_path(tmp_path: Path, ct_env: Path) -> Path:
    """A fresh SQLite database file path (not created yet)."""
    return tmp_path / "claudetrace.db"


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store file migrated to the head once per session, closed (its log
    folded in): a copy of it is a new store as migrating a new file makes it."""
    path = tmp_path_factory.mktemp("migrated") / "head.db"
    open_settled_store(str(path)).close()
    return path


@pytest.fixture
def store(db_path: Path, migrated_sqlite: Path) -> Iterator[Store]:
    """An open store on a fresh SQLite file (closed afterwards): a copy of the
    session's migrated file, opened as any store is (the migrations, run on every
    test's new file, were most of the cost of this fixture)."""
    shutil.copyfile(migrated_sqlite, db_path)
    opened = open_settled_store(str(db_path))
    yield opened
    opened.close()


@pytest.fixture(scope="session")
def fake_api() -> Iterator[FakeAPI]:
    """One fake Anthropic API for the whole session (scenarios reset it before use)."""
    with FakeAPI() as api:
        yield api


@pytest.fixture(scope="session")
def real_claude() -> Path:
    """The real ``claude`` CLI bundled with claude_agent_sdk."""
    return bundled_cli()


@pytest.fixture(scope="session")
def ui_db(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A store for the session-browser tests: every real-CLI fixture cassette, one
    recording with a malformed and a non-UTF-8 line, one with a stored warning, one
    still running.

    Returns ``{"url": …, <cassette stem>: recording id, "malformed": id, "warned": id,
    "running": id}`` (``warned`` has a stored telemetry warning).
    The database is shared by the whole test session: treat it as read-only.
    """
    import os
    import time

    from claudetrace.cassette import Cassette, read_cassette
    from claudetrace.indexer import open_settled_store
    from claudetrace.model.events import Event
    from claudetrace.recording import RecordingInfo

    path = tmp_path_factory.mktemp("ui") / "ui.db"
    store = open_settled_store(str(path))
    ids: dict[str, str] = {"url": str(path)}
    for cassette in sorted((Path(__file__).parent / "fixtures" / "cassettes").glob("*.ndjson")):
        ids[cassette.stem] = store.import_cassette(read_cassette(cassette), name=cassette.stem)
    plain = read_cassette(Path(__file__).parent / "fixtures" / "cassettes" / "plain.ndjson")
    broken = [
        *plain.events[:3],
        Event(3, "out", plain.events[2].t_ns + 1000, b"{not json <b>bold</b>"),
        Event(4, "out", plain.events[2].t_ns + 2000, b"\xff\xfe binary"),
    ]
    ids["malformed"] = store.import_cassette(Cassette(dict(plain.header), broken), name="malformed")
    ids["warned"] = store.import_cassette(plain, name="warned")
    store.update_recording(ids["warned"], extra={"warnings": [
        "OTLP export to http://127.0.0.1:9/v1/traces failed: <urlopen error refused>",
    ]})
    info = RecordingInfo.start(["claude", "--output-format", "stream-json"], name="still-running")
    info.pid = os.getpid()  # a live pid on this host: the recording counts as running
    store.create_recording(info)
    heartbeat = {"last_seen_ns": time.time_ns() + 3_600_000_000_000}
    store.write_batch(info.id, plain.events[:2], heartbeat)
    ids["running"] = info.id
    store.close()
    return ids


def _postgres_bin() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A throwaway PostgreSQL cluster (initdb/pg_ctl) on a free local port, one for the
    whole test session (one per xdist worker); the URL of its ``postgres`` database.

    Tests take ``pg_url`` (tests/test_store_postgres.py), a database of their module's
    own on it.  Skips when the server binaries are missing; as root, the cluster runs
    as the ``postgres`` system user (the server refuses to run as root).
    """
    bindir = _postgres_bin()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    prefix: list[str] = []
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run the server")
        runuser = shutil.which("runuser")
        if runuser is None:
            pytest.skip("running as root without runuser to drop to the 'postgres' user")
        prefix = [runuser, "-u", "postgres", "--"]
    folder = Path(tempfile.mkdtemp(prefix="claudetrace-pg-"))
    if prefix:
        os.chown(folder, user.pw_uid, user.pw_gid)
    data = folder / "data"
    initdb = [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
              "-E", "UTF8", "--no-sync"]
    subprocess.run([*prefix, *initdb], check=True, capture_output=True, timeout=120)
    # A free port is only free until someone binds it: another worker, or any
    # process on the machine given it as its ephemeral port, may take it before the
    # server does (pg_ctl then fails, the server "could not create any TCP/IP
    # sockets").  Another port is asked for then.
    for attempt in range(5):
        with contextlib.closing(socket.socket()) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        start = [str(bindir / "pg_ctl"), "-D", str(data), "-o", options,
                 "-l", str(folder / "log"), "-w", "start"]
        started = subprocess.run([*prefix, *start], capture_output=True, timeout=120,
                                 check=False)
        if started.returncode == 0:
            break
        if attempt == 4:
            started.check_returncode()
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(folder, ignore_errors=True)
