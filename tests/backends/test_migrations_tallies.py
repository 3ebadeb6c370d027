"""Schema migrations of the statistics' tallies (versions 16 to 19): the migrated
database looks exactly like a new one, and its tallies equal those a new database's
triggers keep for the same rows, with no call counted twice."""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects import postgresql, sqlite

from durable.backends import _tallies_schema
from durable.backends._schema import SCHEMA_VERSION
from durable.backends.sql import SQLBackend
from durable.core import tallies
from tests.backends._migration_db import Database, drop_tallies

#: Version 17's tally triggers (18 split one in two).
TALLY_TRIGGERS = (
    "durable_tally_run_created",
    "durable_tally_run_moved",
    "durable_tally_task_recorded",
    "durable_tally_task_moved",
    "durable_tally_retried",
)

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


def test_migrating_v19_drops_the_triggers_on_history(two_databases: Any) -> None:
    """A version-19 SQLite database loses its two triggers on history (calls that ended
    while their run was not running, counted as written): the same shape as a new
    database, whose tallies match it; a call written after its run ended is then
    counted by neither. PostgreSQL never had them: only the version moves."""
    old, new = two_databases
    SQLBackend(old.url).close()
    SQLBackend(new.url).close()
    if old.kind == "sqlite":
        sql = _tallies_schema.TallySQL(sqlite.dialect())
        body = "".join(f"{statement};\n" for statement in sql.count_calls("NEW.run_id"))
        ended = "NEW.kind = 'task' AND (NEW.status = 'completed' OR NEW.status = 'failed')"
        off = "(SELECT r.status FROM durable_runs AS r WHERE r.id = NEW.run_id) <> 'running'"
        for name, event, condition in (
            ("durable_tally_calls_late", "INSERT", f"{ended} AND {off}"),
            (
                "durable_tally_calls_ended_late",
                "UPDATE OF status",
                f"{ended} AND NOT (OLD.status = 'completed' OR OLD.status = 'failed') AND {off}",
            ),
        ):
            old.execute(
                f"CREATE TRIGGER {name} AFTER {event} ON durable_history WHEN {condition}\n"
                f"BEGIN\n{body}END"
            )
        assert old.shape() != new.shape()
    old.execute("UPDATE durable_meta SET value = '19' WHERE key = 'schema_version'")
    migrated, fresh = SQLBackend(old.url), SQLBackend(new.url)
    try:
        assert old.shape() == new.shape()
        assert old.execute("SELECT value FROM durable_meta WHERE key = 'schema_version'") == [
            (str(SCHEMA_VERSION),)
        ]
        for db in (old, new):  # then a call written after its run ended
            write_like_the_engine(db)
            db.execute(
                "INSERT INTO durable_history (run_id, position, kind, name, call_hash, status, "
                "attempts, started_at, finished_at, epoch) VALUES ('done', 3, 'task', "
                "'app.late', 'v1:00', 'completed', 1, 1003.5, 1004, 1)"
            )
        _same_tallies(migrated, fresh)
        assert migrated.tallies(3600, 0.0, name="app.late") == []
    finally:
        migrated.close()
        fresh.close()
