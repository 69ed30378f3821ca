"""What a model call would cost, from a maintained price table: ``genai-prices``.

The CLI says what a session cost in its ``result`` lines; a transcript without
``cost-state`` lines, or a session that ended before its first result, does not.
Such calls are priced here from `genai-prices <https://github.com/pydantic/genai-prices>`_
(Pydantic's offline table of LLM prices), and every view marks the figure as an
estimate.  A model the table does not know has no price (``None``), never 0.

Anthropic counts input in three parts (uncached input, cache reads and cache
writes, as :class:`~claudetrace.model.usage.Usage` keeps them); genai-prices
counts ``input_tokens`` as their sum with cache reads and writes inside it, and
picks a model's long-context tier from that sum — per API request, so a call is
priced alone, never a session's sum.  Cache writes are priced at the 5-minute
rate, those a call's usage says were 1-hour writes
(``cache_creation.ephemeral_1h_input_tokens``) at the table's 1-hour rate.

The table needs Python 3.11 and takes a few tenths of a second to load, so it
is imported on first use only (never by ``claudetrace proxy``); without it
(Python 3.10) nothing has a price.  Prices are the table's current ones.  The
rates asked of it are kept in the data directory for the next process
(:data:`KEPT_FILE`), as long as the installed table is the same files: an
indexer pricing a session that ended without a ``result`` (its last batch, on
the way to the recording being listed complete) reads them there instead of
loading the table.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import threading
from decimal import Decimal
from typing import Any, Final


def dollars(usd: float, *, digits: int = 4) -> str:
    """An amount as every view prints it: ``$0.0019``, ``$0.00012``, ``$1,234.5678``.

    At least ``digits`` decimals, and more where a small amount needs them to show
    two significant digits (up to nine): a tiny estimate never reads ``$0.0000``.
    """
    places = digits
    # Only an amount under 10^(1 - digits) needs more places than ``digits``
    # (most amounts are not: no logarithm for them).
    if 0 < abs(usd) < 1 and abs(usd) < 10.0 ** (1 - digits):
        places = max(digits, min(9, 1 - math.floor(math.log10(abs(usd)))))
    return f"${usd:,.{places}f}"


#: The provider the table is asked about.
PROVIDER: Final = "anthropic"

_lock = threading.Lock()
#: model → its tiers' starts (total input tokens), or None when it has no price.
_tiers: dict[str, tuple[int, ...] | None] = {}
#: (model, tier) → per-token rates of input, output, cache read, cache write
#: (5-minute) and 1-hour cache write.
_rates: dict[tuple[str, int], tuple[float, float, float, float, float]] = {}
_table: Any = None
_missing = False
#: The rates asked of the table, kept for the next process, in the data directory.
KEPT_FILE: Final = "prices.json"
#: The installed table's files as :func:`_table_key` saw them; None until asked
#: ("" when it is not installed).
_key: str | None = None


def _table_key() -> str:
    """What tells one installed table from another without importing it: the
    size and time of its package's files (an upgrade rewrites them); "" when
    it is not installed."""
    global _key
    if _key is None:
        _key = ""
        with contextlib.suppress(ImportError, ValueError, OSError):
            spec = importlib.util.find_spec("genai_prices")
            if spec is not None and spec.origin:
                folder = os.path.dirname(spec.origin)
                stats = [os.stat(os.path.join(folder, name))
                         for name in ("__init__.py", "data.py", "data_snapshot.py")
                         if os.path.exists(os.path.join(folder, name))]
                _key = " ".join(f"{st.st_size}:{st.st_mtime_ns}" for st in stats)
    return _key


def _kept_path() -> str:
    from .config import data_dir

    return str(data_dir() / KEPT_FILE)


def _read_kept() -> None:
    """The rates an earlier process asked of this same table, into memory (hold
    :data:`_lock`); nothing when there are none, or they are of another table."""
    try:
        with open(_kept_path(), encoding="utf-8") as handle:
            kept = json.load(handle)
        if kept.get("table") != _table_key():
            return
        for model, starts in kept["tiers"].items():
            _tiers.setdefault(model, None if starts is None else tuple(starts))
        for model, tier, *rates in kept["rates"]:
            if len(rates) == 5:  # else kept by an older claudetrace (4 rates): asked again
                _rates.setdefault((model, tier), tuple(rates))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return


def _keep() -> None:
    """Write the rates asked so far for the next process (hold :data:`_lock`);
    best effort: a read-only data directory only costs the next process the
    table's load."""
    path = _kept_path()
    kept = {"table": _table_key(),
            "tiers": {model: None if starts is None else list(starts)
                      for model, starts in _tiers.items()},
            "rates": [[model, tier, *rates] for (model, tier), rates in _rates.items()]}
    temporary = f"{path}.{os.getpid()}.tmp"
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(kept, handle)
        os.replace(temporary, path)
    with contextlib.suppress(OSError):
        os.unlink(temporary)


