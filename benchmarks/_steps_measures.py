"""The measurements benchmarks/steps.py takes of one backend, each on a fresh SQLite
file, PostgreSQL schema or memory backend (steps.py's docstring describes them): their
sizes (Plan, QUICK), and Measures, which steps.Bench completes with the report."""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _steps_workload as workload
from _steps_workload import (
    CRASH_ENV,
    HEARTBEATS,
    THREADS,
    ClassSteps,
    _stamps,
    heartbeats,
    long,
    run_batch,
    run_concurrently,
    steps,
)

import durable
from durable import execute

#: What measurement 3's crashing child process runs (with CRASH_ENV set).
STEPS = str(Path(__file__).with_name("steps.py"))


@dataclass(frozen=True)
class Plan:
    reps: int = 3
    warmup: int = 50  # workflows; the raw floor warms up with 30 inserts per workflow
    workflows: int = 200
    lengths: tuple[int, ...] = (100, 1_000, 10_000)  # ascending
    resume_steps: int = 1_000


#: --quick, a smoke test (CI runs it): every measurement once, on a few hundred synced
#: commits in all instead of thousands: a workflow for each of the concurrent run's
#: threads, and two lengths for the ratios.
QUICK = Plan(reps=1, warmup=2, workflows=THREADS, lengths=(10, 100), resume_steps=20)


def log(message: str) -> None:
    print(f"[steps.py] {message}", file=sys.stderr, flush=True)


def summary(name: str, values: list[float]) -> dict[str, Any]:
    """The median of *values* under *name*, and all of them under *name*_values."""
    rounded = [round(v, 2) for v in values]
    return {name: round(statistics.median(values), 2), f"{name}_values": rounded}


