"""The tallies table and the triggers that keep it (schema versions 17 and 18).

`durable.core.tallies` says what is counted. The counting is done by triggers on
``durable_runs``, ``durable_history`` and ``durable_attempts``, so it happens in the
transaction that changes the row, on every path that changes one (a claim, an outcome,
a retry, a cancel, a fork...), with no round trip of its own: a run's creation adds to
one row per grain (minute, hour, day), its end moves it (two per grain), a task call's
end adds to one per grain (hour, day).

On PostgreSQL, runs that end at once in one minute, of one workflow, with durations in
one bin, would all update one row and wait on its lock until each commits; so each
connection writes to one of `SHARDS` rows (by backend pid) and readers add them up. On
SQLite writers are serialized anyway: one shard.

Durations are binned on whole microseconds, so the bin of a duration is the same in
Python, SQLite and PostgreSQL: they all compute ``floor(seconds * 1e6)`` the same way
and compare integers.
"""

from __future__ import annotations

import sqlalchemy as sa

from durable.core.tallies import (
    BINNED,
    BOUNDS_US,
    GRAINS,
    OPEN,
    RETRIED,
    TASK_ENDS,
    TASK_GRAINS,
    TERMINAL,
)

from ._schema import Execute, create_table, metadata

#: How many rows share the counts of one key on PostgreSQL (see the module docstring).
SHARDS = 4

tallies = sa.Table(
    "durable_tallies",
    metadata,
    sa.Column("grain", sa.Integer, primary_key=True),
    sa.Column("bucket", sa.Double, primary_key=True),
    sa.Column("kind", sa.Text, primary_key=True),
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("workflow", sa.Text, primary_key=True),
    sa.Column("status", sa.Text, primary_key=True),
    sa.Column("bin", sa.Integer, primary_key=True),
    sa.Column("shard", sa.Integer, primary_key=True),
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("seconds", sa.Double, nullable=False),
    sa.Column("last_at", sa.Double),
    sqlite_with_rowid=False,
)

_KEY = "grain, bucket, kind, name, workflow, status, bin, shard"
_COLUMNS = f"{_KEY}, n, seconds, last_at"


def _one_of(value: str, statuses: tuple[str, ...]) -> str:
    """*value* is one of *statuses*: equalities, not ``IN (...)``, which SQLite answers
    from a temporary index it builds at each firing of a trigger (a page cache of its
    own: 150-200 us a firing, most of it the allocator growing and trimming the heap)."""
    return "(" + " OR ".join(f"{value} = '{status}'" for status in statuses) + ")"


#: SQLite's bounds, a row each: the bin of a duration is the row of the first bound at or
#: above it (`bisect_left`), found by one seek in the table's integer key.
BOUNDS_TABLE = "durable_tally_bins"


