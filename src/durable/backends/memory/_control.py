"""The memory backend's control of runs from outside: cancelling, pausing, resuming.

A mixin of `MemoryBackend`; the reference for what `sql/_control.py` does with SQL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from durable.core.records import NewRun, Run, RunStatus

from ._base import MemoryBase, queued_run

_IDLE = (RunStatus.QUEUED, RunStatus.WAITING)


class MemoryControl(MemoryBase):
    """`ControlStore` for `MemoryBackend` (see there for the contracts)."""

    _wake: Callable[[str | None, str | None], list[str]]
    _ensure_queue: Callable[[NewRun], None]

    def _tree(self, run_id: str) -> set[str]:
        """*run_id* and every run below it."""
        tree, frontier = {run_id}, {run_id}
        while frontier:
            frontier = {r.id for r in self._runs.values() if r.parent_id in frontier} - tree
            tree |= frontier
        return tree

    def cancel_run(self, run_id: str) -> Run | None:
        """See `ControlStore.cancel_run`."""
        changed: list[str] = []
        woken: list[tuple[str | None, str]] = []
        with self._lock:
            self._check_open()
            if run_id not in self._runs:
                return None
            now = self.now()
            for member in self._tree(run_id):
                run = self._runs[member]
                started = run.started_at is not None
                if run.status is RunStatus.BLOCKED or (
                    run.status in (RunStatus.QUEUED, RunStatus.PAUSED) and not started
                ):
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
                    self._runs[member] = dataclasses.replace(
                        run, cancel_requested=True, pause_requested=False
                    )
                elif run.status in (RunStatus.WAITING, RunStatus.PAUSED) or (
                    run.status is RunStatus.QUEUED and not run.cancel_requested
                ):
                    # Queued (again) with the request, to receive Cancelled in its code:
                    # at the wait it sleeps in, or at its next durable call.
                    self._runs[member] = dataclasses.replace(
                        run,
                        status=RunStatus.QUEUED,
                        cancel_requested=True,
                        pause_requested=False,
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

    def pause_run(self, run_id: str) -> Run | None:
        """See `ControlStore.pause_run`."""
        changed: list[str] = []
        with self._lock:
            self._check_open()
            if run_id not in self._runs:
                return None
            now = self.now()
            for member in self._tree(run_id):
                run = self._runs[member]
                if run.cancel_requested:
                    continue
                if run.status in _IDLE:
                    self._runs[member] = dataclasses.replace(
                        run,
                        status=RunStatus.PAUSED,
                        lease_owner=None,
                        lease_until=None,
                        updated_at=now,
                    )
                elif run.status is RunStatus.RUNNING and not run.pause_requested:
                    self._runs[member] = dataclasses.replace(run, pause_requested=True)
                else:
                    continue
                changed.append(f"run:{member}")
            result = self._runs[run_id]
        self._notify(changed)
        return result

    def resume_run(self, run_id: str, *, drop_from: int | None = None) -> Run | None:
        """See `ControlStore.resume_run`."""
        changed: list[str] = []
        with self._lock:
            self._check_open()
            root = self._runs.get(run_id)
            if root is None:
                return None
            now = self.now()
            if root.status is RunStatus.CANCELLED and drop_from is not None:
                steps = self._history.get(run_id, {})
                for position in [p for p in steps if p >= drop_from]:
                    del steps[position]
                self._events[run_id] = [
                    event
                    if event.consumed_position is None or event.consumed_position < drop_from
                    else dataclasses.replace(event, consumed_position=None)
                    for event in self._events.get(run_id, [])
                ]
                self._runs[run_id] = dataclasses.replace(
                    root,
                    status=RunStatus.QUEUED,
                    output=None,
                    error=None,
                    finished_at=None,
                    recoveries=0,
                    cancel_requested=False,
                    pause_requested=False,
                    wake_at=None,
                    waiting_on=None,
                    state=None,
                    updated_at=now,
                )
                changed.append(f"queue:{root.queue}")
            for member in self._tree(run_id):
                run = self._runs[member]
                if run.status is RunStatus.PAUSED:
                    self._runs[member] = dataclasses.replace(
                        run,
                        status=RunStatus.QUEUED,
                        pause_requested=False,
                        wake_at=None,
                        waiting_on=None,
                        updated_at=now,
                    )
                    changed += [f"run:{member}", f"queue:{run.queue}"]
                elif run.pause_requested:
                    self._runs[member] = dataclasses.replace(run, pause_requested=False)
                    changed.append(f"run:{member}")
            result = self._runs[run_id]
        self._notify(changed)
        return result

    def fork_run(self, original_id: str, new: NewRun, *, before: int) -> Run | None:
        """See `ControlStore.fork_run`."""
        with self._lock:
            self._check_open()
            if original_id not in self._runs or new.id in self._runs:
                return None
            self._ensure_queue(new)
            now = self.now()
            run = queued_run(new, now)
            self._runs[new.id] = run
            self._copy_attributes(original_id, new.id)
            self._history[new.id] = {
                position: dataclasses.replace(step, run_id=new.id)
                for position, step in sorted(self._history.get(original_id, {}).items())
                if position < before and step.status.finished
            }
        self._notify([f"queue:{new.queue}"])
        return run

    def cancelling(self, owner: str) -> Sequence[str]:
        """See `ControlStore.cancelling`."""
        with self._lock:
            self._check_open()
            return [
                run.id
                for run in self._runs.values()
                if run.status is RunStatus.RUNNING
                and run.lease_owner == owner
                and run.cancel_requested
            ]

    def park_run(self, run_id: str, epoch: int) -> RunStatus | None:
        """See `ControlStore.park_run`."""
        with self._lock:
            self._check_open()
            run = self._runs.get(run_id)
            if run is None or run.epoch != epoch or run.status is not RunStatus.RUNNING:
                return None
            status = RunStatus.PAUSED if run.pause_requested else RunStatus.QUEUED
            self._runs[run_id] = dataclasses.replace(
                run,
                status=status,
                pause_requested=False,
                lease_owner=None,
                lease_until=None,
                updated_at=self.now(),
            )
        self._notify([f"run:{run_id}", f"queue:{run.queue}"])
        return status
