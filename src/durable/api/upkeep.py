"""Upkeep of the default database: resume runs whose owner died, delete old ones."""

from __future__ import annotations

from durable.runtime.defaults import get_engine
from durable.runtime.purging import Age


def recover(*, wait: bool = True) -> list[str]:
    """Resume every run on the default database whose owner is gone (see `Engine.recover`)."""
    return get_engine().recover(wait=wait)


def purge(older_than: Age, *, batch: int = 1000) -> int:
    """Delete runs on the default database that finished more than *older_than* ago
    (a timedelta, or seconds), with their history and events; see `Engine.purge`.

    Each batch of *batch* runs is one transaction; batches follow until no run is left
    to delete. Runs that something may still need stay: unfinished runs, the runs below
    a live run, and the runs above it.

    Returns:
        How many runs were deleted.

    Raises:
        TypeError, ValueError: *older_than* is not a non-negative age, or *batch* is
            not a positive number.
    """
    return get_engine().purge(older_than, batch=batch)
