"""Async runs on a worker's event loop: ``python benchmarks/async_runs.py [--quick]``.

One JSON line per backend (SQLite, PostgreSQL) and mode on stdout; progress on stderr.
Each measurement gets a fresh database (a schema on PostgreSQL) and one `durable
worker` process. N async workflows (10,000; 100 with --quick), each awaiting one async
task that awaits 1 s (0.25 s with --quick) of ``asyncio.sleep``, are stored QUEUED first
(bulk inserts, no worker running); then the worker starts and drain_s is the time from
its start to the last run COMPLETED. Meanwhile the worker's thread count and RSS are
read from /proc (threads_max, rss_mb_max, and VmHWM at the end).

Modes, in one session: ``lane`` (the worker's event loop, --async-concurrency N) on N
runs; and the same M-run workload (1,000; 32 with --quick) both on the lane and with
today's thread-per-run execution (--async-concurrency 0 --concurrency 16), to compare.

The issue's targets: 10,000 runs drain in under 10 s on this 2-core machine, with the
worker's RSS under 300 MB and fewer than 50 threads.
"""

from __future__ import annotations

import sys

# The benchmarks directory holds queue.py, which would shadow the standard library.
sys.path[:] = [p for p in sys.path if p != __file__.rsplit("/", 1)[0]]

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
APP = HERE / "_async_app.py"
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
TARGETS = {"drain_s_max": 10.0, "rss_mb_max": 300, "threads_max": 50}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_app() -> Any:
    spec = importlib.util.spec_from_file_location("_async_app", APP)
    assert spec and spec.loader
    app = importlib.util.module_from_spec(spec)
    sys.modules["_async_app"] = app
    spec.loader.exec_module(app)
    return app


def fill(url: str, n: int, seconds: float) -> float:
    """Store *n* queued runs of ``io_bound`` in bulk; return the seconds it took."""
    from durable import Engine
    from durable.runtime import runs

    app = load_app()
    engine = Engine(url)
    started = time.perf_counter()
    try:
        for first in range(0, n, 500):
            calls = [(app.io_bound.bind(i, seconds), f"r{i:06d}") for i in range(first, n)[:500]]
            batch = [
                runs.prepare(engine, call, run_id, None, owner=None, queue="default", priority=0)
                for call, run_id in calls
            ]
            engine.backend.create_runs(batch)
    finally:
        engine.close()
    return time.perf_counter() - started


def completed(url: str) -> int:
    from durable import Engine
    from durable.core.records import RunQuery, RunStatus

    engine = Engine(url)
    try:
        return engine.backend.count_runs(RunQuery(statuses=(RunStatus.COMPLETED,)))
    finally:
        engine.close()


def proc_status(pid: int) -> dict[str, int]:
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("Threads", "VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0])
    return values


def drain(url: str, n: int, flags: list[str], logs: Path) -> dict[str, Any]:
    """Start a worker with *flags*; measure until all *n* runs completed."""
    from durable import Engine
    from durable.core.records import RunQuery, RunStatus

    watcher = Engine(url)
    query = RunQuery(statuses=(RunStatus.COMPLETED,))
    with (logs / f"worker-{time.time_ns()}.log").open("w") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "durable", "worker", str(APP), "--db", url,
             "--log-level", "WARNING", *flags],
            stdout=out, stderr=out,
        )  # fmt: skip
    started = time.perf_counter()
    threads = rss = hwm = 0
    try:
        while True:
            status = proc_status(worker.pid)
            threads = max(threads, status.get("Threads", 0))
            rss = max(rss, status.get("VmRSS", 0))
            hwm = max(hwm, status.get("VmHWM", 0))
            if watcher.backend.count_runs(query) >= n:
                break
            if worker.poll() is not None:
                raise SystemExit(f"the worker exited with {worker.returncode}: see {logs}")
            if time.perf_counter() - started > 600:
                raise SystemExit("timed out draining")
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
    finally:
        watcher.close()
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)
    return {
        "drain_s": round(elapsed, 2),
        "runs_per_s": round(n / elapsed, 1),
        "threads_max": threads,
        "rss_mb_max": round(max(rss, hwm) / 1024, 1),
    }


def measure(
    backend: str, url_for: Any, n: int, m: int, logs: Path, *, seconds: float
) -> list[dict[str, Any]]:
    results = []
    modes = [
        ("lane", n, ["--async-concurrency", str(max(n, 1))]),
        ("lane", m, ["--async-concurrency", str(max(n, 1))]),
        ("threads", m, ["--async-concurrency", "0", "--concurrency", "16"]),
    ]
    for mode, runs, flags in modes:
        with url_for() as url:
            filled = fill(url, runs, seconds)
            log(f"{backend}: {runs} runs stored in {filled:.1f}s; draining ({mode})")
            result = drain(url, runs, flags, logs)
        result = {"backend": backend, "mode": mode, "runs": runs, "flags": " ".join(flags),
                  "fill_s": round(filled, 2), **result}  # fmt: skip
        if mode == "lane" and runs == n:
            result["targets"] = TARGETS
        log(json.dumps(result))
        results.append(result)
    return results


class _SQLite:
    def __init__(self, tmp: str) -> None:
        self.tmp = tmp

    def __enter__(self) -> str:
        self.path = Path(self.tmp) / f"async-{uuid.uuid4().hex[:8]}.db"
        return f"sqlite:///{self.path}"

    def __exit__(self, *exc: object) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)


class _Schema:
    def __init__(self, base: str) -> None:
        self.base = base

    def __enter__(self) -> str:
        import psycopg

        self.schema = f"bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{self.schema}"')
        sep = "&" if "?" in self.base else "?"
        return f"{self.base}{sep}options=-csearch_path%3D{self.schema}"

    def __exit__(self, *exc: object) -> None:
        import psycopg

        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{self.schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--quick", action="store_true", help="100 and 32 runs: a smoke test")
    parser.add_argument("--runs", type=int, help="how many runs the lane drains")
    parser.add_argument("--compare", type=int, help="how many runs both modes drain")
    parser.add_argument(
        "--postgres-url", default=os.environ.get("DURABLE_BENCH_POSTGRES_URL", DEFAULT_PG)
    )
    parser.add_argument("--tmpdir", help="where SQLite files go: a real disk, not tmpfs")
    args = parser.parse_args()
    # --quick: the thread-per-run mode's 16 threads take its 32 runs in two goes.
    n, m, seconds = (100, 32, 0.25) if args.quick else (10_000, 1_000, 1.0)
    n, m = args.runs or n, args.compare or m
    with tempfile.TemporaryDirectory(prefix="durable-async-", dir=args.tmpdir) as tmp:
        for backend in args.backends.split(","):
            logs = Path(tmp) / f"logs-{backend}"
            logs.mkdir()
            if backend == "sqlite":
                results = measure("sqlite", lambda: _SQLite(tmp), n, m, logs, seconds=seconds)
            else:
                results = measure(
                    "postgresql", lambda: _Schema(args.postgres_url), n, m, logs, seconds=seconds
                )
            for result in results:
                print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
