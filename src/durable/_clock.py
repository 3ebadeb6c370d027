"""Time as the engine sees it: a small seam so tests can replace the system clock."""

from __future__ import annotations

import time
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
