"""What a team's store takes on PostgreSQL beside its lines' raw bytes (``bench store --events``).

Issue 37 asks for a store no larger than the lines it holds.  This reads, from
the server's own figures, the store's tables with their indexes and TOAST
(``pg_total_relation_size``) against the sum of the lines' sizes, each table
and index apart (``pg_relation_size``), and what an ``events`` row holds column
by column (``pg_column_size``, averaged over every row), so that the figures
the documentation gives can be made again with one command.  The columns are
read from the database's schema, not from the models: another branch's
columns are counted too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import psycopg

#: A table or index is listed apart from this share of the store on.
LISTED_FROM: Final = 0.01

_TOTAL: Final = ("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                 "WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'")
_RELATIONS: Final = ("SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c "
                     "WHERE c.relnamespace = current_schema()::regnamespace "
                     "AND c.relkind IN ('r', 'i') ORDER BY 2 DESC, 1")
_EVENTS_COLUMNS: Final = ("SELECT column_name FROM information_schema.columns "
                          "WHERE table_schema = current_schema() AND table_name = 'events' "
                          "ORDER BY ordinal_position")


@dataclass(frozen=True)
class Footprint:
    """The store's bytes, and its lines'."""

    events: int
    #: The lines' bytes as recorded (``events.size`` summed).
    raw: int
    #: Every table of the store with its indexes and TOAST.
    total: int
    #: ``(name, bytes)`` of each table and index, largest first.
    relations: list[tuple[str, int]]
    #: ``(column, bytes)``: an ``events`` row's average per column, in the table's order.
    columns: list[tuple[str, float]]
    #: An ``events`` row's average with its header (``pg_column_size`` of the row).
    row: float

    @property
    def ratio(self) -> float:
        """The store's bytes over the lines' (issue 37's target: at most 1)."""
        return self.total / self.raw if self.raw else 0.0

    def lines_out(self) -> list[str]:
        """The report's lines."""
        per = max(1, self.events)
        listed = [f"{name} {size / 1e6:,.1f} MB ({size / per:.1f} B an event)"
                  for name, size in self.relations if size >= LISTED_FROM * self.total]
        columns = ", ".join(f"{name} {size:.1f}" for name, size in self.columns)
        return [f"footprint: {self.total / 1e6:,.1f} MB for {self.raw / 1e6:,.1f} MB of lines, "
                f"{self.ratio:.3f}x the raw bytes ({self.total / per:.1f} B an event, a line "
                f"{self.raw / per:.1f} B)",
                f"  {'; '.join(listed)}",
                f"  an events row (bytes, averages): {columns}; the row {self.row:.1f} with "
                "its header"]


def measure(conn: psycopg.Connection[Any]) -> Footprint:
    """The footprint of the store ``conn`` is connected to (a full read of ``events``)."""
    columns = [str(name) for (name,) in conn.execute(_EVENTS_COLUMNS)]
    # A NULL takes no bytes: coalesce, so that an average counts every row.
    averages = ", ".join(f'avg(coalesce(pg_column_size("{c}"), 0))' for c in columns)
    row = conn.execute(f"SELECT count(*), coalesce(sum(size), 0), avg(pg_column_size(e.*)), "
                       f"{averages} FROM events e").fetchone()
    total = conn.execute(_TOTAL).fetchone()
    relations = [(str(name), int(size)) for name, size in conn.execute(_RELATIONS)]
    assert row is not None and total is not None
    return Footprint(events=int(row[0]), raw=int(row[1]), total=int(total[0]),
                     relations=relations,
                     columns=[(c, float(v or 0)) for c, v in zip(columns, row[3:], strict=True)],
                     row=float(row[2] or 0))
