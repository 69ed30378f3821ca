"""A recording's rows are keyed by its number, not its id: the store under its lines' bytes

Revision ID: 0020_recnum
Revises: 0019_pgwords
Create Date: 2026-11-29 16:30:00

``recordings`` gets ``num``, a 4-byte number given at insert and unique (an
identity on PostgreSQL; on SQLite a trigger gives the next one, under the
write lock), numbered here in the order of the ids (their start times).
``events``, ``event_tools`` and PostgreSQL's ``event_search`` hold it (``rec``)
in place of the 26-character id, in every row and key: on ``bench store``'s
1M-event store on PostgreSQL the store went from 1.19x its lines' bytes to
0.89x (docs/benchmarks.md).  Each table is written again, in the order
of its new key, and the old one dropped (the tables are locked meanwhile:
about 50 s a million events on PostgreSQL); rows whose recording is gone
(PostgreSQL's ``events`` has had no foreign key since 0005) are left out.
SQLite's ``events`` keep their rowids, which its search index (FTS5) holds.
The downgrade writes the ids back.
"""

from __future__ import annotations

from alembic import op

revision = "0020_recnum"
down_revision = "0019_pgwords"
branch_labels = None
depends_on = None

#: ``events``' columns after its key, in their order.
_EVENT_COLUMNS = ("seq, direction, t_ns, wall_ns, data, eol, size, is_json, type, subtype, "
                  "request_id, parent_tool_use_id, codec")
_TOOL_COLUMNS = "seq, tool_use_id, tool_name, kind"
_SEARCHED = "'assistant', 'result', 'user'"


def _each(alias: str, columns: str) -> str:
    """``columns`` (a list as SQL) each named as ``alias``'s."""
    return ", ".join(f"{alias}.{c}" for c in columns.split(", "))


def _sqlite_events(key: str) -> str:
    reference = ("rec INTEGER NOT NULL", "rec", "num", "fk_events_rec_recordings") \
        if key == "rec" else ("recording_id VARCHAR(26) NOT NULL", "recording_id", "id",
                              "fk_events_recording_id_recordings")
    column, name, parent, fk = reference
    return f"""
CREATE TABLE events_new (
    {column},
    seq INTEGER NOT NULL,
    direction VARCHAR(3) NOT NULL,
    t_ns BIGINT NOT NULL,
    wall_ns BIGINT NOT NULL,
    data BLOB NOT NULL,
    eol BOOLEAN NOT NULL,
    size INTEGER NOT NULL,
    is_json BOOLEAN NOT NULL,
    type VARCHAR(64),
    subtype VARCHAR(64),
    request_id VARCHAR(128),
    parent_tool_use_id VARCHAR(128),
    codec SMALLINT,
    CONSTRAINT pk_events PRIMARY KEY ({name}, seq),
    CONSTRAINT {fk} FOREIGN KEY({name}) REFERENCES recordings ({parent}) ON DELETE CASCADE
)"""


def _sqlite_tools(key: str) -> str:
    column, name, parent, fk = (
        ("rec INTEGER NOT NULL", "rec", "num", "fk_event_tools_rec_recordings")
        if key == "rec" else ("recording_id VARCHAR(26) NOT NULL", "recording_id", "id",
                              "fk_event_tools_recording_id_recordings"))
    return f"""
CREATE TABLE event_tools_new (
    id INTEGER NOT NULL,
    {column},
    seq INTEGER NOT NULL,
    tool_use_id VARCHAR(128) NOT NULL,
    tool_name VARCHAR(200),
    kind VARCHAR(16) NOT NULL,
    CONSTRAINT pk_event_tools PRIMARY KEY (id),
    CONSTRAINT {fk} FOREIGN KEY({name}) REFERENCES recordings ({parent}) ON DELETE CASCADE
)"""


def _sqlite_triggers(key: str) -> tuple[str, ...]:
    """The triggers on ``events`` and ``recordings`` (0006, 0007), keyed by ``key``."""
    parent = "num" if key == "rec" else "id"
    return (f"""
CREATE TRIGGER events_delete_search AFTER DELETE ON events
WHEN OLD.type IN ({_SEARCHED})
BEGIN
    DELETE FROM event_search WHERE rowid = OLD.rowid;
END""", f"""
CREATE TRIGGER recordings_delete_children AFTER DELETE ON recordings
BEGIN
    DELETE FROM event_tools WHERE {key} = OLD.{parent};
    DELETE FROM events WHERE {key} = OLD.{parent};
    DELETE FROM usage_calls WHERE recording_id = OLD.id;
    DELETE FROM usage_hours WHERE recording_id = OLD.id;
    DELETE FROM usage_models WHERE recording_id = OLD.id;
END""")


