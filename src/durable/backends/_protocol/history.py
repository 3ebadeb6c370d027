"""The history role of the storage seam: the steps a run has recorded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from durable.core.records import Step


class HistoryStore(Protocol):
    """Each run's history: one step per position, written by the run's owner only."""

    def load_history(self, run_id: str) -> Sequence[Step]:
        """Return every recorded step of the run, ordered by position, in one read."""
        ...

    def record(self, step: Step, epoch: int) -> tuple[Step, int]:
        """Store *step* at its position, fenced by the run's epoch.

        The fence and the write are one atomic step: a claim that bumps the epoch
        comes either before it (nothing is written) or after it. A position holding a
        finished step is never changed: the stored step is returned instead (first
        writer wins, also between concurrent calls). A RUNNING, RETRYING or WAITING step
        may be replaced; the position keeps the ``started_at`` of its first write.

        Returns:
            The step now stored at the position (*step*, or the finished one found
            there), and the run's requests as bits: `CANCEL_REQUEST` (cancellation
            requested), `PAUSE_REQUEST` (pause requested while it runs).

        Raises:
            LeaseLost: the run's epoch is no longer *epoch*; nothing was written.
        """
        ...

    def record_steps(self, steps: Sequence[Step], epoch: int) -> tuple[list[Step], int]:
        """Store several steps of one run in one commit, each as `record` would alone.

        The runtime writes a
        task's result together with the start of the next task (no commit of its own for
        the start, see docs/architecture.md): the two are never seen apart.

        Returns:
            The steps now stored at their positions, in order, and the run's
            requests (as `record`).

        Raises:
            LeaseLost: the run's epoch is no longer *epoch*; nothing was written.
        """
        ...

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
        """A task attempt is alive: set its step's ``heartbeat_at`` (now) and, unless
        *details* is None, its ``details``; only while the step at *position* is that
        attempt (*attempt*, RUNNING) and the run is at *epoch*. With a *gap* (the task's
        ``heartbeat``), the step's ``wake_at`` becomes now + *gap*: the moment the
        attempt counts as hung unless it heartbeats again (see `RunStore.recoverable`).

        Returns:
            Whether cancellation of the run has been requested (then nothing is
            written: the attempt is to stop).

        Raises:
            LeaseLost: the run's epoch moved on, or the attempt is no longer running
                there (fenced: another owner, or its outcome is recorded); nothing
                was written.
        """
        ...