class _Dialect:
    """The few expressions that differ between SQLite and PostgreSQL."""

    def __init__(self, dialect: sa.Dialect) -> None:
        self.postgres = dialect.name == "postgresql"

    def floor(self, value: str) -> str:
        # SQLite has no floor() without its math extension; CAST truncates, which is
        # floor for the positive values bucketed here (a negative duration is bin 0
        # either way).
        return f"floor({value})" if self.postgres else f"CAST({value} AS INTEGER)"

    def bucket(self, at: str, grain: str) -> str:
        return f"{self.floor(f'({at}) / {grain}')} * {grain}"

    def shard(self) -> str:
        return f"pg_backend_pid() % {SHARDS}" if self.postgres else "0"

    def upsert(self, select: str) -> str:
        """INSERT the rows of *select* (``WHERE`` included), adding to existing ones."""
        t = tallies.name
        later = f"CASE WHEN {t}.last_at IS NULL OR excluded.last_at > {t}.last_at"
        return (
            f"INSERT INTO {t} ({_COLUMNS}) {select} ON CONFLICT ({_KEY}) DO UPDATE SET "
            f"n = {t}.n + excluded.n, seconds = {t}.seconds + excluded.seconds, "
            f"last_at = {later} THEN excluded.last_at ELSE {t}.last_at END"
        )

    def _select(self, values: list[str], rest: str) -> str:
        """``SELECT`` *values* named as the table's columns, then *rest*."""
        names = _COLUMNS.split(", ")
        return (
            "SELECT " + ", ".join(f"{v} AS {n}" for v, n in zip(values, names, strict=True)) + rest
        )

    def _binned(self, timed: str, seconds: str) -> str:
        """The bin of *seconds* in tallies of the binned grain (``g.grain``), else -1."""
        micros = self.floor(f"{seconds} * 1000000")
        return f"CASE WHEN {timed} AND g.grain = {BINNED} THEN {self._bin(micros)} ELSE -1 END"

    def _bin(self, micros: str) -> str:
        """The bin of *micros*: the number of bounds below it (`bisect_left`), the last
        bin at most. PostgreSQL finds it with width_bucket (a binary search over an
        array); SQLite, which has no such function, seeks it in `BOUNDS_TABLE`. Not a
        bisecting CASE: PL/pgSQL planned it at each call (350 us), and SQLite compiled
        its 181 branches into every statement that fires a trigger (6,200 instructions
        for a run's outcome, whose frame it allocated and set up at each call: 40-220
        us, the more as the allocator handed the big frame back to the system)."""
        last = len(BOUNDS_US) - 1
        if not self.postgres:
            return (
                f"coalesce((SELECT b.bin FROM {BOUNDS_TABLE} AS b WHERE b.upper_us >= "
                f"{micros} ORDER BY b.upper_us LIMIT 1), {last})"
            )
        bounds = "{" + ",".join(map(str, BOUNDS_US)) + "}"
        return f"LEAST(width_bucket(({micros})::bigint - 1, '{bounds}'::bigint[]), {last})"

    @staticmethod
    def _grains(grains: tuple[int, ...]) -> str:
        return "(" + " UNION ALL ".join(f"SELECT {grain} AS grain" for grain in grains) + ")"

    def _values(
        self, row: str, sign: int, *, at: str, kind: str, name: str, workflow: str,
        status: str, timed: str, seconds: str,
    ) -> list[str]:  # fmt: skip
        """The columns of a tally row for trigger row *row* counted *sign* times:
        bucketed at *at*, its duration *seconds* counted where *timed*."""
        return [
            "g.grain",
            self.bucket(at, "g.grain"),
            kind,
            name,
            workflow,
            status,
            self._binned(timed, seconds),
            self.shard(),
            str(sign),
            f"CASE WHEN {timed} THEN {sign} * {seconds} ELSE 0 END",
            f"CASE WHEN {timed} AND {sign} > 0 THEN {row}.finished_at END",
        ]

    def run_rows(self, row: str, sign: int, source: str = "") -> str:
        """The SELECT of a run's tallies (every grain) for trigger row *row* (NEW or
        OLD), counted *sign* times; *source* joins a table that *row* names."""
        ended = f"({_one_of(f'{row}.status', TERMINAL)} AND {row}.finished_at IS NOT NULL)"
        seconds = f"({row}.finished_at - coalesce({row}.started_at, {row}.created_at))"
        values = self._values(
            row, sign, at=f"{row}.created_at", kind="'run'", name=f"{row}.workflow",
            workflow=f"{row}.workflow", status=_run_class(row), timed=ended, seconds=seconds,
        )  # fmt: skip
        return self._select(values, f" FROM {self._grains(GRAINS)} AS g{source} WHERE 1 = 1")

    def task_rows(self, row: str, sign: int, source: str = "") -> str:
        """The SELECT of a task call's tallies (hours, days) for trigger row *row*,
        counted *sign* times, if it is a task call that ended; *source* joins a table
        that *row* names."""
        timed = f"({row}.finished_at IS NOT NULL)"
        seconds = f"({row}.finished_at - {row}.started_at)"
        workflow = f"(SELECT r.workflow FROM durable_runs AS r WHERE r.id = {row}.run_id)"
        values = self._values(
            row, sign, at=f"{row}.started_at", kind="'task'", name=f"{row}.name",
            workflow=f"coalesce({workflow}, '')", status=f"{row}.status", timed=timed,
            seconds=seconds,
        )  # fmt: skip
        return self._select(
            values,
            f" FROM {self._grains(TASK_GRAINS)} AS g{source} WHERE {row}.kind = 'task' "
            f"AND {_one_of(f'{row}.status', TASK_ENDS)} AND {row}.started_at IS NOT NULL",
        )

    def attempt_rows(self, row: str, kind: str, status: str, sign: int, source: str = "") -> str:
        """The SELECT of the tallies of an attempt an operator's retry erased (trigger
        row *row* of ``durable_attempts``, of *kind*), under *status*, *sign* times;
        *source* joins a table that *row* names."""
        timed = f"({row}.finished_at IS NOT NULL AND {row}.started_at IS NOT NULL)"
        seconds = f"({row}.finished_at - {row}.started_at)"
        grains: tuple[int, ...] = GRAINS
        if kind == "run":
            at = f"(SELECT r.created_at FROM durable_runs AS r WHERE r.id = {row}.run_id)"
        else:
            at, grains = f"{row}.started_at", TASK_GRAINS
        values = self._values(
            row, sign, at=at, kind=f"'{kind}'", name=f"{row}.name", workflow=f"{row}.workflow",
            status=f"'{status}'", timed=timed, seconds=seconds,
        )  # fmt: skip
        return self._select(
            values,
            f" FROM {self._grains(grains)} AS g{source} WHERE {row}.kind = '{kind}' "
            f"AND {row}.started_at IS NOT NULL AND {at} IS NOT NULL",
        )


def _run_class(row: str) -> str:
    return f"CASE WHEN {_one_of(f'{row}.status', TERMINAL)} THEN {row}.status ELSE '{OPEN}' END"


