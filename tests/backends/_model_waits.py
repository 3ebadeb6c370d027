"""The model's waits: a run suspended on a timer, a child or an event (``events|``: any
event), woken when what it waits for happens (`suspend_run`, `wake_due`)."""

from __future__ import annotations

import dataclasses

from durable.core.records import RunStatus
from tests.backends._model_records import ANY_EVENT
from tests.backends._model_state import ModelState


class ModelWaits(ModelState):
    """`suspend_run` and `wake_due`, and the waking of a waiting run."""

    def _wake(self, run_id: str | None, waiting_on: str | None = None) -> None:
        """Queue *run_id* if it is WAITING on *waiting_on* (any wait if None); one that
        waits ``events|...`` takes any ``event:`` too."""
        run = self.runs.get(run_id) if run_id is not None else None
        if run is None or run.status is not RunStatus.WAITING:
            return
        if waiting_on is not None:
            awaited = run.waiting_on or ""
            any_event = awaited.startswith(ANY_EVENT)
            named = awaited.removeprefix(ANY_EVENT)
            if named != waiting_on and not (any_event and waiting_on.startswith("event:")):
                return
        assert run_id is not None
        self.runs[run_id] = dataclasses.replace(
            run, status=RunStatus.QUEUED, wake=None, waiting_on=None
        )

    def suspend_run(
        self, run_id: str, epoch: int, *, timer: str | None, waiting_on: str | None
    ) -> RunStatus | None:
        """`Backend.suspend_run` with a timer long *past*, *later* (far away), a *nap*
        (due by the time anyone looks), or None."""
        run = self.runs.get(run_id)
        if run is None or run.epoch != epoch or run.status is not RunStatus.RUNNING:
            return None
        over = timer == "past" or self._satisfied(run_id, waiting_on)
        if over:
            self.runs[run_id] = dataclasses.replace(
                run, status=RunStatus.QUEUED, owner=None, lease=None, wake=None, waiting_on=None
            )
            return RunStatus.QUEUED
        self.runs[run_id] = dataclasses.replace(
            run,
            status=RunStatus.WAITING,
            owner=None,
            lease=None,
            wake={None: None, "later": "later", "nap": "due"}[timer],
            waiting_on=waiting_on,
        )
        if timer == "nap":
            self.napped[run_id] = next(self._clock)
        return RunStatus.WAITING

    def _satisfied(self, run_id: str, waiting_on: str | None) -> bool:
        awaited = waiting_on or ""
        unconsumed = [e for e in self.inbox.get(run_id, []) if e.consumed_position is None]
        if awaited.startswith(ANY_EVENT) and unconsumed:
            return True
        kind, _, name = awaited.removeprefix(ANY_EVENT).partition(":")
        if kind == "event":
            return any(e.name == name for e in unconsumed)
        other = self.runs.get(name) if kind == "run" else None
        return other is not None and other.status.finished

    def wake_due(self, limit: int) -> int:
        """`Backend.wake_due`: napping runs are the due ones, the earliest nap first."""
        due = sorted(
            (i for i, r in self.runs.items() if r.status is RunStatus.WAITING and r.wake == "due"),
            key=lambda run_id: self.napped[run_id],
        )[:limit]
        for run_id in due:
            self._wake(run_id)
        return len(due)
