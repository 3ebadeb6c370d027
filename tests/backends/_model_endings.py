"""The model's runs ending: finished (with their last step), continued as new (their
successor takes their requests, unconsumed events and unfinished children) or forked
(a new run holding copies of their finished steps)."""

from __future__ import annotations

import dataclasses

from durable.core.records import NewRun, RunStatus, Step
from tests.backends._model_claims import ModelClaims
from tests.backends._model_history import ModelHistory
from tests.backends._model_records import Raised, RunView


class ModelEndings(ModelClaims, ModelHistory):
    """`finish_run`, `continue_run`, `fork_run`."""

    def finish_run(
        self,
        run_id: str,
        epoch: int,
        status: RunStatus,
        *,
        output: bytes | None,
        error: bytes | None,
        last_step: Step | None = None,
        state: bytes | None = None,
    ) -> bool:
        """`Backend.finish_run`: the last step, if any, recorded with the outcome."""
        run = self.runs.get(run_id)
        if run is None or run.epoch != epoch or run.status.finished:
            return False
        if last_step is not None:
            self.record(last_step, epoch)
        self.runs[run_id] = dataclasses.replace(
            run,
            status=status,
            output=output,
            error=error,
            owner=None,
            lease=None,
            finished=status.finished,
            state=run.state if state is None else state,
        )
        if status.finished:
            self._wake(run.parent, f"run:{run_id}")
        return True

    def continue_run(
        self,
        run_id: str,
        epoch: int,
        successor: NewRun,
        *,
        last_step: Step | None,
        state: bytes | None,
    ) -> bool | Raised:
        """`Backend.continue_run`: fenced by *epoch* and the run being unfinished and
        top-level; the run ends CONTINUED (with its last step, as `finish_run`), its
        successor is queued with its requests, unconsumed events and unfinished
        children. A successor id that is taken changes nothing."""
        run = self.runs.get(run_id)
        if run is None or run.epoch != epoch or run.status.finished or run.parent is not None:
            return False
        if successor.id in self.runs:
            return Raised("IdempotencyConflict", successor.id)
        self._ensure_queue(successor)
        if last_step is not None:
            self.record(last_step, epoch)
        self.runs[run_id] = dataclasses.replace(
            run,
            status=RunStatus.CONTINUED,
            output=None,
            error=None,
            owner=None,
            lease=None,
            finished=True,
            state=run.state if state is None else state,
        )
        created, _ = self.create(successor)
        assert created is not None
        self.runs[successor.id] = dataclasses.replace(created, cancel=run.cancel, pause=run.pause)
        inbox = self.inbox.pop(run_id, [])
        self.inbox[run_id] = [e for e in inbox if e.consumed_position is not None]
        self.inbox[successor.id] = [
            dataclasses.replace(e, run_id=successor.id)
            for e in inbox
            if e.consumed_position is None
        ]
        for child_id, child in self.runs.items():
            if child.parent == run_id and not child.status.finished:
                self.runs[child_id] = dataclasses.replace(child, parent=successor.id)
        return True

    def fork_run(self, original_id: str, new: NewRun, before: int) -> RunView | None:
        """`Backend.fork_run`: *new* queued, holding copies of the original's finished
        steps below *before*; None (nothing written) without the original or when
        *new*'s id is taken."""
        if original_id not in self.runs or new.id in self.runs:
            return None
        run, _ = self.create(new)
        self.history[new.id] = {
            position: dataclasses.replace(step, run_id=new.id)
            for position, step in sorted(self.history[original_id].items())
            if position < before and step.status.finished
        }
        return run
