"""A workflow that makes every kind of durable call once, for the fault-point tests.

Worker subprocesses import it (``durable worker tests.chaos.fault_app``). Its task
bodies write the effect ledger (tests/e2e/workers_app.py `ledger`), so the checker can
count how often each body ran and which execution's result was recorded.
"""

from __future__ import annotations

import asyncio

import durable
from durable import TaskInfo, dispatch, execute, send, task, wait, workflow
from tests.e2e.workers_app import ledger


@task
def effect(i: int, n: int) -> dict[str, object]:
    token = ledger()
    durable.heartbeat({"i": i, "n": n})  # a fenced heartbeat write at every fault point
    return {"value": i * 10 + n, "token": token}


@workflow
def leaf(i: int) -> int:
    return effect(i, 5)["value"]  # type: ignore[return-value]


@workflow
def every_kind(i: int, me: str) -> list[object]:
    """One durable call of each kind, in this order: task, a patch's marker, now, uuid4,
    random, sleep, send, event, dispatch, join, workflow (a child called inline)."""
    first = effect(i, 0)["value"]
    if not durable.patched("every-kind"):  # a run started on this code never takes it
        first = -1
    durable.now()
    durable.uuid4()
    durable.random()
    wait(0.05)
    send(me, "note", {"n": i})
    note = wait("note", timeout=60)
    handle = dispatch(leaf, i)
    joined = wait(handle)
    inline = execute(leaf, i + 1)
    return [first, note["n"], joined, inline]


@workflow(timeout=2)
def bounded(i: int) -> str:
    """Stopped by its deadline while it sleeps: position 0 a task, 1 the deadline's
    marker (where the sleep was), 2 the cleanup task in ``finally``."""
    try:
        effect(i, 0)
        wait(60)
        return "woke"
    finally:
        effect(i, 1)


@workflow
class SeedOrder:
    """Seed 000's example as a workflow class: three tasks in parallel, then a fourth;
    its ``on_start`` and ``on_success`` hooks keep a log and a total in its properties."""

    def __init__(self, i: int) -> None:
        self.i = i
        self.log: list[str] = []
        self.total = 0

    def handle(self) -> int:
        execute(effect.bind(self.i, 1), effect.bind(self.i, 2), effect.bind(self.i, 3))
        self.log.append("after the three")
        effect(self.i, 4)
        return self.total

    def on_start(self, task: TaskInfo) -> None:
        self.log.append(f"start {task.position}")

    def on_success(self, task: TaskInfo, output: dict[str, int]) -> None:
        self.log.append(f"success {task.position}")
        self.total += output["value"]


def seed_expected(i: int) -> dict[str, object]:
    """The properties `SeedOrder(i)` ends with, computed without durable."""
    log = [f"start {p}" for p in range(3)] + [f"success {p}" for p in range(3)]
    log += ["after the three", "start 3", "success 3"]
    return {"i": i, "log": log, "total": sum(i * 10 + n for n in range(1, 5))}


def expected(i: int) -> list[object]:
    """What `every_kind(i, ...)` returns, computed without durable."""
    return [i * 10, i, i * 10 + 5, (i + 1) * 10 + 5]


@workflow
class Tally:
    """A workflow class with ``on_event``: the events sent before it starts reach the
    handler at its first durable call, one at a time, oldest first; each handler calls
    a task and adds its value to the properties."""

    def __init__(self, i: int) -> None:
        self.i = i
        self.log: list[str] = []
        self.total = 0

    def handle(self) -> int:
        effect(self.i, 1)
        self.log.append("main")
        return self.total

    def on_event(self, name: str, payload: int) -> None:
        self.log.append(f"{name} {payload}")
        self.total += effect(self.i, payload)["value"]  # type: ignore[operator]


def tally_expected(i: int, sent: list[int]) -> dict[str, object]:
    """The properties `Tally(i)` ends with after events "add" *sent*, without durable."""
    log = [f"add {n}" for n in sent] + ["main"]
    return {"i": i, "log": log, "total": sum(i * 10 + n for n in sent)}


@task
async def io_effect(i: int, n: int) -> dict[str, object]:
    """`effect` as an async task: on a worker's event loop, its writes off the loop."""
    token = ledger()
    durable.heartbeat({"i": i, "n": n})
    await asyncio.sleep(0.01)
    return {"value": i * 10 + n, "token": token}


@workflow
async def io_leaf(i: int) -> int:
    return (await io_effect(i, 5))["value"]  # type: ignore[no-any-return]


@workflow
async def every_kind_async(i: int, me: str) -> list[object]:
    """`every_kind` as an async workflow, on a worker's event loop: an async task, now,
    uuid4, a sleep, a send, an event wait, a dispatch, a join, an async child inline,
    and a last async task."""
    first = (await io_effect(i, 0))["value"]
    durable.now()
    durable.uuid4()
    wait(0.05)
    send(me, "note", {"n": i})
    note = wait("note", timeout=60)
    joined = wait(dispatch(io_leaf, i))
    inline = await io_leaf(i + 1)
    last = (await io_effect(i, 1))["value"]
    return [first, note["n"], joined, inline, last]


def expected_async(i: int) -> list[object]:
    """What `every_kind_async(i, ...)` returns, computed without durable."""
    return [i * 10, i, i * 10 + 5, (i + 1) * 10 + 5, i * 10 + 1]
