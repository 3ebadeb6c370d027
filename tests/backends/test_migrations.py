"""Schema migrations: an old database, migrated, looks exactly like a new one."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.dialects import postgresql, sqlite

from durable.backends import _migrations, _schema, _tallies_schema
from durable.backends.sql import SQLBackend
from durable.core import tallies
from durable.core.records import NewRun, RunStatus
from tests.conftest import PostgresSchemas

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


class Database:
    """Raw access to one test database, for building old shapes and reading schemas."""

    def __init__(self, kind: str, url: str) -> None:
        self.kind, self.url = kind, url

    def execute(self, statement: str) -> list[tuple[Any, ...]]:
        if self.kind == "sqlite":
            with sqlite3.connect(self.url.removeprefix("sqlite:///")) as conn:
                return conn.execute(statement).fetchall()
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            cursor = conn.execute(statement)
            return cursor.fetchall() if cursor.description else []

    def shape(self) -> dict[str, Any]:
        """Columns (name, type, nullability, default) and index definitions, per table,
        and the triggers' code (SQLite's triggers, PostgreSQL's trigger functions)."""
        if self.kind == "sqlite":
            tables = [
                t for (t,) in self.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            return {
                "columns": {
                    t: sorted(
                        (name, kind, notnull, default)
                        for _, name, kind, notnull, default, _ in self.execute(
                            f"PRAGMA table_info({t})"
                        )
                    )
                    for t in tables
                },
                "indexes": sorted(
                    " ".join(sql.replace("IF NOT EXISTS ", "").split())
                    for (sql,) in self.execute(
                        "SELECT sql FROM sqlite_master WHERE type='index' AND sql IS NOT NULL"
                    )
                ),
                "triggers": sorted(
                    sql
                    for (sql,) in self.execute("SELECT sql FROM sqlite_master WHERE type='trigger'")
                ),
            }
        columns = self.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = current_schema()"
        )
        indexes = self.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema()"
        )
        per_table: dict[str, list[Any]] = {}
        for table, *rest in columns:
            per_table.setdefault(table, []).append(tuple(rest))
        schema = self.execute("SELECT current_schema()")[0][0]
        functions = self.execute(
            "SELECT p.proname, p.prosrc FROM pg_proc AS p JOIN pg_namespace AS n "
            "ON n.oid = p.pronamespace WHERE n.nspname = current_schema()"
        )
        return {
            "columns": {t: sorted(c) for t, c in per_table.items()},
            "indexes": sorted(d.replace(f"{schema}.", "") for (d,) in indexes),
            "triggers": sorted(tuple(f) for f in functions),
        }


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def two_databases(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Two empty databases of one kind."""
    if request.param == "sqlite":
        yield (
            Database("sqlite", f"sqlite:///{tmp_path / 'old.db'}"),
            Database("sqlite", f"sqlite:///{tmp_path / 'new.db'}"),
        )
        return
    schemas: PostgresSchemas = request.getfixturevalue("pg_schemas")
    yield Database("postgres", schemas.new_url()), Database("postgres", schemas.new_url())


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


#: Version 17's tally triggers (18 split one in two).
TALLY_TRIGGERS = (
    "durable_tally_run_created",
    "durable_tally_run_moved",
    "durable_tally_task_recorded",
    "durable_tally_task_moved",
    "durable_tally_retried",
)


def tally_triggers(db: Database) -> list[str]:
    """The names of the tally triggers (SQLite) or trigger functions (PostgreSQL) in
    *db*."""
    if db.kind == "sqlite":
        found = "SELECT name FROM sqlite_master WHERE type = 'trigger'"
    else:
        found = (
            "SELECT p.proname FROM pg_proc AS p JOIN pg_namespace AS n "
            "ON n.oid = p.pronamespace WHERE n.nspname = current_schema()"
        )
    return [name for (name,) in db.execute(found) if name.startswith("durable_tally_")]


#: Rows as version-16 code left them: a completed run with two task calls, a failed one
#: an operator retried (its run queued again, its failed call erased and kept), a
#: queued one; times a day apart.
V16_ROWS = [
    "INSERT INTO durable_runs (id, workflow, status, input, call_hash, epoch, recoveries, "
    "created_at, updated_at, started_at, finished_at, queue, priority, cancel_requested) "
    "VALUES ('done', 'app.flow', 'completed', '', 'v1:00', 1, 0, 1000, 1000, 1001, 1003.5, "
    "'default', 0, 0), ('again', 'app.flow', 'queued', '', 'v1:00', 1, 0, 90000, 90000, "
    "90001, NULL, 'default', 0, 0), ('new', 'app.other', 'queued', '', 'v1:00', 0, 0, "
    "180000, 180000, NULL, NULL, 'default', 0, 0)",
    "INSERT INTO durable_history (run_id, position, kind, name, call_hash, status, attempts, "
    "started_at, finished_at, epoch) VALUES ('done', 0, 'task', 'app.load', 'v1:00', "
    "'completed', 1, 1001, 1002, 1), ('done', 1, 'task', 'app.save', 'v1:00', 'completed', "
    "1, 1002, 1003.25, 1), ('done', 2, 'sleep', 'durable.sleep', 'v1:00', 'completed', 1, "
    "1003.25, 1003.5, 1), ('again', 0, 'task', 'app.load', 'v1:00', 'completed', 1, 90001, "
    "90002, 1)",
    "INSERT INTO durable_attempts (run_id, kind, name, workflow, status, started_at, "
    "finished_at) VALUES ('again', 'run', 'app.flow', 'app.flow', 'failed', 90001, 90009), "
    "('again', 'task', 'app.save', 'app.flow', 'failed', 90002, 90008)",
]


def drop_tallies(db: Database, version: int = 16) -> None:
    """Take a new database back to version 16's shape (no tallies, no triggers), or
    with *version* 17 or 18, to the tallies without today's triggers and column."""
    for name in tally_triggers(db):
        if db.kind == "sqlite":
            db.execute(f"DROP TRIGGER {name}")
        else:
            db.execute(f"DROP FUNCTION {name}() CASCADE")
    db.execute("ALTER TABLE durable_history DROP COLUMN tallied")
    if version == 16:
        db.execute("DROP TABLE durable_tallies")
    if db.kind == "sqlite" and version < 18:
        db.execute("DROP TABLE durable_tally_bins")
    db.execute(f"UPDATE durable_meta SET value = '{version}' WHERE key = 'schema_version'")


def write_like_the_engine(db: Database) -> None:
    """V16_ROWS written as today's code writes them: each run created, claimed, its
    steps recorded, then ended (the calls are counted as its execution ends); the
    failed run retried: its failed call recorded, then erased and kept."""
    db.execute(
        V16_ROWS[0]
        .replace("'completed', '', 'v1:00', 1, 0, 1000, 1000, 1001, 1003.5",
                 "'running', '', 'v1:00', 1, 0, 1000, 1000, 1001, NULL")
        .replace("'queued', '', 'v1:00', 1, 0, 90000", "'running', '', 'v1:00', 1, 0, 90000")
    )  # fmt: skip
    db.execute(V16_ROWS[1])
    db.execute(
        "INSERT INTO durable_history (run_id, position, kind, name, call_hash, status, "
        "attempts, started_at, finished_at, epoch) VALUES ('again', 1, 'task', 'app.save', "
        "'v1:00', 'failed', 1, 90002, 90008, 1)"
    )
    db.execute(
        "UPDATE durable_runs SET status = 'completed', finished_at = 1003.5 WHERE id = 'done'"
    )
    db.execute("UPDATE durable_runs SET status = 'failed', finished_at = 90009 WHERE id = 'again'")
    db.execute(V16_ROWS[2])
    db.execute("DELETE FROM durable_history WHERE run_id = 'again' AND position = 1")
    db.execute("UPDATE durable_runs SET status = 'queued', finished_at = NULL WHERE id = 'again'")


def test_migrating_v16_counts_what_the_database_holds(two_databases: Any) -> None:
    """A version-16 database gets the tallies table and its triggers, and tallies of
    its runs, calls and erased attempts equal to those the triggers keep in a new
    database where the same rows were written as today's code writes them."""
    old, new = two_databases
    SQLBackend(old.url).close()
    SQLBackend(new.url).close()
    drop_tallies(old)
    for statement in V16_ROWS:
        old.execute(statement)
    write_like_the_engine(new)
    assert old.shape() != new.shape()
    migrated, fresh = SQLBackend(old.url), SQLBackend(new.url)
    try:
        assert old.shape() == new.shape()
        for grain in tallies.GRAINS:
            counted = sorted(map(repr, migrated.tallies(grain, 0.0)))
            assert counted == sorted(map(repr, fresh.tallies(grain, 0.0)))
            assert counted, "the old rows are counted"
        flows = {
            t.status: t.count
            for t in migrated.tallies(3600, 0.0, by_bucket=False, by_bin=False)
            if t.name == "app.flow"
        }
        assert flows == {"completed": 1, "open": 1, "retried": 1}
        saves = migrated.tallies(3600, 0.0, name="app.save", by_bucket=False, by_bin=False)
        assert sorted((t.status, t.count) for t in saves) == [("completed", 1), ("retried", 1)]
    finally:
        migrated.close()
        fresh.close()


def _fake_triggers(db: Database, names: tuple[str, ...]) -> None:
    """Triggers (SQLite) or trigger functions (PostgreSQL) of an older version, as far
    as these tests care: others than today's, under *names*."""
    for name in names:
        if db.kind == "sqlite":
            db.execute(f"CREATE TRIGGER {name} AFTER DELETE ON durable_meta BEGIN SELECT 1; END")
        else:
            db.execute(
                f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql "
                "AS $$ BEGIN RETURN NULL; END $$"
            )


def _same_tallies(one: SQLBackend, other: SQLBackend) -> None:
    for grain in tallies.GRAINS:
        counted = sorted(map(repr, one.tallies(grain, 0.0)))
        assert counted == sorted(map(repr, other.tallies(grain, 0.0))), grain
        assert counted


def test_migrating_v17_replaces_the_triggers(two_databases: Any) -> None:
    """A version-17 database gets today's triggers, column (and SQLite its table of
    bounds): the same shape as a new database, and runs and calls counted by them."""
    old, new = two_databases
    SQLBackend(old.url).close()
    SQLBackend(new.url).close()
    drop_tallies(old, 17)
    _fake_triggers(old, TALLY_TRIGGERS)
    assert old.shape() != new.shape()
    migrated, fresh = SQLBackend(old.url), SQLBackend(new.url)
    try:
        assert old.shape() == new.shape()
        write_like_the_engine(old)
        write_like_the_engine(new)
        _same_tallies(migrated, fresh)
        saves = migrated.tallies(86400, 0.0, name="app.save", by_bucket=False)
        assert sorted((t.status, t.count, t.bin) for t in saves) == [
            ("completed", 1, tallies.bin_of(1.25)),
            ("retried", 1, tallies.bin_of(6.0)),
        ]
    finally:
        migrated.close()
        fresh.close()


def test_migrating_v18_counts_no_call_twice(two_databases: Any) -> None:
    """A version-18 database, whose triggers counted each call as it ended, has those
    calls marked counted and its triggers replaced (the retired ones dropped): a run
    whose execution ends after the migration counts none of its calls again."""
    old, new = two_databases
    SQLBackend(old.url).close()
    SQLBackend(new.url).close()
    drop_tallies(old, 18)
    _fake_triggers(old, (*TALLY_TRIGGERS, "durable_tally_task_ended"))
    for statement in V16_ROWS:
        old.execute(statement)
    dialect = (sqlite if old.kind == "sqlite" else postgresql).dialect()
    _tallies_schema.backfill(dialect, old.execute)  # what version 18's triggers counted
    write_like_the_engine(new)
    assert old.shape() != new.shape()
    migrated, fresh = SQLBackend(old.url), SQLBackend(new.url)
    try:
        assert old.shape() == new.shape()
        _same_tallies(migrated, fresh)
        for db in (old, new):  # 'again' runs again and waits: its one call is counted
            db.execute("UPDATE durable_runs SET status = 'running' WHERE id = 'again'")
            db.execute("UPDATE durable_runs SET status = 'waiting' WHERE id = 'again'")
        _same_tallies(migrated, fresh)
        loads = migrated.tallies(3600, 0.0, name="app.load", by_bucket=False, by_bin=False)
        assert [(t.status, t.count) for t in loads] == [("completed", 2)]
    finally:
        migrated.close()
        fresh.close()
