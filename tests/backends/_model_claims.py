"""The model's runs created and claimed, and their leases: `create_run`, `claim_next`,
`claim_run`, `mark_progress`, `renew_leases`, `release_run`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from durable.core.records import NewRun, RunStatus
from tests.backends._model_flow import ModelFlowControl
from tests.backends._model_records import RunView


class ModelClaims(ModelFlowControl):
    """Creating runs, claiming them within the queues' limits, and their leases."""

    def create(self, new: NewRun) -> tuple[RunView | None, bool]:
        """`Backend.create_run`: a key limit gives the queue a row first, even when the
        id is known."""
        self._ensure_queue(new)
        existing = self.runs.get(new.id)
        if existing is not None:
            return existing, False
        owned = new.owner is not None
        run = RunView(
            workflow=new.workflow,
            input=new.input,
            call_hash=new.call_hash,
            parent=new.parent_id,
            queue=new.queue,
            priority=new.priority,
            status=RunStatus.RUNNING if owned else RunStatus.QUEUED,
            epoch=1 if owned else 0,
            owner=new.owner,
            lease="live" if owned else None,
            recoveries=0,
            cancel=False,
            started=owned,
            timeout=new.timeout,
            key=new.key,
            key_limit=new.key_limit,
            version=new.version,
            origin=new.origin,
        )
        self._add(new, run)
        return run, True

    def _claim(self, run_id: str, owner: str, *, takeover: bool, version: str | None) -> RunView:
        """A claim: a run started for the first time takes the claimer's *version*."""
        run = self.runs[run_id]
        self.runs[run_id] = claimed = dataclasses.replace(
            run,
            status=RunStatus.RUNNING,
            epoch=run.epoch + 1,
            owner=owner,
            lease="live",
            recoveries=run.recoveries + 1 if takeover else run.recoveries,
            started=True,
            wake=None,
            waiting_on=None,
            version=version if not run.started and version is not None else run.version,
        )
        return claimed

    def claim_next(
        self,
        owner: str,
        queue: str,
        workflows: Sequence[str],
        limit: int,
        *,
        version: str | None = None,
        only: str | None = None,
    ) -> list[tuple[str, RunView]]:
        """`Backend.claim_next`: with *only* (``only_version``), the runs of that
        version or of none (`durable.core.run_options.serves`)."""
        ready = sorted(
            (
                run_id
                for run_id, run in self.runs.items()
                if run.status is RunStatus.QUEUED
                and run.queue == queue
                and run.workflow in workflows
                and (only is None or run.version in (None, only))
            ),
            key=lambda run_id: (-self.runs[run_id].priority, self.created[run_id]),
        )
        limits = self.queues.get(queue)
        chosen = ready[:limit] if limits is None else self._choose(limits, ready, limit)
        return [
            (run_id, self._claim(run_id, owner, takeover=False, version=version))
            for run_id in chosen
        ]

    def claim_run(
        self,
        run_id: str,
        owner: str,
        epoch: int,
        dead_owner: str | None,
        *,
        version: str | None = None,
        only: str | None = None,
    ) -> RunView | None:
        """`Backend.claim_run`: *version* and *only* as for `claim_next`."""
        run = self.runs.get(run_id)
        if run is None or run.epoch != epoch:
            return None
        if only is not None and run.version not in (None, only):
            return None
        if run.status is RunStatus.RUNNING:
            dead = dead_owner is not None and run.owner == dead_owner
            if (run.lease == "expired" or dead or self._hung(run_id)) and self._admitted(run_id):
                return self._claim(run_id, owner, takeover=True, version=version)
            return None
        due = run.status is RunStatus.WAITING and run.wake == "due"
        if (run.status in (RunStatus.QUEUED, RunStatus.BLOCKED) or due) and self._admitted(run_id):
            return self._claim(run_id, owner, takeover=False, version=version)
        return None

    def mark_progress(self, run_id: str, epoch: int) -> None:
        """`Backend.mark_progress`."""
        run = self.runs.get(run_id)
        if run is not None and run.epoch == epoch:
            self.runs[run_id] = dataclasses.replace(run, recoveries=0)

    def renew_leases(self, owner: str, *, live: bool) -> int:
        """`Backend.renew_leases` with a lease in the future (*live*) or in the past."""
        mine = [
            run_id
            for run_id, run in self.runs.items()
            if run.status is RunStatus.RUNNING and run.owner == owner
        ]
        for run_id in mine:
            self.runs[run_id] = dataclasses.replace(
                self.runs[run_id], lease="live" if live else "expired"
            )
        return len(mine)

    def release_run(self, run_id: str, epoch: int) -> bool:
        """`Backend.release_run`."""
        run = self.runs.get(run_id)
        if run is None or run.epoch != epoch or run.status is not RunStatus.RUNNING:
            return False
        self.runs[run_id] = dataclasses.replace(
            run, status=RunStatus.QUEUED, owner=None, lease=None
        )
        return True
