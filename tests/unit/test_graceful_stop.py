"""A worker told to stop hands a run back before its next task, however long its claim
loop takes to notice (here: it sleeps for a 5 s poll)."""

from __future__ import annotations

import threading
import time

import durable
from durable import RunStatus, StepKind, Worker, dispatch, task, workflow

events: list[str] = []
gate = threading.Event()


@task
def first() -> None:
    events.append("first")
    assert gate.wait(10), "the test never opened the gate"


@task
def second() -> None:
    events.append("second")


@workflow
def two_steps() -> None:
    first()
    second()


def test_a_stopping_worker_starts_no_next_task(memory_engine: durable.Engine) -> None:
    events.clear()
    gate.clear()
    handle = dispatch(two_steps)
    worker = Worker(memory_engine, poll=5.0).start()
    deadline = time.monotonic() + 10
    while "first" not in events:
        assert time.monotonic() < deadline, "the worker never started the run"
        time.sleep(0.01)
    stopping = threading.Thread(target=worker.stop, kwargs={"grace": 10})
    stopping.start()
    time.sleep(0.1)  # the stop is under way; the claim loop is still asleep in its poll
    gate.set()  # first() returns now: its run must go back to the queue, not on
    stopping.join(15)
    assert not stopping.is_alive()
    assert events == ["first"], "second() started after the stop"
    assert handle.status() is RunStatus.QUEUED, "handed back, for another worker"
    assert [s.kind for s in memory_engine.backend.load_history(handle.id)] == [StepKind.TASK]
    with Worker(memory_engine, poll=0.05):
        handle.result(timeout=5)
    assert events == ["first", "second"]
