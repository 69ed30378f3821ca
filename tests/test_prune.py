"""``claudetrace prune`` and claudetrace.store.retention on SQLite (PostgreSQL's are in
test_store_postgres.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from claudetrace.cli import cli
from claudetrace.store import Store
from claudetrace.store.retention import Criteria, give_back_space, matching, prune
from tests.pruning import DAY_NS, old_recording, prune_while_a_proxy_records


def invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def _rows(db_path: Path) -> tuple[int, int, int]:
    with sqlite3.connect(db_path) as conn:
        return tuple(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # type: ignore[return-value]
                     for table in ("recordings", "events", "event_tools"))


def test_criteria_name_what_is_deleted_and_never_a_running_session(store: Store) -> None:
    old = old_recording(store, days=40, events=30, name="nightly", tags={"team": "infra"})
    old_other = old_recording(store, days=40, events=30, tags={"team": "web"})
    new = old_recording(store, days=1, events=30, name="nightly", tags={"team": "infra"})
    running = old_recording(store, days=40, events=30, ended=False)
    now = store.get(new).started_ns + DAY_NS
    month = Criteria(started_before_ns=now - 30 * DAY_NS)
    found = matching(store, month, now_ns=now)
    assert [r.id for r in found.recordings] == [old, old_other]
    assert found.running == 1 and found.events == 60
    assert [r.id for r in matching(store, Criteria(tags={"team": "infra"})).recordings] == [
        old, new]
    nightly = Criteria(name="nightly", started_before_ns=now - 30 * DAY_NS)
    assert [r.id for r in matching(store, nightly).recordings] == [old]
    assert matching(store, Criteria(source="import")).recordings == []
    done = prune(store, [old, old_other], batch_events=7)
    assert (done.recordings, done.events) == (2, 60)
    assert done.transactions == 4 + 4 + 1  # each: 4 batches of 7 down to seq 2; both rows
    assert sorted(r.id for r in store.list_recordings()) == sorted([new, running])


def test_prune_needs_a_condition(db_path: Path, store: Store) -> None:
    result = invoke("prune", "--db", str(db_path), "--yes")
    assert result.exit_code == 2
    assert "needs --older-than" in result.output
    bad = invoke("prune", "--db", str(db_path), "--older-than", "soon", "--yes")
    assert bad.exit_code != 0 and "--older-than 'soon'" in bad.output


def test_dry_run_counts_and_deletes_nothing_and_asking_needs_a_terminal(
        db_path: Path, store: Store) -> None:
    rid = old_recording(store, days=40, events=20)
    old_recording(store, days=2, events=20)
    before = _rows(db_path)
    dry = invoke("prune", "--db", str(db_path), "--older-than", "30d", "--dry-run")
    assert dry.exit_code == 0
    assert dry.output.splitlines()[0].startswith("1 recording (20 events")
    assert rid in dry.output
    asked = invoke("prune", "--db", str(db_path), "--older-than", "30d")
    assert asked.exit_code == 2 and "add --yes" in asked.output
    assert _rows(db_path) == before


def test_prune_deletes_every_row_of_what_it_names(db_path: Path, store: Store) -> None:
    old_recording(store, days=40, events=12_000)
    kept = old_recording(store, days=3, events=25)
    result = invoke("prune", "--db", str(db_path), "--older-than", "30d", "--yes")
    assert result.exit_code == 0, result.output
    assert "deleted 1 recording (12000 events) in 6 transactions" in result.output
    assert "given back to the system" in result.output
    assert _rows(db_path) == (1, 25, 3)
    assert [r.id for r in store.list_recordings()] == [kept]


def test_freed_pages_go_back_to_the_system(db_path: Path, store: Store) -> None:
    rid = old_recording(store, days=40, events=20_000)
    store.checkpoint()
    size = db_path.stat().st_size
    prune(store, [rid])
    space = give_back_space(store)
    assert space.returned_bytes is not None and space.returned_bytes > size // 2
    with sqlite3.connect(db_path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert db_path.stat().st_size < size // 2


def test_a_file_without_incremental_vacuum_says_how(tmp_path: Path) -> None:
    from claudetrace.store import open_store

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # made before the store turned it on
        conn.execute("PRAGMA auto_vacuum = NONE")
        conn.execute("CREATE TABLE t (x)")
        conn.execute("DROP TABLE t")
    store = open_store(str(path))
    try:
        rid = old_recording(store, days=40, events=2000)
        prune(store, [rid])
        space = give_back_space(store)
    finally:
        store.close()
    assert space.returned_bytes == 0
    assert "PRAGMA auto_vacuum = INCREMENTAL; VACUUM" in space.note


def test_prune_while_a_proxy_records(db_path: Path, store: Store) -> None:
    gone = [old_recording(store, days=40, events=20_000) for _ in range(3)]
    pruned, listed = prune_while_a_proxy_records(str(db_path))
    assert pruned.returncode == 0, pruned.stderr
    assert "deleted 3 recordings (60000 events)" in pruned.stdout
    (live,) = listed
    # Every line stored, the exit too (its user lines got no result: "incomplete").
    assert live["name"] == "live" and live["exit_code"] == 0 and live["ended_ns"]
    assert live["events"] == 600
    assert store.count_events(str(live["id"])) == 600
    assert all(store.count_events(rid) == 0 for rid in gone)


@pytest.mark.parametrize("answer, deleted", [("y\n", True), ("n\n", False)])
def test_prune_asks_on_a_terminal(db_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch,
                                   answer: str, deleted: bool) -> None:
    rid = old_recording(store, days=40, events=10)
    monkeypatch.setattr("claudetrace.cli.prune._can_ask", lambda: True)
    result = CliRunner().invoke(cli, ["prune", "--db", str(db_path), "--older-than", "30d"],
                                input=answer)
    assert "Delete 1 recordings?" in result.output
    assert (store.count_events(rid) == 0) is deleted


def test_small_recordings_are_deleted_several_a_transaction(store: Store, db_path: Path) -> None:
    ids = [old_recording(store, days=40, events=3) for _ in range(12)]
    done = prune(store, ids, batch_events=10)
    assert (done.recordings, done.events, done.transactions) == (12, 36, 4)  # 3 a transaction
    assert _rows(db_path) == (0, 0, 0)


def test_dry_run_escapes_recorded_names(db_path: Path, store: Store) -> None:
    """A recording's name is recorded text: ``--dry-run`` prints it escaped, so a
    name carrying an OSC 52 sequence cannot write the reader's clipboard."""
    old_recording(store, days=40, events=3, name="nightly\x1b]52;c;ZXZpbA==\x07\u202e")
    dry = invoke("prune", "--db", str(db_path), "--older-than", "30d", "--dry-run")
    assert dry.exit_code == 0
    assert "\x1b" not in dry.output and "\u202e" not in dry.output
    assert "nightly\\x1b]52;c;ZXZpbA==\\x07\\u202e" in dry.output


