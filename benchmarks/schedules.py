"""Schedule firing lateness: ``python benchmarks/schedules.py [--quick]``.

One JSON line per backend on stdout; progress on stderr. N schedules (10,000; 200 with
--quick) are stored, every one with its next tick at the same moment a few seconds
ahead; W `durable worker` processes (2) start before it. Each tick creates one run;
lateness is the run's creation time minus the tick's scheduled time (both read from
the database's clock), for every schedule. The issue's target: p99 under 1 s for
10,000 schedules due in the same minute, on PostgreSQL.
"""

from __future__ import annotations

import sys

# The benchmarks directory holds queue.py, which would shadow the standard library.
sys.path[:] = [p for p in sys.path if p != __file__.rsplit("/", 1)[0]]

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(url: str, count: int, workers: int) -> dict[str, object]:
    import importlib.util

    import durable
    from durable.core.records import RunQuery
    from durable.runtime import schedules

    spec_ = importlib.util.spec_from_file_location("_schedules_app", HERE / "_schedules_app.py")
    assert spec_ and spec_.loader
    app = importlib.util.module_from_spec(spec_)
    sys.modules["_schedules_app"] = app
    spec_.loader.exec_module(app)
    tick = app.tick

    with durable.Engine(url) as engine:
        spec = schedules.Spec.make(every=3600.0, catch_up="skip")
        started = time.perf_counter()
        for i in range(count):
            schedules.store(engine, tick, spec, schedule_id=f"b{i:05d}")
        store_s = time.perf_counter() - started
        at = engine.backend.now() + 5 + count / 2000
        for schedule in engine.backend.list_schedules():
            engine.backend.put_schedule(dataclasses.replace(schedule, next_fire_at=at))
        ahead = at - engine.backend.now()
        log(f"{count} schedules stored in {store_s:.1f}s, all due in {ahead:.1f}s")
        command = [sys.executable, "-m", "durable", "worker", str(HERE / "_schedules_app.py")]
        procs = [
            subprocess.Popen([*command, "--db", url, "--log-level", "WARNING"])
            for _ in range(workers)
        ]
        try:
            deadline = time.monotonic() + 120 + count / 50
            while True:
                made = engine.backend.count_runs(RunQuery(workflow=tick.name))
                if made >= count or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            runs = engine.backend.list_runs(RunQuery(workflow=tick.name), limit=count + 10)
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                proc.wait(60)
    lateness = [run.created_at - at for run in runs]
    return {
        "schedules": count,
        "workers": workers,
        "fired": len(runs),
        "early": sum(1 for late in lateness if late < 0),
        "lateness_p50_s": round(percentile(lateness, 0.5), 3),
        "lateness_p99_s": round(percentile(lateness, 0.99), 3),
        "lateness_max_s": round(max(lateness), 3),
        "store_per_schedule_ms": round(store_s / count * 1000, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 schedules")
    parser.add_argument("--backends", default="sqlite,postgres", help="%(default)s")
    parser.add_argument("--workers", type=int, default=2, help="%(default)s")
    parser.add_argument("--count", type=int, default=0, help="default 10,000 (200 quick)")
    parser.add_argument("--tmpdir", help="where the SQLite file goes: a real disk")
    default_pg = os.environ.get("DURABLE_BENCH_POSTGRES_URL", DEFAULT_PG)
    parser.add_argument("--postgres-url", default=default_pg, help="%(default)s")
    args = parser.parse_args()
    count = args.count or (200 if args.quick else 10_000)
    for backend in args.backends.split(","):
        with tempfile.TemporaryDirectory(dir=args.tmpdir) as tmp:
            if backend == "sqlite":
                url = f"sqlite:///{Path(tmp) / 'bench.db'}"
            else:
                schema = f"bench_{uuid.uuid4().hex[:10]}"
                url = f"{args.postgres_url}?options=-csearch_path%3D{schema}"
                _create_schema(args.postgres_url, schema)
            try:
                result = measure(url, count, args.workers)
            finally:
                if backend != "sqlite":
                    _drop_schema(args.postgres_url, schema)
            name = "postgresql" if backend == "postgres" else backend
            print(json.dumps({"backend": name, **result}), flush=True)


def _create_schema(base: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')


def _drop_schema(base: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


if __name__ == "__main__":
    main()
