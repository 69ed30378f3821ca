"""Two processes storing the same API message at once on PostgreSQL count it once.

Each writer asks whether another recording counts a message before it stores its
own copy (counted, or a duplicate).  Two transactions that ask at the same time
both hear "no" unless the second waits for the first's commit.  Here the test
holds the hourly sums' table locked so that both writers have asked before
either can commit (each waits on that lock, or on the other writer), then lets
them go: the message must count in one recording only, in the calls, the hourly
sums and the per-model sums alike.  Real processes, real PostgreSQL; the
writers are the store's (the importer's bulk path and its per-recording one)
and the indexer's plain psycopg writer.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from claudetrace.store import open_store
from tests.test_store_postgres import pg_url  # noqa: F401  (the fixture)

psycopg = pytest.importorskip("psycopg")

pytestmark = pytest.mark.usefixtures("ct_env")

CALLS = 40

#: A writer in its own process: argv is the kind of writer, the URL, the
#: messages' prefix.  It prints the recording's id.
WRITER = """
import sys
from claudetrace.recording import RecordingInfo
from claudetrace.store.rows import USAGE_CALLS

kind, url, prefix, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
calls = [(f"{prefix}{k:04d}", 10**18 + k * 10**9, "claude-sonnet-4-5", 1, 2, 3, 4, 0.001, "cli")
         for k in range(n)]
info = RecordingInfo.start(["claude"])
if kind == "plain":  # the indexer's writer
    from claudetrace.store.postgres import PostgresWrites, plain_url
    writer = PostgresWrites(plain_url(url))
else:
    from claudetrace.store import open_store
    writer = open_store(url)
try:
    if kind == "bulk":  # the importer's: recordings and their calls together
        writer.add_recordings([({"id": info.id, "started_ns": 10**18,
                                 "source": "transcript", USAGE_CALLS: calls}, [], [])])
    else:
        writer.create_recording(info)
        writer.write_rows(info.id, [], [], {USAGE_CALLS: calls, "ended_ns": 10**18})
finally:
    writer.close()
print(info.id)
"""


def _waiting(conn: psycopg.Connection, n: int, timeout: float = 60.0) -> None:
    """Until ``n`` other backends of this database wait on a lock."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()").fetchone()
        if found and found[0] >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"{n} writers never reached the lock")


@pytest.mark.parametrize("kinds", [("store", "store"), ("bulk", "plain"), ("plain", "plain")])
def test_the_same_message_stored_at_once_counts_once(pg_url: str, tmp_path: Path,  # noqa: F811
                                                     kinds: tuple[str, str]) -> None:
    from claudetrace.store.postgres import plain_url

    prefix = f"msg_race_{'_'.join(kinds)}_"
    conninfo = plain_url(pg_url)
    assert conninfo is not None
    open_store(pg_url).close()  # migrated before the race
    holder = psycopg.connect(conninfo)
    watcher = psycopg.connect(conninfo, autocommit=True)
    ids: list[str] = []
    try:
        holder.execute("LOCK TABLE usage_hours IN EXCLUSIVE MODE")  # reads go on
        writers = [subprocess.Popen([sys.executable, "-c", WRITER, kind, pg_url, prefix,
                                     str(CALLS)], stdout=subprocess.PIPE, text=True)
                   for kind in kinds]
        _waiting(watcher, len(writers))
        holder.commit()
        for writer in writers:
            out, _ = writer.communicate(timeout=120)
            assert writer.returncode == 0
            ids.append(out.strip())
        counted = watcher.execute(
            "SELECT count(*), count(DISTINCT call_id) FROM usage_calls "
            "WHERE call_id LIKE %s AND NOT duplicate", [prefix + "%"]).fetchone()
        assert counted == (CALLS, CALLS)  # each message once, not twice
        hours = watcher.execute(
            "SELECT coalesce(SUM(calls), 0) FROM usage_hours WHERE recording_id = ANY(%s)",
            [ids]).fetchone()
        models = watcher.execute(
            "SELECT coalesce(SUM(calls), 0) FROM usage_models WHERE recording_id = ANY(%s)",
            [ids]).fetchone()
        assert (int(hours[0]), int(models[0])) == (CALLS, CALLS)  # type: ignore[index]
        report = json.loads(subprocess.run(
            [sys.executable, "-m", "claudetrace", "usage", "session", "--json", "--db", pg_url],
            check=True, capture_output=True, text=True).stdout)
        mine = [s for s in report["sessions"] if s["recordingId"] in ids]
        assert sum(s["outputTokens"] for s in mine) == 2 * CALLS
    finally:
        holder.close()
        watcher.close()
        store = open_store(pg_url)
        try:
            store.delete_recordings(ids)
        finally:
            store.close()
