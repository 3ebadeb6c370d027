"""One execution of a run this process owns: call the function, then record the outcome.

The run's outcome is written exactly once, fenced by the epoch: COMPLETED with its
result, FAILED with its exception, CANCELLED, TIMED_OUT once its deadline was delivered
(whatever its code did after), or BLOCKED when the code diverged from the history. An
execution can also stop without an outcome, returning `RELEASED`:
the run waits (it is suspended until its wait is over), it was asked to pause (it is
PAUSED until resumed), another owner took it over, or its worker is draining; the run
goes on there or later. Callers that want the outcome anyway (`Engine.execute_call`)
then join the run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from contextvars import Token
from typing import Any

from durable.core import faults
from durable.core.functions import Call, Durable
from durable.core.records import Run, RunStatus, Step, StepKind
from durable.errors import (
    Cancelled,
    DurableError,
    InvalidValue,
    LeaseLost,
    NondeterminismError,
    SerializationError,
    StorageError,
    WorkflowTimeout,
)

from . import continuing, observers, tasks
from .activity import TaskScope
from .context import RunContext, current
from .host import Host
from .loops import off_loop, run_coroutine
from .observers import Execution
from .stops import RELEASED, Abandoned, ContinueAsNew, Park, Suspend

log = logging.getLogger("durable")

Entered = Token[RunContext | TaskScope | None]


def enter(host: Host, run: Run, history: Sequence[Step]) -> tuple[RunContext, Entered]:
    """Start executing *run* here: keep its lease alive and make it the current context."""
    context = RunContext(host, run, history)
    host.leases.enter(run.id, run.epoch)
    return context, current.set(context)


def leave(host: Host, context: RunContext, token: Entered) -> None:
    """Stop executing a run here."""
    current.reset(token)
    host.leases.leave(context.run_id)


def _body(context: RunContext, call: Call[Any]) -> Any:
    """Call the workflow function (a task run is one durable call at position 0)."""
    target = call.target
    if target.kind is StepKind.TASK:
        if target.is_async:
            return tasks.step_async(context, context.allocate(), call)
        return tasks.step(context, context.allocate(task=True), call, sequential=True)
    return target.fn(*call.args, **call.kwargs)


def drive(host: Host, run: Run, call: Call[Any], history: Sequence[Step]) -> Any:
    """Execute *run* here until it ends (its result, or its error raised) or stops
    without an outcome (`RELEASED`)."""
    with host.observers.execution(run, resumed=bool(history)) as seen:
        context, token = enter(host, run, history)
        try:
            _expired(context, run, history)
            value = _body(context, call)
            if asyncio.iscoroutine(value):
                value = run_coroutine(value)
        except BaseException as error:
            # Leave the run first: settling may mean waiting for, or re-claiming, it.
            leave(host, context, token)
            return _observed(seen, context, settle_error(host, context, run, error, call.target))
        leave(host, context, token)
        return _observed(seen, context, settle_value(host, context, run, call.target, value))


async def drive_async(host: Host, run: Run, call: Call[Any], history: Sequence[Step] = ()) -> Any:
    """`drive` for an async workflow, on the current loop: one created by this caller
    (no history), or one a worker's lane executes (its outcome written off the loop)."""
    with host.observers.execution(run, resumed=bool(history)) as seen:
        context, token = enter(host, run, history)
        try:
            _expired(context, run, history)
            value = await _body(context, call)
        except BaseException as error:
            leave(host, context, token)
            settled = off_loop(settle_error, host, context, run, error, call.target)
            return _observed(seen, context, await settled)
        leave(host, context, token)
        settled = off_loop(settle_value, host, context, run, call.target, value)
        return _observed(seen, context, await settled)


def _observed(seen: Execution | None, context: RunContext, value: Any) -> Any:
    """*value*, having told the observers of an execution that stopped without an
    outcome (or handed over to its successor) how it ended."""
    if value is RELEASED:
        observers.ended(
            seen, "continued" if isinstance(context.fatal, ContinueAsNew) else "released"
        )
    return value


