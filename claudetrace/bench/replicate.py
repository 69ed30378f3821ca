"""Copies of recordings, made in bulk on PostgreSQL with ``COPY``: a big store built fast.

Filling a store through the writer runs at the writer's pace (about 500 events
a second through ``import`` of many small sessions); a team's store of 10M
events would take hours.  Here a set of *template* recordings, stored once
through the real writer, is copied as many times as wanted: each copy gets a
new recording id (a ULID of its own start time), its times shifted by whole
hours (so the usage layer's hours stay whole), and new values for the ids
its lines carry (the CLI's session id, line uuids, API message ids, tool use
ids), the same in the lines' bytes and in every column that repeats them.
Every table the writer fills is copied, its columns read from the database's
schema (not from the models: another branch's columns come along), so a copy
is what the writer would have stored for the same session recorded at another
time.

Rows go in through psycopg's ``COPY … FROM STDIN`` (binary where every column
has a plain type, text where one has not, such as ``json`` or ``tsvector``),
the copies in order of their start time, as a store that grew day by day has
them.  Used by :mod:`.teamstore` only; nothing in the store depends on it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..ids import new_recording_id

if TYPE_CHECKING:
    import psycopg

HOUR_NS: Final = 3_600 * 1_000_000_000
#: The tables a recording has rows in, parents first; a table missing from the
#: database (an older schema) is left out.
TABLES: Final = ("recordings", "events", "event_search", "event_tools", "usage_calls",
                 "usage_hours", "usage_models")
#: Column types psycopg writes in ``COPY``'s binary format from the values it reads.
_BINARY: Final = frozenset({"varchar", "text", "int2", "int4", "int8", "bool", "bytea",
                            "float4", "float8"})
_TEXTUAL: Final = frozenset({"varchar", "text", "json", "jsonb"})
#: The ids a session's lines carry: uuids (session, lines, requests) and the API's
#: prefixed ids (messages, tool uses, control requests).
ID_PATTERN: Final = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"|(?:msg|toolu|srvtoolu|req)_[0-9A-Za-z]{12,}")
_BYTES_PATTERN: Final = re.compile(ID_PATTERN.pattern.encode())
_BASE62: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a table as the database has it."""

    name: str
    type: str  # PostgreSQL's udt name: varchar, int8, bytea, json, tsvector…
    generated: bool  # filled by the database (a sequence, an expression): not copied


@dataclass(frozen=True, slots=True)
class Copy:
    """One copy to make: of ``template`` (a recording id), shifted by ``shift_ns``
    (whole hours), numbered ``number`` (1 or more; its ids derive from it)."""

    template: str
    shift_ns: int
    number: int


def schema_columns(conn: psycopg.Connection[Any], table: str) -> list[Column]:
    """``table``'s columns in their order, as the current schema has them."""
    rows = conn.execute(
        "SELECT column_name, udt_name, coalesce(column_default LIKE 'nextval(%%', false) "
        "OR is_identity = 'YES' OR is_generated = 'ALWAYS' FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = %s ORDER BY ordinal_position",
        (table,)).fetchall()
    return [Column(name, kind, bool(generated)) for name, kind, generated in rows]


def new_id(old: str, number: int) -> str:
    """The id a copy numbered ``number`` gives ``old``: the same shape and length
    (a uuid stays a uuid, ``msg_…`` stays ``msg_`` and as many characters), from a
    digest, so two copies or two ids never meet."""
    digest = hashlib.blake2b(f"{number}:{old}".encode(), digest_size=24).digest()
    if "-" in old and len(old) == 36:
        h = digest[:16].hex()
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{h[16:20]}-{h[20:32]}"
    prefix, _, rest = old.partition("_")
    value = int.from_bytes(digest, "big")
    chars = []
    for _ in range(len(rest)):
        value, digit = divmod(value, 62)
        chars.append(_BASE62[digit])
    return f"{prefix}_{''.join(chars)}"


