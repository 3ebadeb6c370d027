"""Waiting for a run's outcome as the caller that wants it: `execute` from app code.

The caller does not only wait: it helps. While the run waits for a timer, the caller
sleeps until that timer is due and then continues the run itself (unless a worker got
there first); while the run waits for an inline child, the caller follows the chain
of children down to the one that can move and continues that one. Only runs of the
joined run's queue are helped along: work dispatched to other queues waits for the
workers that serve them. If the caller's process dies, nothing is lost: the run stays
WAITING (or its lease expires) and a worker or `recover()` continues it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from durable.api.decorators import Durable
from durable.core.clock import SystemClock
from durable.core.records import Run, RunStatus

from . import owners as _owner
from . import registry as _registry
from .scope import RELEASED

if TYPE_CHECKING:
    from .engine import Engine

#: The longest a caller waits between looks at the database.
POLL = 1.0
#: The shortest, after a claim that lost (a clock a little ahead of the database's).
RETRY = 0.05


def join(engine: Engine, run: Run, target: Durable[..., Any]) -> Any:
    """Return the outcome of *run*: recorded, continued here, or awaited."""
    if engine.pump is not None:
        engine.pump(run.id)
    chain = [run.id]
    first = True
    watch = None
    while True:
        if not first:
            # Watch before reading, so that news arriving in between is not missed.
            watch = engine.backend.watch([f"run:{member}" for member in chain])
            run = engine.reread(run.id)
        if run.status.finished:
            return engine.outcome(run)
        members = _chain(engine, run)
        chain = [member.id for member in members]
        lost = False
        for node in reversed(members):  # the deepest first: it is what the rest wait for
            if not _claimable(engine, node, top=node is run and first):
                continue
            node_target = target if node is run else _registry.find(node.workflow)
            if node_target is None:
                continue  # not registered here: left for a process that knows it
            claimed = engine.claim(node)
            if claimed is None or claimed.status is not RunStatus.RUNNING:
                lost = lost or claimed is None
                continue
            if node is run:
                value = engine.resume(claimed, node_target)
                if value is not RELEASED:
                    return value
            else:
                engine.resume_quietly(claimed, node_target)
            break
        else:
            if watch is not None:
                _pause(engine, watch, members, lost_claim=lost)
            # else: the first look, at the run as the caller read it, found nothing to
            # do; look again under a watch before waiting on it (most joins claim the
            # run at the first look, and never pay for a watch).
            first = False
            continue
        first = False


def _chain(engine: Engine, run: Run) -> list[Run]:
    """*run*, then the inline child it waits for, then that child's, and so on."""
    chain = [run]
    node = run
    while node.status is RunStatus.WAITING and (node.waiting_on or "").startswith("run:"):
        child = engine.backend.get_run((node.waiting_on or "")[4:])
        if child is None or child.status.finished or child.queue != run.queue:
            break
        if child.id in {member.id for member in chain}:
            break  # a cycle cannot be made with durable's ids; never loop if it were
        chain.append(child)
        node = child
    return chain


def _claimable(engine: Engine, run: Run, *, top: bool) -> bool:
    """Whether *run* looks free to take: queued, due, or its owner gone (a blocked
    run only when it is the one joined, which then sees its divergence raised)."""
    if engine.executing(run.id):
        return False
    if run.status is RunStatus.QUEUED:
        return True
    if run.status is RunStatus.BLOCKED:
        return top
    if run.status is RunStatus.WAITING:
        return run.wake_at is not None and run.wake_at <= engine.clock.now()
    if run.status is RunStatus.RUNNING:
        expired = run.lease_until is not None and run.lease_until < engine.clock.now()
        return expired or _owner.is_dead(run.lease_owner)
    return False


def _pause(engine: Engine, watch: Any, chain: list[Run], *, lost_claim: bool) -> None:
    """Wait for news on the chain, or until its earliest timer or lease expiry."""
    now = engine.clock.now()
    timers = [member.wake_at - now for member in chain if member.wake_at is not None]
    leases = [member.lease_until - now for member in chain if member.lease_until is not None]
    left = min([POLL, *timers, *leases])
    if lost_claim or left <= 0:
        left = max(left, RETRY)
    if timers and not isinstance(engine.clock, SystemClock):
        # A test clock moves only when slept on: let it reach the timer.
        engine.clock.sleep(max(min(timers), 0.0))
        return
    watch.wait(left)
