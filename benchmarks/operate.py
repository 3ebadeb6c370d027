"""What operating a big database costs: ``python benchmarks/operate.py [--quick]``.

One JSON line per backend (SQLite, PostgreSQL) on stdout; progress on stderr. Each
backend gets a fresh database holding N runs (100,000; 500 with --quick) of 4
workflows, each with 2 recorded task steps; 90 % completed, 5 % failed, 5 % queued.
Then every read the CLI, the REST API and the dashboard make is timed through
`durable.ops.Operations` (median and max of 20 calls, in ms):

* list_first_page: ``durable ls`` / the dashboard's runs list (50 newest).
* list_failed, list_workflow: the same page filtered by status, by workflow.
* list_page_100: the 100th page through cursors (keyset paging: as cheap as the first).
* count_all, count_failed: the count the bulk forms print before acting.
* run_with_history: a run page (the run, its children and its history).
* stats_7d: ``durable stats`` over every run and task of the last 7 days.
* task_stats: one task's statistics, as the dashboard's step panel shows them.

The dashboard polls the runs list every 5 s while visible, so list_first_page is
what live refresh costs the database per open tab.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import durable
from durable.core.records import NewRun, RunStatus, Step, StepKind, StepStatus
from durable.ops import Operations

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
WORKFLOWS = [f"bench.flow{i}" for i in range(4)]
REPEAT = 20


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def fill(engine: durable.Engine, total: int) -> None:
    """Create *total* runs with two steps each, through the backend (8 threads)."""
    backend = engine.backend

    def make(i: int) -> None:
        run_id = f"run-{i:07d}"
        owned = i % 20 != 0
        backend.create_run(
            NewRun(
                id=run_id,
                workflow=WORKFLOWS[i % len(WORKFLOWS)],
                input=b'j{"args":[1],"kwargs":{}}',
                call_hash="v1:00",
                owner="bench:1:1:x" if owned else None,
                lease=30.0,
            )
        )
        if not owned:
            return
        failed = i % 20 == 1
        now = backend.now()
        for position in range(2):
            bad = failed and position == 1
            backend.record(
                Step(
                    run_id=run_id,
                    position=position,
                    kind=StepKind.TASK,
                    name=f"bench.task{position}",
                    call_hash=f"v1:{position:02d}",
                    status=StepStatus.FAILED if bad else StepStatus.COMPLETED,
                    output=None if bad else b"j1",
                    error=b'j{"type":"builtins:ValueError","message":"x"}' if bad else None,
                    started_at=now,
                    finished_at=now + 0.01,
                ),
                1,
            )
        status = RunStatus.FAILED if failed else RunStatus.COMPLETED
        backend.finish_run(run_id, 1, status, output=None if failed else b"j1")

    started = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        for done, _ in enumerate(pool.map(make, range(total)), 1):
            if done % 10_000 == 0:
                log(f"  {done:,} runs ({done / (time.perf_counter() - started):,.0f}/s)")


def timed(call: Callable[[], Any]) -> dict[str, float]:
    samples = []
    for _ in range(REPEAT):
        began = time.perf_counter()
        call()
        samples.append((time.perf_counter() - began) * 1000)
    return {"median": round(statistics.median(samples), 2), "max": round(max(samples), 2)}


def measure(url: str, total: int) -> dict[str, Any]:
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
            "task_stats": timed(lambda: ops.task_stats("bench.task1")),
        }
    finally:
        engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 runs: a smoke test")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--tmpdir", default=None)
    args = parser.parse_args()
    total = 500 if args.quick else 100_000
    pg = os.environ.get("DURABLE_BENCH_POSTGRES_URL", DEFAULT_PG)
    for backend in args.backends.split(","):
        log(f"{backend}: {total:,} runs")
        if backend == "sqlite":
            with tempfile.TemporaryDirectory(dir=args.tmpdir) as tmp:
                result = measure(f"sqlite:///{Path(tmp) / 'operate.db'}", total)
            name = "sqlite"
        else:
            import psycopg

            schema = f"bench_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(pg, autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA {schema}")
            try:
                result = measure(f"{pg}?options=-csearch_path%3D{schema}", total)
            finally:
                with psycopg.connect(pg, autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA {schema} CASCADE")
            name = "postgresql"
        print(json.dumps({"benchmark": "operate", "backend": name, **result}), flush=True)


if __name__ == "__main__":
    main()
