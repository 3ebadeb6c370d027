"""A sustained mixed load on PostgreSQL: ``python benchmarks/soak.py [--quick]``.

One JSON object on stdout; progress on stderr. A fresh schema (dropped at the end) and
two `durable worker` processes. For --seconds (300; 8 with --quick) a feeder in this
process dispatches a steady --rate of runs per second (150; 50 with --quick), mixed:

* 50 % ``short``: three tasks in a row;
* 20 % ``nap``: a task, a durable sleep of 0.5-3 s (inline up to 1 s, else suspended),
  a task;
* 20 % ``listen``: waits for an event, which the feeder sends 0.2-2 s later (sometimes
  before the run reaches its wait: then it waits in the inbox);
* 10 % ``retrying``: a task that fails once and is retried, then a plain task.

Every --sample seconds it reads every newly finished run (and checks its result against
the value computed in pure Python), each worker's RSS (VmRSS in /proc), and the size,
row count and dead tuples of durable_runs, durable_history and durable_events. Every
10 s it calls ``durable.purge(older_than=5 s)``, right after a sample, so every run it
deletes has been seen finished. If the server's autovacuum is off (as on the project's
machines), it also runs ``VACUUM`` on the three tables after each purge, as autovacuum
would: deleted and updated rows leave dead tuples that only a vacuum makes reusable.
After the feed, the backlog drains, then the checker looks for problems:

* a dispatched run that vanished without being seen finished, finished with a wrong
  result or status, or is still unfinished after the drain (unless it legitimately
  waits: a timer not yet due);
* a run RUNNING with an expired lease;
* a remaining run whose history positions are not 0..n-1;
* history rows or events whose run is gone (purge left them behind);
* a purge count that does not match the runs that disappeared;
* a worker that died, or logged an error.

``rss_growth`` compares each worker's mean RSS over the last minute of the feed with
the first minute after a warm-up (two minutes; --quick: 3 s, and 2.5-second windows),
and gives its slope over that last minute.
"""

from __future__ import annotations

import sys

# The benchmarks directory holds queue.py, which would shadow the standard library: move
# it to the end of sys.path (the helpers beside this file, _soak_*.py, are imported
# from there).
sys.path[:] = [p for p in sys.path if p != __file__.rsplit("/", 1)[0]]
sys.path.append(__file__.rsplit("/", 1)[0])

import argparse
import json
import os
import signal
import subprocess
import tempfile
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from _soak_database import TABLES, Database
from _soak_load import MIX, Soak

HERE = Path(__file__).resolve().parent
APP = HERE / "_soak_app.py"
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
CONCURRENCY = 32


def load_app() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("_soak_app", APP)
    assert spec and spec.loader
    app = importlib.util.module_from_spec(spec)
    sys.modules["_soak_app"] = app
    spec.loader.exec_module(app)
    return app


def start_workers(url: str, count: int, logs: Path, markers: Path) -> list[subprocess.Popen[bytes]]:
    workers = []
    env = {**os.environ, "DURABLE_SOAK_MARKERS": str(markers)}
    for i in range(count):
        with (logs / f"worker-{i}.log").open("w") as out:
            workers.append(
                subprocess.Popen(
                    [
                        sys.executable, "-m", "durable", "worker", str(APP), "--db", url,
                        "--concurrency", str(CONCURRENCY), "--log-level", "WARNING",
                    ],
                    stdout=out,
                    stderr=out,
                    env=env,
                )
            )  # fmt: skip
    return workers


def rss_growth(
    samples: list[dict[str, Any]], warm_up: float, window: float, end: float
) -> list[dict[str, Any]]:
    """Per worker, over the samples taken while feeding (up to *end*): the mean RSS in
    the first *window* seconds after *warm_up* and in the last *window* seconds, and
    the slope over that last window (least squares, MB per minute)."""
    feeding = [s for s in samples if s["t"] <= end]
    first = [s for s in feeding if warm_up <= s["t"] < warm_up + window]
    last = [s for s in feeding if s["t"] > end - window]
    growth = []
    for i in range(len(samples[0]["rss_mb"])):
        before = [s["rss_mb"][i] for s in first if s["rss_mb"][i] is not None]
        after = [(s["t"], s["rss_mb"][i]) for s in last if s["rss_mb"][i] is not None]
        if not before or len(after) < 2:
            growth.append({"worker": i, "first_mb": None, "last_mb": None})
            continue
        a = sum(before) / len(before)
        b = sum(mb for _, mb in after) / len(after)
        mean_t = sum(t for t, _ in after) / len(after)
        slope = sum((t - mean_t) * (mb - b) for t, mb in after) / sum(
            (t - mean_t) ** 2 for t, _ in after
        )
        growth.append(
            {
                "worker": i,
                "first_mb": round(a, 1),
                "last_mb": round(b, 1),
                "growth_pct": round((b / a - 1) * 100, 1),
                "last_slope_mb_per_min": round(slope * 60, 2),
                "after_drain_mb": samples[-1]["rss_mb"][i],
            }
        )
    return growth


