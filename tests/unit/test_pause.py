"""Pausing and resuming runs (issue 15, seed 004's halt), on memory with a virtual clock.

A paused run stops at its next durable call (a queued or waiting one at once), holds
no thread, and is never claimed; its children are paused with it. Timers that come due
and events that arrive meanwhile take effect once it is resumed. A cancelled run can
be resumed too: it goes on from where the cancellation reached its code.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

import durable
from durable import Cancelled, RunStatus, StepKind, task, wait, workflow
from durable.core.records import RunQuery
from durable.errors import RunNotFound
from durable.testing import DurableEnv


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    with DurableEnv() as world:
        yield world


done: list[str] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    done.clear()


@task
def step(name: str) -> str:
    done.append(name)
    return name


@task
def pause_me(name: str) -> str:
    """Asks for its own run to pause while its body runs (an operator's click)."""
    durable.pause(_owner[0])
    done.append(name)
    return name


_owner: list[str] = [""]


@workflow
def pipeline() -> list[str]:
    out = [step("a"), pause_me("b"), step("c")]
    wait(timedelta(hours=1))
    out.append(step("d"))
    return out


def test_a_running_run_pauses_at_its_next_durable_call_after_the_task_in_flight(
    env: DurableEnv,
) -> None:
    h = durable.dispatch(pipeline)
    _owner[0] = h.id
    env.drain()
    run = env.run(h.id)
    assert run.status is RunStatus.PAUSED
    assert done == ["a", "b"]  # the task in flight finished; c never started
    names = [s.name.rsplit(".", 1)[-1] for s in env.history(h.id)]
    assert names[:2] == ["step", "pause_me"]
    assert all(s.status.finished for s in env.history(h.id)[:2])  # b's result is kept
    env.run_until_idle()  # nothing runs: a paused run is never claimed
    assert env.run(h.id).status is RunStatus.PAUSED and done == ["a", "b"]
    assert h.resume() is True
    env.drain()
    assert env.run(h.id).status is RunStatus.WAITING and done == ["a", "b", "c"]
    env.advance(timedelta(hours=1))
    assert h.result() == ["a", "b", "c", "d"]


@workflow
def sleeper() -> str:
    wait(timedelta(minutes=10))
    return step("woke")


def test_a_timer_due_during_the_pause_fires_after_resume_not_before(env: DurableEnv) -> None:
    h = env.dispatch(sleeper)
    assert env.run(h.id).status is RunStatus.WAITING
    assert h.pause() is True
    run = env.run(h.id)
    assert run.status is RunStatus.PAUSED and run.wake_at is not None  # what it waits for is kept
    env.advance(timedelta(hours=2))
    assert env.run(h.id).status is RunStatus.PAUSED and done == []
    assert durable.resume(h.id) is True
    env.drain()
    assert h.result() == "woke" and done == ["woke"]


@workflow
def listener() -> object:
    return wait("go")


def test_an_event_sent_during_the_pause_takes_effect_on_resume(env: DurableEnv) -> None:
    h = env.dispatch(listener)
    h.pause()
    env.send(h.id, "go", 42)
    assert env.run(h.id).status is RunStatus.PAUSED
    h.resume()
    env.drain()
    assert h.result() == 42


@workflow
def parent() -> list[str]:
    child = durable.dispatch(sleeper)
    return [child.result(), step("parent")]


def test_children_are_paused_and_resumed_with_their_parent(env: DurableEnv) -> None:
    h = env.dispatch(parent)
    child_id = next(r.id for r in env.backend.list_runs(RunQuery(parent_id=h.id), limit=5))
    h.pause()
    assert env.run(h.id).status is RunStatus.PAUSED
    assert env.run(child_id).status is RunStatus.PAUSED
    env.advance(timedelta(hours=1))
    assert env.run(child_id).status is RunStatus.PAUSED
    h.resume()
    env.drain()
    env.advance(timedelta(minutes=1))
    assert h.result() == ["woke", "parent"]


def test_cancelling_a_paused_run_works(env: DurableEnv) -> None:
    @workflow
    def careful() -> str:
        try:
            wait(timedelta(hours=1))
        except Cancelled:
            step("cleanup")
            raise
        return "no"

    h = env.dispatch(careful)
    h.pause()
    assert h.cancel() is True
    env.drain()
    assert env.run(h.id).status is RunStatus.CANCELLED and done == ["cleanup"]


def test_a_queued_run_paused_before_it_starts_is_cancelled_at_once(env: DurableEnv) -> None:
    h = durable.dispatch(sleeper)
    assert h.pause() is True
    assert env.run(h.id).status is RunStatus.PAUSED
    h.cancel()
    assert env.run(h.id).status is RunStatus.CANCELLED


def test_pause_and_resume_of_runs_that_cannot_are_clear_no_ops(env: DurableEnv) -> None:
    h = env.dispatch(sleeper)
    env.advance(timedelta(hours=1))
    assert h.result() == "woke"
    assert h.pause() is False and h.resume() is False
    assert env.run(h.id).status is RunStatus.COMPLETED
    with pytest.raises(RunNotFound):
        durable.pause("no-such-run")
    with pytest.raises(RunNotFound):
        durable.resume("no-such-run")


@workflow
def cancellable() -> list[str]:
    out = [step("one")]
    try:
        wait(timedelta(hours=1))
    finally:
        step("finally")
    out.append(step("two"))
    return out


def test_a_cancelled_run_resumes_from_where_the_cancellation_reached_it(env: DurableEnv) -> None:
    h = env.dispatch(cancellable)
    h.cancel()
    env.drain()
    assert env.run(h.id).status is RunStatus.CANCELLED
    assert done == ["one", "finally"]
    kinds = [s.kind for s in env.history(h.id)]
    assert StepKind.CANCEL in kinds
    assert h.resume() is True
    run = env.run(h.id)
    assert run.status is RunStatus.QUEUED and not run.cancel_requested and run.error is None
    env.drain()
    env.advance(timedelta(hours=1))
    assert h.result() == ["one", "two"]
    # "one" was not run again; the cleanup ran once for the cancellation, once at the end
    assert done == ["one", "finally", "finally", "two"]
    assert StepKind.CANCEL not in [s.kind for s in env.history(h.id)]


def test_a_resumed_cancelled_parent_resumes_the_children_cancelled_with_it(
    env: DurableEnv,
) -> None:
    h = env.dispatch(parent)
    h.cancel()
    env.drain()
    child = next(r for r in env.backend.list_runs(RunQuery(parent_id=h.id), limit=5))
    assert env.run(h.id).status is RunStatus.CANCELLED and child.status is RunStatus.CANCELLED
    h.resume()
    env.drain()
    env.advance(timedelta(minutes=10))
    assert h.result() == ["woke", "parent"]
    assert env.run(child.id).status is RunStatus.COMPLETED


def test_pause_and_resume_of_a_finished_parent_leave_its_children_alone(
    env: DurableEnv,
) -> None:
    """A finished run answers False, and nothing below it changes (a detached child)."""

    @workflow
    def detaching() -> str:
        durable.dispatch(sleeper)
        return "left"

    h = env.dispatch(detaching)
    assert h.result() == "left"
    child = next(r for r in env.backend.list_runs(RunQuery(parent_id=h.id), limit=5))
    assert env.run(child.id).status is RunStatus.WAITING
    assert h.pause() is False and env.run(child.id).status is RunStatus.WAITING
    durable.pause(child.id)
    assert h.resume() is False and env.run(child.id).status is RunStatus.PAUSED


def test_a_cancelled_run_past_its_deadline_is_not_resumed(env: DurableEnv) -> None:
    h = env.dispatch(sleeper, timeout=timedelta(hours=2))
    h.cancel()
    env.drain()
    assert env.run(h.id).status is RunStatus.CANCELLED
    env.advance(timedelta(hours=3))
    assert h.resume() is False
    assert env.run(h.id).status is RunStatus.CANCELLED
