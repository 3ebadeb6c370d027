"""One execution of a run this process owns: call the function, then record the outcome.

The run's outcome is written exactly once, fenced by the epoch: COMPLETED with its
result, FAILED with its exception, CANCELLED, or BLOCKED when the code diverged from
the history. An execution that loses its lease, or whose worker is draining, writes
nothing more; the run's new owner (or a waiting caller) takes it from there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._context import current
from ._decorators import Call, Durable, Task
from ._records import Run, RunStatus, Step
from ._runner import Abandoned, RunContext, run_coroutine
from .errors import Cancelled, LeaseLost, NondeterminismError

if TYPE_CHECKING:
    from ._engine import Engine

log = logging.getLogger("durable")


class Released:
    """The outcome of an execution that handed its run back (draining, or lost lease)."""

    def __repr__(self) -> str:
        return "<released>"


RELEASED: Any = Released()


def _body(context: RunContext, call: Call[Any]) -> Any:
    """Call the workflow function (a task run is one durable call at position 0)."""
    target = call.target
    if isinstance(target, Task):
        position = context.allocate()
        return (
            context.step_async(position, call) if target.is_async else context.step(position, call)
        )
    return target.fn(*call.args, **call.kwargs)


def drive(
    engine: Engine, run: Run, call: Call[Any], history: Sequence[Step], *, await_others: bool
) -> Any:
    """Execute *run* here to its outcome, synchronously.

    Args:
        await_others: if the run moves to another owner midway, wait for its outcome
            (an `execute` caller wants the result); else return RELEASED at once (a
            worker just frees the slot).
    """
    context, token = engine.enter(run, history)
    try:
        value = _body(context, call)
        if asyncio.iscoroutine(value):
            value = run_coroutine(value)
    except BaseException as error:
        # Leave the run first: settling may mean waiting for, or re-claiming, it.
        engine.leave(context, token)
        return settle_error(engine, context, run, call.target, error, await_others=await_others)
    engine.leave(context, token)
    return settle_value(engine, context, run, call.target, value, await_others=await_others)


async def drive_async(engine: Engine, run: Run, call: Call[Any]) -> Any:
    """`drive` for an async workflow created by this caller, on the current loop."""
    context, token = engine.enter(run, ())
    try:
        value = await _body(context, call)
    except BaseException as error:
        engine.leave(context, token)
        return settle_error(engine, context, run, call.target, error, await_others=True)
    engine.leave(context, token)
    return settle_value(engine, context, run, call.target, value, await_others=True)


def settle_value(
    engine: Engine,
    context: RunContext,
    run: Run,
    target: Durable[..., Any],
    value: Any,
    *,
    await_others: bool,
) -> Any:
    """The workflow returned *value*: record it as the outcome (or find out why not)."""
    try:
        context.check()
        context.replay.check_complete()
        output = engine.dump(value, f"the result of run {run.id!r} ({target.name})")
    except BaseException as error:
        return settle_error(engine, context, run, target, error, await_others=await_others)
    if engine.backend.finish_run(run.id, run.epoch, RunStatus.COMPLETED, output=output):
        return value
    return _moved_on(engine, run, target, await_others)


def settle_error(
    engine: Engine,
    context: RunContext,
    run: Run,
    target: Durable[..., Any],
    error: BaseException,
    *,
    await_others: bool,
) -> Any:
    """The workflow raised *error*: record the outcome it means, then raise or return it."""
    fatal = context.fatal
    if fatal is None and isinstance(error, Exception | Cancelled):
        try:
            context.replay.check_complete()  # ending early is a divergence too
        except NondeterminismError as diverged:
            fatal = diverged
    abandoned = fatal if isinstance(fatal, Abandoned) else error
    if isinstance(abandoned, Abandoned):
        cause = abandoned.cause
        if isinstance(cause, LeaseLost):
            log.info("run %s: lease lost to another owner", run.id)
            return _moved_on(engine, run, target, await_others)
        engine.release_quietly(run)
        if cause is None:
            return RELEASED  # draining for shutdown: another worker continues it
        raise cause from None
    if isinstance(fatal, NondeterminismError):
        engine.backend.finish_run(
            run.id, run.epoch, RunStatus.BLOCKED, error=engine.dump_error(fatal)
        )
        raise fatal from None
    if fatal is not None:
        error = fatal
    if isinstance(error, Cancelled):
        status = RunStatus.CANCELLED
    elif isinstance(error, Exception):
        status = RunStatus.FAILED
    else:
        # KeyboardInterrupt, SystemExit...: not the workflow's outcome. Let go of the run
        # so that another process (or a later call) resumes it at once.
        engine.release_quietly(run)
        raise error
    if engine.backend.finish_run(run.id, run.epoch, status, error=engine.dump_error(error)):
        raise error
    return _moved_on(engine, run, target, await_others)


def _moved_on(engine: Engine, run: Run, target: Durable[..., Any], await_others: bool) -> Any:
    """Our outcome was fenced off: the run has a newer owner, or finished meanwhile."""
    if not await_others:
        return RELEASED
    return engine.join(engine.reread(run.id), target)


def current_run() -> RunContext | None:
    """The run executing in this context, if any."""
    context = current.get()
    return context if isinstance(context, RunContext) else None
