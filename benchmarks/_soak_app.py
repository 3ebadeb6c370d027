"""The workflows benchmarks/soak.py keeps its two worker processes busy with.

Each kind's result is a plain function of its arguments (see `expected`), so the soak
can check every result it sees against a value computed in pure Python.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import durable
from durable import task, wait, workflow

#: A directory shared with the workers: a file per flaky task that has failed once.
MARKERS = Path(os.environ.get("DURABLE_SOAK_MARKERS", "/tmp/durable-soak-markers"))


@task
def add(a: int, b: int) -> int:
    return a + b


@task(retry={"attempts": 3, "backoff": "constant", "initial": 0.05})
def flaky(i: int) -> int:
    """Fail on the first attempt, succeed on the next (in whichever worker runs it)."""
    marker = MARKERS / durable.task_key().replace("/", "_")
    if not marker.exists():
        marker.touch()
        raise RuntimeError(f"flaky({i}): first attempt fails on purpose")
    marker.unlink(missing_ok=True)
    return i * 10


@workflow
def short(i: int) -> int:
    """Three tasks, one after another."""
    return add(i, 1) + add(i, 2) + add(i, 3)


@workflow
def nap(i: int, seconds: float) -> int:
    """A task, a durable sleep (inline up to the worker's max_inline_wait, else
    suspended), a task."""
    before = add(i, 0)
    wait(dt.timedelta(seconds=seconds))
    return add(before, 1)


@workflow
def listen(i: int) -> int:
    """Wait for the "go" event the soak sends a little later; add its payload."""
    payload = wait("go", timeout=dt.timedelta(minutes=10))
    if payload is None:
        return -1  # timed out: the checker reports it
    return add(i, int(payload))


@workflow
def retrying(i: int) -> int:
    """A task that fails once and is retried, then a plain one."""
    return add(flaky(i), 1)


def expected(kind: str, i: int) -> int:
    """What run *i* of *kind* returns, computed without durable."""
    if kind == "short":
        return 3 * i + 6
    if kind == "nap":
        return i + 1
    if kind == "listen":
        return i + 2 * i  # the soak sends 2 * i
    if kind == "retrying":
        return 10 * i + 1
    raise ValueError(kind)
