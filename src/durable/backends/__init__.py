"""Storage backends: the `Backend` protocol and its two implementations."""

from ._protocol import TIMERS, Backend
from .memory import MemoryBackend

__all__ = ["TIMERS", "Backend", "MemoryBackend", "SQLBackend"]


def __getattr__(name: str) -> object:
    # SQLBackend imports SQLAlchemy; load it only when asked for.
    if name == "SQLBackend":
        from .sql import SQLBackend

        return SQLBackend
    raise AttributeError(name)
