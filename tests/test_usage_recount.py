"""Deleting a recording never drops the usage of a message another recording holds.

Usage counts each API message once across the store: one recording's row counts,
the other copies are duplicates.  When the recording that counts goes (deleted,
pruned, folded, replaced) or is imported again holding the message no more, a
copy left counts instead: the figures are those of a fresh store holding only
what is left, and of the raw lines counted apart.  On SQLite and PostgreSQL.

The recordings are the files of ``-home-dev-chain`` imported each on its own (as
an importer before resumed sessions were joined stored them): the second file
repeats the first one's messages, the third the second's.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from claudetrace.store import Store, open_store
from claudetrace.store.retention import prune
from tests.test_store_postgres import pg_url  # noqa: F401  (the fixture)
from tests.test_transcript_resume import CHAIN, S1, S2, S3, _imported_the_old_way, run

pytestmark = pytest.mark.usefixtures("ct_env")
FILES = [CHAIN / f"{sid}.jsonl" for sid in (S1, S2, S3)]


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "claudetrace.db")
        return
    shared = request.getfixturevalue("pg_url")
    _forget_chain(shared)  # the chain as another test left it: gone
    yield shared
    _forget_chain(shared)


def _forget_chain(db: str) -> None:
    store = open_store(db)
    try:
        [store.delete_recording(rid) for rid in [r.id for r in store.list_recordings()
                                 if r.cli_session_id in (S1, S2, S3)]]
    finally:
        store.close()


def raw_output_tokens(*files: Path) -> int:
    """The output tokens of the files' API messages, each message once (its last
    usage): counted from the raw lines, apart from claudetrace."""
    last: dict[str, int] = {}
    for path in files:
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            message = entry.get("message")
            if entry.get("type") == "assistant" and isinstance(message, dict):
                last[message["id"]] = message["usage"]["output_tokens"]
    return sum(last.values())


def chain_tokens(db: str) -> int:
    report = json.loads(run("usage", "session", "--json", "--db", db).stdout)
    return sum(s["outputTokens"] for s in report["sessions"] if s["sessionId"] in (S1, S2, S3))


def reports(db: str) -> dict[str, Any]:
    """What ``usage daily`` (from the hourly sums) and ``usage session`` say of the chain."""
    daily = json.loads(run("usage", "daily", "--json", "--timezone", "UTC", "--db", db).stdout)
    sessions = json.loads(run("usage", "session", "--json", "--db", db).stdout)["sessions"]
    return {"daily": daily["totals"],
            "sessions": sorted((s["sessionId"], s["outputTokens"]) for s in sessions
                               if s["sessionId"] in (S1, S2, S3))}


def assert_hours_are_the_calls(db: str) -> None:
    """``usage_hours`` holds the sums of the counted calls, recording by recording,
    and ``usage_models`` the same by recording and model."""
    store = open_store(db)
    try:
        with store.engine.connect() as conn:
            hours = conn.exec_driver_sql(
                "SELECT recording_id, SUM(output_tokens), SUM(calls) FROM usage_hours "
                "GROUP BY recording_id ORDER BY recording_id").all()
            calls = conn.exec_driver_sql(
                "SELECT recording_id, SUM(output_tokens), COUNT(*) FROM usage_calls "
                "WHERE NOT duplicate GROUP BY recording_id ORDER BY recording_id").all()
            models = conn.exec_driver_sql(
                "SELECT recording_id, model, input_tokens, output_tokens, cache_read_tokens, "
                "cache_creation_tokens, calls, first_ns, last_ns FROM usage_models "
                "ORDER BY recording_id, model").all()
            by_model = conn.exec_driver_sql(
                "SELECT recording_id, model, SUM(input_tokens), SUM(output_tokens), "
                "SUM(cache_read_tokens), SUM(cache_creation_tokens), COUNT(*), MIN(t_ns), "
                "MAX(t_ns) FROM usage_calls WHERE NOT duplicate GROUP BY recording_id, model "
                "ORDER BY recording_id, model").all()
    finally:
        store.close()
    assert [tuple(r) for r in hours] == [tuple(r) for r in calls]
    assert [tuple(map(str, r)) for r in models] == [tuple(map(str, r)) for r in by_model]


def survivors(tmp_path: Path, *files: Path) -> str:
    """A fresh SQLite store holding only ``files``, each imported on its own."""
    projects = tmp_path / "fresh" / "projects"
    (projects / CHAIN.name).mkdir(parents=True)
    for path in files:
        shutil.copy(path, projects / CHAIN.name)
    db = str(tmp_path / "fresh.db")
    _imported_the_old_way(db, projects)
    return db


def chain_store(url: str, tmp_path: Path) -> tuple[Path, list[str]]:
    projects = tmp_path / "projects"
    shutil.copytree(CHAIN, projects / CHAIN.name)
    ids = _imported_the_old_way(url, projects)
    assert chain_tokens(url) == raw_output_tokens(*FILES) == 80 + 140 + 210 + 60
    return projects / CHAIN.name, ids


def test_deleting_the_recording_that_counts_keeps_the_copies_tokens(
        url: str, tmp_path: Path) -> None:
    _, (first, second, _third) = chain_store(url, tmp_path)
    store = open_store(url)
    try:
        store.delete_recording(first)  # counted the first file's messages
    finally:
        store.close()
    # The second file holds every message of the first: nothing is lost.
    assert chain_tokens(url) == raw_output_tokens(FILES[1], FILES[2]) == 490
    # Which of two copies counts may differ from a fresh store's (it counts the
    # one it stored first; here the one that started first): the totals may not.
    assert reports(url)["daily"] == reports(survivors(tmp_path, FILES[1], FILES[2]))["daily"]
    assert_hours_are_the_calls(url)
    store = open_store(url)
    try:
        assert prune(store, [second]).recordings == 1
    finally:
        store.close()
    assert chain_tokens(url) == raw_output_tokens(FILES[2]) == 490
    assert reports(url) == reports(survivors(tmp_path / "last", FILES[2]))
    assert_hours_are_the_calls(url)


def test_a_prune_of_several_at_once_and_a_replaced_half_recount(
        url: str, tmp_path: Path) -> None:
    _, (first, second, third) = chain_store(url, tmp_path)
    store = open_store(url)
    try:
        done = prune(store, [first, second])  # one transaction: both go together
        assert (done.recordings, done.transactions) == (2, 1)
        assert chain_tokens(url) == raw_output_tokens(FILES[2]) == 490
        assert_hours_are_the_calls(url)
        # A half import's replacement deletes through the same path.
        store.update_recording(third, ended_ns=None, source="import")
        assert store.delete_half_import(third, store.import_state(third)[1])  # type: ignore[index]
    finally:
        store.close()
    assert chain_tokens(url) == 0
    assert_hours_are_the_calls(url)


def test_a_reimport_in_place_neither_drops_nor_doubles(url: str, tmp_path: Path) -> None:
    folder, _ids = chain_store(url, tmp_path)
    # The second file's last answer rewritten as another message (the file the
    # same size) and imported again in place: the message it held before, and
    # counted, now counts in the third file's recording, which repeats it.
    second = folder / FILES[1].name
    second.write_text(FILES[1].read_text().replace("msg_01C3", "msg_01X3"))
    _imported_the_old_way(url, folder.parent)
    assert chain_tokens(url) == raw_output_tokens(second, FILES[2]) == 490 + 210
    assert reports(url)["daily"] == reports(survivors(tmp_path, second, FILES[2]))["daily"]
    assert_hours_are_the_calls(url)
    # Whole again, and imported again twice: each message still once.
    shutil.copy(FILES[1], second)
    _imported_the_old_way(url, folder.parent)
    _imported_the_old_way(url, folder.parent)
    assert chain_tokens(url) == raw_output_tokens(FILES[1], FILES[2]) == 490
    assert_hours_are_the_calls(url)


def test_fold_still_counts_once(store: Store) -> None:
    """fold_recordings goes through the same delete (the resume tests cover it on
    real files); folding nothing is nothing."""
    store.fold_recordings("X", ["X"])
    assert store.delete_recordings([]) == 0


def test_a_prune_group_holds_as_many_counted_calls_as_lines(store: Store) -> None:
    """Recounting costs a delete work for each call the deleted recordings count:
    prune's groups take no more of them than of lines, so a transaction stays short."""
    from claudetrace.recording import RecordingInfo
    from claudetrace.store.rows import USAGE_CALLS

    ids = []
    for i in range(4):  # no lines, 3 calls each: one group of 4 before
        info = RecordingInfo.start(["claude"])
        store.create_recording(info)
        calls = [(f"msg_{i}_{k}", 10**18 + k, "m", 1, 2, 3, 4, None, "unknown")
                 for k in range(3)]
        store.write_rows(info.id, [], [], {USAGE_CALLS: calls, "ended_ns": 10**18})
        ids.append(info.id)
    done = prune(store, ids, batch_events=6)
    assert (done.recordings, done.transactions) == (4, 2)
