"""What the statistics' tallies cost a step: ``python benchmarks/tallies.py [--quick]``.

The database's triggers tally each run as it is created and ends, and each task call
as it ends (docs/architecture.md, "Statistics are counted by triggers"). This runs
the workload of `benchmarks/steps.py` measurement 1 (workflows of 10 no-op task steps,
one after another) with the triggers as created ("tallied") and with them dropped
("untallied"), in one process on one database: a warm-up, then ``--rounds`` rounds of
a batch of ``--batch`` workflows in each state, each state first in every other round
(the triggers dropped or made again before each batch, and ten workflows run before
the timing, so that the statements are planned again). On this machine the speed
moves by tens of percent from minute to minute and from process to process, so the
two are only comparable side by side like this: fresh databases in fresh processes
gave ratios from 1.02 to 1.25 for the same code. ``--same`` keeps both arms tallied,
to show the method's own spread. SQLite (FULL, a file on a real disk) and PostgreSQL.
One JSON line per backend: the medians per step (wall time; for SQLite also this
thread's CPU time, which its triggers run in), all values, their difference and
ratio. Target: the tallied step costs under 1.05 times the untallied one.

``--instructions`` (SQLite, needs valgrind) counts instead of timing: the user-space
instructions a step executes, tallied and untallied, under cachegrind, which this
machine's swings in speed do not move (two runs of one arm agree within 0.1 %). Each
arm runs twice in a child process, with ``--few`` and ``--many`` workflows after the
same start, on a file in ``--tmpdir``; the difference is the per-step cost of that
many more steps, start-up and warm-up cancelled. It leaves out what a step spends in
the kernel (the fsync, the WAL's writes), which the tallies do not add to: they write
no statement and no commit of their own.
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
import re
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import time
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


class Triggers:
    """The tallies' triggers of the database at *url*, to drop and to make again."""

    def __init__(self, bench: steps.Bench, url: str) -> None:
        self.bench = bench
        self.on = True  # as the database was made
        if bench.backend == "sqlite":
            self.path = url.removeprefix("sqlite:///")
            found = "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"
            with contextlib.closing(sqlite3.connect(self.path)) as conn:
                self.made = {
                    name: sql
                    for name, sql in conn.execute(found).fetchall()
                    if name.startswith("durable_tally_")
                }
            self.drops = [f"DROP TRIGGER {name}" for name in self.made]
            return
        self.schema = url.rsplit("search_path%3D", 1)[1]
        import psycopg

        with psycopg.connect(bench.pg_url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT t.tgname, c.relname, pg_get_triggerdef(t.oid) FROM pg_trigger AS t "
                "JOIN pg_class AS c ON c.oid = t.tgrelid JOIN pg_namespace AS n "
                "ON n.oid = c.relnamespace WHERE n.nspname = %s AND NOT t.tgisinternal "
                "AND t.tgname LIKE 'durable\\_tally\\_%%'",
                (self.schema,),
            ).fetchall()
        self.made = {name: sql for name, _, sql in rows}
        self.drops = [f'DROP TRIGGER {name} ON "{self.schema}".{table}' for name, table, _ in rows]
        if not self.made:
            raise SystemExit("found no tally triggers to drop")

    def set(self, on: bool) -> None:
        """Make the triggers (*on*) or drop them; made again if already on."""
        statements = list(self.made.values()) if on else self.drops
        if self.on:
            statements = self.drops + statements if on else statements
        elif not on:
            return
        self.on = on
        if self.bench.backend == "sqlite":
            with contextlib.closing(sqlite3.connect(self.path, isolation_level=None)) as conn:
                for sql in statements:
                    conn.execute(sql)
            return
        import psycopg

        with psycopg.connect(self.bench.pg_url, autocommit=True) as conn:
            for sql in statements:
                conn.execute(sql)


