"""Tables, indexes and the schema version, for SQLite and PostgreSQL.

The schema is a versioned contract: `SCHEMA_VERSION` names the shape this code writes,
`durable_meta` records the shape a database has. A new database is created at the
current shape (`create`); an older one is moved up one version at a time by
`MIGRATIONS[n]` (n to n+1). A database newer than the code is refused, never written to.
tests/backends/test_migrations.py checks that migrating gives what creating gives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.schema import CreateColumn, CreateIndex, CreateTable

from durable.errors import ConfigurationError

if TYPE_CHECKING:
    from ._connections import Connections

metadata = sa.MetaData()

runs = sa.Table(
    "durable_runs",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("workflow", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("input", sa.LargeBinary, nullable=False),
    sa.Column("call_hash", sa.Text, nullable=False),
    sa.Column("output", sa.LargeBinary),
    sa.Column("error", sa.LargeBinary),
    sa.Column("epoch", sa.Integer, nullable=False),
    sa.Column("lease_owner", sa.Text),
    sa.Column("lease_until", sa.Double),
    sa.Column("recoveries", sa.Integer, nullable=False),
    sa.Column("parent_id", sa.Text),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("updated_at", sa.Double, nullable=False),
    sa.Column("finished_at", sa.Double),
    # Added in version 2 (workers):
    sa.Column("queue", sa.Text, nullable=False, server_default="default"),
    sa.Column("priority", sa.Integer, nullable=False, server_default="0"),
    sa.Column("started_at", sa.Double),
    sa.Column("cancel_requested", sa.Integer, nullable=False, server_default="0"),
    # recover() and the lease sweep look for RUNNING runs by lease expiry.
    sa.Index("durable_runs_status_lease", "status", "lease_until"),
    sa.Index("durable_runs_parent", "parent_id"),
    sa.Index("durable_runs_created", "created_at"),
    # Rows live in the primary-key b-tree: one b-tree fewer to write per commit.
    sqlite_with_rowid=False,
)

history = sa.Table(
    "durable_history",
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("position", sa.Integer, primary_key=True),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("call_hash", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("input", sa.LargeBinary),
    sa.Column("output", sa.LargeBinary),
    sa.Column("error", sa.LargeBinary),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("started_at", sa.Double),
    sa.Column("finished_at", sa.Double),
    sa.Column("epoch", sa.Integer, nullable=False),
    sqlite_with_rowid=False,
)

meta = sa.Table(
    "durable_meta",
    metadata,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

_QUEUED = sa.text("status = 'queued'")

# Workers claim the oldest, most urgent queued runs of their queues.
_claim_index = sa.Index(
    "durable_runs_claim",
    runs.c.queue,
    runs.c.priority.desc(),
    runs.c.created_at,
    sqlite_where=_QUEUED,
    postgresql_where=_QUEUED,
)

#: The schema version this code reads and writes.
SCHEMA_VERSION = 2

Execute = Callable[[str], None]


def create(dialect: sa.Dialect, execute: Execute) -> None:
    """Create every table and index at the current version (a new database)."""
    for table in (runs, history, meta):
        execute(str(CreateTable(table, if_not_exists=True).compile(dialect=dialect)))
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            execute(str(CreateIndex(index, if_not_exists=True).compile(dialect=dialect)))


def _v1_to_v2(dialect: sa.Dialect, execute: Execute) -> None:
    """Workers: queues, priorities, start times and cancellation requests."""
    for name in ("queue", "priority", "started_at", "cancel_requested"):
        column = CreateColumn(runs.c[name]).compile(dialect=dialect)
        execute(f"ALTER TABLE durable_runs ADD COLUMN {column}")
    execute(str(CreateIndex(_claim_index, if_not_exists=True).compile(dialect=dialect)))


#: MIGRATIONS[n] upgrades a database at version n to n + 1.
MIGRATIONS: dict[int, Callable[[sa.Dialect, Execute], None]] = {1: _v1_to_v2}

assert sorted(MIGRATIONS) == list(range(1, SCHEMA_VERSION))


def _version(conn: Any, dialect: sa.Dialect) -> int:
    if dialect.name == "sqlite":
        found = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'durable_meta'"
        ).fetchone()
    else:
        found = conn.execute("SELECT to_regclass('durable_meta')").fetchone()[0]
    if not found:
        return 0
    row = conn.execute("SELECT value FROM durable_meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: Any, db: Connections, dialect: sa.Dialect) -> None:
    """Bring the database on *conn* to SCHEMA_VERSION: create it, or migrate it up.

    Raises:
        ConfigurationError: the database is newer than this code; nothing is changed.
    """
    if _version(conn, dialect) == SCHEMA_VERSION:
        return
    with db.transaction(conn):
        if dialect.name == "postgresql":
            # Serialize concurrent first starts; CREATE IF NOT EXISTS alone races.
            conn.execute("SELECT pg_advisory_xact_lock(727274)")
        version = _version(conn, dialect)
        if version > SCHEMA_VERSION:
            raise ConfigurationError(
                f"The database at {db.masked_url} has durable schema version {version}, newer "
                f"than this code understands ({SCHEMA_VERSION}). Upgrade durable before using "
                "this database."
            )
        if version == 0:
            create(dialect, conn.execute)
        else:
            for step in range(version, SCHEMA_VERSION):
                MIGRATIONS[step](dialect, conn.execute)
        conn.execute("DELETE FROM durable_meta WHERE key = 'schema_version'")
        conn.execute(
            f"INSERT INTO durable_meta (key, value) VALUES ('schema_version', '{SCHEMA_VERSION}')"
        )
