"""Workflows that continue as new, for the continue-as-new tests (unit, integration)."""

from __future__ import annotations

from typing import Any

import durable
from durable import task, wait, workflow

#: task bodies run, in order: (run id, argument).
bodies: list[tuple[str, int]] = []


@task
def bump(i: int) -> int:
    info = durable.info()
    bodies.append((info.run_id if info else "?", i))
    return i + 1


@workflow
def counter(i: int, n: int) -> int:
    """One task per run: counts from *i* to *n*, one run per step."""
    j = bump(i)
    if j < n:
        durable.continue_as_new(j, n)
    return j


@workflow
def accumulate(total: int, rounds: int) -> int:
    """Adds the ``add`` events it receives, one per run, until *rounds* runs are done."""
    durable.set_state(total=total, rounds=rounds)
    total += wait("add")
    if rounds > 1:
        durable.continue_as_new(total, rounds - 1)
    return total


@workflow
def bad_arguments(kind: str) -> None:
    """Calls continue_as_new with arguments it cannot take (*kind*)."""
    if kind == "unbound":
        durable.continue_as_new("a", "b", "c")
    durable.continue_as_new(object())


@task
def continue_in_a_task() -> None:
    durable.continue_as_new()


@workflow
def calls_a_task_that_continues() -> None:
    continue_in_a_task()


@workflow
def child_that_continues(i: int) -> int:
    durable.continue_as_new(i + 1)
    return i


@workflow
def parent_of_a_continuing_child() -> int:
    return child_that_continues(1)


@workflow
def waits_for(run_id: str) -> Any:
    return wait(durable.get(run_id))


@workflow
class Rounds:
    """A workflow class that continues as new: its properties go with each hand-over."""

    def __init__(self, left: int) -> None:
        self.left = left

    def handle(self) -> str:
        bump(self.left)
        if self.left > 0:
            durable.continue_as_new(self.left - 1)
        return "done"


@workflow
async def async_counter(i: int, n: int) -> int:
    """counter, as an async workflow."""
    j = i + 1
    if j < n:
        durable.continue_as_new(j, n)
    return j


@workflow
def scheduled_loop(at: object) -> None:
    """A scheduled workflow that never ends: it sleeps, then continues as new."""
    wait(30)
    durable.continue_as_new(at)
