"""Async runs on a worker's event loop (its lane), in process: cancellation and timeouts
of async task bodies, a graceful stop, a step that blocks the loop, the thread mode
(memory, SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

import pytest

import durable
from durable import Cancelled, RunStatus, StepStatus, TaskTimeout, Worker, task, workflow
from durable.errors import ConfigurationError
from tests.conftest import BACKENDS

pytestmark = pytest.mark.parametrize("url", BACKENDS, indirect=True)

#: what the task bodies saw, in order: "started", "cancelled", "done"...
seen: list[str] = []
#: the threads async task bodies ran in.
threads: set[str] = set()


@pytest.fixture(autouse=True)
def _reset() -> None:
    seen.clear()
    threads.clear()


def until(condition: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@task
async def long_io(seconds: float) -> str:
    threads.add(threading.current_thread().name)
    seen.append("started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        seen.append("cancelled")
        raise
    seen.append("done")
    return "slept"


@workflow
async def cancellable(seconds: float) -> str:
    try:
        return await long_io(seconds)
    finally:
        seen.append("workflow finally")


@task(timeout=0.3, retry=dict(attempts=2, backoff="constant", initial=0))
async def too_slow() -> str:
    seen.append("attempt")
    await asyncio.sleep(30)
    return "never"


@workflow
async def bounded() -> str:
    try:
        return await too_slow()
    except TaskTimeout as error:
        return f"gave up after {error.limit}"


@task
async def first_slow(seconds: float) -> str:
    seen.append("attempt")
    await asyncio.sleep(seconds if len(seen) == 1 else 0)
    return "second attempt"


@workflow
async def handed_back(seconds: float) -> str:
    return await first_slow(seconds)


@task
async def blocks_the_loop() -> str:
    time.sleep(0.8)  # the mistake the warning is for
    return "blocked"


@workflow
async def blocking() -> str:
    return await blocks_the_loop()


def test_cancelling_a_run_cancels_the_async_body_it_awaits(engine: durable.Engine) -> None:
    """The body awaiting a minute sees CancelledError at once (no heartbeat needed), the
    workflow's finally runs, the run ends CANCELLED, and the body ran on the lane."""
    handle = durable.dispatch(cancellable, 60.0)
    with Worker(engine, poll=0.1):
        until(lambda: "started" in seen, "the body to start")
        started = time.monotonic()
        handle.cancel()
        with pytest.raises(Cancelled):
            handle.result(timeout=20)
        assert time.monotonic() - started < 10, "cancelled long before the body's minute"
    assert handle.status() is RunStatus.CANCELLED
    assert seen == ["started", "cancelled", "workflow finally"]
    assert threads == {"durable-async"}, "async bodies run on the worker's event loop"
    step = engine.backend.load_history(handle.id)[0]
    assert step.status is StepStatus.FAILED
    assert isinstance(engine.load_error(step.error or b"", handle.id, 0), Cancelled)


def test_an_async_attempt_past_its_timeout_is_cancelled_and_retried(
    engine: durable.Engine,
) -> None:
    """Each attempt is cancelled at 0.3 s; after the second the workflow sees TaskTimeout
    (and the history holds two attempts, the task TIMED out, not its minute slept)."""
    handle = durable.dispatch(bounded)
    with Worker(engine, poll=0.1):
        assert handle.result(timeout=20) == "gave up after timeout"
    assert seen == ["attempt", "attempt"]
    step = engine.backend.load_history(handle.id)[0]
    assert step.status is StepStatus.FAILED and step.attempts == 2


def test_a_stopping_worker_cancels_its_leftover_async_runs_and_another_finishes_them(
    engine: durable.Engine,
) -> None:
    """stop() hands back the run whose body still awaits at the end of the grace period
    and cancels that body (a coroutine can be stopped, a thread cannot): nothing of it
    goes on in the background; another worker runs a new attempt to completion."""
    handle = durable.dispatch(handed_back, 60.0)
    first = Worker(engine, poll=0.1).start()
    until(lambda: seen == ["attempt"], "the first attempt")
    assert first.stop(grace=0.2) == 1, "one run was still busy"
    assert engine.backend.get_run(handle.id).status is RunStatus.QUEUED  # type: ignore[union-attr]
    with Worker(engine, poll=0.1):
        assert handle.result(timeout=20) == "second attempt"
    assert seen == ["attempt", "attempt"]


def test_a_step_that_blocks_the_loop_is_named_in_a_warning(
    engine: durable.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """A task calling time.sleep in async code holds the loop: the worker warns, naming
    the run, its workflow, the task and its position; the run still completes."""
    handle = durable.dispatch(blocking)
    with (
        caplog.at_level(logging.WARNING, logger="durable.worker"),
        Worker(engine, poll=0.1, warn_blocking=0.2),
    ):
        assert handle.result(timeout=20) == "blocked"
    warnings = [r.getMessage() for r in caplog.records if "held the event loop" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert f"run {handle.id!r}" in warnings[0]
    assert "test_async_lane.blocking)" in warnings[0]
    assert "test_async_lane.blocks_the_loop' at position 0" in warnings[0]


def test_without_a_lane_async_runs_take_a_thread_each(engine: durable.Engine) -> None:
    """async_concurrency=0: async runs execute in the worker's threads, as before the
    lane (one event loop per run); cancelling still stops them at their next call."""
    handles = [durable.dispatch(cancellable, 0.05) for _ in range(3)]
    with Worker(engine, poll=0.1, async_concurrency=0):
        assert [h.result(timeout=20) for h in handles] == ["slept"] * 3
    assert "durable-async" not in threads and threads, threads


def test_bad_lane_settings_are_refused(engine: durable.Engine) -> None:
    with pytest.raises(ConfigurationError, match="async_concurrency must be 0"):
        Worker(engine, async_concurrency=-1)
    with pytest.raises(ConfigurationError, match="warn_blocking must be positive"):
        Worker(engine, warn_blocking=0)
