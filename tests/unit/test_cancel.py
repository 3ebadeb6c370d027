"""Cancellation: queued, running with cleanup, waiting, with children, finished."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

import durable
from durable import Cancelled, RunStatus, StepKind, Worker, dispatch, execute, task, wait, workflow
from tests.unit.helpers import Crash, history, run


@pytest.fixture
def engine() -> Iterator[durable.Engine]:
    """A default engine on memory."""
    engine = durable.configure("memory://", lease=2.0)
    try:
        yield engine
    finally:
        engine.close()


events: list[str] = []
gate = threading.Event()


@pytest.fixture(autouse=True)
def _reset() -> None:
    events.clear()
    gate.clear()


@task
def act(name: str) -> str:
    events.append(name)
    return name


@task
def block(name: str) -> str:
    events.append(name)
    assert gate.wait(5), "the test never opened the gate"
    return name


@workflow
def careful() -> str:
    try:
        block("working")
        act("never")
        return "finished"
    finally:
        act("cleanup")


def test_cancelling_a_queued_run_means_it_never_starts(engine: durable.Engine) -> None:
    """A queued run cancelled before any worker takes it is CANCELLED and never runs."""
    handle = dispatch(careful)
    assert handle.cancel() is True
    assert handle.status() is RunStatus.CANCELLED
    with Worker(engine, poll=0.05):
        with pytest.raises(Cancelled):
            handle.result(timeout=5)
        time.sleep(0.1)
    assert events == []


def test_a_running_run_sees_cancelled_at_its_next_durable_call(engine: durable.Engine) -> None:
    """Cancelled is raised at the next durable call; finally blocks run and may call tasks."""
    handle = dispatch(careful)
    with Worker(engine, poll=0.05):
        while "working" not in events:
            time.sleep(0.01)
        assert durable.cancel(handle.id) is True
        gate.set()
        with pytest.raises(Cancelled):
            handle.result(timeout=5)
    assert events == ["working", "cleanup"]
    assert handle.status() is RunStatus.CANCELLED
    kinds = [step.kind for step in history(handle.id)]
    assert kinds == [StepKind.TASK, StepKind.CANCEL, StepKind.TASK]


def test_cancellation_replays_at_the_same_place(engine: durable.Engine) -> None:
    """A run that dies during its cleanup replays Cancelled at the recorded point."""
    crash = {"armed": True}

    @task
    def cleanup() -> None:
        if crash["armed"]:
            crash["armed"] = False
            raise Crash
        events.append("cleanup done")

    @workflow
    def flow() -> None:
        try:
            block("working")
            act("never")
        finally:
            cleanup()

    result: list[BaseException] = []

    def run_it() -> None:
        try:
            execute(flow, id="c1")
        except BaseException as error:
            result.append(error)

    thread = threading.Thread(target=run_it)
    thread.start()
    while "working" not in events:
        time.sleep(0.01)
    durable.cancel("c1")
    gate.set()
    thread.join(5)
    assert isinstance(result[0], Crash), "the process 'died' during cleanup"
    with pytest.raises(Cancelled):
        execute(flow, id="c1")
    assert events == ["working", "cleanup done"], "no step re-ran; Cancelled came back at once"
    assert run("c1").status is RunStatus.CANCELLED


def test_swallowing_cancelled_lets_the_workflow_finish(engine: durable.Engine) -> None:
    """A workflow that catches Cancelled on purpose completes; it is told only once."""

    @workflow
    def stubborn() -> str:
        try:
            block("working")
            act("interrupted")
        except Cancelled:
            act("after")
            act("more")
            return "carried on"
        return "never cancelled"

    handle = dispatch(stubborn)
    with Worker(engine, poll=0.05):
        while "working" not in events:
            time.sleep(0.01)
        handle.cancel()
        gate.set()
        assert handle.result(timeout=5) == "carried on"
    assert events == ["working", "after", "more"]


def test_cancelling_a_parent_cancels_its_children(engine: durable.Engine) -> None:
    """A parent waiting on a child: cancelling the parent cancels both; cleanup runs."""

    @workflow
    def child() -> str:
        block("child working")
        return act("child never gets here")

    @workflow
    def parent() -> str:
        try:
            return wait(dispatch(child))
        finally:
            act("parent cleanup")

    handle = dispatch(parent)
    with Worker(engine, concurrency=4, poll=0.05):
        while "child working" not in events:
            time.sleep(0.01)
        assert handle.cancel() is True
        gate.set()
        with pytest.raises(Cancelled):
            handle.result(timeout=5)
        # The child is a run of its own: it ends at its next durable call, which may
        # come after the parent has recorded its outcome.
        child_run = durable.get(f"{handle.id}/0")
        with pytest.raises(Cancelled):
            child_run.result(timeout=5)
        assert child_run.status() is RunStatus.CANCELLED
    assert events == ["child working", "parent cleanup"]
    assert handle.status() is RunStatus.CANCELLED


def test_cancelling_a_queued_child_of_a_running_parent(engine: durable.Engine) -> None:
    """Queued descendants are cancelled at once, grandchildren included."""

    @workflow
    def leaf() -> str:
        return act("leaf")

    @workflow
    def middle() -> str:
        return wait(dispatch(leaf))

    @workflow
    def top() -> str:
        return wait(dispatch(middle))

    handle = dispatch(top, queue="top")
    # Only top's queue is served: top runs, dispatches middle (to "default") and
    # suspends waiting for it; middle stays queued.
    with Worker(engine, queues=["top"], poll=0.05, concurrency=1):
        while run(handle.id).status is not RunStatus.WAITING:
            time.sleep(0.01)
        assert run(f"{handle.id}/0").status is RunStatus.QUEUED
        handle.cancel()
        with pytest.raises(Cancelled):
            handle.result(timeout=5)
    assert run(f"{handle.id}/0").status is RunStatus.CANCELLED
    assert [step.kind for step in history(handle.id)] == [
        StepKind.DISPATCH,
        StepKind.CANCEL,  # delivered where top was waiting
    ]
    assert events == []


def test_cancelling_an_inline_execute(engine: durable.Engine) -> None:
    """A run executing in a caller's thread is cancelled too; the caller gets Cancelled."""
    errors: list[BaseException] = []

    def caller() -> None:
        try:
            execute(careful, id="inline")
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=caller)
    thread.start()
    while "working" not in events:
        time.sleep(0.01)
    durable.cancel("inline")
    gate.set()
    thread.join(5)
    assert isinstance(errors[0], Cancelled) and errors[0].run_id == "inline"
    assert events == ["working", "cleanup"]


def test_cancelling_a_finished_run_is_a_no_op(engine: durable.Engine) -> None:
    """cancel() on a finished run answers False and changes nothing."""
    assert execute(act, "done", id="finished") == "done"
    assert durable.cancel("finished") is False
    assert run("finished").status is RunStatus.COMPLETED
    with pytest.raises(durable.errors.RunNotFound):
        durable.cancel("no-such-run")
