"""The memory backend's operator side: listing runs, statistics, retries, actions.

A mixin of `MemoryBackend`, sharing its lock and dictionaries; the reference for what
`_sql_inspect.py` does with SQL.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Literal

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


class InspectMixin:
    """Inspecting and operating runs for `MemoryBackend` (see `Backend`)."""

    _lock: threading.Lock
    _runs: dict[str, Run]
    _history: dict[str, dict[int, Step]]
    _actions: list[Action]
    _check_open: Callable[[], None]
    _notify: Callable[[list[str]], None]
    now: Callable[[], float]

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
            )

        with self._lock:
            self._check_open()
            found = [run for run in self._runs.values() if matches(run)]
        return sorted(found, key=lambda run: (run.created_at, run.id), reverse=True)

    def list_runs(self, query: RunQuery, *, limit: int) -> Sequence[Run]:
        """See `Backend.list_runs`."""
        return self._matching(query)[: max(1, limit)]

    def count_runs(self, query: RunQuery) -> int:
        """See `Backend.count_runs`."""
        return len(self._matching(query))

    def outcomes(
        self, kind: Literal["run", "task"], *, since: float, name: str | None = None
    ) -> Sequence[Outcome]:
        """See `Backend.outcomes`."""
        with self._lock:
            self._check_open()
            if kind == "run":
                return [
                    Outcome(
                        name=run.workflow,
                        status=run.status.value,
                        started_at=run.started_at if run.started_at is not None else run.created_at,
                        finished_at=run.finished_at,
                    )
                    for run in self._runs.values()
                    if run.status.finished
                    and run.created_at >= since
                    and (name is None or run.workflow == name)
                ]
            return [
                Outcome(
                    name=step.name,
                    status=step.status.value,
                    started_at=step.started_at,
                    finished_at=step.finished_at,
                )
                for steps in self._history.values()
                for step in steps.values()
                if step.kind is StepKind.TASK
                and step.status.finished
                and step.started_at is not None
                and step.started_at >= since
                and (name is None or step.name == name)
            ]

    def retry_run(self, run_id: str, positions: Sequence[int]) -> Run | None:
        """See `Backend.retry_run`."""
        with self._lock:
            self._check_open()
            run = self._runs.get(run_id)
            if run is None or run.status not in (RunStatus.FAILED, RunStatus.DEAD):
                return run
            steps = self._history.get(run_id, {})
            for position in positions:
                step = steps.get(position)
                if step is not None and step.status is StepStatus.FAILED:
                    del steps[position]
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
                updated_at=self.now(),
            )
        self._notify([f"queue:{run.queue}"])
        return run

    def record_action(self, run_id: str, action: str, *, actor: str | None, detail: str) -> Action:
        """See `Backend.record_action`."""
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
        """See `Backend.actions`."""
        with self._lock:
            self._check_open()
            return [action for action in self._actions if action.run_id == run_id]
