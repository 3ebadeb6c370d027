"""Schedules made at run time: `schedule`, stored and editable (docs/howto/schedules.md).

Schedules declared with the code are ``@workflow(schedule=...)`` (see decorators.py).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from durable.core.functions import Call, Durable
from durable.core.schedules import Schedule
from durable.runtime import schedules
from durable.runtime.defaults import get_engine


def schedule(
    target: Durable[..., Any] | Call[Any],
    /,
    *args: Any,
    id: str,
    cron: str | None = None,
    every: dt.timedelta | float | None = None,
    timezone: str = "UTC",
    catch_up: str = "latest",
    max_catch_up: int = 100,
    overlap: str = "skip",
    queue: str = "default",
    priority: int = 0,
    jitter: dt.timedelta | float | None = None,
    **kwargs: Any,
) -> Schedule:
    """Run *target* on a cron expression or at an interval, from now on, stored under
    *id* (creating it, or updating the schedule with that id).

    Each tick starts one run with these arguments (and ``at=``, the tick's scheduled
    time, if the workflow takes a parameter named ``at``), however many workers run.
    Pass the workflow's arguments positionally or by keyword, or as ``fn.bind(...)``
    when a keyword is also an option's name.

    Args:
        id: the schedule's id: its runs are ``<id>@<tick time>``.
        cron: a cron expression (five fields: ``"*/15 * * * *"``), read in *timezone*.
        every: or an interval (a timedelta or seconds), counted from the schedule's
            creation.
        catch_up: after downtime, ``"latest"`` (one run for the latest missed tick),
            ``"all"`` (every missed tick, at most *max_catch_up*) or ``"skip"``.
        overlap: when the previous tick's run is still unfinished: ``"skip"`` this
            tick, ``"allow"`` both, or ``"cancel_previous"``.
        queue, priority: the runs' queue and priority.
        jitter: start each tick's run up to this long after the tick (a timedelta or
            seconds), spread the same way on every worker, so that many schedules due
            together do not all start at once. The run exists, waiting, from the tick;
            its ``at=`` is still the tick's time.

    Raises:
        ValueError: a bad cron expression (the field named), zone, interval or option.
        TypeError: the arguments do not fit the workflow.
        ScheduleConflict: *id* belongs to a schedule of another workflow.
    """
    if isinstance(target, Call):
        if args or kwargs:
            raise TypeError("Give the arguments in fn.bind(...) or to schedule(), not both.")
        args, kwargs, target = target.args, dict(target.kwargs), target.target
    spec = schedules.Spec.make(
        cron=cron,
        every=every,
        timezone=timezone,
        catch_up=catch_up,
        max_catch_up=max_catch_up,
        overlap=overlap,
        queue=queue,
        priority=priority,
        jitter=jitter,
    )
    return schedules.store(get_engine(), target, spec, schedule_id=id, args=args, kwargs=kwargs)
