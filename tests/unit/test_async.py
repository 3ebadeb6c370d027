"""async def workflows and tasks: awaited on the loop, recorded like sync ones."""

from __future__ import annotations

import asyncio

import pytest

import durable
from durable import StepKind, execute, execute_async, task, workflow
from tests.unit.helpers import Crash, history

pytestmark = pytest.mark.usefixtures("memory_engine")


@task
async def fetch(n: int) -> int:
    await asyncio.sleep(0)
    return n * 2


@task
def sync_add(a: int, b: int) -> int:
    return a + b


@workflow
async def gather_flow(n: int) -> list[int]:
    first = await fetch(n)
    both = await asyncio.gather(fetch(first), fetch(first + 1))
    total = sync_add(both[0], both[1])
    many = await execute_async(fetch.bind(1), sync_add.bind(2, 3))
    return [first, *both, total, *many]


def test_async_workflow_from_sync_code() -> None:
    """execute() runs an async workflow to completion and returns its result."""
    assert execute(gather_flow, 1, id="a1") == [2, 4, 6, 10, 2, 5]
    names = [s.name for s in history("a1")]
    assert names == [fetch.name, fetch.name, fetch.name, sync_add.name, fetch.name, sync_add.name]


def test_async_workflow_from_async_code() -> None:
    """execute_async() awaits an async workflow on the running loop."""

    async def main() -> list[int]:
        return await execute_async(gather_flow, 1, id="a2")  # type: ignore[no-any-return]

    assert asyncio.run(main()) == [2, 4, 6, 10, 2, 5]


def test_gather_positions_follow_call_order() -> None:
    """Coroutines take their positions when called, so gather order is deterministic."""

    @task
    async def slow_then_fast(delay: float, tag: str) -> str:
        await asyncio.sleep(delay)
        return tag

    @workflow
    async def race() -> list[str]:
        return list(await asyncio.gather(slow_then_fast(0.05, "slow"), slow_then_fast(0, "fast")))

    assert execute(race, id="a3") == ["slow", "fast"]
    assert [s.output for s in history("a3")] == [b'j"slow"', b'j"fast"']


def test_async_run_resumes_after_a_crash() -> None:
    """An async run that died resumes and replays its finished tasks."""
    bodies: list[int] = []
    crash = {"armed": True}

    @task
    async def record(n: int) -> int:
        if n == 2 and crash["armed"]:
            crash["armed"] = False
            raise Crash
        bodies.append(n)
        return n

    @workflow
    async def flow() -> list[int]:
        return [await record(0), await record(1), await record(2)]

    with pytest.raises(Crash):
        execute(flow, id="a4")
    assert execute(flow, id="a4") == [0, 1, 2]
    assert bodies == [0, 1, 2]


def test_async_child_workflow() -> None:
    """An async workflow awaited inside another becomes a child run."""

    @workflow
    async def child(n: int) -> int:
        return await fetch(n)

    @workflow
    async def parent() -> int:
        return await child(5) + 1

    assert execute(parent, id="a5") == 11
    assert [s.kind for s in history("a5")] == [StepKind.WORKFLOW]
    assert durable.get_engine().backend.get_run("a5/0") is not None


def test_sync_execute_inside_a_running_loop() -> None:
    """Sync execute() of an async workflow works even when called under a running loop."""

    async def main() -> int:
        return execute(gather_flow, 3)[0]  # type: ignore[no-any-return]

    assert asyncio.run(main()) == 6