#: SQLite: the next number under the write lock (a row inserted without one).
_SQLITE_NUMBER = """
CREATE TRIGGER recordings_number AFTER INSERT ON recordings WHEN NEW.num IS NULL
BEGIN
    UPDATE recordings SET num = (SELECT coalesce(max(num), 0) + 1 FROM recordings)
        WHERE rowid = NEW.rowid;
END"""


def _sqlite(key: str) -> None:
    """Write SQLite's ``events`` and ``event_tools`` again keyed by ``key``
    (``rec`` up, ``recording_id`` down), each event under its rowid."""
    mapped, joined = (("r.num", "r.id = x.recording_id") if key == "rec"
                      else ("r.id", "r.num = x.rec"))
    op.execute("DROP TRIGGER recordings_delete_children")
    op.execute("DROP TRIGGER events_delete_search")
    op.execute("DROP INDEX ix_events_recording_type")
    op.execute("DROP INDEX ix_event_tools_recording_seq")
    op.execute(_sqlite_events(key))
    op.execute(f"INSERT INTO events_new (rowid, {key}, {_EVENT_COLUMNS}) "
               f"SELECT x.rowid, {mapped}, {_each('x', _EVENT_COLUMNS)} "
               f"FROM events x JOIN recordings r ON {joined} ORDER BY {mapped}, x.seq")
    op.execute(_sqlite_tools(key))
    op.execute(f"INSERT INTO event_tools_new (id, {key}, {_TOOL_COLUMNS}) "
               f"SELECT x.id, {mapped}, {_each('x', _TOOL_COLUMNS)} "
               f"FROM event_tools x JOIN recordings r ON {joined} ORDER BY x.id")
    op.execute("DROP TABLE events")
    op.execute("ALTER TABLE events_new RENAME TO events")
    op.execute("DROP TABLE event_tools")
    op.execute("ALTER TABLE event_tools_new RENAME TO event_tools")
    op.execute(f"CREATE INDEX ix_events_recording_type ON events ({key}, type) "
               "WHERE type <> 'stream_event'")
    op.execute(f"CREATE INDEX ix_event_tools_recording_seq ON event_tools ({key}, seq)")
    op.execute("CREATE INDEX ix_event_tools_tool_use_id ON event_tools (tool_use_id)")
    for statement in _sqlite_triggers(key):
        op.execute(statement)


def _pg_children(key: str) -> str:
    parent = "num" if key == "rec" else "id"
    deletes = "\n".join(
        f"    DELETE FROM {table} USING deleted_recordings\n"
        f"        WHERE {table}.{column} = deleted_recordings.{ref};"
        for table, column, ref in (
            ("event_search", key, parent), ("event_tools", key, parent), ("events", key, parent),
            ("usage_calls", "recording_id", "id"), ("usage_hours", "recording_id", "id"),
            ("usage_models", "recording_id", "id")))
    return ("CREATE OR REPLACE FUNCTION claudetrace_delete_children() RETURNS trigger "
            f"LANGUAGE plpgsql AS $$\nBEGIN\n{deletes}\n    RETURN NULL;\nEND $$")


def _has_lz4() -> bool:
    found = op.get_bind().exec_driver_sql(
        "SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression'"
        " AND 'lz4' = ANY(enumvals)").first()
    return found is not None


