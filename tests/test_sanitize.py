"""Record-time sanitising of cassettes: secrets, machine paths, exact bytes otherwise."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claudetrace import redact
from claudetrace.cassette import Cassette, read_cassette, write_cassette
from claudetrace.model.events import Event
from claudetrace.redact import REDACTED
from claudetrace.replay.matching import compile_script
from claudetrace.sanitize import CWD, HOME, Sanitizer, sanitize_cassette

SAMPLES = Path(__file__).parent / "fixtures" / "samples"


@pytest.fixture
def alice() -> Sanitizer:
    return Sanitizer.for_recording(
        cwd="/home/alice/work/app", home="/home/alice", tmp="/var/tmp/x", environ={}
    )


def test_unchanged_line_keeps_its_exact_bytes(alice: Sanitizer) -> None:
    data = b'{"type":"user","message":{"content":"hi"}}'
    assert alice.line(data) is data


def test_api_key_in_json_value_is_redacted_and_compact_spelling_kept(alice: Sanitizer) -> None:
    data = b'{"type":"user","text":"key sk-ant-api03-abcdefghijklmnop here"}'
    out = alice.line(data)
    assert out == ('{"type":"user","text":"key ' + REDACTED + ' here"}').encode()


def test_python_sdk_spelling_is_kept(alice: Sanitizer) -> None:
    data = json.dumps({"type": "user", "cwd": "/home/alice/work/app", "n": "é"}).encode()
    out = alice.line(data)
    assert out == json.dumps({"type": "user", "cwd": CWD, "n": "é"}).encode()


def test_redaction_never_breaks_json_escaping(alice: Sanitizer) -> None:
    # A raw-text substitution would eat the backslash before the quote.
    data = json.dumps({"text": 'token=abcdef\\" and "quoted"'}).encode()
    out = alice.line(data)
    assert json.loads(out) == {"text": f'token={REDACTED}" and "quoted"'}


def test_paths_become_placeholders_with_boundaries(alice: Sanitizer) -> None:
    text = (
        "/home/alice/work/app/main.py /home/alice/.claude/projects/-home-alice-work-app/s.jsonl "
        "/home/alice/work/application /usr/home/alice /var/tmp/x/f in /home/alice/work/app."
    )
    assert alice.text(text) == (
        f"{CWD}/main.py {HOME}/.claude/projects/-home-dev-project/s.jsonl "
        f"{HOME}/work/application /usr/home/alice /tmp/f in {CWD}."
    )


def test_keys_are_sanitised_too(alice: Sanitizer) -> None:
    assert alice.value({"/home/alice/work/app/a.py": 1}) == {f"{CWD}/a.py": 1}


def test_cwd_equal_to_home_uses_the_home_placeholder() -> None:
    s = Sanitizer.for_recording(cwd="/home/bob", home="/home/bob", environ={})
    assert s.text("/home/bob/x") == f"{HOME}/x"


def test_secret_env_values_and_configured_patterns() -> None:
    s = Sanitizer.for_recording(
        environ={"MY_SERVICE_TOKEN": "zq81-plain-shape", "PATH": "/usr/bin"},
        patterns=[r"ACME-\d{6}", r"(customer=)\w+"],
    )
    assert s.text("t zq81-plain-shape ACME-123456 customer=bigco /usr/bin") == (
        f"t {REDACTED} {REDACTED} customer={REDACTED} /usr/bin"
    )


def test_non_json_and_non_utf8_lines() -> None:
    s = Sanitizer.for_recording(home="/home/carol", environ={})
    assert s.line(b"warn: /home/carol/x \xff") == b"warn: /home/dev/x \xff"
    data = b"plain"
    assert s.line(data) is data


def test_header_drops_machine_fields_and_names_placeholders(alice: Sanitizer) -> None:
    header = {
        "claudetrace": "cassette",
        "version": 1,
        "argv": ["/home/alice/.venv/bin/claude", "--verbose"],
        "cwd": "/home/alice/work/app",
        "host": "alice-laptop",
        "exit_code": 0,
    }
    out = alice.header(header)
    assert "host" not in out
    assert out["argv"] == ["claude", "--verbose"]
    assert out["cwd"] == CWD
    assert out["home"] == HOME
    assert out["sanitized"]["secrets"] is True


def _as_recorded_by_alice(sample: Cassette) -> Cassette:
    """The sample as if recorded in /home/alice/proj (it was sanitised to /home/dev)."""

    def move(data: bytes) -> bytes:
        return (
            data.replace(b"/home/dev/project", b"/home/alice/proj")
            .replace(b"-home-dev-project", b"-home-alice-proj")
            .replace(b"/home/dev", b"/home/alice")
        )

    events = [Event(e.seq, e.direction, e.t_ns, move(e.data), e.eol) for e in sample.events]
    header = {**sample.header, "cwd": "/home/alice/proj", "host": "alice-laptop"}
    return Cassette(header, events)


def test_sanitising_a_real_recording_restores_the_reference_bytes(tmp_path: Path) -> None:
    sample = read_cassette(SAMPLES / "mcp_hooks.cassette.ndjson")
    recorded = _as_recorded_by_alice(sample)
    assert any(b"/home/alice" in e.data for e in recorded.events)

    clean = sanitize_cassette(recorded, environ={"HOME": "/home/alice"}, tmp="/tmp")

    assert [e.data for e in clean.events] == [e.data for e in sample.events]
    out = tmp_path / "c.ndjson"
    write_cassette(out, clean.header, clean.events)
    assert "alice" not in out.read_text(encoding="utf-8")


def test_replay_maps_placeholders_to_the_live_directories() -> None:
    sample = read_cassette(SAMPLES / "mcp_hooks.cassette.ndjson")
    clean = sanitize_cassette(
        _as_recorded_by_alice(sample), environ={"HOME": "/home/alice"}, tmp="/tmp"
    )
    script = compile_script(clean, live_paths={"cwd": "/srv/ci/app", "home": "/srv/ci"})
    rendered = b"".join(line.data for line in script.outputs)
    rendered = script.paths.text(rendered.decode()) if script.paths else rendered.decode()
    assert "/srv/ci/app" in rendered
    assert "-srv-ci-app" in rendered
    assert "/home/dev" not in rendered


# -- telling a clean line at a glance ------------------------------------------------

@pytest.mark.parametrize("pattern", redact._PATTERNS, ids=lambda p: p.pattern[:30])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_the_hint_is_found_wherever_a_secret_pattern_matches(
    pattern: re.Pattern[str], data: st.DataObject,
) -> None:
    secret = data.draw(st.from_regex(pattern, fullmatch=True))
    around = data.draw(st.text(max_size=5))
    assert redact.may_hold_secret(secret)
    line = json.dumps({"k": around + secret + around}, ensure_ascii=False)
    if "\\u" not in line and "\\/" not in line:
        assert redact.may_hold_secret(line)


_LINE_TEXT = st.lists(st.sampled_from(
    [*"abcAKIJyeksk-_=:/ \\\"\n\t\x1bé\u017f\u212a", "token=", "Bearer ", "sk-ant-",
     "ghp_", "eyJ", "passwd:", "hunter2-secret"]),
    max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(value=_LINE_TEXT, key=_LINE_TEXT, as_json=st.booleans(), ascii_only=st.booleans())
def test_a_line_seen_clean_at_a_glance_is_clean(
    value: str, key: str, as_json: bool, ascii_only: bool,
) -> None:
    sanitizer = Sanitizer(literals=("hunter2-secret", "ZZZZ"))
    glance_off = Sanitizer(literals=("hunter2-secret", "ZZZZ"), patterns=(re.compile("(?!)"),))
    text = json.dumps({key: [value, 1]}, ensure_ascii=ascii_only) if as_json else value
    data = text.encode("utf-8", "surrogateescape")
    assert sanitizer.line(data) == glance_off.line(data)


def test_clean_lines_are_given_back_unparsed() -> None:
    sanitizer = Sanitizer(literals=("s3cr3t-value",))
    clean = b'{"type":"assistant","message":{"usage":{"input_tokens":3}},"text":"a\\nb"}'
    assert sanitizer._untouched(clean)
    assert sanitizer.line(clean) is clean
    for dirty in (b'{"t":"x s3cr3t-value"}', b'{"t":"token=abcdefgh"}',
                  b'{"t":"\\u0073k-ant-abcdefghijk"}', '{"t":"pa\u017fsword=abcdefgh"}'.encode(),
                  b'{"t":"Authorization: Bearer abcdefghijklmnop"}'):
        assert not sanitizer._untouched(dirty)
        assert sanitizer.line(dirty) != dirty


# -- telling clean lines a batch at a time ---------------------------------------------

_SANITIZERS = (
    Sanitizer(literals=("hunter2-secret", "ZZZZ")),
    Sanitizer(literals=("hunter2-secret",), secrets=False),
    Sanitizer(),
)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.tuples(_LINE_TEXT, _LINE_TEXT, st.booleans(), st.booleans()),
                      max_size=8),
       which=st.sampled_from(_SANITIZERS), raw=st.booleans())
def test_a_batch_finds_every_line_the_glance_would_not_pass(
    texts: list[tuple[str, str, bool, bool]], which: Sanitizer, raw: bool,
) -> None:
    lines = [(json.dumps({key: value}, ensure_ascii=ascii_only) if as_json else value)
             .encode("utf-8", "surrogateescape") for value, key, as_json, ascii_only in texts]
    if raw:  # not UTF-8, or a line holding a newline of its own
        lines.append(b"\xff token=" + b"x" * 8)
        lines.append(b"a\nsk-ant-abcdefghij")
    suspects = which._suspects(lines)
    for index, line in enumerate(lines):
        if index not in suspects:
            assert which._untouched(line), line
    assert which.lines(lines) == [which.line(line) for line in lines]


def test_a_hint_is_found_at_either_end_of_a_line_and_beside_its_neighbours() -> None:
    sanitizer = Sanitizer(literals=("hunter2-secret",))
    clean = b'{"usage":{"input_tokens":3,"api":"x"}}'
    dirty = [b"sk-ant-abcdefghijk", b'{"a":"x TOKEN=abcdefgh"}', b"Bearer abcdefghijklmnop",
             b"x hunter2-secret", b'{"k":"\\u0041"}', b"eyJ", b"PASSWD:", b"ghr_", b"x_auth_token="]
    for line in dirty:
        lines = [clean, line, line, clean, line]
        assert sorted(sanitizer._suspects(lines)) == [1, 2, 4], line
        assert sanitizer.lines(lines) == [sanitizer.line(x) for x in lines]
    # a word split by the newline between two lines is in neither
    assert not sanitizer._suspects([b'{"a":"tok"}', b'{"b":"en=abcdefgh"}'])
    assert not sanitizer._suspects([b"hunter2", b"-secret"])


def test_clean_lines_of_a_batch_are_given_back_as_they_are() -> None:
    sanitizer = Sanitizer(literals=("hunter2-secret",))
    for sample in sorted(SAMPLES.glob("*.cassette.ndjson")):
        lines = [event.data for event in read_cassette(sample).events]
        cleaned = sanitizer.lines(lines)
        assert cleaned == [sanitizer.line(line) for line in lines]
        assert all(a is b for a, b in zip(cleaned, lines, strict=True)
                   if sanitizer._untouched(b))
