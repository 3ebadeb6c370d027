"""The triggers that keep the tallies (schema versions 17 to 20).

`durable.core.tallies` says what is counted. The counting is done by triggers on
``durable_runs`` and ``durable_attempts``, so it happens in the
transaction that changes the row, on every path that changes one (a claim, an outcome,
a retry, a cancel, a fork...), with no round trip of its own: a run's creation adds to
one row per grain (minute, hour, day), its end moves it (two per grain).

Task calls are counted in batches, not at every step (schema 19): when their run's
execution ends (the run leaves ``running``: it waits, ends, is blocked, paused or
handed back) and, while it runs, at each renewal of its lease; each batch adds
the run's ended calls not yet counted and marks them counted in history's
``tallied`` column. A step then writes no
tally row and fires no trigger: at every step that was two upserted rows (two more
pages in SQLite's WAL) and, on PostgreSQL, a PL/pgSQL call. No trigger is on
``durable_history`` (schema 20 dropped SQLite's last two): a trigger that may fire on
a row costs every execution of the statement its set-up, even when its condition
fails, and every step's statement writes history. So the calls a run's execution
records are written before the move that counts them, in one transaction (or, on
PostgreSQL, before its commit, where the move's trigger runs); a call written after its
run's execution ended, by another writer, is counted when the run next leaves
``running``.

The rows themselves are computed by the SELECTs of `durable.backends._tally_sql`.
"""

from __future__ import annotations

import sqlalchemy as sa

from durable.core.tallies import BOUNDS_US, RETRIED, TASK_ENDS

from ._schema import Execute, create_table
from ._tally_sql import BOUNDS_TABLE, TALLIED, TallySQL, one_of, run_class, tallies

#: Triggers of earlier versions that version 19 drops: task calls counted at each step,
#: and moved between two ends (which no write does: a finished step is never rewritten).
RETIRED = ("durable_tally_task_recorded", "durable_tally_task_ended", "durable_tally_task_moved")

#: SQLite's triggers of version 19 that version 20 drops: a call that ended while its
#: run was not running, counted as it was written (see the module docstring).
RETIRED_LATE = ("durable_tally_calls_late", "durable_tally_calls_ended_late")


#: A trigger's statements: each one, or (condition, statement) where only some firings
#: run it (PostgreSQL's `IF` in a function that does two triggers' work).
Body = list[str | tuple[str, str]]


def _triggers(sql: TallySQL) -> dict[str, tuple[str, str, Body]]:
    """Each trigger: (its event, the condition it runs on, its statements). A firing
    runs one statement where it can: a move takes the old row's tallies back and adds
    the new one's in one upsert (their keys differ: their statuses do), and the moves
    are told apart by the triggers' conditions, not by statements that select nothing
    (a condition that fails costs no PL/pgSQL call on PostgreSQL). None is on
    ``durable_history`` (see the module docstring)."""
    moved = f"{run_class('OLD')} <> {run_class('NEW')}"
    move = sql.upsert(f"{sql.run_rows('OLD', -1)} UNION ALL {sql.run_rows('NEW', 1)}")
    # A running run's execution ended, or its lease was renewed or taken over (the
    # writes of a running run's status or lease): its calls are counted (see the
    # module docstring). Not "its lease changed": two renewals in one tick of the
    # database's clock would leave it as it was.
    counted = "OLD.status = 'running'"
    count = sql.count_calls("NEW.id", workflow="NEW.workflow")
    found: dict[str, tuple[str, str, Body]] = {
        "durable_tally_run_created": (
            "INSERT ON durable_runs",
            "1 = 1",
            [sql.upsert(sql.run_rows("NEW", 1))],
        ),
    }
    if sql.postgres:
        # One function for both (a PL/pgSQL call costs tens of microseconds), run at
        # commit (`DEFERRED`), once the transaction's writes are all in: a last step
        # is recorded after the run's move, with the outcome.
        found["durable_tally_run_moved"] = (
            "UPDATE OF status, lease_until ON durable_runs",
            f"({moved}) OR ({counted})",
            [(moved, move), *((counted, statement) for statement in count)],
        )
    else:
        found["durable_tally_run_moved"] = ("UPDATE OF status ON durable_runs", moved, [move])
        found["durable_tally_calls_counted"] = (
            "UPDATE OF status, lease_until ON durable_runs",
            counted,
            list(count),
        )
    # An operator's retry keeps the attempts it erases: a failed run (whose move back
    # to open took its failure away) or a failed task call (about to be deleted)
    # counts on as `RETRIED`: a failure, but not another run or call. Its run's calls
    # are counted first, so the call taken back is one counted.
    found["durable_tally_retried"] = (
        "INSERT ON durable_attempts",
        "1 = 1",
        [
            *sql.count_calls("NEW.run_id"),
            sql.upsert(sql.attempt_rows("NEW", "run", RETRIED, 1)),
            sql.upsert(sql.attempt_rows("NEW", "task", "failed", -1)),
            sql.upsert(sql.attempt_rows("NEW", "task", RETRIED, 1)),
        ],
    )
    return found


