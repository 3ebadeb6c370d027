"""Queue throughput and latency: ``python benchmarks/queue.py [--quick]``.

One JSON line per backend (SQLite, PostgreSQL) on stdout; progress on stderr. Each
backend gets a fresh database and two `durable worker` processes (16 slots each).

* Throughput: N workflows of 3 no-op tasks (2,000; 200 with --quick) are dispatched
  first, then the workers start and drain them. workflows_per_s is N divided by the
  time from the first run starting to the last one finishing (database timestamps).
* Latency: with the workers idle and waiting, M more workflows (500; 50 with --quick)
  are dispatched at a steady 200 per second. latency_ms is dispatch to finish and
  pickup_ms dispatch to a worker starting the run, p50 and p99.

The issue's targets (2-core machine): >= 1,000 workflows/s on PostgreSQL with 2
workers, and p50 pickup under 20 ms with LISTEN/NOTIFY.
"""

from __future__ import annotations

import sys

# benchmarks/queue.py shares its name with the standard library's queue module, and
# Python puts a script's directory first on sys.path: take it off before importing.
sys.path[:] = [p for p in sys.path if p != __file__.rsplit("/", 1)[0]]

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
APP = HERE / "_queue_app.py"
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
RATE = 200  # paced dispatches per second, for the latency phase
TARGETS = {"workflows_per_s_postgresql": 1000, "pickup_p50_ms_postgresql": 20}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            return conn.execute(sql).fetchall()
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql).fetchall()


def start_workers(
    url: str, count: int, concurrency: int, logs: Path
) -> list[subprocess.Popen[bytes]]:
    workers = []
    for i in range(count):
        with (logs / f"worker-{i}.log").open("w") as out:
            workers.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "durable",
                        "worker",
                        str(APP),
                        "--db",
                        url,
                        "--concurrency",
                        str(concurrency),
                        "--log-level",
                        "WARNING",
                    ],
                    stdout=out,
                    stderr=out,
                )
            )
    return workers


def measure(
    backend: str, url: str, *, n: int, m: int, concurrency: int, logs: Path
) -> dict[str, Any]:
    import importlib.util

    import durable

    spec = importlib.util.spec_from_file_location("_queue_app", APP)
    assert spec and spec.loader
    app = importlib.util.module_from_spec(spec)
    sys.modules["_queue_app"] = app
    spec.loader.exec_module(app)
    engine = durable.configure(url)
    try:
        started = time.perf_counter()
        for i in range(n):
            durable.dispatch(app.noop3, i, id=f"bulk-{i}")
        dispatch_s = time.perf_counter() - started
        log(f"  {backend}: dispatched {n} in {dispatch_s:.2f}s; starting the workers")
        workers = start_workers(url, 2, concurrency, logs)
        try:
            wait_done(url, "bulk-%", n)
            log(f"  {backend}: drained; measuring latency at {RATE}/s")
            time.sleep(1.0)  # the workers go idle, waiting on notifications or polls
            for i in range(m):
                durable.dispatch(app.noop3, i, id=f"paced-{i}")
                time.sleep(1 / RATE)
            wait_done(url, "paced-%", m)
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            for worker in workers:
                worker.wait(60)
    finally:
        engine.close()
    bulk = rows(
        url, "SELECT created_at, started_at, finished_at FROM durable_runs WHERE id LIKE 'bulk-%'"
    )
    paced = rows(
        url, "SELECT created_at, started_at, finished_at FROM durable_runs WHERE id LIKE 'paced-%'"
    )
    drain_s = max(t[2] for t in bulk) - min(t[1] for t in bulk)
    latency = [(t[2] - t[0]) * 1000 for t in paced]
    pickup = [(t[1] - t[0]) * 1000 for t in paced]
    result: dict[str, Any] = {
        "backend": backend,
        "workflows": n,
        "tasks_per_workflow": 3,
        "workers": 2,
        "concurrency_per_worker": concurrency,
        "dispatch_per_s": round(n / dispatch_s),
        "drain_s": round(drain_s, 2),
        "workflows_per_s": round(n / drain_s),
        "paced_workflows": m,
        "paced_rate_per_s": RATE,
        "latency_ms": {
            "p50": round(percentile(latency, 0.5), 1),
            "p99": round(percentile(latency, 0.99), 1),
        },
        "pickup_ms": {
            "p50": round(percentile(pickup, 0.5), 1),
            "p99": round(percentile(pickup, 0.99), 1),
        },
        "targets": TARGETS,
    }
    if backend == "postgresql":
        result["meets_targets"] = {
            "workflows_per_s": result["workflows_per_s"] >= TARGETS["workflows_per_s_postgresql"],
            "pickup_p50_ms": result["pickup_ms"]["p50"] < TARGETS["pickup_p50_ms_postgresql"],
        }
    return result


def wait_done(url: str, pattern: str, count: int) -> None:
    deadline = time.monotonic() + 300
    sql = f"SELECT count(*) FROM durable_runs WHERE status = 'completed' AND id LIKE '{pattern}'"
    while rows(url, sql)[0][0] < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"the workers did not finish {pattern} in time")
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--quick", action="store_true", help="200 workflows: a smoke test")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--postgres-url", default=os.environ.get("DURABLE_BENCH_POSTGRES_URL", DEFAULT_PG)
    )
    parser.add_argument("--tmpdir", help="where SQLite files go: a real disk, not tmpfs")
    args = parser.parse_args()
    n, m = (200, 50) if args.quick else (2000, 500)
    with tempfile.TemporaryDirectory(prefix="durable-queue-", dir=args.tmpdir) as tmp:
        for backend in args.backends.split(","):
            logs = Path(tmp) / backend
            logs.mkdir()
            if backend == "sqlite":
                print(
                    json.dumps(
                        measure(
                            "sqlite",
                            f"sqlite:///{tmp}/queue.db",
                            n=n,
                            m=m,
                            concurrency=args.concurrency,
                            logs=logs,
                        )
                    ),
                    flush=True,
                )
                continue
            import psycopg

            schema = f"bench_{uuid.uuid4().hex[:10]}"
            with psycopg.connect(args.postgres_url, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{schema}"')
            try:
                sep = "&" if "?" in args.postgres_url else "?"
                url = f"{args.postgres_url}{sep}options=-csearch_path%3D{schema}"
                print(
                    json.dumps(
                        measure(
                            "postgresql", url, n=n, m=m, concurrency=args.concurrency, logs=logs
                        )
                    ),
                    flush=True,
                )
            finally:
                with psycopg.connect(args.postgres_url, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


if __name__ == "__main__":
    main()
