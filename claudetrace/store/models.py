"""The recording store's tables (SQLAlchemy 2.x declarative, portable to PostgreSQL).

Only portable column types are used (String, Text, Integer, BigInteger, Float,
Boolean, LargeBinary, JSON), so the same models and migrations run on SQLite and
PostgreSQL.  Times are integers in nanoseconds: ``started_ns`` / ``wall_ns`` are
Unix epoch, ``t_ns`` is monotonic since the child started.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ColumnElement,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Text,
    and_,
    case,
    exists,
    func,
    literal,
    literal_column,
    or_,
    select,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, column_property, mapped_column

from ..recording import (
    LATE_AFTER_NS,
    RecordingInfo,
    importing_elsewhere,
    recorder_alive,
    still_written,
    unended_reason,
)
from ..recording import STALE_AFTER_NS as STALE_AFTER_NS  # re-exported

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Recording(Base):
    """One proxied (or imported) session of the CLI."""

    __tablename__ = "recordings"

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    #: The recording's number (migration 0020_recnum), given at insert (an identity
    #: on PostgreSQL, a trigger on SQLite), never changed: what ``events``,
    #: ``event_tools`` and ``event_search`` key its rows by in place of the id
    #: (4 bytes against 27, in every row and key); :mod:`.keys` maps one to the other.
    num: Mapped[int] = mapped_column(Integer, Identity(), unique=True)
    name: Mapped[str | None] = mapped_column(String(200))
    tags: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    argv: Mapped[list[str]] = mapped_column(JSON, default=list)
    cwd: Mapped[str] = mapped_column(Text, default="")
    host: Mapped[str] = mapped_column(String(255), default="")
    pid: Mapped[int | None] = mapped_column(Integer)
    env: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    claudetrace_version: Mapped[str] = mapped_column(String(40), default="")
    source: Mapped[str] = mapped_column(String(16), default="proxy")
    started_ns: Mapped[int] = mapped_column(BigInteger, index=True)
    ended_ns: Mapped[int | None] = mapped_column(BigInteger)
    last_seen_ns: Mapped[int | None] = mapped_column(BigInteger)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    signal: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    cli_session_id: Mapped[str | None] = mapped_column(String(64), index=True)
    claude_code_version: Mapped[str | None] = mapped_column(String(40))
    model: Mapped[str | None] = mapped_column(String(100))
    permission_mode: Mapped[str | None] = mapped_column(String(40))
    # Summary, kept up to date while recording (see claudetrace.model.summary).
    event_count: Mapped[int] = mapped_column(Integer, default=0)
    byte_count: Mapped[int] = mapped_column(BigInteger, default=0)
    turns: Mapped[int] = mapped_column(Integer, default=0)
    #: The CLI's own ``num_turns`` summed over its results (API round trips).
    num_turns: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    model_calls: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    tool_calls: Mapped[int] = mapped_column(Integer, default=0)
    tool_errors: Mapped[int] = mapped_column(Integer, default=0)
    input_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    output_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cache_read_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cache_creation_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    #: Where ``cost_usd`` comes from: ``cli``, ``estimate`` (the price table) or
    #: ``unknown`` (``cost_usd`` then 0 and shown as no figure); see
    #: :meth:`claudetrace.model.Session.cost`.
    cost_source: Mapped[str | None] = mapped_column(String(16))
    is_error: Mapped[bool] = mapped_column(Boolean, default=False)
    result_subtype: Mapped[str | None] = mapped_column(String(64))
    #: Per model: tokens by type, ``cost_usd`` and ``calls`` (see claudetrace.model.summary).
    models: Mapped[dict[str, dict[str, Any]] | None] = mapped_column(JSON)
    #: The session model's status once the recording ended, and why.
    outcome: Mapped[str | None] = mapped_column(String(16))
    outcome_reason: Mapped[str | None] = mapped_column(Text)
    #: Bytes forwarded but not recorded (a full disk), with the pieces of lines such
    #: a gap cut, which are not stored: a recording that lost any is ``incomplete``.
    lost_bytes: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    #: The Prometheus figures, stored when the recording ended: summed by label set
    #: and bucket (:func:`claudetrace.model.summary.figure_sums`), or one record a
    #: tool call and control round trip as stored before the sums
    #: (:func:`~claudetrace.model.summary.figure_records`); None: not stored.
    figures: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    extra: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    #: The Stats page's latency samples of the ended recording,
    #: ``{"events": N, "samples": {category: [ms, …]}}``, folded from its first
    #: ``N`` lines as they were stored (the indexer, an import:
    #: :class:`claudetrace.telemetry.latency.LatencyFold`), else by ``db pack``
    #: or the page's first look (:func:`~claudetrace.telemetry.latency.recent_latencies`);
    #: None: not folded yet.  Deferred: no listing reads it.
    latencies: Mapped[dict[str, Any] | None] = mapped_column(JSON, deferred=True)
    if TYPE_CHECKING:
        #: Stored usage first, not folded yet (set below, once :class:`Unfolded` is).
        indexing: Mapped[bool]

    @property
    def status(self) -> str:
        """The session model's status (:data:`claudetrace.model.STATUSES`).

        An ended recording has it stored; one that has not ended is ``running``
        while its proxy lives, else ``incomplete``.
        """
        if self.ended_ns is None:
            return "running" if self.is_live() else "incomplete"
        return self.outcome or "ok"

    @property
    def status_reason(self) -> str:
        """Why the recording has its :attr:`status` (empty for ``ok`` and ``running``)."""
        if self.ended_ns is None:
            return "" if self.is_live() else unended_reason(self.source)
        return self.outcome_reason or ""

    @property
    def cost_origin(self) -> str:
        """Where :attr:`cost_usd` comes from: ``cli``, ``estimate`` or ``unknown`` (the
        ``cost_source`` column; a row not summarised yet is unknown unless it has a cost)."""
        if self.cost_source == "estimate" and not self.model_calls:
            return "unknown"  # summarised by an earlier build: no call, no cost
        if self.cost_source:
            return self.cost_source
        return "cli" if self.cost_usd else "unknown"

    @property
    def cost(self) -> float | None:
        """The session's cost in USD, None when unknown (never 0 for unknown)."""
        return None if self.cost_origin == "unknown" else float(self.cost_usd or 0.0)

    @property
    def warnings(self) -> list[str]:
        """What went wrong around the recording (live telemetry's export, a sink the
        indexer disabled), as the indexer stored it in ``extra["warnings"]``."""
        return [str(w) for w in (self.extra or {}).get("warnings") or ()]

    def is_live(self, now_ns: int | None = None) -> bool:
        """True while a proxy is still recording this session."""
        if self.ended_ns is not None:
            return False
        return recorder_alive(host=self.host, pid=self.pid, source=self.source,
                              last_seen_ns=self.last_seen_ns, started_ns=self.started_ns,
                              now_ns=now_ns)

    def still_written(self, now_ns: int | None = None) -> bool:
        """True while it may still get lines: :meth:`is_live`, or its proxy lives on
        this host though its heartbeat is late (:func:`~claudetrace.recording.still_written`)."""
        if self.ended_ns is not None:
            return False
        return still_written(host=self.host, pid=self.pid, source=self.source,
                             last_seen_ns=self.last_seen_ns, started_ns=self.started_ns,
                             now_ns=now_ns)

    def being_imported(self) -> bool:
        """True while an import (another live process, ``extra["importer"]``,
        :func:`~claudetrace.recording.importing_elsewhere`) is still writing this
        recording: no end yet, more events to come."""
        if self.ended_ns is not None:
            return False
        return importing_elsewhere((self.extra or {}).get("importer")) is not None

    @property
    def duration_ns(self) -> int | None:
        end = self.ended_ns or self.last_seen_ns
        return None if end is None else max(0, end - self.started_ns)

    def info(self) -> RecordingInfo:
        """The storage-free description of this recording."""
        return RecordingInfo(
            id=self.id,
            argv=list(self.argv or []),
            started_ns=self.started_ns,
            cwd=self.cwd,
            host=self.host,
            pid=self.pid,
            name=self.name,
            tags=dict(self.tags or {}),
            env=dict(self.env or {}),
            claudetrace_version=self.claudetrace_version,
            source=self.source,
            ended_ns=self.ended_ns,
            exit_code=self.exit_code,
            signal=self.signal,
            error=self.error,
            cli_session_id=self.cli_session_id,
            claude_code_version=self.claude_code_version,
            model=self.model,
            permission_mode=self.permission_mode,
            extra=dict(self.extra or {}),
            lost_bytes=self.lost_bytes or 0,
        )


