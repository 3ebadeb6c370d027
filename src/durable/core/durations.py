"""Durations as users give them: a `timedelta`, or a number of seconds."""

from __future__ import annotations

import datetime as dt
import math


def seconds(value: object, name: str) -> float | None:
    """*value* in seconds (None stays None), checked: a timedelta or a finite number.
    Callers without type checking may pass anything, hence `object`.

    Raises:
        TypeError, ValueError: it is neither, or not finite; *name* says which argument.
    """
    if value is None:
        return None
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number of seconds, got {value}.")
        return float(value)
    raise TypeError(f"{name} must be a timedelta or a number of seconds, got {value!r}.")
