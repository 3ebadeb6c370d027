"""Durable calls made inside a workflow: where each goes, alone or in parallel.

A call to a task or workflow takes the next position of the run (a parallel group
takes consecutive ones) and is replayed or run there: tasks by `tasks.py`, child
workflows by `children.py`. This is what `@workflow`/`@task` objects and `execute`
call when they find a run in `context.current`.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Sequence
from typing import Any

from durable.core.functions import Call, Durable
from durable.core.records import Step, StepKind

from . import children, tasks
from .context import RunContext
from .loops import run_coroutine

_TASK = StepKind.TASK


def call(
    context: RunContext, target: Durable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """A workflow or task called inside the workflow (its ``__call__``)."""
    return run_call(context, Call(target, args, kwargs, target.bind_arguments(args, kwargs)))


def run_call(context: RunContext, call: Call[Any]) -> Any:
    """Run one durable call at the next position; async targets return a coroutine."""
    target = call.target
    if target.is_async:
        # An async task's start may carry the result still deferred (`tasks.run_async`).
        return step_async(context, context.allocate(task=target.kind is _TASK), call)
    return step(context, context.allocate(task=target.kind is _TASK), call)


def parallel(context: RunContext, calls: Sequence[Call[Any]]) -> list[Any]:
    """Run *calls* concurrently at consecutive positions; results in argument order.

    Every call finishes (and is recorded) before this returns; if any failed, the
    first failure in argument order is raised, so replay raises the same one.
    """
    first = context.allocate(len(calls))
    _started(context, first, calls)
    submit = context.host.branches.submit
    futures = [submit(_branch(context, first + i, c)) for i, c in enumerate(calls)]
    return _gather(context, [f.exception() or f.result() for f in futures], first, calls)


def _branch(context: RunContext, position: int, call: Call[Any]) -> Callable[[], Any]:
    if call.target.is_async:
        return lambda: run_coroutine(_settle_async(context, position, call))
    return lambda: _settle(context, position, call)


async def parallel_async(context: RunContext, calls: Sequence[Call[Any]]) -> list[Any]:
    """`parallel` for async workflows: async calls on the loop, sync ones in threads."""
    first = context.allocate(len(calls))
    _started(context, first, calls)
    turns = context.turns
    turns.enter(first)  # the group hands back as one call, in the turn of its first
    try:
        outcomes = await asyncio.gather(
            *(_settle_async(context, first + i, c) for i, c in enumerate(calls)),
            return_exceptions=True,
        )
        await turns.wait(first)
        return _gather(context, outcomes, first, calls)
    finally:
        turns.leave(first)


def _gather(
    context: RunContext, outcomes: Sequence[Any], first: int, calls: Sequence[Call[Any]]
) -> list[Any]:
    context.check()
    context.returned()  # once for the group, after every branch: never by timing
    for i, (outcome, call) in enumerate(zip(outcomes, calls, strict=True)):
        _ended(context, first + i, call, outcome)  # the hooks, in position order
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return list(outcomes)


def _started(context: RunContext, first: int, calls: Sequence[Call[Any]]) -> None:
    """A workflow class's ``on_start`` for the task calls at *first* on (`hooks.py`)."""
    hooks = context.hooks
    if hooks is not None:
        for i, call in enumerate(calls):
            if call.target.kind is _TASK:
                hooks.started(first + i, call)


def _ended(context: RunContext, position: int, call: Call[Any], outcome: Any) -> None:
    """A workflow class's hook for the task call at *position* that ended with
    *outcome* (a value, or the Exception it raised)."""
    hooks = context.hooks
    if hooks is None or call.target.kind is not _TASK:
        return
    failed = isinstance(outcome, BaseException)
    if failed and not isinstance(outcome, Exception):
        return  # Cancelled, or the process going down: no outcome of the task's
    hooks.ended(context.replay.recorded(position), position, call, outcome, failed=failed)


def step(context: RunContext, position: int, call: Call[Any]) -> Any:
    """Replay or run *call* at *position*, synchronously; hand its outcome back."""
    hooked = context.hooks is not None  # a workflow class's (asked here: every step)
    if hooked:
        _started(context, position, (call,))
    try:
        value = _settle(context, position, call, sequential=True)
    except Exception as error:
        context.returned()  # a cancellation that came meanwhile outranks the failure
        if hooked:
            _ended(context, position, call, error)
        raise
    context.returned()
    if hooked:
        _ended(context, position, call, value)
    return value


async def step_async(context: RunContext, position: int, call: Call[Any]) -> Any:
    """Replay or run *call* at *position*, awaiting async bodies on this loop; hand
    its outcome back in its turn (`turns.py`), so replay allocates as the first run."""
    turns = context.turns
    turns.enter(position)
    try:
        _started(context, position, (call,))
        try:
            value = await _settle_async(context, position, call)
        except Exception as error:
            await turns.wait(position)
            context.returned()
            _ended(context, position, call, error)
            raise
        await turns.wait(position)
        context.returned()
        _ended(context, position, call, value)
        return value
    finally:
        turns.leave(position)


def _settle(
    context: RunContext, position: int, call: Call[Any], *, sequential: bool = False
) -> Any:
    """The outcome of *call* at *position*: replayed, or run here and recorded
    (*sequential*: alone, not a parallel branch; see `tasks.step`)."""
    found = context.frontier_for(position, call)
    if isinstance(found, Step):
        return context.replayed(found)
    if call.target.kind is _TASK:
        return tasks.run(context, found, sequential=sequential)
    return children.run_child(context, found)


async def _settle_async(context: RunContext, position: int, call: Call[Any]) -> Any:
    """`_settle` in an async workflow: async bodies on this loop, sync ones in a thread."""
    if not call.target.is_async:
        found = context.frontier_for(position, call)
        if isinstance(found, Step):
            return context.replayed(found)
        # A sync body would block the loop: run the whole step in a thread.
        return await asyncio.to_thread(contextvars.Context().run, _settle, context, position, call)
    if call.target.kind is _TASK:
        return await tasks.step_async(context, position, call)
    return await children.step_async(context, position, call)