def status_expression(now_ns: int) -> Any:
    """:attr:`Recording.status` in SQL (for ``GROUP BY``), minus its same-host pid
    check: ``running`` covers every recording that check may find running (a
    proxy of this host's whose heartbeat is only late too), and callers apply it
    to those few."""
    r = Recording
    heartbeat = func.coalesce(r.last_seen_ns, r.started_ns)
    here = and_(r.host == os.uname().nodename, r.source == "proxy", r.pid.is_not(None),
                heartbeat > now_ns - LATE_AFTER_NS)
    return case(
        (and_(r.ended_ns.is_(None), or_(heartbeat > now_ns - STALE_AFTER_NS, here)),
         literal("running")),
        (r.ended_ns.is_(None), literal("incomplete")),
        else_=func.coalesce(r.outcome, literal("ok")),
    )


#: The line type left out of the ``(rec, type)`` index: streaming deltas,
#: most of the lines of a session, which no query looks up by type.
UNINDEXED_TYPE = "stream_event"


class EventRow(Base):
    """One line of one stream (see :class:`claudetrace.model.events.Event`)."""

    __tablename__ = "events"

    #: The recording's :attr:`Recording.num` (migration 0020_recnum).
    rec: Mapped[int] = mapped_column(
        Integer, ForeignKey("recordings.num", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    direction: Mapped[str] = mapped_column(String(3))
    t_ns: Mapped[int] = mapped_column(BigInteger)
    wall_ns: Mapped[int] = mapped_column(BigInteger)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    eol: Mapped[bool] = mapped_column(Boolean, default=True)
    size: Mapped[int] = mapped_column(Integer)
    is_json: Mapped[bool] = mapped_column(Boolean)
    type: Mapped[str | None] = mapped_column(String(64))
    subtype: Mapped[str | None] = mapped_column(String(64))
    request_id: Mapped[str | None] = mapped_column(String(128))
    # The line's own uuid and session_id are not kept apart (migration 0009_footprint):
    # no query reads them, and the line holds them.
    parent_tool_use_id: Mapped[str | None] = mapped_column(String(128))
    #: How ``data`` is held (migration 0012_footprint2): NULL as recorded, else as
    #: :mod:`claudetrace.store.packing` packed it once the recording ended; every
    #: reader goes through :meth:`claudetrace.store.Store.unpacker`.
    codec: Mapped[int | None] = mapped_column(SmallInteger)

    # Sparse indexes (migration 0004): a line goes into an index only when a
    # query may look it up there, so most lines (stream events) cost the
    # primary key alone.
    __table_args__ = (
        Index("ix_events_recording_type", "rec", "type",
              sqlite_where=text(f"type <> '{UNINDEXED_TYPE}'"),
              postgresql_where=text(f"type <> '{UNINDEXED_TYPE}'")),
    )


def number_of(recording_id: Any) -> Any:
    """The number (:attr:`Recording.num`) of the recording whose id is
    ``recording_id`` (a value or a column), as a subquery: what a statement
    compares ``events.rec``, ``event_tools.rec`` with (:mod:`.keys`)."""
    return select(Recording.num).where(Recording.id == recording_id).scalar_subquery()


def numbers_of(recording_ids: Sequence[str]) -> Any:
    """The numbers of the recordings ``recording_ids`` names, as a subquery for ``IN``."""
    return select(Recording.num).where(Recording.id.in_(list(recording_ids)))


def type_in(types: Sequence[str]) -> ColumnElement[bool]:
    """``events.type IN types``, in a form that can use ``ix_events_recording_type``:
    for types other than :data:`UNINDEXED_TYPE` the condition the index is built
    on is said too, as both engines need to see it to use a partial index."""
    column = EventRow.__table__.c.type
    wanted = list(types)
    if UNINDEXED_TYPE in wanted:
        return column.in_(wanted)
    return and_(column.in_(wanted), column != literal_column(f"'{UNINDEXED_TYPE}'"))


class LineDictionary(Base):
    """A preset dictionary the lines of ended recordings are packed against
    (:mod:`claudetrace.store.packing`); stored once, never changed: its ``id`` is
    the ``events.codec`` of the rows packed with it."""

    __tablename__ = "line_dictionaries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_ns: Mapped[int] = mapped_column(BigInteger)


class UsageCall(Base):
    """One model call's tokens and cost, at its time: what ``claudetrace usage`` adds up.

    Written with a recording's summary (:func:`claudetrace.model.summary.usage_rows`),
    a row per API message id (its last usage), so reports read neither events nor
    JSON.  ``t_ns`` is Unix time; ``cost_usd`` is None where ``cost_source`` is
    ``unknown``; a ``cli`` cost is the CLI's cost of the call's turn and model,
    shared among its calls.
    """

    __tablename__ = "usage_calls"

    recording_id: Mapped[str] = mapped_column(
        String(26), ForeignKey("recordings.id", ondelete="CASCADE"), primary_key=True
    )
    call_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    t_ns: Mapped[int] = mapped_column(BigInteger, index=True)
    model: Mapped[str] = mapped_column(String(100))
    input_tokens: Mapped[int] = mapped_column(BigInteger)
    output_tokens: Mapped[int] = mapped_column(BigInteger)
    cache_read_tokens: Mapped[int] = mapped_column(BigInteger)
    cache_creation_tokens: Mapped[int] = mapped_column(BigInteger)
    cost_usd: Mapped[float | None] = mapped_column(Float)
    cost_source: Mapped[str] = mapped_column(String(16))
    #: The part of ``cache_creation_tokens`` written to the 1-hour cache (priced
    #: at its own rate); 0 in rows stored before migration 0017.
    cache_creation_1h_tokens: Mapped[int] = mapped_column(BigInteger, default=0,
                                                          server_default="0")
    #: Another recording holds the same API message (a resumed session's transcript
    #: repeats its history; a proxied session imported from its transcript too):
    #: counted once, where it was stored first (ccusage's rule).
    duplicate: Mapped[bool] = mapped_column(Boolean, default=False)

    __table_args__ = (Index("ix_usage_calls_call_id", "call_id"),)


class UsageHour(Base):
    """A recording's calls of one hour (UTC), model and cost source, summed: what
    reports read (:mod:`claudetrace.store.usage`) instead of every call.

    Made again from ``usage_calls`` whenever a recording's calls are written
    (:func:`claudetrace.store.rows.rollup_statements`); duplicates left out.
    ``on_hour``: the calls at the very start of the hour, summed apart (a 5-hour
    block may end at that instant).  ``cost_usd`` is None when no call has a cost.
    """

    __tablename__ = "usage_hours"

    recording_id: Mapped[str] = mapped_column(
        String(26), ForeignKey("recordings.id", ondelete="CASCADE"), primary_key=True
    )
    hour_ns: Mapped[int] = mapped_column(BigInteger, primary_key=True, index=True)
    on_hour: Mapped[bool] = mapped_column(Boolean, primary_key=True)
    model: Mapped[str] = mapped_column(String(100), primary_key=True)
    cost_source: Mapped[str] = mapped_column(String(16), primary_key=True)
    input_tokens: Mapped[int] = mapped_column(BigInteger)
    output_tokens: Mapped[int] = mapped_column(BigInteger)
    cache_read_tokens: Mapped[int] = mapped_column(BigInteger)
    cache_creation_tokens: Mapped[int] = mapped_column(BigInteger)
    cost_usd: Mapped[float | None] = mapped_column(Float)
    calls: Mapped[int] = mapped_column(BigInteger)
    first_ns: Mapped[int] = mapped_column(BigInteger)
    last_ns: Mapped[int] = mapped_column(BigInteger)


class UsageModel(Base):
    """A recording's calls of one model, summed: what the session report, the
    session list and the HTML report read (:mod:`claudetrace.store.usage`), a row
    per recording and model.

    Made again from ``usage_calls`` with ``usage_hours``
    (:func:`claudetrace.store.rows.rollup_statements`); duplicates left out.
    ``sources``: the calls' cost sources, a bit mask
    (:data:`claudetrace.store.rows.COST_SOURCES`); ``estimated_usd``: the price
    table's part of ``cost_usd`` (None when no call has a cost).
    """

    __tablename__ = "usage_models"

    recording_id: Mapped[str] = mapped_column(
        String(26), ForeignKey("recordings.id", ondelete="CASCADE"), primary_key=True
    )
    model: Mapped[str] = mapped_column(String(100), primary_key=True)
    input_tokens: Mapped[int] = mapped_column(BigInteger)
    output_tokens: Mapped[int] = mapped_column(BigInteger)
    cache_read_tokens: Mapped[int] = mapped_column(BigInteger)
    cache_creation_tokens: Mapped[int] = mapped_column(BigInteger)
    cost_usd: Mapped[float | None] = mapped_column(Float)
    estimated_usd: Mapped[float] = mapped_column(Float)
    sources: Mapped[int] = mapped_column(Integer)
    calls: Mapped[int] = mapped_column(BigInteger)
    first_ns: Mapped[int] = mapped_column(BigInteger)
    last_ns: Mapped[int] = mapped_column(BigInteger)


class EventTool(Base):
    """A tool use id mentioned by an event (see :class:`claudetrace.model.events.ToolRef`)."""

    __tablename__ = "event_tools"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    #: The recording's :attr:`Recording.num` (migration 0020_recnum).
    rec: Mapped[int] = mapped_column(Integer, ForeignKey("recordings.num", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    tool_use_id: Mapped[str] = mapped_column(String(128), index=True)
    tool_name: Mapped[str | None] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(16))

    __table_args__ = (Index("ix_event_tools_recording_seq", "rec", "seq"),)


class Unfolded(Base):
    """A recording an import stored usage first (its exact lines, its row, its
    usage rows), whose session is not folded yet (migration 0022_unfolded):
    :mod:`claudetrace.formats.unfolded` folds it and deletes this row in one
    transaction.  ``layout`` says which of its lines make up which file."""

    __tablename__ = "unfolded"

    #: The recording's :attr:`Recording.num`.
    rec: Mapped[int] = mapped_column(
        Integer, ForeignKey("recordings.num", ondelete="CASCADE"), primary_key=True,
        autoincrement=False)
    layout: Mapped[dict[str, Any]] = mapped_column(JSON)
    stored_ns: Mapped[int] = mapped_column(BigInteger)


#: Whether the recording is stored usage first and not folded yet (its turns and
#: tool calls not known yet): read by the query that reads the recording (a
#: correlated EXISTS on :class:`Unfolded`'s key), never a look-up of its own.
Recording.indexing = column_property(
    exists().where(Unfolded.rec == Recording.num))
