"""Secrets never reach the store in the clear (claudetrace.redact)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claudetrace import redact
from claudetrace.redact import (
    REDACTED,
    LineBatch,
    lines_may_hold_secret,
    may_hold_secret,
    redact_argv,
    redact_env,
    redact_text,
)

SECRETS = [
    "sk-ant-api03-" + "a1B2" * 10,
    "sk-proj-" + "x" * 30,
    "ghp_" + "A" * 36,
    "github_pat_" + "B" * 30,
    "xoxb-123456789012-abcdef",
    "AKIA" + "ABCDEFGHIJKLMNOP",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
]


@pytest.mark.parametrize("secret", SECRETS)
def test_known_secret_shapes_are_redacted_inside_text(secret: str) -> None:
    text = redact_text(f"before {secret} after")
    assert secret not in text
    assert text.startswith("before ") and text.endswith(" after") and REDACTED in text


def test_key_value_and_bearer_forms_keep_the_key() -> None:
    assert redact_text("api_key=abcd1234") == f"api_key={REDACTED}"
    header = redact_text("Authorization: Bearer abcdefghijklmnop")
    assert header.startswith("Authorization: ") and "abcdefghijklmnop" not in header
    assert redact_text("password: hunter22") == f"password: {REDACTED}"
    assert redact_text("nothing secret here --verbose") == "nothing secret here --verbose"


def test_argv_flags_that_take_secrets() -> None:
    argv = [
        "claude",
        "--api-key",
        "plainvalue",
        "--token=abc123",
        "--auth-token",
        "t0k",
        "--model",
        "claude-opus",
        "-p",
        f"use {SECRETS[0]}",
    ]
    assert redact_argv(argv) == [
        "claude",
        "--api-key",
        REDACTED,
        f"--token={REDACTED}",
        "--auth-token",
        REDACTED,
        "--model",
        "claude-opus",
        "-p",
        f"use {REDACTED}",
    ]


def test_argv_keeps_ordinary_arguments_exactly() -> None:
    argv = [
        "claude",
        "--output-format",
        "stream-json",
        "--verbose",
        "--system-prompt",
        "",
        "--mcp-config",
        '{"mcpServers": {"calc": {"type": "sdk"}}}',
        "--input-format",
        "stream-json",
    ]
    assert redact_argv(argv) == argv


def test_env_keeps_names_and_only_allowlisted_values() -> None:
    env = {
        "ANTHROPIC_API_KEY": SECRETS[0],
        "HOME": "/home/someone",
        "SSH_AUTH_SOCK": "/tmp/agent.sock",
        "LANG": "C.UTF-8",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9999",
        "TERM": f"xterm {SECRETS[2]}",
        "AWS_SECRET_ACCESS_KEY": "whatever",
    }
    snapshot = redact_env(env)
    assert set(snapshot) == set(env)
    assert snapshot["ANTHROPIC_API_KEY"] == REDACTED
    assert snapshot["HOME"] == "/home/someone"  # allow-listed (cassette sanitising needs it)
    assert snapshot["SSH_AUTH_SOCK"] == REDACTED  # not on the allow-list
    assert snapshot["AWS_SECRET_ACCESS_KEY"] == REDACTED
    assert snapshot["LANG"] == "C.UTF-8"
    assert snapshot["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9999"
    assert snapshot["TERM"] == f"xterm {REDACTED}"
    assert list(snapshot) == sorted(env)


_HINT_TEXT = st.lists(st.sampled_from(
    [*"abcehjkpstwxy_-=:/ \"\\\n", "sk-", "SK-", "ghp_", "gho_", "ghx_", "github_pat_", "xox",
     "AKIA", "eyJ", "Bearer", "api", "api_", "api-", "key", "KEY", "token", "tokens",
     "secret", "passw", "PASSWD", "auth", "credential", "CREDENTIALS_", "ak", "ia"]),
    max_size=24).map("".join)


@settings(max_examples=500, deadline=None)
@given(texts=st.lists(_HINT_TEXT, max_size=6))
def test_a_batch_of_ascii_lines_finds_the_lines_may_hold_secret_finds(texts: list[str]) -> None:
    lines = [text.encode() for text in texts]
    expected = {index for index, text in enumerate(texts) if may_hold_secret(text)}
    assert lines_may_hold_secret(LineBatch(lines)) == expected


@pytest.mark.parametrize("word", [word for word, _tail in redact._HINTS])
def test_every_hint_is_found_alone_at_either_end_and_inside(word: str) -> None:
    for tail in ("", "=", "_x:"):
        for text in (word + tail, "x " + word + tail, word.upper() + tail + " x"):
            lines = [b"clean", text.encode(), b"clean"]
            assert lines_may_hold_secret(LineBatch(lines)) == (
                {1} if may_hold_secret(text) else set()), text


@pytest.mark.parametrize("text", [
    "apikey=", "api_key:", "api-key=", "API-KEYS_x=", "api key=", "api--key=", "token=",
    "tokens:", "tokens", "access_token:", "sk-", "sk", "ghs_", "gh_", "auth_header:",
    "passwords=", "secret_", "credentials:", "bearer", "eyj", "akia", "xox"])
def test_the_key_value_hints_are_found_as_may_hold_secret_finds_them(text: str) -> None:
    for line in (text, f'{{"a": "x {text}"}}', text.upper()):
        found = lines_may_hold_secret(LineBatch([b"clean", line.encode()]))
        assert found == ({1} if may_hold_secret(line) else set()), line
