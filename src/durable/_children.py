"""Runs started by a run: child workflows run inline, dispatched runs, and joins.

A child's id is derived from its parent's id and position (``parent/3``), so replay
finds the same child. What the parent records at that position is the child's
outcome (or, for a dispatch, the child's id): replay never needs the child again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._decorators import Call
from ._hashing import call_hash
from ._records import RunStatus, Step, StepKind, StepStatus
from ._replay import describe
from .errors import Cancelled, IdempotencyConflict, NondeterminismError, PayloadError

if TYPE_CHECKING:
    from ._runner import Pending, RunContext

JOIN = "durable.wait"


def child_id(context: RunContext, position: int) -> str:
    """The id of the child run started at *position*: stable across replays."""
    return f"{context.run_id}/{position}"


def run_child(context: RunContext, pending: Pending) -> Any:
    """Execute a child workflow inline, as its own run, and record its outcome here."""
    context.attempt(pending)
    try:
        value = context.engine.execute_call(
            pending.call, run_id=child_id(context, pending.position), parent_id=context.run_id
        )
    except (Exception, Cancelled) as error:
        _child_failed(context, pending, error)
        raise
    return context.succeeded(pending, value)


async def run_child_async(context: RunContext, pending: Pending) -> Any:
    """`run_child` for async workflows."""
    context.attempt(pending)
    try:
        value = await context.engine.execute_call_async(
            pending.call, run_id=child_id(context, pending.position), parent_id=context.run_id
        )
    except (Exception, Cancelled) as error:
        _child_failed(context, pending, error)
        raise
    return context.succeeded(pending, value)


def _child_failed(context: RunContext, pending: Pending, error: BaseException) -> None:
    if isinstance(error, NondeterminismError | PayloadError):
        raise context.poison(error) from None  # the child is stuck; so is its parent
    if isinstance(error, IdempotencyConflict):
        raise _changed_under(context, pending) from None
    if isinstance(error, Cancelled):
        context.cancel_delivered = True  # a Cancelled reached this workflow: that was it
    context.failed(pending, error)


def _changed_under(context: RunContext, pending: Pending) -> BaseException:
    """The child exists with other arguments: the parent's code changed under it."""
    child = context.engine.backend.get_run(child_id(context, pending.position))
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


def dispatch(context: RunContext, call: Call[Any], *, queue: str, priority: int) -> str:
    """Start *call* as a queued child run; record and return its id."""
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
    pending = context.pending(position, call, digest, kind=StepKind.DISPATCH)
    run_id = child_id(context, position)
    try:
        context.engine.dispatch_call(
            call, run_id=run_id, queue=queue, priority=priority, parent_id=context.run_id
        )
    except IdempotencyConflict:
        raise _changed_under(context, pending) from None
    return context.succeeded(pending, run_id)  # type: ignore[no-any-return]


def join(context: RunContext, run_id: str) -> Any:
    """Wait for run *run_id* to finish; record its outcome here and return (or raise) it."""
    position = context.allocate()
    digest = call_hash(StepKind.JOIN, JOIN, {"run": run_id})
    recorded = context.decide(position, StepKind.JOIN, JOIN, digest)
    if recorded is not None and recorded.status.finished:
        return context.replayed(recorded)
    started = context.engine.clock.now()
    context.progressed()  # waiting is idle: it cannot be what kills this process
    run = context.engine.wait_for_run(run_id, context=context)
    completed = run.status is RunStatus.COMPLETED
    step = Step(
        run_id=context.run_id,
        position=position,
        kind=StepKind.JOIN,
        name=JOIN,
        call_hash=digest,
        status=StepStatus.COMPLETED if completed else StepStatus.FAILED,
        input=context.engine.preview({"run": run_id}),
        output=run.output if completed else None,
        error=None if completed else context.engine.error_of(run),
        started_at=started,
        finished_at=context.engine.clock.now(),
        epoch=context.epoch,
    )
    return context.replayed(context.record(step))
