"""Helpers for testing code that uses durable, and backends written for it.

* `MemoryBackend`: the in-memory backend (``durable.configure("memory://")`` uses it).
* `check_backend`: the Backend conformance suite; a third-party backend passes it.
"""

from durable.backends.memory import MemoryBackend
from durable.testing._suite import CHECKS, check_backend

__all__ = ["CHECKS", "MemoryBackend", "check_backend"]
