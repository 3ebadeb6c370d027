"""Leases on a real database: a heartbeat keeps a long task owned; without one it lapses."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import durable
from durable import RunStatus, task, workflow

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

started = threading.Event()


@task
def long_task(seconds: float) -> str:
    started.set()
    time.sleep(seconds)
    return "done"


@workflow
def long_flow(seconds: float) -> str:
    return long_task(seconds)


def run_in_thread(engine: durable.Engine, run_id: str, seconds: float) -> dict[str, Any]:
    outcome: dict[str, Any] = {}

    def target() -> None:
        outcome["result"] = engine.execute_call(long_flow.bind(seconds), run_id=run_id)

    thread = threading.Thread(target=target)
    thread.start()
    outcome["thread"] = thread
    assert started.wait(10)
    return outcome


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_heartbeat_keeps_a_long_task_owned(url: str) -> None:
    """A task running three times longer than the lease is never taken over."""
    started.clear()
    owner = durable.Engine(url, lease=0.4)
    rival = durable.Engine(url, lease=0.4)
    try:
        outcome = run_in_thread(owner, "long", 1.2)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert rival.recover() == [], "a renewed lease must not be taken over"
            time.sleep(0.05)
        outcome["thread"].join(10)
        assert outcome["result"] == "done"
        run = owner.backend.get_run("long")
        assert run is not None and run.epoch == 1 and run.status is RunStatus.COMPLETED
    finally:
        owner.close()
        rival.close()


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_without_heartbeat_the_lease_lapses_and_the_run_moves(url: str) -> None:
    """Control: when the owner stops renewing, another engine takes the run and finishes it."""
    started.clear()
    owner = durable.Engine(url, lease=0.4)
    rival = durable.Engine(url, lease=5)
    try:
        owner.leases.stop()  # no heartbeat renews its lease: the owner looks frozen
        outcome = run_in_thread(owner, "lapsed", 1.5)
        time.sleep(0.6)
        assert rival.recover() == ["lapsed"]
        run = rival.backend.get_run("lapsed")
        assert run is not None and run.status is RunStatus.COMPLETED and run.epoch == 2
        outcome["thread"].join(10)
        assert outcome["result"] == "done", "the fenced-off owner returns the new owner's result"
    finally:
        owner.close()
        rival.close()
