"""What one durable step costs, per backend: ``python benchmarks/steps.py [--quick]``.

One JSON line per backend on stdout, progress on stderr (``--help`` lists the options).
Every measurement uses a fresh SQLite file (on a real disk) or PostgreSQL schema.

1. us_per_step_200x10: after 50 warm-up workflows (so the SQLite WAL is at its steady
   size), 200 workflows of 10 no-op task steps, one after another: wall time / 2000.
   Then 200 workflows of 0 steps: us_fixed_per_workflow; us_per_step_marginal is
   (10-step workflow - 0-step workflow) / 10. Three fresh databases: median, all values.
   us_per_step_200x10_concurrent: the same 200 workflows run by 8 threads at once
   (their steps still one after another within each workflow): wall time / 2000, where
   group commit lets concurrent steps share a commit. Reported, not judged.
2. us_per_step_by_length: one workflow of 100, 1,000, 10,000 steps: wall time / steps;
   for the longest, the cost per step of its first and last 10% (task-body timestamps).
   Three fresh databases per length: medians (and the median last/first ratio).
3. ms_resume_1000_steps: long(1000) records 1,000 steps, then step 1000 crashes (a child
   process calls os._exit(137); memory: KeyboardInterrupt in-process). Timed here,
   execute(long, 1000, id=...) claims the run, loads its history in one query, replays
   1,000 steps without running them (checked), runs step 1000 and finishes. The
   resuming engine has executed workflows before (the warm-up, as in 1 and 2), as a
   worker or a running app has. ms_resume_1000_steps_cold: the same, by an engine that
   has done nothing yet but open the database, so that its first statements are
   parsed and planned on the server inside the measurement. ms_load_history_1000:
   backend.load_history() alone, afterwards. Medians of three.
4. raw_floor_us: one autocommitted small-row INSERT per iteration, 2,000 times after
   1,500 warm-up inserts: sqlite3 (WAL, synchronous=FULL) on the same disk, or
   psycopg 3 over TCP to the same server. null for memory. us_marginal_over_raw_floor
   is what the library adds per step on top of that floor. us_per_step_floor_bound is
   the least a step of measurement 1 can cost on this disk: the floor times the synced
   commits of a ten-step workflow (COMMITS), / 10; target_reachable_here says whether
   that bound is within the target at all (on a slow disk day it is not, whatever the
   code does).
5. us_per_heartbeat_call: one task body calls `durable.heartbeat(details)` 200,000
   times in a tight loop (the first call writes, the others are throttled): its time /
   200,000. Target: under 2 us. Medians of three.
6. class_over_function: the workload of 1 (after the warm-up, 200 workflows of 10
   steps, wall time / 2000) as a workflow class whose properties change at every step
   (a snapshot stored with every step), and as the function workflow of 1, alternately
   on fresh databases (class, function, class...): the medians' ratio. Target: 1.2.
7. us_metrics_per_step: the workload of 1 with Prometheus metrics (`durable.ops.metrics`,
   into a registry of its own) and without, alternately on fresh databases (without,
   with, without...): the difference of the medians per step, which counts a task
   attempt's observer and a tenth of a run's. null without prometheus-client.
"""

from __future__ import annotations

import sys

# benchmarks/queue.py shares its name with the standard library's queue module, and
# Python puts a script's directory first on sys.path: take it off before importing.
sys.path[:] = [p for p in sys.path if p != __file__.rsplit("/", 1)[0]]

import argparse
import contextlib
import itertools
import json
import os
import sqlite3
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import durable
from durable import execute, task, workflow

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
TARGETS = {
    "us_per_step_sqlite_full": 250,
    "us_per_step_postgresql": 600,
    "flat_to_steps": 10_000,
    "flat_tolerance": 1.25,  # longest/shortest and last/first 10%: at most this ratio
    "ms_replay_1000_steps": 20,
    "us_per_heartbeat_call": 2,
    "class_over_function": 1.2,
}


