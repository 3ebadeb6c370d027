"""What operating a big database costs: ``python benchmarks/operate.py [--quick]``.

One JSON line per backend (SQLite, PostgreSQL) on stdout; progress on stderr. Each
backend gets a fresh database holding N runs (1,000,000; 500 with --quick) of 4
workflows, created evenly over the last 7 days, each with 2 recorded task steps; 90 %
completed, 5 % failed, 5 % queued. They are made by bulk inserts (one INSERT ...
SELECT per table, this script's own SQL), not one workflow at a time; the database's
triggers tally them as they go (a version without tallies simply has none). Then every
read the CLI, the REST API and the dashboard make is timed through
`durable.ops.Operations` (median and max of 20 calls, in ms; ``DURABLE_BENCH_REPEAT``
changes the 20, for a version whose reads take seconds):

* list_first_page: ``durable ls`` / the dashboard's runs list (50 newest).
* list_failed, list_workflow: the same page filtered by status, by workflow.
* list_page_100: the 100th page through cursors (keyset paging: as cheap as the first).
* count_all, count_failed: the count the bulk forms print before acting.
* run_with_history: a run page (the run, its children and its history).
* stats_7d: ``durable stats`` over every run and task of the last 7 days;
  stats_workflow: ``durable stats --workflow`` (one workflow and its tasks).
* task_stats: one task's statistics, as the dashboard's step panel shows them.
* overview, workflows: the dashboard's overview and workflows pages (where the
  version under test has them).

The dashboard refreshes its page every 5 s while visible (or on each change, with
live updates), so these are what a refresh costs the database.

``--runs N`` changes N; the script runs unchanged against an older checkout (for a
before-and-after), timing what that version has.

Then ``attributes``: M more runs (1,000,000; 2,000 with --quick; ``--attribute-runs``,
0 to skip) are added by bulk inserts, each with three attributes: ``customer`` (M / 10
customers, 10 runs each), ``region`` (4 values, M / 4 runs each) and ``n`` (an int,
1,000 values). PostgreSQL is vacuumed and analyzed after each load (as autovacuum
would); SQLite is left without statistics, as durable leaves it.
Timed, median and max of 20 calls in ms:

* lookup: `Backend.list_runs` of one customer's runs (``durable ls --attr
  customer=c-4242`` without the page's attributes): the 10 ms target on PostgreSQL;
* list_customer: `Operations.list_runs` of the same (what the CLI and API answer: the
  page and its runs' attributes);
* list_customer_region: two filters (ANDed);
* list_region: a common value, 50 newest of M / 4;
* count_customer: the count a bulk action prints first.
"""

from __future__ import annotations

import sys

# The benchmarks directory holds queue.py, which would shadow the standard library.
sys.path[:] = [p for p in sys.path if p != __file__.rsplit("/", 1)[0]]

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import durable
from durable.core.records import RunQuery
from durable.ops import Operations

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
WORKFLOWS = [f"bench.flow{i}" for i in range(4)]
REPEAT = 20


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def series(postgres: bool, total: int) -> tuple[str, str]:
    """(the WITH prefix, the FROM clause) of the integers 0..total-1 as ``i``."""
    if postgres:
        return "", f"FROM generate_series(0, {total - 1}) AS s(i)"
    last = total - 1
    prefix = f"WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < {last}) "
    return prefix, "FROM s"


