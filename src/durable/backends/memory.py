"""MemoryBackend: dictionaries behind one lock, with the same semantics as SQL.

It is the reference implementation of the Backend contracts and what unit tests run
on. It keeps nothing across processes. Its clock is injectable, so a virtual clock can
drive lease expiry in tests.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Sequence

from durable.core.clock import SYSTEM_CLOCK, Clock
from durable.core.records import Action, Event, NewRun, Run, RunStatus, Step
from durable.errors import LeaseLost, StorageError

from ._hub import Hub, Watch
from ._memory_inspect import InspectMixin
from ._memory_waits import WaitsMixin
from ._purging import Relative, may_go


class MemoryBackend(WaitsMixin, InspectMixin):
    """An in-process backend for tests and demos. Nothing survives the process."""

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._runs: dict[str, Run] = {}
        self._history: dict[str, dict[int, Step]] = {}
        self._events: dict[str, list[Event]] = {}
        self._event_ids = itertools.count(1)
        self._actions: list[Action] = []
        self._closed = False
        self._hub = Hub()

    def now(self) -> float:
        """Return the injected clock's time."""
        return self._clock.now()

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError("This MemoryBackend is closed.")

    def create_run(self, new: NewRun) -> tuple[Run, bool]:
        """See `Backend.create_run`."""
        with self._lock:
            self._check_open()
            existing = self._runs.get(new.id)
            if existing is not None:
                return existing, False
            now = self.now()
            owned = new.owner is not None
            run = Run(
                id=new.id,
                workflow=new.workflow,
                status=RunStatus.RUNNING if owned else RunStatus.QUEUED,
                input=new.input,
                call_hash=new.call_hash,
                output=None,
                error=None,
                epoch=1 if owned else 0,
                lease_owner=new.owner,
                lease_until=now + new.lease if owned else None,
                recoveries=0,
                parent_id=new.parent_id,
                created_at=now,
                updated_at=now,
                finished_at=None,
                queue=new.queue,
                priority=new.priority,
                started_at=now if owned else None,
            )
            self._runs[new.id] = run
            self._history[new.id] = {}
        if not owned:
            self._hub.notify(f"queue:{new.queue}")
        return run, True

    def get_run(self, run_id: str) -> Run | None:
        """See `Backend.get_run`."""
        with self._lock:
            self._check_open()
            return self._runs.get(run_id)

    def load_history(self, run_id: str) -> Sequence[Step]:
        """See `Backend.load_history`."""
        with self._lock:
            self._check_open()
            steps = self._history.get(run_id, {})
            return [steps[p] for p in sorted(steps)]

    def record(self, step: Step, epoch: int) -> tuple[Step, bool]:
        """See `Backend.record`."""
        with self._lock:
            self._check_open()
            run = self._runs.get(step.run_id)
            if run is None or run.epoch != epoch:
                raise LeaseLost(
                    f"Run {step.run_id!r} is no longer at epoch {epoch}; another owner took it.",
                    run_id=step.run_id,
                    epoch=epoch,
                )
            steps = self._history[step.run_id]
            existing = steps.get(step.position)
            if existing is not None and existing.status.finished:
                return existing, run.cancel_requested
            stored = step if step.epoch == epoch else dataclasses.replace(step, epoch=epoch)
            # As in SQL (UPDATED_ON_RECORD): a retrying or waiting position written
            # over keeps its first start.
            steps[step.position] = (
                stored
                if existing is None
                else dataclasses.replace(stored, started_at=existing.started_at)
            )
            return stored, run.cancel_requested

    def finish_run(
        self,
        run_id: str,
        epoch: int,
        status: RunStatus,
        *,
        output: bytes | None = None,
        error: bytes | None = None,
    ) -> bool:
        """See `Backend.finish_run`."""
        with self._lock:
            self._check_open()
            run = self._runs.get(run_id)
            if run is None or run.epoch != epoch or run.status.finished:
                return False
            now = self.now()
            self._runs[run_id] = dataclasses.replace(
                run,
                status=status,
                output=output,
                error=error,
                lease_owner=None,
                lease_until=None,
                updated_at=now,
                finished_at=now if status.finished else None,
            )
            woken = self._wake(run.parent_id, f"run:{run_id}") if status.finished else []
        self._notify([f"run:{run_id}", *woken])
        return True

    def claim_run(
        self, run_id: str, *, owner: str, lease: float, epoch: int, dead_owner: str | None = None
    ) -> Run | None:
        """See `Backend.claim_run`."""
        with self._lock:
            self._check_open()
            run = self._runs.get(run_id)
            if run is None or run.epoch != epoch:
                return None
            now = self.now()
            if run.status is RunStatus.RUNNING:
                expired = run.lease_until is not None and run.lease_until < now
                if not (expired or (dead_owner is not None and run.lease_owner == dead_owner)):
                    return None
                return self._claim(run, owner, lease, now, run.recoveries + 1)
            due = run.status is RunStatus.WAITING and run.wake_at is not None and run.wake_at <= now
            if run.status in (RunStatus.QUEUED, RunStatus.BLOCKED) or due:
                return self._claim(run, owner, lease, now, run.recoveries)
            return None

    def _claim(self, run: Run, owner: str, lease: float, now: float, recoveries: int) -> Run:
        claimed = dataclasses.replace(
            run,
            status=RunStatus.RUNNING,
            epoch=run.epoch + 1,
            lease_owner=owner,
            lease_until=now + lease,
            recoveries=recoveries,
            updated_at=now,
            started_at=run.started_at if run.started_at is not None else now,
            wake_at=None,
            waiting_on=None,
        )
        self._runs[run.id] = claimed
        return claimed

    def mark_progress(self, run_id: str, epoch: int) -> None:
        """See `Backend.mark_progress`."""
        with self._lock:
            self._check_open()
            run = self._runs.get(run_id)
            if run is not None and run.epoch == epoch:
                self._runs[run_id] = dataclasses.replace(run, recoveries=0)

    def claim_next(
        self,
        *,
        owner: str,
        queue: str,
        workflows: Sequence[str],
        limit: int,
        lease: float,
    ) -> Sequence[Run]:
        """See `Backend.claim_next`."""
        with self._lock:
            self._check_open()
            names = set(workflows)
            ready = [
                run
                for run in self._runs.values()
                if run.status is RunStatus.QUEUED and run.queue == queue and run.workflow in names
            ]
            ready.sort(key=lambda run: (-run.priority, run.created_at))
            now = self.now()
            return [self._claim(run, owner, lease, now, run.recoveries) for run in ready[:limit]]

    def queued_workflows(self, queues: Sequence[str]) -> Sequence[str]:
        """See `Backend.queued_workflows`."""
        with self._lock:
            self._check_open()
            wanted = set(queues)
            return sorted(
                {
                    r.workflow
                    for r in self._runs.values()
                    if r.status is RunStatus.QUEUED and r.queue in wanted
                }
            )

    def queues(self) -> list[str]:
        """The queues that hold QUEUED runs (not part of `Backend`: for DurableEnv)."""
        with self._lock:
            self._check_open()
            return sorted({r.queue for r in self._runs.values() if r.status is RunStatus.QUEUED})

    def recoverable(self, *, host: str) -> Sequence[Run]:
        """See `Backend.recoverable`."""
        with self._lock:
            self._check_open()
            now = self.now()
            prefix = f"{host}:"

            def needs_owner(run: Run) -> bool:
                if run.status is RunStatus.BLOCKED:
                    return True
                if run.status is RunStatus.QUEUED:
                    return run.started_at is not None
                if run.status is not RunStatus.RUNNING:
                    return False
                expired = run.lease_until is not None and run.lease_until < now
                return expired or (run.lease_owner or "").startswith(prefix)

            return [run for run in self._runs.values() if needs_owner(run)]

    def renew_leases(self, owner: str, lease: float) -> int:
        """See `Backend.renew_leases`."""
        with self._lock:
            self._check_open()
            until = self.now() + lease
            renewed = 0
            for run_id, run in self._runs.items():
                if run.status is RunStatus.RUNNING and run.lease_owner == owner:
                    self._runs[run_id] = dataclasses.replace(run, lease_until=until)
                    renewed += 1
            return renewed

    def release_run(self, run_id: str, epoch: int) -> bool:
        """See `Backend.release_run`."""
        with self._lock:
            self._check_open()
            run = self._runs.get(run_id)
            if run is None or run.epoch != epoch or run.status is not RunStatus.RUNNING:
                return False
            self._runs[run_id] = dataclasses.replace(
                run, status=RunStatus.QUEUED, lease_owner=None, lease_until=None
            )
        self._hub.notify(f"queue:{run.queue}")
        return True

    def cancel_run(self, run_id: str) -> Run | None:
        """See `Backend.cancel_run`."""
        changed: list[str] = []
        woken: list[tuple[str | None, str]] = []
        with self._lock:
            self._check_open()
            if run_id not in self._runs:
                return None
            now = self.now()
            tree, frontier = {run_id}, {run_id}
            while frontier:
                frontier = {r.id for r in self._runs.values() if r.parent_id in frontier} - tree
                tree |= frontier
            for member in tree:
                run = self._runs[member]
                if run.status in (RunStatus.QUEUED, RunStatus.BLOCKED):
                    self._runs[member] = dataclasses.replace(
                        run,
                        status=RunStatus.CANCELLED,
                        lease_owner=None,
                        lease_until=None,
                        updated_at=now,
                        finished_at=now,
                    )
                    woken.append((run.parent_id, f"run:{member}"))
                elif run.status is RunStatus.RUNNING and not run.cancel_requested:
                    self._runs[member] = dataclasses.replace(run, cancel_requested=True)
                elif run.status is RunStatus.WAITING:
                    # Queued again, to receive Cancelled at the wait it sleeps in.
                    self._runs[member] = dataclasses.replace(
                        run,
                        status=RunStatus.QUEUED,
                        cancel_requested=True,
                        wake_at=None,
                        waiting_on=None,
                        updated_at=now,
                    )
                    changed.append(f"queue:{run.queue}")
                else:
                    continue
                changed.append(f"run:{member}")
            for parent, topic in woken:
                changed += self._wake(parent, topic)
            result = self._runs[run_id]
        self._notify(changed)
        return result

    def purge(self, *, finished_before: float, limit: int, dry_run: bool = False) -> int:
        """See `Backend.purge`."""
        if limit < 1:
            raise ValueError(f"purge() deletes at least one run per batch; limit was {limit}.")
        with self._lock:
            self._check_open()

            def relative(run: Run) -> Relative:
                finished = run.finished_at if run.status.finished else None
                return run.id, run.parent_id, finished is not None and finished < finished_before

            children: dict[str, list[Run]] = {}
            for run in self._runs.values():
                if run.parent_id is not None:
                    children.setdefault(run.parent_id, []).append(run)
            oldest = sorted(
                (run for run in self._runs.values() if relative(run)[2]),
                key=lambda run: (run.created_at, run.id),
            )
            allowed = may_go(
                [(run.id, run.parent_id) for run in oldest],
                runs=lambda ids: [relative(self._runs[i]) for i in ids if i in self._runs],
                children=lambda ids: [relative(c) for i in ids for c in children.get(i, ())],
            )
            going = [run.id for run in oldest if run.id in allowed][:limit]
            if not dry_run:
                for run_id in going:
                    del self._runs[run_id]
                    self._history.pop(run_id, None)
                    self._events.pop(run_id, None)
                gone = set(going)
                self._actions = [a for a in self._actions if a.run_id not in gone]
            return len(going)

    def watch(self, topics: Sequence[str]) -> Watch:
        """See `Backend.watch`. Only this process's changes are heard."""
        return self._hub.watch(topics)

    def close(self) -> None:
        """Forget everything; further calls raise StorageError."""
        with self._lock:
            self._closed = True
            self._runs.clear()
            self._history.clear()
        self._hub.notify_all()
