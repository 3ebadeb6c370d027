"""The workflows benchmarks/waits.py parks, wakes and signals."""

import datetime as dt

import durable
from durable import wait, workflow


@workflow
def sleeper(deadline: float) -> float:
    """Sleep until *deadline*; return when the workflow resumed."""
    wait(until=dt.datetime.fromtimestamp(deadline, tz=dt.UTC))
    return durable.now().timestamp()


@workflow
def listener() -> float:
    """Wait for a "go" event; return when the workflow resumed."""
    wait("go", timeout=dt.timedelta(days=1))
    return durable.now().timestamp()


@workflow
def month() -> int:
    """Sleep a day at a time, thirty times."""
    days = 0
    for _ in range(30):
        wait(dt.timedelta(days=1))
        days += 1
    return days
