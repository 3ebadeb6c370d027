"""The memory backend's hand-over of a run to its successor (continue-as-new).

A mixin of `MemoryBackend`; the reference for what `sql/_continuing.py` does with SQL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from durable.core.chains import successor_taken
from durable.core.records import NewRun, RunStatus, Step

from ._base import MemoryBase, queued_run


class MemoryContinuing(MemoryBase):
    """`RunStore.continue_run` for `MemoryBackend` (see there for the contract)."""

    _record: Callable[[Step, int], tuple[Step, int]]
    _ensure_queue: Callable[[NewRun], None]

    def continue_run(
        self,
        run_id: str,
        epoch: int,
        successor: NewRun,
        *,
        last_step: Step | None = None,
        state: bytes | None = None,
    ) -> bool:
        """See `RunStore.continue_run`."""
        with self._lock:
            self._check_open()
            run = self._runs.get(run_id)
            if (
                run is None
                or run.epoch != epoch
                or run.status.finished
                or run.parent_id is not None
            ):
                return False
            if successor.id in self._runs:
                raise successor_taken(successor.id, run_id)
            self._ensure_queue(successor)
            if last_step is not None:
                self._record(last_step, epoch)
            now = self.now()
            self._runs[run_id] = dataclasses.replace(
                run,
                status=RunStatus.CONTINUED,
                output=None,
                error=None,
                lease_owner=None,
                lease_until=None,
                updated_at=now,
                finished_at=now,
                state=run.state if state is None else state,
            )
            self._runs[successor.id] = queued_run(successor, now, requests=run)
            self._history[successor.id] = {}
            self._copy_attributes(run_id, successor.id)
            inbox = self._events.pop(run_id, [])
            kept = [event for event in inbox if event.consumed_position is not None]
            moved = [
                dataclasses.replace(event, run_id=successor.id)
                for event in inbox
                if event.consumed_position is None
            ]
            if kept:
                self._events[run_id] = kept
            if moved:
                self._events[successor.id] = moved
            self._adopt(run_id, successor.id)
        self._notify([f"run:{run_id}", f"queue:{successor.queue}"])
        return True

    def _adopt(self, run_id: str, successor_id: str) -> None:
        """Make *run_id*'s unfinished children *successor_id*'s (the lock held)."""
        for child_id in sorted(self._children.pop(run_id, ())):
            child = self._runs.get(child_id)
            if child is None or child.parent_id != run_id:
                continue  # purged, or moved before
            parent = run_id if child.status.finished else successor_id  # a finished one stays
            if parent == successor_id:
                self._runs[child_id] = dataclasses.replace(child, parent_id=successor_id)
            self._children.setdefault(parent, set()).add(child_id)
