"""The memory backend's queues: limits by name, and the log of each rate's starts.

A mixin of `MemoryBackend`; `_runs.py` asks `_admitted` and `_limits` when it claims.
The reference for what `sql/_queues.py` does with SQL.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence

from durable.backends._protocol.queues import QueueUsage
from durable.backends._protocol.waits import TIMERS
from durable.core import queues
from durable.core.queues import Queue
from durable.core.records import NewRun, Run, RunStatus

from ._base import MemoryBase


class MemoryQueues(MemoryBase):
    """`QueueStore` for `MemoryBackend` (see there for the contracts)."""

    _queues: dict[str, Queue]
    _rate_logs: dict[str, list[float]]
    #: the debounced run of each (workflow, key), pending or not (see `_pending`).
    _debounced: dict[tuple[str, str], str]

    def put_queue(self, queue: Queue) -> Queue:
        """See `QueueStore.put_queue`."""
        with self._lock:
            self._check_open()
            self._queues[queue.name] = queue
            return queue

    def get_queue(self, name: str) -> Queue | None:
        """See `QueueStore.get_queue`."""
        with self._lock:
            self._check_open()
            return self._queues.get(name)

    def list_queues(self) -> Sequence[Queue]:
        """See `QueueStore.list_queues`."""
        with self._lock:
            self._check_open()
            return [self._queues[name] for name in sorted(self._queues)]

    def next_start(self, name: str) -> float | None:
        """See `QueueStore.next_start`."""
        with self._lock:
            self._check_open()
            queue = self._queues.get(name)
            if queue is None:
                return None
            return queues.next_start(queue, self._rate_logs.get(name, []), self.now())

    def queue_usage(self) -> Sequence[QueueUsage]:
        """See `QueueStore.queue_usage`."""
        with self._lock:
            self._check_open()
            now = self.now()
            names = set(self._queues)
            queued: Counter[str] = Counter()
            running: Counter[str] = Counter()
            oldest: dict[str, float] = {}
            keys: dict[str, Counter[str]] = {}
            for run in self._runs.values():
                if run.status is RunStatus.QUEUED:
                    queued[run.queue] += 1
                    oldest[run.queue] = min(oldest.get(run.queue, run.created_at), run.created_at)
                elif queues.live(run, now):
                    running[run.queue] += 1
                    if run.key is not None:
                        keys.setdefault(run.queue, Counter())[run.key] += 1
                else:
                    continue
                names.add(run.queue)
            return [
                QueueUsage(
                    name=name,
                    queued=queued[name],
                    running=running[name],
                    oldest_queued_at=oldest.get(name),
                    keys=dict(keys.get(name, Counter()).most_common(20)),
                )
                for name in sorted(names)
            ]

    def debounce_run(self, new: NewRun, *, window: float, longest: float) -> tuple[Run, bool]:
        """See `QueueStore.debounce_run`."""
        assert new.key is not None, "a debounced run has a key"
        with self._lock:
            self._check_open()
            self._ensure_queue(new)
            now = self.now()
            slot = (new.workflow, new.key)
            pending = self._runs.get(self._debounced.get(slot, ""))
            if pending is not None and _pending(pending):
                latest = min(now + window, pending.created_at + longest)
                pending = dataclasses.replace(
                    pending,
                    input=new.input,
                    call_hash=new.call_hash,
                    priority=new.priority,
                    key_limit=new.key_limit,
                    wake_at=latest,
                    updated_at=now,
                )
                self._runs[pending.id] = pending
                return pending, False
            run = Run(
                id=new.id, workflow=new.workflow, status=RunStatus.WAITING, input=new.input,
                call_hash=new.call_hash, output=None, error=None, epoch=0, lease_owner=None,
                lease_until=None, recoveries=0, parent_id=None, created_at=now,
                updated_at=now, finished_at=None, queue=new.queue, priority=new.priority,
                wake_at=now + window,
                deadline_at=None if new.timeout is None else now + new.timeout,
                key=new.key, key_limit=new.key_limit, version=new.version,
                trace_context=new.trace_context, event_schemas=new.event_schemas,
            )  # fmt: skip
            self._runs[run.id] = run
            self._history[run.id] = {}
            self._debounced[slot] = run.id
        self._notify([TIMERS])
        return run, True

    # -- for the claims of _runs.py (the lock held) -------------------------------------

    def _ensure_queue(self, new: NewRun) -> None:
        """A run with its own key limit gives its queue a row (as SQL's ensure_queue,
        which runs before the run is written, whether or not it is)."""
        if new.key_limit is not None and new.queue not in self._queues:
            self._queues[new.queue] = Queue(name=new.queue)

    def _running_in(self, queue: str, now: float) -> list[Run]:
        return [r for r in self._runs.values() if r.queue == queue and queues.live(r, now)]

    def _key_starts(self, queue: Queue, now: float) -> Counter[str]:
        if queue.key_rate is None:
            return Counter()
        mine = [r for r in self._runs.values() if r.queue == queue.name]
        return queues.key_starts(queue, mine, now)

    def _limits(self, name: str, ready: list[Run], limit: int, now: float) -> list[Run]:
        """Which of *ready* a claim of queue *name* takes (all, up to *limit*, if it
        declares no limits); a rate's log notes the first starts."""
        queue = self._queues.get(name)
        if queue is None:
            return ready[:limit]
        log = self._rate_logs.get(name, [])
        chosen = queues.choose(
            queue, ready, self._running_in(name, now), log, now=now, limit=limit,
            started=self._key_starts(queue, now),
        )  # fmt: skip
        self._started(queue, log, now, chosen)
        return chosen

    def _admitted(self, run: Run, now: float) -> bool:
        """Whether the limits of *run*'s queue let it be claimed on its own (noted in
        the rate's log if so)."""
        queue = self._queues.get(run.queue)
        if queue is None:
            return True
        log = self._rate_logs.get(run.queue, [])
        running = self._running_in(run.queue, now)
        started = self._key_starts(queue, now)
        if not queues.admits(queue, run, running, log, now, started=started):
            return False
        self._started(queue, log, now, [run])
        return True

    def _started(self, queue: Queue, log: list[float], now: float, runs: Sequence[Run]) -> None:
        # As SQL: the log is written only when something starts (a claim that starts
        # nothing leaves it as it is, whatever the rate is now).
        fresh = sum(1 for run in runs if run.started_at is None)
        if queue.rate is not None and fresh:
            self._rate_logs[queue.name] = queues.record(queue, log, now, fresh)


def _pending(run: Run) -> bool:
    """Whether a debounced run has not started: WAITING on its timer alone, never run."""
    return run.status is RunStatus.WAITING and run.started_at is None and run.waiting_on is None
