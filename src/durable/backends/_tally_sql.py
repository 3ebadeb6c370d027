"""The SQL of tallies: their table, and the SELECTs that compute the tally rows of a
run, a task call and an erased attempt, in SQLite's and PostgreSQL's words (what
`durable.core.tallies` computes in Python). `_tallies_schema` builds the triggers
from them.

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
    TASK_ENDS,
    TASK_GRAINS,
    TERMINAL,
)

from ._schema import metadata

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

KEY = "grain, bucket, kind, name, workflow, status, bin, shard"
_COLUMNS = f"{KEY}, n, seconds, last_at"


def one_of(value: str, statuses: tuple[str, ...]) -> str:
    """*value* is one of *statuses*: equalities, not ``IN (...)``, which SQLite answers
    from a temporary index it builds at each firing of a trigger (a page cache of its
    own: 150-200 us a firing, most of it the allocator growing and trimming the heap)."""
    return "(" + " OR ".join(f"{value} = '{status}'" for status in statuses) + ")"


#: The column of ``durable_history`` that marks a task call counted (1; NULL: not yet).
#: Not in `durable.backends._schema.history`: only the tallies' triggers read or write it.
TALLIED = "tallied"

#: SQLite's bounds, a row each: the bin of a duration is the row of the first bound at or
#: above it (`bisect_left`), found by one seek in the table's integer key.
BOUNDS_TABLE = "durable_tally_bins"


class TallySQL:
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
            f"INSERT INTO {t} ({_COLUMNS}) {select} ON CONFLICT ({KEY}) DO UPDATE SET "
            f"n = {t}.n + excluded.n, seconds = {t}.seconds + excluded.seconds, "
            f"last_at = {later} THEN excluded.last_at ELSE {t}.last_at END"
        )

    def upsert_grouped(self, rows: str) -> str:
        """`upsert` the tally rows *rows* (a SELECT of ``_COLUMNS``) added up by key
        first, since one upsert may not touch a row twice."""
        total = "sum(n), sum(seconds), max(last_at)"
        return self.upsert(f"SELECT {KEY}, {total} FROM ({rows}) AS x WHERE 1 = 1 GROUP BY {KEY}")

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
        ended = f"({one_of(f'{row}.status', TERMINAL)} AND {row}.finished_at IS NOT NULL)"
        seconds = f"({row}.finished_at - coalesce({row}.started_at, {row}.created_at))"
        values = self._values(
            row, sign, at=f"{row}.created_at", kind="'run'", name=f"{row}.workflow",
            workflow=f"{row}.workflow", status=run_class(row), timed=ended, seconds=seconds,
        )  # fmt: skip
        return self._select(values, f" FROM {self._grains(GRAINS)} AS g{source} WHERE 1 = 1")

    def task_rows(self, row: str, sign: int, source: str = "", workflow: str = "") -> str:
        """The SELECT of a task call's tallies (hours, days) for trigger row *row*,
        counted *sign* times, if it is a task call that ended; *source* joins a table
        that *row* names; *workflow*, the workflow of its run (default: looked up)."""
        timed = f"({row}.finished_at IS NOT NULL)"
        seconds = f"({row}.finished_at - {row}.started_at)"
        workflow = workflow or _workflow_of(f"{row}.run_id")
        values = self._values(
            row, sign, at=f"{row}.started_at", kind="'task'", name=f"{row}.name",
            workflow=workflow, status=f"{row}.status", timed=timed,
            seconds=seconds,
        )  # fmt: skip
        return self._select(
            values,
            f" FROM {self._grains(TASK_GRAINS)} AS g{source} WHERE {row}.kind = 'task' "
            f"AND {one_of(f'{row}.status', TASK_ENDS)} AND {row}.started_at IS NOT NULL",
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

    def count_calls(self, run_id: str, workflow: str = "") -> list[str]:
        """The statements that count the ended task calls of run *run_id* (an SQL
        expression) not counted yet and mark them counted; *workflow*, the run's
        workflow (default: looked up once, not per call). On PostgreSQL one statement (a
        concurrent writer's row is either marked and counted or neither); SQLite, whose
        writers take turns, has no UPDATE in a WITH: two."""
        pending = (
            f"h.run_id = {run_id} AND h.{TALLIED} IS NULL AND h.kind = 'task' "
            f"AND {one_of('h.status', TASK_ENDS)} AND h.started_at IS NOT NULL"
        )
        workflow = workflow or _workflow_of(run_id)
        if self.postgres:  # the rows the UPDATE marked (h, as they are now) are counted
            marked = f"UPDATE durable_history AS h SET {TALLIED} = 1 WHERE {pending} RETURNING h.*"
            counted = self.upsert_grouped(self.task_rows("h", 1, source=", h", workflow=workflow))
            return [f"WITH h AS ({marked}) {counted}"]
        # Not grouped: SQLite's upsert takes the rows one at a time (a later one adds to
        # the row an earlier one made), and a GROUP BY would sort them in a temporary
        # B-tree built at each firing (see `one_of`).
        rows = self.task_rows("h", 1, source=", durable_history AS h", workflow=workflow)
        counted = f"{rows} AND {pending}"
        unqualified = pending.replace("h.", "")
        return [
            self.upsert(counted),
            f"UPDATE durable_history SET {TALLIED} = 1 WHERE {unqualified}",
        ]


def _workflow_of(run_id: str) -> str:
    """The workflow of run *run_id* ('' once it is purged)."""
    return f"coalesce((SELECT r.workflow FROM durable_runs AS r WHERE r.id = {run_id}), '')"


def run_class(row: str) -> str:
    return f"CASE WHEN {one_of(f'{row}.status', TERMINAL)} THEN {row}.status ELSE '{OPEN}' END"
