"""Schedules under a kill storm (issue 16): three workers, fifty schedules firing every
second for 60 s (DURABLE_SCHEDULE_STORM_S to change it), a random worker SIGKILLed and
replaced about every second. Checked from the database: every tick of every schedule
fired exactly once (one run, whose id names the tick), none lost (catch-up "all"),
none early. Every other schedule has a jitter of half a second: its runs are created
waiting at the tick, and none starts before its tick's delay is over."""

from __future__ import annotations

import datetime as dt
import itertools
import os
import random
import subprocess
import time
from collections import defaultdict

import pytest

import durable
from durable.core.records import RunQuery
from durable.core.schedules import Schedule, delay
from durable.runtime import schedules
from tests.e2e.harness import Children
from tests.e2e.schedule_app import ticked
from tests.e2e.test_workers import stop_all

SCHEDULES = 50
#: Seconds of storm, as the issue asks (about 65 s a database; DURABLE_SCHEDULE_STORM_S
#: to shorten it while working on schedules).
STORM = float(os.environ.get("DURABLE_SCHEDULE_STORM_S") or 60)


def start_worker(children: Children) -> subprocess.Popen[str]:
    command = ["-m", "durable", "worker", "tests.e2e.schedule_app", "--db", children.url]
    options = ["--concurrency", "4", "--lease", "2", "--log-level", "INFO"]
    return children.spawn([*command, *options])


def _tick(run_id: str) -> float:
    stamp = run_id.split("@", 1)[1]
    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC).timestamp()


@pytest.mark.chaos
@pytest.mark.parametrize(
    "url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_every_tick_fires_once_through_a_kill_storm(children: Children, url: str) -> None:
    seed = int(os.environ.get("DURABLE_CHAOS_SEED") or random.randrange(2**32))
    print(f"DURABLE_CHAOS_SEED={seed}")
    rng = random.Random(seed)
    with durable.Engine(url) as engine:
        created = {
            s.id: s for s in (_store(engine, f"s{i:02d}", i % 2 * 0.5) for i in range(SCHEDULES))
        }
    workers = [start_worker(children) for _ in range(3)]
    killed = 0
    end = time.monotonic() + STORM
    while time.monotonic() < end:
        time.sleep(rng.uniform(0.5, 1.5))
        victim = rng.choice(workers)
        children.kill(victim)
        killed += 1
        workers[workers.index(victim)] = start_worker(children)
    time.sleep(3)  # the survivors catch up on the ticks the last kill delayed
    stop_all(children, workers)
    with durable.Engine(url) as engine:
        runs = engine.backend.list_runs(RunQuery(workflow=ticked.name), limit=100_000)
        stored = {s.id: s for s in engine.backend.list_schedules()}
        now = engine.backend.now()
    fired: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        schedule_id = run.id.split("@", 1)[0]
        fired[schedule_id].append(_tick(run.id))
    assert killed >= STORM / 2, "the storm must actually have killed workers"
    for schedule_id, schedule in created.items():
        ticks = sorted(fired[schedule_id])
        assert len(ticks) == len(set(ticks)), f"{schedule_id}: a tick fired twice"
        last = stored[schedule_id].last_fire_at
        # A tick's run is created before the schedule moves on (a crash between the two
        # leaves the tick due, and the next worker's create finds the run): the last run
        # is the last tick recorded, or the tick still due.
        pending = stored[schedule_id].next_fire_at
        assert last is not None, schedule_id
        assert abs(ticks[-1] - last) < 1e-5 or abs(ticks[-1] - pending) < 1e-5, (
            schedule_id,
            ticks[-1],
            last,
            pending,
        )
        assert abs(ticks[0] - schedule.next_fire_at) < 1e-5, f"{schedule_id}: the first tick lost"
        gaps = [round(b - a, 3) for a, b in itertools.pairwise(ticks)]
        assert set(gaps) == {1.0}, f"{schedule_id}: ticks lost or early: {sorted(set(gaps))}"
        assert last <= now and len(ticks) >= STORM - 5, (schedule_id, len(ticks))
    late = []
    for run in runs:
        schedule = created[run.id.split("@", 1)[0]]
        if schedule.jitter and run.started_at is not None:
            spread = delay(schedule, _tick(run.id))
            assert run.started_at >= _tick(run.id) + spread - 1e-3, f"{run.id} started early"
            late.append(run.started_at - _tick(run.id) - spread)
    jittered = sum(1 for run in runs if created[run.id.split("@", 1)[0]].jitter)
    assert len(late) > jittered / 2, "the jittered runs were woken and started"
    median = sorted(late)[len(late) // 2]
    print(f"jittered runs {jittered}, started {len(late)}, lateness p50 {median:.3f} s")


def _store(engine: durable.Engine, schedule_id: str, jitter: float) -> Schedule:
    spec = schedules.Spec.make(every=1.0, catch_up="all", overlap="allow", jitter=jitter)
    return schedules.store(engine, ticked, spec, schedule_id=schedule_id)