_read = False
#: What :func:`_kept_starts` says when the table must be asked.
_ASK: Final[Any] = object()


def _kept_starts(model: str) -> Any:
    """``model``'s tier starts (None: it has no price) as this process or an
    earlier one asked the installed table; :data:`_ASK` when neither did, or
    no table is installed."""
    global _read
    if not _table_key():
        return _ASK
    with _lock:
        if not _read:
            _read = True
            _read_kept()
        return _tiers.get(model, _ASK)


def _asked_starts(model: str) -> Any:
    """``model``'s tier starts asked of the table (loaded now if need be);
    :data:`_ASK` when no table is installed."""
    lib = _library()
    if lib is None:
        return _ASK
    with _lock:
        return _starts(lib, model)


def _library() -> Any:
    """The ``genai_prices`` module, or None where it cannot be imported."""
    global _table, _missing
    if _table is None and not _missing:
        try:
            import genai_prices
        except ImportError:  # Python 3.10, or not installed
            _missing = True
        else:
            _table = genai_prices
    return _table


def available() -> bool:
    """Whether a price table is installed (genai-prices, Python ≥ 3.11)."""
    return _library() is not None


def _calc(lib: Any, model: str, **tokens: int) -> Any:
    return lib.calc_price(lib.Usage(**tokens), model, provider_id=PROVIDER)


def _tier_starts(lib: Any, model: str) -> tuple[int, ...] | None:
    """The input totals above which ``model`` has another price, or None if unpriced."""
    try:
        found = _calc(lib, model, input_tokens=0)
    except LookupError:
        return None
    starts: set[int] = set()
    for name in ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok"):
        price = getattr(found.model_price, name, None)
        for tier in getattr(price, "tiers", None) or ():
            starts.add(int(tier.start))
    return tuple(sorted(starts))


def _tier_rates(lib: Any, model: str, at: int) -> tuple[float, float, float, float, float]:
    """Per-token rates of ``model`` for a request of ``at`` input tokens in all.

    Asked of the table itself, one token type at a time, at that input total
    (which decides the tier): within a tier a price is linear in each count.
    """
    base = Decimal(_calc(lib, model, input_tokens=at).total_price)
    output = Decimal(_calc(lib, model, input_tokens=at, output_tokens=at).total_price) - base
    read = Decimal(_calc(lib, model, input_tokens=at, cache_read_tokens=at).total_price)
    write = Decimal(_calc(lib, model, input_tokens=at, cache_write_tokens=at).total_price)
    # The table counts 1-hour writes within the writes (cache_write_tokens).
    hour = Decimal(_calc(lib, model, input_tokens=at, cache_write_tokens=at,
                         cache_write_1h_tokens=at).total_price)
    return (float(base / at), float(output / at), float(read / at), float(write / at),
            float(hour / at))


def _starts(lib: Any, model: str) -> tuple[int, ...] | None:
    """``model``'s tier starts, asked of the table once (hold :data:`_lock`)."""
    if model not in _tiers:
        _tiers[model] = _tier_starts(lib, model)
        _keep()
    return _tiers[model]


def calls_cost(model: str | None, input: int, output: int, cache_read: int,
               cache_creation: int, cache_creation_1h: int = 0) -> float | None:
    """The price in USD of several requests of ``model`` from their summed token
    counts, where that sum tells: their input in all (cache included) within the
    model's first tier, so each request's was too, and a tier's price is linear.
    None otherwise (the sum crosses a tier: which requests did is not known), and
    where :func:`call_cost` has no price."""
    if model and model.isprintable() and (input or output or cache_read or cache_creation):
        starts = _kept_starts(model)
        if starts is _ASK:
            starts = _asked_starts(model)
            if starts is _ASK:
                return None
        if starts and input + cache_read + cache_creation > starts[0]:
            return None
    return call_cost(model, input, output, cache_read, cache_creation, cache_creation_1h)


