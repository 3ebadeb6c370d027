"""Run deadlines on SQLite and PostgreSQL with real time and a worker (the virtual-clock
versions are in tests/unit/test_run_deadlines.py): the deadline column stored and read
back, a sleeping run woken at its deadline by the worker's timer sweep, its children
cancelled, a sync body that overruns and an async body cancelled at the deadline, and
`execute(timeout=)` raising `WorkflowTimeout` in the caller."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

import durable
from durable import (
    Cancelled,
    RunStatus,
    StepKind,
    StepStatus,
    WorkflowTimeout,
    task,
    wait,
    workflow,
)
from durable.core.records import RunQuery
from durable.runtime.worker import Worker

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
pytestmark = pytest.mark.parametrize("url", SQL, indirect=True)

cleaned: list[str] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    cleaned.clear()


@task
def cleanup(tag: str) -> None:
    cleaned.append(tag)


@workflow
def napping_child() -> str:
    try:
        wait(timedelta(minutes=10))
        return "child woke"
    finally:
        cleanup("child")


@workflow(timeout=timedelta(seconds=1))
def napping_parent() -> str:
    try:
        durable.dispatch(napping_child)
        wait(timedelta(minutes=10))
        return "woke"
    except Cancelled as stopped:
        cleaned.append(f"stopped timed_out={stopped.timed_out}")
        raise
    finally:
        cleanup("parent")


def test_a_sleeping_run_is_stopped_at_its_deadline_by_a_worker(engine: durable.Engine) -> None:
    handle = durable.dispatch(napping_parent)
    created = engine.reread(handle.id).created_at
    assert engine.reread(handle.id).deadline_at == pytest.approx(created + 1, abs=0.5)
    with Worker(engine, poll=0.05):
        with pytest.raises(WorkflowTimeout) as raised:
            handle.result(timeout=20)
        (child,) = engine.backend.list_runs(RunQuery(parent_id=handle.id), limit=5)
        ended = engine.wait_for_run(child.id, timeout=20)
    run = engine.reread(handle.id)
    assert run.status is RunStatus.TIMED_OUT and raised.value.timeout == pytest.approx(1)
    assert run.finished_at is not None and 1 <= run.finished_at - created < 10
    assert ended.status is RunStatus.CANCELLED
    assert sorted(cleaned) == ["child", "parent", "stopped timed_out=True"]
    kinds = [step.kind for step in engine.backend.load_history(handle.id)]
    assert kinds == [StepKind.DISPATCH, StepKind.CANCEL, StepKind.TASK]


def test_execute_with_a_timeout_raises_in_the_caller(engine: durable.Engine) -> None:
    @task
    def slow() -> str:
        time.sleep(0.3)
        return "slow"

    @workflow
    def flow() -> str:
        try:
            slow()
            return slow()
        finally:
            cleanup("flow")

    started = time.monotonic()
    with pytest.raises(WorkflowTimeout):
        durable.execute(flow, id="bounded", timeout=0.2)
    assert time.monotonic() - started < 5
    assert cleaned == ["flow"]
    history = engine.backend.load_history("bounded")
    # the first call finished (a sync body is not interrupted), the deadline was
    # delivered as it returned, and the cleanup ran
    assert [(step.kind, step.name) for step in history] == [
        (StepKind.TASK, slow.name),
        (StepKind.CANCEL, "durable.timeout.on-return"),
        (StepKind.TASK, cleanup.name),
    ]
    assert engine.reread("bounded").status is RunStatus.TIMED_OUT


def test_an_async_task_body_is_cancelled_at_the_deadline(engine: durable.Engine) -> None:
    seen: list[str] = []

    @task
    async def endless() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    @workflow
    async def flow() -> None:
        try:
            await endless()
        finally:
            cleanup("flow")

    started = time.monotonic()
    with pytest.raises(WorkflowTimeout):
        durable.execute(flow, id="async-bounded", timeout=0.3)
    assert time.monotonic() - started < 10
    assert seen == ["cancelled"] and cleaned == ["flow"]
    body, cleanup_step = engine.backend.load_history("async-bounded")
    assert body.status is StepStatus.FAILED  # the position records Cancelled(timed_out)
    error = engine.load_error(body.error or b"", "async-bounded", 0)
    assert isinstance(error, Cancelled) and error.timed_out
    assert cleanup_step.name == cleanup.name
