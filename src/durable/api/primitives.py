"""The public verbs: execute, the recorded helpers, task_key, recover."""

from __future__ import annotations

import datetime as dt
import random as _random
import uuid as _uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar, overload

from durable.core.records import StepKind
from durable.errors import DurableError, NotDurableError
from durable.runtime.defaults import configured_clock, get_engine
from durable.runtime.engine import Engine
from durable.runtime.runner import RunContext
from durable.runtime.scope import TaskScope, current

from .decorators import Call, Durable

T = TypeVar("T")
T1 = TypeVar("T1")
T2 = TypeVar("T2")
T3 = TypeVar("T3")


def _calls(
    target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[list[Call[Any]], bool]:
    """Normalize execute's arguments: one durable function with arguments, or calls."""
    if isinstance(target, Durable):
        return [target.bind(*args, **kwargs)], True
    if isinstance(target, Call):
        calls = [target, *args]
        bad = [c for c in calls if not isinstance(c, Call)]
        if bad or kwargs:
            raise TypeError(
                "execute() takes either one workflow or task with its arguments, or several "
                "bound calls (fn.bind(...)) and nothing else."
            )
        return calls, len(calls) == 1
    name = getattr(target, "__qualname__", repr(target))
    raise NotDurableError(
        f"{name} is not a workflow or task. Decorate it with @durable.workflow or "
        "@durable.task, or pass bound calls made with fn.bind(...)."
    )


@overload
def execute(
    target: Durable[..., Coroutine[Any, Any, T]] | Durable[..., Awaitable[T]],
    /,
    *args: Any,
    id: str | None = None,
    **kwargs: Any,
) -> T: ...
@overload
def execute(target: Durable[..., T], /, *args: Any, id: str | None = None, **kwargs: Any) -> T: ...
@overload
def execute(target: Call[Coroutine[Any, Any, T]], /, *, id: str | None = None) -> T: ...
@overload
def execute(target: Call[T], /, *, id: str | None = None) -> T: ...
@overload
def execute(c1: Call[T1], c2: Call[T2], /) -> tuple[T1, T2]: ...
@overload
def execute(c1: Call[T1], c2: Call[T2], c3: Call[T3], /) -> tuple[T1, T2, T3]: ...
@overload
def execute(c1: Call[Any], c2: Call[Any], /, *calls: Call[Any]) -> tuple[Any, ...]: ...
def execute(target: Any, /, *args: Any, id: str | None = None, **kwargs: Any) -> Any:
    """Run a workflow or task durably now and return its result.

    ``execute(fn, *args, **kwargs)`` runs one call; ``execute(f.bind(...), g.bind(...))``
    runs several concurrently (threads for sync ones, an event loop for async ones) and
    returns their results in order.

    In application code each call becomes a run, stored before it starts, so it can be
    resumed if this process dies. Inside a workflow, the calls are recorded at the next
    positions of the current run, and workflows become child runs.

    Args:
        target: a workflow or task, or the first bound call.
        *args: the function's arguments, or further bound calls.
        id: the run's id (application code only). Executing again with the same id and
            the same call returns the stored result, or resumes the unfinished run.
        **kwargs: the function's keyword arguments.

    Raises:
        TypeError: the arguments do not fit the signature; nothing was written.
        SerializationError: an argument cannot be stored; nothing was written.
        IdempotencyConflict: *id* belongs to a run of another call.
        NondeterminismError: the run's history no longer matches the code.
        Exception: whatever the workflow or task raised, of its original type.
    """
    calls, single = _calls(target, args, kwargs)
    context = current.get()
    if isinstance(context, RunContext):
        if id is not None:
            raise TypeError(
                "id= is for application code; inside a workflow, child ids are derived."
            )
        if single:
            from durable.runtime.runner import run_coroutine

            result = context.run_call(calls[0])
            return run_coroutine(result) if calls[0].target.is_async else result
        return tuple(context.parallel(calls))
    engine = get_engine()
    if single:
        return engine.execute_call(calls[0], run_id=id)
    if id is not None:
        raise TypeError("id= names one run; it cannot be combined with several calls.")
    futures = [engine.branches.submit(_top_level(engine, call)) for call in calls]
    return tuple(future.result() for future in futures)


def _top_level(engine: Engine, call: Call[Any]) -> Callable[[], Any]:
    return lambda: engine.execute_call(call)


async def execute_async(target: Any, /, *args: Any, id: str | None = None, **kwargs: Any) -> Any:
    """`execute` for async code: awaitable, runs async workflows and tasks on this loop."""
    import asyncio

    calls, single = _calls(target, args, kwargs)
    context = current.get()
    if isinstance(context, RunContext):
        if id is not None:
            raise TypeError(
                "id= is for application code; inside a workflow, child ids are derived."
            )
        if single:
            return await context.step_async(context.allocate(), calls[0])
        return tuple(await context.parallel_async(calls))
    engine = get_engine()
    if single:
        return await engine.execute_call_async(calls[0], run_id=id)
    if id is not None:
        raise TypeError("id= names one run; it cannot be combined with several calls.")
    return tuple(await asyncio.gather(*(engine.execute_call_async(c) for c in calls)))


def _recorded(kind: StepKind, name: str, produce: Callable[[], T]) -> T:
    context = current.get()
    if isinstance(context, RunContext):
        result: T = context.record_value(kind, name, produce)
        return result
    return produce()


def now() -> dt.datetime:
    """The current time (UTC). Inside a workflow it is recorded, so replay sees the same.

    Time comes from the engine's clock: in a `durable.testing.DurableEnv`, virtual time,
    task bodies and test code included.
    """
    return _recorded(
        StepKind.NOW,
        "durable.now",
        lambda: dt.datetime.fromtimestamp(_clock_now(), tz=dt.UTC),
    )


def _clock_now() -> float:
    context = current.get()
    if isinstance(context, RunContext):
        return context.engine.clock.now()
    return configured_clock().now()  # a task body or app code: the default engine's


def uuid4() -> _uuid.UUID:
    """A random UUID. Inside a workflow it is recorded, so replay sees the same."""
    return _recorded(StepKind.UUID, "durable.uuid4", _uuid.uuid4)


def random() -> float:
    """A random float in [0, 1). Inside a workflow it is recorded, so replay sees the same."""
    return _recorded(StepKind.RANDOM, "durable.random", _random.random)


def task_key() -> str:
    """A stable key for the task body running now: ``"run_id:position"``.

    It is the same on every attempt and every replay, which makes it an idempotency key
    for external side effects (a payment provider's idempotency header, a unique row).

    Raises:
        DurableError: called outside a task body running inside a workflow.
    """
    context = current.get()
    if isinstance(context, TaskScope):
        return f"{context.run_id}:{context.position}"
    raise DurableError(
        "task_key() names a task's position in a run; call it inside a task body that a "
        "workflow is running."
    )


def recover(*, wait: bool = True) -> list[str]:
    """Resume every run on the default database whose owner is gone (see `Engine.recover`)."""
    return get_engine().recover(wait=wait)
