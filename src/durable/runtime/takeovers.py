"""Takeovers: when a worker looks for runs whose owner died, and which it takes.

Every *every* seconds a worker sweeps: it names queued workflows it has no code for
(once each), reads the runs that may need a new owner (their owner was a process in
this place that no longer runs, their lease expired, a task attempt missed its
heartbeat, or they are blocked) and claims those of its queues and workflows that it
has a free slot of their kind for.

A worker that is saturated with queued work frees a slot at a time and refills it
at once from the queue, so a sweep that merely came due rarely finds a slot: a dead
owner's runs would wait behind every queued run. So a sweep that skipped a run that
looked claimable for want of a slot makes the next free slot of that kind sweep
first, before the queue is read.

A run taken over from a dead owner may be what killed it, so a worker runs at most
one such unproven run at a time, until it records a new step: a poison run then takes
no innocent run down with it more than once, and runs that merely shared a crashed
process prove themselves at once (see `Engine.max_recoveries`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Container
from dataclasses import dataclass, field

from durable.core.records import Run, RunStatus

from . import owners
from .engine import Engine

log = logging.getLogger("durable.worker")

#: How soon a sweep that held a takeover back (one unproven run at a time) is tried again.
RETRY_HELD = 0.05


@dataclass
class Sweeper:
    """A worker's sweeps for runs to take over.

    Args:
        engine: the worker's engine.
        queues: the worker's queues.
        every: seconds between sweeps.
        free: the worker's free slots now, threads and lane.
        active: the runs executing here (not to be claimed again).
        serves: whether the worker may claim a run (its version).
        start: starts executing a run just claimed.
    """

    engine: Engine
    queues: tuple[str, ...]
    every: float
    free: Callable[[], tuple[int, int]]
    active: Collection[str]
    serves: Callable[[Run], bool]
    start: Callable[[Run], None]
    #: when the next sweep is due (monotonic seconds)
    next_at: float = 0.0
    #: by kind (threads, lane): a claimable run was skipped for want of a slot
    starved: tuple[bool, bool] = (False, False)
    #: the first sweep also takes blocked runs
    first: bool = field(default=True)

    def due(self) -> bool:
        """Whether to sweep now: its time has come, or a slot a skipped run wanted is
        free."""
        if time.monotonic() >= self.next_at:
            return True
        free = self.free()
        return (self.starved[0] and free[0] > 0) or (self.starved[1] and free[1] > 0)

    def due_in(self) -> float:
        """Seconds until the next sweep comes due by time: how long the claim loop may
        wait for news at most (a sweep that held a takeover back is due again in
        `RETRY_HELD`, and no notification says that the unproven run proved itself)."""
        return max(0.0, self.next_at - time.monotonic())

    def sweep(self, threads: Container[str], lane: Container[str]) -> None:
        """Take over orphaned runs of our queues that we have slots for, and report
        queued work we cannot run: *threads* and *lane* name the workflows this worker
        runs on each kind of slot."""
        for name in self.engine.backend.queued_workflows(self.queues):
            if name not in threads and name not in lane:
                self.engine.warn_unknown(name, f"queued work in {', '.join(self.queues)}")
        deferred = False
        starved = [False, False]
        wanted = (RunStatus.RUNNING, RunStatus.BLOCKED) if self.first else (RunStatus.RUNNING,)
        self.first = False
        for run in self.engine.backend.recoverable(host=owners.place()):
            if run.queue not in self.queues or run.status not in wanted:
                continue
            kind = int(run.workflow in lane)
            if not kind and run.workflow not in threads:
                continue
            if run.id in self.active or not self.serves(run):
                continue
            takeover = run.status is RunStatus.RUNNING
            if self.free()[kind] <= 0:
                starved[kind] = starved[kind] or not takeover or self._orphaned(run)
                continue
            if takeover and run.lease_owner == self.engine.owner:
                if not self.engine.executing(run.id):
                    # Ours, yet executing nowhere here: a claim whose acknowledgement was
                    # lost in a database restart. Our heartbeat would renew it forever.
                    self.engine.release_quietly(run)
                continue
            if takeover and self.engine.leases.unproven.intersection(self.active):
                deferred = True  # one unproven takeover at a time (see the module docstring)
                continue
            claimed = self.engine.claim(run)
            if claimed is not None and claimed.status is RunStatus.RUNNING:
                log.info("run %s: taken over from %s", run.id, run.lease_owner or "nobody")
                if claimed.recoveries:
                    self.engine.leases.unproven.add(claimed.id)
                self.start(claimed)
        self.starved = (starved[0], starved[1])
        # Takeovers held back by isolation are tried again soon.
        self.next_at = time.monotonic() + (RETRY_HELD if deferred else self.every)

    def _orphaned(self, run: Run) -> bool:
        """Whether a running run looks claimable from here: its owner died, or its
        lease ran out by the engine's clock (the database's may differ a little; a
        wrong guess costs one sweep, or waits for the next)."""
        if owners.is_dead(run.lease_owner):
            return True
        return run.lease_until is not None and run.lease_until < self.engine.clock.now()
