"""The workload benchmarks/steps.py measures: a no-op task step and the workflows made of
it (a function; a class whose properties change at every step, measurement 6; a long
one whose last step crashes when measurement 3 asks), a task calling heartbeat() in a
tight loop (measurement 5), and batches of `steps` workflows, one after another or on
THREADS threads at once."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import durable
from durable import execute, task, workflow

THREADS = 8  # us_per_step_200x10_concurrent
CRASH_ENV = "DURABLE_BENCH_CRASH"
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
