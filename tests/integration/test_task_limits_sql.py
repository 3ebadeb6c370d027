"""Timeouts, heartbeats and cancellation by heartbeat on SQLite and PostgreSQL (the
memory backend's versions are in tests/unit/test_task_limits_timeouts.py,
test_task_limits_heartbeats.py and test_task_limits_hung.py): the same behaviour
through the real statements, with a fake engine clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import durable
from durable import Cancelled, StepStatus, TaskTimeout, execute, task, workflow
from tests.unit.helpers import Crash, FakeClock, history

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
pytestmark = pytest.mark.parametrize("url", SQL, indirect=True)


@pytest.fixture
def clock(url: str) -> Iterator[FakeClock]:
    """The default engine on the test's database, with a clock that moves when slept on."""
    fake = FakeClock()
    engine = durable.configure(url, clock=fake)
    try:
        yield fake
    finally:
        engine.close()


def test_an_overrun_attempt_is_retried_and_its_result_dropped(clock: FakeClock) -> None:
    calls: list[int] = []

    @task(timeout=10, retry=dict(attempts=2, backoff="constant", initial=0))
    def slow() -> str:
        calls.append(1)
        if len(calls) == 1:
            clock.sleep(11)
        return f"attempt {len(calls)}"

    @workflow
    def flow() -> str:
        return slow()

    assert execute(flow, id="sql-t1") == "attempt 2"
    (step,) = history("sql-t1")
    assert step.status is StepStatus.COMPLETED and step.attempts == 2


def test_task_timeout_is_recorded_and_replayed(clock: FakeClock) -> None:
    calls: list[int] = []

    @task(timeout=5)
    def slow() -> None:
        calls.append(1)
        clock.sleep(6)

    @workflow
    def flow() -> str:
        try:
            slow()
        except TaskTimeout as error:
            return f"{error.limit} {error.attempt}"
        return "no timeout"

    assert execute(flow, id="sql-t2") == "timeout 1"
    assert execute(flow, id="sql-t2") == "timeout 1"
    assert len(calls) == 1, "replayed, not run again"


def test_written_details_come_back_after_a_crash(clock: FakeClock) -> None:
    seen: list[Any] = []

    @task(heartbeat=timedelta(seconds=30))
    def long_job() -> Any:
        seen.append(durable.last_heartbeat())
        if len(seen) == 1:
            durable.heartbeat({"cursor": 41})
            raise Crash
        return seen[-1]

    @workflow
    def flow() -> Any:
        return long_job()

    with pytest.raises(Crash):
        execute(flow, id="sql-t3")
    (step,) = history("sql-t3")
    assert step.status is StepStatus.RUNNING and step.heartbeat_at is not None
    assert step.details == b'j{"cursor":41}'
    assert execute(flow, id="sql-t3") == {"cursor": 41}


def test_a_cancel_reaches_the_body_at_its_next_heartbeat_write(clock: FakeClock) -> None:
    stopped: list[int] = []

    @task(heartbeat=timedelta(seconds=9))
    def hour_long() -> None:
        for i in range(3600):
            if i == 5:
                durable.cancel(durable.info().run_id)  # type: ignore[union-attr]
            try:
                durable.heartbeat({"done": i, "of": 3600})
            except Cancelled:
                stopped.append(i)
                raise
            clock.sleep(1)

    @workflow
    def flow() -> None:
        hour_long()

    with pytest.raises(Cancelled):
        execute(flow, id="sql-t4")
    assert stopped == [6], "the first write after the cancel (writes at 0, 3, 6 s)"
    (step,) = history("sql-t4")
    assert step.status is StepStatus.FAILED and b"Cancelled" in (step.error or b"")
    assert step.details == b'j{"done":3,"of":3600}', "the last details written before"
