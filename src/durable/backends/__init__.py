"""Storage backends: the `Backend` protocol, its roles, its two implementations, and
`open_backend`, which picks one by URL."""

from ._open import DEFAULT_URL, open_backend
from ._protocol import (
    TIMERS,
    AttributeStore,
    Backend,
    ControlStore,
    HistoryStore,
    InspectionStore,
    QueueStore,
    QueueUsage,
    RunStore,
    ScheduleStore,
    WaitStore,
    Watch,
)
from .memory import MemoryBackend

__all__ = [
    "DEFAULT_URL",
    "TIMERS",
    "AttributeStore",
    "Backend",
    "ControlStore",
    "HistoryStore",
    "InspectionStore",
    "MemoryBackend",
    "QueueStore",
    "QueueUsage",
    "RunStore",
    "SQLBackend",
    "ScheduleStore",
    "WaitStore",
    "Watch",
    "open_backend",
]


def __getattr__(name: str) -> object:
    # SQLBackend imports SQLAlchemy; load it only when asked for.
    if name == "SQLBackend":
        from .sql import SQLBackend

        return SQLBackend
    raise AttributeError(name)
