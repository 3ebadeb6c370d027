"""Schema migrations: an old database, migrated, looks exactly like a new one.

Versions 1, 14 and 15, and a migration for every step from version 1 to today's (the
tallies' versions 16 to 18 are in test_migrations_tallies.py)."""

from __future__ import annotations

from typing import Any

from durable.backends import _migrations, _schema
from durable.backends.sql import SQLBackend
from durable.core.records import NewRun, RunStatus
from tests.backends._migration_db import drop_tallies

# The version-1 schema exactly as version-1 code created it (generated from that code;
# kept verbatim, hence the long lines).
V1 = {
    "sqlite": [
        "CREATE TABLE IF NOT EXISTS durable_runs ( id TEXT NOT NULL, workflow TEXT NOT NULL, "
        "status TEXT NOT NULL, input BLOB NOT NULL, call_hash TEXT NOT NULL, output BLOB, "
        "error BLOB, epoch INTEGER NOT NULL, lease_owner TEXT, lease_until DOUBLE, recoveries "
        "INTEGER NOT NULL, parent_id TEXT, created_at DOUBLE NOT NULL, updated_at DOUBLE NOT "
        "NULL, finished_at DOUBLE, PRIMARY KEY (id) ) WITHOUT ROWID",
        "CREATE INDEX IF NOT EXISTS durable_runs_created ON durable_runs (created_at)",
        "CREATE INDEX IF NOT EXISTS durable_runs_parent ON durable_runs (parent_id)",
        "CREATE INDEX IF NOT EXISTS durable_runs_status_lease ON durable_runs (status, lease_until)",  # noqa: E501
        "CREATE TABLE IF NOT EXISTS durable_history ( run_id TEXT NOT NULL, position INTEGER NOT "
        "NULL, kind TEXT NOT NULL, name TEXT NOT NULL, call_hash TEXT NOT NULL, status TEXT NOT "
        "NULL, input BLOB, output BLOB, error BLOB, attempts INTEGER NOT NULL, started_at DOUBLE, "
        "finished_at DOUBLE, epoch INTEGER NOT NULL, PRIMARY KEY (run_id, position) ) WITHOUT ROWID",  # noqa: E501
        'CREATE TABLE IF NOT EXISTS durable_meta ( "key" TEXT NOT NULL, value TEXT NOT NULL, '
        'PRIMARY KEY ("key") )',
    ],
    "postgres": [
        "CREATE TABLE IF NOT EXISTS durable_runs ( id TEXT NOT NULL, workflow TEXT NOT NULL, "
        "status TEXT NOT NULL, input BYTEA NOT NULL, call_hash TEXT NOT NULL, output BYTEA, "
        "error BYTEA, epoch INTEGER NOT NULL, lease_owner TEXT, lease_until DOUBLE PRECISION, "
        "recoveries INTEGER NOT NULL, parent_id TEXT, created_at DOUBLE PRECISION NOT NULL, "
        "updated_at DOUBLE PRECISION NOT NULL, finished_at DOUBLE PRECISION, PRIMARY KEY (id) )",
        "CREATE INDEX IF NOT EXISTS durable_runs_created ON durable_runs (created_at)",
        "CREATE INDEX IF NOT EXISTS durable_runs_parent ON durable_runs (parent_id)",
        "CREATE INDEX IF NOT EXISTS durable_runs_status_lease ON durable_runs (status, lease_until)",  # noqa: E501
        "CREATE TABLE IF NOT EXISTS durable_history ( run_id TEXT NOT NULL, position INTEGER NOT "
        "NULL, kind TEXT NOT NULL, name TEXT NOT NULL, call_hash TEXT NOT NULL, status TEXT NOT "
        "NULL, input BYTEA, output BYTEA, error BYTEA, attempts INTEGER NOT NULL, started_at "
        "DOUBLE PRECISION, finished_at DOUBLE PRECISION, epoch INTEGER NOT NULL, PRIMARY KEY "
        "(run_id, position) )",
        "CREATE TABLE IF NOT EXISTS durable_meta ( key TEXT NOT NULL, value TEXT NOT NULL, "
        "PRIMARY KEY (key) )",
    ],
}


