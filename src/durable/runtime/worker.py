"""Workers: claim queued runs and execute them, until told to stop.

A worker claims in batches (as many runs as it has free slots), highest priority
first, then oldest; it wakes on notifications (LISTEN/NOTIFY on PostgreSQL) and polls
anyway. It also keeps the time of the earliest sleeping run (re-read when a run starts
sleeping, and every poll) and queues sleeping runs as they come due; a waiting run
holds no slot. Every few seconds it sweeps for runs whose owner died (at once when that
owner was a process in this place: host, boot and PID namespace) or whose lease expired,
and takes them over, before queued runs when it is saturated (`takeovers.py`). It
never claims a run whose workflow it does not know: that run waits for a worker that
does.

Async workflows (``async def``) run on the worker's lane instead (`lane.py`): one event
loop where thousands of them await at once, up to *async_concurrency*, beside the
threads that sync runs use; each kind is claimed for its own free slots.

Stopping is graceful: no new claims; running work is handed back at its next durable
call; whatever has not reached one when the grace period ends is released too, so
another worker picks it up at once. Nothing is lost either way.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from durable.backends import TIMERS, Watch
from durable.core import faults
from durable.core.records import Run
from durable.core.run_options import serves
from durable.core.text import check_text
from durable.errors import ConfigurationError, StorageError

from . import registry, schedules
from .defaults import get_engine
from .engine import Engine
from .lane import Lane
from .limits import HeldBack
from .takeovers import Sweeper
from .timers import Timers

log = logging.getLogger("durable.worker")

#: How many async runs a worker executes at once on its event loop, by default.
ASYNC_CONCURRENCY = 2000


class Worker:
    """Executes queued runs (sync ones on a pool of threads, async ones as tasks on one
    event loop): in an app, or as `durable worker`.

    Use it as a context manager, or call `start()` and `stop()`.

    Args:
        engine: the engine (database) to serve; the default engine if omitted.
        queues: the queues to take runs from.
        concurrency: how many sync runs execute at once (one thread each).
        async_concurrency: how many async runs execute at once, on the worker's event
            loop; 0 runs them in the threads too, one thread each, as sync runs.
        warn_blocking: seconds one step of an async run may hold the event loop before
            a warning names it (a blocking call in async code stalls every async run).
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
        async_concurrency: int = ASYNC_CONCURRENCY,
        poll: float = 1.0,
        grace: float = 30.0,
        sweep_every: float | None = None,
        warn_blocking: float = 0.5,
    ) -> None:
        if concurrency < 1:
            raise ConfigurationError(f"concurrency must be at least 1, got {concurrency}.")
        if async_concurrency < 0:
            raise ConfigurationError(
                f"async_concurrency must be 0 (async runs in threads) or more, got "
                f"{async_concurrency}."
            )
        if warn_blocking <= 0:
            raise ConfigurationError(f"warn_blocking must be positive, got {warn_blocking}.")
        if not queues:
            raise ConfigurationError("A worker needs at least one queue.")
        self.engine = engine or get_engine()
        self.queues = tuple(check_text(queue, "a queue name") for queue in queues)
        self.concurrency = concurrency
        self.async_concurrency = async_concurrency
        self.warn_blocking = warn_blocking
        self.poll = poll
        self.grace = grace
        self.sweep_every = sweep_every or min(self.engine.lease / 3, 5.0)
        self._active: dict[str, int] = {}  # run id -> epoch (both kinds)
        self._on_lane: set[str] = set()  # ... of which these execute on the lane
        self._filled = (False, False)  # whether the last claim took every free slot, by kind
        self._lane: Lane | None = None
        self._slots = threading.Condition()
        self._stopping = threading.Event()
        self._turn = 0
        self._held = HeldBack(self.engine.backend, self.queues)
        self._retry_in = math.inf  # when a limited queue is worth claiming from again
        self._loop_watch: Watch | None = None  # what the claim loop waits on
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="durable-worker")
        self._sweeper = Sweeper(
            self.engine,
            self.queues,
            self.sweep_every,
            free=self._free,
            active=self._active,
            serves=self._serves,
            start=self._start,
        )

    # -- life cycle ------------------------------------------------------------------

    def start(self) -> Worker:
        """Start claiming and executing runs in background threads."""
        if self._thread is not None:
            raise RuntimeError("This worker has already been started.")
        names = registry.names()
        version = self.engine.version
        log.info(
            "worker %s: queues %s, %d slots (%d async), %d workflows and tasks known%s",
            self.engine.owner,
            ", ".join(self.queues),
            self.concurrency,
            self.async_concurrency,
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
        if self._lane is not None:
            self._lane.stop()  # its leftovers are cancelled: none goes on in the background
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
        timers = Timers(backend, self.poll)
        ticker = schedules.Ticker(self.engine, self.poll)
        self._declare()
        backoff = 0.1
        while not self._stopping.is_set():
            names = self._names()
            if not self._room(names):
                with self._slots:
                    self._slots.wait_for(partial(self._room_or_stop, names), timeout=self.poll)
                continue
            try:
                due_in = min(timers.wake(), ticker.fire())
                if self._sweeper.due():
                    self._held.refresh()
                    self._sweeper.sweep(set(names[0]), set(names[1]))
                threads, lane = self._free()
                mine, ours = self._claim(names[0], threads), self._claim(names[1], lane)
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
            # A kind whose claim took all its free slots (or that had none) may have more
            # runs queued: the end of one of its runs wakes this loop (`_finished`). A
            # kind that got fewer has emptied its queues: news wakes it.
            self._filled = (len(mine) >= threads, len(ours) >= lane)
            for run in mine + ours:
                self._start(run)
            # Wait for news, a free slot, the next timer, the next sweep, or the next poll.
            watch.wait(min(self.poll, due_in, self._retry_in, self._sweeper.due_in()))

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

    def _names(self) -> tuple[list[str], list[str]]:
        """The functions this worker runs: those on threads, and those on its lane
        (async ones, unless it has no lane)."""
        names = registry.names()
        if not self.async_concurrency:
            return names, []
        on_lane = {name for name in names if (found := registry.find(name)) and found.is_async}
        return [name for name in names if name not in on_lane], sorted(on_lane)

    def _room(self, names: tuple[list[str], list[str]]) -> bool:
        """Whether a slot is free for some kind of run this worker knows."""
        threads, lane = self._free()
        return threads > 0 or (lane > 0 and bool(names[1]))

    def _room_or_stop(self, names: tuple[list[str], list[str]]) -> bool:
        return self._room(names) or self._stopping.is_set()

    def _claim(self, names: list[str], free: int) -> list[Run]:
        """Claim up to *free* runs of *names*, queue by queue, starting with a different
        queue each time so that a busy queue cannot starve the others. Priority orders
        runs within a queue."""
        claimed: list[Run] = []
        if free <= 0 or not names:
            return claimed
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

    def _free(self) -> tuple[int, int]:
        """The free slots: threads, and the lane's."""
        with self._slots:
            lane = len(self._on_lane)
            return self.concurrency - (len(self._active) - lane), self.async_concurrency - lane

    def _serves(self, run: Run) -> bool:
        """Whether this worker may claim *run*: any run, or with ``only_version`` one
        of its version or of none (the claim says the same; this saves it)."""
        version = self.engine.version
        return not self.engine.only_version or version is None or serves(run, version)

    def _start(self, run: Run) -> None:
        target = registry.find(run.workflow) if self.async_concurrency else None
        on_lane = target is not None and target.is_async
        with self._slots:
            self._active[run.id] = run.epoch
            if on_lane:
                self._on_lane.add(run.id)
            if self._stopping.is_set():  # claimed as the stop came: hand it back at once
                self.engine.leases.draining.add(run.id)
        if on_lane and target is not None:
            self._started_lane().submit(run, target)
        else:
            self._pool.submit(self._execute, run)

    def _started_lane(self) -> Lane:
        """The lane, started with the first async run (a worker of sync workflows
        only has no event loop and no storage threads of its own)."""
        if self._lane is None:
            self._lane = Lane(
                self.engine, self._finished, poll=self.poll, warn_blocking=self.warn_blocking
            )
            self._lane.start()
        return self._lane

    def _execute(self, run: Run) -> None:
        try:
            faults.hit("after_claim", run.id)
            target = self.engine.known(run)
            if target is not None:
                self.engine.resume_quietly(run, target)
        finally:
            self._finished(run.id)

    def _finished(self, run_id: str) -> None:
        """Run *run_id* stopped executing here (either kind): its slot is free."""
        with self._slots:
            self._active.pop(run_id, None)
            on_lane = run_id in self._on_lane
            self._on_lane.discard(run_id)
            self._slots.notify_all()
        if (self._filled[on_lane] or self._retry_in < math.inf) and self._loop_watch is not None:
            # The last claim left runs queued for want of a slot (or of a start, in a
            # limited queue): this one's end frees one, so look now, not at the next poll.
            self._loop_watch.poke()
