"""Durations as users give them: a `timedelta`, or a number of seconds; and the
horizon no deadline may pass.

A deadline is stored as epoch seconds and shown as a date. ``timedelta.max``, a
natural way to say "no deadline", is a wake time in year 2.7 million, which no view
can show as a date and no sleep can wait for; so durations and deadlines further
away than `HORIZON` are refused where they are given. (For no deadline, pass None.)
"""

from __future__ import annotations

import datetime as dt
import math

#: The furthest a deadline may lie: a hundred years (of 365.25 days).
HORIZON = dt.timedelta(days=36525)
_HORIZON_SECONDS = HORIZON.total_seconds()


def seconds(value: object, name: str) -> float | None:
    """*value* in seconds (None stays None), checked: a timedelta or a finite number,
    at most `HORIZON` either way. Callers without type checking may pass anything,
    hence `object`.

    Raises:
        TypeError, ValueError: it is neither, not finite, or beyond the horizon;
            *name* says which argument.
    """
    if value is None:
        return None
    if isinstance(value, dt.timedelta):
        total = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number of seconds, got {value}.")
        total = float(value)
    else:
        raise TypeError(f"{name} must be a timedelta or a number of seconds, got {value!r}.")
    if abs(total) > _HORIZON_SECONDS:
        raise ValueError(
            f"{name} must be at most 100 years ({_HORIZON_SECONDS:.0f} s, durable's horizon "
            f"for deadlines), not {value!r}. For no deadline at all, pass None."
        )
    return total


def within_horizon(moment: float, now: float, name: str) -> float:
    """*moment* (epoch seconds), checked to lie at most `HORIZON` after *now*.

    Raises:
        ValueError: it lies further away; *name* says which argument.
    """
    if not moment - now <= _HORIZON_SECONDS:  # NaN fails too
        raise ValueError(
            f"{name} must be at most 100 years from now (durable's horizon for "
            f"deadlines); it is {moment - now:.0f} s away."
        )
    return moment
