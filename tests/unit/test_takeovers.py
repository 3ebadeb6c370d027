"""A saturated worker still takes over a dead owner's runs, at its next free slot, and
wakes at the end of a run of a kind whose slots were all busy."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

import durable
from durable import RunStatus, task, workflow
from durable.core.hashing import call_hash
from durable.core.records import NewRun
from durable.runtime.owners import place
from durable.runtime.takeovers import Sweeper

DEAD_OWNER = f"{place()}:999999:1:gone"  # a pid that does not exist in this place


@task
def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@workflow
def napping(seconds: float) -> float:
    return nap(seconds)


@workflow
async def lane_flow() -> str:
    """Known to the worker, so it has a lane with free slots beside its threads."""
    return "async"


@pytest.fixture
def engine() -> Iterator[durable.Engine]:
    engine = durable.Engine("memory://")
    try:
        yield engine
    finally:
        engine.close()


def orphan(engine: durable.Engine, run_id: str) -> None:
    """A run of `napping` whose owner died while running it."""
    call = napping.bind(0.0)
    engine.backend.create_run(
        NewRun(
            id=run_id,
            workflow=napping.name,
            input=engine.dump({"args": [0.0], "kwargs": {}}, "input"),
            call_hash=call_hash(napping.kind, napping.name, call.arguments),
            owner=DEAD_OWNER,
            lease=60,
        )
    )


def sweeper(engine: durable.Engine, free: list[int], started: list[str]) -> Sweeper:
    return Sweeper(
        engine,
        ("default",),
        every=3600.0,
        free=lambda: (free[0], free[1]),
        active=set(),
        serves=lambda run: True,
        start=lambda run: started.append(run.id),
    )


def test_a_sweep_without_a_free_slot_sweeps_again_at_the_next_one(
    engine: durable.Engine,
) -> None:
    """A dead owner's run skipped for want of a thread slot is taken at the next free
    one, not at the next periodic sweep (an hour away here)."""
    orphan(engine, "orphan")
    free, started = [0, 100], []
    sweeps = sweeper(engine, free, started)
    assert sweeps.due(), "the first sweep is due at once"
    sweeps.sweep({napping.name}, {lane_flow.name})
    assert started == [] and engine.reread("orphan").epoch == 1, "no thread slot: not claimed"
    assert sweeps.starved == (True, False)
    assert not sweeps.due(), "still no thread slot: a free lane slot is no use to it"
    free[0] = 1
    assert sweeps.due(), "a thread slot is free: sweep before the queue takes it"
    sweeps.sweep({napping.name}, {lane_flow.name})
    assert started == ["orphan"] and engine.reread("orphan").epoch == 2
    assert sweeps.starved == (False, False) and not sweeps.due()


def test_a_live_owners_run_does_not_make_a_worker_sweep_at_every_slot(
    engine: durable.Engine,
) -> None:
    """A run on this host whose owner lives and whose lease holds is not starved for:
    sweeping at each free slot for it would be a wasted read per run."""
    durable_owner = engine.owner  # alive: this very process
    engine.backend.create_run(
        NewRun(
            id="alive",
            workflow=napping.name,
            input=engine.dump({"args": [0.0], "kwargs": {}}, "input"),
            call_hash=call_hash(napping.kind, napping.name, napping.bind(0.0).arguments),
            owner=durable_owner + "-other",
            lease=60,
        )
    )
    free, started = [0, 0], []
    sweeps = sweeper(engine, free, started)
    sweeps.sweep({napping.name}, set())
    assert sweeps.starved == (False, False)
    free[0] = 1
    assert not sweeps.due()


def test_a_saturated_worker_takes_over_before_the_queue_drains(engine: durable.Engine) -> None:
    """One thread slot, a queue of naps, a poll of a minute: a dead owner's run found
    by a sweep while the slot was busy runs at the slot's next release, and each end of
    a run wakes the claim loop (the lane's free slots do not hide the busy thread)."""
    queued = [engine.dispatch_call(napping.bind(0.05)).id for _ in range(30)]
    worker = durable.Worker(engine, concurrency=1, poll=60.0, sweep_every=0.2)
    with worker:
        until = time.monotonic() + 10
        while engine.reread(queued[0]).status is not RunStatus.COMPLETED:
            assert time.monotonic() < until, "the first queued run did not finish"
            time.sleep(0.01)
        orphan(engine, "orphan")
        done = threading.Event()
        threading.Thread(
            target=lambda: (engine.wait_for_run("orphan", timeout=10), done.set()), daemon=True
        ).start()
        assert done.wait(10), "the dead owner's run was never taken over"
        left = sum(engine.reread(run_id).status is RunStatus.QUEUED for run_id in queued)
        assert left >= 15, f"the takeover waited for the queue to drain ({left} left)"
        for run_id in queued:
            assert engine.wait_for_run(run_id, timeout=10).status is RunStatus.COMPLETED


def test_dead_owners_runs_are_taken_one_after_another_without_waiting_a_poll(
    engine: durable.Engine,
) -> None:
    """Runs taken from a dead owner are taken one at a time (each must prove itself
    first), and the claim loop waits for the held sweep's retry, not for its next poll
    (a minute here) or news: no notification says that a run proved itself."""
    for i in range(5):
        orphan(engine, f"orphan-{i}")
    worker = durable.Worker(engine, concurrency=4, poll=60.0, sweep_every=60.0)
    with worker:
        for i in range(5):
            ended = engine.wait_for_run(f"orphan-{i}", timeout=10)
            assert ended.status is RunStatus.COMPLETED
            assert ended.recoveries == 1, "taken over from its dead owner"
