"""Worker processes of the outage tests, what their logs say, and the replay seed."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import random
import re
import subprocess
from collections import Counter

from tests.e2e.checker import read_ledger
from tests.e2e.harness import Children

#: Log lines that each stand for one failed attempt to reach the database.
ATTEMPT = re.compile(
    r"database unavailable|could not renew leases|LISTEN connection lost|"
    r"could not release its lease"
)


def chaos_seed() -> random.Random:
    """A random generator seeded from DURABLE_CHAOS_SEED (random if unset), printed so
    that a failing run can be replayed."""
    seed = int(os.environ.get("DURABLE_CHAOS_SEED") or random.randrange(2**32))
    print(f"DURABLE_CHAOS_SEED={seed}")
    return random.Random(seed)


def start_worker(children: Children, *options: str, **env: str) -> subprocess.Popen[str]:
    """``durable worker tests.chaos.chaos_app`` on the test's database."""
    command = ["-m", "durable", "worker", "tests.chaos.chaos_app", "--db", children.url]
    return children.spawn([*command, "--log-level", "INFO", *options], **env)


def log_lines(children: Children, worker: subprocess.Popen[str]) -> list[tuple[float, str]]:
    """The worker's log lines with their time (seconds since the epoch), in order.

    Lines without a timestamp (tracebacks) take the time of the line before.
    """
    lines: list[tuple[float, str]] = []
    at = 0.0
    for line in children.log(worker).splitlines():
        stamp = line[:23]
        with contextlib.suppress(ValueError):
            at = dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
        lines.append((at, line))
    return lines


def attempts_between(
    children: Children, worker: subprocess.Popen[str], start: float, end: float
) -> int:
    """How many failed database attempts the worker logged between *start* and *end*."""
    return sum(
        1 for at, line in log_lines(children, worker) if start <= at <= end and ATTEMPT.search(line)
    )


def unexplained_repeats(
    children: Children, workers: list[subprocess.Popen[str]]
) -> tuple[int, list[str]]:
    """Check the ledger's repeated task bodies against the workers' logs.

    A body may run again only if its run's execution was abandoned because the
    database failed (logged as "run ID ended with StorageError") before its result
    was stored: at-least-once, around the outage. Returns how many executions were
    abandoned so, and the repeats that no abandonment explains.
    """
    abandoned: Counter[str] = Counter()
    for worker in workers:
        for _, line in log_lines(children, worker):
            found = re.search(r"run (\S+) ended with StorageError", line)
            if found:
                abandoned[found.group(1)] += 1
    executions = Counter((entry.run_id, entry.position) for entry in read_ledger(children.ledger))
    unexplained = [
        f"{run_id}@{position} ran {count} times"
        for (run_id, position), count in sorted(executions.items())
        if count - 1 > abandoned[run_id]
    ]
    return sum(abandoned.values()), unexplained