def measure(url: str, schema: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import durable

    logs, markers = tmp / "logs", tmp / "markers"
    logs.mkdir()
    markers.mkdir()
    os.environ["DURABLE_SOAK_MARKERS"] = str(markers)
    app = load_app()
    engine = durable.configure(url)  # creates the schema before the workers start
    db = Database(url, schema)
    soak = Soak(app, db, args, logs)
    try:
        soak.workers = start_workers(url, 2, logs, markers)
        soak.run()
        soak.check()
    finally:
        for worker in soak.workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in soak.workers:
            worker.wait(60)
        engine.close()
        db.close()
    samples, seconds = soak.samples, args.seconds
    # Warm-up: caches and bounded structures fill first (a worker's wake-up hub holds
    # up to 20,000 topics, reached after about two minutes at 150 runs/s).
    warm_up = 3.0 if args.quick else min(120.0, seconds * 0.4)
    window = 2.5 if args.quick else min(60.0, seconds / 4)
    feeding = [s for s in samples if warm_up <= s["t"] <= seconds]
    rates = [s["finished_per_s"] for s in feeding[1:]]
    growth = rss_growth(samples, warm_up, window, seconds)
    peak = {t: max(s["tables"][t]["bytes"] for s in samples) for t in TABLES}
    result: dict[str, Any] = {
        "backend": "postgresql",
        "seconds": seconds,
        "rate_per_s": args.rate,
        "workers": 2,
        "concurrency_per_worker": CONCURRENCY,
        "mix": dict(MIX),
        "dispatched": len(soak.dispatched),
        "kinds": dict(Counter(kind for kind, _ in soak.dispatched.values())),
        "finished": len(soak.seen),
        "still_waiting": soak.still_waiting,
        "throughput": {
            "finished_per_s_mean": round(len(soak.seen) / samples[-1]["t"], 1),
            "finished_per_s_min": min(rates) if rates else None,
            "finished_per_s_max": max(rates) if rates else None,
        },
        "rss_growth": growth,
        "tables_peak_bytes": peak,
        "tables_end": samples[-1]["tables"],
        "vacuum": "after each purge (the server's autovacuum is off)"
        if soak.vacuum
        else "autovacuum",
        "purge_every_s": args.purge_every,
        "purge_older_than_s": args.purge_older_than,
        "purges": soak.purges,
        "purged": sum(p["deleted"] for p in soak.purges),
        "samples": samples,
        "worker_warnings": soak.warnings,
        "checker": "ok" if not soak.problems else soak.problems[:50],
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 seconds: a smoke test")
    parser.add_argument("--seconds", type=float, help="how long to feed (default: 300, --quick: 8)")
    parser.add_argument(
        "--rate", type=float, help="runs dispatched per second (default: 150, --quick: 50)"
    )
    parser.add_argument(
        "--sample", type=float, help="seconds between samples (default: 10, --quick: 1)"
    )
    parser.add_argument(
        "--postgres-url", default=os.environ.get("DURABLE_BENCH_POSTGRES_URL", DEFAULT_PG)
    )
    args = parser.parse_args()
    args.seconds = args.seconds or (8.0 if args.quick else 300.0)
    args.rate = args.rate or (50.0 if args.quick else 150.0)
    args.sample = args.sample or (1.0 if args.quick else 10.0)
    # Purge every 10 s what finished over 5 s ago (--quick: every 1 s, over 0.5 s ago).
    args.purge_every, args.purge_older_than = (1.0, 0.5) if args.quick else (10.0, 5.0)
    import psycopg

    schema = f"soak_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(args.postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        sep = "&" if "?" in args.postgres_url else "?"
        url = f"{args.postgres_url}{sep}options=-csearch_path%3D{schema}"
        with tempfile.TemporaryDirectory(prefix="durable-soak-") as tmp:
            result = measure(url, schema, args, Path(tmp))
        print(json.dumps(result), flush=True)
    finally:
        with psycopg.connect(args.postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


if __name__ == "__main__":
    main()
