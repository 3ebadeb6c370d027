"""Tasks as activities: timeouts, deadlines, heartbeats with details, last_heartbeat,
and cancellation seen by heartbeat (issue 14), on memory with a fake clock."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import durable
from durable import (
    Cancelled,
    DurableError,
    SerializationError,
    StepStatus,
    TaskTimeout,
    execute,
    task,
    workflow,
)
from durable.errors import ConfigurationError
from durable.runtime import activity
from tests.unit.helpers import Crash, FakeClock, history


@pytest.fixture
def clock() -> Iterator[FakeClock]:
    """A default engine on memory whose clock moves only when a test sleeps on it."""
    fake = FakeClock()
    engine = durable.configure("memory://", clock=fake)
    try:
        yield fake
    finally:
        engine.close()


@pytest.fixture
def writes(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, Any]]:
    """Every heartbeat write that reaches the backend: (attempt, details)."""
    backend = durable.get_engine().backend
    real = backend.heartbeat
    seen: list[tuple[int, Any]] = []

    def spy(
        run_id: str,
        position: int,
        epoch: int,
        attempt: int,
        details: bytes | None,
        *,
        gap: float | None = None,
    ) -> bool:
        seen.append((attempt, activity.decode_details(details)))
        return real(run_id, position, epoch, attempt, details, gap=gap)

    monkeypatch.setattr(backend, "heartbeat", spy)
    return seen


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


def test_heartbeats_are_throttled_and_carry_the_latest_details(
    clock: FakeClock, writes: list[tuple[int, Any]]
) -> None:
    """A tight loop writes at its first call, then once per third of `heartbeat`."""

    @task(heartbeat=timedelta(seconds=30))
    def tight() -> int:
        for i in range(10_000):
            durable.heartbeat({"done": i})
        clock.sleep(10)  # one interval later
        durable.heartbeat({"done": "late"})
        return 1

    @workflow
    def flow() -> int:
        return tight()

    assert execute(flow, id="t6") == 1
    assert writes == [(1, {"done": 0}), (1, {"done": "late"})]


def test_last_heartbeat_gives_the_next_attempt_its_checkpoint(clock: FakeClock) -> None:
    """Attempt 1 gets to 40 and fails; attempt 2 resumes from 40 (in this process, so
    even details not written yet count)."""
    seen: list[Any] = []

    @task(retry=dict(attempts=2, backoff="constant", initial=0))
    def resumable() -> int:
        start = durable.last_heartbeat() or {"done": 0}
        seen.append(start)
        for i in range(start["done"], 100):
            durable.heartbeat({"done": i})
            if i == 40 and len(seen) == 1:
                raise ConnectionError("lost the connection at 40")
        return len(seen)

    @workflow
    def flow() -> int:
        return resumable()

    assert execute(flow, id="t7") == 2
    assert seen == [{"done": 0}, {"done": 40}]


def test_last_heartbeat_survives_a_crash(clock: FakeClock) -> None:
    """The details written before the process died come back to the next attempt."""
    seen: list[Any] = []

    @task
    def long_job() -> Any:
        seen.append(durable.last_heartbeat())
        if len(seen) == 1:
            durable.heartbeat({"cursor": "abc"})  # the first heartbeat writes at once
            raise Crash
        return seen[-1]

    @workflow
    def flow() -> Any:
        return long_job()

    with pytest.raises(Crash):
        execute(flow, id="t8")
    (step,) = history("t8")
    assert step.status is StepStatus.RUNNING and step.heartbeat_at is not None
    assert execute(flow, id="t8") == {"cursor": "abc"}
    assert seen == [None, {"cursor": "abc"}]
    (step,) = history("t8")
    assert step.details == b'j{"cursor":"abc"}', "kept with the result, for operators"


def test_cancelling_a_run_stops_its_task_at_the_next_heartbeat_write(clock: FakeClock) -> None:
    """Cancel while the body loops: within one interval heartbeat raises Cancelled, the
    body's finally runs, the position records the cancellation, cleanup tasks run."""
    done: list[str] = []

    @task(heartbeat=timedelta(seconds=9))  # writes every 3 s: at 0, 3, 6...
    def hour_long() -> None:
        try:
            for i in range(3600):
                if i == 5:
                    durable.cancel(durable.info().run_id)  # type: ignore[union-attr]
                durable.heartbeat({"done": i, "of": 3600})
                clock.sleep(1)
        finally:
            done.append(f"body stopped at {i}")

    @task
    def clean_up() -> None:
        done.append("cleaned up")

    @workflow
    def flow() -> None:
        try:
            hour_long()
        finally:
            clean_up()

    with pytest.raises(Cancelled):
        execute(flow, id="t9")
    assert done == ["body stopped at 6", "cleaned up"], "at the first write after the cancel"
    run = durable.get_engine().backend.get_run("t9")
    assert run is not None and run.status is durable.RunStatus.CANCELLED
    first, cleanup = history("t9")
    assert first.status is StepStatus.FAILED and b"Cancelled" in (first.error or b"")
    assert cleanup.status is StepStatus.COMPLETED


def test_where_heartbeat_may_be_called(clock: FakeClock) -> None:
    """Workflow code: a clear error. A task body called as a plain function: no-op."""

    @workflow
    def flow() -> str:
        try:
            durable.heartbeat()
        except DurableError as error:
            return str(error)
        return "no error"

    assert "heartbeat() is for task bodies" in execute(flow, id="t10")

    @task
    def plain() -> Any:
        durable.heartbeat({"done": 1})
        return durable.last_heartbeat()

    assert plain() is None, "outside any run: a plain call, heartbeat does nothing"


def test_details_that_cannot_be_stored_are_refused_at_the_writing_call(clock: FakeClock) -> None:
    @task
    def bad(details: Any) -> str:
        try:
            durable.heartbeat(details)
        except SerializationError as error:
            return str(error)
        return "stored"

    @workflow
    def flow(details: Any) -> str:
        return bad(details)

    assert "must be JSON" in execute(flow, {"at": object.__name__, "x": float("inf")}, id="t11")
    assert "more than the 16384 allowed" in execute(flow, {"blob": "x" * 20_000}, id="t12")
    assert execute(flow, {"done": 1}, id="t13") == "stored"
    assert history("t11")[0].details is None, "nothing written"


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
