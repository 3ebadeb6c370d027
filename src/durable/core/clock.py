"""Time as the engine sees it: a small seam so tests can replace the system clock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol


class Clock(Protocol):
    """Where the engine reads the time and sleeps. Times are seconds since the epoch."""

    def now(self) -> float:
        """Return the current time."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for *seconds* of this clock's time."""
        ...


class SystemClock:
    """The real clock: `time.time` and `time.sleep`."""

    def now(self) -> float:
        """Return `time.time()`."""
        return time.time()

    def sleep(self, seconds: float) -> None:
        """Sleep for real."""
        if seconds > 0:
            time.sleep(seconds)


SYSTEM_CLOCK = SystemClock()


class DatabaseClock(SystemClock):
    """The database server's clock, for engines on PostgreSQL.

    Leases and wake-ups are compared with the server's clock, so the deadlines an
    engine records (sleeps, retry back-offs, event timeouts) must come from it too: a
    worker whose host clock is an hour off would otherwise wake sleepers an hour late,
    or at once.

    It reads the server's time, then counts on from that reading with this host's
    monotonic clock, which a step of the wall clock does not move, and reads again
    every *every* seconds. Until a reading succeeds it starts from the host clock;
    while the server cannot be reached it goes on from the last reading.

    Args:
        read: returns the server's time in seconds since the epoch; may raise.
        every: seconds between readings.
    """

    def __init__(self, read: Callable[[], float], every: float = 60.0) -> None:
        self._read = read
        self._every = every
        self._offset = time.time() - time.monotonic()  # server time minus monotonic time
        self._next = float("-inf")  # monotonic time of the next reading
        self._reading = threading.Lock()

    def now(self) -> float:
        """The server's time now, without a round trip (but for one a minute)."""
        if time.monotonic() >= self._next and self._reading.acquire(blocking=False):
            try:  # one thread reads; the others go on with the last reading
                self._sync()
            finally:
                self._reading.release()
        return time.monotonic() + self._offset

    def _sync(self) -> None:
        before = time.monotonic()
        try:
            server = self._read()
        except Exception:
            self._next = before + min(self._every, 5.0)  # unreachable: try again soon
            return
        after = time.monotonic()
        self._offset = server - (before + after) / 2
        self._next = after + self._every
