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
# Python puts a script's directory first on sys.path: move it to the end before
# importing (the helpers beside this file, _steps_*.py, are imported from there).
sys.path[:] = [p for p in sys.path if p != __file__.rsplit("/", 1)[0]]
sys.path.append(__file__.rsplit("/", 1)[0])

import argparse
import json
import os
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from _steps_measures import QUICK, Measures, Plan, log, summary
from _steps_workload import CRASH_ENV, long, run_batch

import durable
from durable import execute

#: What benchmarks/tallies.py takes from this script.
__all__ = ["DEFAULT_PG", "QUICK", "Bench", "Plan", "log", "run_batch", "summary"]

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

#: Synced commits of a ten-step workflow: the first task's start, nine commits of a
#: result with the next task's start, the last result with the outcome; on PostgreSQL
#: also the run's creation (SQLite commits a run created for its owner without an fsync
#: of its own, see _relaxed.py).
COMMITS = {"sqlite": 11, "postgresql": 12}

SRC = Path(durable.__file__).parent  # the code measured


def git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=SRC, capture_output=True, check=False)


class Bench(Measures):
    """The measurements of one backend (_steps_measures.py), reported with their context,
    the targets and the verdicts."""

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
