"""Before / after, interleaved: ``python benchmarks/compare.py --against REV [--rounds N]``.

The per-step cost of `benchmarks/steps.py`'s measurement 1 (50 warm-up workflows, then
200 workflows of 10 no-op task steps, one after another: wall time / 2000), for the
code in this checkout ("after") and for git revision REV ("before", checked out in a
temporary worktree), alternately: before, after, before, after... each in a fresh
process on a fresh SQLite file or PostgreSQL schema. This machine's speed drifts by
the hour, so the two are only comparable measured in the same minutes. One JSON line
per backend on stdout: every value, the medians and after / before.
"""

from __future__ import annotations

import sys

# benchmarks/queue.py shares its name with the standard library's queue module, and
# Python puts a script's directory first on sys.path: take it off before importing.
sys.path[:] = [p for p in sys.path if p != __file__.rsplit("/", 1)[0]]

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
LENGTH = 10
#: The PostgreSQL schemas it makes (one per measurement, dropped after it).
SCHEMA_PREFIX = "bench_compare_"
SIZES = {"full": (50, 200), "quick": (2, 5)}  # warm-up workflows, measured workflows


def child(url: str, size: str) -> None:
    """In a fresh process, on the code PYTHONPATH names: print us/step. The workload is
    steps.py's measurement 1, defined here with only what every revision has (steps.py
    itself may use features the other revision lacks)."""
    import time

    import durable
    from durable import execute, task, workflow

    @task(name="compare.step")
    def step(i: int) -> int:
        return i

    @workflow(name="compare.steps")
    def steps(n: int) -> int:
        for i in range(n):
            step(i)
        return n

    warmup, workflows = SIZES[size]
    durable.configure(url)
    for _ in range(warmup):
        execute(steps, LENGTH)
    start = time.perf_counter()
    for _ in range(workflows):
        execute(steps, LENGTH)
    print(round((time.perf_counter() - start) / (workflows * LENGTH) * 1e6, 1))


@contextlib.contextmanager
def fresh_url(backend: str, tmp: Path, pg_url: str) -> Iterator[str]:
    """An empty SQLite file, or a new PostgreSQL schema dropped after use."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp / f'{uuid.uuid4().hex}.db'}"
        return
    name = f"{SCHEMA_PREFIX}{uuid.uuid4().hex[:12]}"
    subprocess.run(["psql", pg_url, "-qc", f"CREATE SCHEMA {name}"], check=True)
    driver = pg_url.replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        yield f"{driver}?options=-csearch_path%3D{name}"
    finally:
        subprocess.run(["psql", pg_url, "-qc", f"DROP SCHEMA {name} CASCADE"], check=True)


def measure(src: Path, url: str, size: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, __file__, "--child", url, "--size", size],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="the git revision to compare with (before)")
    parser.add_argument("--rounds", type=int, default=5, help="%(default)s")
    parser.add_argument("--backends", default="sqlite,postgres", help="%(default)s")
    parser.add_argument(
        "--postgres-url", default=os.environ.get("DURABLE_BENCH_POSTGRES_URL", DEFAULT_PG)
    )
    parser.add_argument("--tmpdir", help="where SQLite files and the worktree go: a real disk")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one round: a smoke test")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--size", default="full", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.size)
        return
    size, rounds = ("quick", 1) if args.quick else ("full", args.rounds)
    if not args.against:
        parser.error("--against REV is required")
    with tempfile.TemporaryDirectory(prefix="durable-compare-", dir=args.tmpdir) as tmp_name:
        tmp = Path(tmp_name)
        before = tmp / "before"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(before), args.against],
            cwd=ROOT, check=True,
        )  # fmt: skip
        try:
            for name in args.backends.split(","):
                backend = {"postgres": "postgresql"}.get(name, name)
                sides: dict[str, list[float]] = {"before": [], "after": []}
                for _ in range(rounds):
                    for side, src in (("before", before / "src"), ("after", ROOT / "src")):
                        with fresh_url(backend, tmp, args.postgres_url) as url:
                            sides[side].append(measure(src, url, size))
                medians = {side: statistics.median(values) for side, values in sides.items()}
                print(json.dumps({
                    "backend": backend,
                    "against": args.against,
                    "quick": args.quick,
                    "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "us_per_step_200x10_before": medians["before"],
                    "us_per_step_200x10_after": medians["after"],
                    "after_over_before": round(medians["after"] / medians["before"], 3),
                    "values_before": sides["before"],
                    "values_after": sides["after"],
                }), flush=True)  # fmt: skip
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, check=False
            )


if __name__ == "__main__":
    main()