def call_cost(model: str | None, input: int, output: int, cache_read: int,
              cache_creation: int, cache_creation_1h: int = 0) -> float | None:
    """The price in USD of one API request of ``model`` with these token counts.

    ``input`` excludes the cache, as Anthropic reports it; ``cache_creation_1h``
    is the part of ``cache_creation`` written for an hour (priced at that rate).
    A request that used no tokens costs 0 whatever its model (Claude Code's ``<synthetic>``
    messages); otherwise ``None`` when the model is not in the table or no table
    is installed.
    """
    if not (input or output or cache_read or cache_creation):
        return 0.0
    if not model or not model.isprintable():
        # A name with a newline or an escape is no model's (the table matches
        # its prefix: "claude-sonnet-4-5\n\x1b[2J" was priced as Sonnet 4.5).
        return None
    total_input = input + cache_read + cache_creation
    starts = _kept_starts(model)
    rates = None
    if starts is not _ASK:
        if starts is None:
            return None
        with _lock:
            rates = _rates.get((model, sum(1 for start in starts if total_input > start)))
    if rates is None:
        starts = _asked_starts(model)
        if starts is _ASK or starts is None:
            return None
        tier = sum(1 for start in starts if total_input > start)
        with _lock:
            rates = _rates.get((model, tier))
            if rates is None:
                at = starts[tier - 1] + 1 if tier else 1
                rates = _rates[(model, tier)] = _tier_rates(_library(), model, at)
                _keep()
    r_in, r_out, r_read, r_write, r_hour = rates
    hour = min(cache_creation_1h, cache_creation)
    return (input * r_in + output * r_out + cache_read * r_read
            + (cache_creation - hour) * r_write + hour * r_hour)


def table_version() -> str | None:
    """The installed price table's version (``genai-prices``), or None."""
    lib = _library()
    return None if lib is None else str(lib.__version__)


#: Sources that are files written beside the CLI (no process was seen, so no
#: cost was reported: ``claudetrace.formats.facts.FILE_SOURCES`` names them).
FILE_SOURCE_KINDS: Final = frozenset({"transcript", "claude-trace"})


#: The cost of a session that made no model call (nothing charged, nothing priced).
NO_COST: Final = "— (no model calls)"
#: The cost of a session that runs before its first result, in every view.
NOT_YET: Final = "not yet reported"
#: What a list's cell says of a figure not known yet (a cost not reported yet, the
#: turns of a session still being indexed).
NOT_YET_CELL: Final = "not yet"


def _not_yet(rec: Any) -> bool:
    """Whether a stored recording runs before its first result, nothing charged yet.

    Only a running one: a recording that stopped before its CLI exited (its proxy
    killed) will never report a cost, and says so as an ended session does."""
    return (rec.ended_ns is None and rec.result_subtype is None and not rec.cost_usd
            and rec.status == "running")


def known_cost(rec: Any) -> float | None:
    """A stored recording's cost when it is an amount (:func:`cost_text` says one),
    else None: unknown, no model call, not yet reported.  Never 0 for unknown."""
    if _not_yet(rec):
        return None
    return None if rec.cost_origin == "unknown" else rec.cost


def cost_text(rec: Any, digits: int = 6, *, cell: bool = False) -> str:
    """A stored recording's cost as every view says it (``show``, ``sessions``, the
    HTML report, the session browser): ``$0.0019``, ``$0.0019 (estimate)``,
    ``unknown (no price for MODEL)``, :data:`NO_COST`; ``not yet reported`` while
    it runs before its first result (never ``$0``).  ``cell``: as a table cell
    says it, beside a column that names the cost's source: ``$0.0019``,
    ``unknown``, ``—``, ``not yet``."""
    if _not_yet(rec):
        return NOT_YET_CELL if cell else NOT_YET
    source = rec.cost_origin
    if source == "unknown" and not rec.model_calls:
        # A prompt no model call answered is not an unpriced model.
        return "—" if cell else NO_COST
    usd = rec.cost
    if source == "unknown" or usd is None:
        if cell:
            return "unknown"
        unpriced = [m for m, f in (rec.models or {}).items()
                    if isinstance(f, dict) and f.get("cost_usd") is None]
        if unpriced:
            return f"unknown (no price for {', '.join(unpriced)})"
        return "unknown (not in this file)" if rec.source in FILE_SOURCE_KINDS else "unknown"
    return dollars(usd, digits=digits) + (
        " (estimate)" if source == "estimate" and not cell else "")
