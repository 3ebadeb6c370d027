"""What the statistics' tallies cost a step: ``python benchmarks/tallies.py [--quick]``.

The database's triggers tally each run as it is created and ends, and each task call
as it ends (docs/architecture.md, "Statistics are counted by triggers"). This runs
the workload of `benchmarks/steps.py` measurement 1 (after a warm-up, 200 workflows
of 10 no-op task steps one after another: wall time / 2000) on fresh databases with
the triggers as created ("tallied") and with them dropped ("untallied"), alternately
(untallied, tallied, untallied...), ``--reps`` times each, on SQLite (FULL, a file on
a real disk) and PostgreSQL. One JSON line per backend: the medians per step, all
values, their difference and ratio. Target: the tallied step costs under 1.05 times
the untallied one.
"""

from __future__ import annotations

import sys

# The benchmarks directory holds queue.py, which would shadow the standard library.
sys.path[:] = [p for p in sys.path if p != __file__.rsplit("/", 1)[0]]

import argparse
import contextlib
import importlib.util
import json
import os
import sqlite3
import statistics
import tempfile
from pathlib import Path

import durable

# steps.py's workload and plumbing, loaded from its file (benchmarks is no package).
_spec = importlib.util.spec_from_file_location("steps", Path(__file__).with_name("steps.py"))
assert _spec is not None and _spec.loader is not None
steps = importlib.util.module_from_spec(_spec)
sys.modules["steps"] = steps
_spec.loader.exec_module(steps)
Bench, Plan, log, run_batch, summary = (
    steps.Bench, steps.Plan, steps.log, steps.run_batch, steps.summary
)  # fmt: skip

TARGET = 1.05


def untally(bench: steps.Bench, url: str) -> None:
    """Drop the tallies' triggers (whichever this version has) from the database at
    *url*."""
    if bench.backend == "sqlite":
        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
            found = "SELECT name FROM sqlite_master WHERE type = 'trigger'"
            for (name,) in conn.execute(found).fetchall():
                if name.startswith("durable_tally_"):
                    conn.execute(f"DROP TRIGGER {name}")
            conn.commit()
        return
    schema = url.rsplit("search_path%3D", 1)[1]
    bench.admin(
        "DO $$ DECLARE f text; BEGIN FOR f IN SELECT p.proname FROM pg_proc AS p JOIN "
        f"pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = '{schema}' AND "
        "p.proname LIKE 'durable\\_tally\\_%' LOOP "
        f"EXECUTE format('DROP FUNCTION %I.%I() CASCADE', '{schema}', f); END LOOP; END $$"
    )


def measure(bench: steps.Bench, reps: int) -> dict[str, object]:
    plan = bench.plan
    values: dict[str, list[float]] = {"untallied": [], "tallied": []}
    for rep in range(reps):
        for name in ("untallied", "tallied"):
            with bench.fresh() as url:
                durable.Engine(url).close()  # creates the schema, triggers included
                if name == "untallied":
                    untally(bench, url)
                with contextlib.closing(durable.configure(url)):
                    run_batch(plan.warmup, 10)
                    per_step = run_batch(plan.workflows, 10) / (plan.workflows * 10) * 1e6
            values[name].append(per_step)
            log(f"  rep {rep + 1} {name}: {per_step:.1f} us/step")
    tallied, untallied = (statistics.median(values[k]) for k in ("tallied", "untallied"))
    return (
        {"benchmark": "tallies", "backend": bench.backend}
        | summary("us_per_step_tallied", values["tallied"])
        | summary("us_per_step_untallied", values["untallied"])
        | {
            "us_tallies_per_step": round(tallied - untallied, 2),
            "tallied_over_untallied": round(tallied / untallied, 3),
            "target": TARGET,
            "load_average_1min": round(os.getloadavg()[0], 2),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--reps", type=int, default=None, help="pairs of runs (default 7)")
    parser.add_argument("--tmpdir", help="where SQLite files go: a real disk, not tmpfs")
    args = parser.parse_args()
    plan = steps.QUICK if args.quick else Plan()
    reps = args.reps or (1 if args.quick else 7)
    pg = os.environ.get("DURABLE_BENCH_POSTGRES_URL", steps.DEFAULT_PG)
    with tempfile.TemporaryDirectory(prefix="durable-bench-", dir=args.tmpdir) as tmp:
        for backend in args.backends.split(","):
            name = {"postgres": "postgresql"}.get(backend, backend)
            log(f"{name}:")
            print(json.dumps(measure(Bench(name, plan, Path(tmp), pg), reps)), flush=True)


if __name__ == "__main__":
    main()
