"""Tasks inside a run: call the body, retry it by its policy, record the outcome.

Each failed attempt that will be retried is recorded RETRYING, with the time the next
attempt is due (``wake_at``). A short delay is slept here; a longer one (more than
`Engine.max_inline_wait`) suspends the run, so a task retrying every ten minutes holds
no thread. Either way the attempt count and the due time are in the history, so after
a crash or a suspension the attempts continue where they were, never early.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from contextlib import AbstractContextManager
from typing import Any, NoReturn

from durable.core import faults
from durable.core.functions import Call
from durable.core.records import Step, StepStatus
from durable.errors import Cancelled

from .activity import Activity, TaskScope, hung
from .context import RunContext, current
from .loops import off_loop, run_coroutine
from .observers import Attempt
from .pending import Pending
from .waits import hold


def step(context: RunContext, position: int, call: Call[Any], *, sequential: bool = False) -> Any:
    """Replay the task call at *position*, or run it to its outcome, synchronously.

    *sequential*: the workflow waits for this call alone (not a parallel branch), so
    its result may be written with the next task's start (`RunContext.begin`)."""
    found = context.frontier_for(position, call)
    if isinstance(found, Step):
        return context.replayed(found)
    return run(context, found, sequential=sequential)


async def step_async(context: RunContext, position: int, call: Call[Any]) -> Any:
    """Replay the async task call at *position*, or run it on the current loop."""
    found = context.frontier_for(position, call)
    if isinstance(found, Step):
        return context.replayed(found)
    return await run_async(context, found)


def run(context: RunContext, pending: Pending, *, sequential: bool = False) -> Any:
    """Run the task at *pending* to its outcome, synchronously."""
    task = pending.call.target
    # A result written at once (not with the next start) leaves no running row with a
    # heartbeat deadline behind while the workflow code goes on.
    sequential = sequential and task.limits.heartbeat is None
    while True:
        if pending.hangs_at is not None:  # it may record a timed-out attempt
            _count_hung(context, pending)
        if pending.due is not None:
            until = hold(context, pending.due, pending.position)
            if until is not None:
                raise context.suspend(until, None)
        finished = context.begin(pending)
        if finished is not None:
            return context.replayed(finished)
        activity = _activity(context, pending)
        token = current.set(_scope(context, pending, activity))
        try:
            with _observe(context, pending):
                try:
                    if faults.ARMED:
                        faults.hit("before_task", f"task:{task.name}")
                    if task.is_async:
                        value = run_coroutine(
                            _limited(activity, task.fn(*pending.call.args, **pending.call.kwargs))
                        )
                    else:
                        value = task.fn(*pending.call.args, **pending.call.kwargs)
                    if faults.ARMED:
                        faults.hit("after_task", f"task:{task.name}")
                    late = activity.late()
                    if late is not None:
                        raise late  # a sync body that overran: its result does not count
                except Exception as raised:
                    _raise_late(activity, raised)
        except Exception as error:
            if not _failed_attempt(context, pending, error, activity.details):
                raise
            continue
        except Cancelled as stopped:
            raise _interrupted(context, pending, stopped) from None
        except BaseException as dying:
            # The process is going down (KeyboardInterrupt, SystemExit...): as after a
            # kill, nothing more of this run may be recorded, in parallel branches
            # neither (they would take positions out of their order).
            context.poison(dying)
            raise
        finally:
            current.reset(token)
        return context.succeeded(pending, value, defer=sequential)


async def run_async(context: RunContext, pending: Pending) -> Any:
    """Run the async task at *pending* on the current loop; its writes go off the loop
    when a worker's lane runs it (`loops.off_loop`)."""
    task = pending.call.target
    while True:
        if pending.hangs_at is not None:  # it may record a timed-out attempt
            await off_loop(_count_hung, context, pending)
        if pending.due is not None:
            until = context.interrupts.until(pending.due)
            left = until - context.host.clock.now()
            if 0 < left <= context.host.max_inline_wait:
                await asyncio.sleep(left)
            elif left > 0:
                raise context.suspend(pending.due, None)
            if until < pending.due:  # the run's deadline comes first
                raise context.stop_at(pending.position)
        if context.deferred and not context.turns.alone():
            # Branches run: the last result is written before any of them starts a body
            # (alone, this start carries it, in one commit).
            await off_loop(context.flush)
        finished = await off_loop(context.begin, pending)
        if finished is not None:
            return context.replayed(finished)
        activity = _activity(context, pending)
        token = current.set(_scope(context, pending, activity))
        try:
            with _observe(context, pending):
                try:
                    if faults.ARMED:
                        faults.hit("before_task", f"task:{task.name}")
                    value = await _limited(
                        activity, task.fn(*pending.call.args, **pending.call.kwargs)
                    )
                    if faults.ARMED:
                        faults.hit("after_task", f"task:{task.name}")
                except Exception as raised:
                    _raise_late(activity, raised)
        except Exception as error:
            if not await off_loop(_failed_attempt, context, pending, error, activity.details):
                raise
            continue
        except Cancelled as stopped:
            raise await off_loop(_interrupted, context, pending, stopped) from None
        except BaseException as dying:
            # The process is going down (KeyboardInterrupt, SystemExit...), or the
            # worker cancelled the run to hand it back: as after a kill, nothing more of
            # this run may be recorded, in parallel branches neither (they would take
            # positions out of their order).
            context.poison(dying)
            raise
        finally:
            current.reset(token)
        if context.turns.alone() and task.limits.heartbeat is None:
            # One chain of awaits on a lane: only deterministic workflow code runs before
            # its next write, which carries this result (as `run` defers a sync one).
            return context.succeeded(pending, value, defer=True)
        return await off_loop(context.succeeded, pending, value)


