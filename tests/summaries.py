"""A store of recordings in every status, and the check that the session list's
figures counted by the database are the ones Python counts from the recordings."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time

import pytest

from claudetrace.model import FAILED
from claudetrace.recording import RecordingInfo, new_recording_id
from claudetrace.store import Store
from claudetrace.store import browse as queries
from claudetrace.store.browse import Filters
from claudetrace.store.usage import store_reader
from claudetrace.usage import costed

SECOND = 1_000_000_000


def seed_statuses(store: Store, tag: str) -> None:
    """26 recordings tagged ``summary=tag``: ended ok / error / killed, with known,
    estimated and unknown costs, tool errors; running (fresh heartbeat); incomplete
    (stale heartbeat); and proxies of this host whose process is gone while their
    heartbeat is fresh (running by SQL, incomplete by the pid check)."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    now = time.time_ns()
    for i in range(26):
        started = now - (i + 1) * 3600 * SECOND - i * 7919
        kind = ("ok", "error", "killed", "running", "incomplete", "gone")[i % 6]
        info = RecordingInfo(
            id=new_recording_id(started), argv=["claude"], started_ns=started,
            name=f"{tag}-{kind}-{i}", tags={"summary": tag, "half": str(i % 2)},
            source="proxy" if kind == "gone" else "import",
            host=os.uname().nodename, pid=dead.pid if kind == "gone" else None,
            cwd=f"/p/{i % 3}",
        )
        store.create_recording(info)
        values: dict[str, object] = {
            "cost_usd": round(0.0137 * (i + 1), 6),
            "cost_source": ("cli", "estimate", "unknown")[i % 3],
            "tool_errors": i % 4 == 0,
            "model": ("claude-opus-4-5", "claude-haiku-4-5")[i % 2],
        }
        if kind in ("ok", "error", "killed"):
            values |= {"ended_ns": started + (i * 37 % 11 + 1) * SECOND // 3,
                       "outcome": kind, "exit_code": 0 if kind == "ok" else 1}
        elif kind in ("running", "gone"):
            # Fresh for the whole check, however loaded the machine (a heartbeat
            # that went stale between two of its queries made CI fail once).
            values["last_seen_ns"] = now + 600 * SECOND - (i % 3) * SECOND
        else:
            values["last_seen_ns"] = started + 5 * SECOND
        store.update_recording(info.id, **values)


FILTERS = (
    Filters(),
    Filters(errors_only=True),
    Filters(statuses=("running",)),
    Filters(statuses=("incomplete",)),
    Filters(statuses=("ok", "killed")),
    Filters(statuses=("incomplete", "error"), errors_only=True),
    Filters(tags=("half=1",)),
    Filters(models=("claude-haiku-4-5",), min_cost=0.05),
    Filters(min_cost=0.0),
    Filters(max_cost=0.2),
    Filters(projects=("/p/1",), errors_only=True),
    Filters(models=("none",)),
)


def check_summaries(store: Store, tag: str) -> None:
    """For each filter: the SQL figures equal a Python count over the same
    recordings, and every page read with LIMIT/OFFSET is that slice of the list."""
    seen_gone = False
    for base in FILTERS:
        filters = base.with_(tags=(*base.tags, f"summary={tag}"))
        # Each with the cost the list shows (``usage``'s).
        every = costed(store_reader(store), queries.list_sessions(store, filters))
        # A cost filter lists only costs known (as shown) and in its bounds.
        low, high = filters.min_cost, filters.max_cost
        assert (low is None and high is None) or all(r.cost is not None for r in every), filters
        assert all(low is None or r.cost >= low for r in every), filters
        assert all(high is None or r.cost <= high for r in every), filters
        expected = queries.tiles_of(every)
        got = queries.summary(store, filters)
        assert (got.count, got.running) == (expected.count, expected.running), filters
        assert got.total_cost == pytest.approx(expected.total_cost, abs=1e-9), filters
        assert got.error_rate == pytest.approx(expected.error_rate), filters
        assert got.p95_duration_s == pytest.approx(expected.p95_duration_s), filters
        for offset, limit in ((0, 4), (3, 5), (24, 4)):
            page = queries.list_sessions(store, filters, offset=offset, limit=limit)
            assert [r.id for r in page] == [r.id for r in every[offset:offset + limit]]
        seen_gone |= any(r.name.startswith(f"{tag}-gone") and r.status == "incomplete"
                         for r in every)
    assert seen_gone  # the pid check was exercised
    assert {f"summary={tag}", "half=0", "half=1"} <= set(queries.choices(store)["tags"])
    everything = queries.summary(store, Filters(tags=(f"summary={tag}",)))
    # 26 recordings: 4 running (fresh heartbeat, no pid); 4 + 4 incomplete (stale,
    # or a proxy gone); 5 ok, 5 error, 4 killed.
    assert (everything.count, everything.running) == (26, 4)
    assert everything.error_rate == pytest.approx((8 + 5 + 4) / 22)
    # The Stats page's sessions and failures per day, counted by the database
    # (the gone proxies' by the pid check), are Python's count over every recording.
    by_day: dict[dt.date, list[int]] = {}
    for rec in queries.list_sessions(store, Filters()):
        day = by_day.setdefault(
            dt.datetime.fromtimestamp(rec.started_ns / 1e9, tz=dt.timezone.utc).date(), [0, 0])
        day[0] += 1
        day[1] += rec.status in FAILED
    assert {d: [n, e] for d, n, e in queries.sessions_per_day(store)} == by_day


def check_tile_cost(store: Store) -> None:
    """The Total cost tile is the sum of the costs the list shows (``usage``'s, read
    per session): sessions with calls in the usage roll-up, one of them with a
    model of no price (unknown: adds nothing), and sessions with none there (their
    own stored cost, or none)."""
    from pathlib import Path

    from sqlalchemy import update

    from claudetrace.cassette import read_cassette
    from claudetrace.recording import RecordingInfo
    from claudetrace.store.models import UsageModel
    from claudetrace.store.rows import COST_SOURCES

    folder = Path(__file__).parent / "fixtures" / "cassettes"
    mine = {"tilecost": "1"}  # a store shared with other tests: these recordings
    ids = [store.import_cassette(read_cassette(folder / f"{name}.ndjson"), name=name, tags=mine)
           for name in ("plain", "multi_turn", "subagent", "hooks")]
    with store.session() as s, s.begin():  # one call of a model with no price
        s.execute(update(UsageModel).where(UsageModel.recording_id == ids[1]).values(
            sources=UsageModel.sources.op("|")(1 << COST_SOURCES.index("unknown"))))
    for n, (cost, source, calls) in enumerate(
            [(0.25, "cli", 1), (0.0, "unknown", 1), (0.125, "estimate", 0), (0.5, "", 2)]):
        info = RecordingInfo.start(["claude"], name=f"stored-{n}", tags=mine)
        store.create_recording(info)
        store.update_recording(info.id, ended_ns=info.started_ns + 10**9, exit_code=0,
                               outcome="ok", cost_usd=cost, cost_source=source,
                               model_calls=calls)
    filters = Filters(tags=("tilecost=1",))
    every = costed(store_reader(store), queries.list_sessions(store, filters))
    shown = {r.name: r.cost for r in every}
    assert shown["multi_turn"] is None and shown["plain"] and shown["stored-0"] == 0.25
    assert shown["stored-2"] is None and shown["stored-3"] == 0.5  # no call; the CLI's
    tile = queries.summary(store, filters)
    assert tile.count == len(every) == 8
    assert tile.total_cost == pytest.approx(sum(c or 0.0 for c in shown.values()), abs=1e-8)
