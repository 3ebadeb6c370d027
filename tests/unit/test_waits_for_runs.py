"""Durable joins: a workflow waiting for another run (dispatched, inline or in
parallel) suspends without holding a thread, and can time out."""

from __future__ import annotations

import datetime as dt

import durable
from durable import RunStatus, StepStatus, dispatch, wait, workflow
from durable.errors import WaitTimeout
from durable.testing import DurableEnv
from tests.unit._waits_helpers import (
    HOUR,
    env_fixture,  # noqa: F401 (the env fixture)
)

# -- waiting for runs ------------------------------------------------------------------


@workflow
def child_nap(hours: float) -> str:
    wait(dt.timedelta(hours=hours))
    return f"slept {hours}"


def test_waiting_for_a_dispatched_child_suspends_the_parent(env: DurableEnv) -> None:
    """wait(handle) in a workflow holds no thread: the parent waits on run:<child>."""

    @workflow
    def parent() -> str:
        return wait(dispatch(child_nap, 5))

    handle = env.dispatch(parent)
    run = env.run(handle.id)
    assert run.status is RunStatus.WAITING and run.waiting_on == f"run:{handle.id}/0"
    env.advance(5 * HOUR)
    assert env.run(handle.id).status is RunStatus.COMPLETED
    assert handle.result() == "slept 5"


def test_waiting_for_a_run_can_time_out(env: DurableEnv) -> None:
    """wait(handle, timeout=...) in a workflow records WaitTimeout at its deadline."""

    @workflow
    def parent() -> str:
        child = dispatch(child_nap, 5)
        try:
            return wait(child, timeout=HOUR)
        except WaitTimeout:
            return "gave up"

    handle = env.dispatch(parent)
    env.advance(HOUR)
    assert handle.result() == "gave up"
    assert env.history(handle.id)[1].status is StepStatus.FAILED
    assert env.run(f"{handle.id}/0").status is RunStatus.WAITING, "the child goes on"


def test_an_inline_child_that_waits_suspends_its_parent(env: DurableEnv) -> None:
    """A child workflow called inline that sleeps does not hold its parent's thread."""

    @workflow
    def parent() -> str:
        return child_nap(3) + "!"

    handle = env.dispatch(parent)
    assert env.run(handle.id).status is RunStatus.WAITING
    assert env.run(handle.id).waiting_on == f"run:{handle.id}/0"
    assert env.run(f"{handle.id}/0").status is RunStatus.WAITING
    env.advance(3 * HOUR)
    assert handle.result() == "slept 3!"


def test_parallel_children_that_wait_are_all_waited_for(env: DurableEnv) -> None:
    """Waiting branches suspend the run once; it resumes until every branch is done."""

    @workflow
    def fan() -> tuple[str, str]:
        return durable.execute(child_nap.bind(1), child_nap.bind(4))

    handle = env.dispatch(fan)
    env.advance(HOUR)
    assert env.run(handle.id).status is RunStatus.WAITING, "one child is still asleep"
    env.advance(3 * HOUR)
    assert handle.result() == ("slept 1", "slept 4")