async def _limited(activity: Activity, body: Coroutine[Any, Any, Any]) -> Any:
    """Await an async task body, cancelling it when its attempt must end, or when its
    run is cancelled while it runs (`Activity.interrupt`: `Cancelled` from here on)."""
    remaining = activity.remaining()
    activity.enter_body()
    try:
        if remaining is None:
            return await body
        async with asyncio.timeout(remaining) as limit:
            return await body
    except TimeoutError:
        if limit.expired():
            raise activity.expired() from None
        raise
    except asyncio.CancelledError:
        stopped = activity.interrupted()
        if stopped is None:
            raise
        raise stopped from None
    finally:
        activity.leave_body()


def _raise_late(activity: Activity, raised: Exception) -> NoReturn:
    """Raise what ended an attempt that raised *raised*: an attempt that ended past its
    limit timed out, whatever it raised (raised inside the observers' context, so that
    they see it time out)."""
    late = activity.late()
    if late is None or late is raised:
        raise raised
    raise late from raised


def _observe(context: RunContext, pending: Pending) -> AbstractContextManager[Attempt | None]:
    """The observers' context around the attempt about to run at *pending*."""
    return context.host.observers.attempt(
        context.run_id, context.workflow, pending.position, pending.call.target.name,
        pending.attempt,
    )  # fmt: skip


def _interrupted(context: RunContext, pending: Pending, error: Cancelled) -> Cancelled:
    """The task body at *pending* stopped at its run's cancellation or deadline (its
    heartbeat saw it, or its async body was cancelled): that is the position's outcome,
    so replay raises it there again."""
    cancelled = Cancelled(context.run_id, timed_out=error.timed_out)
    context.interrupts.caught(cancelled)
    context.failed(pending, cancelled)
    return cancelled


def _activity(context: RunContext, pending: Pending) -> Activity:
    """The attempt about to start at *pending*, bounded by the run's deadline too."""
    return Activity(
        context.host, context.run_id, context.epoch, pending, context.interrupts.cap(None)
    )


def _scope(context: RunContext, pending: Pending, activity: Activity) -> TaskScope:
    """What a task body sees of where it runs (`task_key()`, `durable.info()`)."""
    return TaskScope(
        context.run_id, pending.position, pending.attempt, pending.call.target.name,
        context.workflow, context.parent_id, activity, context.host,
    )  # fmt: skip


def _count_hung(context: RunContext, pending: Pending) -> None:
    """An attempt found running past its heartbeat deadline (its worker hung or died,
    and this one took the run over) is a timed-out attempt: recorded so, and retried
    by the task's policy; if none is left, its `TaskTimeout` is raised."""
    hangs_at = pending.hangs_at
    if hangs_at is None or context.host.clock.now() < hangs_at:
        return
    pending.hangs_at = None
    pending.next_attempt()
    error = hung(pending)
    if not _failed_attempt(context, pending, error, pending.details):
        raise error


def _failed_attempt(
    context: RunContext, pending: Pending, error: Exception, details: bytes | None
) -> bool:
    """Record a failed attempt, with when the next one is due; False to give up (also
    once the deadline of all attempts has passed)."""
    task = pending.call.target
    pending.details = details
    retry = task.retry.should_retry(error, pending.attempt) and not _past_deadline(context, pending)
    if retry:
        pending.due = context.host.clock.now() + task.retry.delay(pending.attempt)
    step = context.step_for(
        pending,
        StepStatus.RETRYING if retry else StepStatus.FAILED,
        error=context.host.dump_error(error),
        wake_at=pending.due if retry else None,
    )
    context.record(step)
    return retry


def _past_deadline(context: RunContext, pending: Pending) -> bool:
    """Whether the deadline of all the task's attempts has passed."""
    deadline = pending.call.target.limits.deadline
    if deadline is None or pending.started is None:
        return False
    return context.host.clock.now() >= pending.started + deadline
