"""Tasks as activities (issue 14): an attempt whose heartbeat deadline passed is hung,
taken over and counted as timed out, on memory with a fake clock."""

from __future__ import annotations

import pytest

import durable
from durable import StepStatus, TaskTimeout, execute, task, workflow
from tests.unit._task_limits_helpers import clock_fixture  # noqa: F401 (the clock fixture)
from tests.unit.helpers import Crash, FakeClock, history


def _hang(run_id: str) -> None:
    """Make the run's current owner a live process elsewhere that holds a long lease:
    its task body is hung (it does not heartbeat), but nothing about it looks dead."""
    backend = durable.get_engine().backend
    run = backend.get_run(run_id)
    assert run is not None
    hung_owner = "far-host@boot.ns:4242:1:abc"  # another place: never judged dead here
    assert backend.claim_run(run_id, owner=hung_owner, lease=3600, epoch=run.epoch)


def test_a_hung_attempt_is_taken_over_and_counted_as_timed_out(clock: FakeClock) -> None:
    """An attempt whose heartbeat deadline passed makes its run claimable although the
    owner's lease is fine; the new owner records it as a TaskTimeout (limit heartbeat)
    and retries it by the task's policy."""
    calls: list[int] = []

    @task(heartbeat=10, retry=dict(attempts=2, backoff="constant", initial=60, max_delay=60))
    def transcode() -> str:
        calls.append(1)
        durable.heartbeat({"done": 1})
        if len(calls) == 1:
            raise Crash  # stands for the hang: the body never returns nor heartbeats
        return "encoded"

    @workflow
    def flow() -> str:
        return transcode()

    with pytest.raises(Crash):
        execute(flow, id="h1")
    _hang("h1")
    (step,) = history("h1")
    assert step.status is StepStatus.RUNNING and step.wake_at == pytest.approx(clock.now() + 10)
    assert durable.recover() == [], "not hung yet: the heartbeat deadline lies ahead"
    clock.sleep(10.5)
    assert durable.recover() == ["h1"]
    (step,) = history("h1")
    assert (step.status, step.attempts) == (StepStatus.RETRYING, 1)
    error = durable.get_engine().load_error(step.error or b"", "h1", 0)
    assert isinstance(error, TaskTimeout) and error.limit == "heartbeat" and error.seconds == 10
    assert step.details == b'j{"done":1}', "the hung attempt's checkpoint is kept"
    clock.sleep(61)
    durable.recover()
    assert durable.get("h1").result() == "encoded" and len(calls) == 2
    (step,) = history("h1")
    assert (step.status, step.attempts) == (StepStatus.COMPLETED, 2)


def test_a_hung_last_attempt_fails_the_call_with_task_timeout(clock: FakeClock) -> None:
    @task(heartbeat=5)
    def stuck() -> None:
        raise Crash

    @workflow
    def flow() -> str:
        try:
            stuck()
        except TaskTimeout as error:
            return f"gave up: {error.limit}"
        return "done"

    with pytest.raises(Crash):
        execute(flow, id="h2")
    _hang("h2")
    clock.sleep(6)
    assert durable.recover() == ["h2"]
    assert durable.get("h2").result() == "gave up: heartbeat"


def test_a_task_without_heartbeat_is_never_judged_hung(clock: FakeClock) -> None:
    @task(timeout=5)
    def quiet() -> None:
        raise Crash

    @workflow
    def flow() -> None:
        quiet()

    with pytest.raises(Crash):
        execute(flow, id="h3")
    _hang("h3")
    (step,) = history("h3")
    assert step.wake_at is None
    clock.sleep(3000)
    assert durable.recover() == []  # only its lease expiring could hand it over


def test_a_heartbeating_tasks_result_is_written_at_once(clock: FakeClock) -> None:
    """Not deferred to the next task's start: a row still RUNNING with a heartbeat
    deadline while the workflow code goes on could be taken for a hung body."""

    @task(heartbeat=5)
    def beat() -> int:
        return 1

    seen: list[list[StepStatus]] = []

    @workflow
    def flow() -> int:
        value = beat()
        seen.append([step.status for step in history("h4")])
        return value

    assert execute(flow, id="h4") == 1
    assert seen == [[StepStatus.COMPLETED]]
