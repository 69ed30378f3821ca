"""How many recordings wait for their fold (:mod:`.unfolded`), asked through the
database's driver alone: ``search`` says so without loading SQLAlchemy."""

from __future__ import annotations

import contextlib
from typing import Final

#: What a reader that does not fold says of a recording not folded yet.
BEING_INDEXED: Final = "still being indexed (its import stored usage first)"


def count_plain(url: str) -> int:
    """How many recordings of the database ``url`` are not folded yet, asked through
    its driver alone (a plain SQLite file, a PostgreSQL URL libpq reads); 0 where
    that cannot be asked (another database, a schema without the table)."""
    import sqlite3

    from .sqlite import plain_file

    path = plain_file(url)
    if path is not None:
        try:
            with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
                return int(conn.execute("SELECT count(*) FROM unfolded").fetchone()[0])
        except sqlite3.Error:
            return 0
    if not url.startswith("postgresql+psycopg://"):
        return 0
    import psycopg

    from .postgres import plain_url

    conninfo = plain_url(url)
    if conninfo is None:
        return 0
    try:
        with psycopg.connect(conninfo) as conn:
            found = conn.execute("SELECT count(*) FROM unfolded").fetchone()
    except psycopg.Error:
        return 0
    return int(found[0]) if found else 0


__all__ = ["BEING_INDEXED", "count_plain"]
