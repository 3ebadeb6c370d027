"""Moving a database up from an older schema version, one version at a time.

`MIGRATIONS[n]` upgrades a database at version n to n + 1; `migrate` creates a new
database at the current shape or migrates an older one, and refuses a newer one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.schema import CreateColumn, CreateIndex, CreateTable

from durable.errors import ConfigurationError

from ._schema import (
    SCHEMA_VERSION,
    Execute,
    actions,
    attempts,
    claim_index,
    create,
    create_table,
    debounce_index,
    due_index,
    events,
    events_run_index,
    heartbeating_index,
    history,
    key_index,
    key_starts_index,
    parent_index,
    queues,
    run_attributes,
    runs,
    schedules,
    status_created_index,
    streams,
    workflow_index,
)
from ._tallies_schema import (
    backfill,
    count_calls_in_batches,
    create_tallies,
    create_tally_tables,
    drop_late_triggers,
)

if TYPE_CHECKING:
    from ._connections import Connections


def _v1_to_v2(dialect: sa.Dialect, execute: Execute) -> None:
    """Workers: queues, priorities, start times and cancellation requests."""
    for name in ("queue", "priority", "started_at", "cancel_requested"):
        column = CreateColumn(runs.c[name]).compile(dialect=dialect)
        execute(f"ALTER TABLE durable_runs ADD COLUMN {column}")
    execute(str(CreateIndex(claim_index, if_not_exists=True).compile(dialect=dialect)))


def _v2_to_v3(dialect: sa.Dialect, execute: Execute) -> None:
    """Time and events: wake times, what a run waits on, and the inbox."""
    for table, name in ((runs, "wake_at"), (runs, "waiting_on"), (history, "wake_at")):
        column = CreateColumn(table.c[name]).compile(dialect=dialect)
        execute(f"ALTER TABLE {table.name} ADD COLUMN {column}")
    create_table(events, dialect, execute)
    execute(str(CreateIndex(due_index, if_not_exists=True).compile(dialect=dialect)))


def _v3_to_v4(dialect: sa.Dialect, execute: Execute) -> None:
    """Operator surface: the actions log, and indexes for listing runs and events."""
    execute(str(CreateTable(actions, if_not_exists=True).compile(dialect=dialect)))
    for index in (*sorted(actions.indexes, key=lambda i: str(i.name)), workflow_index):
        execute(str(CreateIndex(index, if_not_exists=True).compile(dialect=dialect)))
    execute(str(CreateIndex(events_run_index, if_not_exists=True).compile(dialect=dialect)))


def _v4_to_v5(dialect: sa.Dialect, execute: Execute) -> None:
    """The parent index holds only runs that have a parent."""
    execute("DROP INDEX IF EXISTS durable_runs_parent")
    execute(str(CreateIndex(parent_index).compile(dialect=dialect)))


def _v5_to_v6(dialect: sa.Dialect, execute: Execute) -> None:
    """Outcomes erased by retries, kept for statistics."""
    create_table(attempts, dialect, execute)


def _v6_to_v7(dialect: sa.Dialect, execute: Execute) -> None:
    """Task heartbeats: when an attempt last heartbeated, and its details."""
    for name in ("heartbeat_at", "details"):
        column = CreateColumn(history.c[name]).compile(dialect=dialect)
        execute(f"ALTER TABLE durable_history ADD COLUMN {column}")


def _v7_to_v8(dialect: sa.Dialect, execute: Execute) -> None:
    """Run deadlines (when a run must have ended) and hung task attempts."""
    column = CreateColumn(runs.c.deadline_at).compile(dialect=dialect)
    execute(f"ALTER TABLE durable_runs ADD COLUMN {column}")
    execute(str(CreateIndex(heartbeating_index, if_not_exists=True).compile(dialect=dialect)))


def _v8_to_v9(dialect: sa.Dialect, execute: Execute) -> None:
    """Workflow properties: snapshots on steps, and a run's last one."""
    for table in (history, runs):
        column = CreateColumn(table.c.state).compile(dialect=dialect)
        execute(f"ALTER TABLE {table.name} ADD COLUMN {column}")


def _v9_to_v10(dialect: sa.Dialect, execute: Execute) -> None:
    """Schedules: workflows run on a cron expression or at a fixed interval (the table
    as version 10 had it: version 11 adds ``held_until`` and ``jitter``)."""
    later = ("held_until", "jitter")
    columns = [column._copy() for column in schedules.c if column.name not in later]
    as_of_v10 = sa.Table(schedules.name, sa.MetaData(), *columns)
    execute(str(CreateTable(as_of_v10, if_not_exists=True).compile(dialect=dialect)))
    for index in sorted(schedules.indexes, key=lambda i: str(i.name)):
        execute(str(CreateIndex(index, if_not_exists=True).compile(dialect=dialect)))


