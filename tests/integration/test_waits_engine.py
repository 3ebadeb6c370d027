"""Waits in real time on every backend: execute callers, workers, events, children."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import durable
from durable import RunStatus, StepKind, StepStatus, Worker, dispatch, send, wait, workflow
from tests.conftest import BACKENDS
from tests.unit.helpers import history, run

pytestmark = pytest.mark.parametrize("url", BACKENDS, indirect=True)


@workflow
def nap(seconds: float) -> float:
    before = durable.now()
    wait(seconds)
    return (durable.now() - before).total_seconds()


@workflow
def listener() -> Any:
    return wait("ping", timeout=30)


@workflow
def outer() -> str:
    return f"{inner()}!"


@workflow
def inner() -> str:
    wait(1.2)
    return "inner"


def _wait_for(condition: Any, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_an_execute_caller_blocks_across_a_suspended_wait(engine: durable.Engine) -> None:
    """The run suspends (WAITING, no lease) while its caller waits, then the caller
    continues it at its deadline, never before."""
    statuses: list[RunStatus] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            stored = engine.backend.get_run("napper")
            if stored is not None:
                statuses.append(stored.status)
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        slept = durable.execute(nap, 1.3, id="napper")
    finally:
        done.set()
        watcher.join()
    assert slept >= 1.3
    assert RunStatus.WAITING in statuses, "the run was suspended, not slept on"
    sleep = history("napper")[1]
    assert sleep.kind is StepKind.SLEEP and sleep.status is StepStatus.COMPLETED
    assert sleep.finished_at is not None and sleep.wake_at is not None
    assert sleep.finished_at >= sleep.wake_at


def test_short_waits_sleep_in_place(engine: durable.Engine) -> None:
    """A wait within max_inline_wait never suspends the run."""
    suspended: list[str] = []
    original = engine.backend.suspend_run

    def spy(run_id: str, *args: Any, **kwargs: Any) -> Any:
        suspended.append(run_id)
        return original(run_id, *args, **kwargs)

    engine.backend.suspend_run = spy  # type: ignore[method-assign]
    assert durable.execute(nap, 0.2) >= 0.2
    assert suspended == []


def test_an_event_reaches_a_run_an_execute_caller_waits_for(engine: durable.Engine) -> None:
    """send() from another thread wakes the run; the waiting caller gets its result."""
    result: list[Any] = []
    caller = threading.Thread(target=lambda: result.append(durable.execute(listener, id="ear")))
    caller.start()
    _wait_for(
        lambda: getattr(engine.backend.get_run("ear"), "status", None) is RunStatus.WAITING,
        "the run to wait",
    )
    send("ear", "ping", {"n": 1})
    caller.join(10)
    assert result == [{"n": 1}]


def test_an_inline_child_that_waits_frees_the_parent(engine: durable.Engine) -> None:
    """Parent and child both wait (no thread); the caller sees them through."""
    assert durable.execute(outer, id="outer") == "inner!"
    assert run("outer/0").status is RunStatus.COMPLETED
    assert [step.kind for step in history("outer")] == [StepKind.WORKFLOW]


def test_waiting_runs_hold_no_worker_slot(engine: durable.Engine) -> None:
    """Twelve runs sleep at once on a worker with two slots, and all finish."""
    handles = [dispatch(nap, 1.5) for _ in range(12)]
    with Worker(engine, concurrency=2, poll=0.1):
        _wait_for(
            lambda: sum(h.status() is RunStatus.WAITING for h in handles) == 12,
            "all twelve to be asleep together",
        )
        results = [h.result(timeout=30) for h in handles]
    assert all(slept >= 1.5 for slept in results)