def test_a_row_deleted_by_hand_leaves_no_orphans_and_a_stray_row_is_found(
        db_path: Path, store: Store) -> None:
    from claudetrace.cassette import read_cassette
    from claudetrace.store.retention import delete_row_by_hand, orphans

    rid = store.import_cassette(read_cassette(
        Path(__file__).parent / "fixtures" / "cassettes" / "streamed_tools.ndjson"))
    kept = old_recording(store, days=3, events=25)
    assert orphans(store) == {}
    delete_row_by_hand(store, rid)  # one plain DELETE: the schema takes the rest
    assert [r.id for r in store.list_recordings()] == [kept]
    assert orphans(store) == {}
    with sqlite3.connect(db_path) as conn:  # a row no recording holds, as an old bug left
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("UPDATE events SET rec = -1 WHERE seq = 0")
    found = orphans(store)
    assert found["events"] == 1 and set(found) <= {"events", "event_tools"}


def test_a_source_or_tag_no_recording_has_is_said(db_path: Path, store: Store) -> None:
    old_recording(store, days=40, events=3, tags={"team": "infra"})
    result = CliRunner().invoke(cli, ["prune", "--db", str(db_path), "--source", "nope",
                                      "--tag", "team=web", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "claudetrace: no session is tagged team=web; the store has team=infra",
        "claudetrace: no recording came from source 'nope'; the store has proxy"]
    assert result.stdout.startswith("0 recordings")
    said = CliRunner().invoke(cli, ["prune", "--db", str(db_path), "--source", "proxy",
                                    "--dry-run"])
    assert said.stderr == "" and said.stdout.startswith("1 recording")


def test_a_recording_written_again_while_the_prune_runs_is_left_alone(
        db_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Matched, then written again (its proxy or an import back at it) between two of
    the prune's transactions: the rest of it is kept, and said."""
    big = old_recording(store, days=40, events=30)
    small = old_recording(store, days=40, events=3)
    import claudetrace.store.retention as retention
    real_cut = retention._cut
    now_ns = str(int(store.get(big).started_ns + 40 * DAY_NS))

    def cut_then_revive(*args: object) -> int:
        count = real_cut(*args)  # type: ignore[arg-type]
        with sqlite3.connect(db_path) as conn:  # this process records it again
            conn.execute("UPDATE recordings SET ended_ns = NULL, last_seen_ns = ? WHERE id = ?",
                         (now_ns, big))
        return count
    monkeypatch.setattr(retention, "_cut", cut_then_revive)
    done = prune(store, [big, small], batch_events=7)
    assert (done.recordings, done.revived) == (1, 1)
    assert store.count_events(big) == 23 and store.count_events(small) == 0
    assert [r.id for r in store.list_recordings()] == [big]
