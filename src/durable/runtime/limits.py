"""When a worker looks again at a queue whose limits held runs back.

The limits themselves are the backend's (the claim enforces them, see
docs/concepts/flow-control.md). A run they hold back stays QUEUED, and nothing is
notified when a slot frees on another worker or the rate's window moves on, so a
worker whose claim of a limited queue came back short looks again: when the rate
allows the next start, or soon if runs are waiting for a slot.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from durable.backends import Backend
from durable.core.queues import Queue

#: Seconds between looks at a queue whose runs wait for a slot.
SOON = 0.05


class HeldBack:
    """The limits of a worker's queues (re-read every sweep), and when to look again."""

    def __init__(self, backend: Backend, queues: Sequence[str]) -> None:
        self._backend = backend
        self._queues = tuple(queues)
        self._limits: dict[str, Queue] = {}

    def refresh(self) -> None:
        """Re-read the limits the worker's queues declare."""
        found = {name: self._backend.get_queue(name) for name in self._queues}
        self._limits = {name: queue for name, queue in found.items() if queue is not None}

    def retry_in(self, queue: str, wanted: int, got: int) -> float:
        """Seconds until a claim of *queue* that took *got* of *wanted* runs is worth
        trying again for the rest (inf: when something is notified, or the next poll)."""
        limits = self._limits.get(queue)
        if limits is None or got >= wanted:
            return math.inf
        if limits.rate is not None:
            wait = self._backend.next_start(queue)
            if wait is not None and wait > 0:
                return wait
        return SOON if self._backend.queued_workflows([queue]) else math.inf
