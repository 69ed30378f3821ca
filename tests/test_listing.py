"""``sessions --json`` streamed (claudetrace.store.listing): the same bytes as the
whole list encoded at once, a chunk of recordings at a time, on both engines."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from claudetrace.cassette import iter_cassette
from claudetrace.cli.browse import _with_usage, sessions
from claudetrace.formats.facts import session_record
from claudetrace.recording import RecordingInfo
from claudetrace.store import Store, listing, open_store
from claudetrace.store.browse import Filters, list_sessions
from claudetrace.store.links import NO_LINKS, session_links
from tests.test_store_postgres import pg_url  # noqa: F401 - the server, a fixture

CASSETTES = Path(__file__).parent / "fixtures" / "cassettes"


@pytest.fixture(params=["sqlite", "postgresql"])
def filled(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Store]]:
    """A store of every fixture cassette, tagged two ways, and one recording still
    running (and one whose proxy is gone): its URL and the store."""
    url = str(tmp_path / "l.db") if request.param == "sqlite" else request.getfixturevalue(
        "pg_url")
    store = open_store(url)
    try:
        for n, path in enumerate(sorted(CASSETTES.glob("*.ndjson"))):
            header, events = iter_cassette(path)
            with closing(events):
                # A name not ASCII, and one that could reorder a terminal: escaped.
                store.import_cassette((header, events), name=f"naïve ‮{n}",
                                      tags={"team": ("web", "infra")[n % 2]})
        store.create_recording(RecordingInfo.start(["claude"], name="running"))
        gone = RecordingInfo.start(["claude"], name="gone")
        gone.pid = 2 ** 22 + 7  # no such process
        store.create_recording(gone)
        yield url, store
    finally:
        if request.param == "postgresql":
            with store.engine.begin() as conn:
                conn.exec_driver_sql("TRUNCATE recordings CASCADE")
        store.close()


def _whole(store: Store, filters: Filters, limit: int | None) -> bytes:
    """What ``sessions --json`` printed before it streamed: every recording loaded,
    then the list encoded at once (``echo_json``)."""
    from claudetrace.display import visible_json

    recs = _with_usage(store, list_sessions(store, filters, limit=limit, full=True))
    links = session_links(store, recs)
    data = [session_record(r, links.get(r.id, NO_LINKS)) for r in recs]
    raw = msgspec.json.format(msgspec.json.encode(data), indent=2)
    return (visible_json(raw.decode()) + "\n").encode()


@pytest.mark.parametrize("args, filters, limit", [
    ([], Filters(), None),
    (["-n", "5"], Filters(), 5),
    (["--tag", "team=web"], Filters(tags=("team=web",)), None),
    (["--status", "incomplete"], Filters(statuses=("incomplete",)), None),
    (["--status", "running", "--tag", "team=none"],
     Filters(statuses=("running",), tags=("team=none",)), None),
])
def test_streamed_json_is_the_whole_lists(filled: tuple[str, Store], args: list[str],
                                          filters: Filters, limit: int | None,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    url, store = filled
    monkeypatch.setattr(listing, "CHUNK", 3)  # several chunks, one part full
    chunks: list[int] = []
    real = listing.session_chunks

    def counted(*a: Any, **k: Any) -> Iterator[Any]:
        for chunk in real(*a, **k):
            chunks.append(len(chunk))
            yield chunk

    monkeypatch.setattr(listing, "session_chunks", counted)
    # The fixture's store (the command leaves its own open for the process's end).
    monkeypatch.setattr("claudetrace.cli.browse.read_store", lambda _db: store)
    result = CliRunner().invoke(sessions, ["--db", url, "--json", "-n", "0", *args])
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == _whole(store, filters, limit)
    assert all(n <= 3 for n in chunks)
    if not (limit or filters.tags or filters.statuses):
        assert len(chunks) >= 4 and sum(chunks) == len(list(CASSETTES.glob("*.ndjson"))) + 2


def test_ascii_output_is_written_as_bytes(filled: tuple[str, Store],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """On a real stdout with a buffer, each chunk goes out as the bytes msgspec
    wrote where nothing needs escaping, escaped where something does."""
    from claudetrace.cli._common import echo_json, echo_json_array

    items = [{"a": i, "s": "x" if i % 2 else "naïve \x7f"} for i in range(7)]
    outputs = []
    for write in (lambda: echo_json(items),
                  lambda: echo_json_array([items[:3], [], items[3:6], items[6:]]),
                  lambda: echo_json([]), lambda: echo_json_array([])):
        buffer = io.BytesIO()
        monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(buffer, encoding="utf-8"))
        write()
        sys.stdout.flush()
        outputs.append(buffer.getvalue())
    assert outputs[0] == outputs[1] and outputs[2] == outputs[3] == b"[]\n"
