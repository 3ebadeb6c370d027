"""`execute` and `gather` (and their async twins): run workflows and tasks durably, now."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar, overload

from durable.core import run_options
from durable.core.functions import Call, Durable
from durable.errors import NotDurableError
from durable.runtime import calls
from durable.runtime.context import RunContext, current
from durable.runtime.defaults import get_engine
from durable.runtime.engine import Engine
from durable.runtime.loops import run_coroutine

T = TypeVar("T")
#: a run's timeout as users give it.
Duration = dt.timedelta | float | None
T1 = TypeVar("T1")
T2 = TypeVar("T2")
T3 = TypeVar("T3")


def _calls(
    verb: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[list[Call[Any]], bool, dict[str, Any]]:
    """Normalize execute's arguments: one durable function with arguments, or calls;
    and the run's options, id and timeout (`run_options.take` refuses a keyword that
    could be either)."""
    options = run_options.take(verb, target, kwargs)
    bound, single = _bound(target, args, kwargs)
    given = ", ".join(f"{name}=" for name in options)
    if options and isinstance(current.get(), RunContext):
        raise TypeError(
            f"{verb}() inside a workflow takes no run options ({given}): a "
            "child's id is derived from its position, and its deadline is its workflow's "
            "@workflow(timeout=...); for another deadline, dispatch(..., timeout=...) the "
            "child and wait() for its handle."
        )
    if options and not single:
        raise TypeError(
            f"{verb}() options ({given}) name one run; they cannot be combined with several calls."
        )
    return bound, single, options


def _bound(
    target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[list[Call[Any]], bool]:
    if isinstance(target, Durable):
        return [target.bind(*args, **kwargs)], True
    if isinstance(target, Call):
        given = [target, *args]
        bad = [c for c in given if not isinstance(c, Call)]
        if bad or kwargs:
            raise TypeError(
                "execute() takes either one workflow or task with its arguments, or several "
                "bound calls (fn.bind(...)) and nothing else."
            )
        return given, len(given) == 1
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
    timeout: Duration = None,
    **kwargs: Any,
) -> T: ...
@overload
def execute(
    target: Durable[..., T],
    /,
    *args: Any,
    id: str | None = None,
    timeout: Duration = None,
    **kwargs: Any,
) -> T: ...
@overload
def execute(
    target: Call[Coroutine[Any, Any, T]], /, *, id: str | None = None, timeout: Duration = None
) -> T: ...
@overload
def execute(target: Call[T], /, *, id: str | None = None, timeout: Duration = None) -> T: ...
@overload
def execute(c1: Call[T1], c2: Call[T2], /) -> tuple[T1, T2]: ...
@overload
def execute(c1: Call[T1], c2: Call[T2], c3: Call[T3], /) -> tuple[T1, T2, T3]: ...
@overload
def execute(c1: Call[Any], c2: Call[Any], /, *calls: Call[Any]) -> tuple[Any, ...]: ...
def execute(target: Any, /, *args: Any, **kwargs: Any) -> Any:
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
        timeout: the run's deadline from now (a timedelta or seconds; application code
            only), instead of its workflow's ``@workflow(timeout=...)``. At the deadline
            the workflow sees `Cancelled` (``timed_out``) at its next durable call, its
            ``finally`` blocks run, and this raises `WorkflowTimeout`.
        **kwargs: the function's keyword arguments.

    ``id`` and ``timeout`` are the run's options; every other keyword goes to the
    function. If the function has a parameter of one of those names, the flat form
    cannot say which is meant and raises TypeError: bind the arguments,
    ``execute(fn.bind(id=...), id="run-1")``.

    Raises:
        TypeError: the arguments do not fit the signature, or a keyword is both a
            parameter of the function and a run option; nothing was written.
        ValueError: *timeout* is not a positive duration; nothing was written.
        WorkflowTimeout: the run reached its deadline.
        SerializationError: an argument cannot be stored; nothing was written.
        IdempotencyConflict: *id* belongs to a run of another call.
        NondeterminismError: the run's history no longer matches the code.
        Exception: whatever the workflow or task raised, of its original type.
    """
    bound, single, options = _calls("execute", target, args, kwargs)
    context = current.get()
    if isinstance(context, RunContext):
        if single:
            result = calls.run_call(context, bound[0])
            return run_coroutine(result) if bound[0].target.is_async else result
        return tuple(calls.parallel(context, bound))
    engine = get_engine()
    if single:
        return engine.execute_call(
            bound[0], run_id=options.get("id"), timeout=options.get("timeout")
        )
    futures = [engine.branches.submit(_top_level(engine, call)) for call in bound]
    return tuple(future.result() for future in futures)