def fill(engine: durable.Engine, total: int) -> None:
    """Create *total* runs of 4 workflows created evenly over the last 7 days, each with
    2 task steps taking 0 to 3 s (90 % completed, 5 % failed, 5 % still queued), by
    bulk inserts (one INSERT ... SELECT per table, this script's own SQL). The
    database's triggers tally the runs as they would one at a time (if it has them),
    and `count_calls` their task calls."""
    postgres = engine.backend.dialect_name == "postgresql"  # type: ignore[attr-defined]
    prefix, rows = series(postgres, total)
    week = 7 * 24 * 3600.0
    base = time.time() - week
    step = week / total
    if postgres:
        run_id = "'run-' || lpad(i::text, 7, '0')"
        workflow = "'bench.flow' || (i % 4)"
        blob = "decode('6a5b5d', 'hex')"
    else:
        run_id = "printf('run-%07d', i)"
        workflow = "'bench.flow' || (i % 4)"
        blob = "X'6a5b5d'"
    created = f"({base} + i * {step})"
    took = "((i % 997) * 0.003)"
    status = "CASE i % 20 WHEN 0 THEN 'queued' WHEN 1 THEN 'failed' ELSE 'completed' END"
    started = f"CASE WHEN i % 20 = 0 THEN NULL ELSE {created} + 0.001 END"
    finished = f"CASE WHEN i % 20 = 0 THEN NULL ELSE {created} + 0.002 + 2 * {took} END"
    statements = [
        (
            "runs",
            f"{prefix}INSERT INTO durable_runs (id, workflow, status, input, call_hash, epoch, "
            "recoveries, created_at, updated_at, started_at, finished_at) "
            f"SELECT {run_id}, {workflow}, {status}, {blob}, 'v1:00', "
            f"CASE WHEN i % 20 = 0 THEN 0 ELSE 1 END, 0, {created}, {created}, {started}, "
            f"{finished} {rows}",
        ),
        *(
            (
                f"task steps at {position}",
                f"{prefix}INSERT INTO durable_history (run_id, position, kind, name, call_hash, "
                "status, output, error, attempts, started_at, finished_at, epoch) "
                f"SELECT {run_id}, {position}, 'task', 'bench.task{position}', 'v1:0{position}', "
                f"{failing}, NULL, NULL, 1, {created} + 0.001 + {position} * {took}, "
                f"{created} + 0.001 + {position + 1} * {took}, 1 {rows} WHERE i % 20 <> 0",
            )
            for position, failing in (
                (0, "'completed'"),
                (1, "CASE WHEN i % 20 = 1 THEN 'failed' ELSE 'completed' END"),
            )
        ),
    ]
    statements += count_calls(engine)
    if postgres:
        statements.append(("vacuum and statistics", "VACUUM ANALYZE"))
    load(engine, statements)


def count_calls(engine: durable.Engine) -> list[tuple[str, str]]:
    """The statements that tally the task calls just inserted, and mark them counted:
    the engine's writes have a run's calls counted by the move that ends its execution,
    and a bulk insert of ended runs and their calls makes no such move."""
    from durable.backends._tally_sql import TALLIED, TallySQL

    sql = TallySQL(engine.backend._dialect)  # type: ignore[attr-defined]
    rows = sql.task_rows("h", 1, source=", durable_history AS h") + f" AND h.{TALLIED} IS NULL"
    return [
        ("task calls counted", sql.upsert_grouped(rows)),
        ("and marked so", f"UPDATE durable_history SET {TALLIED} = 1 WHERE {TALLIED} IS NULL"),
    ]


def load(engine: durable.Engine, statements: list[tuple[str, str]]) -> None:
    """Run each of *statements* in its own transaction (VACUUM outside one), logging
    how long each took."""

    def body(session: Any, _retried: bool) -> None:
        for what, statement in statements:
            began = time.perf_counter()
            if statement == "VACUUM ANALYZE":
                session.execute(statement, ())
            else:
                with engine.backend._db.transaction(session):  # type: ignore[attr-defined]
                    session.execute(statement, ())
            log(f"  {what}: {time.perf_counter() - began:.1f} s")

    engine.backend._db.run("Loading the benchmark", body)  # type: ignore[attr-defined]