@dataclass(frozen=True)
class Plan:
    reps: int = 3
    warmup: int = 50  # workflows; the raw floor warms up with 30 inserts per workflow
    workflows: int = 200
    lengths: tuple[int, ...] = (100, 1_000, 10_000)  # ascending
    resume_steps: int = 1_000


#: Synced commits of a ten-step workflow: the first task's start, nine commits of a
#: result with the next task's start, the last result with the outcome; on PostgreSQL
#: also the run's creation (SQLite commits a run created for its owner without an fsync
#: of its own, see _relaxed.py).
COMMITS = {"sqlite": 11, "postgresql": 12}

QUICK = Plan(warmup=5, workflows=20, lengths=(100, 1_000), resume_steps=200)
THREADS = 8  # us_per_step_200x10_concurrent
CRASH_ENV, SRC = "DURABLE_BENCH_CRASH", Path(durable.__file__).parent  # the code measured
_stamps: list[float] = []  # perf_counter() at every `step` body
_crash_at = int(os.environ.get(CRASH_ENV, "-1"))  # set in the crashing child process


@task(name="bench.step")
def step(i: int) -> int:
    _stamps.append(time.perf_counter())
    if i == _crash_at:  # measurement 3: die in a child process, or interrupt this one
        if CRASH_ENV in os.environ:
            os._exit(137)
        raise KeyboardInterrupt
    return i


@workflow(name="bench.steps")
def steps(n: int) -> int:
    for i in range(n):
        step(i)
    return n


@workflow(name="bench.class_steps")
class ClassSteps:
    """Measurement 6: `steps` as a workflow class whose properties change every step."""

    def __init__(self, n: int) -> None:
        self.n, self.done, self.last = n, 0, -1

    def handle(self) -> int:
        for i in range(self.n):
            self.last = step(i)
            self.done += 1
        return self.n


HEARTBEATS = 200_000  # measurement 5: calls in one task body


@task(name="bench.beating", heartbeat=3600)
def beating(calls: int) -> float:
    """Measurement 5: seconds for *calls* heartbeat() calls in a tight loop (the first
    writes; the rest fall within the interval, as a loop's calls do)."""
    start = time.perf_counter()
    for i in range(calls):
        durable.heartbeat({"done": i, "of": calls})
    return time.perf_counter() - start


@workflow(name="bench.heartbeats")
def heartbeats(calls: int) -> float:
    return beating(calls)


@workflow(name="bench.long")
def long(n: int) -> int:
    for i in range(n + 1):
        step(i)  # step n crashes when measurement 3 asks it to
    return n


def log(message: str) -> None:
    print(f"[steps.py] {message}", file=sys.stderr, flush=True)


def git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=SRC, capture_output=True, check=False)


def run_batch(count: int, length: int) -> float:
    """Execute *count* `steps(length)` workflows one after another; return seconds."""
    start = time.perf_counter()
    for _ in range(count):
        execute(steps, length)
    return time.perf_counter() - start


def run_concurrently(count: int, length: int) -> float:
    """Execute *count* `steps(length)` workflows on THREADS threads; return seconds."""
    with ThreadPoolExecutor(THREADS) as pool:
        start = time.perf_counter()
        list(pool.map(lambda _: execute(steps, length), range(count)))
        return time.perf_counter() - start


def summary(name: str, values: list[float]) -> dict[str, Any]:
    """The median of *values* under *name*, and all of them under *name*_values."""
    rounded = [round(v, 2) for v in values]
    return {name: round(statistics.median(values), 2), f"{name}_values": rounded}


