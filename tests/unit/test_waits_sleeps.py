"""Durable time: sleeps and deadlines recorded and kept without a thread, wait's
arguments, and retry delays that become durable waits."""

from __future__ import annotations

import datetime as dt
import itertools
import time

import pytest

import durable
from durable import RunStatus, StepKind, StepStatus, send, task, wait, workflow
from durable.errors import DurableError
from durable.testing import DurableEnv
from tests.unit._waits_helpers import (
    DAY,
    _clean,  # noqa: F401 (autouse fixture)
    env_fixture,  # noqa: F401 (the env fixture)
    nap,
    note,
    seen,
)


def test_a_durable_sleep_records_its_deadline_and_suspends(env: DurableEnv) -> None:
    """The run waits (no thread), its deadline recorded; it resumes exactly then."""
    start = env.clock.now()
    handle = env.dispatch(nap, 2)
    run = env.run(handle.id)
    assert run.status is RunStatus.WAITING
    assert run.wake_at == start + 7200 and run.lease_owner is None
    sleep = env.history(handle.id)[1]
    assert (sleep.kind, sleep.status, sleep.wake_at) == (
        StepKind.SLEEP,
        StepStatus.WAITING,
        start + 7200,
    )
    env.advance(dt.timedelta(hours=1, minutes=59))
    assert env.run(handle.id).status is RunStatus.WAITING, "never early"
    env.advance(dt.timedelta(minutes=1))
    assert env.run(handle.id).status is RunStatus.COMPLETED
    assert handle.result() == 7200.0
    done = env.history(handle.id)[1]
    assert done.status is StepStatus.COMPLETED and done.finished_at == start + 7200


def test_thirty_days_complete_without_real_waiting(
    env: DurableEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workflow sleeping 30 times a day finishes at once: no real sleep happens."""

    def no_sleeping(seconds: float) -> None:
        raise AssertionError(f"something slept {seconds} s for real")

    monkeypatch.setattr(time, "sleep", no_sleeping)

    @workflow
    def month() -> int:
        for day in range(30):
            note(day)
            wait(DAY)
        return len(seen)

    start = env.now()
    assert env.execute(month) == 30
    assert env.now() - start == 30 * DAY
    assert seen == list(range(30))


def test_until_a_moment(env: DurableEnv) -> None:
    """wait(until=...) sleeps to exactly that moment, and the body after it runs once."""

    @workflow
    def meeting() -> str:
        start = durable.now()
        wait(until=start + dt.timedelta(minutes=90))
        note("woke")
        return durable.now().isoformat()

    begun = env.now()
    handle = env.dispatch(meeting)
    env.advance(dt.timedelta(minutes=90))
    assert handle.result() == (begun + dt.timedelta(minutes=90)).isoformat()
    assert seen == ["woke"]


def test_naive_datetimes_and_bad_arguments_are_refused(env: DurableEnv) -> None:
    """Ambiguous or mixed-up arguments get a clear error, before anything is recorded."""
    with pytest.raises(ValueError, match="timezone-aware"):
        wait(until=dt.datetime(2030, 1, 1))
    with pytest.raises(TypeError, match="one of"):
        wait()
    with pytest.raises(TypeError, match="timeout= goes with"):
        wait(5, timeout=3)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="timedelta or a number"):
        wait("x", timeout="soon")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="finite"):
        wait(float("inf"))
    with pytest.raises(TypeError, match=r"one event name, not several \(\['a', 'b'\]\)"):
        wait(["a", "b"], timeout=3)  # type: ignore[call-overload]
    with pytest.raises(DurableError, match="inside a workflow only"):
        wait("reviewed")
    with pytest.raises(ValueError, match="non-empty"):
        send("some-run", "")


def test_a_sleep_outside_a_workflow_just_sleeps() -> None:
    """In plain code (a task body, the app) wait(duration) blocks the thread."""
    started = time.monotonic()
    wait(0.05)
    assert time.monotonic() - started >= 0.05


# -- retries -------------------------------------------------------------------------


def test_long_retry_delays_become_durable_waits(env: DurableEnv) -> None:
    """A task retrying every ten minutes holds no thread between attempts."""
    attempts: list[float] = []

    @task(retry={"attempts": 3, "backoff": "constant", "initial": 600, "max_delay": 600})
    def flaky() -> str:
        attempts.append(env.clock.now())
        if len(attempts) < 3:
            raise ConnectionError("down")
        return "up"

    @workflow
    def patient() -> str:
        return flaky()

    handle = env.dispatch(patient)
    run = env.run(handle.id)
    retrying = env.history(handle.id)[0]
    assert run.status is RunStatus.WAITING
    assert retrying.status is StepStatus.RETRYING and retrying.wake_at == attempts[0] + 600
    env.advance(dt.timedelta(minutes=9))
    assert len(attempts) == 1, "the next attempt never starts early"
    assert handle.result() == "up"
    assert [b - a for a, b in itertools.pairwise(attempts)] == [600, 600]
