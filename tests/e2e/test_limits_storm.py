"""Flow control under a kill storm (issue 16): three workers, a random one SIGKILLed
and replaced every second or so (every other kill aimed at a worker inside a body),
runs in a queue limited to 3 at once and runs of five keys limited to 1 each. Rebuilt
from what the task bodies wrote when they started and ended (a killed body ends at its
kill): never more bodies at once than the limit, and every run completes. And a rate of
100 starts a second, measured over 1,000 starts from the database: never more in any
one-second window, and within 5 % of it."""

from __future__ import annotations

import datetime as dt
import os
import random
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import pytest

import durable
from durable.core.queues import make_queue
from durable.core.records import RunQuery, RunStatus
from tests.e2e.harness import Children
from tests.e2e.limits_app import held, quick
from tests.e2e.test_workers import stop_all

LIMITED, KEYED, RATED, KEY_RATED = "limited", "keyed", "rated", "key-rated"
#: Seconds of storm: long enough that every kind of run is killed mid-body.
STORM = 20.0


def start_worker(children: Children, log: Path, *queues: str) -> subprocess.Popen[str]:
    command = ["-m", "durable", "worker", "tests.e2e.limits_app", "--db", children.url]
    served = [option for queue in queues for option in ("--queue", queue)]
    # A killed worker's runs are taken over at once (its pid is gone from this host), so
    # the lease need not be short; a long one keeps a worker starved by a loaded machine
    # from losing its runs' leases while their bodies go on (then another may start).
    options = ["--concurrency", "8", "--lease", "6", "--log-level", "INFO"]
    return children.spawn([*command, *served, *options], DURABLE_LIMITS_LOG=str(log))


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The most intervals that overlap at one moment."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = level = 0
    for _, step in edges:  # an end sorts before a start at the same moment
        level += step
        most = max(most, level)
    return most


def running_in(log: Path) -> set[int]:
    """The pids of the workers with a body started and not yet ended, as the log says."""
    open_bodies: set[tuple[str, int]] = set()
    for line in log.read_text().splitlines():
        if len(line.split()) != 4:
            continue  # a line being written right now
        what, run_id, pid, _ = line.split()
        (open_bodies.add if what == "start" else open_bodies.discard)((run_id, int(pid)))
    return {pid for _, pid in open_bodies}


def peak(spans: dict[str, list[tuple[float, float]]], runs: list[str]) -> str:
    """The bodies of *runs* running at the busiest moment, for a failure message."""
    mine = [(start, end, run) for run in runs for start, end in spans[run]]
    moments = [start for start, _, _ in mine]
    busiest = max(moments, key=lambda at: sum(1 for s, e, _ in mine if s <= at < e))
    return "; ".join(f"{run} {s:.3f}-{e:.3f}" for s, e, run in mine if s <= busiest < e)


def bodies(log: Path, killed: dict[int, float]) -> dict[str, list[tuple[float, float]]]:
    """Each run's task bodies as (start, end); a body whose worker was killed ends then."""
    open_bodies: dict[tuple[str, int], float] = {}
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for line in log.read_text().splitlines():
        what, run_id, pid, at = line.split()
        if what == "start":
            open_bodies[run_id, int(pid)] = float(at)
        else:
            spans[run_id].append((open_bodies.pop((run_id, int(pid))), float(at)))
    for (run_id, pid), start in open_bodies.items():
        assert pid in killed, f"run {run_id}: a body in living worker {pid} never ended"
        spans[run_id].append((start, killed[pid]))
    return spans