class Bench:
    """The measurements of one backend, each on a fresh database."""

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
        global _crash_at
        if self.backend == "memory":  # nothing outlives this process: crash in it
            _crash_at = n
            try:
                execute(long, n, id=run_id)
            except KeyboardInterrupt:
                _crash_at = -1
            return f"in-process: step {n} raised KeyboardInterrupt"
        child = [sys.executable, __file__, url, run_id, str(n)]
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

    def run(self, quick: bool) -> dict[str, Any]:
        """Every measurement, with its context, the targets and the verdicts."""
        log(f"{self.backend}:")
        head, dirty = git("rev-parse", "HEAD"), git("diff", "--quiet", "HEAD", "--", ".")
        postgres = self.backend == "postgresql"
        sync = {"sqlite": "FULL", "memory": None}.get(self.backend)
        if postgres:
            sync = "synchronous_commit=" + self.admin("SHOW synchronous_commit")[0]
        result = {
            "backend": self.backend,
            "python": sys.version.split()[0],
            "sqlite_version": sqlite3.sqlite_version,
            "postgres_server_version": self.admin("SHOW server_version")[0] if postgres else None,
            "git_commit": head.stdout.decode().strip() if head.returncode == 0 else None,
            "git_src_modified": {0: False, 1: True}.get(dirty.returncode),  # src/durable
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "synchronous": sync,
            "repetitions": self.plan.reps,
            "load_average_1min": round(os.getloadavg()[0], 2),  # other work on the machine
            "quick": quick,
            "raw_floor_us": self.raw_floor(),
        }
        result |= self.throughput() | self.lengths() | self.resume() | self.heartbeat_cost()
        result |= self.class_cost() | self.metrics_cost()
        result |= {"targets": TARGETS}
        if result["raw_floor_us"] is not None:
            # The disk's commit latency swings run to run; what the library adds does not.
            overhead = result["us_per_step_marginal"] - result["raw_floor_us"]
            result["us_marginal_over_raw_floor"] = round(overhead, 1)
            bound = result["raw_floor_us"] * COMMITS[self.backend] / 10
            result["us_per_step_floor_bound"] = round(bound, 1)
            target = TARGETS["us_per_step_postgresql" if postgres else "us_per_step_sqlite_full"]
            result["target_reachable_here"] = bound <= target
        return result | {"meets_targets": verdicts(result)}


def verdicts(r: dict[str, Any]) -> dict[str, bool | None]:
    """Compare the measured medians with TARGETS; None where a target does not apply."""
    key = {"sqlite": "us_per_step_sqlite_full", "postgresql": "us_per_step_postgresql"}
    per_step = TARGETS.get(key.get(r["backend"], ""))
    flat = max(r["ratio_longest_vs_shortest"], r["longest_ratio_last_vs_first_10pct"])
    long_enough = max(r["us_per_step_by_length"]) >= TARGETS["flat_to_steps"]
    replay = r["ms_resume_1000_steps"] < TARGETS["ms_replay_1000_steps"]
    return {
        "us_per_step": r["us_per_step_200x10"] <= per_step if per_step else None,
        "flat_to_10000_steps": flat <= TARGETS["flat_tolerance"] if long_enough else None,
        "replay_1000_steps": replay if r["resume_steps"] == 1_000 else None,
        "heartbeat_call": r["us_per_heartbeat_call"] < TARGETS["us_per_heartbeat_call"],
        "class_over_function": r["class_over_function"] <= TARGETS["class_over_function"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="memory,sqlite,postgres", help="%(default)s")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a CI smoke test")
    default_pg = os.environ.get("DURABLE_BENCH_POSTGRES_URL", DEFAULT_PG)
    parser.add_argument("--postgres-url", default=default_pg, help="%(default)s")
    parser.add_argument("--tmpdir", help="where SQLite files go: a real disk, not tmpfs")
    args = parser.parse_args()
    backends = [{"postgres": "postgresql"}.get(b, b) for b in args.backends.split(",")]
    if unknown := set(backends) - {"memory", "sqlite", "postgresql"}:
        parser.error(f"unknown backends: {sorted(unknown)}")
    with tempfile.TemporaryDirectory(prefix="durable-bench-", dir=args.tmpdir) as tmp:
        plan = QUICK if args.quick else Plan()
        for backend in backends:
            result = Bench(backend, plan, Path(tmp), args.postgres_url).run(args.quick)
            print(json.dumps(result), flush=True)


if __name__ == "__main__" and CRASH_ENV in os.environ:  # measurement 3's crashing child
    durable.configure(sys.argv[1])
    execute(long, int(sys.argv[3]), id=sys.argv[2])
    raise SystemExit("the crash did not happen")
elif __name__ == "__main__":
    main()
