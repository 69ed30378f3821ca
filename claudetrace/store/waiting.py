"""How many recordings wait for their fold (:mod:`.unfolded`), asked through the
database's driver alone: ``search`` says so without loading SQLAlchemy."""

from __future__ import annotations

from typing import Final

#: What a reader that does not fold says of a recording not folded yet.
BEING_INDEXED: Final = "still being indexed (its import stored usage first)"


def count_plain(url: str) -> int:
    """How many recordings of the database ``url`` are not folded yet, asked through
    its driver alone (:func:`~.usage.plain_reader`: a plain SQLite file, a
    PostgreSQL URL libpq reads); 0 where that cannot be asked (another database,
    a schema not at the head)."""
    from ..errors import StoreError
    from .usage import plain_reader

    with plain_reader(url) as reader:
        if reader is None:
            return 0
        try:
            found = list(reader.rows("SELECT count(*) FROM unfolded", []))
        except StoreError:
            return 0
    return int(found[0][0]) if found else 0


__all__ = ["BEING_INDEXED", "count_plain"]
