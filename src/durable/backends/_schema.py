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
    # Added in version 3 (time and events):
    sa.Column("wake_at", sa.Double),
    sa.Column("waiting_on", sa.Text),
    # Added in version 8: when the run must have ended (its timeout after creation).
    sa.Column("deadline_at", sa.Double),
    # Added in version 9: the properties a run's code published as it ended (JSON).
    sa.Column("state", sa.LargeBinary),
    # recover() and the lease sweep look for RUNNING runs by lease expiry.
    sa.Index("durable_runs_status_lease", "status", "lease_until"),
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
    # Added in version 3: a WAITING step's deadline, a RETRYING one's next attempt.
    sa.Column("wake_at", sa.Double),
    # Added in version 7: a RUNNING task attempt's last heartbeat, and the details the
    # task last gave it (kept across attempts, for `durable.last_heartbeat()`).
    sa.Column("heartbeat_at", sa.Double),
    sa.Column("details", sa.LargeBinary),
    # Added in version 9: the properties snapshot taken where this step ended a stretch
    # of workflow code that changed them (JSON; for readers, not for replay).
    sa.Column("state", sa.LargeBinary),
    sqlite_with_rowid=False,
)

# Version 3: each run's inbox. Events wait here until a wait consumes them, oldest
# first (by id: sends to one run are serialized on its row, so ids follow sends).
events = sa.Table(
    "durable_events",
    metadata,
    sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer, "sqlite"),  # SQLite: a rowid alias
        primary_key=True,
        autoincrement=True,
    ),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("payload", sa.LargeBinary, nullable=False),
    sa.Column("sent_at", sa.Double, nullable=False),
    sa.Column("sender", sa.Text),
    sa.Column("key", sa.Text),
    sa.Column("consumed_position", sa.Integer),
    sa.Column("consumed_at", sa.Double),
)


def _serial_id() -> sa.Column[int]:
    """An autoincrementing primary key (a rowid alias on SQLite)."""
    return sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    )


# Version 4: what operators did to runs (CLI, API, dashboard): who, what, when.
actions = sa.Table(
    "durable_actions",
    metadata,
    _serial_id(),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("action", sa.Text, nullable=False),
    sa.Column("actor", sa.Text),
    sa.Column("at", sa.Double, nullable=False),
    sa.Column("detail", sa.Text, nullable=False),
    sa.Index("durable_actions_run", "run_id", "id"),
)

# Version 6: outcomes an operator's retry erased (a run's failure, its failed task
# calls), kept for statistics: the history keeps only the latest attempt at a position.
attempts = sa.Table(
    "durable_attempts",
    metadata,
    _serial_id(),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),  # "run" or "task"
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("workflow", sa.Text, nullable=False),  # the run's workflow
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("started_at", sa.Double),
    sa.Column("finished_at", sa.Double),
    sa.Index("durable_attempts_run", "run_id"),
    sa.Index("durable_attempts_started", "kind", "started_at"),
)

# Version 10: schedules, a workflow run on a cron expression or at a fixed interval
# (`durable.core.schedules.Schedule`). Booleans are 0 or 1.
_LIVE_SCHEDULE = sa.text("paused = 0 AND orphaned = 0")
schedules = sa.Table(
    "durable_schedules",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("workflow", sa.Text, nullable=False),
    sa.Column("input", sa.LargeBinary, nullable=False),
    sa.Column("call_hash", sa.Text, nullable=False),
    sa.Column("cron", sa.Text),
    sa.Column("every", sa.Double),
    sa.Column("timezone", sa.Text, nullable=False),
    sa.Column("catch_up", sa.Text, nullable=False),
    sa.Column("max_catch_up", sa.Integer, nullable=False),
    sa.Column("overlap", sa.Text, nullable=False),
    sa.Column("queue", sa.Text, nullable=False),
    sa.Column("priority", sa.Integer, nullable=False),
    sa.Column("declared", sa.Integer, nullable=False),
    sa.Column("orphaned", sa.Integer, nullable=False),
    sa.Column("paused", sa.Integer, nullable=False),
    sa.Column("next_fire_at", sa.Double, nullable=False),
    sa.Column("last_fire_at", sa.Double),
    sa.Column("last_run_id", sa.Text),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("updated_at", sa.Double, nullable=False),
    # Workers find the schedules that are due, and the next one to come: those that
    # are neither paused nor orphaned, by next_fire_at.
    sa.Index(
        "durable_schedules_due",
        "next_fire_at",
        sqlite_where=_LIVE_SCHEDULE,
        postgresql_where=_LIVE_SCHEDULE,
    ),
)