def fill_attributes(engine: durable.Engine, total: int) -> None:
    """Add *total* finished runs with three attributes each, by bulk inserts."""
    base = time.time() - total * 0.001 - 60
    postgres = engine.backend.dialect_name == "postgresql"  # type: ignore[attr-defined]
    customers = max(1, total // 10)
    prefix, rows = series(postgres, total)
    if postgres:
        run_id = "'attr-' || lpad(i::text, 7, '0')"
        blob = "decode('6a5b5d', 'hex')"
        region = "(ARRAY['eu', 'us', 'ap', 'sa'])[i % 4 + 1]"
    else:
        run_id = "printf('attr-%07d', i)"
        blob = "X'6a5b5d'"
        region = "CASE i % 4 WHEN 0 THEN 'eu' WHEN 1 THEN 'us' WHEN 2 THEN 'ap' ELSE 'sa' END"
    at = f"{base} + i * 0.001"
    into_attributes = f"{prefix}INSERT INTO durable_run_attributes (run_id, key, value, type)"
    statements = [
        (
            "runs",
            f"{prefix}INSERT INTO durable_runs (id, workflow, status, input, call_hash, epoch, "
            "recoveries, created_at, updated_at, started_at, finished_at) "
            f"SELECT {run_id}, 'bench.tagged', 'completed', {blob}, 'v1:00', 1, 0, {at}, {at}, "
            f"{at}, {at} {rows}",
        ),
        *(
            (
                f"attribute {key}",
                f"{into_attributes} SELECT {run_id}, '{key}', {value}, '{kind}' {rows}",
            )
            for key, value, kind in (
                ("customer", f"'c-' || (i % {customers})", "s"),
                ("region", region, "s"),
                ("n", "(i % 1000)", "i"),
            )
        ),
    ]
    if postgres:
        statements.append(("vacuum and statistics", "VACUUM ANALYZE"))
    load(engine, statements)


def attribute_lookups(engine: durable.Engine, ops: Operations, total: int) -> dict[str, Any]:
    """Fill *total* runs with attributes and time the lookups by them."""
    began = time.perf_counter()
    fill_attributes(engine, total)
    log(f"  {total:,} runs with attributes in {time.perf_counter() - began:.1f} s; timing")
    customer = f"c-{4242 % max(1, total // 10)}"
    query = RunQuery(attributes=(("customer", customer),))
    found = engine.backend.list_runs(query, limit=50)
    assert len(found) == min(10, total), f"{len(found)} runs of {customer}"
    both = {"customer": customer, "region": "ap"}  # c-4242's runs: i % 4 == 2
    assert ops.list_runs(attributes=both, limit=50)["items"], "the AND finds runs"
    return {
        "runs": total,
        "lookup": timed(lambda: engine.backend.list_runs(query, limit=50)),
        "list_customer": timed(lambda: ops.list_runs(attributes={"customer": customer})),
        "list_customer_region": timed(lambda: ops.list_runs(attributes=both)),
        "list_region": timed(lambda: ops.list_runs(attributes={"region": "eu"}, limit=50)),
        "count_customer": timed(lambda: ops.count_runs(attributes={"customer": customer})),
    }


def timed(call: Callable[[], Any]) -> dict[str, float]:
    repeat = int(os.environ.get("DURABLE_BENCH_REPEAT", REPEAT))
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        call()
        samples.append((time.perf_counter() - began) * 1000)
    return {"median": round(statistics.median(samples), 2), "max": round(max(samples), 2)}


def pages(ops: Operations) -> dict[str, Any]:
    """The overview and the workflows page, where this version has them."""
    found = {}
    if hasattr(ops, "overview"):
        found["overview"] = timed(ops.overview)
    if hasattr(ops, "workflows"):
        found["workflows"] = timed(ops.workflows)
    return found


def measure(url: str, total: int, tagged: int) -> dict[str, Any]:
    engine = durable.Engine(url)
    try:
        began = time.perf_counter()
        fill(engine, total)
        ops = Operations(engine)
        log(f"  filled in {time.perf_counter() - began:.1f} s; timing reads")
        cursor = None
        for _ in range(min(99, total // 50 - 1)):
            cursor = ops.list_runs(limit=50, cursor=cursor)["next_cursor"]
        middle = f"run-{total // 2 + 2:07d}"
        return {
            "runs": total,
            "list_first_page": timed(lambda: ops.list_runs(limit=50)),
            "list_failed": timed(lambda: ops.list_runs(status=["failed"], limit=50)),
            "list_workflow": timed(lambda: ops.list_runs(workflow=WORKFLOWS[1], limit=50)),
            "list_page_100": timed(lambda: ops.list_runs(limit=50, cursor=cursor)),
            "count_all": timed(ops.count_runs),
            "count_failed": timed(lambda: ops.count_runs(status=["failed"])),
            "run_with_history": timed(lambda: (ops.get_run(middle), ops.history(middle))),
            "stats_7d": timed(ops.stats),
            "stats_workflow": timed(lambda: ops.stats(workflow=WORKFLOWS[1])),
            "task_stats": timed(lambda: ops.task_stats("bench.task1")),
            **pages(ops),
            "attributes": attribute_lookups(engine, ops, tagged) if tagged else None,
        }
    finally:
        engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 runs: a smoke test")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--tmpdir", default=None)
    parser.add_argument("--runs", type=int, default=None, metavar="N")
    parser.add_argument("--attribute-runs", type=int, default=None, metavar="M")
    args = parser.parse_args()
    total = args.runs or (500 if args.quick else 1_000_000)
    tagged = args.attribute_runs
    if tagged is None:
        tagged = 2_000 if args.quick else 1_000_000
    pg = os.environ.get("DURABLE_BENCH_POSTGRES_URL", DEFAULT_PG)
    for backend in args.backends.split(","):
        log(f"{backend}: {total:,} runs")
        if backend == "sqlite":
            with tempfile.TemporaryDirectory(dir=args.tmpdir) as tmp:
                result = measure(f"sqlite:///{Path(tmp) / 'operate.db'}", total, tagged)
            name = "sqlite"
        else:
            import psycopg

            schema = f"bench_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(pg, autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA {schema}")
            try:
                result = measure(f"{pg}?options=-csearch_path%3D{schema}", total, tagged)
            finally:
                with psycopg.connect(pg, autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA {schema} CASCADE")
            name = "postgresql"
        print(json.dumps({"benchmark": "operate", "backend": name, **result}), flush=True)


if __name__ == "__main__":
    main()
