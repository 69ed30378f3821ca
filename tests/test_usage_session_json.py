"""``usage session --json`` written from the store's rows by msgspec structs
(:func:`claudetrace.usage.session_json_text`) is the text the dicts of
:func:`~claudetrace.usage.session_json` gave, byte for byte, on SQLite and
PostgreSQL: sums, rounding, order, ``null``, unpriced models, escapes."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from claudetrace.cli import cli
from claudetrace.cli._common import echo_json
from claudetrace.formats.imports import import_file
from claudetrace.store import open_store
from claudetrace.store.usage import UsageFilter, store_reader
from claudetrace.testing.transcripts import Call, Transcript, random_corpus, write_transcript
from claudetrace.usage import session_json, sessions, zone
from tests.test_store_postgres import fresh_database, pg_url  # noqa: F401  (the fixture)

UTC = dt.timezone.utc


def _corpus() -> list[Transcript]:
    """Random sessions of several models, and the odd ones: a model without a price
    beside a priced one, a session of unpriced calls only, controls and bidi in a
    project and a model name, a project name of non-ASCII letters."""
    at = dt.datetime(2026, 11, 20, 9, tzinfo=UTC)
    odd = [
        Transcript("22222222-0000-4000-8000-000000000001", "-x", [
            Call("claude-sonnet-4-5-20250929", at, 100, 10, 7, 3),
            Call("claude-fake-9", at + dt.timedelta(minutes=1), 100, 10)], cwd="/home/dev/x"),
        Transcript("22222222-0000-4000-8000-000000000002", "-y", [
            Call("claude-fake-9", at + dt.timedelta(hours=2), 5, 6)], cwd="/home/dév/ÿ"),
        Transcript("22222222-0000-4000-8000-000000000003", "-z", [
            Call("claude-\u202eder\u2066\x9b31m", at + dt.timedelta(hours=3), 1, 2),
            Call("claude-haiku-4-5-20251001", at + dt.timedelta(hours=3), 3, 4)],
            cwd="/home/\x1b[31mred\u2028"),
    ]
    return [*random_corpus(14, calls=30, seed=5), *odd]


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        found = str(tmp_path / "claudetrace.db")
    else:
        found = fresh_database(request.getfixturevalue("pg_url"), "usage_session_json")
    store = open_store(found, create=True)
    try:
        for t in _corpus():
            assert import_file(store, write_transcript(tmp_path / "projects", t)).recording_id
    finally:
        store.close()
    yield found


@pytest.mark.parametrize("args", [
    ("-z", "UTC"), ("-z", "Asia/Kolkata"), ("-z", "Europe/Paris", "--since", "20260910"),
    ("-z", "UTC", "--model", "claude-fake-9"), ("-z", "UTC", "--project", "nowhere"),
])
def test_the_text_is_the_dicts_text(url: str, args: tuple[str, ...]) -> None:
    out = CliRunner().invoke(cli, ["usage", "session", "--json", *args, "--db", url])
    assert out.exit_code == 0, out.output
    store = open_store(url)
    try:
        tz = zone(args[1])
        since = (int(dt.datetime(2026, 9, 10, tzinfo=tz).timestamp()) * 1_000_000_000
                 if "--since" in args else None)
        f = UsageFilter(since_ns=since, models=tuple(args[3:4]) if "--model" in args else (),
                        project=args[3] if "--project" in args else None)
        written = io.StringIO()
        with contextlib.redirect_stdout(written):
            echo_json(session_json(sessions(store_reader(store), f), tz))
    finally:
        store.close()
    assert out.stdout == written.getvalue()
    found = json.loads(out.stdout)
    if "--project" not in args:
        assert found["sessions"]
    if args == ("-z", "UTC"):  # what the text covers
        assert "\\u202e" in out.stdout and "\\u2028" in out.stdout
        by_id = {s["sessionId"][-1]: s for s in found["sessions"]
                 if s["sessionId"].startswith("22222222")}
        assert by_id["1"]["unpricedModels"] == ["claude-fake-9"]
        assert by_id["2"]["costSource"] == "unknown"
        assert by_id["2"]["modelBreakdowns"][0]["cost"] is None