class Measures:
    """The measurements of one backend, each on a fresh database (steps.Bench reports
    them)."""

    def __init__(self, backend: str, plan: Plan, tmp: Path, pg_url: str) -> None:
        self.backend, self.plan, self.tmp, self.pg_url = backend, plan, tmp, pg_url
        self._count = itertools.count()

    def admin(self, sql: str) -> Any:
        """Run one statement on the PostgreSQL server; return its first row, if any."""
        import psycopg

        with psycopg.connect(self.pg_url, autocommit=True) as conn:
            cursor = conn.execute(sql)
            return cursor.fetchone() if cursor.description else None

    @contextlib.contextmanager
    def fresh(self) -> Iterator[str]:
        """Yield the URL of an empty SQLite file, PostgreSQL schema or memory backend."""
        name = f"bench_{os.getpid()}_{next(self._count)}"
        if self.backend == "memory":
            yield "memory://"
        elif self.backend == "sqlite":
            try:
                yield f"sqlite:///{self.tmp / name}.db"
            finally:
                for suffix in (".db", ".db-wal", ".db-shm"):
                    (self.tmp / f"{name}{suffix}").unlink(missing_ok=True)
        else:
            self.admin(f'CREATE SCHEMA "{name}"')
            try:
                separator = "&" if "?" in self.pg_url else "?"
                yield f"{self.pg_url}{separator}options=-csearch_path%3D{name}"
            finally:
                self.admin(f'DROP SCHEMA "{name}" CASCADE')

    def throughput(self) -> dict[str, Any]:
        plan, per_step, marginal, fixed, concurrent = self.plan, [], [], [], []
        for rep in range(plan.reps):
            with self.fresh() as url, contextlib.closing(durable.configure(url)):
                run_batch(plan.warmup, 10)
                ten = run_batch(plan.workflows, 10) / plan.workflows
                zero = run_batch(plan.workflows, 0) / plan.workflows
                together = run_concurrently(plan.workflows, 10) / plan.workflows
            per_step.append(ten / 10 * 1e6)
            marginal.append((ten - zero) / 10 * 1e6)
            fixed.append(zero * 1e6)
            concurrent.append(together / 10 * 1e6)
            log(
                f"  rep {rep + 1}: {per_step[-1]:.1f} us/step, {fixed[-1]:.1f} us/workflow, "
                f"{concurrent[-1]:.1f} us/step with {THREADS} threads"
            )
        return (
            summary("us_per_step_200x10", per_step)
            | summary("us_per_step_marginal", marginal)
            | summary("us_fixed_per_workflow", fixed)
            | summary("us_per_step_200x10_concurrent", concurrent)
            | {"throughput_workflows": plan.workflows, "concurrent_threads": THREADS}
        )

    def class_cost(self) -> dict[str, Any]:
        """Measurement 6: a workflow class's per-step cost over a function's."""
        values: dict[str, list[float]] = {"class": [], "function": []}
        for _ in range(self.plan.reps):
            for name, target in (("class", ClassSteps), ("function", steps)):
                with self.fresh() as url, contextlib.closing(durable.configure(url)):
                    for count in (self.plan.warmup, self.plan.workflows):
                        start = time.perf_counter()
                        for _ in range(count):
                            execute(target, 10)
                    per_step = (time.perf_counter() - start) / (count * 10) * 1e6
                values[name].append(per_step)
        ratio = statistics.median(values["class"]) / statistics.median(values["function"])
        log(f"  class workflow: {ratio:.3f}x a function workflow per step")
        return (
            summary("us_per_step_class", values["class"])
            | summary("us_per_step_function", values["function"])
            | {"class_over_function": round(ratio, 3)}
        )

    def metrics_cost(self) -> dict[str, Any]:
        """Measurement 7: what the metrics observer adds to a step."""
        try:
            from prometheus_client import CollectorRegistry

            from durable.ops import metrics
        except ImportError:
            return {"us_metrics_per_step": None}
        values: dict[str, list[float]] = {"plain": [], "metrics": []}
        for _ in range(self.plan.reps):
            for name in ("plain", "metrics"):
                with self.fresh() as url, contextlib.closing(durable.configure(url)) as engine:
                    if name == "metrics":
                        metrics.instrument(engine, registry=CollectorRegistry(), queues=False)
                    run_batch(self.plan.warmup, 10)
                    per_step = run_batch(self.plan.workflows, 10) / (self.plan.workflows * 10)
                values[name].append(per_step * 1e6)
        extra = statistics.median(values["metrics"]) - statistics.median(values["plain"])
        log(f"  metrics: {extra:+.2f} us/step")
        return (
            summary("us_per_step_with_metrics", values["metrics"])
            | summary("us_per_step_without_metrics", values["plain"])
            | {"us_metrics_per_step": round(extra, 2)}
        )

    def heartbeat_cost(self) -> dict[str, Any]:
        """Measurement 5: us per `durable.heartbeat()` call in a tight loop."""
        values = []
        for _ in range(self.plan.reps):
            with self.fresh() as url, contextlib.closing(durable.configure(url)):
                values.append(execute(heartbeats, HEARTBEATS) / HEARTBEATS * 1e6)
        log(f"  heartbeat(): {statistics.median(values):.2f} us/call")
        return summary("us_per_heartbeat_call", values)

    def lengths(self) -> dict[str, Any]:
        runs: dict[int, list[float]] = {n: [] for n in self.plan.lengths}
        first, last = [], []  # of the longest workflow
        for n, _ in itertools.product(self.plan.lengths, range(self.plan.reps)):
            with self.fresh() as url, contextlib.closing(durable.configure(url)):
                run_batch(self.plan.warmup, 10)
                _stamps.clear()
                runs[n].append(run_batch(1, n) / n * 1e6)
            k = n // 10
            first.append((_stamps[k] - _stamps[0]) / k * 1e6)
            last.append((_stamps[-1] - _stamps[-1 - k]) / k * 1e6)
            log(f"  {n} steps: {runs[n][-1]:.1f} us/step")
        by_length = {n: statistics.median(values) for n, values in runs.items()}
        first, last = first[-self.plan.reps :], last[-self.plan.reps :]
        ratio = statistics.median(b / a for a, b in zip(first, last, strict=True))
        return {
            "us_per_step_by_length": {n: round(v, 1) for n, v in by_length.items()},
            "us_per_step_by_length_values": {n: [round(v, 1) for v in r] for n, r in runs.items()},
            "ratio_longest_vs_shortest": round(by_length[n] / by_length[self.plan.lengths[0]], 3),
            "longest_us_per_step_first_10pct": round(statistics.median(first), 1),
            "longest_us_per_step_last_10pct": round(statistics.median(last), 1),
            "longest_ratio_last_vs_first_10pct": round(ratio, 3),
        }

    def crash(self, url: str, run_id: str, n: int) -> str:
        """Leave `long(n)` unfinished under *run_id*, n steps recorded; say how."""
        if self.backend == "memory":  # nothing outlives this process: crash in it
            workload._crash_at = n
            try:
                execute(long, n, id=run_id)
            except KeyboardInterrupt:
                workload._crash_at = -1
            return f"in-process: step {n} raised KeyboardInterrupt"
        child = [sys.executable, STEPS, url, run_id, str(n)]
        done = subprocess.run(child, env={**os.environ, CRASH_ENV: str(n)}, check=False)
        if done.returncode != 137:
            raise RuntimeError(f"the crashing child exited {done.returncode}, not 137")
        return f"child process: step {n} called os._exit(137)"

    def resume(self) -> dict[str, Any]:
        n, resumes, colds, loads = self.plan.resume_steps, [], [], []
        for rep in range(self.plan.reps):
            with self.fresh() as url, contextlib.closing(durable.configure(url)) as engine:
                method = self.crash(url, f"cold-{rep}", n)
                colds.append(self.timed_resume(f"cold-{rep}", n))
                run_batch(self.plan.warmup, 10)
                self.crash(url, f"warm-{rep}", n)
                resumes.append(self.timed_resume(f"warm-{rep}", n))
                start = time.perf_counter()
                rows = len(engine.backend.load_history(f"warm-{rep}"))
                loads.append((time.perf_counter() - start) * 1e3)
            log(f"  resume after {n} steps: {resumes[-1]:.2f} ms (cold engine: {colds[-1]:.2f})")
        return (
            summary("ms_resume_1000_steps", resumes)
            | summary("ms_resume_1000_steps_cold", colds)
            | summary("ms_load_history_1000", loads)
            | {"load_history_rows": rows, "resume_steps": n, "resume_method": method}
        )

    @staticmethod
    def timed_resume(run_id: str, n: int) -> float:
        """Milliseconds to resume `long(n)` under *run_id*, which crashed at step n."""
        _stamps.clear()
        start = time.perf_counter()
        result = execute(long, n, id=run_id)
        elapsed = (time.perf_counter() - start) * 1e3
        if result != n or len(_stamps) != 1:
            raise RuntimeError(f"resume returned {result}, ran {len(_stamps)} steps")
        return elapsed

    def raw_floor(self) -> float | None:
        """Microseconds per autocommitted small-row INSERT straight through the driver."""
        if self.backend == "memory":
            return None
        with self.fresh() as url:
            if self.backend == "sqlite":
                conn: Any = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
                conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, payload BLOB)")
                insert = "INSERT INTO t (payload) VALUES (?)"
            else:
                import psycopg

                conn = psycopg.connect(url, autocommit=True)
                conn.execute("CREATE TABLE t (id bigserial PRIMARY KEY, payload bytea)")
                insert = "INSERT INTO t (payload) VALUES (%s)"
            with contextlib.closing(conn):
                for _ in range(self.plan.warmup * 30):
                    conn.execute(insert, (b"x" * 64,))
                iterations, start = self.plan.workflows * 10, time.perf_counter()
                for _ in range(iterations):
                    conn.execute(insert, (b"x" * 64,))  # no transaction is open: it commits
                floor = (time.perf_counter() - start) / iterations * 1e6
        log(f"  raw floor: {floor:.1f} us/commit")
        return round(floor, 1)