V1_DATA = [
    "INSERT INTO durable_meta (key, value) VALUES ('schema_version', '1')",
    "INSERT INTO durable_runs (id, workflow, status, input, call_hash, epoch, recoveries, "
    "created_at, updated_at) VALUES ('old-run', 'app.flow', 'running', '', 'v1:00', 1, 0, 1, 1)",
]


def test_migrating_v1_gives_the_current_schema_and_keeps_data(two_databases: Any) -> None:
    """A version-1 database, opened by today's code, has the same shape as a new one."""
    old, new = two_databases
    for statement in V1[old.kind] + V1_DATA:
        old.execute(statement)
    SQLBackend(old.url).close()
    SQLBackend(new.url).close()
    assert old.shape() == new.shape()
    assert old.execute("SELECT value FROM durable_meta WHERE key = 'schema_version'") == [
        (str(_schema.SCHEMA_VERSION),)
    ]
    backend = SQLBackend(old.url)
    try:
        run = backend.get_run("old-run")
        assert run is not None and run.status is RunStatus.RUNNING
        assert (run.queue, run.priority, run.cancel_requested) == ("default", 0, False)
    finally:
        backend.close()


def test_every_version_has_a_migration() -> None:
    """MIGRATIONS covers every step from version 1 to the current one."""
    assert sorted(_migrations.MIGRATIONS) == list(range(1, _schema.SCHEMA_VERSION))


def test_migrating_v14_adds_streams_and_keeps_runs(two_databases: Any) -> None:
    """A version-14 database (today's, without durable_streams and
    durable_runs.event_schemas) gets the streams table and its index, then the column
    (the shape of a new database), and keeps its runs."""
    old, new = two_databases
    SQLBackend(old.url).close()
    old.execute("DROP TABLE durable_streams")
    old.execute("ALTER TABLE durable_runs DROP COLUMN event_schemas")
    drop_tallies(old)
    old.execute("UPDATE durable_meta SET value = '14' WHERE key = 'schema_version'")
    old.execute(
        "INSERT INTO durable_runs (id, workflow, status, input, call_hash, epoch, recoveries, "
        "created_at, updated_at, queue, priority, cancel_requested) VALUES ('old-run', "
        "'app.flow', 'running', '', 'v1:00', 1, 0, 1, 1, 'default', 0, 0)"
    )
    SQLBackend(old.url).close()
    SQLBackend(new.url).close()
    assert old.shape() == new.shape()
    backend = SQLBackend(old.url)
    try:
        assert backend.write_stream("old-run", 1, "s", b"j1", seq=0) == 0
        assert [(s.name, s.length) for s in backend.streams("old-run")] == [("s", 1)]
    finally:
        backend.close()


def test_migrating_v15_adds_the_event_schemas_column_and_keeps_runs(two_databases: Any) -> None:
    """A version-15 database (today's shape without `durable_runs.event_schemas`) gets
    the column, its runs kept with none; a new run stores its declared schemas."""
    old, new = two_databases
    SQLBackend(old.url).close()
    SQLBackend(new.url).close()
    old.execute("ALTER TABLE durable_runs DROP COLUMN event_schemas")
    drop_tallies(old)
    old.execute("UPDATE durable_meta SET value = '15' WHERE key = 'schema_version'")
    old.execute(V1_DATA[1])
    assert old.shape() != new.shape()
    backend = SQLBackend(old.url)
    try:
        assert old.shape() == new.shape()
        assert old.execute("SELECT value FROM durable_meta WHERE key = 'schema_version'") == [
            (str(_schema.SCHEMA_VERSION),)
        ]
        run = backend.get_run("old-run")
        assert run is not None and run.event_schemas is None
        schemas = '{"approval": {"type": "object"}}'
        new_run = NewRun(
            id="new-run", workflow="app.flow", input=b"j[]", call_hash="v1:00",
            owner=None, lease=0.0, event_schemas=schemas,
        )  # fmt: skip
        made, _ = backend.create_run(new_run)
        assert made.event_schemas == schemas
        stored = backend.get_run("new-run")
        assert stored is not None and stored.event_schemas == schemas
    finally:
        backend.close()