def _expired(context: RunContext, run: Run, history: Sequence[Step]) -> None:
    """A run whose deadline passed before it recorded anything is stopped before its
    first line, TIMED_OUT, in two cases. At its first execution (it stayed queued that
    long), unless a cancel request came first: it has nothing to clean up. And when an
    earlier execution stopped it so and died before the outcome was recorded: the cancel
    request that execution left (the hand-over sets one on the run to stop its
    children) must not turn it CANCELLED. Otherwise the run may have children or effects
    to clean up: it runs, and the deadline reaches its code at its first durable call."""
    interrupts = context.interrupts
    if history or not interrupts.due() or interrupts.deadline is None:
        return
    if context.host.clock.now() < interrupts.deadline:
        return  # due: a cancel request, delivered at the first durable call
    if (run.epoch == 1) != interrupts.requested:
        raise interrupts.raised(timed_out=True)


def settle_value(
    host: Host, context: RunContext, run: Run, target: Durable[..., Any], value: Any
) -> Any:
    """The workflow returned *value*: record it as the outcome (or find out why not)."""
    try:
        context.check()
        context.replay.check_complete()
        output = host.dump(value, f"the result of run {run.id!r} ({target.name})")
        state = None if context.properties is None else context.properties.changed()
        last = context.take_deferred()  # the last task's result: in the outcome's commit
    except BaseException as error:
        return settle_error(host, context, run, error, target)
    if context.interrupts.timed_out:
        return _time_out(host, run, last, state)
    faults.hit("before_complete", f"{target.kind.value}:{target.name}")
    if host.backend.finish_run(
        run.id, run.epoch, RunStatus.COMPLETED, output=output, last_step=last, state=state
    ):
        return value
    log.info("run %s: lease lost to another owner (or the run finished meanwhile)", run.id)
    return RELEASED  # fenced off: the run has a newer owner, or finished meanwhile


def settle_error(
    host: Host, context: RunContext, run: Run, error: BaseException, target: Durable[..., Any]
) -> Any:
    """The workflow raised *error*: record the outcome it means, then raise or return it.
    A divergence blocks the run, or fails it if *target* says ``on_divergence="fail"``."""
    if isinstance(context.fatal, ContinueAsNew):
        return _continue(host, context, run, context.fatal, target)
    try:
        context.flush()  # the last task's result, before the run's outcome or its wait
    except BaseException as lost:  # LeaseLost or StorageError, as Abandoned (poisoned)
        error = lost
    fatal = context.fatal
    if fatal is None and isinstance(error, Exception | Cancelled):
        try:
            context.replay.check_complete()  # ending early is a divergence too
        except NondeterminismError as diverged:
            fatal = diverged
    wait = fatal if fatal is not None else error
    if isinstance(wait, Suspend):
        return _suspend(host, run, wait)
    if isinstance(wait, Park):
        return _park(host, run)
    stop = fatal if isinstance(fatal, Abandoned) else error
    if isinstance(stop, Abandoned):
        cause = stop.cause
        if isinstance(cause, LeaseLost):
            log.info("run %s: lease lost to another owner", run.id)
            return RELEASED
        host.release_quietly(run)
        if cause is None:
            return RELEASED  # draining for shutdown: another worker continues it
        raise cause from None
    if isinstance(fatal, NondeterminismError):
        ends = RunStatus.FAILED if target.on_divergence == "fail" else RunStatus.BLOCKED
        host.backend.finish_run(run.id, run.epoch, ends, error=host.dump_error(fatal))
        raise fatal from None
    if fatal is not None:
        error = fatal
    state = _last_state(context)
    if context.interrupts.timed_out and isinstance(error, Exception | Cancelled):
        return _time_out(host, run, None, state)
    if isinstance(error, Cancelled):
        status = RunStatus.CANCELLED
    elif isinstance(error, Exception):
        status = RunStatus.FAILED
    else:
        # KeyboardInterrupt, SystemExit...: not the workflow's outcome. Let go of the run
        # so that another process (or a later call) resumes it at once.
        host.release_quietly(run)
        raise error
    if host.backend.finish_run(
        run.id, run.epoch, status, error=host.dump_error(error), state=state
    ):
        raise error
    return RELEASED


