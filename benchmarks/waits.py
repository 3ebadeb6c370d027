"""Parked runs, timers and events: ``python benchmarks/waits.py [--quick]``.

One JSON line per backend (SQLite, PostgreSQL) on stdout; progress on stderr. Each
backend gets a fresh database and one `durable worker` process (--concurrency 8).

* Parking: N runs (100,000; 100 with --quick) are dispatched (8 threads, no worker
  running: create_s), each to sleep until its own deadline; then the worker starts and
  parks them (park_s, until every run is WAITING). While they sleep, the worker's
  thread count and RSS are read from /proc. A warm-up of 1,000 runs (N/4 if fewer; N
  with --quick) measures both rates first, to schedule the deadlines after the parking.
* Events: M more runs (200; 3 with --quick) wait for an event; one at a time, an
  event is sent and the time to the run resuming is measured (the workflow records
  `durable.now()` right after its wait). event_latency_ms p50/p99. This happens while
  the N sleepers are parked.
* Wake-ups: the sleepers' deadlines are spread evenly after the parking and event
  phases, at a rate the worker can follow (half its measured parking rate); each run
  records `durable.now()` once it resumes. wake_lag_ms is resume minus deadline.
* env_30_days_ms: a workflow sleeping a day at a time for 30 days, run to completion
  in a `durable.testing.DurableEnv` (memory backend, virtual clock): real time taken.

The issue's targets: no thread per waiting run, worker RSS under 300 MB with 100,000
parked, wake-up lag p99 under 1 s, event latency p50 under 20 ms on PostgreSQL.
"""

from __future__ import annotations

import sys

# The benchmarks directory holds queue.py, which would shadow the standard library.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
APP = HERE / "_waits_app.py"
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
CONCURRENCY = 8
TARGETS = {
    "worker_rss_mb_max": 300,
    "wake_lag_p99_ms_max": 1000,
    "event_latency_p50_ms_postgresql_max": 20,
}


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


def count(url: str, where: str) -> int:
    return int(rows(url, f"SELECT count(*) FROM durable_runs WHERE {where}")[0][0])


def until(condition: Any, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def proc_status(pid: int) -> dict[str, int]:
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("Threads", "VmRSS"):
            values[key] = int(rest.split()[0])
    return values


def start_worker(url: str, logs: Path) -> subprocess.Popen[bytes]:
    with (logs / "worker.log").open("w") as out:
        return subprocess.Popen(
            [
                sys.executable, "-m", "durable", "worker", str(APP), "--db", url,
                "--concurrency", str(CONCURRENCY), "--log-level", "WARNING",
            ],
            stdout=out,
            stderr=out,
        )  # fmt: skip


def stop(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        worker.wait(60)


def load_app() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("_waits_app", APP)
    assert spec and spec.loader
    app = importlib.util.module_from_spec(spec)
    sys.modules["_waits_app"] = app
    spec.loader.exec_module(app)
    return app


def measure(
    backend: str, url: str, *, n: int, m: int, warm: int, logs: Path, pad: float = 5.0
) -> dict[str, Any]:
    import durable

    app = load_app()
    engine = durable.Engine(url)
    worker = None
    try:
        # Warm-up: measure creating and parking, each alone, to schedule the deadlines
        # (they are the runs' arguments, so they are fixed when the runs are created).
        far = time.time() + 10 * 86400
        started = time.perf_counter()
        _dispatch(engine, app.sleeper, [(f"warm-{i}", far) for i in range(warm)])
        create_rate = warm / (time.perf_counter() - started)
        worker = start_worker(url, logs)
        started = time.perf_counter()
        until(lambda: count(url, "status = 'waiting'") >= warm, "the warm-up to park", 600)
        park_rate = warm / (time.perf_counter() - started)
        stop(worker)
        # The sleepers are created with no worker running, then parked by a new one.
        ready_s = (n / create_rate + n / park_rate) * 1.5 + m * 0.2 + 3 * pad
        first_due = time.time() + ready_s
        spread = park_rate / 2
        log(
            f"  {backend}: warm-up: created {create_rate:.0f}/s, parked {park_rate:.0f}/s; "
            f"deadlines from +{ready_s:.0f}s at {spread:.0f}/s"
        )
        deadlines = [(f"nap-{i}", first_due + i / spread) for i in range(n)]
        started = time.perf_counter()
        _dispatch(engine, app.sleeper, deadlines)
        create_s = time.perf_counter() - started
        _dispatch(engine, app.listener, [(f"ear-{i}",) for i in range(m)])
        started = time.perf_counter()
        worker = start_worker(url, logs)
        until(
            lambda: count(url, "status = 'waiting'") >= n + m + warm,
            "every run to park",
            ready_s * 2,
        )
        park_s = time.perf_counter() - started
        log(f"  {backend}: created {n} in {create_s:.1f}s, parked in {park_s:.1f}s")
        parked = proc_status(worker.pid)
        # Events, one at a time, while everything else sleeps.
        latencies = []
        for i in range(m):
            sent = time.time()
            engine.backend.send_event(f"ear-{i}", "go", engine.dump(i, "payload"))
            run = engine.wait_for_run(f"ear-{i}", timeout=60)
            latencies.append((engine.outcome(run) - sent) * 1000)
        log(f"  {backend}: event latency p50 {percentile(latencies, 0.5):.1f} ms")
        if time.time() > first_due:
            log(f"  {backend}: warning: the first deadlines passed before parking finished")
        waking = proc_status(worker.pid)
        until(
            lambda: count(url, "status = 'completed' AND id LIKE 'nap-%'") >= n,
            "the sleepers to wake",
            n / spread + ready_s * 2 + 120,
        )
        lags = [
            (resumed - deadline) * 1000
            for (run_id, deadline), resumed in zip(deadlines, _results(url, n), strict=True)
        ]
    finally:
        if worker is not None:
            stop(worker)
        engine.close()
    result: dict[str, Any] = {
        "backend": backend,
        "parked_runs": n,
        "worker_concurrency": CONCURRENCY,
        "create_s": round(create_s, 1),
        "create_per_s": round(n / create_s),
        "park_s": round(park_s, 1),
        "park_per_s": round(n / park_s),
        "worker_threads_parked": parked["Threads"],
        "worker_rss_mb_parked": round(parked["VmRSS"] / 1024, 1),
        "worker_rss_mb_after_events": round(waking["VmRSS"] / 1024, 1),
        "wake_rate_per_s": round(spread),
        "wake_lag_ms": {
            "p50": round(percentile(lags, 0.5), 1),
            "p99": round(percentile(lags, 0.99), 1),
            "max": round(max(lags), 1),
            "min": round(min(lags), 1),
        },
        "event_runs": m,
        "event_latency_ms": {
            "p50": round(percentile(latencies, 0.5), 1),
            "p99": round(percentile(latencies, 0.99), 1),
        },
        "env_30_days_ms": round(_thirty_days_in_a_test() * 1000, 1),
        "targets": TARGETS,
    }
    result["meets_targets"] = {
        "threads_independent_of_parked_runs": parked["Threads"] < 64,
        "worker_rss": result["worker_rss_mb_parked"] < TARGETS["worker_rss_mb_max"],
        "wake_lag_p99": result["wake_lag_ms"]["p99"] < TARGETS["wake_lag_p99_ms_max"],
        "no_early_wake": min(lags) >= 0,
    }
    if backend == "postgresql":
        result["meets_targets"]["event_latency_p50"] = (
            result["event_latency_ms"]["p50"] < TARGETS["event_latency_p50_ms_postgresql_max"]
        )
    return result


def _dispatch(engine: Any, target: Any, calls: list[tuple[Any, ...]]) -> None:
    """Dispatch from 8 threads, so that inserts share commits (group commit)."""

    def one(call: tuple[Any, ...]) -> None:
        engine.dispatch_call(target.bind(*call[1:]), run_id=call[0])

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, calls, chunksize=256))


