"""The workflow benchmarks/schedules.py schedules (its ticks' runs do nothing)."""

import datetime as dt

from durable import workflow


@workflow
def tick(at: dt.datetime) -> None:
    return None
