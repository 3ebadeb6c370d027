"""Run deadlines (issue 14): ``@workflow(timeout=)``, ``dispatch``/``execute(timeout=)``,
the ``timed_out`` status, `WorkflowTimeout`, on memory with a virtual clock.

The deadline arrives inside the run as `Cancelled` with ``timed_out`` set, at the next
durable call (a wait in progress ends then); ``finally`` blocks run; children are
cancelled; the run ends ``timed_out`` whatever its code does after.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import durable
from durable import (
    Cancelled,
    RunStatus,
    StepKind,
    StepStatus,
    WorkflowTimeout,
    task,
    wait,
    workflow,
)
from durable.core.records import Run, RunQuery
from durable.errors import ConfigurationError
from durable.testing import DurableEnv


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    with DurableEnv() as world:
        yield world


log: list[Any] = []


def stored(env: DurableEnv, **query: Any) -> list[Run]:
    """The stored runs matching *query* (a `RunQuery`'s fields)."""
    return list(env.backend.list_runs(RunQuery(**query), limit=100))


@pytest.fixture(autouse=True)
def _fresh_log() -> None:
    log.clear()


@task
def note(tag: str) -> str:
    log.append(tag)
    return tag


@workflow(timeout=timedelta(minutes=10))
def sleeper() -> str:
    try:
        wait(timedelta(hours=1))
        return "woke"
    except Cancelled as stopped:
        log.append(("stopped", stopped.timed_out))
        raise
    finally:
        note("cleanup")


def test_a_run_asleep_past_its_deadline_ends_at_the_deadline(env: DurableEnv) -> None:
    handle = env.dispatch(sleeper)
    env.advance(timedelta(minutes=9, seconds=59))
    assert handle.status() is RunStatus.WAITING and log == []
    env.advance(timedelta(seconds=1))
    assert handle.status() is RunStatus.TIMED_OUT
    assert log == [("stopped", True), "cleanup"]
    run = env.run(handle.id)
    assert run.finished_at == pytest.approx(run.created_at + 600)
    with pytest.raises(WorkflowTimeout, match="reached its deadline, 600 s") as raised:
        handle.result()
    assert raised.value.run_id == handle.id and raised.value.timeout == 600
    marker, cleanup = env.history(handle.id)
    assert (marker.kind, marker.name) == (StepKind.CANCEL, "durable.timeout")
    assert (cleanup.name, cleanup.status) == (note.name, StepStatus.COMPLETED)


def test_a_run_that_ends_in_time_is_not_touched(env: DurableEnv) -> None:
    @workflow(timeout=60)
    def quick() -> str:
        wait(timedelta(seconds=30))
        return note("done")

    handle = env.dispatch(quick)
    env.run_until_idle()
    assert handle.result() == "done" and log == ["done"]
    assert env.run(handle.id).deadline_at == pytest.approx(env.run(handle.id).created_at + 60)


def test_a_per_run_timeout_overrides_the_workflows(env: DurableEnv) -> None:
    handle = env.dispatch(sleeper, timeout=timedelta(seconds=30))
    env.advance(31)
    assert handle.status() is RunStatus.TIMED_OUT
    with pytest.raises(WorkflowTimeout) as raised:
        handle.result()
    assert raised.value.timeout == 30

    longer = env.dispatch(sleeper, timeout=timedelta(hours=2))
    env.advance(timedelta(hours=1, minutes=1))
    assert longer.result() == "woke"


def test_execute_takes_a_timeout_and_raises_workflow_timeout(env: DurableEnv) -> None:
    @workflow
    def unbounded() -> str:
        wait(timedelta(days=1))
        return "late"

    with pytest.raises(WorkflowTimeout):
        env.execute(unbounded, timeout=5)
    (run,) = stored(env, workflow=unbounded.name)
    assert run.status is RunStatus.TIMED_OUT


def test_a_run_waiting_for_an_event_is_stopped_at_its_deadline(env: DurableEnv) -> None:
    @workflow(timeout=120)
    def approval() -> Any:
        try:
            return wait("approved")
        finally:
            note("cleanup")

    handle = env.dispatch(approval)
    env.advance(119)
    assert handle.status() is RunStatus.WAITING
    env.advance(1)
    assert handle.status() is RunStatus.TIMED_OUT and log == ["cleanup"]


def test_a_deadline_reached_while_a_child_runs_cancels_the_child(env: DurableEnv) -> None:
    @workflow
    def child() -> str:
        try:
            wait(timedelta(hours=1))
            return "child done"
        finally:
            note("child cleanup")

    @workflow(timeout=60)
    def parent() -> str:
        try:
            return child()
        finally:
            note("parent cleanup")

    handle = env.dispatch(parent)
    env.advance(61)
    assert handle.status() is RunStatus.TIMED_OUT
    (kid,) = stored(env, parent_id=handle.id)
    assert kid.status is RunStatus.CANCELLED
    assert sorted(log) == ["child cleanup", "parent cleanup"]


def test_a_sync_task_that_runs_past_the_deadline_keeps_its_result_and_stops_the_run(
    env: DurableEnv,
) -> None:
    @task
    def long_job() -> str:
        env.clock.advance(100)  # the body takes 100 s; nothing can interrupt it
        return "job"

    @workflow(timeout=60)
    def flow() -> str:
        long_job()
        return note("after")  # never reached: the deadline is delivered first

    handle = env.dispatch(flow)
    assert handle.status() is RunStatus.TIMED_OUT and log == []
    job, marker = env.history(handle.id)
    assert (job.status, marker.name) == (StepStatus.COMPLETED, "durable.timeout.on-return")


def test_an_async_task_body_is_cancelled_at_the_deadline(env: DurableEnv) -> None:
    seen: list[str] = []

    @task
    async def forever() -> None:
        try:
            await asyncio.sleep(3600)  # real seconds: the deadline is a few ms away
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    @workflow
    async def flow() -> None:
        try:
            await forever()
        finally:
            note("cleanup")

    with pytest.raises(WorkflowTimeout):
        env.execute(flow, timeout=0.01)  # virtual time stands still: 10 ms real
    assert seen == ["cancelled"] and log == ["cleanup"]


def test_heartbeat_raises_at_the_deadline(env: DurableEnv) -> None:
    beats: list[int] = []

    @task
    def chunks() -> None:
        for i in range(100):
            durable.heartbeat({"done": i, "of": 100})
            beats.append(i)
            env.clock.advance(10)

    @workflow(timeout=35)
    def flow() -> None:
        chunks()

    handle = env.dispatch(flow)
    assert handle.status() is RunStatus.TIMED_OUT
    assert beats == [0, 1, 2, 3]  # the heartbeat at 40 s raised
    (step,) = env.history(handle.id)
    assert step.status is StepStatus.FAILED


def test_a_workflow_that_swallows_the_deadline_still_ends_timed_out(env: DurableEnv) -> None:
    @workflow(timeout=10)
    def stubborn() -> str:
        try:
            wait(timedelta(minutes=5))
        except Cancelled:
            log.append("swallowed")
        return note("returned anyway")

    handle = env.dispatch(stubborn)
    env.advance(11)
    assert handle.status() is RunStatus.TIMED_OUT and log == ["swallowed", "returned anyway"]


def test_a_retry_delay_does_not_outlast_the_deadline(env: DurableEnv) -> None:
    @task(retry=dict(attempts=5, backoff="constant", initial=3600, max_delay=3600))
    def flaky() -> None:
        log.append("attempt")
        raise RuntimeError("down")

    @workflow(timeout=120)
    def flow() -> None:
        flaky()

    handle = env.dispatch(flow)
    env.advance(121)
    assert handle.status() is RunStatus.TIMED_OUT and log == ["attempt"]


def test_a_run_queued_past_its_deadline_never_starts(env: DurableEnv) -> None:
    @workflow(timeout=10)
    def never() -> str:
        log.append("started")
        return "ran"

    run = env.engine.dispatch_call(never.bind())  # stored, not drained
    env.clock.advance(11)
    env.drain()
    assert env.run(run.id).status is RunStatus.TIMED_OUT and log == []


def test_cancel_before_the_deadline_is_a_cancellation(env: DurableEnv) -> None:
    handle = env.dispatch(sleeper)
    env.advance(60)
    handle.cancel()
    env.drain()
    assert handle.status() is RunStatus.CANCELLED
    assert log == [("stopped", False), "cleanup"]


def test_a_parent_can_catch_a_childs_timeout(env: DurableEnv) -> None:
    @workflow(timeout=30)
    def slow_child() -> str:
        wait(timedelta(minutes=5))
        return "late"

    @workflow
    def parent() -> str:
        try:
            return slow_child()
        except WorkflowTimeout as error:
            return f"gave up after {error.timeout:g} s"

    handle = env.dispatch(parent)
    env.advance(31)
    assert handle.result() == "gave up after 30 s"


def test_a_replayed_run_stops_at_the_recorded_point(env: DurableEnv) -> None:
    """After delivery, replays raise at the marker whatever the clock says: a run whose
    cleanup waits is replayed past the deadline and still ends timed_out once."""

    @workflow(timeout=60)
    def slow_cleanup() -> str:
        try:
            wait(timedelta(hours=1))
            return "woke"
        finally:
            wait(timedelta(minutes=5))  # cleanup that suspends: the run is replayed
            note("cleanup")

    handle = env.dispatch(slow_cleanup)
    env.advance(61)
    assert handle.status() is RunStatus.WAITING  # in its cleanup's wait
    env.advance(timedelta(minutes=5))
    assert handle.status() is RunStatus.TIMED_OUT and log == ["cleanup"]


@pytest.mark.parametrize(
    ("timeout", "error", "message"),
    [
        (0, ValueError, "must be a positive duration"),
        (timedelta(seconds=-5), ValueError, "must be a positive duration"),
        ("1h", TypeError, "timedelta or a number of seconds"),
        (float("inf"), ValueError, "finite"),
        (timedelta(days=400 * 365), ValueError, "100 years"),
    ],
)
def test_a_bad_timeout_is_refused_and_nothing_is_stored(
    env: DurableEnv, timeout: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        env.dispatch(sleeper, timeout=timeout)
    assert stored(env) == []


def test_a_bad_workflow_timeout_is_refused_at_decoration() -> None:
    with pytest.raises(ConfigurationError, match=r"@workflow\(timeout=...\) must be a positive"):
        workflow(timeout=-1)(lambda: None)


def test_a_parameter_named_timeout_needs_a_bound_call(env: DurableEnv) -> None:
    @workflow
    def poll(timeout: float) -> float:
        return timeout

    with pytest.raises(TypeError, match="has a parameter named 'timeout'"):
        env.dispatch(poll, timeout=5)
    assert env.dispatch(poll.bind(timeout=5)).result() == 5
    handle = env.dispatch(poll.bind(timeout=5), timeout=60)
    run = env.run(handle.id)
    assert handle.result() == 5 and run.deadline_at == pytest.approx(run.created_at + 60)


def test_run_options_are_refused_inside_a_workflow(env: DurableEnv) -> None:
    @workflow
    def inner() -> None:
        return None

    @workflow
    def outer() -> str:
        try:
            durable.execute(inner, timeout=5)
        except TypeError as error:
            return str(error)
        return "accepted"

    assert "takes no run options (timeout=)" in env.execute(outer)