def _top_level(engine: Engine, call: Call[Any]) -> Callable[[], Any]:
    return lambda: engine.execute_call(call)


@overload
async def execute_async(
    target: Durable[..., Coroutine[Any, Any, T]] | Durable[..., Awaitable[T]],
    /,
    *args: Any,
    id: str | None = None,
    timeout: Duration = None,
    **kwargs: Any,
) -> T: ...
@overload
async def execute_async(
    target: Durable[..., T],
    /,
    *args: Any,
    id: str | None = None,
    timeout: Duration = None,
    **kwargs: Any,
) -> T: ...
@overload
async def execute_async(
    target: Call[Coroutine[Any, Any, T]], /, *, id: str | None = None, timeout: Duration = None
) -> T: ...
@overload
async def execute_async(
    target: Call[T], /, *, id: str | None = None, timeout: Duration = None
) -> T: ...
@overload
async def execute_async(c1: Call[T1], c2: Call[T2], /) -> tuple[T1, T2]: ...
@overload
async def execute_async(c1: Call[T1], c2: Call[T2], c3: Call[T3], /) -> tuple[T1, T2, T3]: ...
@overload
async def execute_async(c1: Call[Any], c2: Call[Any], /, *calls: Call[Any]) -> tuple[Any, ...]: ...
async def execute_async(target: Any, /, *args: Any, **kwargs: Any) -> Any:
    """`execute` for async code: awaitable, runs async workflows and tasks on this loop.

    Takes what `execute` takes, ``id=`` and ``timeout=`` included, with the same rule:
    if the function has a parameter of one of those names, say which is meant with
    ``execute_async(fn.bind(id=...), id="run-1")``.
    """
    bound, single, options = _calls("execute_async", target, args, kwargs)
    context = current.get()
    if isinstance(context, RunContext):
        if single:
            return await calls.step_async(context, context.allocate(), bound[0])
        return tuple(await calls.parallel_async(context, bound))
    engine = get_engine()
    if single:
        return await engine.execute_call_async(
            bound[0], run_id=options.get("id"), timeout=options.get("timeout")
        )
    return tuple(await asyncio.gather(*(engine.execute_call_async(c) for c in bound)))


def _group(bound: Iterable[Call[T]]) -> list[Call[T]]:
    try:
        group = None if isinstance(bound, Call | Durable | str | bytes) else list(bound)
    except TypeError:  # not iterable
        group = None
    if group is None or any(not isinstance(c, Call) for c in group):
        raise TypeError(
            "gather() takes one iterable of bound calls: gather(fn.bind(x) for x in xs). "
            "To run one function with its arguments, use execute(fn, *args)."
        )
    return group


def gather(bound: Iterable[Call[T]], /) -> list[T]:
    """Run bound calls concurrently and return their results in order, as a list.

    The form for fan-out whose size is known only at run time: it always returns a
    list, of one result for one call, and ``[]`` for none (which records nothing).
    ``execute(*calls)`` returns a bare value for one call and refuses none. Inside a
    workflow the calls take consecutive positions, as with `execute`; if any fails,
    every call still finishes and the first failure in order is raised.

    Args:
        bound: the calls, each made with ``fn.bind(...)``.

    Raises:
        TypeError: *calls* is not an iterable of bound calls (``fn.bind(...)``).
    """
    group = _group(bound)
    if not group:
        return []
    context = current.get()
    if isinstance(context, RunContext):
        return calls.parallel(context, group)
    engine = get_engine()
    futures = [engine.branches.submit(_top_level(engine, call)) for call in group]
    return [future.result() for future in futures]


async def gather_async(bound: Iterable[Call[T]], /) -> list[T]:
    """`gather` for async code: awaitable, async workflows and tasks on this loop."""
    group = _group(bound)
    if not group:
        return []
    context = current.get()
    if isinstance(context, RunContext):
        return await calls.parallel_async(context, group)
    engine = get_engine()
    return list(await asyncio.gather(*(engine.execute_call_async(c) for c in group)))