def measure(bench: steps.Bench, rounds: int, batch: int, same: bool) -> dict[str, object]:
    """The medians per step (see the module docstring); *same*: both arms tallied (the
    triggers dropped and made again all the same), to see how far apart the method
    puts two equal arms."""
    wall: dict[str, list[float]] = {"untallied": [], "tallied": []}
    cpu: dict[str, list[float]] = {"untallied": [], "tallied": []}
    with bench.fresh() as url, contextlib.closing(durable.configure(url)):
        triggers = Triggers(bench, url)
        run_batch(bench.plan.warmup, 10)
        for round_ in range(rounds):
            # ABBA: the arm that goes second in a round reads a few % slower (the
            # --same runs), so each goes second in half of the rounds.
            for name in ("untallied", "tallied")[:: 1 if round_ % 2 == 0 else -1]:
                triggers.set(on=same or name == "tallied")
                run_batch(10, 10)  # statements planned again after the schema change
                started, spent = time.perf_counter(), time.thread_time()
                run_batch(batch, 10)
                wall[name].append((time.perf_counter() - started) / (batch * 10) * 1e6)
                cpu[name].append((time.thread_time() - spent) / (batch * 10) * 1e6)
            log(
                f"  round {round_ + 1}: "
                + ", ".join(f"{k} {wall[k][-1]:.1f} us/step ({cpu[k][-1]:.1f} CPU)" for k in wall)
            )
    tallied, untallied = (statistics.median(wall[k]) for k in ("tallied", "untallied"))
    line = (
        {"benchmark": "tallies", "backend": bench.backend, "rounds": rounds, "batch": batch}
        | ({"both_arms_tallied": True} if same else {})
        | summary("us_per_step_tallied", wall["tallied"])
        | summary("us_per_step_untallied", wall["untallied"])
        | {
            "us_tallies_per_step": round(tallied - untallied, 2),
            "tallied_over_untallied": round(tallied / untallied, 3),
        }
    )
    if bench.backend == "sqlite":  # the triggers run in this thread; PostgreSQL's do not
        on, off = (statistics.median(cpu[k]) for k in ("tallied", "untallied"))
        line |= {
            "cpu_us_per_step_tallied": round(on, 2),
            "cpu_us_per_step_untallied": round(off, 2),
            "cpu_tallied_over_untallied": round(on / off, 3),
        }
    return line | {"target": TARGET, "load_average_1min": round(os.getloadavg()[0], 2)}


def instructions(tmp: Path, few: int, many: int) -> dict[str, object]:
    """Instructions per step in each arm (see the module docstring), on SQLite."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("--instructions needs valgrind (Debian: apt-get install valgrind)")
    counted: dict[str, float] = {}
    for arm in ("untallied", "tallied"):
        total = {}
        for workflows in (few, many):
            path = tmp / f"instructions-{arm}-{workflows}.db"
            command = [
                valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                sys.executable, __file__, "--child", str(workflows), "--arm", arm, "--path",
                str(path),
            ]  # fmt: skip
            env = os.environ | {"PYTHONHASHSEED": "0"}
            done = subprocess.run(command, check=False, capture_output=True, text=True, env=env)
            found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
            if done.returncode != 0 or found is None:
                raise SystemExit(f"the {arm} child failed:\n{done.stderr[-2000:]}")
            total[workflows] = int(found.group(1).replace(",", ""))
            log(f"  {arm}, {workflows} workflows: {total[workflows]:,} instructions")
        counted[arm] = (total[many] - total[few]) / ((many - few) * 10)
    on, off = counted["tallied"], counted["untallied"]
    return {
        "benchmark": "tallies", "backend": "sqlite", "measure": "instructions",
        "workflows": [few, many], "instructions_per_step_tallied": round(on),
        "instructions_per_step_untallied": round(off),
        "instructions_tallies_per_step": round(on - off),
        "instructions_tallied_over_untallied": round(on / off, 3), "target": TARGET,
    }  # fmt: skip


def child(workflows: int, arm: str, path: str) -> None:
    """An --instructions arm: *workflows* ten-step workflows on a new file at *path*,
    after ten to warm up, its triggers dropped if *arm* is untallied."""
    engine = durable.configure(f"sqlite:///{path}")
    if arm == "untallied":
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
            found = "SELECT name FROM sqlite_master WHERE type = 'trigger'"
            for (name,) in conn.execute(found).fetchall():
                if name.startswith("durable_tally_"):
                    conn.execute(f"DROP TRIGGER {name}")
    run_batch(10, 10)
    run_batch(workflows, 10)
    engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--rounds", type=int, default=None, help="pairs of batches (default 15)")
    parser.add_argument("--batch", type=int, default=None, help="workflows a batch (default 40)")
    parser.add_argument("--tmpdir", help="where SQLite files go: a real disk, not tmpfs")
    parser.add_argument(
        "--same", action="store_true", help="both arms tallied: the method's own spread"
    )
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions (SQLite, valgrind)"
    )
    parser.add_argument("--few", type=int, default=20, help="--instructions: the shorter run")
    parser.add_argument("--many", type=int, default=120, help="--instructions: the longer run")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--arm", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.arm, args.path)
        return
    if args.instructions:
        few, many = (2, 4) if args.quick else (args.few, args.many)
        with tempfile.TemporaryDirectory(prefix="durable-bench-", dir=args.tmpdir) as tmp:
            print(json.dumps(instructions(Path(tmp), few, many)), flush=True)
        return
    plan = steps.QUICK if args.quick else Plan()
    rounds = args.rounds or (1 if args.quick else 15)
    batch = args.batch or (3 if args.quick else 40)
    pg = os.environ.get("DURABLE_BENCH_POSTGRES_URL", steps.DEFAULT_PG)
    with tempfile.TemporaryDirectory(prefix="durable-bench-", dir=args.tmpdir) as tmp:
        for backend in args.backends.split(","):
            name = {"postgres": "postgresql"}.get(backend, backend)
            log(f"{name}:")
            line = measure(Bench(name, plan, Path(tmp), pg), rounds, batch, args.same)
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
