"""The memory backend's histories: loading a run's steps and recording them.

A mixin of `MemoryBackend` (it shares that class's lock and dictionaries, see
`MemoryBase`); the reference for what `sql/_history.py` does with SQL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from durable.core.records import Step, StepStatus, either, requests
from durable.errors import LeaseLost

from ._base import MemoryBase, written_over


class MemoryHistory(MemoryBase):
    """`HistoryStore` for `MemoryBackend` (see there for the contracts)."""

    def load_history(self, run_id: str) -> Sequence[Step]:
        """See `HistoryStore.load_history`."""
        with self._lock:
            self._check_open()
            steps = self._history.get(run_id, {})
            return [steps[p] for p in sorted(steps)]

    def record(self, step: Step, epoch: int) -> tuple[Step, int]:
        """See `HistoryStore.record`."""
        with self._lock:
            self._check_open()
            return self._record(step, epoch)

    def record_steps(self, steps: Sequence[Step], epoch: int) -> tuple[list[Step], int]:
        """See `HistoryStore.record_steps`."""
        with self._lock:  # the fence is checked by the first; nothing happens in between
            self._check_open()
            done = [self._record(step, epoch) for step in steps]
            return [stored for stored, _ in done], either(flags for _, flags in done)

    def _record(self, step: Step, epoch: int) -> tuple[Step, int]:
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
            return existing, requests(run)
        stored = step if step.epoch == epoch else dataclasses.replace(step, epoch=epoch)
        steps[step.position] = written_over(stored, existing)
        return stored, requests(run)

    def heartbeat(
        self,
        run_id: str,
        position: int,
        epoch: int,
        attempt: int,
        details: bytes | None,
        *,
        gap: float | None = None,
    ) -> bool:
        """See `HistoryStore.heartbeat`."""
        with self._lock:
            self._check_open()
            run = self._runs.get(run_id)
            step = self._history[run_id].get(position) if run is not None else None
            if (
                run is None
                or run.epoch != epoch
                or step is None
                or step.status is not StepStatus.RUNNING
                or step.attempts != attempt
            ):
                raise LeaseLost(
                    f"Run {run_id!r} no longer runs attempt {attempt} at position {position} "
                    f"under epoch {epoch}: another owner took it over, or it ended.",
                    run_id=run_id,
                    epoch=epoch,
                )
            if run.cancel_requested:
                return True
            now = self.now()
            self._history[run_id][position] = dataclasses.replace(
                step,
                heartbeat_at=now,
                details=step.details if details is None else details,
                wake_at=step.wake_at if gap is None else now + gap,
            )
            return False
