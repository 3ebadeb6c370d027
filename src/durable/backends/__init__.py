"""Storage backends: the `Backend` protocol, its two implementations, and
`open_backend`, which picks one by URL."""

from ._open import DEFAULT_URL, open_backend
from ._protocol import TIMERS, Backend
from .memory import MemoryBackend

__all__ = ["DEFAULT_URL", "TIMERS", "Backend", "MemoryBackend", "SQLBackend", "open_backend"]


def __getattr__(name: str) -> object:
    # SQLBackend imports SQLAlchemy; load it only when asked for.
    if name == "SQLBackend":
        from .sql import SQLBackend

        return SQLBackend
    raise AttributeError(name)
