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

    def record(self, step: Step, epoch: int) -> tuple[Step, bool]:
        """Store *step* at its position, fenced by the run's epoch.

        The fence and the write are one atomic step: a claim that bumps the epoch
        comes either before it (nothing is written) or after it. A position holding a
        finished step is never changed: the stored step is returned instead (first
        writer wins, also between concurrent calls). A RETRYING or WAITING step may be
        replaced; the position keeps the ``started_at`` of its first write.

        Returns:
            The step now stored at the position (*step*, or the finished one found
            there), and whether cancellation of the run has been requested.

        Raises:
            LeaseLost: the run's epoch is no longer *epoch*; nothing was written.
        """
        ...
