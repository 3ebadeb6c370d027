"""A workflow that makes every kind of durable call once, for the fault-point tests.

Worker subprocesses import it (``durable worker tests.chaos.fault_app``). Its task
bodies write the effect ledger (tests/e2e/workers_app.py `ledger`), so the checker can
count how often each body ran and which execution's result was recorded.
"""

from __future__ import annotations

import durable
from durable import dispatch, execute, send, task, wait, workflow
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
    """One durable call of each kind, in this order: task, now, uuid4, random, sleep,
    send, event, dispatch, join, workflow (a child called inline)."""
    first = effect(i, 0)["value"]
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


def expected(i: int) -> list[object]:
    """What `every_kind(i, ...)` returns, computed without durable."""
    return [i * 10, i, i * 10 + 5, (i + 1) * 10 + 5]