def _results(url: str, n: int) -> list[float]:
    """Each sleeper's result (its resume time), in nap-<i> order."""
    found = dict(rows(url, "SELECT id, output FROM durable_runs WHERE id LIKE 'nap-%'"))
    return [json.loads(bytes(found[f"nap-{i}"])[1:]) for i in range(n)]


def _thirty_days_in_a_test() -> float:
    import datetime as dt

    from durable.testing import DurableEnv

    app = load_app()
    with DurableEnv() as env:
        started = time.perf_counter()
        handle = env.dispatch(app.month)
        assert handle.result() == 30
        elapsed = time.perf_counter() - started
        assert env.now() - dt.datetime(2025, 1, 1, tzinfo=dt.UTC) == dt.timedelta(days=30)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--quick", action="store_true", help="100 sleepers: a smoke test")
    parser.add_argument("--runs", type=int, help="how many sleepers to park")
    parser.add_argument(
        "--postgres-url", default=os.environ.get("DURABLE_BENCH_POSTGRES_URL", DEFAULT_PG)
    )
    parser.add_argument("--tmpdir", help="where SQLite files go: a real disk, not tmpfs")
    args = parser.parse_args()
    n, m, pad = (100, 3, 1.0) if args.quick else (100_000, 200, 5.0)
    n = args.runs or n
    # --quick warms up with as many runs as it parks: with fewer, the worker's start
    # (seconds on a busy machine) is most of the parking rate measured, and the
    # deadlines, spaced by that rate, take that much longer to come.
    warm = n if args.quick else min(1000, n // 4)
    with tempfile.TemporaryDirectory(prefix="durable-waits-", dir=args.tmpdir) as tmp:
        for backend in args.backends.split(","):
            logs = Path(tmp) / backend
            logs.mkdir()
            if backend == "sqlite":
                url = f"sqlite:///{tmp}/waits.db"
                result = measure("sqlite", url, n=n, m=m, warm=warm, logs=logs, pad=pad)
                print(json.dumps(result), flush=True)
                continue
            import psycopg

            schema = f"bench_{uuid.uuid4().hex[:10]}"
            with psycopg.connect(args.postgres_url, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{schema}"')
            try:
                sep = "&" if "?" in args.postgres_url else "?"
                url = f"{args.postgres_url}{sep}options=-csearch_path%3D{schema}"
                result = measure("postgresql", url, n=n, m=m, warm=warm, logs=logs, pad=pad)
                print(json.dumps(result), flush=True)
            finally:
                with psycopg.connect(args.postgres_url, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


if __name__ == "__main__":
    main()
