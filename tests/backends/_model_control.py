"""The model's control of a run and the tree below it: cancelled, paused, resumed (a
cancelled root reopened from a position) and parked by its owner."""

from __future__ import annotations

import dataclasses

from durable.core.records import RunStatus
from tests.backends._model_records import RunView
from tests.backends._model_waits import ModelWaits


class ModelControl(ModelWaits):
    """`cancel_run`, `pause_run`, `resume_run`, `park_run`."""

    def _tree(self, run_id: str) -> list[str]:
        """*run_id* and every run below it."""
        tree, frontier = {run_id}, {run_id}
        while frontier:
            frontier = {i for i, r in self.runs.items() if r.parent in frontier} - tree
            tree |= frontier
        return sorted(tree)

    def cancel_run(self, run_id: str) -> RunView | None:
        """`Backend.cancel_run`: decided for each member of the tree by its status before."""
        if run_id not in self.runs:
            return None
        stopped: list[str] = []
        for member in self._tree(run_id):
            run = self.runs[member]
            if run.status is RunStatus.BLOCKED or (
                run.status in (RunStatus.QUEUED, RunStatus.PAUSED) and not run.started
            ):
                # Never started (or cannot replay): nothing of its code is left to run.
                self.runs[member] = dataclasses.replace(
                    run, status=RunStatus.CANCELLED, owner=None, lease=None, finished=True
                )
                stopped.append(member)
            elif run.status is RunStatus.RUNNING:
                if not run.cancel:
                    self.runs[member] = dataclasses.replace(run, cancel=True, pause=False)
            elif run.status in (RunStatus.WAITING, RunStatus.PAUSED) or (
                run.status is RunStatus.QUEUED and not run.cancel
            ):
                # Started: queued with the request, so its code sees Cancelled.
                self.runs[member] = dataclasses.replace(
                    run,
                    status=RunStatus.QUEUED,
                    cancel=True,
                    pause=False,
                    wake=None,
                    waiting_on=None,
                )
        for member in stopped:
            self._wake(self.runs[member].parent, f"run:{member}")
        return self.runs[run_id]

    def pause_run(self, run_id: str) -> RunView | None:
        """`Backend.pause_run`: idle members stop at once (keeping their wait), running
        ones are asked; members asked to cancel are left alone."""
        if run_id not in self.runs:
            return None
        for member in self._tree(run_id):
            run = self.runs[member]
            if run.cancel:
                continue
            if run.status in (RunStatus.QUEUED, RunStatus.WAITING):
                self.runs[member] = dataclasses.replace(
                    run, status=RunStatus.PAUSED, owner=None, lease=None
                )
            elif run.status is RunStatus.RUNNING and not run.pause:
                self.runs[member] = dataclasses.replace(run, pause=True)
        return self.runs[run_id]

    def resume_run(self, run_id: str, drop_from: int | None) -> RunView | None:
        """`Backend.resume_run`: a CANCELLED root reopened (with *drop_from*), then paused
        members queued and pause requests withdrawn."""
        root = self.runs.get(run_id)
        if root is None:
            return None
        if root.status is RunStatus.CANCELLED and drop_from is not None:
            steps = self.history[run_id]
            for position in [p for p in steps if p >= drop_from]:
                del steps[position]
            self.inbox[run_id] = [
                e
                if e.consumed_position is None or e.consumed_position < drop_from
                else dataclasses.replace(e, consumed_position=None)
                for e in self.inbox.get(run_id, [])
            ]
            self.runs[run_id] = dataclasses.replace(
                root,
                status=RunStatus.QUEUED,
                output=None,
                error=None,
                finished=False,
                state=None,
                recoveries=0,
                cancel=False,
                pause=False,
                wake=None,
                waiting_on=None,
            )
        for member in self._tree(run_id):
            run = self.runs[member]
            if run.status is RunStatus.PAUSED:
                self.runs[member] = dataclasses.replace(
                    run, status=RunStatus.QUEUED, pause=False, wake=None, waiting_on=None
                )
            elif run.pause:
                self.runs[member] = dataclasses.replace(run, pause=False)
        return self.runs[run_id]

    def park_run(self, run_id: str, epoch: int) -> RunStatus | None:
        """`Backend.park_run`: the owner stops its RUNNING run, PAUSED if still asked."""
        run = self.runs.get(run_id)
        if run is None or run.epoch != epoch or run.status is not RunStatus.RUNNING:
            return None
        status = RunStatus.PAUSED if run.pause else RunStatus.QUEUED
        self.runs[run_id] = dataclasses.replace(
            run, status=status, pause=False, owner=None, lease=None
        )
        return status
