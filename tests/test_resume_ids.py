"""A resumed session's new id opens the joined recording, in every command that
takes a SESSION (``Store.resolve``): ``show``, ``tail``, ``export``, ``replay``,
``otel`` and the UI's ``?session=``, whole or as a prefix.

``fixtures/transcripts/forked`` was written by the real CLI (2.1.330, the fake
API): ``claude -p`` once, ``--resume <it> --fork-session``, ``--continue
--fork-session``, then ``--resume`` of the last (which appends to its file); its
``api-request-blob`` and ``api-request-shape`` lines (the system prompt and
tool list sent, some 100 KB a file) are left out.  Each fork's file begins with
a ``mode`` line, then a copy of the conversation so far.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from claudetrace.cli import cli

pytestmark = pytest.mark.usefixtures("ct_env")
FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"
FORKED = FIXTURES / "forked" / "projects"
CHAIN = FIXTURES / "resumed" / "projects" / "-home-dev-chain"
FIRST = "56b80255-494f-4834-a4e3-37fa909556e5"
FORKS = ("4aeb6ed4-e4d7-48e4-87a6-9ab0cd97b949", "917b28e5-bb97-4fbd-bb4e-4d232e202e03")
S1, S2, S3 = (f"5e550001-0000-4000-8000-00000000000{n}" for n in (1, 2, 3))


def run(*args: str, code: int = 0) -> Any:
    done = CliRunner().invoke(cli, list(args))
    assert done.exit_code == code, done.output
    return done


@pytest.fixture
def joined(db_path: Path) -> dict[str, str]:
    """The forked sessions and the resumed chain imported: recording id by first id."""
    ids = {}
    for folder, first in ((FORKED, FIRST), (CHAIN, S1)):
        done = run("import", str(folder), "--db", str(db_path))
        (ids[first],) = done.stdout.split()
    return ids


def test_a_real_forked_session_imports_as_one_recording(db_path: Path,
                                                         joined: dict[str, str]) -> None:
    shown = run("show", FIRST, "--db", str(db_path)).stdout
    assert f"forked as  {FORKS[0]}, {FORKS[1]}" in shown
    assert shown.count("user Say hi") == 1 and "user Once more" in shown


@pytest.mark.parametrize(("query", "first"), [
    (FORKS[0], FIRST), (FORKS[1], FIRST), (FORKS[1][:8], FIRST), (S2, S1), (S3, S1)])
def test_show_tail_and_export_open_the_joined_recording(
        db_path: Path, tmp_path: Path, joined: dict[str, str], query: str, first: str) -> None:
    rid = joined[first]
    db = ("--db", str(db_path))
    assert f"recording  {rid}" in run("show", query, *db).stdout
    assert run("tail", query, *db).stdout.startswith(f"── {rid} {first}")
    out = tmp_path / "x.ndjson"
    run("export", query, "-o", str(out), *db)
    assert json.loads(out.read_text().splitlines()[0])["recording_id"] == rid


def test_an_unknown_or_ambiguous_id_is_still_said(db_path: Path,
                                                  joined: dict[str, str]) -> None:
    done = run("show", "0badc0de", "--db", str(db_path), code=1)
    assert "no recording matches '0badc0de'" in done.output


def test_replay_takes_a_resumed_sessions_id(db_path: Path, joined: dict[str, str]) -> None:
    from claudetrace.replay.engine import load_source

    assert load_source(FORKS[1], str(db_path)).header["recording_id"] == joined[FIRST]
    done = CliRunner().invoke(cli, ["replay", FORKS[1][:8], "--db", str(db_path)], input="")
    assert "no such cassette file or recorded session" not in done.output, done.output


def test_otel_backfills_the_joined_recording(db_path: Path, joined: dict[str, str]) -> None:
    from tests.otlp_receiver import OtlpReceiver

    with OtlpReceiver("http") as receiver:
        run("otel", S3, "--db", str(db_path), "--endpoint", receiver.endpoint)
        spans = receiver.spans()
    ids = {a.value.string_value for span in spans for a in span.attributes
           if a.key == "gen_ai.conversation.id"}
    assert ids == {S1}
    assert sum(span.name.startswith("turn") for span in spans) == 4


def test_the_ui_opens_the_joined_recording(db_path: Path, joined: dict[str, str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    from tests.test_ui_app import APP, all_text

    monkeypatch.setenv("CLAUDETRACE_DB", str(db_path))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["session"] = FORKS[1]
    at.run()
    assert not at.exception, at.exception
    text = all_text(at)
    assert joined[FIRST] in text and "no recording matches" not in text

