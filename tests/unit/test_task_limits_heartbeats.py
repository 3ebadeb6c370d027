"""Tasks as activities (issue 14): heartbeats with details, last_heartbeat, and
cancellation seen by heartbeat, on memory with a fake clock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import durable
from durable import Cancelled, DurableError, SerializationError, StepStatus, execute, task, workflow
from durable.runtime import activity
from tests.unit._task_limits_helpers import clock_fixture  # noqa: F401 (the clock fixture)
from tests.unit.helpers import Crash, FakeClock, history


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