def _v10_to_v11(dialect: sa.Dialect, execute: Execute) -> None:
    """Flow control: queue limits, keys and their limits, debounced runs."""
    for name in ("concurrency_key", "key_limit", "debounce_key"):
        column = CreateColumn(runs.c[name]).compile(dialect=dialect)
        execute(f"ALTER TABLE durable_runs ADD COLUMN {column}")
    for index in (key_index, key_starts_index, debounce_index):
        execute(str(CreateIndex(index, if_not_exists=True).compile(dialect=dialect)))
    create_table(queues, dialect, execute)
    for name in ("held_until", "jitter"):
        column = CreateColumn(schedules.c[name]).compile(dialect=dialect)
        execute(f"ALTER TABLE durable_schedules ADD COLUMN {column}")


def _v11_to_v12(dialect: sa.Dialect, execute: Execute) -> None:
    """Safe deploys: each run's code version, and a fork's origin."""
    for name in ("version", "origin"):
        column = CreateColumn(runs.c[name]).compile(dialect=dialect)
        execute(f"ALTER TABLE durable_runs ADD COLUMN {column}")


def _v12_to_v13(dialect: sa.Dialect, execute: Execute) -> None:
    """Run attributes: what runs are searched by, a row per key."""
    create_table(run_attributes, dialect, execute)


def _v13_to_v14(dialect: sa.Dialect, execute: Execute) -> None:
    """Traces: the trace context of the code that created each run."""
    column = CreateColumn(runs.c.trace_context).compile(dialect=dialect)
    execute(f"ALTER TABLE durable_runs ADD COLUMN {column}")


def _v14_to_v15(dialect: sa.Dialect, execute: Execute) -> None:
    """Streams: values runs write for live readers, a row per item."""
    create_table(streams, dialect, execute)


def _v15_to_v16(dialect: sa.Dialect, execute: Execute) -> None:
    """Typed events: the JSON Schemas of the events each run's workflow declares."""
    column = CreateColumn(runs.c.event_schemas).compile(dialect=dialect)
    execute(f"ALTER TABLE durable_runs ADD COLUMN {column}")


def _v16_to_v17(dialect: sa.Dialect, execute: Execute) -> None:
    """Tallies: outcomes counted by triggers, for statistics at a million runs; the
    runs and task calls already there are counted once. And an index of runs by status
    and creation, for the pages of an operations console."""
    execute(str(CreateIndex(status_created_index, if_not_exists=True).compile(dialect=dialect)))
    create_tally_tables(dialect, execute)
    backfill(dialect, execute)
    # Its triggers are made by the last version that changes them (version 19's).


def _v17_to_v18(dialect: sa.Dialect, execute: Execute) -> None:
    """Tallies' triggers that SQLite no longer rebuilds parts of at every firing (a
    duration's bin found by one seek in a table of bounds, statuses compared by
    equalities): the same counts at a fraction of the cost. PostgreSQL's functions
    are written again, unchanged in what they count. (The triggers themselves are now
    made by version 19, which replaces them again.)"""
    create_tally_tables(dialect, execute)


def _v18_to_v19(dialect: sa.Dialect, execute: Execute) -> None:
    """Task calls counted in batches, when their run's execution ends, instead of at
    every step: a step writes no tally row and fires no trigger."""
    count_calls_in_batches(dialect, execute)


def _v19_to_v20(dialect: sa.Dialect, execute: Execute) -> None:
    """SQLite: no trigger on history any more. Its two triggers for calls that end while
    their run is not running cost every step's statement their set-up (about 6 % of a
    step's instructions); the engine writes a run's calls before the move that counts
    them. PostgreSQL: nothing changes."""
    drop_late_triggers(dialect, execute)


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
    10: _v10_to_v11,
    11: _v11_to_v12,
    12: _v12_to_v13,
    13: _v13_to_v14,
    14: _v14_to_v15,
    15: _v15_to_v16,
    16: _v16_to_v17,
    17: _v17_to_v18,
    18: _v18_to_v19,
    19: _v19_to_v20,
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
            create_tallies(dialect, conn.execute)
        else:
            for step in range(version, SCHEMA_VERSION):
                MIGRATIONS[step](dialect, conn.execute)
        conn.execute("DELETE FROM durable_meta WHERE key = 'schema_version'")
        conn.execute(
            f"INSERT INTO durable_meta (key, value) VALUES ('schema_version', '{SCHEMA_VERSION}')"
        )