def _continue(
    host: Host, context: RunContext, run: Run, handover: ContinueAsNew, target: Durable[..., Any]
) -> Any:
    """Hand the run over to its successor: CONTINUED, with its last task's result and
    properties, and the successor queued, in one commit (or find out why not)."""
    try:
        context.replay.check_complete()  # ending early is a divergence, as for a return
        state = None if context.properties is None else context.properties.changed()
        last = context.take_deferred()
    except BaseException as error:
        context.fatal = error if isinstance(error, NondeterminismError | Abandoned) else None
        return settle_error(host, context, run, error, target)
    if context.interrupts.timed_out:
        return _time_out(host, run, last, state)
    faults.hit("before_continue", f"workflow:{run.workflow}")
    try:
        continued = host.backend.continue_run(
            run.id, run.epoch, continuing.successor(run, handover), last_step=last, state=state
        )
    except StorageError:
        host.release_quietly(run)
        raise
    except DurableError as refused:  # its successor's id is taken: the run cannot go on
        if host.backend.finish_run(
            run.id, run.epoch, RunStatus.FAILED, error=host.dump_error(refused), last_step=last
        ):
            raise refused from None
        return RELEASED
    if not continued:
        log.info("run %s: lease lost to another owner (or the run finished meanwhile)", run.id)
        return RELEASED
    faults.hit("after_continue", f"workflow:{run.workflow}")
    return RELEASED


def _last_state(context: RunContext) -> bytes | None:
    """The properties' snapshot a failing run ends with, if they changed and can be
    stored (if not, the run's own error is what it ends with)."""
    try:
        return None if context.properties is None else context.properties.changed()
    except SerializationError:
        return None


def _time_out(host: Host, run: Run, last: Step | None, state: bytes | None) -> Any:
    """End a run whose deadline was delivered: TIMED_OUT with a `WorkflowTimeout`, its
    unfinished children cancelled first (a crash in between replays to the same end)."""
    # The database's clock read twice in one insert (PostgreSQL's clock_timestamp()):
    # microseconds apart, so the timeout as given is this to the millisecond.
    limit = round((run.deadline_at or run.created_at) - run.created_at, 3)
    error = WorkflowTimeout(
        f"Run {run.id!r} ({run.workflow}) reached its deadline, {limit:g} s after it was "
        "created, and was stopped. Give it a longer timeout, or make it faster.",
        run_id=run.id,
        timeout=limit,
    )
    try:
        host.backend.cancel_run(run.id)  # its descendants; the run itself ends just below
    except StorageError:
        host.release_quietly(run)
        raise
    faults.hit("before_complete", f"workflow:{run.workflow}")
    if host.backend.finish_run(
        run.id,
        run.epoch,
        RunStatus.TIMED_OUT,
        error=host.dump_error(error),
        last_step=last,
        state=state,
    ):
        raise error
    return RELEASED


def _park(host: Host, run: Run) -> Any:
    """Store the run as paused, as it was asked (or queued, if it was resumed since)."""
    try:
        status = host.backend.park_run(run.id, run.epoch)
    except StorageError:
        host.release_quietly(run)
        raise
    if status is None:
        log.info("run %s: lease lost to another owner", run.id)
    return RELEASED


def _suspend(host: Host, run: Run, wait: Suspend) -> Any:
    """Store the run as waiting (or queued, if its wait is already over)."""
    try:
        status = host.backend.suspend_run(
            run.id, run.epoch, wake_at=wait.wake_at, waiting_on=wait.waiting_on
        )
    except StorageError:
        host.release_quietly(run)
        raise
    except InvalidValue as refused:
        # What the run waits on cannot be stored: retrying cannot help, so it fails.
        if host.backend.finish_run(
            run.id, run.epoch, RunStatus.FAILED, error=host.dump_error(refused)
        ):
            raise
        return RELEASED
    if status is None:
        log.info("run %s: lease lost to another owner", run.id)
    return RELEASED
