"""Waiting for a run's outcome as the caller that wants it: `execute` from app code.

A run that continued as new is followed to its successor, and so on down the chain:
the outcome is the chain's last run's.

The caller does not only wait: it helps. While the run waits for a timer, the caller
sleeps until that timer is due and then continues the run itself (unless a worker got
there first); while the run waits for an inline child, the caller follows the chain
of children down to the one that can move and continues that one. Only runs of the
joined run's queue are helped along: work dispatched to other queues waits for the
workers that serve them. If the caller's process dies, nothing is lost: the run stays
WAITING (or its lease expires) and a worker or `recover()` continues it.
"""

from __future__ import annotations

import time
from typing import Any

from durable.core.clock import SystemClock
from durable.core.functions import Durable
from durable.core.records import Run, RunStatus, awaited
from durable.core.run_options import serves
from durable.errors import WaitTimeout

from . import owners, registry, runs
from .host import Host
from .stops import RELEASED

#: The longest a caller waits between looks at the database.
POLL = 1.0
#: The shortest, after a claim that lost (a clock a little ahead of the database's).
RETRY = 0.05


def join(host: Host, run: Run, target: Durable[..., Any]) -> Any:
    """Return the outcome of *run*: recorded, continued here, or awaited."""
    if host.pump is not None:
        host.pump(run.id)
    chain = [run.id]
    first = True
    watch = None
    while True:
        if not first:
            # Watch before reading, so that news arriving in between is not missed.
            watch = host.backend.watch([f"run:{member}" for member in chain])
            run = host.reread(run.id)
        if run.status is RunStatus.CONTINUED:  # the outcome is its chain's last run's
            run, first, watch = host.follow(run), True, None
            if host.pump is not None:
                host.pump(run.id)
        if run.status.finished:
            return host.outcome(run)
        members = _chain(host, run)
        chain = [member.id for member in members]
        lost = False
        for node in reversed(members):  # the deepest first: it is what the rest wait for
            if not _claimable(host, node, top=node is run and first):
                continue
            node_target = target if node is run else registry.find(node.workflow)
            if node_target is None:
                continue  # not registered here: left for a process that knows it
            claimed = runs.claim(host, node)
            if claimed is None or claimed.status is not RunStatus.RUNNING:
                lost = lost or claimed is None
                continue
            if node is run:
                value = runs.resume(host, claimed, node_target)
                if value is not RELEASED:
                    return value
            else:
                runs.resume_quietly(host, claimed, node_target)
            break
        else:
            if watch is not None:
                _pause(host, watch, members, lost_claim=lost)
            # else: the first look, at the run as the caller read it, found nothing to
            # do; look again under a watch before waiting on it (most joins claim the
            # run at the first look, and never pay for a watch).
            first = False
            continue
        first = False


def _chain(host: Host, run: Run) -> list[Run]:
    """*run*, then the inline child it waits for, then that child's, and so on."""
    chain = [run]
    node = run
    while node.status is RunStatus.WAITING:
        kind, _, awaited_id = (awaited(node.waiting_on)[0] or "").partition(":")
        if kind != "run":
            break
        child = host.backend.get_run(awaited_id)
        if child is None or child.status.finished or child.queue != run.queue:
            break
        if child.id in {member.id for member in chain}:
            break  # a cycle cannot be made with durable's ids; never loop if it were
        chain.append(child)
        node = child
    return chain


def _claimable(host: Host, run: Run, *, top: bool) -> bool:
    """Whether *run* looks free to take: queued, due, or its owner gone (a blocked
    run only when it is the one joined, which then sees its divergence raised)."""
    if host.executing(run.id):
        return False
    if host.only_version and host.version is not None and not serves(run, host.version):
        return False  # another version's: its own processes continue it
    if run.status is RunStatus.QUEUED:
        return True
    if run.status is RunStatus.BLOCKED:
        return top
    if run.status is RunStatus.WAITING:
        return run.wake_at is not None and run.wake_at <= host.clock.now()
    if run.status is RunStatus.RUNNING:
        expired = run.lease_until is not None and run.lease_until < host.clock.now()
        return expired or owners.is_dead(run.lease_owner)
    return False


def _pause(host: Host, watch: Any, chain: list[Run], *, lost_claim: bool) -> None:
    """Wait for news on the chain, or until its earliest timer or lease expiry."""
    now = host.clock.now()
    timers = [member.wake_at - now for member in chain if member.wake_at is not None]
    leases = [member.lease_until - now for member in chain if member.lease_until is not None]
    left = min([POLL, *timers, *leases])
    if lost_claim or left <= 0:
        left = max(left, RETRY)
    if timers and not isinstance(host.clock, SystemClock):
        # A test clock moves only when slept on: let it reach the timer.
        host.clock.sleep(max(min(timers), 0.0))
        return
    watch.wait(left)


def wait_for_run(host: Host, run_id: str, *, timeout: float | None = None) -> Run:
    """Block until run *run_id* has finished; return it (or, if it continued as new, the
    last run of its chain). Others execute it.

    Waits on notifications (LISTEN/NOTIFY on PostgreSQL, in-process otherwise),
    re-reading the run at least every second.

    Raises:
        WaitTimeout: *timeout* seconds passed first.
    """
    if host.pump is not None:
        host.pump(run_id)
    watch = host.backend.watch([f"run:{run_id}"])
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        run = host.reread(run_id)
        if run.status is RunStatus.CONTINUED:  # wait for its chain's last run instead
            run = host.follow(run)
            run_id = run.id
            watch = host.backend.watch([f"run:{run_id}"])
            if host.pump is not None:
                host.pump(run_id)
            continue
        if run.status.finished:
            return run
        left = 1.0 if deadline is None else deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeout(
                f"Run {run_id!r} did not finish within {timeout} s (it is {run.status}).",
                run_id=run_id,
            )
        watch.wait(min(left, 1.0))
