"""How a statement names a recording's rows in ``events``, ``event_tools`` and ``event_search``.

Those tables key a recording's rows by its number (``recordings.num``, 4
bytes), not its 26-character id (migration 0020_recnum: a fifth of the store
on PostgreSQL).  Everything above the store speaks ids; a statement maps the id
to the number here, once: :func:`number_of` for one recording (a subquery the
planner runs once, before it reads the rows: a view or a join that gave the
rows their id back made PostgreSQL misjudge a recording's rows and sort them),
:func:`join` for rows read across recordings (SQLAlchemy statements:
:func:`~.models.number_of`, :func:`~.models.numbers_of`).  No SQLAlchemy here:
the writer process imports this.
"""

from __future__ import annotations

from typing import Final

#: The column of ``events``, ``event_tools`` and ``event_search`` that holds the
#: recording's number.
KEY: Final = "rec"


def number_of(param: str) -> str:
    """SQL of the number of the recording whose id is the parameter ``param``
    (as the statement spells it: ``?``, ``%s``, ``:rid``)."""
    return f"(SELECT num FROM recordings WHERE id = {param})"


def join(rows: str, recording: str = "r") -> str:
    """``JOIN recordings`` (as ``recording``) on the rows (``rows``: the alias of
    ``events``, ``event_tools`` or ``event_search``): it gives their
    ``{recording}.id``."""
    return f"JOIN recordings {recording} ON {recording}.num = {rows}.{KEY}"
