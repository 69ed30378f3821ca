"""``claudetrace bench store --events``, scaled down on a throwaway PostgreSQL server:
templates through the writer, copies by ``COPY`` that are what the writer would
have stored, every target timed, the prune's rows all gone."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace.bench import replicate, teamstore
from claudetrace.cli import cli
from claudetrace.store import open_store
from claudetrace.store.aggregate import stored_latencies
from claudetrace.telemetry.latency import fold_latencies
from tests.test_store_postgres import pg_url  # noqa: F401 - the server, a fixture

pytest.importorskip("psycopg")


def _database(url: str, name: str) -> str:
    """A new empty database ``name`` on ``url``'s server; its URL."""
    import psycopg

    from claudetrace.store.postgres import plain_url

    conninfo = plain_url(url)
    assert conninfo is not None
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return url.rsplit("/", 1)[0] + "/" + name


def _execute(url: str, sql: str, params: Any = None) -> None:
    import psycopg

    from claudetrace.store.postgres import plain_url

    with psycopg.connect(plain_url(url) or "", autocommit=True) as conn:
        conn.execute(sql, params)


def test_new_ids_keep_their_shape_and_never_meet() -> None:
    uuid = "5f0c2d1e-9b7a-4c3e-8f21-6d4a0b9e7c15"
    made = {replicate.new_id(uuid, n) for n in range(1, 2001)}
    assert len(made) == 2000 and all(replicate.ID_PATTERN.fullmatch(m) for m in made)
    msg = "msg_01ABCDEFGHIJKLMNOPQRSTUV"
    assert replicate.new_id(msg, 3) != replicate.new_id(msg, 4)
    assert len(replicate.new_id(msg, 3)) == len(msg) and replicate.new_id(msg, 3)[:4] == "msg_"


@pytest.mark.usefixtures("ct_env")
def test_copies_are_what_the_writer_would_have_stored(pg_url: str) -> None:  # noqa: F811
    url = _database(pg_url, "team_copies")
    built = teamstore.build(url, events=12_000, sessions=80)
    assert built.sessions == 80 and built.events > 12_000
    assert teamstore.check_copies(url, built) == []
    # The copies' lines packed as the writer packs them, the templates' as imported.
    import psycopg

    from claudetrace.store.postgres import plain_url

    with psycopg.connect(plain_url(url) or "") as conn:
        for template, _number, copy in built.samples:
            codecs = {rid: {c for (c,) in conn.execute(
                "SELECT DISTINCT codec FROM events WHERE rec = "
                "(SELECT num FROM recordings WHERE id = %s)", (rid,))}
                for rid in (template, copy)}
            assert codecs[template] == {None}
            assert any(c is not None and c < -1 for c in codecs[copy]), codecs[copy]
    # Stored as a user's imports are: every session's latency samples kept on the
    # way in (copies with their rows), equal to a visit's fold of its lines.
    store = open_store(url)
    try:
        counts = {r.id: r.event_count for r in store.list_recordings()}
        kept = stored_latencies(store, counts)
        assert set(kept) == set(counts)
        for rid in [built.big_id, built.rare_id, *(c for _t, _n, c in built.samples)]:
            assert kept[rid] == fold_latencies(store, rid)
    finally:
        store.close()
    # The store's footprint against its lines, from the server's own figures.
    from claudetrace.bench import footprint

    with psycopg.connect(plain_url(url) or "") as conn:
        stored = footprint.measure(conn)
        raw = conn.execute("SELECT sum(length(data)) FROM events WHERE codec IS NULL").fetchone()
        sizes = dict(conn.execute("SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c "
                                  "WHERE c.relname IN ('events', 'pk_events')").fetchall())
    assert stored.events == built.events and stored.raw >= (raw[0] if raw else 0) > 0
    assert dict(stored.relations)["events"] == sizes["events"]
    assert stored.total > sizes["events"] + sizes["pk_events"]
    assert stored.ratio == stored.total / stored.raw
    columns = dict(stored.columns)
    assert columns["seq"] == 4.0 and columns["t_ns"] == 8.0 and columns["data"] > 0
    assert sum(columns.values()) < stored.row
    report = "\n".join(stored.lines_out())
    assert f"{stored.ratio:.3f}x the raw bytes" in report and "pk_events" in report
    # The check sees a copy that is not its template's: a line changed, a usage row lost.
    copy = built.samples[0][2]
    # (Its line stored as recorded: the copies' lines are packed as the writer packs.)
    _execute(url, "UPDATE events SET data = '{}'::bytea, codec = NULL WHERE rec = "
                  "(SELECT num FROM recordings WHERE id = %s) "
                  "AND seq = 3", (copy,))
    _execute(url, "DELETE FROM usage_calls WHERE recording_id = %s", (built.samples[1][2],))
    problems = teamstore.check_copies(url, built)
    assert any(copy in p and "lines are not" in p for p in problems)
    assert any(built.samples[1][2] in p and "rows per table" in p for p in problems)


@pytest.mark.slow
@pytest.mark.usefixtures("ct_env")
def test_bench_store_events_times_every_target_and_leaves_no_orphans(
        pg_url: str) -> None:  # noqa: F811
    url = _database(pg_url, "team_bench")
    result = CliRunner().invoke(cli, ["bench", "store", "--events", "15k", "--sessions", "60",
                                      "--repeat", "1", "--db", url])
    assert result.exit_code == 0, result.output
    out = result.output
    for row in ("/metrics, first scrape of a metrics serve just started",
                f"claudetrace search {teamstore.RARE}", "session list, newest 50",
                "20k-line session's page", "Stats page's queries",
                "burst listed complete, before prune", "prune --older-than 30d"):
        assert row in out
    # A burst is timed while the prune runs, unless so small a store's prune ended
    # within the second the bench gives it to begin (the bench then says so).
    assert "burst listed complete, during prune" in out or "(0 bursts recorded meanwhile" in out
    assert "copies checked against their templates" in out
    assert "footprint: " in out and "x the raw bytes" in out and "an events row" in out
    assert "rows left without their recording or event: none" in out
    assert "after a DELETE FROM recordings by hand: none" in out
    # A database that holds recordings is not filled.
    again = CliRunner().invoke(cli, ["bench", "store", "--events", "15k", "--db", url])
    assert again.exit_code != 0 and "fills an empty database" in again.output
