"""Workers: claim queued runs and execute them, until told to stop.

A worker claims in batches (as many runs as it has free slots), highest priority
first, then oldest; it wakes on notifications (LISTEN/NOTIFY on PostgreSQL) and polls
anyway. It also keeps the time of the earliest sleeping run (re-read when a run starts
sleeping, and every poll) and queues sleeping runs as they come due; a waiting run
holds no slot. Every few seconds it sweeps for runs whose owner died (at once when that
owner was a process in this place: host, boot and PID namespace) or whose lease expired,
and takes them over. It never claims a run whose workflow it does not know: that run
waits for a worker that does.

A run taken over from a dead owner may be what killed it, so a worker runs at most one
such unproven run at a time, until it records a new step: a poison run then takes no
innocent run down with it more than once, and runs that merely shared a crashed
process prove themselves at once (see `Engine.max_recoveries`).

Stopping is graceful: no new claims; running work is handed back at its next durable
call; whatever has not reached one when the grace period ends is released too, so
another worker picks it up at once. Nothing is lost either way.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from durable.backends import TIMERS, Backend, Watch
from durable.core import faults
from durable.core.records import Run, RunStatus
from durable.core.run_options import serves
from durable.core.text import check_text
from durable.errors import ConfigurationError, StorageError

from . import owners, registry, schedules
from .defaults import get_engine
from .engine import Engine
from .limits import HeldBack

log = logging.getLogger("durable.worker")


class Worker:
    """Executes queued runs on a pool of threads: in an app, or as `durable worker`.

    Use it as a context manager, or call `start()` and `stop()`.

    Args:
        engine: the engine (database) to serve; the default engine if omitted.
        queues: the queues to take runs from.
        concurrency: how many runs execute at once.
        poll: the longest wait between looks at the queue when nothing is notified.
        grace: seconds `stop()` waits for running work to reach its next durable call.
        sweep_every: seconds between looks for runs whose owner died or whose lease
            expired (default: a third of the lease, at most 5 s).
    """

    def __init__(
        self,
        engine: Engine | None = None,
        *,
        queues: Sequence[str] = ("default",),
        concurrency: int = 8,
        poll: float = 1.0,
        grace: float = 30.0,
        sweep_every: float | None = None,
    ) -> None:
        if concurrency < 1:
            raise ConfigurationError(f"concurrency must be at least 1, got {concurrency}.")
        if not queues:
            raise ConfigurationError("A worker needs at least one queue.")
        self.engine = engine or get_engine()
        self.queues = tuple(check_text(queue, "a queue name") for queue in queues)
        self.concurrency = concurrency
        self.poll = poll
        self.grace = grace
        self.sweep_every = sweep_every or min(self.engine.lease / 3, 5.0)
        self._active: dict[str, int] = {}  # run id -> epoch
        self._slots = threading.Condition()
        self._stopping = threading.Event()
        self._turn = 0
        self._held = HeldBack(self.engine.backend, self.queues)
        self._retry_in = math.inf  # when a limited queue is worth claiming from again
        self._loop_watch: Watch | None = None  # what the claim loop waits on
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="durable-worker")

    # -- life cycle ------------------------------------------------------------------

    def start(self) -> Worker:
        """Start claiming and executing runs in background threads."""
        if self._thread is not None:
            raise RuntimeError("This worker has already been started.")
        names = registry.names()
        version = self.engine.version
        log.info(
            "worker %s: queues %s, %d slots, %d workflows and tasks known%s",
            self.engine.owner,
            ", ".join(self.queues),
            self.concurrency,
            len(names),
            ""
            if version is None
            else f", version {version}"
            + (" (claims only its runs and new ones)" if self.engine.only_version else ""),
        )
        self._thread = threading.Thread(target=self._loop, name="durable-worker-loop", daemon=True)
        self._thread.start()
        return self

    def stop(self, grace: float | None = None) -> int:
        """Stop gracefully: no new claims, running work handed back within *grace*.

        Returns:
            How many runs were still inside a task body when the grace period ended:
            they are handed back (another worker continues them at once), but Python
            cannot stop their threads, which finish their bodies in the background
            and whose late writes are fenced off. `durable worker` exits without
            waiting for them.
        """
        grace = self.grace if grace is None else grace
        self._stopping.set()
        with self._slots:
            self._slots.notify_all()
            # Hand back at their next durable call, not once the claim loop has noticed:
            # that may take a poll, long enough for a run to start its next task here.
            self.engine.leases.draining.update(self._active)
        if self._loop_watch is not None:
            self._loop_watch.poke()  # the claim loop stops now, not at its next poll
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._slots:
            self.engine.leases.draining.update(self._active)
            self._slots.wait_for(lambda: not self._active, timeout=grace)
            leftovers = dict(self._active)
        for run_id, epoch in leftovers.items():
            # Still inside a task body: hand the run back now; our later writes, if any,
            # are fenced off once another worker claims it.
            self.engine.backend.release_run(run_id, epoch)
            log.warning("run %s: still busy after %gs; released", run_id, grace)
        self._pool.shutdown(wait=False)
        log.info("worker %s stopped", self.engine.owner)
        return len(leftovers)

    @property
    def busy(self) -> int:
        """How many runs are executing now."""
        return len(self._active)

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the loop --------------------------------------------------------------------

    def _loop(self) -> None:
        backend = self.engine.backend
        watch = backend.watch([*(f"queue:{queue}" for queue in self.queues), TIMERS])
        self._loop_watch = watch
        timers = _Timers(backend, self.poll)
        ticker = schedules.Ticker(self.engine, self.poll)
        self._declare()
        next_sweep = 0.0
        first_sweep = True
        backoff = 0.1
        while not self._stopping.is_set():
            free = self._free()
            if free == 0:
                with self._slots:
                    self._slots.wait_for(
                        lambda: len(self._active) < self.concurrency or self._stopping.is_set(),
                        timeout=self.poll,
                    )
                continue
            try:
                due_in = min(timers.wake(), ticker.fire())
                if time.monotonic() >= next_sweep:
                    self._held.refresh()
                    deferred = self._sweep(free, include_blocked=first_sweep)
                    first_sweep = False
                    # Takeovers held back by isolation are tried again soon.
                    next_sweep = time.monotonic() + (0.05 if deferred else self.sweep_every)
                    free = self._free()
                runs = self._claim(free)
            except Exception as error:
                if isinstance(error, StorageError):
                    log.warning("database unavailable (%s); retrying in %.1fs", error, backoff)
                else:
                    # Not foreseen, so logged in full; but a worker whose loop died would
                    # sit there serving nothing until someone noticed.
                    log.exception("worker loop failed; retrying in %.1fs", backoff)
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.1
            for run in runs:
                self._start(run)
            if len(runs) < free:
                # The queue is empty: wait for news, the next timer, or the next poll.
                watch.wait(min(self.poll, due_in, self._retry_in))

    def _declare(self) -> None:
        """Store the schedules declared with the code this worker runs (a deploy that
        changes one updates it; one that drops it leaves it orphaned)."""
        targets = [found for name in registry.names() if (found := registry.find(name))]
        try:
            declared = schedules.declare(self.engine, targets)
        except Exception:  # a conflict, or the database: the worker serves runs anyway
            log.exception("worker %s: the declared schedules were not stored", self.engine.owner)
            return
        if declared:
            log.info("worker %s: %d declared schedules", self.engine.owner, len(declared))

    def _claim(self, free: int) -> list[Run]:
        """Claim up to *free* runs, queue by queue, starting with a different queue each
        time so that a busy queue cannot starve the others. Priority orders runs within
        a queue."""
        names = registry.names()
        claimed: list[Run] = []
        self._turn = (self._turn + 1) % len(self.queues)
        self._retry_in = math.inf
        for queue in self.queues[self._turn :] + self.queues[: self._turn]:
            wanted = free - len(claimed)
            got = self.engine.backend.claim_next(
                owner=self.engine.owner,
                queue=queue,
                workflows=names,
                limit=wanted,
                lease=self.engine.lease,
                version=self.engine.version,
                only_version=self.engine.only_version,
            )
            claimed += got
            self._retry_in = min(self._retry_in, self._held.retry_in(queue, wanted, len(got)))
            if len(claimed) == free:
                break
        return claimed

    def _free(self) -> int:
        with self._slots:
            return self.concurrency - len(self._active)

    def _sweep(self, free: int, *, include_blocked: bool) -> bool:
        """Take over orphaned runs of our queues; report queued work we cannot run.

        Returns:
            Whether some takeover was held back (one unproven run at a time).
        """
        deferred = False
        names = set(registry.names())
        for name in self.engine.backend.queued_workflows(self.queues):
            if name not in names:
                self.engine.warn_unknown(name, f"queued work in {', '.join(self.queues)}")
        wanted = (RunStatus.RUNNING, RunStatus.BLOCKED) if include_blocked else (RunStatus.RUNNING,)
        for run in self.engine.backend.recoverable(host=owners.place()):
            if free <= 0:
                return deferred
            if (
                run.queue not in self.queues
                or run.status not in wanted
                or run.workflow not in names
            ):
                continue
            if run.id in self._active or not self._serves(run):
                continue
            takeover = run.status is RunStatus.RUNNING
            if takeover and run.lease_owner == self.engine.owner:
                if not self.engine.executing(run.id):
                    # Ours, yet executing nowhere here: a claim whose acknowledgement was
                    # lost in a database restart. Our heartbeat would renew it forever.
                    self.engine.release_quietly(run)
                continue
            if takeover and self.engine.leases.unproven.intersection(self._active):
                deferred = True  # one unproven takeover at a time (see the module docstring)
                continue
            claimed = self.engine.claim(run)
            if claimed is not None and claimed.status is RunStatus.RUNNING:
                log.info("run %s: taken over from %s", run.id, run.lease_owner or "nobody")
                if claimed.recoveries:
                    self.engine.leases.unproven.add(claimed.id)
                self._start(claimed)
                free -= 1
        return deferred

    def _serves(self, run: Run) -> bool:
        """Whether this worker may claim *run*: any run, or with ``only_version`` one
        of its version or of none (the claim says the same; this saves it)."""
        version = self.engine.version
        return not self.engine.only_version or version is None or serves(run, version)

    def _start(self, run: Run) -> None:
        with self._slots:
            self._active[run.id] = run.epoch
            if self._stopping.is_set():  # claimed as the stop came: hand it back at once
                self.engine.leases.draining.add(run.id)
        self._pool.submit(self._execute, run)

    def _execute(self, run: Run) -> None:
        try:
            faults.hit("after_claim", run.id)
            target = self.engine.known(run)
            if target is not None:
                self.engine.resume_quietly(run, target)
        finally:
            with self._slots:
                self._active.pop(run.id, None)
                self._slots.notify_all()
            if self._retry_in < math.inf and self._loop_watch is not None:
                # The last claim left runs queued for want of a slot or a start: this
                # one's end may free one, so look now rather than at the next retry.
                self._loop_watch.poke()


class _Timers:
    """Knows when the earliest sleeping run is due, and queues sleeping runs that are.

    One indexed read tells the time; it is read again when some run starts sleeping
    (the ``timers`` topic; at most every `FRESH` seconds, as thousands of runs may
    fall asleep per second) and at least every *poll* seconds, so a worker that does
    not hear other processes (SQLite) still learns of new timers before they are due
    (a wait shorter than `Engine.max_inline_wait` never suspends).
    """

    #: The most runs one statement wakes.
    BATCH = 500
    #: The least time between two reads prompted by new timers.
    FRESH = 0.1

    def __init__(self, backend: Backend, poll: float) -> None:
        self._backend = backend
        self._poll = poll
        self._watch = backend.watch([TIMERS])
        self._due = 0.0  # monotonic time the earliest sleeping run is due
        self._read = float("-inf")  # monotonic time of the last read
        self._stale = True  # a run started sleeping since the last read

    def wake(self) -> float:
        """Queue the runs that are due; return the seconds until the next may be."""
        now = time.monotonic()
        self._stale = self._watch.wait(0) or self._stale
        if now >= self._read + self._poll or (self._stale and now >= self._read + self.FRESH):
            due_in = self._backend.next_wake()
            self._read, self._stale = now, False
            self._due = now + due_in if due_in is not None else float("inf")
        if now < self._due:
            left = self._due - now
            return min(left, self.FRESH) if self._stale else left
        while self._backend.wake_due(limit=self.BATCH) == self.BATCH:
            pass
        self._read = float("-inf")  # read the next one at once
        return 0.0
