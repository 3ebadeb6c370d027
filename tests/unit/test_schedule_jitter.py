"""Schedule jitter (issue 16): each tick's run starts up to ``jitter`` after the tick,
at a spread every worker computes alike, so that schedules due together start spread
over the window; the run exists (waiting) from the tick, and ``at`` is the tick."""

from __future__ import annotations

import dataclasses
import datetime as dt
from datetime import timedelta

import durable
from durable import RunStatus, workflow
from durable.core.records import RunQuery
from durable.core.schedules import delay
from durable.testing import DurableEnv

START = dt.datetime(2026, 6, 1, 2, 0, tzinfo=dt.UTC)
TICK = dt.datetime(2026, 6, 1, 3, 0, tzinfo=dt.UTC).timestamp()


@workflow
def nightly(region: str, at: dt.datetime) -> str:
    return f"{region} {at.isoformat()}"


def test_schedules_due_together_start_spread_over_the_jitter() -> None:
    with DurableEnv(start=START) as env:
        for i in range(20):
            durable.schedule(nightly, f"r{i}", id=f"n{i}", cron="0 3 * * *", jitter=600)
        env.advance(timedelta(hours=1))  # to 03:00: every tick is due, none has started
        runs = env.backend.list_runs(RunQuery(workflow=nightly.name), limit=100)
        assert len(runs) == 20
        assert all(run.status is RunStatus.WAITING and run.started_at is None for run in runs)
        env.advance(timedelta(minutes=10))
        starts = []
        for run in env.backend.list_runs(RunQuery(workflow=nightly.name), limit=100):
            schedule = env.backend.get_schedule(run.id.partition("@")[0])
            assert schedule is not None and run.status is RunStatus.COMPLETED
            assert run.started_at is not None
            spread = delay(schedule, TICK)
            assert 0 <= spread < 600
            assert TICK + spread <= run.started_at < TICK + spread + 1, "starts at its spread"
            region = schedule.id.replace("n", "r")
            expected = f"{region} 2026-06-01T03:00:00+00:00"
            assert durable.Handle(env.engine, run.id).result() == expected, "at= is the tick"
            starts.append(run.started_at)
        assert max(starts) - min(starts) > 300, "spread over the window, not bunched"


def test_the_spread_is_the_same_on_every_worker_and_differs_by_tick() -> None:
    with DurableEnv(start=START) as env:
        stored = durable.schedule(nightly, "eu", id="eu", every=3600, jitter=timedelta(minutes=5))
        assert stored.jitter == 300.0
        # another worker reads the schedule back from the database: the same spread
        again = env.backend.get_schedule("eu")
        assert again is not None and delay(again, TICK) == delay(stored, TICK)
        moved = dataclasses.replace(stored, next_fire_at=TICK + 7200, priority=5)
        assert delay(moved, TICK) == delay(stored, TICK), "only the id and the tick count"
        assert len({delay(stored, TICK + 3600 * n) for n in range(10)}) == 10
        assert delay(dataclasses.replace(stored, jitter=0.0), TICK) == 0.0


def test_without_jitter_a_tick_run_is_queued_at_once() -> None:
    with DurableEnv(start=START) as env:
        durable.schedule(nightly, "eu", id="eu", cron="0 3 * * *")
        env.advance(timedelta(hours=1))
        (run,) = env.backend.list_runs(RunQuery(workflow=nightly.name), limit=10)
        assert run.status is RunStatus.COMPLETED and run.started_at == TICK
