"""The soak's moving parts (benchmarks/soak.py): the feeder dispatching its mix of runs
and sending their events, the sampler, the purger and the checker, on one thread."""

from __future__ import annotations

import argparse
import datetime as dt
import heapq
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _soak_database import FINISHED, Database

MIX = (("short", 0.5), ("nap", 0.2), ("listen", 0.2), ("retrying", 0.1))


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


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
