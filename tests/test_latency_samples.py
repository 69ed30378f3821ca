"""The Stats page's latency samples, kept in the store, equal the fold of an
ended recording's lines (what the page computed on every look before), on
every fixture cassette, on SQLite and PostgreSQL: folded as the lines are
stored (the indexer, an import), by ``db pack`` for those stored without them,
or on the page's first look for any still missing; samples of lines that
changed since are folded again."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from claudetrace.cassette import read_cassette
from claudetrace.store import Store, browse, open_store
from claudetrace.store.aggregate import keep_latencies, stored_latencies
from claudetrace.telemetry import latency
from claudetrace.telemetry.latency import fold_latencies, merge_samples, recent_latencies
from claudetrace.ui.sessions import Filters
from tests.test_store_postgres import pg_url  # noqa: F401 - the throwaway cluster fixture

CASSETTES = sorted((Path(__file__).parent / "fixtures" / "cassettes").glob("*.ndjson"))


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store(request: pytest.FixtureRequest, db_path: Path) -> Iterator[Store]:
    url = str(db_path) if request.param == "sqlite" else request.getfixturevalue("pg_url")
    store = open_store(url)
    try:
        yield store
    finally:
        if request.param == "postgresql":
            with store.engine.begin() as conn:
                conn.exec_driver_sql("TRUNCATE recordings CASCADE")
        store.close()


def _no_fold(row: Any) -> dict[str, list[float]]:
    raise AssertionError(f"{row.id} was folded again: its kept samples were not read")


def _counts(store: Store, ids: list[str]) -> dict[str, int]:
    return {rid: store.get(rid).event_count for rid in ids}


def test_kept_samples_equal_the_fold_on_every_cassette(any_store: Store) -> None:
    ids = [any_store.import_cassette(read_cassette(path), name=path.stem) for path in CASSETTES]
    folded = {rid: fold_latencies(any_store, rid) for rid in ids}
    assert stored_latencies(any_store, _counts(any_store, ids)) == {}  # none on the way in
    listed = browse.list_sessions(any_store, Filters())
    first = recent_latencies(any_store, listed)
    assert first == merge_samples(folded[r.id] for r in listed)
    kept = stored_latencies(any_store, _counts(any_store, ids))
    for rid, path in zip(ids, CASSETTES, strict=True):
        assert kept[rid] == folded[rid], path.stem  # to the last bit of each float
    plain = ids[[p.stem for p in CASSETTES].index("plain")]
    assert kept[plain]["model"] == [pytest.approx(152.449633)]
    # Later looks read what was kept: the page's table is the same, nothing folded.
    again = browse.list_sessions(any_store, Filters())
    assert recent_latencies(any_store, again, _no_fold) == first


def test_samples_of_lines_that_changed_are_folded_again(any_store: Store) -> None:
    path = next(p for p in CASSETTES if p.stem == "multi_turn")
    rid = any_store.import_cassette(read_cassette(path))
    recent_latencies(any_store, browse.list_sessions(any_store, Filters()))
    count = any_store.get(rid).event_count
    assert rid in stored_latencies(any_store, {rid: count})
    any_store.update_recording(rid, event_count=count - 1)  # as if its lines were cut
    assert stored_latencies(any_store, {rid: count - 1}) == {}
    seen: list[str] = []
    recent_latencies(any_store, browse.list_sessions(any_store, Filters()),
                     lambda r: seen.append(r.id) or fold_latencies(any_store, r.id))
    assert seen == [rid]
    assert rid in stored_latencies(any_store, {rid: count - 1})  # kept anew


def test_a_running_recording_is_neither_folded_nor_kept(any_store: Store) -> None:
    path = next(p for p in CASSETTES if p.stem == "plain")
    rid = any_store.import_cassette(read_cassette(path))
    any_store.update_recording(rid, ended_ns=None)
    listed = browse.list_sessions(any_store, Filters())
    assert recent_latencies(any_store, listed, _no_fold) == {}
    assert keep_latencies(any_store, {rid: (any_store.get(rid).event_count, {"turn": [1.0]})}) == 0
    assert stored_latencies(any_store, {rid: any_store.get(rid).event_count}) == {}


def test_a_busy_database_keeps_nothing_and_the_page_still_has_its_samples(
        db_path: Path) -> None:
    store = open_store(str(db_path))
    try:
        rid = store.import_cassette(read_cassette(next(p for p in CASSETTES
                                                       if p.stem == "streamed_tools")))
        want = fold_latencies(store, rid)
        other = sqlite3.connect(db_path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process's write lock
            listed = browse.list_sessions(store, Filters())
            assert recent_latencies(store, listed) == want
            other.execute("ROLLBACK")
        finally:
            other.close()
        count = store.get(rid).event_count
        assert stored_latencies(store, {rid: count}) == {}
        assert recent_latencies(store, browse.list_sessions(store, Filters())) == want
        assert stored_latencies(store, {rid: count}) == {rid: want}
    finally:
        store.close()


def test_a_recording_of_more_lines_than_folded_keeps_its_first_lines_samples(
        monkeypatch: pytest.MonkeyPatch, store: Store) -> None:
    monkeypatch.setattr(latency, "LATENCY_MAX_EVENTS", 3)
    rid = store.import_cassette(read_cassette(next(p for p in CASSETTES
                                                   if p.stem == "multi_turn")))
    listed = browse.list_sessions(store, Filters())
    samples = recent_latencies(store, listed)
    assert samples == fold_latencies(store, rid)
    assert recent_latencies(store, listed, _no_fold) == samples


# -- folded where the lines are in hand: the indexer, an import, db pack ----------------


def _kept_equal_the_fold(store: Store, ids: list[str]) -> None:
    """Each recording's samples kept on the way in equal the fold of its stored
    lines on a visit, to the last bit; the page then folds nothing."""
    kept = stored_latencies(store, _counts(store, ids))
    assert set(kept) == set(ids)  # every one kept on the way in
    for rid in ids:
        assert kept[rid] == fold_latencies(store, rid), rid
    listed = browse.list_sessions(store, Filters())
    assert recent_latencies(store, listed, _no_fold) == merge_samples(
        fold_latencies(store, r.id) for r in listed)


@pytest.mark.parametrize("most", [latency.LATENCY_MAX_EVENTS, 3])
def test_an_import_keeps_the_samples_a_visit_would_fold(
        monkeypatch: pytest.MonkeyPatch, any_store: Store, most: int) -> None:
    monkeypatch.setattr(latency, "LATENCY_MAX_EVENTS", most)
    ids = [any_store.import_cassette(read_cassette(path), name=path.stem, batch=7,
                                     fold=latency.LatencyFold) for path in CASSETTES]
    _kept_equal_the_fold(any_store, ids)


def test_db_pack_keeps_those_of_imported_cassettes(db_path: Path) -> None:
    import subprocess
    import sys

    # An import takes a batch's memory, not the session's: it leaves the fold to
    # ``db pack`` (or the page's first visit).
    done = subprocess.run([sys.executable, "-m", "claudetrace", "import", "--db", str(db_path),
                           *map(str, CASSETTES)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, "-m", "claudetrace", "db", "pack", "--db",
                           str(db_path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    store = open_store(str(db_path))
    try:
        _kept_equal_the_fold(store, [r.id for r in store.list_recordings()])
    finally:
        store.close()


def _indexed(store: Store, db_path: Path, path: Path) -> str:
    """The cassette at ``path`` stored by the indexer from a finished capture file."""
    from claudetrace import indexer as ix
    from tests.test_indexer import capture_path, dead_pid, new_info, write_capture

    info = new_info(pid=dead_pid())
    capture = capture_path(db_path, info)
    write_capture(capture, info,
                  [(e.direction, e.data + b"\n") for e in read_cassette(path).events],
                  {"exit_code": 0, "signal": None, "ended_ns": None})
    ix.follow(capture, store)
    return info.id


def test_the_indexer_keeps_them_as_it_lists_a_recording_complete(db_path: Path) -> None:
    from claudetrace import indexer as ix

    store = ix.open_settled_store(str(db_path))
    try:
        _kept_equal_the_fold(store, [_indexed(store, db_path, path) for path in CASSETTES])
    finally:
        store.close()


def test_the_indexer_keeps_them_when_its_folds_wait_for_a_core(
        monkeypatch: pytest.MonkeyPatch, db_path: Path) -> None:
    # On a loaded machine the indexer waits for a core in the middle of a fold: time
    # that is not the fold's. Counted as such, it dropped a small recording's samples
    # (so the test above could fail in a loaded run).
    from claudetrace import indexer as ix

    feed = latency.LatencyFold.feed

    def waits_then_feeds(self: latency.LatencyFold, events: Any) -> None:
        time.sleep(2 * ix.FOLD_FLOOR_S)  # off the CPU, as when preempted
        feed(self, events)

    monkeypatch.setattr(latency.LatencyFold, "feed", waits_then_feeds)
    store = ix.open_settled_store(str(db_path))
    try:
        path = next(p for p in CASSETTES if p.stem == "multi_turn")
        _kept_equal_the_fold(store, [_indexed(store, db_path, path)])
    finally:
        store.close()


def test_db_pack_folds_those_stored_without_them(any_store: Store) -> None:
    from claudetrace.telemetry.latency import catch_up

    ids = [any_store.import_cassette(read_cassette(path)) for path in CASSETTES]
    assert stored_latencies(any_store, _counts(any_store, ids)) == {}  # as an older store
    running = ids[0]
    any_store.update_recording(running, ended_ns=None)
    seen: list[int] = []
    assert catch_up(any_store, batch=2, progress=seen.append) == len(ids) - 1
    assert seen[-1] == len(ids) - 1 and len(seen) == -(-(len(ids) - 1) // 2)
    assert set(stored_latencies(any_store, _counts(any_store, ids))) == set(ids) - {running}
    for rid in ids[1:]:
        assert stored_latencies(any_store, {rid: any_store.get(rid).event_count})[rid] == \
            fold_latencies(any_store, rid)
    assert catch_up(any_store) == 0  # nothing left


def test_a_burst_the_indexer_gave_up_folding_shows_the_same(
        monkeypatch: pytest.MonkeyPatch, db_path: Path) -> None:
    from claudetrace import indexer as ix

    monkeypatch.setattr(ix, "FOLD_FLOOR_S", 0.0)
    monkeypatch.setattr(ix, "FOLD_SHARE", 0.0)  # any fold is too much: dropped
    store = ix.open_settled_store(str(db_path))
    try:
        rid = _indexed(store, db_path, next(p for p in CASSETTES if p.stem == "streamed_tools"))
        assert stored_latencies(store, _counts(store, [rid])) == {}
        want = fold_latencies(store, rid)
        assert recent_latencies(store, browse.list_sessions(store, Filters())) == want
        assert stored_latencies(store, _counts(store, [rid])) == {rid: want}
    finally:
        store.close()
