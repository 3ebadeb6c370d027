"""A sustained mixed load on PostgreSQL: ``python benchmarks/soak.py [--quick]``.

One JSON object on stdout; progress on stderr. A fresh schema (dropped at the end) and
two `durable worker` processes. For --seconds (300; 20 with --quick) a feeder in this
process dispatches a steady --rate of runs per second, mixed:

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
the first minute after a warm-up (two minutes; --quick: 5 s, and 5-second windows),
and gives its slope over that last minute.
"""

from __future__ import annotations

import sys

# The benchmarks directory holds queue.py, which would shadow the standard library.
sys.path[:] = [p for p in sys.path if p != __file__.rsplit("/", 1)[0]]

import argparse
import datetime as dt
import heapq
import json
import os
import random
import signal
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
APP = HERE / "_soak_app.py"
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
TABLES = ("durable_runs", "durable_history", "durable_events")
FINISHED = "('completed', 'failed', 'cancelled', 'dead')"
MIX = (("short", 0.5), ("nap", 0.2), ("listen", 0.2), ("retrying", 0.1))
CONCURRENCY = 32


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_app() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("_soak_app", APP)
    assert spec and spec.loader
    app = importlib.util.module_from_spec(spec)
    sys.modules["_soak_app"] = app
    spec.loader.exec_module(app)
    return app


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


class Database:
    """Reads (and VACUUMs) of the soak's schema, on one autocommit connection."""

    def __init__(self, url: str, schema: str) -> None:
        import psycopg

        self.schema = schema
        self.conn = psycopg.connect(url, autocommit=True)

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params or None).fetchall()

    def tables(self) -> dict[str, dict[str, int]]:
        sizes = {}
        for table in TABLES:
            size, count = self.rows(
                f"SELECT pg_total_relation_size('{table}'), count(*) FROM {table}"
            )[0]
            dead = self.rows(
                "SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = %s AND relname = %s",
                self.schema,
                table,
            )
            sizes[table] = {
                "bytes": int(size),
                "rows": int(count),
                "dead": int(dead[0][0]) if dead else 0,
            }
        return sizes

    def autovacuum(self) -> bool:
        return bool(self.rows("SHOW autovacuum")[0][0] == "on")

    def vacuum(self) -> float:
        """VACUUM the three tables; return the seconds it took."""
        started = time.perf_counter()
        self.conn.execute(f"VACUUM {', '.join(TABLES)}")
        return time.perf_counter() - started

    def close(self) -> None:
        self.conn.close()


