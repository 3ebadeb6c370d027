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
from durable.core.records import NewRun, Run


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

    def debounce_run(self, new: NewRun, *, window: float, longest: float) -> tuple[Run, bool]:
        """Coalesce *new* into the pending debounced run of its workflow and key.

        The pending run is the one a previous call created for ``(new.workflow,
        new.key)`` that has not started: still WAITING on its timer, never started. If
        there is one, it takes *new*'s input, call hash, priority and key limit, and its
        start moves to *window* seconds from now, but never past *longest* seconds after
        its creation; its id is kept. Otherwise *new* is created under its id, WAITING
        until *window* seconds from now (``started_at`` None, no owner), and `TIMERS` is
        notified. Concurrent calls coalesce into one run.

        Returns:
            The run as now stored, and whether this call created it.
        """
        ...
