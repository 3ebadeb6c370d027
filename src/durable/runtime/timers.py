"""A worker's timers: when the earliest sleeping run is due, and queueing those that are."""

from __future__ import annotations

import time

from durable.backends import TIMERS, Backend


class Timers:
    """Knows when the earliest sleeping run is due, and queues sleeping runs that are.

    One indexed read tells the time; it is read again when some run starts sleeping
    (the ``timers`` topic; at most every `FRESH` seconds, as thousands of runs may
    fall asleep per second) and at least every *poll* seconds, so a worker that does
    not hear other processes (SQLite) still learns of new timers before they are due
    (a wait shorter than `Engine.max_inline_wait` never suspends).
    """

    #: The most runs one statement wakes.
    BATCH = 500
    #: The least time between two reads prompted by new timers.
    FRESH = 0.1

    def __init__(self, backend: Backend, poll: float) -> None:
        self._backend = backend
        self._poll = poll
        self._watch = backend.watch([TIMERS])
        self._due = 0.0  # monotonic time the earliest sleeping run is due
        self._read = float("-inf")  # monotonic time of the last read
        self._stale = True  # a run started sleeping since the last read

    def wake(self) -> float:
        """Queue the runs that are due; return the seconds until the next may be."""
        now = time.monotonic()
        self._stale = self._watch.wait(0) or self._stale
        if now >= self._read + self._poll or (self._stale and now >= self._read + self.FRESH):
            due_in = self._backend.next_wake()
            self._read, self._stale = now, False
            self._due = now + due_in if due_in is not None else float("inf")
        if now < self._due:
            left = self._due - now
            return min(left, self.FRESH) if self._stale else left
        while self._backend.wake_due(limit=self.BATCH) == self.BATCH:
            pass
        self._read = float("-inf")  # read the next one at once
        return 0.0