class _Ids:
    """One copy's id mapping, each id worked out once."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.text: dict[str, str] = {}
        self.raw: dict[bytes, bytes] = {}

    def of(self, old: str) -> str:
        found = self.text.get(old)
        if found is None:
            found = self.text[old] = new_id(old, self.number)
        return found

    def of_bytes(self, old: bytes) -> bytes:
        found = self.raw.get(old)
        if found is None:
            found = self.raw[old] = self.of(old.decode()).encode()
        return found


# A template row is a list of cells, each made into the copy's value by one of
# (_REC: the copy's recording number, which keys ``events``, ``event_search`` and
# ``event_tools``: the database gives it as the copy's ``recordings`` row goes in):
_KEEP, _RID, _TIME, _TEXT, _BYTES, _REC = range(6)
#: The column that names a row's recording, by table (default ``recording_id``).
_KEYS: Final = {"recordings": "id", "events": "rec", "event_search": "rec",
                "event_tools": "rec"}


def _split(value: Any, pattern: re.Pattern[Any]) -> list[Any] | None:
    """``value`` cut around the ids it holds: literal, id, literal, id, …, literal;
    None when it holds none."""
    parts = pattern.split(value) if pattern.search(value) else None
    if parts is None:
        return None
    ids = pattern.findall(value)
    cut: list[Any] = []
    for i, literal in enumerate(parts):
        cut.append(literal)
        if i < len(ids):
            cut.append(ids[i])
    return cut


@dataclass(slots=True)
class _Table:
    name: str
    columns: list[Column]
    binary: bool
    #: Per template recording id: its rows as cells.
    rows: dict[str, list[list[tuple[int, Any]]]]

    def statement(self) -> str:
        names = ", ".join(c.name for c in self.columns)
        form = "(FORMAT BINARY)" if self.binary else ""
        return f"COPY {self.name} ({names}) FROM STDIN {form}"


def _cells(table: str, columns: Sequence[Column], row: Sequence[Any]) -> list[tuple[int, Any]]:
    cells: list[tuple[int, Any]] = []
    for column, value in zip(columns, row, strict=True):
        if value is None:
            cells.append((_KEEP, None))
        elif column.name == _KEYS.get(table, "recording_id"):
            cells.append((_REC if column.name == "rec" else _RID, value))
        elif column.name.endswith("_ns") and not (table == "events" and column.name == "t_ns"):
            cells.append((_TIME, value))  # Unix times; an event's t_ns is since the child began
        elif column.type == "bytea":
            cut = _split(bytes(value), _BYTES_PATTERN)
            cells.append((_KEEP, bytes(value)) if cut is None else (_BYTES, cut))
        elif column.type in _TEXTUAL and isinstance(value, str):
            cut = _split(value, ID_PATTERN)
            cells.append((_KEEP, value) if cut is None else (_TEXT, cut))
        else:
            cells.append((_KEEP, value))
    return cells


def load_templates(conn: psycopg.Connection[Any], templates: Sequence[str]) -> list[_Table]:
    """The rows of recordings ``templates`` in every table, ready to copy."""
    present = {row[0] for row in conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")}
    tables = []
    for name in TABLES:
        if name not in present:
            continue
        columns = [c for c in schema_columns(conn, name) if not c.generated]
        binary = all(c.type in _BINARY for c in columns)
        # A value of a type psycopg has no binary form for (json, tsvector) is read
        # as its text and written so.
        selected = ", ".join(c.name if c.type in _BINARY else f"{c.name}::text"
                             for c in columns)
        key = _KEYS.get(name, "recording_id")
        rows: dict[str, list[list[tuple[int, Any]]]] = {t: [] for t in templates}
        with conn.cursor(binary=True) as cursor:
            if key == "rec":  # the recording's id, after the row's columns
                cursor.execute(f"SELECT {selected}, r.id FROM {name} JOIN recordings r "
                               f"ON r.num = {name}.rec WHERE r.id = ANY(%s)", (list(templates),))
            else:
                cursor.execute(f"SELECT {selected}, {key} FROM {name} WHERE {key} = ANY(%s)",
                               (list(templates),))
            for row in cursor:
                rows[row[-1]].append(_cells(name, columns, row[:-1]))
        conn.rollback()
        tables.append(_Table(name, columns, binary, rows))
    return tables


def _made(cells: list[tuple[int, Any]], rid: str, shift: int, ids: _Ids,
          number: int | None) -> list[Any]:
    out: list[Any] = []
    for kind, value in cells:
        if kind == _KEEP:
            out.append(value)
        elif kind == _RID:
            out.append(rid)
        elif kind == _REC:
            out.append(number)
        elif kind == _TIME:
            out.append(value + shift)
        elif kind == _BYTES:
            of = ids.of_bytes
            out.append(b"".join(part if i % 2 == 0 else of(part)
                                for i, part in enumerate(value)))
        else:
            of_text = ids.of
            out.append("".join(part if i % 2 == 0 else of_text(part)
                               for i, part in enumerate(value)))
    return out


def copy_id(template_id: str, template_started_ns: int, copy: Copy) -> str:
    """The recording id of ``copy``: a ULID of its start time, its random part a
    digest of the template's id and the copy's number."""
    digest = hashlib.blake2b(f"{copy.number}:{template_id}".encode(), digest_size=10).digest()
    return new_recording_id(template_started_ns + copy.shift_ns, random=digest)


def chunks(copies: Sequence[Copy], size: int) -> Iterator[Sequence[Copy]]:
    for start in range(0, len(copies), size):
        yield copies[start:start + size]


def replicate(conn: psycopg.Connection[Any], tables: Sequence[_Table],
              started: dict[str, int], copies: Sequence[Copy], *, per_transaction: int = 50,
              progress: Callable[[int], None] | None = None,
              pack: Callable[[bytes], tuple[bytes, int]] | None = None) -> int:
    """Write ``copies`` (in the order given) of the templates ``tables`` holds
    (``started``: each template's start time), ``per_transaction`` copies a
    transaction, a ``COPY`` a table each; returns the event rows written.
    ``pack``: each copied line's ``(data, codec)``, as the indexer's writer packs
    it (:class:`~claudetrace.store.packing.LinePacker`), from the template's line
    as recorded with the copy's ids."""
    events = 0
    done = 0
    for chunk in chunks(copies, per_transaction):
        made = [(c, copy_id(c.template, started[c.template], c), _Ids(c.number)) for c in chunk]
        numbers: dict[str, int] = {}
        with conn.cursor() as cursor:
            for table in tables:
                if table.name != "recordings" and not numbers:
                    numbers = dict(cursor.execute(
                        "SELECT id, num FROM recordings WHERE id = ANY(%s)",
                        ([rid for _, rid, _ in made],)).fetchall())
                with cursor.copy(table.statement()) as out:
                    if table.binary:
                        out.set_types([c.type for c in table.columns])
                    packed = _packed_at(table, pack)
                    for c, rid, ids in made:
                        for cells in table.rows[c.template]:
                            row = _made(cells, rid, c.shift_ns, ids, numbers.get(rid))
                            if packed is not None:
                                data, codec, packer = packed
                                row[data], row[codec] = packer(row[data])
                            out.write_row(row)
                        if table.name == "events":
                            events += len(table.rows[c.template])
        conn.commit()
        done += len(chunk)
        if progress is not None:
            progress(done)
    return events


def _packed_at(table: _Table, pack: Callable[[bytes], tuple[bytes, int]] | None,
               ) -> tuple[int, int, Callable[[bytes], tuple[bytes, int]]] | None:
    """Where ``events`` rows hold their line and its codec, and what packs it,
    when lines are packed."""
    names = [c.name for c in table.columns]
    if pack is None or table.name != "events" or "codec" not in names:
        return None
    return names.index("data"), names.index("codec"), pack