def _postgres(key: str) -> None:
    """Write PostgreSQL's ``events``, ``event_tools`` and ``event_search`` again keyed
    by ``key`` (``rec`` up, ``recording_id`` down), in the order of the new key."""
    kind = "integer" if key == "rec" else "varchar(26)"
    mapped, joined = (("r.num", "r.id = x.recording_id") if key == "rec"
                      else ("r.id", "r.num = x.rec"))
    lz4 = _has_lz4()
    op.execute(f"""
CREATE TABLE events_new (
    {key} {kind} NOT NULL,
    seq integer NOT NULL,
    direction varchar(3) NOT NULL,
    t_ns bigint NOT NULL,
    wall_ns bigint NOT NULL,
    data bytea NOT NULL,
    eol boolean NOT NULL,
    size integer NOT NULL,
    is_json boolean NOT NULL,
    type varchar(64),
    subtype varchar(64),
    request_id varchar(128),
    parent_tool_use_id varchar(128),
    codec smallint
)""")
    op.execute(f"""
CREATE TABLE event_search_new ({key} {kind} NOT NULL, seq integer NOT NULL,
                               terms tsvector NOT NULL)""")
    op.execute(f"""
CREATE TABLE event_tools_new (
    id bigint NOT NULL,
    {key} {kind} NOT NULL,
    seq integer NOT NULL,
    tool_use_id varchar(128) NOT NULL,
    tool_name varchar(200),
    kind varchar(16) NOT NULL
)""")
    if lz4:
        op.execute("ALTER TABLE events_new ALTER COLUMN data SET COMPRESSION lz4")
        op.execute("ALTER TABLE event_search_new ALTER COLUMN terms SET COMPRESSION lz4")
    op.execute(f"INSERT INTO events_new ({key}, {_EVENT_COLUMNS}) "
               f"SELECT {mapped}, {_each('x', _EVENT_COLUMNS)} "
               f"FROM events x JOIN recordings r ON {joined} ORDER BY {mapped}, x.seq")
    op.execute(f"INSERT INTO event_search_new ({key}, seq, terms) SELECT {mapped}, x.seq, "
               f"x.terms FROM event_search x JOIN recordings r ON {joined} "
               f"ORDER BY {mapped}, x.seq")
    op.execute(f"INSERT INTO event_tools_new (id, {key}, {_TOOL_COLUMNS}) SELECT x.id, "
               f"{mapped}, {_each('x', _TOOL_COLUMNS)} FROM event_tools x "
               f"JOIN recordings r ON {joined} ORDER BY x.id")
    op.execute("ALTER SEQUENCE event_tools_id_seq OWNED BY NONE")
    op.execute("DROP TABLE events, event_search, event_tools")
    for table in ("events", "event_search", "event_tools"):
        op.execute(f"ALTER TABLE {table}_new RENAME TO {table}")
    op.execute("ALTER SEQUENCE event_tools_id_seq OWNED BY event_tools.id")
    op.execute("ALTER TABLE event_tools ALTER COLUMN id "
               "SET DEFAULT nextval('event_tools_id_seq'::regclass)")
    op.execute(f"ALTER TABLE events ADD CONSTRAINT pk_events PRIMARY KEY ({key}, seq)")
    op.execute(f"ALTER TABLE event_search ADD CONSTRAINT pk_event_search PRIMARY KEY ({key}, seq)")
    op.execute("ALTER TABLE event_tools ADD CONSTRAINT pk_event_tools PRIMARY KEY (id)")
    op.execute(f"CREATE INDEX ix_events_recording_type ON events ({key}, type) "
               "WHERE type <> 'stream_event'")
    op.execute("CREATE INDEX ix_event_search_terms ON event_search USING gin (terms) "
               "WITH (gin_pending_list_limit = 256)")
    op.execute(f"CREATE INDEX ix_event_tools_recording_seq ON event_tools ({key}, seq)")
    op.execute("CREATE INDEX ix_event_tools_tool_use_id ON event_tools (tool_use_id)")
    # As before, no foreign key (0005): the statement trigger deletes a
    # recording's rows.
    op.execute(_pg_children(key))


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.execute("ALTER TABLE recordings ADD COLUMN num INTEGER")
    if postgres:
        op.execute("UPDATE recordings SET num = o.n FROM (SELECT id, row_number() OVER "
                   "(ORDER BY id) AS n FROM recordings) o WHERE o.id = recordings.id")
    else:
        op.execute("UPDATE recordings SET num = (SELECT count(*) FROM recordings o "
                   "WHERE o.id <= recordings.id)")
    op.execute("CREATE UNIQUE INDEX uq_recordings_num ON recordings (num)")
    if postgres:
        op.execute("ALTER TABLE recordings ALTER COLUMN num SET NOT NULL")
        op.execute("ALTER TABLE recordings ALTER COLUMN num ADD GENERATED BY DEFAULT AS IDENTITY")
        op.execute("SELECT setval(pg_get_serial_sequence('recordings', 'num'), "
                   "coalesce(max(num), 0) + 1, false) FROM recordings")
        _postgres("rec")
    else:
        op.execute(_SQLITE_NUMBER)
        _sqlite("rec")


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        _postgres("recording_id")
        op.execute("DROP INDEX uq_recordings_num")
        op.execute("ALTER TABLE recordings DROP COLUMN num")
    else:
        from claudetrace.store.engine import require_drop_column

        require_drop_column(op.get_bind(), revision)
        _sqlite("recording_id")
        op.execute("DROP TRIGGER recordings_number")
        op.execute("DROP INDEX uq_recordings_num")
        op.execute("ALTER TABLE recordings DROP COLUMN num")
