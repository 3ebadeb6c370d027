"""Tasks as activities (issue 14): timeouts of an attempt, deadlines of all attempts
and heartbeat gaps, and the limits refused at decoration, on memory with a fake clock."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest

import durable
from durable import StepStatus, TaskTimeout, execute, task, workflow
from durable.errors import ConfigurationError
from tests.unit._task_limits_helpers import clock_fixture  # noqa: F401 (the clock fixture)
from tests.unit.helpers import FakeClock, history


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout": 0}, "timeout=...\\) must be a positive duration"),
        ({"timeout": timedelta(seconds=-1)}, "must be a positive duration"),
        ({"heartbeat": "10s"}, "must be a timedelta or a number of seconds"),
        ({"deadline": float("nan")}, "finite number"),
        ({"timeout": 10, "heartbeat": 30}, "heartbeat=30s\\) is longer than its timeout"),
    ],
)
def test_bad_limits_are_refused_at_decoration(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        task(**options)(lambda: None)


def test_a_sync_body_that_overruns_is_timed_out_and_retried(clock: FakeClock) -> None:
    """Attempt 1 returns after its timeout: its result is dropped, the attempt counts as
    timed out, attempt 2 (on time) gives the result."""
    calls: list[int] = []

    @task(timeout=timedelta(seconds=10), retry=dict(attempts=2, backoff="constant", initial=0))
    def slow() -> str:
        calls.append(1)
        if len(calls) == 1:
            clock.sleep(11)  # the body ran too long
        return f"attempt {len(calls)}"

    @workflow
    def flow() -> str:
        return slow()

    assert execute(flow, id="t1") == "attempt 2"
    (step,) = history("t1")
    assert step.status is StepStatus.COMPLETED and step.attempts == 2


def test_when_attempts_run_out_the_workflow_sees_task_timeout(clock: FakeClock) -> None:
    """The last attempt's TaskTimeout reaches the workflow, catchable, with its fields;
    replay raises the same type without running the body."""
    calls: list[int] = []

    @task(timeout=5)
    def slow() -> str:
        calls.append(1)
        clock.sleep(6)
        return "late"

    @workflow
    def flow() -> str:
        try:
            return slow()
        except TaskTimeout as error:
            return f"{type(error).__name__} {error.limit} {error.seconds:g} {error.attempt}"

    assert execute(flow, id="t2") == "TaskTimeout timeout 5 1"
    (step,) = history("t2")
    assert step.status is StepStatus.FAILED
    assert execute(flow, id="t2") == "TaskTimeout timeout 5 1", "replayed"
    assert len(calls) == 1


def test_heartbeat_raises_once_the_attempt_is_past_its_timeout(clock: FakeClock) -> None:
    """A sync body cannot be stopped from outside; its next heartbeat stops it."""
    beats: list[int] = []

    @task(timeout=timedelta(seconds=30))
    def loop() -> str:
        for i in range(100):
            durable.heartbeat({"done": i, "of": 100})
            beats.append(i)
            clock.sleep(1)
        return "finished"

    @workflow
    def flow() -> str:
        try:
            return loop()
        except TaskTimeout as error:
            return error.limit

    assert execute(flow, id="t3") == "timeout"
    assert beats == list(range(30)), "stopped at the first heartbeat past 30 s"


def test_the_deadline_bounds_all_attempts(clock: FakeClock) -> None:
    """Retries stop once the deadline of all attempts has passed, whatever the policy."""
    calls: list[int] = []

    @task(deadline=10, retry=dict(attempts=10, backoff="constant", initial=1))
    def flaky() -> None:
        calls.append(1)
        clock.sleep(3)
        raise ConnectionError(f"attempt {len(calls)}")

    @workflow
    def flow() -> str:
        try:
            flaky()
        except (ConnectionError, TaskTimeout) as error:
            return f"{type(error).__name__}: {error}"
        return "ok"

    result = execute(flow, id="t4")
    # attempts start at 0, 4, 8 (3 s each, 1 s apart); the third ends at 11 > 10.
    assert len(calls) == 3, result
    assert result.startswith("TaskTimeout") and "deadline" in result


def test_a_heartbeat_later_than_declared_times_the_attempt_out(clock: FakeClock) -> None:
    @task(heartbeat=timedelta(seconds=5))
    def gappy() -> None:
        durable.heartbeat()
        clock.sleep(6)
        durable.heartbeat()

    @workflow
    def flow() -> str:
        try:
            gappy()
        except TaskTimeout as error:
            return f"{error.limit} {error}"
        return "ok"

    result = execute(flow, id="t5")
    assert result.startswith("heartbeat ") and "did not heartbeat for more than 5s" in result


def test_an_async_body_is_cancelled_at_its_timeout() -> None:
    """Real time: an async body sleeping 30 s with a 0.2 s timeout ends at once."""
    engine = durable.configure("memory://")
    try:
        cancelled: list[bool] = []

        @task(timeout=0.2)
        async def sleepy() -> str:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append(True)
                raise
            return "woke"

        @workflow
        async def flow() -> str:
            try:
                return await sleepy()
            except TaskTimeout as error:
                return error.limit

        start = time.monotonic()
        assert execute(flow, id="t14") == "timeout"
        assert time.monotonic() - start < 10 and cancelled == [True]
    finally:
        engine.close()
