"""Runs started by a run: child workflows run inline, and dispatched runs.

A child's id is derived from its parent's id and position (``parent/3``), so replay
finds the same child. What the parent records at that position is the child's
outcome (or, for a dispatch, the child's id): replay never needs the child again.

A child executed inline that has to wait (or that another owner has taken over)
does not hold its parent's thread: the parent suspends too, waiting on
``run:<child>``, and is queued again when the child finishes.
"""

from __future__ import annotations

from typing import Any

from durable.core import faults
from durable.core.attributes import check_attributes
from durable.core.functions import Call
from durable.core.hashing import call_hash
from durable.core.records import Step, StepKind, StepStatus
from durable.core.replay import describe
from durable.core.run_options import (
    check_key,
    check_key_limit,
    check_priority,
    check_queue,
    check_timeout,
)
from durable.errors import (
    Cancelled,
    IdempotencyConflict,
    LeaseLost,
    NondeterminismError,
    PayloadError,
    StorageError,
)

from . import runs
from .context import RunContext
from .pending import Pending
from .stops import RELEASED


async def step_async(context: RunContext, position: int, call: Call[Any]) -> Any:
    """Replay the async child workflow call at *position*, or execute the child."""
    found = context.frontier_for(position, call)
    if isinstance(found, Step):
        return context.replayed(found)
    return await run_child_async(context, found)


def child_id(context: RunContext, position: int) -> str:
    """The id of the child run started at *position*: stable across replays."""
    return f"{context.run_id}/{position}"


def run_child(context: RunContext, pending: Pending) -> Any:
    """Execute a child workflow inline, as its own run, and record its outcome here."""
    context.attempt(pending)
    child = child_id(context, pending.position)
    try:
        value = runs.execute_child(
            context.host, pending.call, run_id=child, parent_id=context.run_id, queue=context.queue
        )
    except (Exception, Cancelled) as error:
        _child_failed(context, pending, error)
        raise
    if value is RELEASED:
        raise context.suspend(None, f"run:{child}")
    return context.succeeded(pending, value)


async def run_child_async(context: RunContext, pending: Pending) -> Any:
    """`run_child` for async workflows."""
    context.attempt(pending)
    child = child_id(context, pending.position)
    try:
        value = await runs.execute_child_async(
            context.host, pending.call, run_id=child, parent_id=context.run_id, queue=context.queue
        )
    except (Exception, Cancelled) as error:
        _child_failed(context, pending, error)
        raise
    if value is RELEASED:
        raise context.suspend(None, f"run:{child}")
    return context.succeeded(pending, value)


def _child_failed(context: RunContext, pending: Pending, error: BaseException) -> None:
    if isinstance(error, NondeterminismError | PayloadError):
        raise context.poison(error) from None  # the child is stuck; so is its parent
    if isinstance(error, StorageError | LeaseLost):
        raise context.poison(error) from None  # the database failed, not the child
    if isinstance(error, IdempotencyConflict):
        if _foreign(context, pending):
            context.failed(pending, error)  # not a change of code: a run in the way
            return
        raise _changed_under(context, pending) from None
    if isinstance(error, Cancelled):
        context.interrupts.caught(error)  # a Cancelled reached this workflow: that was it
    context.failed(pending, error)


def _foreign(context: RunContext, pending: Pending) -> bool:
    """Whether the run at the child's id is not this run's child (see `runs.create`)."""
    found = context.host.backend.get_run(child_id(context, pending.position))
    return found is not None and found.parent_id != context.run_id


def _changed_under(context: RunContext, pending: Pending) -> BaseException:
    """The child exists with other arguments: the parent's code changed under it."""
    child = context.host.backend.get_run(child_id(context, pending.position))
    recorded = Step(
        run_id=context.run_id,
        position=pending.position,
        kind=pending.kind or pending.call.target.kind,
        name=child.workflow if child else "?",
        call_hash=child.call_hash if child else "?",
        status=StepStatus.RETRYING,
    )
    current = describe(recorded.kind, pending.call.target.name, pending.digest)
    return context.poison(context.replay.divergence(pending.position, recorded, current))


def dispatch(
    context: RunContext,
    call: Call[Any],
    *,
    queue: str = "default",
    priority: int = 0,
    timeout: object = None,
    key: str | None = None,
    key_concurrency: int | None = None,
    debounce: object = None,
    attributes: object = None,
) -> str:
    """Start *call* as a queued child run; record and return its id.

    *timeout*, *key*, *key_concurrency* and *attributes* are set on the child when it
    is created; they are not part of the recorded call (changing them does not change
    which call this is).

    Raises:
        TypeError, ValueError: *queue*, *priority* or *timeout* is not one a run can
            have; nothing was recorded.
    """
    check_queue(queue)
    check_priority(priority)
    check_timeout(timeout)
    if debounce is not None:
        raise TypeError(
            "debounce= coalesces dispatches from application code; inside a workflow each "
            "dispatch is its own recorded child. Dispatch the debounced run from a task."
        )
    check_key(key)
    check_key_limit(key_concurrency, key)
    if attributes is not None:
        check_attributes(attributes, limit=context.host.max_attributes)
    position = context.allocate()
    target = call.target
    digest = call_hash(
        StepKind.DISPATCH,
        target.name,
        {"arguments": dict(call.arguments), "queue": queue, "priority": priority},
    )
    recorded = context.decide(position, StepKind.DISPATCH, target.name, digest)
    if recorded is not None:
        run_id: str = context.replayed(recorded)
        return run_id
    pending = Pending(position, call, digest, None, kind=StepKind.DISPATCH)
    run_id = child_id(context, position)
    faults.hit("before_checkpoint", f"dispatch:{target.name}")
    try:
        runs.create(
            context.host,
            call,
            run_id,
            context.run_id,
            owner=None,
            queue=queue,
            priority=priority,
            timeout=timeout,
            key=key,
            key_concurrency=key_concurrency,
            attributes=attributes,
        )
    except IdempotencyConflict as error:
        if _foreign(context, pending):
            context.failed(pending, error)
            raise
        raise _changed_under(context, pending) from None
    except StorageError as error:
        # Not the workflow's failure: the database is. Let go; a replay dispatches again
        # (idempotently: the child's id is fixed by this position).
        raise context.poison(error) from None
    return context.succeeded(pending, run_id)  # type: ignore[no-any-return]
