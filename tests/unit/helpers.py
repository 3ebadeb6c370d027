"""Small tools the unit tests share."""

from __future__ import annotations

import threading

import durable
from durable.core.records import Run, Step


class Crash(BaseException):
    """Raised from a task to simulate the process dying there: the engine lets go of the
    run without recording anything, exactly as if the process had been killed."""


class FakeClock:
    """A clock that moves only when slept on; records every sleep."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.time = start
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def now(self) -> float:
        """Return the fake time."""
        return self.time

    def sleep(self, seconds: float) -> None:
        """Advance instantly and remember the request."""
        with self._lock:
            self.sleeps.append(seconds)
            self.time += max(seconds, 0.0)


def history(run_id: str) -> list[Step]:
    """The recorded steps of a run on the default engine."""
    return list(durable.get_engine().backend.load_history(run_id))


def run(run_id: str) -> Run:
    """The stored run on the default engine."""
    stored = durable.get_engine().backend.get_run(run_id)
    assert stored is not None, f"run {run_id!r} must exist"
    return stored