meta = sa.Table(
    "durable_meta",
    metadata,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

_QUEUED = sa.text("status = 'queued'")
_HEARTBEATING = sa.text("status = 'running' AND wake_at IS NOT NULL")

_UNCONSUMED = events.c.consumed_position.is_(None)
_WAITING = sa.text("status = 'waiting'")
_KEYED = events.c.key.is_not(None)

# A wait consumes the oldest unconsumed event of one name sent to its run.
sa.Index(
    "durable_events_inbox",
    events.c.run_id,
    events.c.name,
    events.c.id,
    sqlite_where=_UNCONSUMED,
    postgresql_where=_UNCONSUMED,
)
# An event sent with a key is delivered once, however often it is sent.
sa.Index(
    "durable_events_key",
    events.c.run_id,
    events.c.key,
    unique=True,
    sqlite_where=_KEYED,
    postgresql_where=_KEYED,
)
# Workers wake sleeping runs whose time has come.
_due_index = sa.Index(
    "durable_runs_due", runs.c.wake_at, sqlite_where=_WAITING, postgresql_where=_WAITING
)

# Workers claim the oldest, most urgent queued runs of their queues.
_claim_index = sa.Index(
    "durable_runs_claim",
    runs.c.queue,
    runs.c.priority.desc(),
    runs.c.created_at,
    sqlite_where=_QUEUED,
    postgresql_where=_QUEUED,
)

# Version 5: a run's children. Partial: most runs have no parent, and an entry each
# would be one more b-tree page to write, and fsync, for every run created.
_HAS_PARENT = sa.text("parent_id IS NOT NULL")
_parent_index = sa.Index(
    "durable_runs_parent",
    runs.c.parent_id,
    sqlite_where=_HAS_PARENT,
    postgresql_where=_HAS_PARENT,
)

# Version 8: task attempts that must heartbeat, whose runs the sweep looks at for a
# hung body (a RUNNING step's wake_at: the moment it counts as hung).
_heartbeating_index = sa.Index(
    "durable_history_heartbeating",
    history.c.run_id,
    history.c.wake_at,
    sqlite_where=_HEARTBEATING,
    postgresql_where=_HEARTBEATING,
)

# Version 4: listing a workflow's runs, newest first (the dashboard, `durable ls`).
_workflow_index = sa.Index("durable_runs_workflow", runs.c.workflow, runs.c.created_at)
# Version 4: a run's events, for `WaitStore.events` and purging.
_events_run_index = sa.Index("durable_events_run", events.c.run_id)

#: The schema version this code reads and writes.
SCHEMA_VERSION = 10

Execute = Callable[[str], None]


def create(dialect: sa.Dialect, execute: Execute) -> None:
    """Create every table and index at the current version (a new database)."""
    for table in (runs, history, events, actions, attempts, schedules, meta):
        _create_table(table, dialect, execute)


def _create_table(table: sa.Table, dialect: sa.Dialect, execute: Execute) -> None:
    """*table* and its indexes, if they do not exist yet."""
    execute(str(CreateTable(table, if_not_exists=True).compile(dialect=dialect)))
    for index in sorted(table.indexes, key=lambda i: str(i.name)):
        execute(str(CreateIndex(index, if_not_exists=True).compile(dialect=dialect)))


def _v1_to_v2(dialect: sa.Dialect, execute: Execute) -> None:
    """Workers: queues, priorities, start times and cancellation requests."""
    for name in ("queue", "priority", "started_at", "cancel_requested"):
        column = CreateColumn(runs.c[name]).compile(dialect=dialect)
        execute(f"ALTER TABLE durable_runs ADD COLUMN {column}")
    execute(str(CreateIndex(_claim_index, if_not_exists=True).compile(dialect=dialect)))


def _v2_to_v3(dialect: sa.Dialect, execute: Execute) -> None:
    """Time and events: wake times, what a run waits on, and the inbox."""
    for table, name in ((runs, "wake_at"), (runs, "waiting_on"), (history, "wake_at")):
        column = CreateColumn(table.c[name]).compile(dialect=dialect)
        execute(f"ALTER TABLE {table.name} ADD COLUMN {column}")
    _create_table(events, dialect, execute)
    execute(str(CreateIndex(_due_index, if_not_exists=True).compile(dialect=dialect)))


def _v3_to_v4(dialect: sa.Dialect, execute: Execute) -> None:
    """Operator surface: the actions log, and indexes for listing runs and events."""
    execute(str(CreateTable(actions, if_not_exists=True).compile(dialect=dialect)))
    for index in (*sorted(actions.indexes, key=lambda i: str(i.name)), _workflow_index):
        execute(str(CreateIndex(index, if_not_exists=True).compile(dialect=dialect)))
    execute(str(CreateIndex(_events_run_index, if_not_exists=True).compile(dialect=dialect)))


def _v4_to_v5(dialect: sa.Dialect, execute: Execute) -> None:
    """The parent index holds only runs that have a parent."""
    execute("DROP INDEX IF EXISTS durable_runs_parent")
    execute(str(CreateIndex(_parent_index).compile(dialect=dialect)))


def _v5_to_v6(dialect: sa.Dialect, execute: Execute) -> None:
    """Outcomes erased by retries, kept for statistics."""
    _create_table(attempts, dialect, execute)


def _v6_to_v7(dialect: sa.Dialect, execute: Execute) -> None:
    """Task heartbeats: when an attempt last heartbeated, and its details."""
    for name in ("heartbeat_at", "details"):
        column = CreateColumn(history.c[name]).compile(dialect=dialect)
        execute(f"ALTER TABLE durable_history ADD COLUMN {column}")


def _v7_to_v8(dialect: sa.Dialect, execute: Execute) -> None:
    """Run deadlines (when a run must have ended) and hung task attempts."""
    column = CreateColumn(runs.c.deadline_at).compile(dialect=dialect)
    execute(f"ALTER TABLE durable_runs ADD COLUMN {column}")
    execute(str(CreateIndex(_heartbeating_index, if_not_exists=True).compile(dialect=dialect)))


def _v8_to_v9(dialect: sa.Dialect, execute: Execute) -> None:
    """Workflow properties: snapshots on steps, and a run's last one."""
    for table in (history, runs):
        column = CreateColumn(table.c.state).compile(dialect=dialect)
        execute(f"ALTER TABLE {table.name} ADD COLUMN {column}")


def _v9_to_v10(dialect: sa.Dialect, execute: Execute) -> None:
    """Schedules: workflows run on a cron expression or at a fixed interval."""
    _create_table(schedules, dialect, execute)


#: MIGRATIONS[n] upgrades a database at version n to n + 1.
MIGRATIONS: dict[int, Callable[[sa.Dialect, Execute], None]] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
    4: _v4_to_v5,
    5: _v5_to_v6,
    6: _v6_to_v7,
    7: _v7_to_v8,
    8: _v8_to_v9,
    9: _v9_to_v10,
}

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
