"""Flow control's cost to throughput: ``python benchmarks/flow_control.py [--quick]``.

One JSON line per backend (SQLite, PostgreSQL) on stdout; progress on stderr. Three
scenarios, the same workload and workers, interleaved (a, b, c, a, b, c...) for R rounds
(4; 1 with --quick), each on a fresh database (a SQLite file, a PostgreSQL schema):

* ``unlimited``: queue ``bench`` declares no limits;
* ``limit_16``: ``durable.queue("bench", concurrency=16)``;
* ``keys_1000``: runs dispatched with ``key=f"k{i % 1000}"`` and ``key_concurrency=1``.

Each scenario dispatches N workflows of one no-op task (2,000; 50 with --quick), then
starts W `durable worker` processes (2, 16 slots each) and waits for them to drain the
queue. runs_per_s is N divided by the time from the first run starting to the last one
finishing (database timestamps). The report gives every round's value, the medians, and
each limited scenario's median over the unlimited one's. The issue's target: each
ratio at least 0.8.
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
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
APP = HERE / "_flow_control_app.py"
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
QUEUE = "bench"
KEYS = 1000
SCENARIOS = ("unlimited", "limit_16", "keys_1000")
TARGET = 0.8


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            return conn.execute(sql).fetchall()
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql).fetchall()


def load_app() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("_flow_control_app", APP)
    assert spec and spec.loader
    app = importlib.util.module_from_spec(spec)
    sys.modules["_flow_control_app"] = app
    spec.loader.exec_module(app)
    return app


def drain(url: str, scenario: str, *, n: int, workers: int, concurrency: int, logs: Path) -> float:
    """Dispatch *n* runs for *scenario* into a fresh database at *url*, drain them with
    the workers, and return runs per second (first start to last finish)."""
    import durable

    app = load_app()
    engine = durable.configure(url)
    try:
        if scenario == "limit_16":
            durable.queue(QUEUE, concurrency=16)
        for i in range(n):
            options: dict[str, Any] = {"queue": QUEUE, "id": f"r-{i}"}
            if scenario == "keys_1000":
                options.update(key=f"k{i % KEYS}", key_concurrency=1)
            durable.dispatch(app.one.bind(i), **options)
    finally:
        engine.close()
    command = [sys.executable, "-m", "durable", "worker", str(APP), "--db", url]
    options_ = ["--queue", QUEUE, "--concurrency", str(concurrency), "--log-level", "WARNING"]
    procs = []
    for i in range(workers):
        with (logs / f"{scenario}-{i}.log").open("a") as out:
            procs.append(subprocess.Popen([*command, *options_], stdout=out, stderr=out))
    try:
        deadline = time.monotonic() + 300
        done = "SELECT count(*) FROM durable_runs WHERE status = 'completed'"
        while rows(url, done)[0][0] < n:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise SystemExit(f"{scenario}: the workers did not drain the queue (see {logs})")
            time.sleep(0.05)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(60)
    ((first, last),) = rows(url, "SELECT min(started_at), max(finished_at) FROM durable_runs")
    return n / (last - first)


def fresh_database(backend: str, tmp: Path, base: str, label: str) -> tuple[str, str | None]:
    """A URL to an empty database for one measurement, and the schema to drop after."""
    if backend == "sqlite":
        return f"sqlite:///{tmp / f'{label}.db'}", None
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}", schema


def drop_schema(base: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def measure(backend: str, base: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    values: dict[str, list[float]] = {scenario: [] for scenario in SCENARIOS}
    logs = tmp / "logs"
    logs.mkdir(exist_ok=True)
    for round_ in range(args.rounds):
        for scenario in SCENARIOS:
            label = f"{scenario}-{round_}"
            url, schema = fresh_database(backend, tmp, base, label)
            try:
                value = drain(
                    url,
                    scenario,
                    n=args.runs,
                    workers=args.workers,
                    concurrency=args.concurrency,
                    logs=logs,
                )
            finally:
                if schema is not None:
                    drop_schema(base, schema)
            values[scenario].append(round(value, 1))
            log(f"  {backend} round {round_ + 1}/{args.rounds}: {scenario} {value:.0f} runs/s")
    medians = {scenario: statistics.median(found) for scenario, found in values.items()}
    ratios = {
        scenario: round(medians[scenario] / medians["unlimited"], 3) for scenario in SCENARIOS[1:]
    }
    per_round = {
        scenario: [
            round(v / u, 3) for v, u in zip(values[scenario], values["unlimited"], strict=True)
        ]
        for scenario in SCENARIOS[1:]
    }
    return {
        "backend": backend,
        "runs": args.runs,
        "tasks_per_run": 1,
        "keys": KEYS,
        "workers": args.workers,
        "concurrency_per_worker": args.concurrency,
        "rounds": args.rounds,
        "runs_per_s": {scenario: round(median) for scenario, median in medians.items()},
        "values": values,
        "over_unlimited": ratios,
        "over_unlimited_per_round": per_round,
        "target": TARGET,
        "meets_target": {scenario: ratio >= TARGET for scenario, ratio in ratios.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 runs, one round")
    parser.add_argument("--backends", default="sqlite,postgres", help="%(default)s")
    parser.add_argument("--runs", type=int, default=0, help="per scenario: 2,000 (50 quick)")
    parser.add_argument("--rounds", type=int, default=0, help="4 (1 quick)")
    parser.add_argument("--workers", type=int, default=2, help="%(default)s")
    parser.add_argument("--concurrency", type=int, default=16, help="per worker: %(default)s")
    parser.add_argument("--tmpdir", help="where SQLite files go: a real disk, not tmpfs")
    default_pg = os.environ.get("DURABLE_BENCH_POSTGRES_URL", DEFAULT_PG)
    parser.add_argument("--postgres-url", default=default_pg, help="%(default)s")
    args = parser.parse_args()
    args.runs = args.runs or (50 if args.quick else 2000)
    args.rounds = args.rounds or (1 if args.quick else 4)
    for backend in args.backends.split(","):
        name = "postgresql" if backend == "postgres" else backend
        with tempfile.TemporaryDirectory(prefix="durable-flow-", dir=args.tmpdir) as tmp:
            result = measure(name, args.postgres_url, args, Path(tmp))
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
