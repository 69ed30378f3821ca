"""Comparing the CLI arguments that change what ``claude`` does.

A recording answers for the options it was made with: replaying a session
recorded with ``--model opus`` to a host that now asks for ``--model haiku``
would show the application the recorded model and hide the change.  The
options listed in :data:`BEHAVIOUR_OPTIONS` are therefore compared (recorded
ones after path mapping) and a difference is a divergence of its own kind.
Options that only shape the transport (``--output-format``, ``--verbose``,
``--input-format``) or that claudetrace cannot judge are not compared.

Values are compared by meaning, not spelling: ``--allowedTools`` as a set of
tool rules, ``--mcp-config`` as its server names and types (an SDK server's
config is rebuilt by the SDK on every run), ``--setting-sources`` as a set.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from .normalize import MISSING, Change

#: Options compared by default, by their canonical name (without ``--``).
BEHAVIOUR_OPTIONS: Final = frozenset(
    {
        "model",
        "fallback-model",
        "permission-mode",
        "permission-prompt-tool",
        "dangerously-skip-permissions",
        "allowedTools",
        "disallowedTools",
        "tools",
        "mcp-config",
        "strict-mcp-config",
        "system-prompt",
        "system-prompt-file",
        "append-system-prompt",
        "setting-sources",
        "settings",
        "max-turns",
        "max-thinking-tokens",
        "max-budget-usd",
        "agents",
        "agent",
        "add-dir",
        "plugin-dir",
        "include-partial-messages",
        "fork-session",
        "resume",
        "continue",
        "betas",
        "json-schema",
    }
)

#: Other spellings the CLI accepts for the same option.
ALIASES: Final = {
    "allowed-tools": "allowedTools",
    "disallowed-tools": "disallowedTools",
    "mcp-server-config": "mcp-config",
}

#: Options that take no value (everything else listed takes one).
FLAGS: Final = frozenset(
    {
        "dangerously-skip-permissions",
        "strict-mcp-config",
        "include-partial-messages",
        "fork-session",
        "continue",
        "verbose",
        "print",
    }
)


def canonical(name: str) -> str:
    """An option name without dashes, aliases resolved (``allowed-tools``: ``allowedTools``)."""
    bare = name.lstrip("-")
    return ALIASES.get(bare, bare)


def parse_options(argv: Sequence[str]) -> dict[str, list[str]]:
    """The options of a CLI argv (without its program name): name → values in order.

    A flag's value is ``""``.  An option not known to take no value takes the next
    argument when that is not itself an option.
    """
    options: dict[str, list[str]] = {}
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("--") or arg == "--":
            continue
        name, eq, value = arg.partition("=")
        key = canonical(name)
        if not eq:
            if key in FLAGS:
                value = ""
            elif i < len(args) and (not args[i].startswith("--") or key in BEHAVIOUR_OPTIONS):
                value = args[i]
                i += 1
        options.setdefault(key, []).append(value)
    return options


def _split(value: str) -> list[str]:
    return sorted({part.strip() for part in value.replace(" ", ",").split(",") if part.strip()})


def _mcp_servers(value: str) -> Any:
    try:
        config = json.loads(value)
    except ValueError:
        return value  # a file path
    servers = config.get("mcpServers") if isinstance(config, dict) else None
    if not isinstance(servers, dict):
        return config
    return {
        name: (spec.get("type") or "stdio") if isinstance(spec, dict) else spec
        for name, spec in sorted(servers.items())
    }


_MEANING: Final[dict[str, Callable[[str], Any]]] = {
    "allowedTools": _split,
    "disallowedTools": _split,
    "tools": _split,
    "setting-sources": _split,
    "betas": _split,
    "mcp-config": _mcp_servers,
}


def meaning(key: str, values: list[str]) -> Any:
    """The comparable value of an option given ``values`` (one per occurrence)."""
    convert = _MEANING.get(key)
    converted = [convert(v) if convert else v for v in values]
    if key in ("allowedTools", "disallowedTools", "tools", "betas"):
        # Given once or repeated, the rules are one set.
        merged: set[str] = set()
        for item in converted:
            merged.update(item)
        return sorted(merged)
    return converted[0] if len(converted) == 1 else converted


def argv_changes(
    recorded: Sequence[str],
    live: Sequence[str],
    *,
    ignore: Iterable[str] = (),
    map_path: Callable[[str], str] | None = None,
) -> list[Change]:
    """Differences in behaviour-changing options (recorded mapped by ``map_path``).

    ``recorded`` and ``live`` are CLI arguments without the program name.  Each
    change's path is the option, e.g. ``argv --model``.
    """
    skip = {canonical(k) for k in ignore}
    mapped = [map_path(a) for a in recorded] if map_path else list(recorded)
    old, new = parse_options(mapped), parse_options(live)
    changes: list[Change] = []
    for key in sorted((set(old) | set(new)) & BEHAVIOUR_OPTIONS - skip):
        before = meaning(key, old[key]) if key in old else MISSING
        after = meaning(key, new[key]) if key in new else MISSING
        if before != after:
            changes.append(Change(f"argv --{key}", before, after))
    return changes


__all__ = [
    "ALIASES",
    "BEHAVIOUR_OPTIONS",
    "FLAGS",
    "argv_changes",
    "canonical",
    "meaning",
    "parse_options",
]
