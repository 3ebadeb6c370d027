"""Cancelling a run that has started but is queued at that moment: its code still sees
`Cancelled`, so every ``finally`` runs exactly once (memory, SQLite, PostgreSQL).

A started run is queued whenever its timer came due and was woken, an event it waited
for arrived, a stopping worker handed it back, or a first cancel queued it to receive
the request. Each way is tried on a child waiting under a parent; the parent is the
run cancelled, so the request reaches the child through the tree.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest

import durable
from durable import Cancelled, RunStatus, Worker, dispatch, task, wait, workflow
from tests.conftest import BACKENDS

pytestmark = pytest.mark.parametrize("url", BACKENDS, indirect=True)

cleanups: list[str] = []
gate = threading.Event()


@pytest.fixture(autouse=True)
def _reset() -> None:
    cleanups.clear()
    gate.clear()


@task
def cleanup(name: str) -> None:
    cleanups.append(name)


@task
def hold() -> None:
    assert gate.wait(10), "the test never opened the gate"


@workflow
def child(how: str) -> str:
    try:
        if how == "timer":
            wait(timedelta(seconds=0.3))
        elif how == "event":
            wait("go")
        elif how == "handed back":
            hold()
        wait(timedelta(minutes=10))
        return "done"
    finally:
        cleanup("child")


@workflow
def parent(how: str) -> str:
    try:
        return wait(dispatch(child, how, queue="q1"))
    finally:
        cleanup("parent")


def _until(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _status(run_id: str) -> RunStatus | None:
    stored = durable.get_engine().backend.get_run(run_id)
    return None if stored is None else stored.status


def _requested(run_id: str) -> bool:
    stored = durable.get_engine().backend.get_run(run_id)
    assert stored is not None
    return stored.cancel_requested


@pytest.mark.parametrize("how", ["timer", "event", "handed back", "double cancel"])
def test_a_started_run_that_is_queued_still_runs_its_cleanup(
    engine: durable.Engine, how: str
) -> None:
    """Cancelled reaches the code of a queued run that has started: finally runs once."""
    engine.max_inline_wait = 0.0  # the child's short timer suspends it
    handle = dispatch(parent, how, queue="q1")
    kid = f"{handle.id}/0"
    first = Worker(engine, queues=["q1"], concurrency=4, poll=0.02).start()
    # The parent suspends on its child while the child is claimed by another slot:
    # stopping the worker before the parent waits would hand the parent back (queued).
    if how == "handed back":
        _until(
            lambda: (
                first.busy == 1
                and _status(kid) is RunStatus.RUNNING
                and _status(handle.id) is RunStatus.WAITING
            ),
            "the hold",
        )
        first.stop(grace=0.05)  # the child is inside hold(): handed back
    else:
        _until(
            lambda: _status(kid) is RunStatus.WAITING and _status(handle.id) is RunStatus.WAITING,
            "the child and its parent to wait",
        )
        first.stop()
    assert _status(handle.id) is RunStatus.WAITING
    if how == "timer":
        time.sleep(0.35)
        assert engine.backend.wake_due(limit=10) == 1  # as a worker of another queue does
    elif how == "event":
        durable.send(kid, "go")
    elif how == "double cancel":
        assert durable.cancel(handle.id) is True  # queues both, with the request
    assert _status(kid) is RunStatus.QUEUED, "the child has started and is queued again"

    assert durable.cancel(handle.id) is True
    assert _status(kid) is RunStatus.QUEUED, "a started run is not cancelled without running"
    assert _requested(kid) and _requested(handle.id)

    gate.set()
    with Worker(engine, queues=["q1"], concurrency=4, poll=0.02):
        with pytest.raises(Cancelled):
            handle.result(timeout=10)
        with pytest.raises(Cancelled):
            durable.get(kid).result(timeout=10)
    assert sorted(cleanups) == ["child", "parent"], "every finally ran exactly once"
    assert _status(handle.id) is RunStatus.CANCELLED
    assert _status(kid) is RunStatus.CANCELLED


def test_a_run_that_never_started_is_cancelled_without_running(engine: durable.Engine) -> None:
    """Queued and never claimed: cancelled at once; no worker ever runs its code."""
    handle = dispatch(parent, "timer", queue="q1")
    assert durable.cancel(handle.id) is True
    assert _status(handle.id) is RunStatus.CANCELLED
    with Worker(engine, queues=["q1"], poll=0.02):
        with pytest.raises(Cancelled):
            handle.result(timeout=5)
        time.sleep(0.1)
    assert cleanups == []
    assert list(engine.backend.load_history(handle.id)) == []
