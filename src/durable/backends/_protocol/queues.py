"""The storage seam's queues role: the limits a queue declares (flow control).

The limits themselves are enforced where runs are claimed (`RunStore.claim_next` and
`RunStore.claim_run` respect them), so they hold across every worker on every machine;
this role stores them and reports how queues are used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from durable.core.queues import Queue


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueUsage:
    """How a queue is used now (`QueueStore.queue_usage`)."""

    name: str
    queued: int
    running: int
    #: when the oldest QUEUED run was created (None: nothing queued).
    oldest_queued_at: float | None
    #: RUNNING runs per key, the busiest first (at most 20 keys).
    keys: dict[str, int] = field(default_factory=dict)


class QueueStore(Protocol):
    """Queue limits, stored."""

    def put_queue(self, queue: Queue) -> Queue:
        """Declare *queue*'s limits, replacing what it declared before (None: no limit).
        The log of its rate's recent starts is kept.

        Returns:
            The queue as now stored.
        """
        ...

    def get_queue(self, name: str) -> Queue | None:
        """The limits queue *name* declares, or None if it declares none."""
        ...

    def list_queues(self) -> Sequence[Queue]:
        """Every queue that declares limits, by name."""
        ...

    def next_start(self, name: str) -> float | None:
        """Seconds until queue *name*'s rate lets one more run start (0.0: now), or None
        if it declares no rate."""
        ...

    def queue_usage(self) -> Sequence[QueueUsage]:
        """Every queue that has queued or running runs, or declares limits, by name."""
        ...
