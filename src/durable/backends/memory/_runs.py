"""The memory backend's runs and leases: creating, finishing, claiming.

A mixin of `MemoryBackend` (it shares that class's lock and dictionaries, see
`MemoryBase`); the reference for what `sql/_runs.py` does with SQL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from durable.backends._protocol.waits import TIMERS
from durable.core.queues import Queue
from durable.core.records import NewRun, Run, RunStatus, Step, StepStatus
from durable.core.run_options import claim_order, serves, serving
from durable.errors import ConfigurationError

from ._base import MemoryBase


class MemoryRuns(MemoryBase):
    """`RunStore` for `MemoryBackend` (see there for the contracts)."""

    _wake: Callable[[str | None, str | None], list[str]]
    _record: Callable[[Step, int], tuple[Step, int]]
    #: from `MemoryQueues`: what a queue's limits let a claim take.
    _limits: Callable[[str, list[Run], int, float], list[Run]]
    _admitted: Callable[[Run, float], bool]
    _ensure_queue: Callable[[NewRun], None]
    _queues: dict[str, Queue]

    def create_run(self, new: NewRun) -> tuple[Run, bool]:
        """See `RunStore.create_run`."""
        with self._lock:
            self._check_open()
            self._ensure_queue(new)
            existing = self._runs.get(new.id)
            if existing is not None:
                return existing, False
            now = self.now()
            owned = new.owner is not None
            later = None if owned else new.start_at
            status = RunStatus.QUEUED if later is None else RunStatus.WAITING
            run = Run(
                id=new.id,
                workflow=new.workflow,
                status=RunStatus.RUNNING if owned else status,
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
                deadline_at=None if new.timeout is None else now + new.timeout,
                key=new.key,
                key_limit=new.key_limit,
                wake_at=later,
                version=new.version,
                origin=new.origin,
                trace_context=new.trace_context,
                event_schemas=new.event_schemas,
            )
            self._runs[new.id] = run
            self._history[new.id] = {}
            self._set_attributes(new.id, new.attributes)
            if new.parent_id is not None:
                self._children.setdefault(new.parent_id, set()).add(new.id)
        if not owned:
            self._hub.notify(f"queue:{new.queue}" if later is None else TIMERS)
        return run, True

    def create_run_in(
        self,
        new: NewRun,
        transaction: object,
        *,
        committed: Callable[[Run], None] | None = None,
    ) -> tuple[Run, bool]:
        """See `RunStore.create_run_in`: memory has no transaction to share."""
        raise ConfigurationError(
            "connection= inserts the run in your database transaction, and the memory "
            "backend has none to share: use durable on the SQLite file or PostgreSQL "
            "database that your connection is on, or dispatch without connection=."
        )

    def create_runs(self, news: Sequence[NewRun]) -> Sequence[str]:
        """See `RunStore.create_runs`."""
        return [new.id for new in news if self.create_run(new)[1]]

    def get_run(self, run_id: str) -> Run | None:
        """See `RunStore.get_run`."""
        with self._lock:
            self._check_open()
            return self._runs.get(run_id)

    def finish_run(
        self,
        run_id: str,
        epoch: int,
        status: RunStatus,
        *,
        output: bytes | None = None,
        error: bytes | None = None,
        last_step: Step | None = None,
        state: bytes | None = None,
    ) -> bool:
        """See `RunStore.finish_run`."""
        with self._lock:
            self._check_open()
            run = self._runs.get(run_id)
            if run is None or run.epoch != epoch or run.status.finished:
                return False
            if last_step is not None:
                self._record(last_step, epoch)
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
                state=run.state if state is None else state,
            )
            woken = self._wake(run.parent_id, f"run:{run_id}") if status.finished else []
        self._notify([f"run:{run_id}", *woken])
        return True

    def claim_run(
        self,
        run_id: str,
        *,
        owner: str,
        lease: float,
        epoch: int,
        dead_owner: str | None = None,
        version: str | None = None,
        only_version: bool = False,
    ) -> Run | None:
        """See `RunStore.claim_run`."""
        only = serving(version, only_version)
        with self._lock:
            self._check_open()
            run = self._runs.get(run_id)
            if run is None or run.epoch != epoch:
                return None
            if only is not None and not serves(run, only):
                return None
            now = self.now()
            if run.status is RunStatus.RUNNING:
                expired = run.lease_until is not None and run.lease_until < now
                dead = dead_owner is not None and run.lease_owner == dead_owner
                if not (expired or dead or self._hung(run.id, now)):
                    return None
                if not self._admitted(run, now):
                    return None
                return self._claim(run, owner, lease, now, run.recoveries + 1, version=version)
            due = run.status is RunStatus.WAITING and run.wake_at is not None and run.wake_at <= now
            if (run.status in (RunStatus.QUEUED, RunStatus.BLOCKED) or due) and self._admitted(
                run, now
            ):
                return self._claim(run, owner, lease, now, run.recoveries, version=version)
            return None

    def _hung(self, run_id: str, now: float) -> bool:
        """Whether a task attempt of the run is past its heartbeat deadline."""
        return any(
            step.status is StepStatus.RUNNING and step.wake_at is not None and step.wake_at < now
            for step in self._history.get(run_id, {}).values()
        )

    def _claim(
        self,
        run: Run,
        owner: str,
        lease: float,
        now: float,
        recoveries: int,
        *,
        version: str | None,
    ) -> Run:
        first = run.started_at is None
        claimed = dataclasses.replace(
            run,
            status=RunStatus.RUNNING,
            epoch=run.epoch + 1,
            lease_owner=owner,
            lease_until=now + lease,
            recoveries=recoveries,
            updated_at=now,
            started_at=now if first else run.started_at,
            wake_at=None,
            waiting_on=None,
            # The version of the code that first executes a run (see `claim_next`).
            version=version if first and version is not None else run.version,
        )
        self._runs[run.id] = claimed
        return claimed

    def mark_progress(self, run_id: str, epoch: int) -> None:
        """See `RunStore.mark_progress`."""
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
        version: str | None = None,
        only_version: bool = False,
    ) -> Sequence[Run]:
        """See `RunStore.claim_next`."""
        only = serving(version, only_version)
        with self._lock:
            self._check_open()
            names = set(workflows)
            ready = [
                run
                for run in self._runs.values()
                if run.status is RunStatus.QUEUED
                and run.queue == queue
                and run.workflow in names
                and (only is None or serves(run, only))
            ]
            ready.sort(key=claim_order)
            now = self.now()
            chosen = self._limits(queue, ready, limit, now)
            return [
                self._claim(run, owner, lease, now, run.recoveries, version=version)
                for run in chosen
            ]

    def queued_workflows(self, queues: Sequence[str]) -> Sequence[str]:
        """See `RunStore.queued_workflows`."""
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
        """See `RunStore.recoverable`."""
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
                mine = (run.lease_owner or "").startswith(prefix)
                return expired or mine or self._hung(run.id, now)

            return [run for run in self._runs.values() if needs_owner(run)]

    def renew_leases(self, owner: str, lease: float) -> int:
        """See `RunStore.renew_leases`."""
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
        """See `RunStore.release_run`."""
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
