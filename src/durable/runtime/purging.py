"""Deleting finished runs, so that the tables do not grow without bound.

`Engine.purge`, `durable.purge` and ``durable purge`` delete, batch after batch,
the runs that finished before a cutoff together with their history and events; which
runs may go, and the atomicity of each batch, are `Backend.purge`'s contract. The
cutoff is read once, from the backend's clock, so a purge always ends: runs finishing
while it works are newer than the cutoff.
"""

from __future__ import annotations

import datetime as dt
import math

from durable.backends import Backend

#: How old a finished run must be to go: a timedelta, or seconds.
Age = dt.timedelta | float


def seconds(older_than: object) -> float:
    """*older_than* (an `Age`) in seconds, checked: a finite number, not negative.
    Callers without type checking may pass anything, hence `object`.

    Raises:
        TypeError, ValueError: it is not a timedelta or a number of seconds, or it is
            negative or not finite.
    """
    if isinstance(older_than, dt.timedelta):
        value = older_than.total_seconds()
    elif isinstance(older_than, int | float) and not isinstance(older_than, bool):
        value = float(older_than)
    else:
        raise TypeError(
            f"older_than must be a timedelta or a number of seconds, got {older_than!r}."
        )
    if not math.isfinite(value) or value < 0:
        raise ValueError(
            f"older_than must be a finite, non-negative age, got {older_than!r}: runs that "
            "finished longer ago than this are deleted."
        )
    return value


def purge_cutoff(backend: Backend, older_than: Age) -> float:
    """The moment, on *backend*'s clock, before which a run must have finished to go."""
    return backend.now() - seconds(older_than)


def check_batch(batch: object) -> None:
    """Raise ValueError unless *batch* is a positive number of runs."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive number of runs, got {batch!r}.")


def purge_before(backend: Backend, finished_before: float, *, batch: int) -> int:
    """Delete every run `Backend.purge` allows that finished before *finished_before*,
    *batch* runs per transaction; return how many were deleted."""
    check_batch(batch)
    total = 0
    while True:
        deleted = backend.purge(finished_before=finished_before, limit=batch)
        total += deleted
        if deleted == 0:
            return total


def count_before(backend: Backend, finished_before: float) -> int:
    """How many runs `purge_before` would delete now (nothing is deleted)."""
    return backend.purge(finished_before=finished_before, limit=2**62, dry_run=True)
