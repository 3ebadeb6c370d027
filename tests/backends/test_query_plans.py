"""The plans of statements whose cost depends on how the database reads them.

The statements that walk a run's children find them through the parent index. That
index is partial (only runs that have a parent are in it), so that creating a run
without one writes one b-tree page fewer. A partial index serves only a query whose
WHERE implies the index's own; these tests fail if a rewrite of one of these
statements loses that, and the walk turns into a scan of every run.

A step's pair statement builds no temporary table on SQLite (see
`test_the_pair_builds_no_temporary_table`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durable.backends._statements.base import Statement
from durable.backends._statements.inspection import query_values
from durable.backends.sql import SQLBackend
from durable.core.records import RunQuery
from tests.conftest import PostgresSchemas

#: Cancelling a tree (three statements) and purging: a recursive walk down the tree.
WALKS = ["cancel_now", "cancel_waiting", "cancel_request", "purge_children"]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SQLBackend]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'plans.db'}"
    else:
        schemas: PostgresSchemas = request.getfixturevalue("pg_schemas")
        url = schemas.new_url()
    opened = SQLBackend(url)
    if opened._sql.postgres:
        fill(opened)
    try:
        yield opened
    finally:
        opened.close()


def fill(backend: SQLBackend) -> None:
    """20,000 runs, one in a hundred a child, and statistics: PostgreSQL scans a small
    table whatever its indexes, so the planner needs a reason to choose one."""

    def body(session: Any, _: bool) -> None:
        # Without the tallies' triggers: a PL/pgSQL call per row took 8 s a test, and no
        # plan here reads the tallies.
        session.execute("ALTER TABLE durable_runs DISABLE TRIGGER USER")
        session.execute(
            "INSERT INTO durable_runs (id, workflow, status, input, call_hash, epoch, "
            "recoveries, parent_id, created_at, updated_at) SELECT 'r' || g, 'w', "
            "'completed', '\\x00', 'h', 1, 0, CASE WHEN g % 100 = 0 THEN 'r' || (g - 1) END, "
            "g, g FROM generate_series(1, 20000) g"
        )
        session.execute("ALTER TABLE durable_runs ENABLE TRIGGER USER")
        session.execute("ANALYZE durable_runs")

    backend._db.run("Filling", body)


def explain(backend: SQLBackend, sql: str, params: Any, *, raw: bool = False) -> str:
    """The plan of *sql*, as one string; *raw* (SQLite): its program, an instruction
    a line (opcode, p1, p2, p3...)."""
    if raw:
        return backend._db.run(
            "Explaining",
            lambda session, _: "\n".join(
                " ".join(map(str, row[1:])) for row in session.execute("EXPLAIN " + sql, params)
            ),
        )
    prefix = "EXPLAIN " if backend._sql.postgres else "EXPLAIN QUERY PLAN "
    return backend._db.run(
        "Explaining",
        lambda session, _: "\n".join(str(row[-1]) for row in session.execute(prefix + sql, params)),
    )


def ids(backend: SQLBackend, *names: str) -> Any:
    return list(names) if backend._sql.postgres else json.dumps(names)


@pytest.mark.parametrize("name", WALKS)
def test_walking_a_tree_uses_the_parent_index(backend: SQLBackend, name: str) -> None:
    statement: Statement = getattr(backend._sql, name)
    params = statement.params({"id": "r5", "ids": ids(backend, "r5", "r6")})
    assert "durable_runs_parent" in explain(backend, statement.sql, params)


@pytest.mark.parametrize("count", [False, True], ids=["list", "count"])
def test_listing_children_uses_the_parent_index(backend: SQLBackend, count: bool) -> None:
    values = query_values(RunQuery(parent_id="r5"))
    statement = backend._sql.inspect.listing(values, count=count)
    params = statement.params(dict(values, limit=50))
    assert "durable_runs_parent" in explain(backend, statement.sql, params)


@pytest.mark.parametrize("only", [None, "v2"], ids=["any-version", "only-version"])
def test_the_claim_walks_the_claim_index_with_or_without_a_version(
    backend: SQLBackend, only: str | None
) -> None:
    """A worker's claim reads queued runs through the claim index, in its order, with or
    without --only-version: the version is a filter on that walk, never a scan and sort
    of the whole queue (docs/architecture.md, "One queue per claim")."""
    statement = backend._sql.claim_next
    values = {
        "owner": "o", "lease": 30, "queue": "default", "workflows": ids(backend, "w"),
        "limit": 1, "version": "v2", "only": only,
    }  # fmt: skip
    plan = explain(backend, statement.sql, statement.params(values))
    assert "durable_runs_claim" in plan, plan
    if backend._sql.postgres:
        assert "Sort" not in plan, plan  # the index yields the order; LIMIT stops the walk
    else:
        assert "TEMP B-TREE" not in plan, plan


def test_the_pair_builds_no_temporary_table(tmp_path: Path) -> None:
    """A step's pair statement on SQLite copies nothing into a temporary table: SQLite
    does that for an INSERT whose SELECT reads the table it writes, as a check of the
    two positions did (and answered its IN, or equalities joined by OR, from one more
    temporary B-tree): 39,000 instructions of a 460,000-instruction step. The pair is
    all or nothing by aborting at a finished position instead (see
    `HistoryStatements._define_record_pair`)."""
    opened = SQLBackend(f"sqlite:///{tmp_path / 'pair.db'}")
    try:
        for name in ("record_pair", "record_pair_lean"):
            statement: Statement = getattr(opened._sql, name)
            program = explain(opened, statement.sql, (None,) * len(statement.order), raw=True)
            assert (
                "durable_history" not in statement.sql.split("ON CONFLICT")[0].split("FROM", 1)[1]
            )
            temporary = [op for op in program.splitlines() if op.startswith("OpenEphemeral ")]
            assert temporary == [], (name, temporary)
    finally:
        opened.close()