#: PostgreSQL's triggers that fire at commit, once the transaction's writes are all in.
DEFERRED = ("durable_tally_run_moved",)


def create_tallies(dialect: sa.Dialect, execute: Execute) -> None:
    """The tallies, their bookkeeping and their triggers, in a new database."""
    sql = TallySQL(dialect)
    create_tally_tables(dialect, execute)
    _add_tallied(sql, execute)
    _create_triggers(sql, execute)


def create_tally_tables(dialect: sa.Dialect, execute: Execute) -> None:
    """The tallies table and, on SQLite, its table of bin bounds (if not there yet)."""
    create_table(tallies, dialect, execute)
    if dialect.name != "postgresql":
        execute(
            f"CREATE TABLE IF NOT EXISTS {BOUNDS_TABLE} "
            "(upper_us INTEGER PRIMARY KEY, bin INTEGER NOT NULL)"
        )
        rows = ", ".join(f"({bound}, {i})" for i, bound in enumerate(BOUNDS_US))
        execute(f"INSERT OR REPLACE INTO {BOUNDS_TABLE} (upper_us, bin) VALUES {rows}")


def count_calls_in_batches(dialect: sa.Dialect, execute: Execute) -> None:
    """Version 19: task calls counted in batches (the module docstring). The calls an
    older version's triggers counted are marked counted; its triggers are replaced."""
    sql = TallySQL(dialect)
    _add_tallied(sql, execute)
    execute(
        f"UPDATE durable_history SET {TALLIED} = 1 WHERE kind = 'task' AND "
        f"{one_of('status', TASK_ENDS)} AND started_at IS NOT NULL"
    )
    for name in RETIRED:
        if sql.postgres:
            execute(f"DROP FUNCTION IF EXISTS {name}() CASCADE")
        else:
            execute(f"DROP TRIGGER IF EXISTS {name}")
    _create_triggers(sql, execute)


def _add_tallied(sql: TallySQL, execute: Execute) -> None:
    """History's `TALLIED` column. PostgreSQL: if not there yet, as a first start
    racing another may have read its version before the other's commit (SQLite's
    first starts take turns on the database's lock)."""
    exists = " IF NOT EXISTS" if sql.postgres else ""
    execute(f"ALTER TABLE durable_history ADD COLUMN{exists} {TALLIED} SMALLINT")


def _create_triggers(sql: TallySQL, execute: Execute) -> None:
    """The tallies' triggers, made or made again."""
    for name, (event, condition, body) in _triggers(sql).items():
        if not sql.postgres:
            statements = "".join(f"{statement};\n" for statement in body)
            execute(f"DROP TRIGGER IF EXISTS {name}")
            execute(f"CREATE TRIGGER {name} AFTER {event} WHEN {condition}\nBEGIN\n{statements}END")
            continue
        # IF (...) THEN: PL/pgSQL reads a condition up to its first THEN, a CASE's too.
        statements = "".join(
            f"  {statement};\n" if isinstance(statement, str)
            else f"  IF ({statement[0]}) THEN\n    {statement[1]};\n  END IF;\n"
            for statement in body
        )  # fmt: skip
        execute(
            # The schema the database was created in, whatever the writer's search_path
            # (an application's connection inserting runs in its own transaction).
            f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql "
            "SET search_path FROM CURRENT AS $$\n"
            f"BEGIN\n{statements}  RETURN NULL;\nEND $$"
        )
        table = event.split(" ON ")[1]
        execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
        kind, when = (
            ("CONSTRAINT TRIGGER", " DEFERRABLE INITIALLY DEFERRED")
            if name in DEFERRED
            else ("TRIGGER", "")
        )
        execute(
            f"CREATE {kind} {name} AFTER {event}{when} FOR EACH ROW WHEN ({condition}) "
            f"EXECUTE FUNCTION {name}()"
        )


def drop_late_triggers(dialect: sa.Dialect, execute: Execute) -> None:
    """Version 20: SQLite's triggers on history (`RETIRED_LATE`) dropped. PostgreSQL
    never had them."""
    if dialect.name != "postgresql":
        for name in RETIRED_LATE:
            execute(f"DROP TRIGGER IF EXISTS {name}")


def backfill(dialect: sa.Dialect, execute: Execute) -> None:
    """Tally the runs, task calls and erased attempts a database already holds (version
    16's), as the triggers would have: added up first, since one upsert may not touch a
    row twice (`TallySQL.upsert_grouped`). (An erased task call's step is gone already:
    nothing to take back.)"""
    sql = TallySQL(dialect)
    for rows in (
        sql.run_rows("r", 1, source=", durable_runs AS r"),
        sql.task_rows("h", 1, source=", durable_history AS h"),
        sql.attempt_rows("a", "run", RETRIED, 1, source=", durable_attempts AS a"),
        sql.attempt_rows("a", "task", RETRIED, 1, source=", durable_attempts AS a"),
    ):
        execute(sql.upsert_grouped(rows))