def _triggers(sql: _Dialect) -> dict[str, tuple[str, str, list[str]]]:
    """Each trigger: (its event, the condition it runs on, its statements). A firing
    runs one statement where it can: a move takes the old row's tallies back and adds
    the new one's in one upsert (their keys differ: their statuses do), and a task call
    that ends (the common move) is told from one that moves between two ends by the
    triggers' conditions, not by a statement that selects nothing."""
    moved = f"{_run_class('OLD')} <> {_run_class('NEW')}"
    ended = f"NEW.kind = 'task' AND {_one_of('NEW.status', TASK_ENDS)}"
    was_ended = _one_of("OLD.status", TASK_ENDS)
    return {
        "durable_tally_run_created": (
            "INSERT ON durable_runs",
            "1 = 1",
            [sql.upsert(sql.run_rows("NEW", 1))],
        ),
        "durable_tally_run_moved": (
            "UPDATE OF status ON durable_runs",
            moved,
            [sql.upsert(f"{sql.run_rows('OLD', -1)} UNION ALL {sql.run_rows('NEW', 1)}")],
        ),
        "durable_tally_task_recorded": (
            "INSERT ON durable_history",
            ended,
            [sql.upsert(sql.task_rows("NEW", 1))],
        ),
        "durable_tally_task_ended": (
            "UPDATE OF status ON durable_history",
            f"{ended} AND NOT {was_ended}",
            [sql.upsert(sql.task_rows("NEW", 1))],
        ),
        "durable_tally_task_moved": (
            "UPDATE OF status ON durable_history",
            f"NEW.kind = 'task' AND OLD.status <> NEW.status AND {was_ended}",
            [sql.upsert(f"{sql.task_rows('OLD', -1)} UNION ALL {sql.task_rows('NEW', 1)}")],
        ),
        # An operator's retry keeps the attempts it erases: a failed run (whose move
        # back to open took its failure away) or a failed task call (about to be
        # deleted) counts on as `RETRIED`: a failure, but not another run or call.
        "durable_tally_retried": (
            "INSERT ON durable_attempts",
            "1 = 1",
            [
                sql.upsert(sql.attempt_rows("NEW", "run", RETRIED, 1)),
                sql.upsert(sql.attempt_rows("NEW", "task", "failed", -1)),
                sql.upsert(sql.attempt_rows("NEW", "task", RETRIED, 1)),
            ],
        ),
    }


def create_tallies(dialect: sa.Dialect, execute: Execute) -> None:
    """The tallies table and its triggers (a new database, or an older version's, whose
    triggers are replaced)."""
    create_table(tallies, dialect, execute)
    sql = _Dialect(dialect)
    if not sql.postgres:
        execute(
            f"CREATE TABLE IF NOT EXISTS {BOUNDS_TABLE} "
            "(upper_us INTEGER PRIMARY KEY, bin INTEGER NOT NULL)"
        )
        rows = ", ".join(f"({bound}, {i})" for i, bound in enumerate(BOUNDS_US))
        execute(f"INSERT OR REPLACE INTO {BOUNDS_TABLE} (upper_us, bin) VALUES {rows}")
    for name, (event, condition, body) in _triggers(sql).items():
        if not sql.postgres:
            statements = "".join(f"{statement};\n" for statement in body)
            execute(f"DROP TRIGGER IF EXISTS {name}")
            execute(f"CREATE TRIGGER {name} AFTER {event} WHEN {condition}\nBEGIN\n{statements}END")
            continue
        statements = "".join(f"  {statement};\n" for statement in body)
        execute(
            # The schema the database was created in, whatever the writer's search_path
            # (an application's connection inserting runs in its own transaction).
            f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql "
            "SET search_path FROM CURRENT AS $$\n"
            f"BEGIN\n{statements}  RETURN NULL;\nEND $$"
        )
        table = event.split(" ON ")[1]
        execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
        execute(
            f"CREATE TRIGGER {name} AFTER {event} FOR EACH ROW WHEN ({condition}) "
            f"EXECUTE FUNCTION {name}()"
        )


def backfill(dialect: sa.Dialect, execute: Execute) -> None:
    """Tally the runs, task calls and erased attempts a database already holds (version
    16's), as the triggers would have: added up first, since one upsert may not touch a
    row twice. (An erased task call's step is gone already: nothing to take back.)"""
    sql = _Dialect(dialect)
    total = "sum(n), sum(seconds), max(last_at)"
    for rows in (
        sql.run_rows("r", 1, source=", durable_runs AS r"),
        sql.task_rows("h", 1, source=", durable_history AS h"),
        sql.attempt_rows("a", "run", RETRIED, 1, source=", durable_attempts AS a"),
        sql.attempt_rows("a", "task", RETRIED, 1, source=", durable_attempts AS a"),
    ):
        execute(
            sql.upsert(f"SELECT {_KEY}, {total} FROM ({rows}) AS x WHERE 1 = 1 GROUP BY {_KEY}")
        )