@pytest.mark.chaos
@pytest.mark.parametrize(
    "url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_limits_hold_through_a_kill_storm(children: Children, url: str, tmp_path: Path) -> None:
    seed = int(os.environ.get("DURABLE_CHAOS_SEED") or random.randrange(2**32))
    print(f"DURABLE_CHAOS_SEED={seed}")
    rng = random.Random(seed)
    log = tmp_path / "bodies.log"
    log.touch()
    with durable.Engine(url) as engine:
        engine.backend.put_queue(make_queue(LIMITED, concurrency=3))
        limited = [engine.dispatch_call(held.bind(0.4), queue=LIMITED).id for _ in range(40)]
        keyed = {
            engine.dispatch_call(
                held.bind(0.3), queue=KEYED, key=f"k{i % 5}", key_concurrency=1
            ).id: f"k{i % 5}"
            for i in range(40)
        }
    workers = [start_worker(children, log, LIMITED, KEYED) for _ in range(3)]
    killed: dict[int, float] = {}
    end = time.monotonic() + STORM
    while time.monotonic() < end:
        time.sleep(rng.uniform(0.7, 1.5))
        busy = [worker for worker in workers if worker.pid in running_in(log)]
        # half the kills aim at a worker inside a body, so some bodies surely die mid-run
        victim = rng.choice(busy if busy and rng.random() < 0.5 else workers)
        # Its bodies end at the signal: once it is sent, the worker is as good as dead and
        # another may take its runs over (the reaping, after, is later than that).
        killed[victim.pid] = time.time()
        children.kill(victim)
        workers[workers.index(victim)] = start_worker(children, log, LIMITED, KEYED)
    with durable.Engine(url) as engine:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            statuses = [engine.backend.get_run(run_id) for run_id in [*limited, *keyed]]
            if all(run is not None and run.status is RunStatus.COMPLETED for run in statuses):
                break
            time.sleep(0.5)
    stop_all(children, workers)
    assert len(killed) >= STORM / 2, "the storm must actually have killed workers"
    unfinished = [
        (run.id, run.status.value, run.recoveries, run.lease_owner)
        for run in statuses
        if run is not None and run.status is not RunStatus.COMPLETED
    ]
    assert all(run is not None for run in statuses) and not unfinished, unfinished
    spans = bodies(log, killed)
    assert most_at_once([span for run in limited for span in spans[run]]) <= 3, peak(spans, limited)
    assert most_at_once([span for run in limited for span in spans[run]]) == 3, (
        "the limit was reached: the test could have seen it broken"
    )
    for key in sorted(set(keyed.values())):
        mine = [span for run, k in keyed.items() if k == key for span in spans[run]]
        runs = [run for run, k in keyed.items() if k == key]
        assert most_at_once(mine) == 1, f"key {key}: {peak(spans, runs)}"
    assert most_at_once([span for run in keyed for span in spans[run]]) > 1, (
        "different keys ran side by side"
    )
    interrupted = sum(1 for run in [*limited, *keyed] if len(spans[run]) > 1)
    assert interrupted > 0, "the storm must have killed some bodies mid-run"


@pytest.mark.chaos
@pytest.mark.parametrize(
    "url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_a_rate_holds_over_a_thousand_starts(children: Children, url: str, tmp_path: Path) -> None:
    rate, starts = 100, 1000
    with durable.Engine(url) as engine:
        engine.backend.put_queue(make_queue(RATED, rate=(rate, dt.timedelta(seconds=1))))
        for _ in range(starts):
            engine.dispatch_call(quick.bind(), queue=RATED)
    log = tmp_path / "bodies.log"
    workers = [start_worker(children, log, RATED) for _ in range(2)]
    with durable.Engine(url) as engine:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            runs = engine.backend.list_runs(RunQuery(workflow=quick.name), limit=10_000)
            if sum(1 for run in runs if run.status is RunStatus.COMPLETED) == starts:
                break
            time.sleep(0.5)
    stop_all(children, workers)
    times = sorted(run.started_at for run in runs if run.started_at is not None)
    assert len(times) == starts
    assert_rate(times, rate)


@pytest.mark.chaos
@pytest.mark.parametrize(
    "url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_each_keys_rate_holds(children: Children, url: str, tmp_path: Path) -> None:
    """Four keys of 20 starts a second each, 120 runs per key: per key, never more in
    any one-second window, and within 5 % of it; the keys go side by side."""
    rate, keys, per_key = 20, ("a", "b", "c", "d"), 120
    with durable.Engine(url) as engine:
        engine.backend.put_queue(make_queue(KEY_RATED, key_rate=(rate, 1.0)))
        for _ in range(per_key):
            for key in keys:
                engine.dispatch_call(quick.bind(), queue=KEY_RATED, key=key)
    workers = [start_worker(children, tmp_path / "bodies.log", KEY_RATED) for _ in range(2)]
    with durable.Engine(url) as engine:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            runs = engine.backend.list_runs(RunQuery(workflow=quick.name), limit=10_000)
            if sum(1 for run in runs if run.status is RunStatus.COMPLETED) == len(keys) * per_key:
                break
            time.sleep(0.5)
    stop_all(children, workers)
    for key in keys:
        times = sorted(run.started_at for run in runs if run.key == key and run.started_at)
        assert len(times) == per_key, key
        assert_rate(times, rate)
    firsts = [
        min(run.started_at for run in runs if run.key == key and run.started_at) for key in keys
    ]
    assert max(firsts) - min(firsts) < 1.0, "one key's rate does not hold the others back"


def assert_rate(times: list[float], rate: int) -> None:
    """*times* (sorted) never hold more than *rate* starts in any one-second window, and
    average within 5 % of it, per whole second from the first start."""
    j = 0
    for i, first in enumerate(times):
        while j < len(times) and times[j] < first + 1.0:
            j += 1
        assert j - i <= rate, f"{j - i} starts in the second from {first}"
    origin = times[0]
    per_second = [0] * int(times[-1] - origin)
    for at in times:
        second = int(at - origin)
        if second < len(per_second):
            per_second[second] += 1
    mean = sum(per_second) / len(per_second)
    print(f"starts per second: mean {mean:.1f}, each {per_second}")
    assert rate * 0.95 <= mean <= rate, per_second