class Soak:
    """The feeder, the sampler, the purger and the checker, on one thread."""

    def __init__(self, app: Any, db: Database, args: argparse.Namespace, logs: Path) -> None:
        self.app, self.db, self.logs = app, db, logs
        self.seconds, self.rate, self.sample_every = args.seconds, args.rate, args.sample
        self.purge_every, self.purge_older_than = args.purge_every, args.purge_older_than
        self.vacuum = not db.autovacuum()
        self.rng = random.Random(20250101)
        self.dispatched: dict[str, tuple[str, int]] = {}  # run id -> (kind, i)
        self.sends: list[tuple[float, str, int]] = []  # (due, run id, payload), a heap
        self.sent: set[str] = set()
        self.seen: dict[str, Any] = {}  # run id -> result, for every run seen finished
        self.problems: list[str] = []
        self.samples: list[dict[str, Any]] = []
        self.purges: list[dict[str, Any]] = []
        self.workers: list[subprocess.Popen[bytes]] = []
        self.still_waiting = 0
        self.warnings = 0

    # -- the load ---------------------------------------------------------------------

    def dispatch(self, n: int) -> None:
        import durable

        app = self.app

        roll, kind = self.rng.random(), "short"
        for name, share in MIX:
            if roll < share:
                kind = name
                break
            roll -= share
        run_id = f"{kind}-{n}"
        if kind == "nap":
            durable.dispatch(app.nap, n, round(self.rng.uniform(0.5, 3.0), 3), id=run_id)
        else:
            durable.dispatch(getattr(app, kind), n, id=run_id)
        if kind == "listen":
            heapq.heappush(
                self.sends, (time.monotonic() + self.rng.uniform(0.2, 2.0), run_id, 2 * n)
            )
        self.dispatched[run_id] = (kind, n)

    def send_due(self, now: float) -> None:
        import durable

        while self.sends and self.sends[0][0] <= now:
            _, run_id, payload = heapq.heappop(self.sends)
            durable.send(run_id, "go", payload)
            self.sent.add(run_id)

    def run(self) -> None:
        started = time.monotonic()
        next_sample, next_purge, n = started, started + self.purge_every, 0
        while (now := time.monotonic()) - started < self.seconds:
            while n < int((now - started) * self.rate):
                self.dispatch(n)
                n += 1
            self.send_due(now)
            if now >= next_sample:
                self.sample(now - started)
                next_sample += self.sample_every
                if now >= next_purge:  # right after a sample: every run it deletes was seen
                    self.purge(now - started)
                    next_purge += self.purge_every
            time.sleep(0.005)
        log(f"  fed {n} runs in {self.seconds:.0f} s; draining")
        self.drain(started)

    def drain(self, started: float) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            self.send_due(time.monotonic())
            unfinished = self.db.rows(
                f"SELECT count(*) FROM durable_runs WHERE status NOT IN {FINISHED}"
            )[0][0]
            if unfinished == 0 and not self.sends:
                break
            time.sleep(0.2)
        self.sample(time.monotonic() - started)

    # -- observing --------------------------------------------------------------------

    def see_finished(self) -> None:
        """Read every run that finished since the last look; check its result."""
        for run_id, status, output in self.db.rows(
            f"SELECT id, status, output FROM durable_runs WHERE status IN {FINISHED}"
        ):
            if run_id in self.seen:
                continue
            kind, i = self.dispatched.get(run_id, ("?", -1))
            value = json.loads(bytes(output)[1:]) if output is not None else None
            self.seen[run_id] = value
            if kind == "?":
                self.problems.append(f"{run_id}: finished, but was never dispatched")
            elif status != "completed":
                self.problems.append(f"{run_id}: {status}, expected completed")
            elif value != (expected := self.app.expected(kind, i)):
                self.problems.append(f"{run_id}: returned {value!r}, expected {expected!r}")

    def sample(self, at: float) -> None:
        self.see_finished()
        finished = len(self.seen)
        previous = self.samples[-1] if self.samples else {"t": 0.0, "finished": 0}
        interval = at - previous["t"]
        unfinished = self.db.rows(
            f"SELECT count(*) FROM durable_runs WHERE status NOT IN {FINISHED}"
        )[0][0]
        sample = {
            "t": round(at, 1),
            "dispatched": len(self.dispatched),
            "finished": finished,
            "finished_per_s": round((finished - previous["finished"]) / interval, 1)
            if interval > 0
            else 0.0,
            "unfinished": int(unfinished),
            "purged": sum(p["deleted"] for p in self.purges),
            "rss_mb": [rss_mb(w.pid) if w.poll() is None else None for w in self.workers],
            "tables": self.db.tables(),
        }
        self.samples.append(sample)
        tables = sample["tables"]
        log(
            f"  t={at:5.0f}s finished {finished:6d} ({sample['finished_per_s']:6.1f}/s) "
            f"unfinished {unfinished:4d} rss {sample['rss_mb']} MB runs "
            f"{tables['durable_runs']['rows']} rows/{tables['durable_runs']['bytes'] // 1024} KiB "
            f"history {tables['durable_history']['rows']} events {tables['durable_events']['rows']}"
        )

    def purge(self, at: float) -> None:
        import durable

        started = time.perf_counter()
        deleted = durable.purge(dt.timedelta(seconds=self.purge_older_than))
        took = time.perf_counter() - started
        purge = {"t": round(at, 1), "deleted": deleted, "ms": round(took * 1000, 1)}
        if self.vacuum:
            purge["vacuum_ms"] = round(self.db.vacuum() * 1000, 1)
        self.purges.append(purge)

    # -- checking ---------------------------------------------------------------------

    def check(self) -> None:
        present = {
            run_id: (status, wake_at, waiting_on)
            for run_id, status, wake_at, waiting_on in self.db.rows(
                "SELECT id, status, wake_at, waiting_on FROM durable_runs"
            )
        }
        now = self.db.rows("SELECT extract(epoch FROM clock_timestamp())::float8")[0][0]
        vanished = [r for r in self.dispatched if r not in present]
        unseen = [r for r in vanished if r not in self.seen]
        for run_id in unseen[:20]:
            self.problems.append(f"{run_id}: deleted without having been seen finished")
        purged = sum(p["deleted"] for p in self.purges)
        if purged != len(vanished):
            self.problems.append(f"the purges deleted {purged} runs, but {len(vanished)} are gone")
        waiting = 0
        for run_id, (status, wake_at, waiting_on) in present.items():
            if status in FINISHED:
                continue
            if status == "waiting" and wake_at is not None and wake_at > now:
                waiting += 1  # a timer not due yet
            elif status == "waiting" and waiting_on == "event:go" and run_id not in self.sent:
                waiting += 1  # its event is not sent yet
            else:
                self.problems.append(f"{run_id}: still {status} after the drain ({waiting_on})")
        for (run_id,) in self.db.rows(
            "SELECT id FROM durable_runs WHERE status = 'running' AND lease_until < %s", now
        ):
            self.problems.append(f"{run_id}: RUNNING with an expired lease")
        for run_id, count, first, last in self.db.rows(
            "SELECT run_id, count(*), min(position), max(position) FROM durable_history "
            "GROUP BY run_id"
        ):
            if first != 0 or last != count - 1:
                self.problems.append(f"{run_id}: history positions {first}..{last} in {count} rows")
        for table, column in (("durable_history", "run_id"), ("durable_events", "run_id")):
            orphans = self.db.rows(
                f"SELECT count(*) FROM {table} t WHERE NOT EXISTS "
                f"(SELECT 1 FROM durable_runs r WHERE r.id = t.{column})"
            )[0][0]
            if orphans:
                self.problems.append(f"{orphans} rows of {table} belong to no run")
        for i, worker in enumerate(self.workers):
            if worker.poll() is not None:
                self.problems.append(f"worker {i} exited with {worker.returncode}")
        for path in sorted(self.logs.glob("worker-*.log")):
            lines = path.read_text().splitlines()
            errors = [line for line in lines if " ERROR " in line or "Traceback" in line]
            self.problems += [f"{path.name}: {line}" for line in errors[:5]]
            self.warnings += sum(" WARNING " in line for line in lines)
        self.still_waiting = waiting


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
    warm_up = 5.0 if args.quick else min(120.0, seconds * 0.4)
    window = 5.0 if args.quick else min(60.0, seconds / 4)
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
    parser.add_argument("--quick", action="store_true", help="20 seconds: a smoke test")
    parser.add_argument(
        "--seconds", type=float, help="how long to feed (default: 300, --quick: 20)"
    )
    parser.add_argument("--rate", type=float, default=150.0, help="runs dispatched per second")
    parser.add_argument(
        "--sample", type=float, help="seconds between samples (default: 10, --quick: 2)"
    )
    parser.add_argument(
        "--postgres-url", default=os.environ.get("DURABLE_BENCH_POSTGRES_URL", DEFAULT_PG)
    )
    args = parser.parse_args()
    args.seconds = args.seconds or (20.0 if args.quick else 300.0)
    args.sample = args.sample or (2.0 if args.quick else 10.0)
    # Purge every 10 s what finished over 5 s ago (--quick: every 4 s, over 2 s ago).
    args.purge_every, args.purge_older_than = (4.0, 2.0) if args.quick else (10.0, 5.0)
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
