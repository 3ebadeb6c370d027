"""The memory backend's operator side: listing runs, statistics, retries, actions, and
purging old finished runs.

A mixin of `MemoryBackend` (it shares that class's lock and dictionaries, see
`MemoryBase`); the reference for what `sql/_inspection.py` does with SQL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

from durable.backends._purging import Relative, may_go
from durable.core.records import (
    Action,
    Outcome,
    Run,
    RunQuery,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
)

from ._base import MemoryBase


class MemoryInspection(MemoryBase):
    """`InspectionStore` for `MemoryBackend` (see there for the contracts)."""

    def _matching(self, query: RunQuery) -> list[Run]:
        def matches(run: Run) -> bool:
            return (
                (query.workflow is None or run.workflow == query.workflow)
                and (not query.statuses or run.status in query.statuses)
                and (query.queue is None or run.queue == query.queue)
                and (query.since is None or run.created_at >= query.since)
                and (query.until is None or run.created_at < query.until)
                and (query.parent_id is None or run.parent_id == query.parent_id)
                and (query.id_contains is None or query.id_contains in run.id)
                and (query.after is None or (run.created_at, run.id) < query.after)
                and (query.version is None or run.version == query.version)
                and (not query.attributes or self._has_attributes(run.id, query.attributes))
            )

        with self._lock:
            self._check_open()
            found = [run for run in self._runs.values() if matches(run)]
        return sorted(found, key=lambda run: (run.created_at, run.id), reverse=True)

    def list_runs(self, query: RunQuery, *, limit: int) -> Sequence[Run]:
        """See `InspectionStore.list_runs`."""
        return self._matching(query)[: max(1, limit)]

    def count_runs(self, query: RunQuery) -> int:
        """See `InspectionStore.count_runs`."""
        return len(self._matching(query))

    def outcomes(
        self,
        kind: Literal["run", "task"],
        *,
        since: float,
        name: str | None = None,
        workflow: str | None = None,
    ) -> Sequence[Outcome]:
        """See `InspectionStore.outcomes`."""
        with self._lock:
            self._check_open()
            kept = [
                outcome
                for run_id, of, run_workflow, outcome in self._attempts
                if of == kind
                and outcome.started_at is not None
                and outcome.started_at >= since
                and (name is None or outcome.name == name)
                and (workflow is None or run_workflow == workflow)
            ]
            return [*self._outcomes(kind, since, name, workflow), *kept]

    def _outcomes(
        self, kind: str, since: float, name: str | None, workflow: str | None
    ) -> list[Outcome]:
        if kind == "run":
            return [
                _outcome(run.workflow, run.status, _start(run), run)
                for run in self._runs.values()
                if run.created_at >= since and (name is None or run.workflow == name)
            ]
        return [
            _outcome(step.name, step.status, step.started_at, step)
            for run_id, steps in self._history.items()
            if workflow is None or self._runs[run_id].workflow == workflow
            for step in steps.values()
            if step.kind is StepKind.TASK
            and step.status.finished
            and step.started_at is not None
            and step.started_at >= since
            and (name is None or step.name == name)
        ]

    def retry_run(self, run_id: str, positions: Sequence[int]) -> Run | None:
        """See `InspectionStore.retry_run`."""
        with self._lock:
            self._check_open()
            run = self._runs.get(run_id)
            if run is None or run.status not in (RunStatus.FAILED, RunStatus.DEAD):
                return run
            # What the retry erases stays countable: statistics read it back.
            erased = [
                (run_id, "run", run.workflow, _outcome(run.workflow, run.status, _start(run), run))
            ]
            steps = self._history.get(run_id, {})
            for position in positions:
                step = steps.get(position)
                if step is not None and step.status is StepStatus.FAILED:
                    if step.kind is StepKind.TASK:
                        outcome = _outcome(step.name, step.status, step.started_at, step)
                        erased.append((run_id, "task", run.workflow, outcome))
                    del steps[position]
            self._attempts += [
                (i, k, w, dataclasses.replace(o, retried=True)) for i, k, w, o in erased
            ]
            run = self._runs[run_id] = dataclasses.replace(
                run,
                status=RunStatus.QUEUED,
                output=None,
                error=None,
                finished_at=None,
                recoveries=0,
                lease_owner=None,
                lease_until=None,
                cancel_requested=False,
                wake_at=None,
                waiting_on=None,
                state=None,
                updated_at=self.now(),
            )
        self._notify([f"queue:{run.queue}"])
        return run

    def record_action(self, run_id: str, action: str, *, actor: str | None, detail: str) -> Action:
        """See `InspectionStore.record_action`."""
        with self._lock:
            self._check_open()
            recorded = Action(
                id=len(self._actions) + 1,
                run_id=run_id,
                action=action,
                actor=actor,
                at=self.now(),
                detail=detail,
            )
            self._actions.append(recorded)
            return recorded

    def actions(self, run_id: str) -> Sequence[Action]:
        """See `InspectionStore.actions`."""
        with self._lock:
            self._check_open()
            return [action for action in self._actions if action.run_id == run_id]

    def state(self, run_id: str) -> tuple[bytes | None] | None:
        """See `InspectionStore.state`."""
        with self._lock:
            self._check_open()
            run = self._runs.get(run_id)
            if run is None:
                return None
            if run.state is not None:
                return (run.state,)
            steps = self._history.get(run_id, {})
            snapshots = (steps[p].state for p in sorted(steps, reverse=True))
            return (next((state for state in snapshots if state is not None), None),)

    def purge(self, *, finished_before: float, limit: int, dry_run: bool = False) -> int:
        """See `InspectionStore.purge`."""
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
                    self._attributes.pop(run_id, None)
                    self._drop_streams(run_id)
                gone = set(going)
                self._actions = [a for a in self._actions if a.run_id not in gone]
                self._attempts = [a for a in self._attempts if a[0] not in gone]
            return len(going)


def _start(run: Run) -> float:
    """When a run started, or was created if it never started."""
    return run.started_at if run.started_at is not None else run.created_at


def _outcome(
    name: str, status: RunStatus | StepStatus, started: float | None, of: Run | Step
) -> Outcome:
    return Outcome(name=name, status=status.value, started_at=started, finished_at=of.finished_at)
