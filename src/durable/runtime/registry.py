"""Names to functions: how a stored run finds the code that continues it."""

from __future__ import annotations

import threading
from typing import Any

from durable.core.functions import Durable
from durable.errors import DuplicateNameError

_lock = threading.Lock()
_by_name: dict[str, Durable[Any, Any]] = {}


def _origin(durable: Durable[Any, Any]) -> tuple[str, int] | None:
    code = getattr(durable.fn, "__code__", None)
    return None if code is None else (code.co_filename, code.co_firstlineno)


def register(durable: Durable[Any, Any]) -> None:
    """Register *durable* under its name.

    The same definition seen again (a module reloaded or imported twice, a factory
    called again) replaces the old one; a different function under a taken name is
    an error, because stored runs could otherwise resume in the wrong code.

    Raises:
        DuplicateNameError: another function already has this name.
    """
    with _lock:
        existing = _by_name.get(durable.name)
        if existing is not None and _origin(existing) != _origin(durable):
            where = _origin(existing)
            place = f" (defined at {where[0]}:{where[1]})" if where else ""
            raise DuplicateNameError(
                f"The name {durable.name!r} is already taken by another {existing.kind.value}"
                f"{place}. Give one of them an explicit name=... ."
            )
        _by_name[durable.name] = durable


def find(name: str) -> Durable[Any, Any] | None:
    """Return the workflow or task registered as *name*, or None."""
    return _by_name.get(name)


def names() -> list[str]:
    """Every registered name: what a worker in this process can run."""
    with _lock:
        return sorted(_by_name)
