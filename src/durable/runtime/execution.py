"""One execution of a run this process owns: call the function, then record the outcome.

The run's outcome is written exactly once, fenced by the epoch: COMPLETED with its
result, FAILED with its exception, CANCELLED, or BLOCKED when the code diverged from
the history. An execution can also stop without an outcome, returning `RELEASED`:
the run waits (it is suspended until its wait is over), another owner took it over,
or its worker is draining; the run goes on there or later. Callers that want the
outcome anyway (`Engine.execute_call`) then join the run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from durable.api.decorators import Call, Durable, Task
from durable.core import faults as _faults
from durable.core.records import Run, RunStatus, Step
from durable.errors import Cancelled, LeaseLost, NondeterminismError, StorageError

from .runner import Abandoned, RunContext, Suspend, run_coroutine
from .scope import RELEASED, current

if TYPE_CHECKING:
    from .engine import Engine

log = logging.getLogger("durable")

__all__ = ["RELEASED", "current_run", "drive", "drive_async"]


def _body(context: RunContext, call: Call[Any]) -> Any:
    """Call the workflow function (a task run is one durable call at position 0)."""
    target = call.target
    if isinstance(target, Task):
        position = context.allocate()
        return (
            context.step_async(position, call) if target.is_async else context.step(position, call)
        )
    return target.fn(*call.args, **call.kwargs)


def drive(engine: Engine, run: Run, call: Call[Any], history: Sequence[Step]) -> Any:
    """Execute *run* here until it ends (its result, or its error raised) or stops
    without an outcome (`RELEASED`)."""
    context, token = engine.enter(run, history)
    try:
        value = _body(context, call)
        if asyncio.iscoroutine(value):
            value = run_coroutine(value)
    except BaseException as error:
        # Leave the run first: settling may mean waiting for, or re-claiming, it.
        engine.leave(context, token)
        return settle_error(engine, context, run, error)
    engine.leave(context, token)
    return settle_value(engine, context, run, call.target, value)


async def drive_async(engine: Engine, run: Run, call: Call[Any]) -> Any:
    """`drive` for an async workflow created by this caller, on the current loop."""
    context, token = engine.enter(run, ())
    try:
        value = await _body(context, call)
    except BaseException as error:
        engine.leave(context, token)
        return settle_error(engine, context, run, error)
    engine.leave(context, token)
    return settle_value(engine, context, run, call.target, value)


def settle_value(
    engine: Engine, context: RunContext, run: Run, target: Durable[..., Any], value: Any
) -> Any:
    """The workflow returned *value*: record it as the outcome (or find out why not)."""
    try:
        context.check()
        context.replay.check_complete()
        output = engine.dump(value, f"the result of run {run.id!r} ({target.name})")
    except BaseException as error:
        return settle_error(engine, context, run, error)
    _faults.hit("before_complete", f"{target.kind.value}:{target.name}")
    if engine.backend.finish_run(run.id, run.epoch, RunStatus.COMPLETED, output=output):
        return value
    return RELEASED  # fenced off: the run has a newer owner, or finished meanwhile


def settle_error(engine: Engine, context: RunContext, run: Run, error: BaseException) -> Any:
    """The workflow raised *error*: record the outcome it means, then raise or return it."""
    fatal = context.fatal
    if fatal is None and isinstance(error, Exception | Cancelled):
        try:
            context.replay.check_complete()  # ending early is a divergence too
        except NondeterminismError as diverged:
            fatal = diverged
    wait = fatal if fatal is not None else error
    if isinstance(wait, Suspend):
        return _suspend(engine, run, wait)
    stop = fatal if isinstance(fatal, Abandoned) else error
    if isinstance(stop, Abandoned):
        cause = stop.cause
        if isinstance(cause, LeaseLost):
            log.info("run %s: lease lost to another owner", run.id)
            return RELEASED
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
    return RELEASED


def _suspend(engine: Engine, run: Run, wait: Suspend) -> Any:
    """Store the run as waiting (or queued, if its wait is already over)."""
    try:
        status = engine.backend.suspend_run(
            run.id, run.epoch, wake_at=wait.wake_at, waiting_on=wait.waiting_on
        )
    except StorageError:
        engine.release_quietly(run)
        raise
    if status is None:
        log.info("run %s: lease lost to another owner", run.id)
    return RELEASED


def current_run() -> RunContext | None:
    """The run executing in this context, if any."""
    context = current.get()
    return context if isinstance(context, RunContext) else None
