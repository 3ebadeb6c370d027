"""Tables, indexes and the schema version, for SQLite and PostgreSQL.

The schema is a versioned contract: `SCHEMA_VERSION` names the shape this code writes,
`durable_meta` records the shape a database has, and `MIGRATIONS[n]` moves a database
from version n to n+1. A database newer than the code is refused, never written to.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.schema import CreateIndex, CreateTable

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

#: The schema version this code reads and writes.
SCHEMA_VERSION = 1

Execute = Callable[[str], None]


def _create_v1(dialect: sa.Dialect, execute: Execute) -> None:
    for table in (runs, history, meta):
        execute(str(CreateTable(table, if_not_exists=True).compile(dialect=dialect)))
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            execute(str(CreateIndex(index, if_not_exists=True).compile(dialect=dialect)))


#: MIGRATIONS[n] upgrades a database at version n to n + 1.
MIGRATIONS: list[Callable[[sa.Dialect, Execute], None]] = [_create_v1]

assert len(MIGRATIONS) == SCHEMA_VERSION
